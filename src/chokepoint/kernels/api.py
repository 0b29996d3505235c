"""The public kernels: one validation path, then one engine call.

Semantics are PyTorch CPU's:

* Forward results have the input's dtype and are bit-identical to torch: NaN propagates, the
  sign of zero is kept (``relu(-0.0)`` is ``-0.0``), infinities and subnormals pass through (no
  flush-to-zero).
* Derivatives at the kinks follow torch: ``relu'(0) = 0``, ``leaky_relu'(0) = slope``, and
  ``hardtanh``/``relu6`` have derivative 0 at both boundaries. ``relu_grad(..., at_zero=1)`` is
  the ``x >= 0`` convention instead.
* NaN convention for derivatives: ``relu`` and ``leaky_relu`` treat NaN as "not <= 0", so
  ``relu'(NaN) = 1`` (the gradient flows through, as torch's ``threshold_backward`` does) and
  ``leaky_relu'(NaN) = slope``; ``hardtanh`` and ``relu6`` pass the gradient only strictly inside
  ``(min_val, max_val)``, so their derivative at NaN is 0 (torch's vectorised kernels agree; its
  scalar tail loop gives 1 — we do not copy that inconsistency).
* Backward passes select, they do not multiply: where the derivative is 0 the result is an exact
  0 even if ``grad`` holds NaN or infinity, as in torch.
* dtypes: float16, float32 and float64; float16 is computed in float32 and rounded once. The
  exact operations (``relu``, ``relu_grad``, ``relu_backward``, ``relu_with_mask``) also take
  signed and unsigned integers and keep their dtype; the others raise TypeError for integers, as
  torch does for ``leaky_relu``. bool, complex, object, string and datetime dtypes raise
  TypeError everywhere.
* NumPy arrays (and array-likes) run here; dask arrays, torch tensors and CuPy arrays are
  handed to :mod:`.on_dask`, :mod:`.on_torch`, :mod:`.on_cupy` by :mod:`.dispatch`, which
  return the same kind of array.
* Any shape (0-d and empty included) and any strides. Everything is validated before anything is
  written: when a call raises, ``out`` is untouched. ``out`` may be an input itself (in place);
  an ``out`` that partly overlaps an input is computed through a buffer, so it is still correct.
"""

from __future__ import annotations

import math
import numbers
import time

import numpy as np

from . import engine_numpy, pool
from .adaptive import Decision
from .backend import engine
from .dispatch import dispatched
from .layout import allocation_order, flat_operands, may_share
from .mask import PackedMask, filled_mask
from .native import MAP1, MAP2, MASK_BACKWARD, MASK_FORWARD, Lane
from .ops import OPS
from .registry import KERNELS, NAMES, Kernel

__all__ = ["GRAD_DTYPES", "op_constants", *NAMES]

_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
#: dtypes that :func:`relu_grad` can write.
GRAD_DTYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.float16, np.float32,
                                          np.float64))


# ---------------------------------------------------------------------------------- validation

def _as_array(value, func: str, arg: str) -> np.ndarray:
    if type(value) is np.ndarray:
        a = value
    elif isinstance(value, PackedMask):
        raise TypeError(f"{func}: {arg} is a PackedMask; only relu_backward accepts a mask")
    elif isinstance(value, np.ma.MaskedArray):
        raise TypeError(f"{func}: {arg} is a numpy.ma masked array; chokepoint would drop its "
                        "mask: pass arr.filled(value) or np.asarray(arr) explicitly")
    elif isinstance(value, np.matrix):
        raise TypeError(f"{func}: {arg} is a numpy.matrix; pass np.asarray(m) (a plain "
                        "ndarray) instead")
    elif isinstance(value, np.ndarray):  # other subclasses are viewed as plain arrays
        a = value.view(np.ndarray)
    else:
        try:
            a = np.asarray(value)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(f"{func}: {arg} cannot be converted to an array: {exc}") from exc
        if type(a) is not np.ndarray:
            return _as_array(a, func, arg)
    if not a.dtype.isnative:
        # documented: non-native byte order is converted (a copy), the result is native
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def _check_dtype(func: str, arg: str, a: np.ndarray, integers: bool) -> None:
    if a.dtype in _FLOATS or (integers and a.dtype.kind in "iu"):
        return
    accepted = "float16, float32, float64" + (" or an integer dtype" if integers else "")
    hint = " (cast integers to a float dtype first)" if a.dtype.kind in "iu" else ""
    raise TypeError(f"{func}: {arg} has dtype {a.dtype}; expected {accepted}{hint}")


def _check_same(func: str, grad: np.ndarray, x: np.ndarray, x_name: str = "x") -> None:
    if grad.dtype != x.dtype:
        raise TypeError(f"{func}: grad has dtype {grad.dtype} but {x_name} has {x.dtype}; "
                        "they must match")
    if grad.shape != x.shape:
        raise ValueError(f"{func}: grad has shape {grad.shape} but {x_name} has {x.shape}; "
                         "they must match (no broadcasting)")


