"""One numba kernel per traced graph and loop structure, generated as source and cached on disk.

A kernel's arguments are ``out``, then one per leaf that NumPy types strongly (an array, whose
broadcast axes were removed, or a NumPy scalar), then one per use of a Python scalar, already
converted in Python to the dtype NumPy's loop casts it to (so NumPy's own conversion and its
``OverflowError`` apply). Every operation casts its operands to its loop dtypes and its result to
its output dtype, so numba's promotion never decides a dtype.

The source is executed with this module's file name and ``__name__``: numba's ``cache=True``
keys the on-disk cache by file and function name, and rebuilds a kernel's globals by importing
this module. Each kernel's name carries a hash of its source, since numba's index only compares
bytecode (not constants or names). No ``fastmath``; ``error_model="numpy"``, so a division by
zero gives inf/NaN as in NumPy instead of raising.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numba
import numpy as np

from .. import jit
from ..kernels import engine_numba, vecmath, vocabulary
from .trace import UFUNCS, FuseError, Node, topological

__all__ = ["Plan", "kernel", "plan"]


@numba.njit(inline="always")
def _select(c, a, b):
    return a if c else b


@numba.njit(inline="always")
def _fmaximum(a, b):
    # NumPy's maximum: NaN propagates from either side; on ties (-0.0, 0.0) the second wins
    return a if (a > b or a != a) else b


@numba.njit(inline="always")
def _fminimum(a, b):
    return a if (a < b or a != a) else b


@numba.njit(inline="always")
def _clip(x, lo, hi):
    # NumPy's clip with array bounds: minimum(maximum(x, lo), hi) with NaN propagation
    m = x if (x != x or x > lo) else lo
    return m if (m != m or m < hi) else hi


@numba.njit(inline="always")
def _clip_scalar(x, lo, hi):
    # NumPy's clip with scalar bounds keeps x on ties; a NaN bound gives NaN
    if lo != lo:
        return lo
    if hi != hi:
        return hi
    m = lo if x < lo else x
    return hi if m > hi else m


# A leaf's reduction may reorder its additions (``reassoc``), and only it: LLVM then keeps a
# vector of partial sums (16 to 32 of them), as NumPy's pairwise sum keeps eight, where the
# eight scalars written out were left scalar (vaddsd).
@numba.njit(fastmath={"reassoc"}, error_model="numpy")
def _leaf_sum(S):
    a = S[0]
    for i in range(1, S.shape[0]):
        a += S[i]
    return a


@numba.njit(fastmath={"reassoc"}, error_model="numpy")
def _leaf_prod(S):
    a = S[0]
    for i in range(1, S.shape[0]):
        a *= S[i]
    return a


@numba.njit
def _leaf_max(S):
    # integers and the 0/1 of any(): LLVM vectorises an integer maximum as it is
    a = S[0]
    for i in range(1, S.shape[0]):
        a = max(a, S[i])
    return a


@numba.njit
def _leaf_min(S):
    a = S[0]
    for i in range(1, S.shape[0]):
        a = min(a, S[i])
    return a


def _float_leaves(bits: int):
    """A float leaf's maximum and minimum, as the ordered integer key of its bits: LLVM does
    not vectorise a floating-point maximum from numba (vmaxsd, even with fastmath), an
    integer one it does. The key of a float's bits
    ``b`` is ``b ^ ((b >> (bits - 1)) & mask)``, in the order of the floats (-0.0 below 0.0;
    :func:`float_of_key` turns it back). A leaf with a NaN gives the key of a NaN above
    (maximum) or below (minimum) every other key, so that the caller's reduction of the keys
    propagates it, as NumPy's maximum does."""
    mask = (1 << (bits - 1)) - 1
    nan_high = 0x7FF8 << 48 if bits == 64 else 0x7FC0 << 16
    nan_low = -nan_high - 1  # the key of that NaN with its sign bit set

    @numba.njit
    def has_nan(S):
        count = 0  # counted, not searched: this loop is vectorised
        for i in range(S.shape[0]):
            count += S[i] != S[i]
        return count > 0

    @numba.njit
    def leaf_max(S, K):
        if has_nan(S):
            return K.dtype.type(nan_high)
        a = K[0] ^ ((K[0] >> (bits - 1)) & mask)
        for i in range(1, K.shape[0]):
            a = max(a, K[i] ^ ((K[i] >> (bits - 1)) & mask))
        return a

    @numba.njit
    def leaf_min(S, K):
        if has_nan(S):
            return K.dtype.type(nan_low)
        a = K[0] ^ ((K[0] >> (bits - 1)) & mask)
        for i in range(1, K.shape[0]):
            a = min(a, K[i] ^ ((K[i] >> (bits - 1)) & mask))
        return a

    return leaf_max, leaf_min


