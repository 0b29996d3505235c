"""``chokepoint.fuse``: elementwise NumPy code as one parallel numba kernel.

A call validates its inputs, traces the code on the first call per signature (the dtypes of its
inputs, or the Python type of a scalar), then broadcasts: axes of length 1 are dropped, adjacent
axes that every operand has or lacks alike are merged, and each operand is passed with only its
own axes (a scalar when it has none). The kernel is compiled per graph and per loop structure;
numba specialises it per memory layout.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import itertools
import math
import threading

import numba
import numpy as np

from ..kernels import engine_numba, pool
from ..kernels.layout import may_share, partial_overlap
from . import blocks, codegen, costs
from .statements import Statements, needs_statements, writes_in_place
from .trace import FuseError, trace

__all__ = ["Fused", "fuse"]

_KNOWN = {"np", "numpy"} | set(dir(builtins))
#: whether fuse's untimed calls count in the chooser's decisions: not, as before the kernels'
#: launcher took its calls. Counted, a call longer than PERIOD_MAX ends its period, so every
#: call decides; beside a busy core a fused row softmax's measured speedup fell from
#: 1.35-1.51x to 1.10-1.50x (benchmarks/RESULTS.md)
_COUNTED = False


def fuse(code):
    """Fuse elementwise NumPy code into one parallel kernel.

    Parameters
    ----------
    code : str or callable
        An expression (``"np.sin(a) + np.log(b) * np.sqrt(c)"``), whose free names become keyword
        arguments, or a function of arrays (also usable as a decorator).

    Returns
    -------
    Fused
        Callable as the code: ``f(a=a, b=b, c=c, out=None)`` for an expression, the function's own
        signature plus a keyword ``out=`` for a function.

    Examples
    --------
    >>> import numpy as np, chokepoint
    >>> f = chokepoint.fuse("a * b + 1")
    >>> f(a=np.arange(3.0), b=2.0)
    array([1., 3., 5.])
    """
    if isinstance(code, str):
        return Fused(*_from_expression(code), source=code)
    if callable(code):
        return functools.wraps(code)(Fused(code, inspect.signature(code), repr(code),
                                           source=code))
    raise TypeError(f"fuse: expected an expression string or a function, got "
                    f"{type(code).__name__}")


def _from_expression(code: str):
    try:
        tree = ast.parse(code.strip(), mode="eval")
    except SyntaxError as exc:
        raise SyntaxError(f"fuse: {code!r} is not one Python expression: {exc.msg}") from None
    names: list[str] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id not in _KNOWN and node.id not in names):
            names.append(node.id)
    names.sort(key=lambda n: code.index(n))
    compiled = compile(tree, "<fuse>", "eval")
    namespace = {"np": np, "numpy": np, "__fuse_source__": code.strip()}

    def evaluate(**values):
        return eval(compiled, namespace, values)

    signature = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names])
    return evaluate, signature, code.strip()


class Fused:
    """A fused elementwise function; see :func:`fuse`.

    Attributes
    ----------
    code : str
        The expression, or the function's repr.
    arguments : tuple of str
        The names of the arrays and scalars it takes, in order (read-only).
    plans : tuple of Plan
        The kernel plans traced so far, oldest first (read-only).
    """

    def __init__(self, func, signature: inspect.Signature, code: str, source=None):
        for p in signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise FuseError(f"fuse: {code} takes *{p.name}; fused functions take named "
                                "arrays and scalars only")
        self._func = func
        # a function with loops, branches or shapes that does not trace whole runs as Python,
        # each of its array statements fused (see .statements): made when a trace fails
        self._loops = source is func and needs_statements(func)
        self._in_place = source is func and writes_in_place(func)
        self._statements: Statements | None = None
        self._source = source  # what fuse() was given: a pickle rebuilds from it
        self._signature = signature
        self.code = code
        self.__signature__ = signature.replace(parameters=[
            *signature.parameters.values(),
            inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)])
        self._traces: dict[tuple, tuple] = {}
        self._lock = threading.Lock()
        # a call naming every argument by keyword, none with a default, needs no binding
        plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                    and p.default is p.empty for p in signature.parameters.values())
        self._keywords = frozenset(signature.parameters) if plain else None
        self._names = tuple(signature.parameters)
        # and one passing them all by position, where the signature allows it
        self._positional = plain and all(p.kind == p.POSITIONAL_OR_KEYWORD
                                         for p in signature.parameters.values())
        #: input dtypes -> the small call's kernels (see _small), or False: not for them
        self._small_calls: dict[tuple, tuple | bool] = {}

    def __repr__(self) -> str:
        return f"chokepoint.fuse({self.code})"

    @property
    def arguments(self) -> tuple[str, ...]:
        """The names of the arrays and scalars it takes, in order (``out`` aside)."""
        return tuple(self._signature.parameters)

    @property
    def plans(self) -> tuple[codegen.Plan, ...]:
        """The kernel plans traced so far, one per signature of input dtypes, oldest first
        (read-only: :meth:`plan` makes them)."""
        return tuple(self._traces.values())

    def __reduce__(self):
        # to a dask.distributed worker (or any pickle): the expression or function it was made
        # from; the traces and kernels are rebuilt there (numba's disk cache has the kernels)
        if self._source is None:
            raise TypeError(f"{self!r} was not made by chokepoint.fuse and cannot be pickled")
        if not isinstance(self._source, str) and _importable(self):
            return self.__qualname__  # a decorated module-level function: by reference
        return fuse, (self._source,)

    # ------------------------------------------------------------------------------ calling
    def __call__(self, *args, out=None, **kwargs):
        if self._statements is None and self._in_place:
            try:
                self._statements = Statements(self._func)
            except FuseError as why:
                raise FuseError(f"{why} (it updates an array in place, which a whole trace "
                                "would not)") from None
        if self._statements is None:
            try:
                return self._call(args, kwargs, out)
            except _NotWhole as exc:
                try:
                    self._statements = Statements(self._func)
                except FuseError as why:
                    raise FuseError(f"{exc.__cause__}; {why}") from exc.__cause__
        return self._call_statements(args, kwargs, out)

    def _call(self, args: tuple, kwargs: dict, out):
        if self._keywords is not None:  # a small call first (see _small)
            if not kwargs and self._positional and len(args) == len(self._names):
                found = self._small(args, out)
            elif not args and kwargs.keys() == self._keywords:
                found = self._small([kwargs[n] for n in self._names], out)
            else:
                found = None
            if found is not None:
                return found
        if not args and self._keywords is not None and kwargs.keys() == self._keywords:
            values = {n: kwargs[n] for n in self._signature.parameters}  # the signature's order
        else:
            try:
                bound = self._signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{self!r}: {exc}") from None
            bound.apply_defaults()
            values = dict(bound.arguments)
        if any(type(v).__module__.startswith("dask") for v in values.values()):
            return self._on_dask(values, out)
        values = {n: _value(v) for n, v in values.items()}
        p = self.plan({n: _kind(v) for n, v in values.items()})
        return _run(p, values, out)

    def _small(self, values, out=None) -> np.ndarray | None:
        """The call on C-contiguous arrays of one shape, fewer elements than the parallel
        kernel takes: the serial kernel on them, found once per signature of dtypes. The
        general path's checks cost about 12 us a call, 25 times the kernel on 128 float64
        elements. ``out``: None, or a C-contiguous writeable array of the result's shape and
        dtype that is one of the arguments or shares no memory with them. None where the
        call is not that, with nothing written (the general path takes it, and raises its
        errors)."""
        first = values[0]
        if type(first) is not np.ndarray:
            return None
        shape, n = first.shape, first.size
        if not shape or not 0 < n < engine_numba.settings.parallel_min:
            return None
        key = []
        for v in values:
            if type(v) is not np.ndarray or v.shape != shape or not v.flags.c_contiguous:
                return None
            key.append(v.dtype)
        found = self._small_calls.get(tuple(key))
        if found is None:
            found = self._small_calls[tuple(key)] = self._small_kernels(tuple(key))
        if found is False:
            return None
        kernel, exact, order, weak, dtype = found
        in_place = False
        if out is None:
            result = (np.empty(shape, dtype) if n * dtype.itemsize < pool.MIN_BYTES
                      else pool.empty(shape, dtype))
        else:
            if (type(out) is not np.ndarray or out.shape != shape or out.dtype != dtype
                    or not out.flags.c_contiguous or not out.flags.writeable):
                return None
            for v in values:
                if v is not out and np.may_share_memory(v, out):
                    return None
            # as _run_kernel: in place where the kernel reads out
            in_place = any(values[i] is out for i in order)
            result = out
        if len(shape) > 1:
            flat, operands = result.reshape(-1), [values[i].reshape(-1) for i in order]
        else:
            flat, operands = result, [values[i] for i in order]
        if in_place and exact is not None:  # the inputs would be gone: exact only, as _run_kernel
            exact(flat, *operands, *weak)
        elif kernel(flat, *operands, *weak) and exact is not None:
            exact(flat, *operands, *weak)  # arguments out of the vectorised range: libm's
        return result

    def _small_kernels(self, dtypes: tuple) -> tuple | bool:
        """What :meth:`_small` runs for inputs of ``dtypes``: (the serial kernel, its exact
        twin or None, the leaves' argument positions, the weak scalars, the result's dtype);
        False for a plan the general path must take (a reduction, NumPy's ufuncs on blocks,
        a leaf that is not an argument)."""
        p = self.plan(dict(zip(self._names, dtypes, strict=True)))
        if (p.reduce is not None or p.stages or not p.leaves
                or any(leaf.op != "input" for leaf in p.leaves)
                or any(leaf.op == "input" for leaf, _ in p.weak) or _on_blocks(p)):
            return False
        masks = ((True,),) * len(p.leaves)
        exact = codegen.kernel(p, masks, "serial", True) if p.exact is not None else None
        return (codegen.kernel(p, masks, "serial"), exact,
                tuple(self._names.index(leaf.name) for leaf in p.leaves),
                tuple(dtype.type(leaf.value) for leaf, dtype in p.weak), p.dtype)

    def _call_statements(self, args: tuple, kwargs: dict, out):
        """A call of a function run statement by statement (see .statements)."""
        if out is not None:
            raise TypeError(f"{self!r} runs statement by statement (it has loops, branches "
                            "or shapes): its result's shape is known only once it has run, so "
                            "out= is not taken; assign its result")
        if any(type(v).__module__.startswith("dask") for v in (*args, *kwargs.values())):
            raise FuseError(f"{self!r}: a function with loops or shapes is not fused on dask "
                            "arrays")
        return self._statements(*args, **kwargs)

    def plan(self, kinds: dict) -> codegen.Plan:
        """The kernel plan for inputs of these dtypes (traced once per signature)."""
        if self._statements is not None:
            raise FuseError(f"{self!r} runs statement by statement (it has loops, branches or "
                            "shapes): each statement has its own plan")
        key = tuple(kinds.items())
        found = self._traces.get(key)
        if found is None:
            with self._lock:
                found = self._traces.get(key)
                if found is None:
                    try:
                        _, result = trace(self._call_with, kinds)
                    except (FuseError, TypeError) as exc:
                        if self._loops:  # its loops or shapes may run statement by statement
                            raise _NotWhole(str(exc)) from exc
                        raise
                    found = codegen.plan(result)
                    self._traces[key] = found
        return found

    def _call_with(self, **nodes):
        bound = self._signature.bind_partial()
        bound.arguments.update(nodes)
        return self._func(*bound.args, **bound.kwargs)

    def _on_dask(self, values: dict, out):
        import dask.array as da

        if out is not None:
            raise TypeError(f"{self!r}: out= is not supported for dask arrays (they are "
                            "immutable); use the returned array")
        arrays = {n: v for n, v in values.items()
                  if isinstance(v, (np.ndarray, da.Array)) and np.ndim(v) > 0}
        scalars = {n: v for n, v in values.items() if n not in arrays}
        kinds = {n: _kind(_value(v) if n in scalars else v) for n, v in values.items()}
        p = self.plan(kinds)
        if p.reduce is not None or p.stages:
            raise FuseError(f"{self!r}: a reduction of dask arrays is not fused (each block "
                            "would be reduced alone); use dask's own reductions")
        dtype = p.dtype
        names = list(arrays)
        ndim = max(np.ndim(a) for a in arrays.values())

        block = functools.partial(_block, self, tuple(names), scalars)  # picklable
        return da.map_blocks(block, *[da.asarray(a) for a in arrays.values()], dtype=dtype,
                             meta=np.empty((0,) * ndim, dtype))


class _NotWhole(FuseError):
    """A function with loops, branches or shapes did not trace whole (see Fused.__call__)."""


def _importable(obj) -> bool:
    """Whether ``obj`` is what its ``__module__`` and ``__qualname__`` name (then a pickle
    refers to it by name, as to the function it decorates)."""
    import importlib

    try:
        found = importlib.import_module(obj.__module__)
        for part in obj.__qualname__.split("."):
            found = getattr(found, part)
    except (AttributeError, ImportError, TypeError):
        return False
    return found is obj


def _block(fused: Fused, names: tuple, scalars: dict, *blocks):
    """One dask block of ``fused``: the arrays' blocks by name, and the scalar arguments."""
    return fused(**dict(zip(names, blocks, strict=True)), **scalars)