def _check_out(func: str, out, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if not isinstance(out, np.ndarray) or isinstance(out, (np.ma.MaskedArray, np.matrix)):
        raise TypeError(f"{func}: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"{func}: out has shape {out.shape}, expected {shape}")
    if out.dtype != dtype:
        order = "" if out.dtype.isnative else " (non-native byte order)"
        raise TypeError(f"{func}: out has dtype {out.dtype}{order}, expected {dtype}")
    if not out.flags.writeable:
        raise ValueError(f"{func}: out is read-only")


# One rule per kind of parameter, one message each.

def _real(func: str, name: str, value) -> float:
    """A real number as a Python float: int, float, NumPy scalars, fractions; not bool, not NaN."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        kind = "an array" if isinstance(value, np.ndarray) else repr(value)
        raise TypeError(f"{func}: {name} must be a real number (a scalar), got {kind}")
    try:
        result = float(value)
    except OverflowError:
        raise ValueError(f"{func}: {name}={value!r} is too large for a float") from None
    if math.isnan(result):
        raise ValueError(f"{func}: {name} must not be NaN")
    return result


def _check_at_zero(func: str, at_zero) -> int:
    """0 or 1 given as an integer (int or NumPy integer); anything else is a ValueError."""
    if isinstance(at_zero, (bool, np.bool_)) or not isinstance(at_zero, (int, np.integer)) \
            or at_zero not in (0, 1):
        kind = "an array" if isinstance(at_zero, np.ndarray) else repr(at_zero)
        raise ValueError(f"{func}: at_zero must be the integer 0 or 1, got {kind}")
    return int(at_zero)


def _approximate(func: str, name: str, value) -> str:
    if not isinstance(value, str) or value not in ("none", "tanh"):
        raise ValueError(f"{func}: {name} must be 'none' or 'tanh', got {value!r}")
    return value


_CHECKS = {"real": _real, "approximate": _approximate,
           "at_zero": lambda func, name, value: _check_at_zero(func, value)}


def _result(func: str, out, shape, dtype, inputs) -> np.ndarray:
    """``out`` after checking it, or a new array laid out like the inputs."""
    if out is None:
        return pool.empty(shape, dtype, allocation_order(inputs))
    _check_out(func, out, shape, np.dtype(dtype))
    return out


def _compute_type(dtype: np.dtype):
    return np.float32 if dtype == np.float16 else dtype.type


def op_constants(op: str, dtype: np.dtype, values: dict | None = None) -> tuple:
    """The values of ``OPS[op].params`` in the computation dtype (float32 for float16): the
    kernels' constant arguments, on the CPU and in the CuPy handler alike."""
    cast = _compute_type(dtype)
    with np.errstate(over="ignore"):  # a huge parameter becomes inf in float32, as in torch
        return tuple(cast(c) for c in OPS[op].constants(values or {}))


def _params(dtype: np.dtype, slope: float = 0.0, lo: float = 0.0, hi: float = 0.0):
    """zero, slope, lo, hi in the computation dtype (kept for the mask kernels)."""
    cast = _compute_type(dtype)
    return cast(0), cast(slope), cast(lo), cast(hi)


def _engine_for(*dtypes: np.dtype):
    # numba has no float16 on the CPU: half precision always runs on the NumPy engine.
    return engine_numpy if np.dtype(np.float16) in dtypes else engine()


# ------------------------------------------------------------------------------------ runners

def _unary(op: str, func: str, x, out, *, out_dtype=None, values=None) -> np.ndarray:
    x = _as_array(x, func, "x")
    _check_dtype(func, "x", x, OPS[op].integers)
    out_dtype = x.dtype if out_dtype is None else np.dtype(out_dtype)
    result = _result(func, out, x.shape, out_dtype, [x])
    (flat_x,), flat_out, finish = flat_operands([x], result)
    _engine_for(x.dtype, out_dtype).unary(op, flat_x, flat_out, op_constants(op, x.dtype, values))
    finish()
    return result


def _binary(op: str, func: str, grad, x, out, values=None) -> np.ndarray:
    grad = _as_array(grad, func, "grad")
    x = _as_array(x, func, "x")
    _check_dtype(func, "x", x, OPS[op].integers)
    _check_same(func, grad, x)
    result = _result(func, out, x.shape, x.dtype, [grad, x])
    (flat_g, flat_x), flat_out, finish = flat_operands([grad, x], result)
    _engine_for(x.dtype).binary(op, flat_g, flat_x, flat_out, op_constants(op, x.dtype, values))
    finish()
    return result


def resolve(kernel: Kernel, *values) -> tuple[str, dict]:
    """Check a registry kernel's parameter values (positional, in order); its op and constants."""
    checked = {p.name: _CHECKS[p.check](kernel.name, p.name, v)
               for p, v in zip(kernel.params, values, strict=True)}
    if kernel.check is not None:
        kernel.check(kernel.name, checked)
    return kernel.resolve(checked)


def run(kernel: Kernel, arrays: tuple, out, *values):
    """Validate and run a registry kernel on NumPy arrays: the body of every generated function."""
    op, constants = resolve(kernel, *values)
    if kernel.arity == 1:
        return _unary(op, kernel.name, arrays[0], out, values=constants)
    return _binary(op, kernel.name, arrays[0], arrays[1], out, values=constants)


# ---------------------------------------------------------------------------------- fast path

_NATIVE = {np.dtype(np.float32), np.dtype(np.float64)}
#: the mask kernels' zero per native dtype (made once: a NumPy scalar is slow to make)
_ZERO = {dtype: dtype.type(0) for dtype in _NATIVE}
#: (kernel name, dtype[, parameter values, their types]) -> (op, serial kernel, constants), or
#: False where the fast path does not take that dtype or those values; filled on first use
_FAST: dict[tuple, tuple | bool] = {}


def _fast_entry(kernel: Kernel | str, dtype: np.dtype, values: tuple, key: tuple):
    """The :data:`_FAST` entry for ``key``, made (and kept) on a kernel's first fast call."""
    entry = False
    if dtype in _NATIVE:
        try:
            op, constants = (kernel, {}) if isinstance(kernel, str) else resolve(kernel, *values)
        except (TypeError, ValueError):
            return False  # not kept: the full path raises the message, every time
        entry = (op, _numba().kernel_for(op, "checked"), op_constants(op, dtype, constants))
    _FAST[key] = entry
    return entry


_numba_engine = None


def _numba():
    global _numba_engine
    if _numba_engine is None:
        from . import engine_numba

        _numba_engine = engine_numba
    return _numba_engine


def _plain_out(arrays: tuple, out, result_dtype) -> np.ndarray | None:
    """Where the fast path writes: ``out``, or a new array when it is None; None when the call
    is not one the fast path takes (see :func:`fast`). ``arrays[-1]`` sets shape and dtype.

    Written out in one function: each Python call or attribute here is a visible share of
    the fast path's time.
    """
    x = arrays[-1]
    if not x.flags.c_contiguous:
        return None
    shape = x.shape
    if len(arrays) > 1:
        dtype = x.dtype
        for a in arrays[:-1]:
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape \
                    or not a.flags.c_contiguous:
                return None
    if out is None:
        return pool.empty(shape, result_dtype)
    flags = out.flags
    if (out.dtype != result_dtype or out.shape != shape or not flags.c_contiguous
            or not flags.writeable):
        return None
    for a in arrays:
        if out is not a and may_share(out, a):
            return None  # a partial overlap: the general path computes it through a buffer
    return out


def fast(kernel: Kernel | str, arrays: tuple, out, values: tuple, out_dtype=None,
         types: tuple | None = None):
    """The common call of a registry kernel (or of an op without parameters) through the
    engine's launcher (which chooses serial, parallel or streaming): the calls that
    :func:`call_fast` leaves to it (:data:`AGAIN`).

    Contiguous native float32 or float64 NumPy arrays of one shape and dtype, ``out`` None or
    such an array (or an input itself), the numba engine, at least ``settings.parallel_min``
    elements (smaller ones are :func:`call_fast`'s, which the public functions try first).
    Returns None for any other call: the general path then validates and runs it (and raises
    its errors). Nothing is checked less: what the fast path accepts is what the general path
    would accept and run the same way. ``types`` are the types of ``values`` when the caller
    has them at hand (the generated public functions write them out).
    """
    x = arrays[-1]
    dtype = x.dtype
    name = kernel if type(kernel) is str else kernel.name
    # the types too: complex(-1) == -1.0 == True - 2 hash alike, and only one is a valid slope
    if values:
        key = (name, dtype, values, tuple(map(type, values)) if types is None else types)
    else:
        key = (name, dtype)
    try:
        entry = _FAST.get(key)
    except TypeError:  # an unhashable parameter (an array): the full path says what is wrong
        return None
    if entry is None:
        if engine().NAME != "numba":  # no numba import (nor compilation) for the NumPy engine
            return None
        entry = _fast_entry(kernel, dtype, values, key)
    if entry is False or engine() is not _numba_engine:
        return None
    op, _, constants = entry
    if x.size < _numba_engine.settings.parallel_min:
        return None
    out = _plain_out(arrays, out, dtype if out_dtype is None else out_dtype)
    if out is None:
        return None
    if x.ndim == 1:
        flat, flat_out = arrays, out
    else:  # C-contiguous: ravel is a view (and cheaper than reshape(-1))
        flat, flat_out = [a.ravel() for a in arrays], out.ravel()
    _numba_engine.launch(op, flat_out, *flat, flat_out, *constants)
    return out


class FastEntry:
    """What a public function keeps per dtype (and parameter values) to run its common calls
    itself (:func:`call_fast`): the op, its checked kernels, its constants, the engine."""

    __slots__ = ("constants", "decisions", "engine", "lane", "op", "parallel", "serial",
                 "streams")

    def __init__(self, op: str, serial, constants: tuple, engine, lane: Lane | None = None
                 ) -> None:
        self.op = op
        self.lane = lane  # the public function's C path, filled by the Python path's calls
        self.serial = serial  # the checked serial kernel
        self.parallel = None  # the checked parallel one, made on the first call that runs it
        self.constants = constants
        self.engine = engine
        #: size class (n.bit_length()) -> the chooser's live decision for it
        self.decisions: dict[int, Decision] = {}
        #: whether its calls may stream (a map: the C path streams maps only)
        self.streams = op in OPS

    def made_parallel(self):
        """The checked parallel kernel, compiled (or loaded) on its first call."""
        self.parallel = self.engine.kernel_for(self.op, "checked_parallel")
        return self.parallel


def small_entry(kernel: Kernel | str, dtype: np.dtype, values: tuple = (),
                types: tuple = (), lane: Lane | None = None) -> FastEntry | bool | None:
    """What a public function keeps to run its common calls itself (see :func:`call_fast`);
    False where the fast path does not take this dtype or these parameters; None (not to be
    kept) when the engine in use is not numba's. ``lane``: the function's C path (a new one
    for these parameter values when None)."""
    if engine().NAME != "numba":
        return None
    name = kernel if type(kernel) is str else kernel.name
    key = (name, dtype, values, types) if values else (name, dtype)
    entry = _FAST.get(key)
    if entry is None:
        entry = _fast_entry(kernel, dtype, values, key)
    if entry is False:
        return False
    if lane is None:
        lane = Lane(MAP2 if OPS[entry[0]].arity == 2 else MAP1)
    return FastEntry(entry[0], entry[1], entry[2], _numba_engine, lane)


#: :func:`call_fast`'s answer for a call that the launcher must take (:func:`fast`)
AGAIN = object()
_clock = time.perf_counter


def call_fast(entry: FastEntry, arrays: tuple, out, dtype: np.dtype, extra: tuple = ()):
    """A call of C-contiguous arrays of one dtype that the public functions checked inline
    (the generated ones and ``relu_grad``'s and ``relu_backward``'s, see :func:`_generate`).

    Below ``settings.parallel_min`` elements the serial kernel runs. Up to
    ``CHECKED_MAX`` elements the variant the engine's chooser decided runs (a map's call that
    can stream, :func:`.engine_numba.can_stream`, goes to the launcher instead, once it has
    given the C path that call's decision), for the calls it decided it for (its
    :class:`~.adaptive.Decision`: a decrement and a look-up), and the calls it must time are
    timed here: the launcher's path (:func:`fast`) costs, in Python, much of a mid-size
    parallel kernel's time. The kernels check shapes and overlap.

    The kernel is called as ``kernel(*arrays, out, *extra, *entry.constants)``;
    ``arrays[-1]`` gives the size and, when ``out`` is None, the shape (the mask kernels pass
    their bits: the forward's in ``extra``, the backward's first in ``arrays``).

    Returns ``out`` (or a new array of ``dtype``); None, with nothing written, where the
    general path must take the call; :data:`AGAIN` where the launcher must (:func:`fast`):
    larger calls, calls that can stream, and parallel ones under a threading layer that needs
    the launch lock.
    """
    x = arrays[-1]
    n = x.size
    numba_engine = entry.engine
    timed = False
    period = None  # the decision whose untimed calls this one counts in
    settings = numba_engine.settings
    if n < settings.parallel_min:
        kernel = entry.serial
        lane = entry.lane  # the C path takes these calls once it has this dtype's kernel
        if lane is not None and (x.dtype, dtype) not in lane.added:
            lane.add(entry.op, x.dtype, dtype, entry.constants)
    elif n < numba_engine.CHECKED_MAX and settings.lock_free:
        size = n.bit_length()
        if entry.streams and numba_engine.can_stream(entry.op, arrays, out, dtype):
            # the launcher streams it (the checked kernels do not); the C path takes the
            # calls after it, by the decision that weighs streaming (native.Lane.add_plan)
            lane = entry.lane
            if lane is not None and (x.dtype, dtype, size, True) not in lane.planned:
                decision = numba_engine.chooser.decision(
                    numba_engine.chooser_key(entry.op, True), n, *numba_engine.candidates(True))
                lane.add_plan(entry.op, x.dtype, dtype, entry.constants, size, decision, True)
            return AGAIN
        decision = entry.decisions.get(size)
        if decision is None:
            decision = entry.decisions[size] = numba_engine.chooser.decision(
                entry.op, n, *numba_engine.candidates(False))
        if decision.left > 0:
            decision.left -= 1
            variant = decision.variant
            period = decision
        else:
            variant, timed = numba_engine.chooser.decide(entry.op, n,
                                                         *numba_engine.candidates(False))
        lane = entry.lane  # the C path runs the decided calls once it has the decision
        if lane is not None and (x.dtype, dtype, size, False) not in lane.planned:
            lane.add_plan(entry.op, x.dtype, dtype, entry.constants, size, decision)
        kernel = entry.serial if variant == "serial" else entry.parallel or entry.made_parallel()
    else:
        return AGAIN
    if out is None:
        out = np.empty(x.shape, dtype)
    else:
        flags = out.flags
        if out.dtype is not dtype or not flags.c_contiguous or not flags.writeable:
            return None
    if not timed and period is None:
        return out if kernel(*arrays, out, *extra, *entry.constants) else None
    start = _clock()
    if not kernel(*arrays, out, *extra, *entry.constants):
        return None
    seconds = _clock() - start
    if period is not None:
        period.count(seconds)
    else:  # the checked kernels' own signature: their first call compiles, or loads
        numba_engine.chooser.record(entry.op, n, variant, seconds,
                                    ("checked", x.dtype.char, dtype.char))
    return out


# ------------------------------------------------------------------------ generated functions

def _docstring(kernel: Kernel) -> str:
    ints = " (or an integer dtype)" if OPS[kernel.resolve(_defaults(kernel))[0]].integers else ""
    lines = [kernel.summary, ""]
    if kernel.notes:
        lines += [kernel.notes, ""]
    lines += ["Parameters", "----------"]
    if kernel.arity == 2:
        lines += ["grad : array_like",
                  f"    Gradient of the loss with respect to ``{kernel.forward}(x)``.",
                  "x : array_like",
                  "    The forward pass's input (``grad``'s shape and dtype)."]
    else:
        lines += ["x : array_like", f"    float16, float32 or float64 input{ints}."]
    for p in kernel.params:
        kind = {"real": "float", "approximate": "{'none', 'tanh'}", "at_zero": "{0, 1}"}[p.check]
        lines += [f"{p.name} : {kind}, default {p.default!r}", f"    {p.doc}"]
    inplace = "; ``out=grad`` works in place" if kernel.arity == 2 else "; may be ``x`` itself"
    lines += ["out : numpy.ndarray, optional",
              f"    Where to write the result: ``x``'s shape and dtype{inplace}.",
              "", "Returns", "-------", "numpy.ndarray",
              "    ``out`` if given, else a new array of ``x``'s dtype."]
    return "\n".join(lines) + "\n"


def _defaults(kernel: Kernel) -> dict:
    return {p.name: p.default for p in kernel.params}


def _indent(code: str) -> str:
    return "".join(f"    {line}\n" for line in code.splitlines())


def _generate(kernel: Kernel):
    """The public function of a registry kernel: real signature, docstring, dispatch."""
    arrays = ("grad", "x") if kernel.arity == 2 else ("x",)
    positional = [f"{p.name}={p.default!r}" for p in kernel.params if not p.keyword_only]
    keyword = [f"{p.name}={p.default!r}" for p in kernel.params if p.keyword_only]
    signature = ", ".join([*arrays, *positional, "*", *keyword, "out=None"])
    values = "".join(f", {p.name}" for p in kernel.params)
    names = ", ".join(arrays)
    params = ", ".join(p.name for p in kernel.params)
    general = (f"def {kernel.name}({signature}):\n"
               f"    return _run(_kernel, ({names},), out{values})\n")
    # the public function: the fast path for plain NumPy arrays, else dispatch and the general
    # path (one validation path: the fast one only takes calls the general one would run alike)
    given = "".join(f"{p.name}={p.name}, " for p in kernel.params)
    packed = f"({params}{',' if params else ''})"
    types = ", ".join(f"type({p.name})" for p in kernel.params)
    packed_types = f"({types}{',' if types else ''})"
    plain = f"type({arrays[-1]}) is _ndarray and (out is None or type(out) is _ndarray)"
    # common calls run here (call_fast), with what small_entry kept per dtype and parameters:
    # each function call or tuple in between is a visible share of a small call
    x = arrays[-1]
    # one flat tuple: the values and their types (True == 1 == 1.0 hash alike)
    key = f"({x}.dtype, {params}, {types})" if kernel.params else f"{x}.dtype"
    # the C path (native.Lane): the function's own without parameters, else the entry's
    lane = "entry.lane" if kernel.params else "_lane"
    native = (f"native = {lane}.native\n"
              f"if native is not None:\n"
              f"    result = native({names}, out)\n"
              f"    if result is not None:\n"
              f"        return result\n")
    look = (f"try:\n"
            f"    entry = _entries[key := {key}]\n"
            f"except KeyError:\n"
            f"    entry = _small_entry(_kernel, {x}.dtype, {packed}, {packed_types}"
            f"{'' if kernel.params else ', _lane'})\n"
            f"    if entry is not None:\n"
            f"        _entries[key] = entry\n")
    if kernel.params:  # an unhashable parameter (an array): the general path says what is wrong
        look += "except TypeError:\n    entry = False\n"
        look = f"if {plain}:\n" + _indent(look + "if entry:\n" + _indent(native))
    else:
        look = native + f"if {plain}:\n" + _indent(look)
    look = _indent(look)
    same = (f" and type(grad) is _ndarray and grad.dtype is {x}.dtype"
            f" and grad.flags.c_contiguous" if kernel.arity == 2 else "")
    launcher = f"_fast(_kernel, ({names},), out, {packed}, None, {packed_types})"
    public = (f"def {kernel.name}({signature}):\n"
              + look +
              f"        if (entry and {x}.flags.c_contiguous{same}\n"
              f"                and _engine() is entry.engine):\n"
              f"            result = _call_fast(entry, ({names},), out, {x}.dtype)\n"
              f"            if result is _AGAIN:\n"
              f"                result = {launcher}\n"
              f"        else:\n"
              f"            result = {launcher}\n"
              f"        if result is not None:\n"
              f"            return result\n"
              f"    return _general({names}, {given}out=out)\n")
    namespace = {"_run": run, "_kernel": kernel, "_fast": fast, "_ndarray": np.ndarray,
                 "_entries": {}, "_small_entry": small_entry, "_call_fast": call_fast,
                 "_AGAIN": AGAIN, "_engine": engine,
                 "_lane": Lane(MAP2 if kernel.arity == 2 else MAP1)}
    exec(compile(general, f"<chokepoint kernel {kernel.name}>", "exec"), namespace)
    func = namespace[kernel.name]
    func.__module__ = __name__
    func.__qualname__ = kernel.name
    func.__doc__ = _docstring(kernel)
    namespace["_general"] = dispatched(func)
    exec(compile(public, f"<chokepoint kernel {kernel.name}>", "exec"), namespace)
    entry = namespace[kernel.name]
    entry.__module__ = __name__
    entry.__qualname__ = kernel.name
    entry.__doc__ = func.__doc__
    entry.__wrapped__ = namespace["_general"]
    entry.__wrapped_numpy__ = func
    return entry


def _generate_all() -> None:
    for kernel in KERNELS:
        if kernel.resolve is not None:
            globals()[kernel.name] = _generate(kernel)


_generate_all()


# ------------------------------------------------------------------ kernels with their own logic

def _over(general):
    """Mark a public function whose last resort is ``general`` (dispatch to other libraries,
    validation, any layout) as the generated kernels are: ``__wrapped__`` is ``general``,
    ``__wrapped_numpy__`` its NumPy function."""
    def mark(public):
        public.__wrapped__ = general
        public.__wrapped_numpy__ = general.__wrapped_numpy__
        return public
    return mark


def _relu_grad_numpy(x, *, dtype=None, at_zero: int = 0, out=None) -> np.ndarray:
    """:func:`relu_grad` on NumPy arrays of any layout, validated (its last resort)."""
    at_zero = _check_at_zero("relu_grad", at_zero)
    if dtype is None:
        dtype = out.dtype if isinstance(out, np.ndarray) else np.uint8
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"relu_grad: dtype {dtype!r} is not a dtype") from exc
    if dtype not in GRAD_DTYPES:
        names = ", ".join(str(d) for d in GRAD_DTYPES)
        raise TypeError(f"relu_grad: dtype {dtype} is not supported; choose one of {names}")
    op = "relu_grad_at_zero" if at_zero else "relu_grad"
    return _unary(op, "relu_grad", x, out, out_dtype=dtype)


_relu_grad_general = dispatched(_relu_grad_numpy, "relu_grad")
#: output dtypes the numba engine writes (float16 goes to the NumPy engine)
_FAST_GRAD_DTYPES = {np.dtype(t): np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.float32,
                                                         np.float64)}