_leaf_max64, _leaf_min64 = _float_leaves(64)
_leaf_max32, _leaf_min32 = _float_leaves(32)


def key_dtype(p: Plan) -> np.dtype | None:
    """The integer dtype a float maximum's or minimum's leaves give their keys in, or None."""
    if p.reduce in ("max", "min") and p.reduced.kind == "f":
        return np.dtype(f"int{p.reduced.itemsize * 8}")
    return None


def float_of_key(key, dtype: np.dtype):
    """The float whose ordered key (see :func:`_float_leaves`) is ``key``."""
    bits = dtype.itemsize * 8
    k = np.array(key, f"int{bits}")
    return (k ^ ((k >> (bits - 1)) & ((1 << (bits - 1)) - 1))).view(dtype)[()]


_NAMESPACE = {
    # exp, expm1, log1p, tanh, sinh, cosh: vectorisable, not libm calls
    **vocabulary.numba_functions(),
    # the same, for ufuncs the kernels' expressions do not use
    "arctan2": vecmath.arctan2,
    "arctan": vecmath.arctan,
    "arcsin": vecmath.arcsin,
    "arccos": vecmath.arccos,
    "log": vecmath.log,
    "vsin": vecmath.sin,  # exact reduction only below a bound: see GUARDED
    "vcos": vecmath.cos,
    "vtan": vecmath.tan,
    "__name__": __name__,
    "np": np,
    "prange": numba.prange,
    "select": _select,
    "fmaximum": _fmaximum,
    "fminimum": _fminimum,
    "fclip": _clip,
    "fclip_scalar": _clip_scalar,
    "leaf_sum": _leaf_sum,
    "leaf_prod": _leaf_prod,
    "leaf_max": _leaf_max,
    "leaf_min": _leaf_min,
    "leaf_max64": _leaf_max64,
    "leaf_min64": _leaf_min64,
    "leaf_max32": _leaf_max32,
    "leaf_min32": _leaf_min32,
    "stream8": engine_numba.stream8,
}


#: ufuncs computed by vecmath's vectorisable functions only where their argument is in range:
#: the kernel counts the elements with an argument at or beyond the bound (``g_``) and returns
#: the count; a call that saw any runs the plan's ``exact`` body (NumPy's libm functions) again.
#: ufunc -> (vectorised function's name, bound per loop dtype)
GUARDED = {
    "sin": ("vsin", {"float32": vecmath.REDUCE_LIMIT_32, "float64": vecmath.REDUCE_LIMIT_64}),
    "cos": ("vcos", {"float32": vecmath.REDUCE_LIMIT_32, "float64": vecmath.REDUCE_LIMIT_64}),
    "tan": ("vtan", {"float32": vecmath.REDUCE_LIMIT_32, "float64": vecmath.REDUCE_LIMIT_64}),
}


_SERIALS = itertools.count()  # Plan.serial