def _value(v):
    if isinstance(v, (np.ndarray, np.generic, bool, int, float)):
        return v
    if isinstance(v, complex):
        raise FuseError("complex values are not supported by fuse")
    try:
        return np.asarray(v)
    except Exception as exc:
        raise TypeError(f"fuse: cannot convert {type(v).__name__} to an array: {exc}") from None


def _kind(v):
    if isinstance(v, np.generic):
        return v.dtype
    if isinstance(v, bool):
        return np.dtype(bool)
    if isinstance(v, (int, float)):
        return type(v)
    return np.asarray(v).dtype if not isinstance(v, np.ndarray) else v.dtype


# -------------------------------------------------------------------------------- running

def _check_out(out, shape, dtype) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"fuse: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"fuse: out has shape {out.shape}, expected {shape}")
    if out.dtype != dtype:
        raise TypeError(f"fuse: out has dtype {out.dtype}, expected {dtype}")
    if not out.flags.writeable:
        raise ValueError("fuse: out is read-only")


def _leaf_values(p: codegen.Plan, values: dict) -> list:
    return [values[leaf.name] if leaf.op in ("input", "reduce") else leaf.value
            for leaf in p.leaves]


def _run(p: codegen.Plan, values: dict, out):
    if p.reduce is not None and out is not None:
        raise TypeError(f"fuse: out= is for an array result; np.{p.reduce} of the fused code "
                        "returns a scalar")
    for name, stage in p.stages.items():  # the reductions this plan reads, each once a call
        if name not in values:
            values[name] = _run(stage, values, None)
    leaves = [np.asarray(v) for v in _leaf_values(p, values)]
    shape = np.broadcast_shapes(*[a.shape for a in leaves])  # NumPy's error
    weak = [dtype.type(values[leaf.name] if leaf.op == "input" else leaf.value)
            for leaf, dtype in p.weak]  # NumPy's conversion (and OverflowError)
    if p.reduce is not None:
        return _reduce(p, leaves, weak, shape, values)
    if not shape and out is None:  # of scalars only (a norm's square root): one serial call
        result = np.empty(1, p.dtype)
        codegen.kernel(p, ((False,),) * len(leaves), "serial", p.exact is not None)(
            result, *(a[()] for a in leaves), *weak)
        return result[0]
    if out is not None:
        _check_out(out, shape, p.dtype)
    full = [a for a in leaves if a.shape == shape and a.ndim > 0]
    fortran = bool(full) and all(a.flags.f_contiguous and not a.flags.c_contiguous
                                 for a in full)
    result = out if out is not None else pool.empty(shape, p.dtype, "F" if fortran else "C")
    if result.size:
        _compute(p, leaves, weak, result, fortran, values)
    if out is None and result.ndim == 0:
        return result[()]
    return result


