"""Timing with autorange, repeats and robust statistics, the way %timeit does it.

:func:`measure` calls a function once to warm it up (compiles, page faults, caches), calibrates
the number of loops per repeat so that one repeat lasts at least ``min_time``, then runs
``repeats`` repeats with the garbage collector disabled, as :mod:`timeit` does. It reports the
median time per call, the interquartile range and the minimum.

A callable with a ``restore`` method (a race candidate that changes its inputs) has it called
before every call, outside the timed region: each call is timed alone, and the loops per repeat
are calibrated on the wall time, restores included.

Cache honesty: when ``fn`` is called again and again on the same inputs, data that fits in the
cache is measured from the cache. :func:`measure` does not hide that; callers that rotate among
copies of their inputs pass ``setup_each`` (see :mod:`chokepoint.measure.race`), and results say
``cache_hot`` when the working set fits in the last-level cache.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = ["Measurement", "format_seconds", "measure", "measure_counted", "measure_interleaved"]


@dataclass(frozen=True)
class Measurement:
    """Times of one callable, in seconds per call.

    Attributes
    ----------
    times : list of float
        Seconds per call of each repeat.
    loops : int
        Calls per repeat.
    """

    times: list[float] = field(repr=False)
    loops: int

    @property
    def runs(self) -> int:
        """Number of repeats."""
        return len(self.times)

    @property
    def median(self) -> float:
        """Median seconds per call."""
        if not self.times:
            return math.nan
        return float(statistics.median(self.times))  # np.median costs 30 us on a few numbers

    @property
    def iqr(self) -> float:
        """Interquartile range of the seconds per call."""
        q1, q3 = np.percentile(self.times, [25, 75])
        return float(q3 - q1)

    @property
    def min(self) -> float:
        """Fastest repeat's seconds per call."""
        return float(np.min(self.times))

    def to_dict(self) -> dict:
        """Plain-data form (JSON-ready)."""
        return {**asdict(self), "runs": self.runs, "median": self.median, "iqr": self.iqr,
                "min": self.min}

    def __repr__(self) -> str:
        return (f"Measurement(median={format_seconds(self.median)}, "
                f"iqr={format_seconds(self.iqr)}, min={format_seconds(self.min)}, "
                f"runs={self.runs}, loops={self.loops})")


def format_seconds(seconds: float | None) -> str:
    """``0.0123`` -> ``"12.3 ms"``; ``None`` -> ``"-"``."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


#: a repeat is long enough at this fraction of ``min_time`` (see :func:`measure_counted`)
MIN_TIME_SHORT = 0.8


def _time_loops(fn: Callable[[], object], loops: int, clock: Callable[[], float]) -> float:
    """Seconds ``loops`` calls of ``fn`` took (see :func:`_time_restored` for a callable with
    a ``restore`` method)."""
    return _time_wall(fn, loops, clock)[0]


def _time_plain(fn: Callable[[], object], loops: int, clock: Callable[[], float]) -> float:
    start = clock()
    call = 0
    try:
        for call in range(1, loops + 1):  # noqa: B007 - read when a call raises
            fn()
    except BaseException as exc:
        exc.loop_call = call
        raise
    return clock() - start


def _restores(fn: Callable[[], object]) -> bool:
    """Whether ``fn`` has inputs to put back before each call (a ``restore`` method)."""
    return callable(getattr(fn, "restore", None))


def _time_restored(fn, loops: int, clock: Callable[[], float]) -> tuple[float, float]:
    """Seconds ``loops`` calls of ``fn`` took, each timed alone after an untimed
    ``fn.restore()`` (a statement that changes its inputs is timed on the same inputs every
    call), and the wall time the whole took, restores included."""
    timed = 0.0
    begin = clock()
    for call in range(1, loops + 1):
        fn.restore()
        start = clock()
        try:
            fn()
        except BaseException as exc:
            exc.loop_call = call
            raise
        timed += clock() - start
    return timed, clock() - begin


def _time_wall(fn: Callable[[], object], loops: int, clock: Callable[[], float]) -> tuple:
    """``(timed, wall)`` seconds of ``loops`` calls: equal unless ``fn`` restores."""
    if _restores(fn):
        return _time_restored(fn, loops, clock)
    elapsed = _time_plain(fn, loops, clock)
    return elapsed, elapsed


def measure(
    fn: Callable[[], object],
    *,
    min_time: float = 0.2,
    repeats: int = 7,
    warmup: bool = True,
    max_loops: int = 1_000_000,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Time ``fn()``.

    Parameters
    ----------
    fn : callable
        Called with no arguments.
    min_time : float
        Seconds one repeat should last; loops per repeat are calibrated to it (1, 2, 5, 10,
        20, ... as %timeit does), and a step that lasts 80% of it is kept.
    repeats : int
        Number of repeats (at least 1).
    warmup : bool
        Call ``fn`` once, untimed, first.
    max_loops : int
        Upper bound on loops per repeat.
    clock : callable
        Monotonic clock in seconds; replaceable for tests.

    Returns
    -------
    Measurement

    Raises
    ------
    BaseException
        Whatever ``fn`` raises, with ``calls`` added: the calls made, the one that raised
        included.
    """
    return measure_counted(fn, min_time=min_time, repeats=repeats, warmup=warmup,
                            max_loops=max_loops, clock=clock)[0]


