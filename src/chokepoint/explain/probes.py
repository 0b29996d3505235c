"""One measured probe per possible cause, each on copies of the traced operation's arguments.

Every probe re-runs one recorded operation with one thing changed and times both versions with
:func:`chokepoint.measure.measure`: into a preallocated ``out=`` (page faults on fresh memory),
on cache-resident slices (memory- against compute-bound), on predictable values and with
subnormals flushed (data dependence), on contiguous copies (strides), on inputs already in the
result's dtype (conversions), on one element (per-call overhead). A probe that cannot be run on
an operation (no ``out=`` parameter, not elementwise) returns None: nothing is claimed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..measure.timer import Measurement, measure
from .trace import Op

__all__ = ["Probe", "ProbeSettings", "probe_op"]


@dataclass(frozen=True)
class ProbeSettings:
    """How long probes time things."""

    min_time: float = 0.03
    repeats: int = 5
    cache_bytes: int = 256 * 2**10  # a working set that stays in L2
    sorted_max: int = 4_000_000  # elements; sorting more costs seconds
    slow: float = 0.02  # seconds; slower operations get fewer repeats per probe


@dataclass
class Probe:
    """The timings of one operation under one change.

    Attributes
    ----------
    name : str
        ``"out"``, ``"cache"``, ``"constant"``, ``"sorted"``, ``"subnormal"``,
        ``"contiguous"``, ``"cast"`` or ``"tiny"``.
    base, changed : Measurement
        The operation as traced, and with the change (per element for ``cache``/``tiny``).
    detail : str
        What was changed.
    """

    name: str
    base: Measurement
    changed: Measurement
    detail: str
    buffer: np.ndarray | None = None
    into_out: bool = False  # both sides wrote into one preallocated out=

    @property
    def saved(self) -> float:
        """Seconds per call the change saves (negative: it costs)."""
        return self.base.median - self.changed.median

    def significant(self, fraction: float = 0.1) -> bool:
        """The change moves the median by more than ``fraction``, and the two timings'
        interquartile ranges do not overlap."""
        b25, b75 = np.percentile(self.base.times, [25, 75])
        c25, c75 = np.percentile(self.changed.times, [25, 75])
        apart = b25 > c75 if self.saved > 0 else c25 > b75
        return abs(self.saved) > fraction * self.base.median and bool(apart)


def _time(fn, settings: ProbeSettings) -> Measurement:
    # no warm-up call: the traced run warmed the operation, and every probe touches its new
    # arrays before timing them
    return measure(fn, min_time=settings.min_time, repeats=settings.repeats, warmup=False)


def _replace_arrays(op: Op, transform) -> tuple[tuple, dict] | None:
    """``op``'s arguments with every array of the result's shape transformed."""
    result = op.result_array
    if result is None:
        return None
    changed = [False]

    def swap(v):
        if isinstance(v, np.ndarray) and v.shape == result.shape:
            new = transform(v)
            if new is not v:
                changed[0] = True
            return new
        if isinstance(v, tuple):
            return tuple(swap(x) for x in v)
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    args = tuple(swap(a) for a in op.args)
    kwargs = {k: swap(v) for k, v in op.kwargs.items() if k != "out"}
    return (args, kwargs) if changed[0] else None


def _elementwise(op: Op) -> bool:
    result = op.result_array
    return (op.kind in ("ufunc", "function") and result is not None and result.ndim > 0
            and all(a.shape == result.shape for a in op.inputs if a.ndim > 0))


def _call(op: Op, args, kwargs):
    return lambda: op.func(*args, **kwargs)


def probe_op(op: Op, settings: ProbeSettings,
             scratch: dict | None = None) -> tuple[Measurement, list[Probe]]:
    """Time ``op`` as traced and under every change that applies to it.

    ``scratch`` keeps arrays that later operations of the same statement can reuse (pass one
    dict per statement, and drop it afterwards).

    When the operation takes ``out=``, the value and layout probes write into one preallocated
    buffer on both sides of the comparison, so that the allocator's state (fresh pages or
    recycled ones) cannot pass for an effect of the data.
    """
    base = _time(_call(op, op.args, op.kwargs), settings)
    if base.median > settings.slow:  # slow operations: fewer repeats of each change
        settings = replace(settings, repeats=max(3, settings.repeats - 2))
    probes: list[Probe] = []
    result = op.result_array
    if result is None or result.size == 0:
        return base, probes
    out = _try(_out_probe, op, base, settings)
    if out is not None:
        probes.append(out)
        reference, buffer = out.changed, out.buffer
    else:
        reference, buffer = base, None
    for make in (_cache_probe, _tiny_probe):
        probe = _try(make, op, base, settings)
        if probe is not None:
            probes.append(probe)
    compared = [_try(_constant_probe, op, reference, settings, buffer, scratch)]
    compared += [_try(make, op, reference, settings, buffer)
                 for make in (_sorted_probe, _subnormal_probe, _contiguous_probe, _cast_probe)]
    for probe in compared:
        if probe is not None:
            probe.into_out = buffer is not None
            probes.append(probe)
    return base, probes


def _try(make, *args):
    try:
        return make(*args)
    except (TypeError, ValueError):  # the operation does not take this change
        return None


def _with_out(kwargs: dict, buffer) -> dict:
    return kwargs if buffer is None else {**kwargs, "out": buffer}


def _out_probe(op: Op, base: Measurement, settings: ProbeSettings) -> Probe | None:
    if not op.allocates or op.kind not in ("ufunc", "function"):
        return None
    result = op.result_array
    buffer = np.empty_like(result)
    kwargs = {**op.kwargs, "out": buffer}
    op.func(*op.args, **kwargs)  # raises TypeError where there is no out=; also faults pages in
    changed = _time(_call(op, op.args, kwargs), settings)
    return Probe("out", base, changed, f"into a preallocated out= ({result.nbytes / 1e6:.1f} MB)",
                 buffer=buffer)


def _cache_probe(op: Op, base: Measurement, settings: ProbeSettings) -> Probe | None:
    if not _elementwise(op):
        return None
    result = op.result_array
    per_element = max(1, (op.in_bytes + op.out_bytes) // result.size)
    m = max(1024, settings.cache_bytes // per_element)
    if m * 4 > result.size:
        return None  # already cache-sized
    swapped = _replace_arrays(op, lambda a: np.ascontiguousarray(a.reshape(-1)[:m]))
    if swapped is None:
        return None
    small = _time(_call(op, *swapped), settings)
    scale = m / result.size  # compare per element
    base_per = Measurement([t * scale for t in base.times], base.loops)
    return Probe("cache", base_per, small,
                 f"on {m} elements ({m * per_element / 2**10:.0f} KiB, cache-resident), "
                 "times scaled per element")


def _float_inputs(op: Op) -> bool:
    return any(a.dtype.kind == "f" and a.size > 1 for a in op.inputs)


def _constant_probe(op: Op, base: Measurement, settings: ProbeSettings,
                    buffer: np.ndarray | None = None, scratch: dict | None = None
                    ) -> Probe | None:
    scratch = {} if scratch is None else scratch
    if not (_elementwise(op) and _float_inputs(op)):
        return None

    def constant(a):
        if a.dtype.kind != "f":
            return a
        sample = a.reshape(-1)[:: max(1, a.size // 1001)]
        value = np.nanmedian(sample) if np.isfinite(sample).any() else 0.5
        # one array per shape and dtype, refilled: fresh memory costs page faults (0.5 s for
        # 246 MB here) that would be paid again for every operation
        key = ("constant", a.shape, a.dtype.str)
        array = scratch.get(key)
        if array is None:
            array = scratch[key] = np.empty(a.shape, a.dtype)
        array.fill(value)
        return array

    swapped = _replace_arrays(op, constant)
    if swapped is None:
        return None
    args, kwargs = swapped
    return Probe("constant", base, _time(_call(op, args, _with_out(kwargs, buffer)), settings),
                 "every float input replaced by a constant (its median)")


def _sorted_probe(op: Op, base: Measurement, settings: ProbeSettings,
                  buffer: np.ndarray | None = None) -> Probe | None:
    result = op.result_array
    if not (_elementwise(op) and _float_inputs(op)) or result.size > settings.sorted_max:
        return None
    swapped = _replace_arrays(
        op, lambda a: np.sort(a, axis=None).reshape(a.shape) if a.dtype.kind == "f" else a)
    if swapped is None:
        return None
    args, kwargs = swapped
    return Probe("sorted", base, _time(_call(op, args, _with_out(kwargs, buffer)), settings),
                 "float inputs sorted (same values, predictable order)")


def _subnormal_probe(op: Op, base: Measurement, settings: ProbeSettings,
                     buffer: np.ndarray | None = None) -> Probe | None:
    def count(a):
        if a.dtype.kind != "f":
            return 0
        tiny = np.finfo(a.dtype).tiny
        return int(np.count_nonzero((a != 0) & (np.abs(a) < tiny)))

    found = sum(count(a) for a in op.inputs)
    if not found or not _elementwise(op):
        return None

    def flush(a):
        if a.dtype.kind != "f":
            return a
        b = a.copy()
        b[np.abs(b) < np.finfo(a.dtype).tiny] = 0
        return b

    swapped = _replace_arrays(op, flush)
    if swapped is None:
        return None
    args, kwargs = swapped
    return Probe("subnormal", base, _time(_call(op, args, _with_out(kwargs, buffer)), settings),
                 f"{found} subnormal inputs flushed to zero")


def _contiguous_probe(op: Op, base: Measurement, settings: ProbeSettings,
                      buffer: np.ndarray | None = None) -> Probe | None:
    strided = [a for a in op.inputs if a.ndim and not (a.flags.c_contiguous
                                                        or a.flags.f_contiguous)]
    if not strided or op.kind not in ("ufunc", "function", "method"):
        return None
    copies = {id(a): np.ascontiguousarray(a) for a in strided}

    def swap(v):
        return copies.get(id(v), v) if isinstance(v, np.ndarray) else v

    args = tuple(swap(a) for a in op.args)
    kwargs = _with_out({k: swap(v) for k, v in op.kwargs.items()}, buffer)
    return Probe("contiguous", base, _time(_call(op, args, kwargs), settings),
                 f"{len(strided)} strided input(s) copied to contiguous memory first")


def _cast_probe(op: Op, base: Measurement, settings: ProbeSettings,
                buffer: np.ndarray | None = None) -> Probe | None:
    result = op.result_array
    if op.kind != "ufunc" or result.dtype.kind not in "fc":
        return None
    mixed = [a for a in op.inputs if a.ndim and a.dtype != result.dtype and a.dtype.kind != "b"]
    if not mixed:
        return None
    casts = {id(a): a.astype(result.dtype) for a in mixed}

    def swap(v):
        return casts.get(id(v), v) if isinstance(v, np.ndarray) else v

    args = tuple(swap(a) for a in op.args)
    kinds = ", ".join(sorted({str(a.dtype) for a in mixed}))
    return Probe("cast", base, _time(_call(op, args, _with_out(op.kwargs, buffer)), settings),
                 f"inputs of {kinds} cast to {result.dtype} beforehand")


def _tiny_probe(op: Op, base: Measurement, settings: ProbeSettings) -> Probe | None:
    if not _elementwise(op):
        return None
    swapped = _replace_arrays(op, lambda a: np.ascontiguousarray(a.reshape(-1)[:1]))
    if swapped is None:
        return None
    quick = ProbeSettings(min_time=settings.min_time / 10, repeats=settings.repeats)
    return Probe("tiny", base, _time(_call(op, *swapped), quick),
                 "on one element: the per-call overhead")
