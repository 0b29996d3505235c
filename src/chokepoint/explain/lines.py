"""Rewrites inside programs: a line of the user's code that is a ReLU-family operation in
disguise, or a count of a boolean array written as its sum, recognised by value, and proposed
only when the rewrite measured faster.

The tracer hands each line of the user's code to :func:`capture` when the line's first
operation runs, with the frame's variables as they are then. Patterns are found in the line's
syntax (``np.maximum(0, E)``, ``D * (H > 0)``, ``np.where(H > 0, D, 0)``, ``D[H <= 0] = 0``);
each is then checked by value, as the statement-level rewrite is
(:func:`chokepoint.explain.rewrite.find_rewrite`: the user's data, then the values where
conventions differ), and timed against the code it replaces, side by side. ``b.sum()`` and
``np.sum(b)`` of a boolean ``b`` are ``np.count_nonzero(b)``: NumPy converts each element to an
integer to add it, count_nonzero counts bytes. ``np.argsort(a)[:, :k]`` sorts whole rows for
their first ``k``: ``np.argpartition`` finds them in linear time, and a sort of those ``k``
orders them. ``np.unique(a)`` sorts ``a``; where ``a`` holds non-negative integers below its
size or 65536 (category codes, labels), ``np.bincount`` counts them in one pass,
and its nonzero counts are the unique values, their counts and (cumulated) the inverse. A
product of broadcast operands summed along an axis, ``(A[:, :, None] * B[None, :, :]).sum(axis=1)``,
is a contraction: ``np.einsum('ij,jk->ik', A, B, optimize=True)`` computes it without the
broadcast temporary (through the matrix product where it is one). A NumPy function of an
integer array whose values span a range far smaller than it (12-bit pixels, category codes),
``np.interp(q, xp, fp)`` or a ufunc, is evaluated once per value and looked up:
``np.interp(np.arange(int(q.max()) + 1, dtype=q.dtype), xp, fp)[q]``. ``x ** 3`` and ``x ** 4``
of a float array call the C library's ``pow`` per element: ``x * x * x`` is within a few ulp.
A matrix product of integer arrays runs in NumPy's own loop, without BLAS: the product of
their float64 copies, cast back, is exact while every sum stays below 2**53. An arithmetic
operator on two arrays gathered by the same index array, ``r[src] / outdeg[src]``, is
``(r / outdeg)[src]``: one gather, and the operation on the arrays' own length. A number to
an array's powers, ``10.0 ** (db / 20)``, calls ``pow`` per element: ``np.exp((db / 20) *
2.302585092994046)`` is within a few ulp where the exponents are moderate (checked on the
user's values). ``np.add.at(a, i, v)`` adds element by element; ``np.add(a, np.bincount(...),
out=a)`` of the same positions sums them in one pass (3.3x on 200,000 rows of 16 here). Two nested
``np.roll`` calls copy the array twice; one call takes both shifts and axes. Two order
statistics of one array, ``np.percentile(f, 99) - np.percentile(f, 1)``, partition it twice;
``np.percentile(f, [99, 1])`` selects both in one call, with the same values. A comprehension
over a 1-D array (``[code_of[x] for x in labels]``, ``enumerate(a)``, ``zip(a, b)``) makes a
NumPy scalar of each element; over ``labels.tolist()`` Python's own, in one call (1.6x on
200,000 labels here), where the dtype is one Python computes alike and the value is equal.
A product with ``np.diag(w)`` builds an n x n matrix of zeros to scale rows or columns:
``X.T * w`` scales them.
"""

from __future__ import annotations

import ast
import linecache
import math
import operator
import string
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .. import kernels
from ..kernels.adaptive import settle
from ..measure.timer import measure_interleaved
from .rewrite import CLOSE_ULP, FASTER, find_rewrite, max_ulp

__all__ = ["EXTREMES", "LineCapture", "Sort", "capture", "extreme_agreement", "extreme_code",
           "extreme_selection", "line_rewrites", "python_alike", "same_extreme", "sort_call",
           "sorted_operand"]


@dataclass
class _Pattern:
    """One recognisable piece of a line: the equivalent expression over placeholder names
    (``d``, ``h``, ``z``), the user's expressions for them, and how the kernel is called."""

    template: str  # NumPy code over the placeholders, with the line's values
    operands: dict[str, ast.expr]  # placeholder -> the user's expression
    in_place: str | None = None  # the target name of ``D[H <= 0] = 0``
    original: str = ""  # the user's code this pattern is
    count: bool = False  # ``b.sum()`` of a boolean array: np.count_nonzero(b)
    top: ast.Subscript | None = None  # ``np.argsort(a)[:, :k]``: the k smallest, partitioned
    extreme: ast.Subscript | None = None  # ``np.argsort(a)[-1]``: ``np.argmax(a)``
    unique: ast.Call | None = None  # ``np.unique(a, ...)`` of small integers: counted
    contraction: ast.Call | None = None  # ``(A[:, :, None] * B).sum(axis=1)``: np.einsum
    table: ast.Call | None = None  # ``np.interp(q, xp, fp)`` of small integers: looked up
    power: int = 0  # ``x ** 3`` (operand ``x``): multiplied out
    matmul: bool = False  # ``A @ B`` of integers (operands ``a``, ``b``): in float64
    gathered: bool = False  # ``a[i] / b[i]`` (operands ``a``, ``b``, ``i``): ``(a / b)[i]``
    base: float = 0.0  # ``10.0 ** x`` (operand ``x``): ``np.exp(x * log(10.0))``
    scatter: bool = False  # ``np.add.at(a, i, v)`` (operands ``a``, ``i``, ``v``): bincount
    rolls: tuple | None = None  # ``np.roll(np.roll(a, s, 0), t, 1)``: (shifts, axes), one roll
    quantiles: list | None = None  # ``np.percentile(a, 99) - np.percentile(a, 1)``: one call
    iterated: list | None = None  # ``[d[x] for x in a]``: ``for x in a.tolist()``
    diagonal: str = ""  # ``M @ np.diag(v)`` ("right") or ``np.diag(v) @ M`` ("left"): scaled


@dataclass
class LineCapture:
    """A line whose syntax holds a pattern, with its variables when it began."""

    filename: str
    line: int
    code: str
    patterns: list[_Pattern]
    env: dict = field(repr=False)


def _is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) \
        and isinstance(node.value, (int, float)) and node.value == 0


def _is_np(node: ast.expr, name: str) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == name
            and isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"))


def _compare_zero(node: ast.expr, ops: tuple[type, ...]) -> ast.expr | None:
    """``H`` of ``H > 0`` (for the given comparison types)."""
    if (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], ops) and _is_zero(node.comparators[0])):
        return node.left
    return None


#: what the receiver of a count's sum may be made of: names, views, comparisons, logic (no
#: call: the check evaluates it again)
_COUNTED = (ast.Name, ast.Attribute, ast.Subscript, ast.Compare, ast.BinOp, ast.UnaryOp,
            ast.Constant, ast.Slice, ast.Tuple, ast.Load, ast.operator, ast.cmpop,
            ast.unaryop)


def _summed(node: ast.expr) -> ast.expr | None:
    """``E`` of ``E.sum()`` or ``np.sum(E)`` (over all elements, no other argument), where
    ``E`` makes no call."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr == "sum" and not node.args \
            and not _is_np(node.func, "sum"):
        summed = node.func.value
    elif _is_np(node.func, "sum") and len(node.args) == 1:
        summed = node.args[0]
    else:
        return None
    return summed if all(isinstance(n, _COUNTED) for n in ast.walk(summed)) else None


def _reversed(node: ast.expr) -> ast.expr | None:
    """``x`` of ``x[::-1]``, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) \
            and node.slice.lower is None and node.slice.upper is None \
            and _end(node.slice.step) == -1:
        return node.value
    return None


def _top_k(node: ast.expr) -> tuple[ast.expr, ast.expr, ast.expr | None] | None:
    """``(a, k, axis)`` of ``np.argsort(a, axis=axis)[:, :k]`` or ``a.argsort()[:k]`` (every
    leading axis whole; the caller checks that the axis is the last): the indices of the ``k``
    smallest along it; or of ``np.argsort(a)[::-1][:k]``, the ``k`` largest, largest first
    (the caller checks that ``a`` is 1-D). ``axis`` None where not written."""
    if not isinstance(node, ast.Subscript):
        return None
    call = _reversed(node.value)
    call = node.value if call is None else call
    if not isinstance(call, ast.Call):
        return None
    if _is_np(call.func, "argsort") and len(call.args) == 1:
        a = call.args[0]
    elif isinstance(call.func, ast.Attribute) and call.func.attr == "argsort" and not call.args \
            and not _is_np(call.func, "argsort"):
        a = call.func.value
    else:
        return None
    if any(kw.arg not in ("axis", "kind") for kw in call.keywords):
        return None  # an order=: a record's fields (kind= orders equal values only)
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    whole = all(isinstance(p, ast.Slice) and p.lower is None and p.upper is None
                and p.step is None for p in parts[:-1])
    last = parts[-1]
    if not (whole and isinstance(last, ast.Slice) and last.lower is None
            and last.upper is not None and last.step is None):
        return None
    return a, last.upper, next((kw.value for kw in call.keywords if kw.arg == "axis"), None)


#: what replaces the first or last entry of a sort: (sort, which end) -> NumPy's function
EXTREMES = {("argsort", 0): "argmin", ("argsort", -1): "argmax",
             ("sort", 0): "min", ("sort", -1): "max"}


class Sort(NamedTuple):
    """A sort call's parts (:func:`sort_call`)."""

    kind: str  # "argsort" or "sort"
    a: ast.expr
    axis: ast.expr | None  # None where not written: the last
    stable: bool  # kind="stable" (or "mergesort"): an order of equal values asked for