@dataclass
class Plan:
    """How to call the kernel of one graph.

    Attributes
    ----------
    leaves : list of Node
        Strongly typed leaves, in argument order (inputs and NumPy scalars).
    weak : list of tuple
        ``(leaf, dtype)`` per use of a Python scalar: the argument is ``dtype.type(value)``.
    body : list of str
        Lines computing the result ``r`` from ``L{k}`` (leaves) and ``W{k}`` (weak uses).
    dtype : numpy.dtype
        The result's dtype.
    transcendental : int
        How many transcendental calls per element.
    exact : list of str or None
        The body with NumPy's (libm's) functions for the :data:`GUARDED` ufuncs and no range
        counts, when ``body`` calls any of them; else None.
    compiled : dict
        ``(masks, mode, exact, rows) -> kernel``, filled by :func:`kernel`: generating the
        source to look a kernel up cost more than a mid-size kernel itself.
    result : Node or None
        The traced graph's output (:mod:`.blocks` evaluates it with NumPy's ufuncs).
    operations : list of tuple
        ``(ufunc name, dtype name of its first operand's loop)`` of each operation.
    on_blocks : bool or None
        Whether NumPy's ufuncs on blocks are faster for this plan (:mod:`.costs`; None until
        a call asks).
    reduce : str or None
        The reduction of the body's values over all elements (a ``trace.REDUCTIONS`` name),
        or None for an elementwise plan.
    reduced : numpy.dtype or None
        The reduction's dtype (NumPy's: ``np.sum`` of int32 is int64).
    axis : int or None
        The axis reduced (None: all elements).
    keepdims : bool
        Whether the reduced axis stays, of length 1.
    stages : dict
        Reductions this plan reads as scalar leaves (``op == "reduce"``), by leaf name: the
        plans that compute them, run before this one.
    elementwise : Plan or None
        A reduction's plan without the reduction (its values, for operands the reduction
        kernel does not take).
    serial : int
        A number no other plan of the process has: the launcher's name for its calls (an
        ``id()`` is reused once a plan is freed, and would inherit the other's timings).
    """

    leaves: list
    weak: list
    body: list
    dtype: np.dtype
    transcendental: int
    exact: list | None = None
    compiled: dict = field(default_factory=dict, repr=False, compare=False)
    result: Node | None = field(default=None, repr=False, compare=False)
    operations: list = field(default_factory=list)
    on_blocks: bool | None = field(default=None, repr=False, compare=False)
    reduce: str | None = None
    reduced: np.dtype | None = None
    axis: int | None = None
    keepdims: bool = False
    stages: dict = field(default_factory=dict, repr=False, compare=False)
    elementwise: Plan | None = field(default=None, repr=False, compare=False)
    serial: int = field(default_factory=lambda: next(_SERIALS), repr=False, compare=False)


def _type(dtype) -> str:
    return "np.bool_" if np.dtype(dtype) == bool else f"np.{np.dtype(dtype).name}"


def _cast(expr: str, source, target) -> str:
    if source == target:
        return expr
    if np.dtype(target) == bool:
        return f"(({expr}) != 0)"
    return f"{_type(target)}({expr})"


def plan(result: Node) -> Plan:
    """The kernel plan computing ``result`` (a traced graph's output); a reduction's plan is
    the plan of its operand with :attr:`Plan.reduce` set."""
    from .trace import TRANSCENDENTAL

    if result.op == "reduce":
        p = plan(result.args[0])
        p.elementwise = replace(p, compiled={}, serial=next(_SERIALS))
        (p.reduce, p.axis, p.keepdims), p.reduced = result.value, np.dtype(result.dtype)
        p.on_blocks = False
        return p
    order = topological(result, stages=True)
    names: dict[int, str] = {}
    leaves, weak, body, exact, out_of_range = [], [], [], [], []
    count = 0
    for n in order:
        if n.op in ("input", "scalar", "reduce"):
            if not n.weak:
                names[id(n)] = f"L{len(leaves)}"
                leaves.append(n)
            continue
        operands = []
        for a, loop in zip(n.args, n.loop, strict=True):
            if a.weak and a.op in ("input", "scalar"):
                operands.append(f"W{len(weak)}")
                weak.append((a, np.dtype(loop)))
            else:
                operands.append(_cast(names[id(a)], np.dtype(a.dtype) if not a.weak
                                      else _weak_dtype(a), np.dtype(loop)))
        out = np.dtype(n.dtype) if not n.weak else _weak_dtype(n)
        expr = _expr(n, operands)
        name = f"t{len(names) - len(leaves)}"
        line = f"{name} = {_cast(expr, None, out)}"
        exact.append(line)
        guarded = GUARDED.get(n.op)
        bound = guarded[1].get(np.dtype(n.loop[0]).name) if guarded else None
        if bound is None:
            body.append(line)
        else:  # the vectorised function, and whether its argument is out of its range
            body.append(f"{name} = {_cast(f'{guarded[0]}({operands[0]})', None, out)}")
            out_of_range.append(f"(abs({operands[0]}) >= {bound!r})")
        names[id(n)] = name
        count += n.op in TRANSCENDENTAL
    if result.op in ("input", "scalar", "reduce"):
        body.append(f"{'t0'} = {names[id(result)]}")
        exact.append(body[-1])
        names[id(result)] = "t0"
    if out_of_range:  # one update of the count per element (numba's parfor reductions)
        body.append(f"g_ += {' | '.join(out_of_range)}")
    body.append(f"r = {names[id(result)]}")
    exact.append(body[-1])
    operations = [(n.op, np.dtype(n.loop[0]).name) for n in order
                  if n.op not in ("input", "scalar", "reduce") and not n.weak]
    stages = {n.name: plan(n) for n in leaves if n.op == "reduce"}
    return Plan(leaves, weak, body, np.dtype(result.dtype), count,
                exact if out_of_range else None, result=result, operations=operations,
                on_blocks=False if stages else None, stages=stages)