@_over(_relu_grad_general)
def relu_grad(x, *, dtype=None, at_zero: int = 0, out=None) -> np.ndarray:
    """The derivative of ReLU as a 0/1 array.

    Parameters
    ----------
    x : array_like
        float16, float32, float64 or integer input of the forward pass.
    dtype : dtype, optional
        bool, int8, uint8, float16, float32 or float64. Defaults to ``out.dtype`` when ``out``
        is given, else uint8 (1 byte per element: the cheapest to write).
    at_zero : {0, 1}
        The derivative at ``x == 0`` (either sign). 0 is torch's and JAX's convention; 1 gives
        ``x >= 0``. NaN gives 1 in both (see the module notes).
    out : numpy.ndarray, optional
        Where to write the result.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> import numpy as np, chokepoint
    >>> chokepoint.relu_grad(np.array([-1.0, 0.0, 2.0]))
    array([0, 0, 1], dtype=uint8)
    >>> chokepoint.relu_grad(np.array([-1.0, 0.0, 2.0]), at_zero=1, dtype=np.float32)
    array([0., 1., 1.], dtype=float32)
    """
    # the C path (native.Lane), the fast path for plain NumPy arrays (see fast()), else
    # dispatch and the general path
    if dtype is None and type(at_zero) is int and (at_zero == 0 or at_zero == 1):
        native = _GRAD_NATIVE[at_zero].native
        if native is not None:
            result = native(x, out)
            if result is not None:
                return result
    if type(x) is np.ndarray and (out is None or type(out) is np.ndarray) \
            and type(at_zero) is int:
        if dtype is None:
            target = _UINT8 if out is None else _FAST_GRAD_DTYPES.get(out.dtype)
        else:
            try:
                target = _FAST_GRAD_DTYPES.get(dtype) or _FAST_GRAD_DTYPES.get(np.dtype(dtype))
            except TypeError:
                target = None
        # at_zero 0 or 1 (an int: 1.0 and True hash alike but are refused)
        entry = _GRAD_ENTRIES.get((x.dtype, at_zero))
        if entry is None and at_zero in (0, 1):
            entry = _GRAD_ENTRIES[x.dtype, at_zero] = _entry_for(
                "relu_grad_at_zero" if at_zero else "relu_grad", x.dtype)
        if target is not None and entry is not None:
            result = AGAIN
            if entry and x.flags.c_contiguous and engine() is entry.engine:
                result = call_fast(entry, (x,), out, target)
            if result is AGAIN:
                op = "relu_grad_at_zero" if at_zero else "relu_grad"
                result = fast(op, (x,), out, (), out_dtype=target)
            if result is not None:
                return result
    return _relu_grad_general(x, dtype=dtype, at_zero=at_zero, out=out)