def _is_stable(call: ast.Call) -> bool:
    """Whether a sort call asks for a stable sort (equal values in their order)."""
    return any(kw.arg == "kind" and isinstance(kw.value, ast.Constant)
               and kw.value.value in ("stable", "mergesort") for kw in call.keywords)


def sort_call(node: ast.expr) -> Sort | None:
    """The parts of ``np.argsort(a, axis)``, ``np.sort(a, axis)`` or ``a.argsort(axis)``; None
    for anything else, or a sort with other arguments (``order=``)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("argsort", "sort"):
        return None
    if isinstance(func.value, ast.Name) and func.value.id in ("np", "numpy"):
        if not node.args:
            return None
        a, rest = node.args[0], node.args[1:]
    elif func.attr == "argsort":  # a.sort() sorts in place and returns None
        a, rest = func.value, node.args
    else:
        return None
    keywords = {kw.arg: kw.value for kw in node.keywords}
    if len(rest) > 1 or set(keywords) - {"axis", "kind"} or (rest and "axis" in keywords):
        return None
    return Sort(func.attr, a, rest[0] if rest else keywords.get("axis"), _is_stable(node))


def sorted_operand(sort: Sort, env: dict) -> tuple[np.ndarray, int] | None:
    """The array ``sort`` sorts and its axis (non-negative), evaluated in ``env``; None where
    they cannot be evaluated there, or are not an array of at least one axis and one of its
    axes."""
    try:
        a = eval(_compiled(sort.a), dict(env))
        axis = -1 if sort.axis is None else eval(_compiled(sort.axis), dict(env))
    except Exception:  # the user's code cannot be re-run here: skip it
        return None
    if type(a) is not np.ndarray or a.ndim == 0 or not isinstance(axis, (int, np.integer)) \
            or not -a.ndim <= axis < a.ndim:
        return None
    return a, int(axis) % a.ndim


def extreme_code(sort: Sort, end: int, ndim: int) -> str:
    """``np.argmax(a, axis=...)`` (or argmin, max, min) for ``sort``'s ``end`` entry, its
    axis as the user wrote it (the same code serves arrays of other dimensions)."""
    axis = (ast.unparse(sort.axis) if sort.axis is not None else None if ndim == 1 else "-1")
    return (f"np.{EXTREMES[sort.kind, end]}({ast.unparse(sort.a)}"
            f"{'' if axis is None else f', axis={axis}'})")


def extreme_agreement(sort: Sort, end: int, a: np.ndarray, axis: int, ours, theirs
                      ) -> tuple[str, str] | None:
    """``(values, note)``: how an extreme found in one pass agrees with the sort's entry
    (:func:`same_extreme`); None where it does not, or where its indices differ among equal
    values and the sort was stable (the user asked for that order)."""
    if not same_extreme(sort.kind, a, axis, ours, theirs):
        return None
    same = bool(np.array_equal(ours, theirs))
    if not same and sort.stable:
        return None
    notes = [] if same else ["where values are equal, which of their indices is taken may "
                             "differ"]
    if end == 0 and a.dtype.kind in "fc":
        notes.append(f"at NaN they differ: a sort puts NaN last, np.{EXTREMES[sort.kind, 0]} "
                     "takes it first")
    return ("same values" if same else "the same values at the indices"), "; ".join(notes)


def _end(node: ast.expr) -> int | None:
    """0 or -1 where ``node`` is that integer literal."""
    if isinstance(node, ast.Constant) and node.value == 0 and type(node.value) is int:
        return 0
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant) and node.operand.value == 1
            and type(node.operand.value) is int):
        return -1
    return None


def _whole(node: ast.expr) -> bool:
    return (isinstance(node, ast.Slice) and node.lower is None and node.upper is None
            and node.step is None)


def extreme_selection(node: ast.Subscript, ndim: int) -> tuple[int, int] | None:
    """``(axis, end)`` where ``node`` takes the first (0) or last (-1) entry along one axis
    and every other axis whole: ``s[-1]`` (axis 0), ``s[:, 0]`` or ``s[..., -1]`` (the
    last axis)."""
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if len(parts) == 1:
        end = _end(parts[0])
        return (0, end) if end is not None else None
    if len(parts) == 2 and isinstance(parts[0], ast.Constant) and parts[0].value is Ellipsis:
        end = _end(parts[1])
        return (ndim - 1, end) if end is not None else None
    if len(parts) == ndim and all(_whole(p) for p in parts[:-1]):
        end = _end(parts[-1])
        return (ndim - 1, end) if end is not None else None
    return None


def _written_ndim(node: ast.Subscript) -> int:
    """The dimensions a subscript's written indices imply (one, or one per index)."""
    return len(node.slice.elts) if isinstance(node.slice, ast.Tuple) else 1


def same_extreme(kind: str, a: np.ndarray, axis: int, ours, theirs) -> bool:
    """Whether an extreme found in one pass gives what the sort gave: the same values (the
    indices of a sort may pick another of equal values: the values at them must agree)."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if ours.shape != theirs.shape:
        return False
    nan = a.dtype.kind in "fc"
    if kind == "sort":
        return bool(np.array_equal(ours, theirs, equal_nan=nan))
    at = (a[ours] if a.ndim == 1 else
          np.take_along_axis(a, np.expand_dims(ours, axis), axis).squeeze(axis))
    want = (a[theirs] if a.ndim == 1 else
            np.take_along_axis(a, np.expand_dims(theirs, axis), axis).squeeze(axis))
    return bool(np.array_equal(at, want, equal_nan=nan))


#: the keywords of ``np.unique`` a count gives, in the order of its results
_UNIQUE_FLAGS = ("return_inverse", "return_counts")


def _unique(node: ast.expr) -> tuple[ast.expr, tuple[str, ...]] | None:
    """``(a, flags)`` of ``np.unique(a, return_inverse=True, return_counts=True)``: the flags
    set to the constant True among :data:`_UNIQUE_FLAGS` (``return_index``, ``axis`` and the
    like: not counted)."""
    if not (isinstance(node, ast.Call) and _is_np(node.func, "unique") and len(node.args) == 1):
        return None
    flags = []
    for kw in node.keywords:
        if kw.arg not in _UNIQUE_FLAGS or not isinstance(kw.value, ast.Constant) \
                or not isinstance(kw.value.value, bool):
            return None
        if kw.value.value:
            flags.append(kw.arg)
    return node.args[0], tuple(f for f in _UNIQUE_FLAGS if f in flags)


def _factor(node: ast.expr) -> tuple[str, list[bool] | None] | None:
    """``(code, axes)`` of a factor of a contraction: ``A`` (axes None: all of its own) or
    ``A[:, None, :]`` (True for each of its own axes, False for each new one; the axes an
    index leaves out at the end are its own too); ``A`` may be an expression without calls
    (``(w * m[None, :])[:, :, None]``), its code then einsum's operand."""
    if isinstance(node, ast.Name):
        return node.id, None
    if not (isinstance(node, ast.Subscript) and _plain(node.value)):
        return None
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    axes = []
    for part in parts:
        if isinstance(part, ast.Slice) and part.lower is None and part.upper is None \
                and part.step is None:
            axes.append(True)
        elif isinstance(part, ast.Constant) and part.value is None:
            axes.append(False)
        else:
            return None
    return ast.unparse(node.value), axes


