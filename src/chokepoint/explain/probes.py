"""One measured probe per possible cause, each on copies of the traced operation's arguments.

Every probe re-runs one recorded operation with one thing changed and times both versions
round-robin (:func:`chokepoint.measure.measure_interleaved`, so that drift hits both alike):
into a preallocated ``out=`` (page faults on fresh memory), on cache-resident slices (memory-
against compute-bound), on predictable values and with subnormals flushed (data dependence),
with a boolean mask or an index array sorted (data-dependent indexing), on contiguous copies
(strides), on inputs already in the result's dtype (conversions), on one element (per-call
overhead), split across threads (single-threaded). A probe changes the values or the layout,
never the bytes moved: the constant probe gives each operand its own array, the sorted mask
keeps its count of True. A probe that cannot be run on an operation (no ``out=`` parameter,
not elementwise) returns None: nothing is claimed. A probe that runs out of memory (it needs
copies of the operation's arrays) is skipped with a :class:`ProbeSkipped` warning, which explain
reports; the others still run.
"""

from __future__ import annotations

import itertools
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from ..measure.load import Load, watch
from ..measure.timer import Measurement, measure, measure_interleaved
from .trace import Op

__all__ = ["FRESH_BYTES", "Probe", "ProbeSettings", "ProbeSkipped", "byte_bounds",
           "clear_after_three", "probe_bytes", "probe_op", "scratch_op", "significant",
           "skipped", "subset", "time_op"]


class ProbeSkipped(RuntimeWarning):
    """A probe, a rewrite or an operation's timing that could not run (out of memory)."""


def skipped(what: str) -> None:
    """Warn that ``what`` ran out of memory and was skipped."""
    warnings.warn(f"{what} ran out of memory and was skipped", ProbeSkipped, stacklevel=3)


@dataclass(frozen=True)
class ProbeSettings:
    """How long probes time things."""

    min_time: float = 0.015
    repeats: int = 5
    cache_bytes: int = 256 * 2**10  # a working set that stays in L2
    sorted_max: int = 4_000_000  # elements; sorting more costs seconds
    slow: float = 0.02  # seconds; a probe of a slower operation repeats each side 3 times


@dataclass
class Probe:
    """The timings of one operation under one change.

    Attributes
    ----------
    name : str
        ``"out"``, ``"cache"``, ``"constant"``, ``"sorted"``, ``"subnormal"``,
        ``"contiguous"``, ``"cast"``, ``"tiny"``, ``"threads"`` or ``"short-axis"``.
    base, changed : Measurement
        The operation as traced, and with the change (per element for ``cache``/``tiny``),
        timed round-robin.
    detail : str
        What was changed.
    """

    name: str
    base: Measurement
    changed: Measurement
    detail: str
    buffer: np.ndarray | None = None
    into_out: bool = False  # both sides wrote into one preallocated out=
    load: Load | None = None  # what other processes did meanwhile (the threads probe's)

    @property
    def saved(self) -> float:
        """Seconds per call the change saves (negative: it costs)."""
        return self.base.median - self.changed.median

    def significant(self, fraction: float = 0.1) -> bool:
        """See :func:`significant`."""
        return significant(self.base.times, self.changed.times, fraction)


def significant(base: list[float], changed: list[float], fraction: float = 0.1) -> bool:
    """A change moved the median by more than ``fraction`` of it and by more than the base's
    own run-to-run spread (its interquartile range), and the two timings' interquartile ranges
    do not overlap: the one rule for every probe, of explain and of run."""
    b25, b50, b75 = np.percentile(base, [25, 50, 75])
    c25, c50, c75 = np.percentile(changed, [25, 50, 75])
    saved = b50 - c50
    apart = b25 > c75 if saved > 0 else c25 > b75
    return bool(abs(saved) > fraction * b50 and abs(saved) > b75 - b25 and apart)


def _time(fn, settings: ProbeSettings) -> Measurement:
    # no warm-up call: the traced run warmed the operation, and every probe touches its new
    # arrays before timing them
    return measure(fn, min_time=settings.min_time, repeats=settings.repeats, warmup=False)