def _weak_dtype(node: Node) -> np.dtype:
    return np.dtype({float: np.float64, int: np.int64, bool: np.bool_}[node.dtype])


def _expr(node: Node, operands: list[str]) -> str:
    loop = [np.dtype(d) for d in node.loop]
    if node.op == "where":
        return f"select({operands[0]}, {operands[1]}, {operands[2]})"
    if node.op in ("clip", "clip_scalar"):
        return f"f{node.op}({', '.join(operands)})"
    integer = all(d.kind in "biu" for d in loop)
    if node.op == "power" and integer:
        raise FuseError("an integer power other than x**2 cannot be fused "
                        "(NumPy raises for negative exponents at run time)")
    if node.op == "invert" and loop[0] == np.dtype(bool):
        return f"not {operands[0]}"
    if node.op in ("maximum", "minimum") and integer:
        return f"{'max' if node.op == 'maximum' else 'min'}({operands[0]}, {operands[1]})"
    return UFUNCS[node.op].format(*operands, T=_type(loop[0]))


# ------------------------------------------------------------------------------- kernels

_TEMPLATE = """
def {fname}(out, {args}):
    g_ = 0
    for {outer} in {loop}({count}):
{unravel}{inner}
    return g_
"""


def _index(mask: tuple[bool, ...], d: int) -> str:
    idx = [f"i{k}" for k in range(d - 1)] + ["j"]
    return ", ".join(i for i, m in zip(idx, mask, strict=True) if m)