def _contraction(node: ast.expr) -> tuple[list[tuple[str, list[bool] | None]], int] | None:
    """``(factors, axis)`` of ``(P * Q).sum(axis=k)`` or ``np.sum(P * Q, axis=k)`` where a
    factor has a new axis (``None`` in its index): a product broadcast to be summed."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr == "sum" and not node.args \
            and not _is_np(node.func, "sum"):
        product, keywords = node.func.value, node.keywords
    elif _is_np(node.func, "sum") and len(node.args) == 1:
        product, keywords = node.args[0], node.keywords
    else:
        return None
    if not (len(keywords) == 1 and keywords[0].arg == "axis"
            and isinstance(keywords[0].value, (ast.Constant, ast.UnaryOp))):
        return None
    try:
        axis = ast.literal_eval(keywords[0].value)
    except ValueError:
        return None
    if not (isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)
            and isinstance(axis, int) and not isinstance(axis, bool)):
        return None
    factors = [_factor(product.left), _factor(product.right)]
    if None in factors or not any(f[1] is not None and not all(f[1]) for f in factors):
        return None
    return factors, axis


def _einsum_spec(factors: list[tuple[str, list[bool] | None]], ndims: list[int],
                 axis: int) -> str | None:
    """The einsum subscripts of a broadcast product of ``factors`` (their own ``ndims``) summed
    along ``axis``: ``'ij,jk->ik'`` for ``A[:, :, None] * B[None, :, :]`` along 1."""
    placed = []
    for (_, axes), ndim in zip(factors, ndims, strict=True):
        own = [True] * ndim if axes is None else axes + [True] * (ndim - sum(axes))
        if sum(own) != ndim:
            return None  # more slices than the array has axes
        placed.append(own)
    width = max(len(p) for p in placed)
    placed = [[False] * (width - len(p)) + p for p in placed]  # broadcasting aligns right
    if not -width <= axis < width:
        return None
    axis %= width
    if width > len(string.ascii_letters):
        return None
    letters = string.ascii_letters[:width]
    if not all(any(p[k] for p in placed) for k in range(width)):
        return None  # an axis of length 1 in the result: einsum would drop it
    inputs = ["".join(c for c, real in zip(letters, p, strict=True) if real) for p in placed]
    return f"{','.join(inputs)}->{letters[:axis]}{letters[axis + 1:]}"


#: NumPy functions evaluated once per value of a small-range integer array and looked up: its
#: ufuncs of one output and no core dimensions (elementwise, no state; any other argument must
#: be a scalar) and ``interp`` (``xp`` and ``fp``: 1-D)
_TABULATED = frozenset({"interp"}) | frozenset(
    name for name in dir(np) if isinstance(u := getattr(np, name, None), np.ufunc)
    and u.nout == 1 and u.signature is None)
#: an integer array is looked up where it has this many elements per value of its range
TABLE_ELEMENTS_PER_VALUE = 8


#: array methods that only copy or view their array's values: an argument made by them is
#: evaluated once before a rewrite (``np.interp(image.flatten(), ...)``)
_RESHAPING = frozenset({"flatten", "ravel", "reshape", "astype", "copy", "squeeze", "transpose"})


def _array_expression(node: ast.expr) -> bool:
    """A name, or views and copies of one: attributes, subscripts without calls, and the
    methods of :data:`_RESHAPING` with plain arguments (``image.flatten()``, ``x[0].ravel()``)."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _array_expression(node.value)
    if isinstance(node, ast.Subscript):
        return _plain(node.slice) and _array_expression(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return (node.func.attr in _RESHAPING and _array_expression(node.func.value)
                and all(_plain(a) for a in node.args)
                and all(_plain(k.value) for k in node.keywords))
    return False


def _tabulated(node: ast.expr) -> ast.expr | None:
    """``q`` of ``np.interp(q, xp, fp)`` or ``np.exp(q)`` (a ufunc of NumPy's, ``q`` a name or
    a view or copy of one (:func:`_array_expression`), no keywords, no positional ``out``, no
    calls in its other arguments): a function of each element of ``q`` alone where its other
    arguments are scalars (checked on their values)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and _is_np(node.func, node.func.attr) and node.func.attr in _TABULATED
            and node.args and _array_expression(node.args[0]) and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args)
            and all(_plain(a) for a in node.args[1:])):  # evaluated many times: no calls
        return None
    func = getattr(np, node.func.attr)
    arity = 3 if func is np.interp else func.nin
    return node.args[0] if len(node.args) == arity else None  # no positional out=


def _power(node: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """``(base, exponent)`` of ``base ** exponent`` or ``np.power(base, exponent)`` (no
    ``out=``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return node.left, node.right
    if isinstance(node, ast.Call) and _is_np(node.func, "power") and len(node.args) == 2 \
            and not node.keywords:
        return node.args[0], node.args[1]
    return None


def _small_power(node: ast.expr) -> tuple[ast.expr, int] | None:
    """``(x, n)`` of ``x ** n`` or ``np.power(x, n)`` with ``n`` written as 3 or 4: NumPy
    calls the C library's ``pow`` per element there (2, 0.5 and -1 have fast paths), many
    times the cost of the products."""
    x, n = _power(node) or (None, None)
    if isinstance(n, ast.Constant) and type(n.value) in (int, float) and n.value in (3, 4):
        return x, int(n.value)
    return None


def _scalar_power(node: ast.expr) -> tuple[float, ast.expr] | None:
    """``(c, x)`` of ``c ** x`` or ``np.power(c, x)`` with ``c`` a positive number written
    in the line (not 1): NumPy calls the C library's ``pow`` per element, several times the
    cost of ``exp`` of a product, which NumPy runs vectorised."""
    c, x = _power(node) or (None, None)
    if not (isinstance(c, ast.Constant) and type(c.value) in (int, float)):
        return None
    try:
        base = float(c.value)
    except OverflowError:  # an integer past float's range
        return None
    return (base, x) if base > 0 and base != 1 and math.isfinite(base) else None


def _diagonal_product(node: ast.expr) -> tuple[str, ast.expr, ast.expr] | None:
    """``("right", v, M)`` of ``M @ np.diag(v)``, ``("left", v, M)`` of ``np.diag(v) @ M``
    (``v`` and ``M`` evaluated again by the check: views and copies only), else None."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)):
        return None
    for side, diag, other in (("right", node.right, node.left), ("left", node.left, node.right)):
        if (isinstance(diag, ast.Call) and _is_np(diag.func, "diag") and len(diag.args) == 1
                and not diag.keywords and _reshaped_only(diag.args[0])
                and _reshaped_only(other)):
            return side, diag.args[0], other
    return None


def _add_at(node: ast.expr) -> tuple[ast.Name, ast.expr, ast.expr] | None:
    """``(a, i, v)`` of ``np.add.at(a, i, v)``, ``a`` a name and ``i``, ``v`` without calls
    but views and copies (:func:`_reshaped_only`: the check evaluates them again)."""
    if not (isinstance(node, ast.Call) and _is_np_ufunc_at(node.func, "add")
            and len(node.args) == 3 and not node.keywords):
        return None
    a, i, v = node.args
    return (a, i, v) if isinstance(a, ast.Name) and _reshaped_only(i) and _reshaped_only(v) \
        else None


def _reshaped_only(node: ast.expr) -> bool:
    """An expression whose only calls are the methods of :data:`_RESHAPING` with plain
    arguments (``-lr * g.reshape(-1, k)``, ``items.ravel()``): evaluating it again computes
    the same and changes nothing."""
    return all(not isinstance(n, ast.Call) or (
        isinstance(n.func, ast.Attribute) and n.func.attr in _RESHAPING
        and all(_plain(a) for a in n.args) and all(_plain(k.value) for k in n.keywords))
        for n in ast.walk(node)) and not any(
        isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda))
        for n in ast.walk(node))


def _atom(node: ast.expr) -> str:
    """``node``'s code, in parentheses where a method call on it would bind to a part."""
    code = ast.unparse(node)
    return code if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) \
        else f"({code})"


def _is_np_ufunc_at(node: ast.expr, ufunc: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "at" and _is_np(node.value, ufunc)


def _roll_args(node: ast.expr) -> tuple[ast.expr, ast.expr, ast.expr] | None:
    """``(a, shift, axis)`` of ``np.roll(a, shift, axis)`` with the axis given (by keyword or
    position), shift and axis without calls."""
    if not (isinstance(node, ast.Call) and _is_np(node.func, "roll")
            and not any(isinstance(a, ast.Starred) for a in node.args)):
        return None
    args = list(node.args)
    if len(args) > 3:
        return None
    keywords = {k.arg: k.value for k in node.keywords}
    if None in keywords or set(keywords) - {"shift", "axis"}:
        return None
    names = ["a", "shift", "axis"][:len(args)]
    given = dict(zip(names, args, strict=True)) | keywords
    if len(given) != 3 or len(args) + len(keywords) != 3:
        return None
    if not (_plain(given["shift"]) and _plain(given["axis"])):
        return None
    return given["a"], given["shift"], given["axis"]


def _nested_roll(node: ast.expr) -> tuple[ast.expr, list[ast.expr], list[ast.expr]] | None:
    """``(a, [shift1, shift2], [axis1, axis2])`` of ``np.roll(np.roll(a, shift1, axis1),
    shift2, axis2)``: two copies of the whole array where ``np.roll(a, (shift1, shift2),
    axis=(axis1, axis2))`` makes one."""
    outer = _roll_args(node)
    if outer is None:
        return None
    inner = _roll_args(outer[0])
    if inner is None:
        return None
    return inner[0], [inner[1], outer[1]], [inner[2], outer[2]]


#: NumPy's order statistics that take a list of ``q`` and select them all in one partition
_QUANTILES = ("percentile", "quantile", "nanpercentile", "nanquantile")


def _quantile_calls(tree: ast.AST) -> list[ast.Call] | None:
    """Two or more calls in a statement of one of :data:`_QUANTILES` on the same array (an
    expression without calls), with the same other arguments, each with one number as
    ``q``: each call partitions the whole array again."""
    groups: dict[tuple, list[ast.Call]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _QUANTILES and _is_np(node.func, node.func.attr)
                and len(node.args) == 2 and _plain(node.args[0])
                and all(k.arg not in (None, "q", "a", "out") and _plain(k.value)
                        for k in node.keywords)):
            continue
        q = node.args[1]
        if isinstance(q, ast.UnaryOp) and isinstance(q.op, ast.USub):
            q = q.operand
        if not (isinstance(q, ast.Constant) and type(q.value) in (int, float)):
            continue
        key = (node.func.attr, ast.unparse(node.args[0]),
               tuple(sorted((k.arg, ast.unparse(k.value)) for k in node.keywords)))
        groups.setdefault(key, []).append(node)
    found = max(groups.values(), key=len, default=[])
    return found if len(found) >= 2 else None


def python_alike(tree: ast.AST) -> set[np.dtype]:
    """The dtypes whose values Python's numbers compute with alike in this line: 64-bit
    floats, integers and complex numbers (narrower ones wrap or round where Python's do not),
    and booleans unless the line inverts one (``~`` of Python's True is -2)."""
    alike = {np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.complex128)}
    if not any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Invert)
               for n in ast.walk(tree)):
        alike.add(np.dtype(bool))
    return alike


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _iterated_arrays(tree: ast.AST) -> list[ast.expr]:
    """The expressions a comprehension of the statement iterates over that may be arrays:
    ``for x in a``, and the arguments of ``enumerate(a)`` and ``zip(a, b)`` there (without
    calls: the check evaluates them again)."""
    return [n for node in ast.walk(tree) if isinstance(node, _COMPREHENSIONS)
            for generator in node.generators for n in _iterated(generator.iter)]


def _iterated(it: ast.expr) -> list[ast.expr]:
    """What a ``for`` clause over ``it`` iterates element by element: ``it``, or the first
    argument of ``enumerate(a)``, or every argument of ``zip(a, b)`` (those without calls)."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
            and it.func.id in ("enumerate", "zip") and not it.keywords:
        candidates = it.args[:1] if it.func.id == "enumerate" else it.args
    else:
        candidates = [it]
    return [c for c in candidates if not isinstance(c, ast.Starred) and _plain(c)]


def _product(node: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """``(A, B)`` of ``A @ B``, ``np.matmul(A, B)`` or ``np.dot(A, B)``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return node.left, node.right
    if isinstance(node, ast.Call) and (_is_np(node.func, "matmul") or _is_np(node.func, "dot")) \
            and len(node.args) == 2 and not node.keywords:
        return node.args[0], node.args[1]
    return None