#: the C paths of the hand-written public functions, by op (see native.Lane)
_LANES = {"relu_grad": Lane(MAP1, np.dtype(np.uint8)),
          "relu_grad_at_zero": Lane(MAP1, np.dtype(np.uint8)),
          "relu_backward": Lane(MAP2), "relu_backward_at_zero": Lane(MAP2),
          "mask_forward": Lane(MASK_FORWARD), "mask_forward_at_zero": Lane(MASK_FORWARD, at_zero=1),
          "mask_backward": Lane(MASK_BACKWARD)}


#: at_zero -> relu_grad's C path
_GRAD_NATIVE = (_LANES["relu_grad"], _LANES["relu_grad_at_zero"])
#: (x's dtype, at_zero) -> relu_grad's entry (:func:`_entry_for` of its op)
_GRAD_ENTRIES: dict[tuple, FastEntry | bool] = {}


#: (op, dtype) -> small_entry(op, dtype), for the hand-written public functions
_ENTRIES: dict[tuple, FastEntry | bool] = {}


def _entry_for(op: str, dtype: np.dtype) -> FastEntry | bool | None:
    """:func:`small_entry` of an op without parameters, kept once made (the callers look in
    :data:`_ENTRIES` first: a call costs 0.1 us)."""
    entry = _ENTRIES.get((op, dtype))
    if entry is None:
        entry = small_entry(op, dtype, lane=_LANES[op])
        if entry is not None:
            _ENTRIES[op, dtype] = entry
    return entry