def clear_after_three(times: list[list[float]], fraction: float = 0.1) -> bool:
    """Whether three repeats a side already settle a comparison that :func:`significant`
    would judge with ``fraction``: every time of one side below every time of the other and
    the medians more than twice ``fraction`` apart, or the medians less than half of it apart
    with the two sides' ranges overlapping. Anything between gets the full repeats, and so does
    a clear gap that :func:`significant` would not accept on these three (one slow outlier
    widens a side's spread: more repeats settle what it was)."""
    base, changed = times
    if len(base) < 3 or len(changed) < 3:
        return False
    b, c = float(np.median(base)), float(np.median(changed))
    apart = max(changed) < min(base) or max(base) < min(changed)
    if apart:
        return abs(b - c) > 2 * fraction * b and significant(base, changed, fraction)
    return abs(b - c) < fraction / 2 * b


def _pair(base_fn, changed_fn, settings: ProbeSettings, *,
          early: bool = True) -> tuple[Measurement, Measurement]:
    """The operation as it was and with one change, timed round-robin; three repeats a side
    where they settle it (:func:`clear_after_three`; ``early=False``: all of them)."""
    # a warm-up call each: the first touch of fresh memory can take many times a later one
    # (the kernel handing out pages, transparent huge pages), and would pass for spread
    base, changed = measure_interleaved([base_fn, changed_fn], min_time=settings.min_time,
                                        repeats=settings.repeats, warmup=True,
                                        enough=clear_after_three if early else None)
    return base, changed


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


def byte_bounds(a: np.ndarray) -> tuple[int, int]:
    """The addresses of ``a``'s first byte and one past its last (NumPy's ``byte_bounds``,
    wherever this NumPy keeps it): the memory a view lies in."""
    try:
        from numpy.lib.array_utils import byte_bounds as bounds
    except ImportError:  # NumPy < 2
        bounds = getattr(np, "byte_bounds")  # noqa: B009 - gone from NumPy 2's namespace
    return bounds(a)