def _compute(p, leaves, weak, result, fortran, values: dict) -> None:
    # the plan's choice first: a plan decided for its kernel pays no second look at its leaves
    if p.on_blocks is not False and _plain([a for a in leaves if a.ndim], result) \
            and _on_blocks(p):
        # NumPy's ufuncs are faster on this machine for these functions: on flat blocks
        flat = {n: v.reshape(-1) if isinstance(v, np.ndarray) and v.ndim else v
                for n, v in values.items()}
        threads = 1 if (result.size < blocks.PARALLEL_MIN
                        or engine_numba.settings.serial_only) else numba.get_num_threads()
        blocks.evaluate(p.result, flat, result.reshape(-1), threads)
        return
    if _plain([a for a in leaves if a.ndim], result):
        # the common call: one flat loop over every operand, a NumPy scalar argument (0-d) a
        # scalar operand (as the axis groups below make it, at 2.4x this path's cost a call)
        _launch(p, tuple((True,) if a.ndim else (False,) for a in leaves), result.reshape(-1),
                [a.reshape(-1) if a.ndim else a[()] for a in leaves], weak)
        return
    padded = [a.reshape((1,) * (result.ndim - a.ndim) + a.shape) for a in leaves]
    if fortran:  # compute on the transposes: they are C-ordered
        padded = [a.T for a in padded]
        result = result.T
    shape = result.shape
    axes = [k for k, s in enumerate(shape) if s != 1]
    present = [tuple(a.shape[k] != 1 for k in axes) for a in padded]
    groups: list[list[int]] = []
    for pos, k in enumerate(axes):
        if groups and all(m[pos] == m[pos - 1] for m in present):
            groups[-1].append(k)
        else:
            groups.append([k])
    buffered = any(partial_overlap(result, a) for a in leaves)
    target = np.empty(shape, result.dtype) if buffered else result
    # merged axes must stay views: a stencil's slices (rows apart in memory) keep their axes,
    # where merging them copied every operand before the kernel ran
    if not all(_merges(a, groups) for a in [*padded, target]):
        groups = [[k] for k in axes]
    dims = tuple(int(np.prod([shape[k] for k in g])) for g in groups) or (1,)
    masks = tuple(tuple(m[axes.index(g[0])] for g in groups) if groups else (False,)
                  for m in present)
    operands = []
    for a, m in zip(padded, masks, strict=True):
        if not any(m):
            operands.append(a.reshape(-1)[0])  # a scalar of its dtype
            continue
        own = tuple(d for d, has in zip(dims, m, strict=True) if has)
        # drop the length-1 axes (a view), then merge groups (a view: see _merges)
        operands.append(a.reshape(tuple(s for s in a.shape if s != 1)).reshape(own))
    flat = target.reshape(dims)
    if len(dims) > 1 and not all(o.flags.c_contiguous for o in [flat, *operands]
                                 if isinstance(o, np.ndarray)):
        _launch_rows(p, masks, flat, operands, weak)
    else:
        if not flat.flags.c_contiguous:
            buffered, target = True, np.empty(shape, result.dtype)
            flat = target.reshape(dims)
        _launch(p, masks, flat, operands, weak)
    if buffered:
        np.copyto(result, target)