_UINT8 = np.dtype(np.uint8)


def _relu_backward_numpy(grad, x_or_mask, *, at_zero: int | None = None, out=None) -> np.ndarray:
    """:func:`relu_backward` on NumPy arrays of any layout, validated (its last resort)."""
    func = "relu_backward"
    if isinstance(x_or_mask, PackedMask):
        return _relu_backward_from_mask(grad, x_or_mask, at_zero, out)
    at_zero = _check_at_zero(func, 0 if at_zero is None else at_zero)
    return _binary("relu_backward_at_zero" if at_zero else "relu_backward", func, grad,
                   x_or_mask, out)


_relu_backward_general = dispatched(_relu_backward_numpy, "relu_backward")


@_over(_relu_backward_general)
def relu_backward(grad, x_or_mask, *, at_zero: int | None = None, out=None) -> np.ndarray:
    """``grad * relu'(x)`` in one fused pass, with no temporaries.

    Parameters
    ----------
    grad : array_like
        Gradient of the loss with respect to ``relu(x)``.
    x_or_mask : array_like or PackedMask
        The forward pass's input (``grad``'s shape and dtype), or the mask that
        :func:`relu_with_mask` returned: 1 bit per element to read instead of ``x``.
    at_zero : {0, 1}, optional
        The derivative at ``x == 0``; default 0, or the mask's own convention. A mask cannot
        answer for another convention than the one it recorded (ValueError).
    out : numpy.ndarray, optional
        Where to write the result; ``out=grad`` works in place.

    Returns
    -------
    numpy.ndarray
        ``grad`` where the derivative is 1, an exact 0 elsewhere (even where ``grad`` is NaN).
    """
    # the C path (native.Lane), the fast path for plain NumPy arrays (see fast()), else
    # dispatch and the general path
    plain = at_zero is None or (type(at_zero) is int and (at_zero == 0 or at_zero == 1))
    if plain:
        native = (_MASK_BACKWARD_NATIVE if type(x_or_mask) is PackedMask and at_zero is None
                  else _BACKWARD_NATIVE[at_zero or 0]).native
        if native is not None:
            result = native(grad, x_or_mask, out)
            if result is not None:
                return result
    if (plain and type(x_or_mask) is np.ndarray and type(grad) is np.ndarray
            and (out is None or type(out) is np.ndarray)):
        op = "relu_backward_at_zero" if at_zero else "relu_backward"
        x = x_or_mask
        entry = _ENTRIES.get((op, x.dtype)) or _entry_for(op, x.dtype)
        result = AGAIN
        if (entry and x.flags.c_contiguous and grad.dtype is x.dtype
                and grad.flags.c_contiguous and engine() is entry.engine):
            result = call_fast(entry, (grad, x), out, x.dtype)
        if result is AGAIN:
            result = fast(op, (grad, x), out, ())
        if result is not None:
            return result
    elif (type(x_or_mask) is PackedMask and type(grad) is np.ndarray
            and (out is None or type(out) is np.ndarray) and type(at_zero) in (type(None), int)):
        result = _fast_mask_backward(grad, x_or_mask, at_zero, out)
        if result is not None:
            return result
    return _relu_backward_general(grad, x_or_mask, at_zero=at_zero, out=out)