def _gathered_operands(node: ast.expr) -> tuple[ast.expr, ast.expr, ast.expr] | None:
    """``(a, b, i)`` of ``a[i] <op> b[i]``: an arithmetic operator on two arrays gathered by
    the same index (names and views of them, no call); computed first and gathered once,
    ``(a <op> b)[i]`` has the same values with one gather and an operation on the arrays'
    own length, less than the index's where indices repeat (edges of a graph)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC)
            and isinstance(node.left, ast.Subscript) and isinstance(node.right, ast.Subscript)):
        return None
    left, right = node.left, node.right
    if ast.unparse(left.slice) != ast.unparse(right.slice) \
            or not isinstance(left.slice, (ast.Name, ast.Attribute)):
        return None
    if not all(_plain(n) for n in (left.value, right.value, left.slice)):
        return None
    return left.value, right.value, left.slice


#: the arithmetic operators of the syntax, and what each computes
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
              ast.Pow: operator.pow}
_ARITHMETIC = tuple(_OPERATORS)


def _patterns(tree: ast.AST) -> list[_Pattern]:
    found = []
    if iterated := _iterated_arrays(tree):
        # a comprehension over an array makes a NumPy scalar of each element
        found.append(_Pattern("tolist", {}, original=" and ".join(
            ast.unparse(n) for n in iterated), iterated=iterated))
    if (calls := _quantile_calls(tree)) is not None:
        # order statistics of one array, one call each: one call selects them all
        found.append(_Pattern("quantiles", {"a": calls[0].args[0]},
                              original=" and ".join(ast.unparse(c) for c in calls),
                              quantiles=calls))
    # a NumPy integer's attributes (b.sum().item(), .astype) are not a Python int's
    read_on = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if (top := _top_k(node)) is not None:
            # a whole sort for its first k: a partition finds them, a sort of k orders them
            operands = {"a": top[0], "k": top[1]} | ({"axis": top[2]} if top[2] else {})
            found.append(_Pattern("top", operands, original=ast.unparse(node), top=node))
        elif isinstance(node, ast.Subscript) and (sort := sort_call(node.value)) is not None \
                and extreme_selection(node, _written_ndim(node)) is not None:
            # a whole sort for its first or last entry: one pass finds it
            operands = {"a": sort.a} | ({"axis": sort.axis} if sort.axis is not None else {})
            found.append(_Pattern("extreme", operands, original=ast.unparse(node),
                                  extreme=node))
        elif _contraction(node) is not None:
            # a broadcast product summed: a contraction, without the product's temporary
            found.append(_Pattern("einsum", {}, original=ast.unparse(node),
                                  contraction=node))
        elif (scaled := _diagonal_product(node)) is not None:
            # a dense diagonal matrix made to scale rows or columns: n^2 memory, n^3 flops
            side, v, m = scaled
            found.append(_Pattern("diag", {"v": v, "m": m}, original=ast.unparse(node),
                                  diagonal=side))
        elif (unique := _unique(node)) is not None:
            # a sort to find values a count finds
            found.append(_Pattern("unique", {"a": unique[0]}, original=ast.unparse(node),
                                  unique=node))
        elif id(node) not in read_on and (summed := _summed(node)) is not None:
            # NumPy sums booleans by converting each to an integer; count_nonzero counts them
            found.append(_Pattern("b.sum()", {"b": summed}, original=ast.unparse(node),
                                  count=True))
        elif isinstance(node, ast.Call) and _is_np(node.func, "maximum") and len(node.args) == 2 \
                and not node.keywords:
            a, b = node.args
            operand = b if _is_zero(a) else a if _is_zero(b) else None
            if operand is not None:
                found.append(_Pattern("np.maximum(z, 0)", {"z": operand},
                                      original=ast.unparse(node)))
        elif (gathered := _gathered_operands(node)) is not None:
            # before the products below: x[i] * w[i] is no ReLU
            found.append(_Pattern("gathered", {"a": gathered[0], "b": gathered[1],
                                               "i": gathered[2]},
                                  original=ast.unparse(node), gathered=True))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for grad, mask in ((node.left, node.right), (node.right, node.left)):
                h = _compare_zero(mask, (ast.Gt, ast.GtE))
                if h is not None:
                    op = ">" if isinstance(mask.ops[0], ast.Gt) else ">="
                    found.append(_Pattern(f"d * (h {op} 0)", {"d": grad, "h": h},
                                          original=ast.unparse(node)))
                    break
        elif isinstance(node, ast.Call) and _is_np(node.func, "where") \
                and len(node.args) == 3 and _is_zero(node.args[2]):
            h = _compare_zero(node.args[0], (ast.Gt, ast.GtE))
            if h is not None:
                op = ">" if isinstance(node.args[0].ops[0], ast.Gt) else ">="
                found.append(_Pattern(f"np.where(h {op} 0, d, 0)", {"d": node.args[1], "h": h},
                                      original=ast.unparse(node)))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Subscript) and _is_zero(node.value) \
                and isinstance(node.targets[0].value, ast.Name):
            target = node.targets[0]
            h = _compare_zero(target.slice, (ast.Lt, ast.LtE))
            if h is not None:
                op = "<=" if isinstance(target.slice.ops[0], ast.LtE) else "<"
                name = target.value.id
                found.append(_Pattern(f"np.where(h {op} 0, 0, d)",
                                      {"d": ast.parse(name, mode="eval").body, "h": h},
                                      in_place=name, original=ast.unparse(node)))
        elif (power := _small_power(node)) is not None:
            found.append(_Pattern("power", {"x": power[0]}, original=ast.unparse(node),
                                  power=power[1]))
            if (q := _tabulated(node)) is not None:  # np.power(q, 3) of small integers
                found.append(_Pattern("table", {"q": q}, original=ast.unparse(node),
                                      table=node))
        elif (rolled := _nested_roll(node)) is not None:
            found.append(_Pattern("roll", {"a": rolled[0]}, original=ast.unparse(node),
                                  rolls=(rolled[1], rolled[2])))
        elif (added := _add_at(node)) is not None:
            # a scatter-add, unbuffered element by element: a count by bincount adds them
            found.append(_Pattern("add.at", {"a": added[0], "i": added[1], "v": added[2]},
                                  in_place=added[0].id, original=ast.unparse(node),
                                  scatter=True))
        elif (scaled := _scalar_power(node)) is not None:
            found.append(_Pattern("exp", {"x": scaled[1]}, original=ast.unparse(node),
                                  base=scaled[0]))
        elif (product := _product(node)) is not None:
            found.append(_Pattern("matmul", {"a": product[0], "b": product[1]},
                                  original=ast.unparse(node), matmul=True))
        elif (q := _tabulated(node)) is not None:
            # one evaluation per value of a small-range integer array, looked up (last: a
            # ufunc that is a ReLU in disguise, np.maximum(x, 0), is that pattern)
            found.append(_Pattern("table", {"q": q}, original=ast.unparse(node), table=node))
    return found


def capture(filename: str, line: int, f_globals: dict, f_locals: dict,
            unwrap) -> LineCapture | None:
    """A line's patterns and its variables as the line begins (None when it has none).

    ``unwrap`` turns the tracer's wrapped arrays back into arrays. The target of an in-place
    pattern is copied now: the line is about to change it.
    """
    code = linecache.getline(filename, line).strip()
    if not code:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a line of a longer statement: not recognised
        return None
    try:
        patterns = _patterns(tree)
    except Exception:  # syntax a pattern's parse did not foresee: no rewrite, the run goes on
        return None
    if not patterns:
        return None
    env = {k: unwrap(v) for scope in (f_globals, f_locals) for k, v in scope.items()}
    for p in patterns:
        if p.in_place and isinstance(env.get(p.in_place), np.ndarray):
            env[p.in_place] = env[p.in_place].copy()
    return LineCapture(filename, line, code, patterns, env)


def _kernel_text(text: str, operands: dict[str, str], in_place: str | None) -> str:
    """``chokepoint.relu_backward(d, h)`` with the user's expressions for the placeholders."""
    call = ast.parse(text, mode="eval").body
    call.args = [ast.parse(operands[a.id], mode="eval").body
                 if isinstance(a, ast.Name) and a.id in operands else a for a in call.args]
    if in_place:
        call.keywords.append(ast.keyword("out", ast.Name(in_place, ast.Load())))
    return ast.unparse(call)


def _compiled(node: ast.expr):
    """A node of the user's line, compiled to be evaluated on its own."""
    return compile(ast.fix_missing_locations(ast.Expression(node)), "<pattern>", "eval")