def same_layout(a: np.ndarray, values) -> np.ndarray:
    """A new array with ``a``'s shape, dtype *and strides*, holding ``values``: a probe that
    changes the values must not change the layout (a contiguous stand-in for a strided view
    would measure the strides, not the values)."""
    if a.flags.c_contiguous or a.ndim == 0:
        out = np.empty(a.shape, a.dtype)
    else:
        low, high = byte_bounds(a)
        span = np.empty((high - low) // a.itemsize + 1, a.dtype)
        offset = (a.__array_interface__["data"][0] - low) // a.itemsize
        out = np.lib.stride_tricks.as_strided(span[offset:], shape=a.shape, strides=a.strides)
    out[...] = values
    return out


#: NumPy functions whose result can have their input's shape although they are not
#: elementwise: each element of the result depends on the whole input (its order, a transform),
#: so the cost per element grows with the size and with the order of the values. A probe on a
#: cache-sized part, or on constant or sorted values, measures another computation (a sort of
#: sorted data, a shorter sort) and would pass for memory-bound or data-dependent
WHOLE_ARRAY = frozenset({"sort", "argsort", "partition", "argpartition", "sort_complex",
                         "lexsort", "searchsorted", "unique", "roll", "take", "take_along_axis",
                         "choose", "convolve", "correlate", "gradient", "unwrap", "median",
                         "percentile", "quantile", "nanmedian", "nanpercentile",
                         "nanquantile"})


def _elementwise(op: Op) -> bool:
    result = op.result_array
    if op.gemm or getattr(op.func, "signature", None):  # matmul is a generalised ufunc
        return False
    if op.name in WHOLE_ARRAY or str(getattr(op.func, "__module__", "")).startswith(
            ("numpy.fft", "numpy.linalg")):
        return False
    return (op.kind in ("ufunc", "function") and result is not None and result.ndim > 0
            and all(a.shape == result.shape for a in op.inputs if a.ndim > 0))


#: an elementwise operation probed on its first rows keeps a result of at least this many
#: bytes: a fresh result is then still fresh pages (above glibc's 32 MB mmap threshold)
FRESH_BYTES = 64 * 2**20


def probe_bytes() -> int:
    """The working set (result and the arrays read) above twice which an elementwise operation
    is probed on its first rows (:func:`subset`): twice the last-level cache, so that the share
    still streams from memory."""
    from ..measure.machine import last_level_cache_bytes

    return 2 * last_level_cache_bytes()


def _working_set(op: Op, result: np.ndarray) -> int:
    """Bytes ``op`` touches: its result and each input that is not the result's memory."""
    return result.nbytes + sum(a.nbytes for a in op.inputs
                               if a.ndim > 0 and not np.may_share_memory(a, result))


def subset(op: Op, limit: int, fresh: int = 0) -> tuple[Op, float]:
    """``op`` on the first rows of its arrays, about ``limit`` bytes of working set (the result
    and the inputs it does not overwrite) and at least ``fresh`` bytes of result, and the share
    of the rows it keeps; ``(op, 1.0)`` when the operation is not elementwise or the share would
    be half of it or more.

    Why it is sound: every probe's verdict is a ratio (its change against the operation as
    traced, on the same arrays), and an elementwise operation does the same work per element
    on any share of an array far beyond the caches. Every array operand has the result's shape
    (:func:`_elementwise`) and is cut alike.
    """
    result = op.result_array
    if (result is None or isinstance(op.result, tuple) or not _elementwise(op)
            or result.shape[0] < 2):
        return op, 1.0
    n = result.shape[0]
    rows = max(1, -(-n * limit // _working_set(op, result)), -(-n * fresh // result.nbytes))
    if 2 * rows >= n:
        return op, 1.0

    def cut(v):
        if isinstance(v, tuple):
            return tuple(cut(x) for x in v)
        if isinstance(v, np.ndarray) and v.ndim == result.ndim and v.shape[0] == n:
            return v[:rows]
        return v

    share = rows / n
    return replace(op, args=cut(op.args), kwargs={k: cut(v) for k, v in op.kwargs.items()},
                   inputs=[cut(a) for a in op.inputs], result=cut(op.result),
                   in_bytes=round(op.in_bytes * share), out_bytes=round(op.out_bytes * share),
                   seconds=op.seconds * share, before=cut(op.before)), share


def _call(op: Op, args, kwargs):
    return lambda: op.func(*args, **kwargs)


def _written(op: Op) -> list[np.ndarray]:
    """The arrays ``op`` writes into: its ``out=`` (a keyword, or a ufunc's positional outputs
    after its inputs) and an assignment's target."""
    if op.kind == "index" and op.name == "setitem":
        return [op.args[0]] if isinstance(op.args[0], np.ndarray) else []
    outs = list(op.args[op.func.nin:]) if isinstance(op.func, np.ufunc) else []
    out = op.kwargs.get("out")
    outs += list(out) if isinstance(out, tuple) else [out]
    return [a for a in outs if isinstance(a, np.ndarray)]


def scratch_op(op: Op) -> Op:
    """``op`` that may be run again and again without writing into anything it was traced on
    (the user's array, a memory-mapped file, data later operations read): each array it writes
    into replaced by a copy of the same layout, and an argument that is that array by that same
    copy (``np.add(M, X, out=M)`` still reads what it writes), one that overlaps it by a copy
    of its own. ``op`` itself when it writes into no array."""
    written = _written(op)
    if not written:
        return op
    copies = {id(a): same_layout(a, a) for a in written}

    def swap(v):
        if isinstance(v, np.ndarray):
            if id(v) in copies:
                return copies[id(v)]
            return same_layout(v, v) if any(np.may_share_memory(v, a) for a in written) else v
        if isinstance(v, (tuple, list)):
            return type(v)(swap(x) for x in v)
        return v

    return replace(op, args=swap(op.args), kwargs={k: swap(v) for k, v in op.kwargs.items()},
                   inputs=[swap(a) for a in op.inputs], result=swap(op.result))


def time_op(op: Op, settings: ProbeSettings) -> Measurement:
    """``op`` timed as traced (no probes), into copies of what it writes (:func:`scratch_op`)."""
    op = scratch_op(op)
    return _time(_call(op, op.args, op.kwargs), settings)


def probe_op(op: Op, settings: ProbeSettings, scratch: dict | None = None,
             base: Measurement | None = None) -> tuple[Measurement, list[Probe]]:
    """Time ``op`` as traced (unless ``base`` has it) and under every change that applies.

    ``scratch`` keeps arrays that later operations of the same statement can reuse (pass one
    dict per statement, and drop it afterwards).

    When the operation takes ``out=``, the value and layout probes write into one preallocated
    buffer on both sides of the comparison, so that the allocator's state (fresh pages or
    recycled ones) cannot pass for an effect of the data. Every probe runs the operation on
    copies of what it writes (:func:`scratch_op`), never on the traced arrays.
    """
    op = scratch_op(op)
    base = _time(_call(op, op.args, op.kwargs), settings) if base is None else base
    if base.median > settings.slow:  # slow operations: fewer repeats of each change
        settings = replace(settings, repeats=min(settings.repeats, 3))
    probes: list[Probe] = []
    result = op.result_array
    if op.kind == "index":
        probe = _try(_index_probe, op, settings)
        return base, [probe] if probe is not None else []
    if result is None or result.size == 0:
        return base, probes
    out = _try(_out_probe, op, base, settings, scratch)
    buffer = None
    if out is not None:
        probes.append(out)
        buffer = out.buffer
    for make in (_cache_probe, _tiny_probe, _threads_probe):
        probe = _try(make, op, base, settings)
        if probe is not None:
            probes.append(probe)
    constant = _try(_constant_probe, op, settings, buffer, scratch)
    compared = [constant]
    if constant is not None and constant.significant():
        # constant inputs are the most predictable data there is: where they change nothing,
        # the sorted probe would not either, and its sort is costly
        compared.append(_try(_sorted_probe, op, settings, buffer, scratch))
    compared += [_try(make, op, settings, buffer)
                 for make in (_subnormal_probe, _contiguous_probe, _cast_probe)]
    for probe in compared:
        if probe is not None:
            probe.into_out = buffer is not None
            probes.append(probe)
    short = _try(_short_axis_probe, op, settings)  # its result has another shape: no out=
    if short is not None:
        probes.append(short)
    return base, probes


def _try(make, op: Op, *args):
    try:
        return make(op, *args)
    except (TypeError, ValueError):  # the operation does not take this change
        return None
    except MemoryError:  # the copies it needs do not fit: said, and the other probes run
        name = make.__name__.strip("_").removesuffix("_probe")
        skipped(f"the {name} probe of {op.label}")
        return None


def _with_out(kwargs: dict, buffer) -> dict:
    return kwargs if buffer is None else {**kwargs, "out": buffer}


#: probes of the values (data-dependent work): one that shows an effect is timed again
CONFIRMED = ("constant", "sorted", "subnormal")


def _compared(name: str, op: Op, args, kwargs, buffer, settings: ProbeSettings,
              detail: str, base: tuple | None = None) -> Probe:
    """A probe of one change: the operation as it was (into ``buffer`` when given; on ``base``
    arguments when given) and with the changed arguments, timed round-robin.

    A value probe (:data:`CONFIRMED`) that shows an effect is timed a second time and keeps
    both timings: a cause is then reported only when the effect stands out of both together.
    Five repeats a side once passed the test by chance on a VM. Where ``base`` holds copies
    of the probe's own, the second timing exchanges the two sides' memory (each side's values
    in the other's arrays): two arrays of 32 MB can differ by 15% in how fast their pages
    read, which the first timing would take for an effect of the values.
    """
    base_args, base_kwargs = base if base is not None else (op.args, op.kwargs)
    base_fn = _call(op, base_args, _with_out(base_kwargs, buffer))
    changed_fn = _call(op, args, _with_out(kwargs, buffer))
    before, after = _pair(base_fn, changed_fn, settings)
    probe = Probe(name, before, after, detail)
    if name in CONFIRMED and probe.significant():
        pairs = _operand_pairs((base_args, base_kwargs), (args, kwargs)) if base else []
        with _exchanged(pairs):
            again = _pair(base_fn, changed_fn, settings)
        again_before, again_after = again[::-1] if pairs else again
        probe = Probe(name, _joined(before, again_before), _joined(after, again_after), detail)
    return probe


def _operand_pairs(base, changed) -> list[tuple[np.ndarray, np.ndarray]]:
    """The arrays that differ between two argument lists of one call (same positions), each
    pair once."""
    pairs: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def walk(b, c):
        if isinstance(b, np.ndarray) and isinstance(c, np.ndarray):
            if b is not c and b.shape == c.shape and b.dtype == c.dtype:
                pairs.setdefault(id(b), (b, c))
        elif isinstance(b, (tuple, list)) and isinstance(c, (tuple, list)):
            for x, y in zip(b, c, strict=False):
                walk(x, y)
        elif isinstance(b, dict) and isinstance(c, dict):
            for k in b.keys() & c.keys():
                walk(b[k], c[k])

    walk(base, changed)
    return list(pairs.values())


@contextmanager
def _exchanged(pairs: list[tuple[np.ndarray, np.ndarray]]):
    """Each pair's contents exchanged for the block, and back afterwards (the probes' scratch
    arrays serve the statement's later operations)."""
    def exchange(a, b):
        held = a.copy()  # a MemoryError here leaves both as they were
        a[...] = b
        b[...] = held

    done = []
    try:
        for a, b in pairs:
            exchange(a, b)
            done.append((a, b))
        yield
    finally:
        for a, b in done:
            exchange(a, b)


def _joined(first: Measurement, second: Measurement) -> Measurement:
    """Two timings of one callable as one (their repeats together)."""
    return Measurement(times=[*first.times, *second.times], loops=first.loops)


def _fresh_copies(op: Op, scratch: dict) -> tuple | None:
    """``op``'s arguments with each float operand copied into a new array of its layout, as the
    value probes' stand-ins are: then the two sides differ in the values only, not in how
    their memory was obtained (an array allocated by the traced code and a fresh one can differ
    by 20% in page size and placement)."""
    def copy(a):
        if a.dtype.kind != "f":
            return a
        key = ("copy", id(a))
        if key not in scratch:
            scratch[key] = (a, same_layout(a, a))
        return scratch[key][1]

    return _replace_arrays(op, copy)


def _out_probe(op: Op, base: Measurement, settings: ProbeSettings,
               scratch: dict | None = None) -> Probe | None:
    if not op.allocates or op.kind not in ("ufunc", "function"):
        return None
    result = op.result_array
    # one buffer per shape and dtype for the whole statement: its first touch costs, and no
    # probe needs it again afterwards
    scratch = {} if scratch is None else scratch
    key = ("out", result.shape, result.dtype.str)
    buffer = scratch.get(key)
    if buffer is None or not result.flags.c_contiguous:
        buffer = np.empty_like(result)
        if result.flags.c_contiguous:
            scratch[key] = buffer
    kwargs = {**op.kwargs, "out": buffer}
    op.func(*op.args, **kwargs)  # raises TypeError where there is no out=; also faults pages in
    before, changed = _pair(_call(op, op.args, op.kwargs), _call(op, op.args, kwargs), settings)
    return Probe("out", before, changed,
                 f"into a preallocated out= ({result.nbytes / 1e6:.1f} MB)", buffer=buffer)


def _cache_probe(op: Op, base: Measurement, settings: ProbeSettings) -> Probe | None:
    if not _elementwise(op):
        return None
    result = op.result_array
    per_element = max(1, (op.in_bytes + op.out_bytes) // result.size)
    m = max(1024, settings.cache_bytes // per_element)
    if m * 4 > result.size:
        return None  # already cache-sized
    rows = max(1, m * result.shape[0] // result.size)
    sizes = []

    def head(a):  # about m elements, in the same layout as the rest
        part = a.reshape(-1)[:m] if a.flags.c_contiguous else a[:rows]
        sizes.append(part.size)
        return part

    swapped = _replace_arrays(op, head)
    if swapped is None or len(set(sizes)) != 1:
        return None
    m = sizes[0]
    before, small = _pair(_call(op, op.args, op.kwargs), _call(op, *swapped), settings)
    scale = m / result.size  # compare per element
    base_per = Measurement([t * scale for t in before.times], before.loops)
    return Probe("cache", base_per, small,
                 f"on {m} elements ({m * per_element / 2**10:.0f} KiB, cache-resident), "
                 "times scaled per element")


def _threads_probe(op: Op, base: Measurement, settings: ProbeSettings) -> Probe | None:
    """The same ufunc split into one contiguous chunk per core, run on a thread pool (NumPy
    releases the GIL inside ufunc loops): does the operation go faster on more threads?"""
    threads = min(os.cpu_count() or 1, 8)
    result = op.result_array
    if (threads < 2 or op.kind != "ufunc" or not _elementwise(op) or result.size < 65536
            or not result.flags.c_contiguous
            or not all(a.flags.c_contiguous for a in op.inputs if a.ndim)):
        return None
    if op.name.endswith((".reduce", ".accumulate", ".at", ".outer", ".reduceat")):
        return None
    buffer = np.empty_like(result)
    flat_out = buffer.reshape(-1)
    bounds = np.linspace(0, result.size, threads + 1).astype(int)

    def chunk(v, lo, hi):
        return v.reshape(-1)[lo:hi] if isinstance(v, np.ndarray) and v.ndim else v

    jobs = [(tuple(chunk(a, lo, hi) for a in op.args),
             {**{k: chunk(v, lo, hi) for k, v in op.kwargs.items() if k != "out"},
              "out": flat_out[lo:hi]})
            for lo, hi in itertools.pairwise(bounds)]
    pool = ThreadPoolExecutor(threads)
    try:
        def split():
            for f in [pool.submit(op.func, *a, **k) for a, k in jobs]:
                f.result()

        whole = {**op.kwargs, "out": buffer}
        split()  # raises TypeError where there is no out=
        # other processes on the other cores take what a split would gain: watched, so that
        # a split that gained nothing on a busy machine is not read as "threads do not help".
        # Repeats of 30 ms at least: the watch needs 0.2 s to tell a quarter of a core
        # (/proc/stat counts 10 ms ticks)
        with watch() as watched:
            before, after = _pair(_call(op, op.args, whole), split,
                                  replace(settings, min_time=max(settings.min_time, 0.03)),
                                  early=False)  # the watch needs its 0.2 s
    finally:
        pool.shutdown()
    return Probe("threads", before, after,
                 f"split into {threads} chunks on {threads} threads (both into out=)",
                 into_out=True, load=watched.load)


def _float_inputs(op: Op) -> bool:
    return any(a.dtype.kind == "f" and a.size > 1 for a in op.inputs)


def _constant_probe(op: Op, settings: ProbeSettings, buffer: np.ndarray | None = None,
                    scratch: dict | None = None) -> Probe | None:
    scratch = {} if scratch is None else scratch
    if not (_elementwise(op) and _float_inputs(op)):
        return None
    given: dict[int, np.ndarray] = {}  # id of an operand -> its constant stand-in
    used: dict[tuple, int] = {}

    def constant(a):
        if a.dtype.kind != "f":
            return a
        if id(a) in given:  # the same array twice (W * W): one stand-in, the same bytes
            return given[id(a)]
        sample = a.reshape(-1)[:: max(1, a.size // 1001)]
        value = np.nanmedian(sample) if np.isfinite(sample).any() else 0.5
        # one array per distinct operand, shape and dtype, refilled: fresh memory costs page
        # faults that would be paid again for every operation. Two
        # distinct operands never share one array: that would halve the bytes read, not
        # change the values.
        kind = (a.shape, a.dtype.str, a.strides)
        used[kind] = used.get(kind, 0) + 1
        key = ("constant", *kind, used[kind])
        array = scratch.get(key)
        if array is None:
            array = scratch[key] = same_layout(a, value)
        array[...] = value
        given[id(a)] = array
        return array

    swapped = _replace_arrays(op, constant)
    if swapped is None:
        return None
    args, kwargs = swapped
    return _compared("constant", op, args, kwargs, buffer, settings,
                     "every float input replaced by a constant (its median)",
                     base=_fresh_copies(op, scratch))


def _sorted_probe(op: Op, settings: ProbeSettings, buffer: np.ndarray | None = None,
                  scratch: dict | None = None) -> Probe | None:
    scratch = {} if scratch is None else scratch
    result = op.result_array
    if not (_elementwise(op) and _float_inputs(op)) or result.size > settings.sorted_max:
        return None
    ordered: dict[int, np.ndarray] = {}

    def sort(a):
        if a.dtype.kind != "f":
            return a
        if id(a) not in ordered:  # the same array twice stays one array
            key = ("sorted", id(a))  # and one sort per array for the whole statement
            if key not in scratch:
                scratch[key] = (a, same_layout(a, np.sort(a, axis=None).reshape(a.shape)))
            ordered[id(a)] = scratch[key][1]
        return ordered[id(a)]

    swapped = _replace_arrays(op, sort)
    if swapped is None:
        return None
    args, kwargs = swapped
    return _compared("sorted", op, args, kwargs, buffer, settings,
                     "float inputs sorted (same values, predictable order)",
                     base=_fresh_copies(op, scratch))


def _index_arrays(key) -> list[np.ndarray]:
    keys = key if isinstance(key, tuple) else (key,)
    return [k for k in keys if isinstance(k, np.ndarray) and k.size > 1
            and (k.dtype == bool or k.dtype.kind in "iu")]


def _index_probe(op: Op, settings: ProbeSettings) -> Probe | None:
    """Indexing with a boolean mask or an index array, against the same with the mask (or the
    indices) sorted: the same count of selected elements, the same bytes, in predictable
    order."""
    arrays = _index_arrays(op.args[1])
    if not arrays:
        return None
    replaced = {id(k): np.sort(k, axis=None).reshape(k.shape) for k in arrays}

    def swap(key):
        if isinstance(key, tuple):
            return tuple(swap(k) for k in key)
        return replaced.get(id(key), key) if isinstance(key, np.ndarray) else key

    args, kwargs = op.args, op.kwargs  # the target a copy already (probe_op)
    changed = (args[0], swap(args[1]), *args[2:])
    what = "mask" if any(k.dtype == bool for k in arrays) else "index array"
    before, after = _pair(_call(op, args, kwargs), _call(op, changed, kwargs), settings)
    return Probe("sorted", before, after,
                 f"the {what} sorted (the same number of elements selected, in order)")


def _subnormal_probe(op: Op, settings: ProbeSettings,
                     buffer: np.ndarray | None = None) -> Probe | None:
    def count(a):
        if a.dtype.kind != "f":
            return 0
        tiny = np.finfo(a.dtype).tiny
        return int(np.count_nonzero((a != 0) & (np.abs(a) < tiny)))

    if not _elementwise(op):
        return None
    # a sample first: subnormals too rare to show in 65536 evenly spaced elements cannot
    # cost a measurable share of the time
    if not sum(count(a.reshape(-1)[:: max(1, a.size // 65536)]) for a in op.inputs):
        return None
    found = sum(count(a) for a in op.inputs)
    if not found:
        return None

    def flush(a):
        if a.dtype.kind != "f":
            return a
        b = same_layout(a, a)
        b[np.abs(b) < np.finfo(a.dtype).tiny] = 0
        return b

    swapped = _replace_arrays(op, flush)
    if swapped is None:
        return None
    args, kwargs = swapped
    return _compared("subnormal", op, args, kwargs, buffer, settings,
                     f"{found} subnormal inputs flushed to zero")


def _contiguous_probe(op: Op, settings: ProbeSettings,
                      buffer: np.ndarray | None = None) -> Probe | None:
    strided = [a for a in op.inputs if a.ndim and not (a.flags.c_contiguous
                                                        or a.flags.f_contiguous)]
    if not strided or op.kind not in ("ufunc", "function", "method"):
        return None
    copies = {id(a): np.ascontiguousarray(a) for a in strided}

    def swap(v):
        return copies.get(id(v), v) if isinstance(v, np.ndarray) else v

    args = tuple(swap(a) for a in op.args)
    kwargs = {k: swap(v) for k, v in op.kwargs.items()}
    return _compared("contiguous", op, args, kwargs, buffer, settings,
                     f"{len(strided)} strided input(s) copied to contiguous memory first")


#: reductions whose axis the ``short-axis`` probe moves (functions, methods; and any
#: ``ufunc.reduce``)
REDUCTIONS = frozenset({"sum", "mean", "max", "min", "amax", "amin", "prod", "any", "all",
                        "std", "var", "argmax", "argmin", "ptp", "nansum", "nanmean", "nanmax",
                        "nanmin", "nanprod", "norm"})
#: a reduction along an axis this short or shorter ...
SHORT_AXIS = 32
#: ... over at least this many rows pays NumPy's inner-loop setup per row
SHORT_AXIS_ROWS = 256


def _reduced_axis(op: Op) -> tuple[int, bool] | None:
    """The axis a reduction ``op`` reduces (normalised) and whether it was given by keyword;
    None for another operation, all axes, or several."""
    reduce = op.kind == "ufunc" and op.name.endswith(".reduce")
    if not reduce and (op.kind not in ("function", "method")
                       or op.name.split(".")[-1] not in REDUCTIONS):
        return None
    a = op.args[0] if op.args else None
    if not isinstance(a, np.ndarray) or a.ndim < 2:
        return None
    by_keyword = "axis" in op.kwargs
    # the axis is the second positional argument of each of them but norm's (ord, axis)
    axis = op.kwargs["axis"] if by_keyword else (
        op.args[1] if len(op.args) > 1 and op.name.split(".")[-1] != "norm" else
        (0 if reduce else None))
    if isinstance(axis, tuple) and len(axis) == 1:
        axis = axis[0]
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        return None
    return int(axis) % a.ndim, by_keyword


def _short_axis_probe(op: Op, settings: ProbeSettings) -> Probe | None:
    """A reduction along a short axis (rows of 2-32 elements: coordinates, a few features, a
    k-means' distances) run on the same values with that axis first and contiguous, reduced
    along it: NumPy then reduces whole rows with vector operations instead of setting up its
    inner loop once per short row."""
    found = _reduced_axis(op)
    if found is None:
        return None
    axis, by_keyword = found
    a = op.args[0]
    length = a.shape[axis]
    if not 2 <= length <= SHORT_AXIS or a.size // length < SHORT_AXIS_ROWS:
        return None
    if axis == 0 and a.flags.c_contiguous:
        return None  # already that layout
    moved = np.ascontiguousarray(np.moveaxis(a, axis, 0))
    if by_keyword:
        args, kwargs = (moved, *op.args[1:]), {**op.kwargs, "axis": 0}
    else:
        args, kwargs = (moved, 0, *op.args[2:]), op.kwargs
    if kwargs.get("out") is not None or any(isinstance(v, np.ndarray) for v in args[1:]):
        return None  # an out= (by keyword or position) has the other layout's shape
    # the base on a fresh copy of the same layout too: both sides' memory obtained alike (a
    # traced array and a new one can differ by 20% in page size and placement)
    return _compared("short-axis", op, args, kwargs, None, settings,
                     f"its axis of {length} first ({'x'.join(map(str, moved.shape))}, "
                     "contiguous), reduced along it",
                     base=((same_layout(a, a), *op.args[1:]), op.kwargs))


def _cast_probe(op: Op, settings: ProbeSettings,
                buffer: np.ndarray | None = None) -> Probe | None:
    result = op.result_array
    if op.kind != "ufunc" or result.dtype.kind not in "fc":
        return None
    # only a cast that loses nothing is the conversion the ufunc's loop does itself:
    # np.abs(z) of complex numbers computes on them, and z cast to float64 is another
    # computation (its real part)
    mixed = [a for a in op.inputs if a.ndim and a.dtype != result.dtype and a.dtype.kind != "b"
             and np.can_cast(a.dtype, result.dtype, "safe")]
    if not mixed:
        return None
    casts = {id(a): a.astype(result.dtype) for a in mixed}

    def swap(v):
        return casts.get(id(v), v) if isinstance(v, np.ndarray) else v

    args = tuple(swap(a) for a in op.args)
    kinds = ", ".join(sorted({str(a.dtype) for a in mixed}))
    return _compared("cast", op, args, op.kwargs, buffer, settings,
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