def _reduce(p: codegen.Plan, leaves: list, weak: list, shape: tuple, values: dict):
    """``p``'s reduction: by the reduction kernel where its operands take the kernel's
    layouts (:func:`_reduce_layout`; partials per leaf of its buffer, reduced here by NumPy);
    else NumPy's reduction of the fused values in a C-ordered array."""
    from .trace import NUMPY_REDUCED, NUMPY_REDUCTIONS, REDUCTIONS

    how = {"axis": p.axis, "keepdims": p.keepdims}
    if p.elementwise.result.op == "input" and (p.reduce == "norm"
                                                or not _short_rows(p.axis, shape)):
        # an argument itself: nothing to fuse, and NumPy's SIMD reductions (a norm: BLAS's
        # dot) read faster than the kernel's buffered leaves, but for short rows (the kernel
        # has no norm of its own: a norm of an argument is always NumPy's)
        return NUMPY_REDUCTIONS[p.reduce](values[p.elementwise.result.name], **how)
    if p.reduce in NUMPY_REDUCED:
        return REDUCTIONS[p.reduce](_run(p.elementwise, values, None), **how)
    if p.axis is not None:
        if not shape:
            raise np.exceptions.AxisError(p.axis, 0)
        axis = _axis_index(p.axis, len(shape))
        if axis != len(shape) - 1:
            return REDUCTIONS[p.reduce](_run(p.elementwise, values, None), **how)
    if math.prod(shape) == 0:  # NumPy's value, warning or error
        return REDUCTIONS[p.reduce](np.zeros(shape, p.dtype), **how)
    n = shape[-1] if p.axis is not None else math.prod(shape)
    rows = math.prod(shape) // n
    layout = _reduce_layout(leaves, shape, p.axis is not None)
    if layout is None:
        return REDUCTIONS[p.reduce](_run(p.elementwise, values, None), **how)
    masks, flat = layout
    leaves_per_row = -(-n // codegen.REDUCE_LEAF)
    partials = np.empty((rows, leaves_per_row), codegen.key_dtype(p) or codegen.accumulator(p))
    size = rows * n
    dtypes = (partials.dtype.char, *(a.dtype for a in leaves if a.ndim))
    with engine_numba.chosen(("fuse-reduce", p.serial, masks), size, False, dtypes,
                             _COUNTED) as mode:
        _run_reduce(p, masks, mode, n, rows, partials, flat, weak)
    result = _combine(p, partials, n)
    if p.axis is None and not p.keepdims:
        return result[0]  # NumPy's scalar
    if not p.keepdims:
        return result.reshape(shape[:-1])
    return result.reshape((*shape[:-1], 1) if p.axis is not None else (1,) * len(shape))


#: along the last axis, rows shorter than this are reduced faster by the kernel than by NumPy
#: (whose reduction pays per row: rows of 10 float32, 2.2-2.8x; of 100, 1.4x; of 300,
#: 0.8-1.1x; of 1000, 0.5-0.8x; both threads, AMD EPYC Zen 4)
NUMPY_ROW_MIN = 256


def _short_rows(axis: int | None, shape: tuple) -> bool:
    """Whether a reduction along ``axis`` of ``shape`` is one of short rows of the last axis."""
    return (axis is not None and bool(shape) and -len(shape) <= axis < len(shape)
            and axis % len(shape) == len(shape) - 1 and shape[-1] < NUMPY_ROW_MIN)


def _axis_index(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def _reduce_layout(leaves: list, shape: tuple, by_rows: bool) -> tuple | None:
    """The reduction kernel's masks and flat operands, or None where an operand has none of
    its layouts: the result's shape, C-ordered (``(True, True)``); with ``by_rows``, one
    value per row (``(True, False)``, a ``keepdims`` reduction's) or one row for all
    (``(False, True)``); a scalar (``(False, False)``)."""
    masks, flat = [], []
    for a in leaves:
        if a.size == 1:
            masks.append((False, False))
            flat.append(a.reshape(-1)[0])
            continue
        padded = (1,) * (len(shape) - a.ndim) + a.shape
        if not a.flags.c_contiguous:
            return None
        if padded == shape:
            mask = (True, True)
        elif by_rows and padded == (*shape[:-1], 1):
            mask = (True, False)
        elif by_rows and padded == (*(1,) * (len(shape) - 1), shape[-1]):
            mask = (False, True)
        else:
            return None
        masks.append(mask)
        flat.append(a.reshape(-1))
    return tuple(masks), flat


def _run_reduce(p: codegen.Plan, masks: tuple, mode: str, n: int, rows: int,
                partials: np.ndarray, flat: list, weak: list) -> None:
    """The reduction kernel over ``rows`` rows of ``n`` elements; a plan with
    :data:`codegen.GUARDED` functions runs its exact kernel again where an argument was out
    of the vectorised functions' range."""
    args = (n, rows, partials.reshape(-1), *flat, *weak)
    if mode == "serial":  # all the tasks
        chunks = -(-n // codegen.REDUCE_CHUNK)
        args = (*args, 0, rows * -(-chunks // codegen.REDUCE_TASK))
    if p.exact is None or codegen.kernel(p, masks, mode, reduce=True)(*args) != 0:
        codegen.kernel(p, masks, mode, p.exact is not None, reduce=True)(*args)


def _combine(p: codegen.Plan, partials: np.ndarray, n: int) -> np.ndarray:
    """Each row's reduction of the kernel's partials (one per leaf of its buffer), in the
    reduction's dtype."""
    kind = p.reduce
    if kind in ("sum", "mean"):
        total = np.add.reduce(partials, axis=1)
        return (total / n).astype(p.reduced, copy=False) if kind == "mean" else total
    if kind == "prod":
        return np.multiply.reduce(partials, axis=1)
    value = (np.maximum if kind in ("max", "any") else np.minimum).reduce(partials, axis=1)
    if codegen.key_dtype(p) is not None:
        value = codegen.float_of_key(value, p.reduced)
        # a leaf with a NaN gave a NaN's key, sign bit set for a minimum: NumPy's NaN is
        # the one it met, a positive one from any arithmetic
        return np.where(value != value, p.reduced.type(np.nan), value)
    return value.astype(bool) if kind in ("any", "all") else value


def _on_blocks(p: codegen.Plan) -> bool:
    """Whether ``p`` runs as NumPy's ufuncs on blocks (:mod:`.costs`), decided at its first
    flat call (which measures the functions this machine has no figures for yet)."""
    if p.on_blocks is None:
        p.on_blocks = costs.numpy_faster(p.operations)
    return p.on_blocks


def _merges(a: np.ndarray, groups: list[list[int]]) -> bool:
    """Whether each group of ``a``'s axes (its length-1 axes aside) is one axis of a view."""
    for g in groups:
        kept = [k for k in g if a.shape[k] != 1]
        for k, nxt in itertools.pairwise(kept):
            if a.strides[k] != a.strides[nxt] * a.shape[nxt]:
                return False
    return True


def _span(a: np.ndarray) -> np.ndarray | None:
    """A 1-d C-contiguous view from ``a``'s first element to its last, or None where ``a``
    steps backwards or between elements."""
    size = a.itemsize
    if any(s < 0 or s % size for s in a.strides):
        return None
    extent = 1 + sum((n - 1) * s // size for n, s in zip(a.shape, a.strides, strict=True))
    return np.lib.stride_tricks.as_strided(a, shape=(extent,), strides=(size,),
                                           writeable=a.flags.writeable)


def _launch_rows(p, masks, out, operands, weak) -> None:
    """The kernel over rows: each array as its flat span and the element strides of its outer
    axes, its innermost axis read at consecutive elements (a copy makes it so where it is
    not), so that the inner loop is vectorised as on contiguous arrays."""
    spans, strides = [], []
    for o, m in zip(operands, masks, strict=True):
        if not any(m):
            spans.append(o)
            continue
        span = None if m[-1] and o.strides[-1] != o.itemsize else _span(o)
        if span is None:
            o = np.ascontiguousarray(o)
            span = _span(o)
        spans.append(span)
        if any(m[:-1]):  # the kernel takes the strides of leaves with outer axes only
            strides.append(tuple(s // o.itemsize
                                 for s in (o.strides[:-1] if m[-1] else o.strides)))
    target = out
    span = _span(out) if out.strides[-1] == out.itemsize else None
    if span is None:
        target = np.empty(out.shape, out.dtype)
        span = _span(target)
    extra = (tuple(int(n) for n in out.shape),
             tuple(s // out.itemsize for s in target.strides[:-1]), *strides)
    _launch(p, masks, span, spans, weak, extra=extra, size=out.size)
    if target is not out:
        np.copyto(out, target)


def _plain(leaves: list, result: np.ndarray) -> bool:
    """Whether every leaf is a C-contiguous array of the result's shape (at least 1-d) that
    ``result`` does not overlap, unless it is that very array: then the kernel runs on flat
    views, as the general path would end up doing, without working out the axis groups."""
    shape = result.shape
    if not shape or not result.flags.c_contiguous:
        return False
    for a in leaves:
        if a.shape != shape or not a.flags.c_contiguous:
            return False
        if partial_overlap(result, a):
            return False
    return True


def _run_kernel(p, masks, mode: str, out, operands, weak, extra: tuple = ()) -> None:
    """One kernel call; a plan with :data:`codegen.GUARDED` functions runs its vectorised
    kernel, and its exact one again where an argument was out of range. Computed in place
    (``out`` one of the inputs), the inputs would be gone by then, and LLVM's loops fall back
    to scalar code where their arrays overlap (``a + np.exp(-b) * c`` into ``a``: 2.7x the
    time into another array): a plan with a transcendental function is computed into a
    buffer and copied to ``out``, except on the row path (whose strides are ``out``'s: the
    exact kernel only). ``extra``: the row kernel's dimensions and strides (the serial one
    also takes the rows to compute: all of them)."""
    rows = bool(extra)
    if rows and mode == "serial":
        extra = (*extra, 0, math.prod(extra[0][:-1]))
    in_place = any(isinstance(o, np.ndarray) and may_share(o, out) for o in operands)
    if in_place and (p.exact is not None or p.transcendental) and not rows \
            and out.flags.c_contiguous:
        buffer = pool.empty(out.shape, out.dtype)  # reused: fresh pages each call cost more
        _run_kernel(p, masks, mode, buffer, operands, weak)
        np.copyto(out, buffer)
        return
    args = (out, *operands, *weak, *extra)
    if p.exact is not None and not in_place:
        if codegen.kernel(p, masks, mode, rows=rows)(*args) == 0:
            return
    codegen.kernel(p, masks, mode, p.exact is not None, rows=rows)(*args)


def _launch(p, masks, out, operands, weak, extra: tuple = (), size: int | None = None) -> None:
    """Run ``p``'s kernel on ``out`` (of ``size`` elements: a flat span's differ), serial,
    parallel or streaming as the chooser decides; ``extra``: the row path's dimensions and
    strides (see :func:`_launch_rows`)."""
    n = out.size if size is None else size
    if n < engine_numba.settings.parallel_min or engine_numba.settings.serial_only:
        _run_kernel(p, masks, "serial", out, operands, weak, extra)  # without chosen's cost
        return
    # streaming only where the kernels stream (the tuning measured it faster) and only
    # for arithmetic: with exp & co. its unrolled lanes stay scalar, and compile slowly.
    # Even then the calls measure it against the parallel loop: LLVM leaves some lanes
    # scalar (sqrt), others gain (a + b * c).
    stream = (not extra and out.ndim == 1 and not p.transcendental
              and engine_numba.streams_into(out, operands))
    # serial when the calls measured it faster (a busy core): the kernels' own launcher
    key = ("fuse", p.serial, masks, bool(extra))
    dtypes = (out.dtype.char, *(getattr(o, "dtype", None) for o in operands))
    with engine_numba.chosen(key, n, stream, dtypes, _COUNTED) as mode:
        if mode == "stream":
            codegen.kernel(p, masks, "stream")(out, *operands, *weak)
            head = n - n % 8
            if head < n:
                tail = [o[head:] if any(m) else o for o, m in zip(operands, masks, strict=True)]
                codegen.kernel(p, masks, "serial")(out[head:], *tail, *weak)
        else:
            _run_kernel(p, masks, mode, out, operands, weak, extra)