def _fast_mask_backward(grad: np.ndarray, mask: PackedMask, at_zero, out) -> np.ndarray | None:
    """:func:`relu_backward` from a mask for plain NumPy arrays (as :func:`fast`), or None."""
    bits = mask.bits
    if (type(bits) is not np.ndarray or grad.shape != mask.shape
            or (at_zero is not None and at_zero != mask.at_zero)):
        return None

    entry = _MASK_ENTRIES.get(("mask_backward", grad.dtype))
    if entry is None:
        entry = _mask_entry("mask_backward", grad.dtype)
    if not entry or not grad.flags.c_contiguous or engine() is not entry.engine:
        return None
    # the kernels check the sizes and the overlap (of out with grad and with the bits)
    result = call_fast(entry, (bits, grad), out, grad.dtype)
    if result is not AGAIN:
        return result
    out = _plain_out((grad,), out, grad.dtype)
    bits = mask.checked_bits("relu_backward")
    if out is None or may_share(out, bits):
        return None
    _numba().mask_backward(grad.ravel(), bits, out.ravel(), _ZERO[grad.dtype])
    return out


_BACKWARD_NATIVE = (_LANES["relu_backward"], _LANES["relu_backward_at_zero"])
_MASK_BACKWARD_NATIVE = _LANES["mask_backward"]
_MASK_FORWARD_NATIVE = (_LANES["mask_forward"], _LANES["mask_forward_at_zero"])