def source(p: Plan, masks: tuple, mode: str, exact: bool = False,
           rows: bool = False, reduce: bool = False) -> tuple[str, str]:
    """(function name, source) of the kernel for ``p`` with operand axis ``masks``.

    ``masks[k]`` says which of the ``d`` loop axes leaf ``k`` has (all False: a scalar).
    The kernel returns how many arguments of :data:`GUARDED` functions were out of their
    range (0 for the ``exact`` kernel, which computes them with NumPy's functions).
    With ``rows``, ``out`` and each array leaf are flat spans, and the kernel takes after the
    scalars the loop's dimensions ``D``, ``out``'s outer strides ``SO`` and, per array leaf,
    the strides ``S{k}`` of its outer axes (in elements; each innermost axis is contiguous).
    With ``reduce``, the kernel reduces ``p``'s values of flat operands instead: see
    :func:`_reduce_source`.
    """
    body_lines = p.exact if exact and p.exact is not None else p.body
    d = len(masks[0]) if masks else 1
    d = max(d, 1)
    args = [f"L{k}" for k in range(len(p.leaves))] + [f"W{k}" for k in range(len(p.weak))]
    pad = " " * 4
    if rows or reduce:
        serial = (source(p, masks, "serial", exact, rows, reduce)[0] if mode != "serial"
                  else "")
        text = (_reduce_source(p, body_lines, masks, mode, args, serial) if reduce
                else _rows_source(body_lines, masks, mode, args, d, serial))
    elif mode == "stream":
        lanes = []
        for lane in range(8):
            lines = [f"v{k} = L{k}[i_]" for k, m in enumerate(masks) if any(m)]
            lines += _bind(body_lines, masks)
            lanes += [f"i_ = s + np.uint64({lane})", *(_rename(x, lane) for x in lines),
                      f"r{lane} = r_{lane}"]
        inner = "\n".join(pad * 2 + line for line in [
            "s = np.uint64(8) * np.uint64(q)", *lanes,
            "stream8(out, s, r0, r1, r2, r3, r4, r5, r6, r7)"])
        text = _TEMPLATE.format(fname="{fname}", args=", ".join(args),
                                outer="q", loop="prange", count="out.shape[0] // 8",
                                unravel="", inner=inner)
    else:
        loop = "range" if mode == "serial" else "prange"
        loads = [f"v{k} = L{k}[{_index(m, d)}]" for k, m in enumerate(masks) if any(m)]
        body = [*loads, *_bind(body_lines, masks), f"out[{_index((True,) * d, d)}] = r"]
        if d == 1:
            inner = "\n".join(pad * 2 + line for line in ["j = p", *body])
            unravel = ""
            count = "out.shape[0]"
        else:
            count = " * ".join(f"out.shape[{k}]" for k in range(d - 1))
            # a new name per step: numba's parfor pass rejects a name copied from the loop
            # index and then changed in place ("Overwrite of parallel loop index")
            steps, q = [], "p"
            for k in range(d - 2, 0, -1):
                steps.append(pad * 2 + f"i{k} = {q} % out.shape[{k}]")
                steps.append(pad * 2 + f"q{k}_ = {q} // out.shape[{k}]")
                q = f"q{k}_"
            steps.append(pad * 2 + f"i0 = {q}")
            unravel = "\n".join(steps) + "\n"
            inner = pad * 2 + f"for j in range(out.shape[{d - 1}]):\n" + "\n".join(
                pad * 3 + line for line in body)
        text = _TEMPLATE.format(fname="{fname}", args=", ".join(args),
                                outer="p", loop=loop, count=count, unravel=unravel,
                                inner=inner)
    # the functions a kernel inlines are part of its name (see engine_numba.DEPENDENCIES)
    digest = hashlib.sha1((text + engine_numba.DEPENDENCIES).encode()).hexdigest()[:16]
    fname = f"_fused_{mode}_{digest}"
    return fname, text.replace("{fname}", fname)


#: elements per chunk of rows that a parallel row kernel hands to one call of the serial one
ROWS_CHUNK = 16384


def _rows_source(body_lines: list[str], masks: tuple, mode: str, args: list[str], d: int,
                 serial: str = "") -> str:
    """The row kernel (see :func:`source`). Serial: a loop over the outer axes' rows ``P0`` to
    ``P1``, each array's row a slice made once per row, and an inner loop over the slices,
    which LLVM vectorises as it does a contiguous array's. Parallel: chunks of rows, each a
    call of the serial kernel (``serial``, named in a comment so that its name is in this
    kernel's) that LLVM may not inline: inlined into numba's parallel loop, the inner loop was
    not vectorised."""
    pad = " " * 4
    strided = [k for k, m in enumerate(masks) if any(m[:-1])]
    params = [*args, "D", "SO", *(f"S{k}" for k in strided)]
    count = " * ".join(f"D[{a}]" for a in range(d - 1))
    if mode != "serial":
        return "\n".join([
            f"# rows of {serial}",
            f"def {{fname}}(out, {', '.join(params)}):",
            pad + f"rows = {count}",
            pad + f"step = max(1, {ROWS_CHUNK} // max(D[{d - 1}], 1))",
            pad + "g_ = 0",
            pad + "for c in prange((rows + step - 1) // step):",
            pad * 2 + f"g_ += serial(out, {', '.join(params)}, c * step, "
                      "min(c * step + step, rows))",
            pad + "return g_", ""])

    def start(strides: str, present: tuple) -> str:
        axes = [a for a in range(d - 1) if present[a]]
        return " + ".join(f"i{a} * {strides}[{pos}]" for pos, a in enumerate(axes)) or "0"

    steps = ["q_ = p"]
    for a in range(d - 2, 0, -1):
        steps += [f"i{a} = q_ % D[{a}]", f"q_ //= D[{a}]"]
    steps.append("i0 = q_")
    # each row as a slice: indexed by the inner loop's counter alone, which LLVM knows is not
    # negative; indexed by start + j, numba's wraparound of negative indices made the loop
    # gathers and scatters
    steps.append(f"o_ = {start('SO', (True,) * d)}")
    steps.append(f"O_ = out[o_:o_ + D[{d - 1}]]")
    loads = []
    for k, m in enumerate(masks):
        if k in strided and m[-1]:
            steps.append(f"b_ = {start(f'S{k}', m)}")
            steps.append(f"R{k} = L{k}[b_:b_ + D[{d - 1}]]")
            loads.append(f"v{k} = R{k}[j]")
        elif k in strided:  # no inner axis: one value per row
            steps.append(f"v{k} = L{k}[{start(f'S{k}', m)}]")
        elif any(m):
            loads.append(f"v{k} = L{k}[j]")
    body = [*loads, *_bind(body_lines, masks), "O_[j] = r"]
    lines = [f"def {{fname}}(out, {', '.join(params)}, P0, P1):",
             pad + "g_ = 0",
             pad + "for p in range(P0, P1):",
             *(pad * 2 + x for x in steps),
             pad * 2 + f"for j in range(D[{d - 1}]):",
             *(pad * 3 + x for x in body),
             pad + "return g_"]
    return "\n" + "\n".join(lines) + "\n"