def _check_count(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``b.sum()`` of a boolean array against ``np.count_nonzero(b)``: the same count."""
    try:
        b = eval(_compiled(p.operands["b"]), capture_.env)
    except Exception:  # the user's code cannot be re-run here: skip it
        return None
    if type(b) is not np.ndarray or b.dtype != np.bool_ or b.size == 0:
        return None  # a masked array's sum leaves its masked elements out
    if int(b.sum()) != np.count_nonzero(b):
        return None
    before, after = measure_interleaved([b.sum, lambda: np.count_nonzero(b)],
                                        min_time=min_time, repeats=5)
    if after.median * FASTER > before.median:
        return None
    return {"source": f"{capture_.filename}:{capture_.line}", "code": capture_.code,
            "replaces": p.original,
            "statement": f"np.count_nonzero({ast.unparse(p.operands['b'])})",
            "original_s": before.median, "measured_s": after.median,
            "speedup": before.median / after.median,
            "note": "a Python int, where the sum gave a NumPy integer", "values": "same values"}


class _Replace(ast.NodeTransformer):
    """One node of a tree (by identity) replaced."""

    def __init__(self, old: ast.AST, new: ast.expr):
        self.old, self.new = old, new

    def generic_visit(self, node):
        if node is self.old:
            return self.new
        return super().generic_visit(node)


#: where a pattern's code cannot be hoisted into a statement before its line: it runs
#: conditionally, or once per item, or not at all
_NOT_HOISTED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.IfExp,
                ast.BoolOp)


def _plain(node: ast.expr) -> bool:
    """An expression without calls (evaluating it twice does the same work, changes nothing)."""
    return not any(isinstance(n, (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom))
                   for n in ast.walk(node))


def _hoistable(line: ast.Module, target: ast.AST) -> bool:
    """Whether ``target`` runs exactly once whenever its one-statement ``line`` runs."""
    if len(line.body) != 1 or not isinstance(
            line.body[0], (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
        return False
    parents = {child: node for node in ast.walk(line) for child in ast.iter_child_nodes(node)}
    node = target
    while node in parents:
        node = parents[node]
        if isinstance(node, _NOT_HOISTED):
            return False
    return True


def _free_name(capture_: LineCapture, line: ast.AST, name: str) -> str:
    """``name``, or it with underscores before it, where the line and its scope do not use it."""
    taken = set(capture_.env) | {n.id for n in ast.walk(line) if isinstance(n, ast.Name)}
    while name in taken:
        name = "_" + name
    return name


def _measured_rewrite(capture_: LineCapture, p: _Pattern, line: ast.Module, target: ast.expr,
                      first: str, replacement: str, agree, min_time: float) -> dict | None:
    """The user's ``target`` (``p.original``, in its one-statement ``line``) against
    ``replacement`` in its place (after a statement ``first`` run before the line, where not
    empty): both run on the user's values, ``agree(ours, theirs)`` says how their results
    agree (None: they do not; an exception: they do not), then timed side by side. The
    proposal as a rewrite, where it measured faster (its ``note`` empty: the caller's)."""
    first_code = compile(first, "<pattern>", "exec")
    replaced = compile(replacement, "<pattern>", "eval")
    user, scope, user_scope = _compiled(target), {**capture_.env, "np": np}, dict(capture_.env)

    def rewritten():
        exec(first_code, scope)
        return eval(replaced, scope)

    def original():
        return eval(user, user_scope)

    try:
        with np.errstate(all="ignore"):  # values at inputs the line never had (a table's)
            ours = rewritten()
            began = time.perf_counter()
            theirs = original()
            once = time.perf_counter() - began
            values = agree(ours, theirs)
    except Exception:
        return None
    if values is None:
        return None
    # both ran once: a slow original (a large integer product) is timed in fewer calls
    slow = once > SLOW_ORIGINAL_S
    before, after = measure_interleaved([original, rewritten], min_time=min_time,
                                        repeats=3 if slow else 5, warmup=not slow)
    if after.median * FASTER > before.median:
        return None
    second = ast.unparse(_Replace(target, ast.parse(replacement, mode="eval").body).visit(line))
    return {"source": f"{capture_.filename}:{capture_.line}", "code": capture_.code,
            "replaces": p.original, "statement": f"{first}\n{second}" if first else second,
            "original_s": before.median, "measured_s": after.median,
            "speedup": before.median / after.median, "note": "", "values": values}


def _target(line: ast.Module, p: _Pattern) -> ast.expr | None:
    """The pattern's node in the parsed line, where it runs once each time the line does."""
    target = next((n for n in ast.walk(line) if isinstance(n, ast.expr)
                   and ast.unparse(n) == p.original), None)
    return target if target is not None and _hoistable(line, target) else None


def _line_target(capture_: LineCapture, p: _Pattern) -> tuple[ast.Module, ast.expr] | None:
    """The captured line parsed, and the pattern's node in it (:func:`_target`); None where
    the line does not parse alone or the node does not run once each time the line does."""
    try:
        line = ast.parse(capture_.code)
    except SyntaxError:
        return None
    target = _target(line, p)
    return None if target is None else (line, target)


def _check_top(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``np.argsort(a)[..., :k]`` against a partition and a sort of the ``k`` found: the same
    values of ``a`` at the indices, in the same order (which of equal values, may differ).
    The two lines proposed are themselves run and checked against the user's expression."""
    a_node, k_node = p.operands["a"], p.operands["k"]
    if not (isinstance(a_node, (ast.Name, ast.Attribute, ast.Subscript)) and _plain(a_node)
            and _plain(k_node)):
        return None  # the proposal evaluates a twice: only names and views of them
    try:
        line = ast.parse(capture_.code)
        a, k, axis = (eval(_compiled(p.operands[n]), capture_.env) if n in p.operands else -1
                      for n in ("a", "k", "axis"))
    except Exception:  # the user's code cannot be re-run here: skip it
        return None
    target = _target(line, p)
    parts = p.top.slice.elts if isinstance(p.top.slice, ast.Tuple) else [p.top.slice]
    if target is None or type(a) is not np.ndarray \
            or a.ndim != len(parts) or not isinstance(k, (int, np.integer)) \
            or not isinstance(axis, (int, np.integer)) or axis % a.ndim != a.ndim - 1 \
            or not 0 < k < a.shape[-1] // 4:
        return None
    k = int(k)
    name = _free_name(capture_, line, "part")
    a_code, k_code = ast.unparse(a_node), ast.unparse(k_node)
    kth = (str(k - 1) if isinstance(k_node, ast.Constant) else f"{k_code} - 1"
           if isinstance(k_node, ast.Name) else f"({k_code}) - 1")
    if _reversed(p.top.value) is None:
        first = f"{name} = np.argpartition({a_code}, {kth}, axis=-1)[..., :{k_code}]"
        ordered = (f"np.take_along_axis({name}, np.argsort(np.take_along_axis({a_code}, "
                   f"{name}, axis=-1), axis=-1), axis=-1)")
    else:  # the k largest, largest first
        minus_k = "-" + (k_code if isinstance(k_node, (ast.Name, ast.Constant))
                         else f"({k_code})")
        first = f"{name} = np.argpartition({a_code}, {minus_k})[{minus_k}:]"
        ordered = f"{name}[np.argsort({a_code}[{name}])[::-1]]"

    call = _reversed(p.top.value)
    stable = _is_stable(p.top.value if call is None else call)

    def agree(ours, theirs) -> str | None:
        if not (isinstance(ours, np.ndarray) and isinstance(theirs, np.ndarray)
                and ours.shape == theirs.shape and np.array_equal(
                    np.take_along_axis(a, ours, -1), np.take_along_axis(a, theirs, -1),
                    equal_nan=a.dtype.kind in "fc")):
            return None
        if np.array_equal(ours, theirs):
            return "same values"
        # a stable sort: the user asked for one order of equal values
        return None if stable else "the same values at the indices, in the same order"

    found = _measured_rewrite(capture_, p, line, target, first, ordered, agree, min_time)
    if found is not None and found["values"] != "same values":
        found["note"] = "where values are equal, which of their indices comes first may differ"
    return found


def _check_extreme(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``np.argsort(a, axis)[-1]`` (the first or last entry along the sorted axis) against
    ``np.argmax(a, axis)`` (``np.argmin``; ``np.max``/``np.min`` of ``np.sort``): the same
    values of ``a`` at the indices (:func:`extreme_agreement`)."""
    sort = sort_call(p.extreme.value)
    if not _plain(sort.a) or (sort.axis is not None and not _plain(sort.axis)):
        return None  # a is evaluated again to check the values: only plain expressions
    found = _line_target(capture_, p)
    if found is None:
        return None
    line, target = found
    sorted_ = sorted_operand(sort, capture_.env)
    if sorted_ is None:
        return None
    a, axis = sorted_
    picked = extreme_selection(p.extreme, a.ndim)
    if picked is None or picked[0] != axis:
        return None
    notes = []

    def agree(ours, theirs) -> str | None:
        agreed = extreme_agreement(sort, picked[1], a, axis, ours, theirs)
        if agreed is None:
            return None
        notes.append(agreed[1])
        return agreed[0]

    found = _measured_rewrite(capture_, p, line, target, "",
                              extreme_code(sort, picked[1], a.ndim), agree, min_time)
    if found is not None:
        found["note"] = notes[-1]
    return found


#: ``np.unique`` is counted where the largest value is below the array's size or this: the
#: counts ``np.bincount`` makes are then no larger than the array, or small
UNIQUE_RANGE = 1 << 16


def _same_arrays(ours, theirs) -> str | None:
    """"same values" where two results (arrays, or tuples of them) have equal values, shapes
    and dtypes."""
    ours, theirs = (x if isinstance(x, tuple) else (x,) for x in (ours, theirs))
    same = len(ours) == len(theirs) and all(
        isinstance(o, np.ndarray) and isinstance(t, np.ndarray) and o.dtype == t.dtype
        and o.shape == t.shape and np.array_equal(o, t, equal_nan=o.dtype.kind in "fc")
        for o, t in zip(ours, theirs, strict=True))
    return "same values" if same else None


def _check_unique(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``np.unique(a, ...)`` of non-negative integers in a range no larger than ``a`` against
    ``np.bincount``: its nonzero counts are the unique values (in order) and their counts, and
    their running count is each value's index among them (the inverse)."""
    a_node = p.operands["a"]
    if not (isinstance(a_node, (ast.Name, ast.Attribute, ast.Subscript)) and _plain(a_node)):
        return None  # the proposal evaluates a twice: only names and views of them
    try:
        line = ast.parse(capture_.code)
        a = eval(_compiled(a_node), capture_.env)
    except Exception:  # the user's code cannot be re-run here: skip it
        return None
    target = _target(line, p)
    if target is None or type(a) is not np.ndarray or a.dtype.kind not in "iu" or a.size == 0 \
            or a.dtype.itemsize > np.dtype(np.intp).itemsize:
        return None
    # the counts' size is the largest value: checked before anything is made that large
    if a.min() < 0 or a.max() >= max(a.size, UNIQUE_RANGE):
        return None
    flags = _unique(p.unique)[1]
    name = _free_name(capture_, line, "counts")
    a_code = ast.unparse(a_node)
    first = f"{name} = np.bincount({a_code}{'' if a.ndim == 1 else '.ravel()'})"
    values = f"np.flatnonzero({name})"
    if a.dtype != np.intp:
        values += f".astype(np.{a.dtype.name})"
    results = [values]
    if "return_inverse" in flags:
        results.append(f"(np.cumsum({name} > 0) - 1)[{a_code}]")
    if "return_counts" in flags:
        results.append(f"{name}[{name} > 0]")
    replacement = results[0] if len(results) == 1 else f"({', '.join(results)})"
    found = _measured_rewrite(capture_, p, line, target, first, replacement, _same_arrays,
                             min_time)
    if found is not None:
        found["note"] = (f"for non-negative integers {a_code} (the counts have "
                         f"{a_code}.max() + 1 entries)")
    return found


def _check_contraction(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """A broadcast product summed along an axis against ``np.einsum`` of its factors: within
    the rounding error bound of a sum of that many products (``n * eps`` of the sum of their
    magnitudes, for each value), where the order of the additions differs."""
    factors, axis = _contraction(p.contraction)
    call = p.contraction
    product = call.func.value if isinstance(call.func, ast.Attribute) and \
        call.func.attr == "sum" and not call.args else call.args[0]
    try:
        line = ast.parse(capture_.code)
        arrays = [eval(compile(code, "<factor>", "eval"), dict(capture_.env))
                  for code, _ in factors]
    except Exception:  # the user's code cannot be re-run here: skip it
        return None
    target = _target(line, p)
    # real factors (a boolean neighbourhood times velocities too) whose product is a float
    if target is None or not all(type(a) is np.ndarray and a.dtype.kind in "biuf"
                                 for a in arrays) \
            or np.result_type(*arrays).kind != "f":
        return None
    spec = _einsum_spec(factors, [a.ndim for a in arrays], axis)
    if spec is None:
        return None
    code = f"np.einsum({spec!r}, {factors[0][0]}, {factors[1][0]}, optimize=True)"
    sides = [_compiled(side) for side in (product.left, product.right)]

    def agree(ours, theirs) -> str | None:
        if not (isinstance(ours, np.ndarray) and isinstance(theirs, np.ndarray)
                and ours.shape == theirs.shape and ours.dtype == theirs.dtype):
            return None
        # each value is a sum of as many products as the summed axis is long
        views = [eval(side, dict(capture_.env)) for side in sides]
        terms = np.broadcast_shapes(*(v.shape for v in views))[axis]
        bound = np.einsum(spec, *(np.abs(a, dtype=np.float64) for a in arrays), optimize=True)
        tolerance = terms * np.finfo(theirs.dtype).eps * bound
        differ = ours != theirs
        if not np.isfinite(ours[differ]).all() or not np.isfinite(theirs[differ]).all() \
                or not (np.abs(ours.astype(np.float64) - theirs) <= tolerance).all():
            return None
        return ("same values" if np.array_equal(ours, theirs) else
                f"values within the rounding of a sum of {terms} products")

    # shapes einsum does not take (an axis broadcast from length 1) raise: not proposed
    return _measured_rewrite(capture_, p, line, target, "", code, agree, min_time)


def _check_table(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """A NumPy function of a non-negative integer array ``q`` with at least
    :data:`TABLE_ELEMENTS_PER_VALUE` elements per value of its range, against the function
    evaluated once on ``np.arange(q.max() + 1)`` (``q``'s dtype) and indexed by ``q``: the
    same values, shape and dtype."""
    q_node = p.operands["q"]
    parsed = _line_target(capture_, p)
    if parsed is None:
        return None
    line, target = parsed
    if isinstance(q_node, ast.Name):
        name, first = q_node.id, ""
        q = capture_.env.get(name)
    else:  # a view or copy of an array (image.flatten()): made once, before the lookup
        name = _free_name(capture_, line, "q")
        first = f"{name} = {ast.unparse(q_node)}"
        try:
            q = eval(_compiled(q_node), dict(capture_.env))
        except Exception:  # the user's code cannot be re-run here: skip it
            return None
    if type(q) is not np.ndarray or q.dtype.kind not in "iu" or q.size == 0 \
            or q.min() < 0 or (int(q.max()) + 1) * TABLE_ELEMENTS_PER_VALUE > q.size:
        return None
    call = ast.parse(p.original, mode="eval").body
    try:  # the other arguments: scalars for a ufunc, 1-D xp and fp for np.interp
        others = [np.ndim(eval(_compiled(a), capture_.env)) for a in p.table.args[1:]]
    except Exception:
        return None
    if others != ([1, 1] if call.func.attr == "interp" else [0] * len(others)):
        return None
    # int(): q.max() + 1 in q's dtype wraps at its largest value (255 for uint8)
    call.args[0] = ast.parse(f"np.arange(int({name}.max()) + 1, dtype={name}.dtype)",
                             mode="eval").body
    code = f"{ast.unparse(call)}[{name}]"
    found = _measured_rewrite(capture_, p, line, target, first, code, _same_arrays, min_time)
    if found is not None:
        found["note"] = f"for non-negative integers {name} (the table has {name}.max() + 1 entries)"
    return found


def _hoisted(capture_: LineCapture, line: ast.Module, nodes: dict[str, ast.expr]
             ) -> tuple[str, dict[str, str]]:
    """A statement computing each operand that is not a name or a view of one once, into a
    name free in the line's scope, and the code of each operand to use in a rewrite (the
    operands make no call: the checks run them many times)."""
    first, codes = [], {}
    for key, node in nodes.items():
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and _plain(node):
            codes[key] = ast.unparse(node)
        else:
            name = _free_name(capture_, line, key)
            first.append(f"{name} = {ast.unparse(node)}")
            codes[key] = name
    return "; ".join(first), codes


def _operand_values(capture_: LineCapture, nodes) -> list | None:
    try:
        return [eval(_compiled(node), capture_.env) for node in nodes]
    except Exception:  # the user's code cannot be re-run here: skip it
        return None


def _float_operand(capture_: LineCapture, p: _Pattern
                   ) -> tuple[ast.Module, ast.expr, np.ndarray] | None:
    """The line, the pattern's node in it (:func:`_line_target`) and its operand ``x``'s
    value, where ``x`` makes no call and is a float array of two elements or more."""
    parsed = _line_target(capture_, p)
    values = (_operand_values(capture_, [p.operands["x"]])
              if parsed is not None and _plain(p.operands["x"]) else None)
    if values is None or type(values[0]) is not np.ndarray \
            or values[0].dtype.kind != "f" or values[0].size < 2:
        return None
    return (*parsed, values[0])


def _close(ours, theirs) -> str | None:
    """How two float results of one shape and dtype agree, within :data:`CLOSE_ULP`."""
    if not (isinstance(ours, np.ndarray) and isinstance(theirs, np.ndarray)
            and ours.dtype == theirs.dtype and ours.shape == theirs.shape):
        return None
    ulp = max_ulp(ours, theirs)
    return None if ulp > CLOSE_ULP else (
        "same values" if ulp == 0 else f"values within {ulp:.2g} ulp")


#: how far ``np.exp(x * log c)`` may be from ``c ** x``, in ulp of each element: the product
#: rounds to half an ulp of ``x log c``, which the exponential turns into ``|x log c| / 2`` ulp
#: of the result (10 ** (dB / 20) over -40..0 dB: 5 ulp; 10 ** -20: 52 ulp, refused)
EXP_ULP = 16


def _close_each(ours, theirs) -> str | None:
    """How two float results of one shape and dtype agree, each element within
    :data:`EXP_ULP` of its own value's spacing (NaN and infinities where the other's are)."""
    if not (isinstance(ours, np.ndarray) and isinstance(theirs, np.ndarray)
            and ours.dtype == theirs.dtype and ours.dtype.kind == "f"
            and ours.shape == theirs.shape):
        return None
    finite = np.isfinite(theirs)
    if not np.array_equal(ours[~finite], theirs[~finite], equal_nan=True):
        return None
    o, t = ours[finite], theirs[finite]
    ulp = float(np.max(np.abs(o - t) / np.spacing(np.abs(t)))) if t.size else 0.0
    return None if not ulp <= EXP_ULP else (
        "same values" if ulp == 0 else f"values within {ulp:.2g} ulp, each element")


def _check_power(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``x ** 3`` (or 4) of a float array against ``x * x * x``: within :data:`CLOSE_ULP`
    of the power (each product rounds once)."""
    parsed = _float_operand(capture_, p)
    if parsed is None:
        return None
    line, target, _ = parsed
    first, codes = _hoisted(capture_, line, p.operands)
    code = " * ".join([codes["x"]] * p.power)
    found = _measured_rewrite(capture_, p, line, target, first, code, _close, min_time)
    if found is not None:
        found["note"] = (f"NumPy computes ** {p.power} with the C library's pow per element; "
                         "the products round once each")
    return found


def _check_exp(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``c ** x`` of a float array and a positive number ``c`` against
    ``np.exp(x * log(c))``, ``log(c)`` written as a Python float (a NumPy scalar would make a
    float32 ``x`` float64): within :data:`CLOSE_ULP` of the power on the user's values (the
    product's rounding grows with ``|x log c|``: large exponents fail the check), each element
    against its own value (a tiny power is as exact as a large one). Not where ``c`` and
    every ``x`` are integers: ``pow`` gives those powers exactly, and a cast to integers
    after the line would turn 7.999... into 7."""
    parsed = _float_operand(capture_, p)
    if parsed is None:
        return None
    line, target, x_value = parsed
    finite = x_value[np.isfinite(x_value)]
    if p.base.is_integer() and np.array_equal(finite, np.round(finite)):
        return None
    x = ast.unparse(p.operands["x"])  # evaluated once, as in the power
    if not isinstance(p.operands["x"], (ast.Name, ast.Attribute, ast.Subscript)):
        x = f"({x})"
    code = f"np.exp({x} * {math.log(p.base)!r})"
    found = _measured_rewrite(capture_, p, line, target, "", code, _close_each, min_time)
    if found is not None:
        found["note"] = (f"{math.log(p.base)!r} is log({p.base:g}); NumPy computes a number "
                         "to an array's powers with the C library's pow per element, and exp "
                         "vectorised")
    return found


def _add_at_operands(a, i, v, v_node: ast.expr) -> tuple[tuple[np.ndarray, ...], bool] | None:
    """The index arrays of ``np.add.at(a, i, v)`` and whether ``v`` is one number, where
    bincount computes the same sums: ``a`` a float array of 32 bits or more (an integer one
    where ``v`` is an integer: exact), ``i`` a 1-D array of non-negative positions along
    ``a``'s first axis or a tuple of such arrays, one per leading axis, and ``v`` one value (a
    row of ``a``'s remaining axes) per position or a number written as such (``v_node``: a
    name's value may be another number, infinite, at the next run)."""
    index = i if type(i) is tuple else (i,)
    if not (type(a) is np.ndarray and a.size and 1 <= len(index) <= a.ndim
            and all(type(k) is np.ndarray and k.dtype.kind in "iu" and k.ndim == 1
                    and k.shape == index[0].shape for k in index) and index[0].size
            and all(k.min() >= 0 and k.max() < n
                    for k, n in zip(index, a.shape[:len(index)], strict=True))):
        return None
    scalar = isinstance(v_node, ast.Constant) and type(v_node.value) in (int, float)
    if not scalar and not (type(v) is np.ndarray and v.dtype.kind in "fiub"
                           and v.shape == index[0].shape + a.shape[len(index):]):
        return None
    if (a.dtype.kind != "f" or a.dtype.itemsize < 4) and not (
            a.dtype.kind == "i" and scalar and type(v) is int):
        return None  # float16 saturates where the count does not
    return index, scalar


def _check_add_at(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``np.add.at(a, i, v)`` as its own line (see :func:`_add_at_operands`), against adding
    to ``a`` (``out=a``) the sums ``np.bincount`` makes of ``a``'s flat positions: the same
    sums added in another order, so within the rounding of a sum of as many terms as an index
    repeats (a number ``v`` times the count, for floats). Both run on copies of ``a``."""
    parsed = _statement_value(capture_)
    if parsed is None or not isinstance(parsed[0].body[0], ast.Expr) \
            or ast.unparse(parsed[1]) != p.original:
        return None  # its value used, or more on its line: left alone
    values = _operand_values(capture_, [p.operands[k] for k in ("a", "i", "v")])
    found = None if values is None else _add_at_operands(*values, p.operands["v"])
    if found is None:
        return None
    a, i, v = values
    index, scalar = found
    name = ast.unparse(p.operands["a"])
    i_node, v_code = p.operands["i"], _atom(p.operands["v"])
    k = len(index)
    if k > 1:
        shape = f"{name}.shape" if k == a.ndim else f"{name}.shape[:{k}]"
        position = f"np.ravel_multi_index({_atom(i_node)}, {shape})"
    elif type(i) is tuple:  # one array in a tuple
        position = (_atom(i_node.elts[0]) if isinstance(i_node, ast.Tuple)
                    else f"{_atom(i_node)}[0]")
    else:
        position = _atom(i_node)
    weights = "" if scalar else f", weights={v_code}" + (".ravel()" if a.ndim > k else "")
    if a.ndim > k:
        row = f"{name}[{', '.join(['0'] * k)}].size"
        # the flat positions in intp: a narrow index type would wrap in the product
        position = (f"({position}.astype(np.intp)[:, None] * {row} "
                    f"+ np.arange({row})).ravel()")
    sums = f"np.bincount({position}{weights}, minlength={name}.size)"
    if a.ndim > 1:
        sums += f".reshape({name}.shape)"
    if scalar and v != 1:
        sums = f"{v_code} * {sums}"
    # into the array by out=: "a +=" would make a global or enclosing name a local
    code = f"np.add({name}, {sums}, out={name})"
    ours, theirs = a.copy(), a.copy()
    try:
        compiled = compile(code, "<pattern>", "exec")
        np.add.at(theirs, i, v)
        exec(compiled, {**capture_.env, "np": np, name: ours})
    except Exception:
        return None
    flat = np.ravel_multi_index(index, a.shape[:k])
    # each element's sum has as many terms as its index repeats, one more for a's own value
    repeats = int(np.bincount(flat).max()) + 1
    if a.dtype.kind == "f":
        magnitude = np.abs(a).astype(np.float64)
        np.add.at(magnitude, i, np.abs(np.asarray(v, np.float64)))
        close = np.abs(ours.astype(np.float64) - theirs) <= repeats * np.finfo(a.dtype).eps \
            * magnitude
    else:
        close = ours == theirs
    if not (close | (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))).all():
        return None
    scope = {**capture_.env, "np": np, name: a.copy()}
    work = a.copy()

    def original():
        np.add.at(work, i, v)

    def rewritten():
        exec(compiled, scope)

    before, after = measure_interleaved([original, rewritten], min_time=min_time, repeats=5)
    if after.median * FASTER > before.median:
        return None
    same = np.array_equal(ours, theirs)
    return {"source": f"{capture_.filename}:{capture_.line}", "code": capture_.code,
            "replaces": p.original, "statement": code, "original_s": before.median,
            "measured_s": after.median, "speedup": before.median / after.median,
            "note": ("np.add.at adds element by element; np.bincount sums each position's "
                     "values in one pass, then they are added"),
            "values": "same values" if same else
            f"values within the rounding of sums of up to {repeats} terms"}


def _check_diagonal(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``M @ np.diag(v)`` (``v`` a 1-D float array, ``M`` a float matrix or vector) against
    ``M * v``, and ``np.diag(v) @ M`` against ``v[:, None] * M`` (``v * M`` for a vector):
    each element one product either way, where the matrix product adds zeros to it."""
    parsed = _line_target(capture_, p)
    values = (_operand_values(capture_, [p.operands["v"], p.operands["m"]])
              if parsed is not None else None)
    if values is None:
        return None
    v, m = values
    if not (type(v) is np.ndarray and v.ndim == 1 and v.dtype.kind == "f"
            and type(m) is np.ndarray and m.ndim in (1, 2) and m.dtype.kind == "f"):
        return None
    line, target = parsed
    v_code, m_code = _atom(p.operands["v"]), _atom(p.operands["m"])
    if p.diagonal == "right":
        code = f"{m_code} * {v_code}"
    else:
        code = f"{v_code}[:, None] * {m_code}" if m.ndim == 2 else f"{v_code} * {m_code}"
    found = _measured_rewrite(capture_, p, line, target, "", f"({code})", _close, min_time)
    if found is not None:
        found["note"] = (f"np.diag makes a {v.size} x {v.size} matrix of zeros and multiplies "
                         "by all of it; scaling by the vector computes the same products")
    return found


def _check_roll(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """Two nested ``np.roll`` of an array against one with both shifts and axes: the same
    values, shape and dtype (checked on the user's array)."""
    parsed = _line_target(capture_, p)
    if parsed is None:
        return None
    line, target = parsed
    shifts, axes = p.rolls
    code = (f"np.roll({ast.unparse(p.operands['a'])}, "
            f"({', '.join(ast.unparse(n) for n in shifts)}), "
            f"axis=({', '.join(ast.unparse(n) for n in axes)}))")
    found = _measured_rewrite(capture_, p, line, target, "", code, _same_arrays, min_time)
    if found is not None:
        found["note"] = "np.roll copies the whole array each call: one call rolls both axes"
    return found


def _same_results(ours, theirs) -> str | None:
    """"same values" where two results (arrays, NumPy or Python numbers, or tuples of them)
    have equal values, shapes and dtypes."""
    def python(x) -> bool:  # Python's containers and numbers (NumPy's numbers: below)
        return isinstance(x, (list, dict, set)) or (
            isinstance(x, (int, float, complex, str)) and not isinstance(x, np.generic))

    if python(ours) or python(theirs):
        try:  # Python's numbers against NumPy's: equal where their values are
            same = type(ours) is type(theirs) and bool(ours == theirs)
        except (TypeError, ValueError):  # elements that are arrays: no single truth
            return None
        return "same values" if same else None
    ours, theirs = (x if isinstance(x, tuple) else (x,) for x in (ours, theirs))
    if len(ours) != len(theirs):
        return None
    for o, t in zip(ours, theirs, strict=True):
        if type(o) is not type(t):
            return None
        o, t = np.asarray(o), np.asarray(t)
        if o.dtype != t.dtype or o.shape != t.shape or not np.array_equal(
                o, t, equal_nan=o.dtype.kind in "fc"):
            return None
    return "same values"


def _statement_value(capture_: LineCapture) -> tuple[ast.Module, ast.expr] | None:
    """The captured line parsed and its one statement's value (an assignment's, a return's,
    an expression's), where it has one."""
    try:
        line = ast.parse(capture_.code)
    except SyntaxError:
        return None
    body = line.body[0] if len(line.body) == 1 else None
    if not isinstance(body, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)) \
            or body.value is None:
        return None
    return line, body.value


def _check_tolist(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """A statement whose comprehension iterates over 1-D arrays of dtypes Python computes
    alike (:func:`python_alike`, and strings), each element a NumPy scalar, against the same
    with ``.tolist()`` of each: Python's own objects, made in one call. The same values, where
    the statement's value compares equal (a generator consumed by its call included; a NumPy
    number as the Python number of its value)."""
    parsed = _statement_value(capture_)
    if parsed is None:
        return None
    line, value = parsed
    arrays = _operand_values(capture_, p.iterated)
    alike = python_alike(line)
    if arrays is None or not all(
            type(a) is np.ndarray and a.ndim == 1 and a.size >= 2
            and (a.dtype in alike or a.dtype.kind == "U") for a in arrays):
        return None
    # .tolist() of each iterated array, in a copy (the transformer changes what it visits)
    codes = {ast.unparse(n) for n in p.iterated}
    rewritten = ast.parse(ast.unparse(value), mode="eval").body
    for node in list(ast.walk(rewritten)):
        if isinstance(node, _COMPREHENSIONS):
            for generator in node.generators:
                for array in _iterated(generator.iter):
                    if ast.unparse(array) in codes:
                        listed = ast.Call(func=ast.Attribute(value=array, attr="tolist",
                                                             ctx=ast.Load()),
                                          args=[], keywords=[])
                        generator.iter = _Replace(array, listed).visit(generator.iter)
    def agree(ours, theirs):  # a sum of the elements: a Python number where NumPy's was
        return _same_results(*(x.item() if isinstance(x, np.generic) else x
                               for x in (ours, theirs)))

    found = _measured_rewrite(capture_, p, line, value, "", ast.unparse(rewritten), agree,
                              min_time)
    if found is not None:
        found["note"] = ("iterating over an array makes a NumPy scalar of each element; "
                         ".tolist() makes Python's own in one call (what the line computes "
                         "from them is Python's numbers too)")
    return found


def _check_quantiles(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """A statement's value with its order statistics of one array taken by one call
    (``np.percentile(a, [99, 1])``, into a name computed before the line) against the
    statement as written: the same values (NumPy interpolates each ``q`` alike)."""
    parsed = _statement_value(capture_)
    if parsed is None:
        return None
    line, statement_value = parsed
    # the calls as parsed again, in the statement's value, each run once whenever it runs
    codes = [ast.unparse(c) for c in p.quantiles]
    calls = [n for n in ast.walk(statement_value) if isinstance(n, ast.Call)
             and ast.unparse(n) in codes]
    if len(calls) != len(codes) or not all(_hoistable(line, c) for c in calls):
        return None
    values = _operand_values(capture_, [p.operands["a"]])
    if values is None or type(values[0]) is not np.ndarray or values[0].size < 2:
        return None
    name = _free_name(capture_, line, "q")
    first_call = ast.parse(codes[0], mode="eval").body
    first_call.args[1] = ast.List(elts=[c.args[1] for c in calls], ctx=ast.Load())
    first = f"{name} = {ast.unparse(first_call)}"
    # the replacements made on a copy (the transformer changes the tree it visits)
    value = ast.parse(ast.unparse(statement_value), mode="eval").body
    copies = [n for n in ast.walk(value) if isinstance(n, ast.Call) and ast.unparse(n) in codes]
    for call in copies:
        value = _Replace(call, ast.parse(f"{name}[{codes.index(ast.unparse(call))}]",
                                         mode="eval").body).visit(value)
    found = _measured_rewrite(capture_, p, line, statement_value, first, ast.unparse(value),
                              _same_results, min_time)
    if found is not None:
        found["note"] = (f"each np.{first_call.func.attr} call partitions all of "
                         f"{ast.unparse(p.operands['a'])}; one call with the list of q "
                         "selects them in one")
    return found


#: a float64 matrix product of integers is exact while every sum of products stays below this
#: (and within the result's integer type, where NumPy wraps and a cast back does not)
EXACT_FLOAT64 = 2 ** 53
#: seconds of one run of the code a rewrite replaces from which it is timed in fewer calls
SLOW_ORIGINAL_S = 0.1


def _check_matmul(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """A matrix product of integer arrays (NumPy's own loop, no BLAS) against the product of
    their float64 copies cast back: the same values wherever every sum of products is below
    2**53 in magnitude (bounded here from the operands' largest values)."""
    parsed = _line_target(capture_, p)
    if parsed is None:
        return None
    line, target = parsed
    plain = _plain(p.operands["a"]) and _plain(p.operands["b"])
    values = _operand_values(capture_, [p.operands["a"], p.operands["b"]]) if plain else None
    if values is None:
        return None
    a, b = values
    if not all(type(v) is np.ndarray and v.dtype.kind in "iu" and 1 <= v.ndim <= 2
               and v.size for v in (a, b)):
        return None
    dtype = np.result_type(a, b)

    def largest(v):  # as floats: np.abs of the smallest int64 is itself, negative
        return max(abs(float(v.min())), abs(float(v.max())))

    bound = a.shape[-1] * largest(a) * largest(b)
    if bound >= min(EXACT_FLOAT64, float(np.iinfo(dtype).max)):
        return None
    first, codes = _hoisted(capture_, line, p.operands)
    code = (f"({codes['a']}.astype(np.float64) @ {codes['b']}.astype(np.float64))"
            f".astype(np.{dtype.name})")
    found = _measured_rewrite(capture_, p, line, target, first, code, _same_arrays, min_time)
    if found is not None:
        found["note"] = ("NumPy multiplies integer matrices without BLAS; in float64 the "
                         "products are exact while every sum stays below 2**53 (here at most "
                         f"{bound:.3g})")
    return found


def _check_gathered(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    """``a[i] <op> b[i]`` of two arrays of one shape and an integer index array, against
    ``(a <op> b)[i]``: the same values, shape and dtype."""
    parsed = _line_target(capture_, p)
    if parsed is None:
        return None
    line, target = parsed
    values = _operand_values(capture_, [p.operands[k] for k in ("a", "b", "i")])
    if values is None:
        return None
    a, b, i = values
    if not (type(a) is np.ndarray and type(b) is np.ndarray and type(i) is np.ndarray
            and a.shape == b.shape and a.ndim >= 1 and i.dtype.kind in "iu" and i.size):
        return None
    node = ast.parse(p.original, mode="eval").body
    whole = ast.BinOp(left=node.left.value, op=node.op, right=node.right.value)
    # the operation on every element, those the index never names too: where it raises or
    # warns there (a node without edges: outdeg 0), the rewrite would, and the line does not
    try:
        with np.errstate(all="raise"):
            _OPERATORS[type(node.op)](a, b)
    except (ArithmeticError, ValueError, TypeError):
        return None
    code = ast.unparse(ast.Subscript(value=whole, slice=node.left.slice, ctx=ast.Load()))
    found = _measured_rewrite(capture_, p, line, target, "", code, _same_arrays, min_time)
    if found is not None:
        found["note"] = ("the operation on the arrays themselves, then one gather: "
                         f"{a.size:,} elements computed where the gathers make "
                         f"{i.size * (a.size // a.shape[0]):,}")
    return found


#: the patterns with checks of their own, by the field of :class:`_Pattern` that marks them
_CHECKS = (("gathered", _check_gathered), ("power", _check_power), ("matmul", _check_matmul),
           ("base", _check_exp), ("scatter", _check_add_at), ("rolls", _check_roll),
           ("quantiles", _check_quantiles), ("count", _check_count), ("top", _check_top),
           ("extreme", _check_extreme),
           ("unique", _check_unique), ("contraction", _check_contraction),
           ("table", _check_table), ("iterated", _check_tolist),
           ("diagonal", _check_diagonal))


def _check(capture_: LineCapture, p: _Pattern, min_time: float) -> dict | None:
    for marked, check in _CHECKS:
        if getattr(p, marked):
            return check(capture_, p, min_time)
    # the ReLU family: a registered kernel with the pattern's values
    found_values = _operand_values(capture_, p.operands.values())
    if found_values is None or not all(isinstance(v, np.ndarray) and v.dtype.kind == "f"
                                       for v in found_values):
        return None
    values = dict(zip(p.operands, found_values, strict=True))
    code = compile(p.template, "<pattern>", "eval")
    namespace = {"np": np}
    try:
        result = eval(code, {**namespace, **values})
        found = find_rewrite(p.template, namespace, values, result)
    except Exception:  # shapes that do not broadcast and the like
        return None
    if found is None:
        return None
    if p.in_place:
        d, h = values["d"], values["h"]
        work = d.copy()
        zero = 1 if "at_zero=1" in found.statement else 0
        mask_code = compile(f"w[h {'<=' if '<=' in p.template else '<'} 0] = 0", "<pattern>",
                            "exec")

        def original():
            exec(mask_code, {"w": work, "h": h})

        def rewritten():
            kernels.relu_backward(work, h, at_zero=zero, out=work)
    else:
        def original():
            return eval(code, {**namespace, **values})

        rewritten = found.call
    settle(rewritten)
    before, after = measure_interleaved([original, rewritten], min_time=min_time, repeats=5)
    if after.median * FASTER > before.median:
        return None
    operands = {k: ast.unparse(v) for k, v in p.operands.items()}
    return {"source": f"{capture_.filename}:{capture_.line}", "code": capture_.code,
            "replaces": p.original,
            "statement": _kernel_text(found.statement, operands, p.in_place),
            "original_s": before.median, "measured_s": after.median,
            "speedup": before.median / after.median, "note": found.note,
            "values": found.values}


def line_rewrites(captures: list[LineCapture], min_time: float = 0.02) -> list[dict]:
    """The patterns of the captured lines that a chokepoint kernel computes with the same
    values, measured faster: one dict per rewrite (``source``, ``code``, ``replaces``,
    ``statement``, ``original_s``, ``measured_s``, ``speedup``, ``note``)."""
    out, seen = [], set()
    for c in captures:
        for p in c.patterns:
            key = (c.filename, c.line, p.original)
            if key in seen:
                continue
            seen.add(key)
            with np.errstate(all="ignore"):  # the rewrites' values at inputs never seen
                found = _check(c, p, min_time)
            if found is not None:
                out.append(found)
    return out