#: (mask kernel, dtype) -> its FastEntry, False (a dtype the fast path does not take), or
#: None while the engine in use is not numba's (not kept)
_MASK_ENTRIES: dict[tuple, FastEntry | bool] = {}


def _mask_entry(name: str, dtype: np.dtype) -> FastEntry | bool | None:
    """The :class:`FastEntry` of mask kernel ``name`` for ``dtype`` (its constant: zero)."""
    if engine().NAME != "numba":
        return None
    entry = False
    if dtype in _NATIVE:
        entry = FastEntry(name, _numba().kernel_for(name, "checked"), (_ZERO[dtype],),
                          _numba_engine, _LANES[name])
    _MASK_ENTRIES[name, dtype] = entry
    return entry


def _relu_backward_from_mask(grad, mask: PackedMask, at_zero, out) -> np.ndarray:
    func = "relu_backward"
    if at_zero is not None and _check_at_zero(func, at_zero) != mask.at_zero:
        raise ValueError(f"{func}: the mask recorded at_zero={mask.at_zero}; it cannot give "
                         f"at_zero={at_zero} (pass x instead)")
    grad = _as_array(grad, func, "grad")
    _check_dtype(func, "grad", grad, integers=True)
    if grad.shape != mask.shape:
        raise ValueError(f"{func}: grad has shape {grad.shape} but the mask has {mask.shape}")
    bits = mask.checked_bits(func)  # before reading prod(shape) bits unchecked
    result = _result(func, out, grad.shape, grad.dtype, [grad])
    (flat_g,), flat_out, finish = flat_operands([grad], result, c_only=True)
    zero = _params(grad.dtype)[0]
    _engine_for(grad.dtype).mask_backward(flat_g, bits, flat_out, zero)
    finish()
    return result