#: a reduction computes its values into a buffer of this many elements at a time, then reduces
#: the buffer in leaves of ``REDUCE_LEAF`` elements as NumPy's pairwise sum does its leaves
REDUCE_CHUNK = 2048
REDUCE_LEAF = 128
#: chunks of one row a task of a reduction takes at most (65,536 elements)
REDUCE_TASK = 32
#: the function that reduces one leaf of the buffer, per trace.REDUCTIONS name
LEAVES = {"sum": "leaf_sum", "mean": "leaf_sum", "prod": "leaf_prod", "max": "leaf_max",
          "min": "leaf_min", "any": "leaf_max", "all": "leaf_min"}


def accumulator(p: Plan) -> np.dtype:
    """The dtype a reduction's values are kept in: the reduction's own (``any``/``all``: one
    byte, 0 or 1)."""
    return np.dtype(np.uint8) if p.reduce in ("any", "all") else p.reduced


#: elements a parallel reduction hands one call of the serial kernel at least
REDUCE_GROUP = 65536


def _reduce_source(p: Plan, body_lines: list[str], masks: tuple, mode: str, args: list[str],
                   serial: str = "") -> str:
    """The kernel of a reduction along the last axis of ``rows`` rows of ``n`` elements (all
    elements: one row). ``masks[k]`` is ``(rows, columns)``: which axes leaf ``k`` has; each
    array leaf is flat and C-ordered (a whole array, one value per row, or one row for all).

    Serial: tasks ``T0`` to ``T1``, each up to :data:`REDUCE_TASK` chunks of one row; a chunk
    of :data:`REDUCE_CHUNK` values is computed into a buffer (the loop LLVM vectorises as an
    elementwise kernel's), then reduced in leaves of :data:`REDUCE_LEAF` values into ``P``
    (``rows`` times the leaves of a row, see :func:`_leaf_sum` and :func:`_float_leaves`; the
    caller reduces each row's). Parallel: groups of tasks of at least :data:`REDUCE_GROUP`
    elements, each a call of the serial kernel (``serial``), which keeps its buffer for all
    of them."""
    pad = " " * 4
    params = ["n", "rows", "P", *args]
    head = [pad + f"chunks = (n + {REDUCE_CHUNK - 1}) // {REDUCE_CHUNK}",
            pad + f"per_row = (chunks + {REDUCE_TASK - 1}) // {REDUCE_TASK}"]
    if mode != "serial":
        return "\n".join([
            f"# reduction by {serial}",
            f"def {{fname}}({', '.join(params)}):",
            *head,
            pad + "tasks = rows * per_row",
            pad + f"group = max(1, {REDUCE_GROUP} // max(1, min(n, "
                  f"{REDUCE_TASK * REDUCE_CHUNK})))",
            pad + "g_ = 0",
            pad + "for q in prange((tasks + group - 1) // group):",
            pad * 2 + f"g_ += serial({', '.join(params)}, q * group, "
                      "min(q * group + group, tasks))",
            pad + "return g_", ""])
    acc = accumulator(p)
    keys = key_dtype(p)
    leaf = (f"{LEAVES[p.reduce]}{keys.itemsize * 8}(S, S.view({_type(keys)}))" if keys
            else f"{LEAVES[p.reduce]}(S)")
    value = "np.uint8(r != 0)" if p.reduce in ("any", "all") else _cast("r", p.dtype, acc)
    per_row = [f"v{k} = L{k}[row]" for k, m in enumerate(masks) if m == (True, False)]
    spans = [f"R{k} = L{k}[{'base + ' if m[0] else ''}lo:{'base + ' if m[0] else ''}lo + m]"
             for k, m in enumerate(masks) if m[1]]
    loads = [f"v{k} = R{k}[j]" for k, m in enumerate(masks) if m[1]]
    body = [x.replace("g_ +=", "gc +=") for x in _bind(body_lines, masks)]
    lines = [
        f"def {{fname}}({', '.join(params)}, T0, T1):",
        *head,
        pad + f"leaves = (n + {REDUCE_LEAF - 1}) // {REDUCE_LEAF}",
        pad + "g_ = 0",
        pad + f"B = np.empty({REDUCE_CHUNK}, {_type(acc)})",
        pad + "for t in range(T0, T1):",
        pad * 2 + "row = t // per_row",
        pad * 2 + f"c0 = (t % per_row) * {REDUCE_TASK}",
        pad * 2 + "base = row * n",
        pad * 2 + "gc = 0",
        *(pad * 2 + x for x in per_row),
        pad * 2 + f"for c in range(c0, min(c0 + {REDUCE_TASK}, chunks)):",
        pad * 3 + f"lo = c * {REDUCE_CHUNK}",
        pad * 3 + f"m = min({REDUCE_CHUNK}, n - lo)",
        *(pad * 3 + x for x in spans),
        pad * 3 + "for j in range(m):",
        *(pad * 4 + x for x in [*loads, *body, f"B[j] = {value}"]),
        pad * 3 + f"for f in range((m + {REDUCE_LEAF - 1}) // {REDUCE_LEAF}):",
        pad * 4 + f"S = B[f * {REDUCE_LEAF}:min(f * {REDUCE_LEAF} + {REDUCE_LEAF}, m)]",
        pad * 4 + f"P[row * leaves + c * {REDUCE_CHUNK // REDUCE_LEAF} + f] = {leaf}",
        pad * 2 + "g_ += gc",
        pad + "return g_"]
    return "\n" + "\n".join(lines) + "\n"