def measure_counted(fn: Callable[[], object], *, min_time: float, repeats: int,
                     warmup: bool, max_loops: int = 1_000_000,
                     clock: Callable[[], float] = time.perf_counter) -> tuple[Measurement, int]:
    """:func:`measure`, and how many calls it made. What a call raises carries ``calls``:
    the calls of ``fn`` made here up to the one that raised, that one included (a statement
    that works once and fails on its second run)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if not (min_time >= 0 and math.isfinite(min_time)):
        raise ValueError(f"min_time must be a finite number >= 0, got {min_time}")
    gc_was_enabled = gc.isenabled()
    gc.disable()
    done = 0
    try:
        if warmup:
            fn()
            done = 1
        # the loops are calibrated on the wall time, so that a callable's restores (see
        # _time_restored) count in how long a repeat lasts; the times are the calls'
        loops, (elapsed, wall) = 1, _time_wall(fn, 1, clock)
        done += 1
        # a repeat a little short of min_time is kept: the ladder's next step would double
        # or more than double it (a 20 ms statement at 0.1 s took 10 loops, not 5)
        while wall < MIN_TIME_SHORT * min_time and loops < max_loops:
            # the next step of the 1-2-5 ladder that should reach min_time
            needed = loops * MIN_TIME_SHORT * min_time / max(wall, 1e-9)
            loops = min(max_loops, _ladder_at_least(max(needed, loops + 1)))
            elapsed, wall = _time_wall(fn, loops, clock)
            done += loops
        times = [elapsed / loops]
        for _ in range(repeats - 1):
            times.append(_time_loops(fn, loops, clock) / loops)
            done += loops
    except BaseException as exc:
        exc.calls = done + getattr(exc, "loop_call", 1)
        raise
    finally:
        if gc_was_enabled:
            gc.enable()
    return Measurement(times=times, loops=loops), done


def measure_interleaved(
    fns: list[Callable[[], object]],
    *,
    min_time: float = 0.2,
    repeats: int = 7,
    warmup: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    enough: Callable[[list[list[float]]], bool] | None = None,
) -> list[Measurement]:
    """Time several callables round-robin, so that a machine drifting during the measurement
    (bandwidth, clock speed, a neighbour's load) hits them alike. The order alternates (the
    calibration A B C, then C B A, A B C, ...), so that no callable always follows the same
    other one: what one leaves in the caches and the allocator is shared out too.

    Each callable's loops per repeat are calibrated on its own (as :func:`measure` does), then
    set to fill ``min_time`` at the calibrated speed (see :func:`_even_loops`); then the
    repeats alternate. Parameters as for :func:`measure`, and:

    enough : callable, optional
        Called with each callable's seconds per call so far (a list per callable) before
        every round after the calibration; ``True`` ends the timing there, with fewer than
        ``repeats`` repeats (a comparison whose outcome is already clear).

    Returns
    -------
    list of Measurement
        In the order of ``fns``.

    Raises
    ------
    BaseException
        Whatever a callable raises (a KeyboardInterrupt included), with attributes added so
        that a caller can keep what was measured: ``interleaved_index``, the index of the
        callable that raised (None for an interrupt between calls), ``interleaved_partial``,
        the Measurement of each callable so far (None for one not calibrated yet), and
        ``calls``, the calls of the callable that raised, that one included.
    """
    if not fns:
        return []
    first: list[Measurement] = []
    calls: list[int] = []
    times: list[list[float]] = []
    running = None
    gc_was_enabled = gc.isenabled()
    try:
        for fn in fns:
            running = len(first)  # which callable raised, if one does
            m, made = measure_counted(fn, min_time=min_time, repeats=1, warmup=warmup,
                                       clock=clock)
            first.append(m)
            calls.append(made)
        times = [m.times[:] for m in first]
        # a restoring callable keeps its calibrated loops: its times leave the restores out
        loops = [m.loops if _restores(fn) else _even_loops(m, min_time)
                 for fn, m in zip(fns, first, strict=True)]
        gc.disable()
        for round_ in range(repeats - 1):
            if enough is not None and enough(times):
                break
            # forward then backward (A B C C B A ...): no callable always runs right after
            # the same other one, or always first after the calibration
            order = range(len(fns)) if round_ % 2 else range(len(fns) - 1, -1, -1)
            for running in order:
                times[running].append(
                    _time_loops(fns[running], loops[running], clock) / loops[running])
                calls[running] += loops[running]
    except BaseException as exc:
        if running is not None and running < len(calls):  # raised after its calibration
            exc.calls = calls[running] + getattr(exc, "loop_call", 0)
        exc.interleaved_index = running if not isinstance(exc, KeyboardInterrupt) else None
        exc.interleaved_partial = (
            [Measurement(times=ts, loops=m.loops) for ts, m in zip(times, first, strict=True)]
            if times else first[:]) + [None] * (len(fns) - len(first))
        raise
    finally:
        if gc_was_enabled:
            gc.enable()
    return [Measurement(times=ts, loops=n) for ts, n in zip(times, loops, strict=True)]


def _even_loops(calibrated: Measurement, min_time: float) -> int:
    """Loops per interleaved repeat: as many as fill ``min_time`` at the calibrated speed,
    not a step of the 1-2-5 ladder. The ladder's step follows from one call's time, so
    identical callables got 500 and 200 loops (a 40 us copy), and what a repeat costs once
    (switching callables: the caches, the allocator) was spread over 2.5 times more calls of
    one of them than of the others."""
    if min_time <= 0:
        return calibrated.loops
    per_call = calibrated.times[0]
    return max(1, min(calibrated.loops * 10, math.ceil(min_time / max(per_call, 1e-12))))


def _ladder_at_least(n: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is >= n."""
    decade = 1
    while True:
        for step in (1, 2, 5):
            if step * decade >= n:
                return step * decade
        decade *= 10