def _relu_with_mask_numpy(x, *, at_zero: int = 0, out=None) -> tuple[np.ndarray, PackedMask]:
    """:func:`relu_with_mask` on NumPy arrays of any layout, validated (its last resort)."""
    func = "relu_with_mask"
    at_zero = _check_at_zero(func, at_zero)
    x = _as_array(x, func, "x")
    _check_dtype(func, "x", x, integers=True)
    result = _result(func, out, x.shape, x.dtype, [x])
    bits = np.empty((x.size + 7) // 8, np.uint8)
    (flat_x,), flat_out, finish = flat_operands([x], result, c_only=True)
    zero = _params(x.dtype)[0]
    _engine_for(x.dtype).mask_forward(flat_x, flat_out, bits, zero, at_zero)
    finish()
    return result, PackedMask(bits, x.shape, at_zero)


_relu_with_mask_general = dispatched(_relu_with_mask_numpy, "relu_with_mask")


@_over(_relu_with_mask_general)
def relu_with_mask(x, *, at_zero: int = 0, out=None) -> tuple[np.ndarray, PackedMask]:
    """``relu(x)`` and a packed 1-bit mask of its derivative, in one pass.

    Keep the mask instead of ``x`` for the backward pass: ``relu_backward(grad, mask)`` reads
    1 bit per element instead of ``x.itemsize`` bytes (64 times less memory for float64).

    Parameters
    ----------
    x : array_like
        float16, float32, float64 or integer input.
    at_zero : {0, 1}
        The derivative recorded at ``x == 0``.
    out : numpy.ndarray, optional
        Where to write ``relu(x)``.

    Returns
    -------
    y : numpy.ndarray
    mask : PackedMask
    """
    # the C path (native.Lane), the fast path for plain NumPy arrays (as fast()), else
    # dispatch and the general path
    if type(x) is np.ndarray and type(at_zero) is int and at_zero in (0, 1):
        native = _MASK_FORWARD_NATIVE[at_zero].native
        if native is not None:
            result = native(x, out)  # (y, mask)
            if result is not None:
                return result
    if (type(x) is np.ndarray and type(at_zero) is int and at_zero in (0, 1)
            and (out is None or type(out) is np.ndarray)):
        name = "mask_forward_at_zero" if at_zero else "mask_forward"
        entry = _MASK_ENTRIES.get((name, x.dtype))
        if entry is None:
            entry = _mask_entry(name, x.dtype)
        if entry and x.flags.c_contiguous and engine() is entry.engine:
            bits = np.empty((x.size + 7) // 8, np.uint8)
            # the kernels check the shapes and the overlap
            y = call_fast(entry, (x,), out, x.dtype, (bits,))
            if y is AGAIN:
                y = _plain_out((x,), out, x.dtype)
                if y is not None:
                    _numba().mask_forward(x.ravel(), y.ravel(), bits, _ZERO[x.dtype], at_zero)
            if y is not None:
                return y, filled_mask(bits, x.shape, at_zero)
    return _relu_with_mask_general(x, at_zero=at_zero, out=out)