def _bind(body: list[str], masks: tuple) -> list[str]:
    """A plan's body with array leaves read from ``v{k}`` and scalar leaves used directly."""
    lines = []
    for line in body:
        for k, m in enumerate(masks):
            if any(m):
                line = _replace_name(line, f"L{k}", f"v{k}")
        lines.append(line)
    return lines


def _replace_name(line: str, old: str, new: str) -> str:
    import re

    return re.sub(rf"\b{old}\b", new, line)


def _rename(line: str, lane: int) -> str:
    import re

    return re.sub(r"\b(t\d+|v\d+|r)\b", lambda m: f"{m.group(1)}_{lane}", line)


_kernels: dict[tuple, Callable] = {}
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def kernel(p: Plan, masks: tuple, mode: str, exact: bool = False,
           rows: bool = False, reduce: bool = False) -> Callable:
    """The compiled kernel (generated and jitted once per process, loaded from disk after);
    see :func:`source`."""
    found = p.compiled.get((masks, mode, exact, rows, reduce))
    if found is not None:
        return found
    fname, text = source(p, masks, mode, exact, rows, reduce)
    serial = (kernel(p, masks, "serial", exact, rows, reduce)
              if (rows or reduce) and mode != "serial" else None)
    found = _kernels.get(fname)
    if found is None:
        with _lock:
            found = _kernels.get(fname)
            if found is None:
                namespace = dict(_NAMESPACE)
                if serial is not None:  # made first: the lock is not reentrant
                    arity = (5 if reduce else 5 + sum(any(m[:-1]) for m in masks))
                    namespace["serial"] = engine_numba.noinline(
                        serial, arity + len(p.leaves) + len(p.weak))
                exec(compile(text, __file__, "exec"), namespace)
                found = jit.njit(namespace[fname], parallel=mode != "serial", nogil=True,
                                 error_model="numpy")
                _kernels[fname] = found
    p.compiled[(masks, mode, exact, rows, reduce)] = found
    return found
