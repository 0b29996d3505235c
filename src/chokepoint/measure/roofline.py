"""This machine's ceilings: memory bandwidth and float64 arithmetic rate, measured and cached.

Bandwidths are measured with numba ``prange`` kernels on arrays far larger than any cache
(:data:`ARRAY_BYTES`), with all threads and with one: *read* (sum an int64 view, which vectorises
because integer addition is associative), *write* (fill), *copy* and *triad* (``a = b + s * c``).
Bytes are counted as the program asks for them (a copy moves 16 B per element, read + write);
the write-allocate traffic a store may cause is part of what the machine costs, so it is not
added. The elementwise compute ceiling is float64 multiply-adds on data that stays in
registers; the matrix ceilings (``gemm``) are NumPy's own matrix product (its BLAS) on square
float32 and float64 matrices, with all of the BLAS's threads and with one (threadpoolctl).

The result is cached per machine (CPU model, core count, thread count) as JSON in the user's
cache directory, so race and explain pay for it once. ``chokepoint roofline --refresh`` measures
again. One process measures at a time (a lock file beside the cache: two measuring at once each
measured ceilings 2.4-4.5x too low); a measurement made while other processes kept the machine
busy is said (and cached: ``--refresh`` on an idle machine replaces it); a damaged cache file is
measured again.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..cachefile import locked, write_atomic
from .load import Load, watch
from .machine import machine_info
from .timer import measure

__all__ = ["ARRAY_BYTES", "BANDWIDTHS", "LOCK_WAIT", "Roofline", "bandwidth_kernels",
           "cache_path", "measure_bandwidths", "measure_floor_bandwidth",
           "measure_roofline", "roofline"]

ARRAY_BYTES = 256 * 2**20
GEMM_SIZE = 1536  # n of the n x n matrix products: 7 GFLOP, past BLAS's small-matrix regime
GEMM_DTYPES = ("float32", "float64")
@dataclass(frozen=True)
class Roofline:
    """Measured ceilings of this machine, in bytes and flops per second.

    Attributes
    ----------
    read_bw, write_bw, copy_bw, triad_bw : float
        All-thread bandwidths in B/s.
    read_bw_1t, write_bw_1t, copy_bw_1t, triad_bw_1t : float
        One-thread bandwidths in B/s.
    flops, flops_1t : float
        float64 elementwise arithmetic rate (a multiply and an add count 2), all threads and
        one.
    gemm, gemm_1t : dict
        NumPy's matrix product rate in flop/s per dtype name (``"float32"``, ``"float64"``),
        with all BLAS threads and one; ``2 n**3`` flops for an ``n x n`` product.
    machine : dict
        CPU model, core count, thread count, NumPy and numba versions.
    measured_at : str
        When, as ISO 8601.
    seconds : float
        How long the measurement took.
    spread : dict
        Run-to-run spread of each all-thread bandwidth: interquartile range over median of its
        five repeats (empty in a roofline cached before it was recorded).
    """

    read_bw: float
    write_bw: float
    copy_bw: float
    triad_bw: float
    read_bw_1t: float
    write_bw_1t: float
    copy_bw_1t: float
    triad_bw_1t: float
    flops: float
    flops_1t: float
    gemm: dict
    gemm_1t: dict
    machine: dict
    measured_at: str
    seconds: float
    spread: dict = field(default_factory=dict)

    @property
    def bandwidth(self) -> float:
        """The memory roof used for floors: the read bandwidth, B/s — the all-thread one, or the
        one-thread one where that measured higher (a busy machine: one thread can always be
        used, so the ceiling is at least what it reached)."""
        return max(self.read_bw, self.read_bw_1t)

    @property
    def peak_bandwidth(self) -> float:
        """The fastest rate any of the measurements moved bytes, B/s: read, copy or triad, all
        threads or one. A kernel with several streams (the triad's two reads and a write) can
        move bytes faster than a single read stream, so the benchmarks' floors use this one;
        explain's "% of the roof" stays the read bandwidth (:attr:`bandwidth`)."""
        return max(self.bandwidth, self.copy_bw, self.copy_bw_1t, self.triad_bw, self.triad_bw_1t)

    @property
    def compute(self) -> float:
        """The elementwise float64 rate used for floors, flop/s (all threads or one, the
        higher)."""
        return max(self.flops, self.flops_1t)

    def floor_seconds(self, nbytes: float) -> float:
        """Least time to move ``nbytes`` at :attr:`bandwidth`."""
        return nbytes / self.bandwidth

    def attainable(self, intensity: float) -> float:
        """Roofline model: flop/s attainable at ``intensity`` flop per byte."""
        return min(self.compute, intensity * self.bandwidth)

    def gemm_ceiling(self, dtype, *, one_thread: bool = False) -> float:
        """The matrix-product ceiling in flop/s for ``dtype`` (float32's for narrower floats
        and integers, float64's for wider and complex ones)."""
        kind = np.dtype(dtype)
        name = "float32" if kind.kind in "fiub" and kind.itemsize <= 4 else "float64"
        one = float(self.gemm_1t.get(name) or max(self.gemm_1t.values()))
        if one_thread:
            return one
        return max(one, float(self.gemm.get(name) or max(self.gemm.values())))

    def to_dict(self) -> dict:
        """Plain-data form (JSON-ready)."""
        return asdict(self)

    def summary(self) -> dict:
        """The machine and every ceiling in one flat dict (the ``machine`` of race and explain
        JSON)."""
        ceilings = {k: v for k, v in self.to_dict().items()
                    if k not in ("machine", "measured_at", "seconds")}
        return {**self.machine, **ceilings, "roof": "read_bw", "bandwidth": self.bandwidth,
                "compute": self.compute, "roofline_measured_at": self.measured_at}


def cache_path(machine: dict | None = None) -> Path:
    """The cache file for ``machine`` (this one by default)."""
    import platformdirs

    machine = machine_info() if machine is None else machine
    key = json.dumps({**{k: machine[k] for k in ("cpu", "cores", "threads")}, "schema": 2},
                     sort_keys=True)  # schema 2: the GEMM ceilings
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(platformdirs.user_cache_dir("chokepoint")) / f"roofline-{digest}.json"


BANDWIDTHS = ("read_bw", "write_bw", "copy_bw", "triad_bw")


def measure_floor_bandwidth(nbytes: int = 2**28, min_time: float = 0.1) -> tuple[float, str]:
    """The rate a benchmark's floor uses, measured now: the faster of the read and triad
    bandwidths (as :attr:`Roofline.peak_bandwidth`), in B/s, and a line saying both."""
    measured = measure_bandwidths(nbytes, min_time, kinds=("read_bw", "triad_bw"))
    line = (f"bandwidth read {measured['read_bw'] / 1e9:.1f} GB/s, triad "
            f"{measured['triad_bw'] / 1e9:.1f} GB/s (measured now; floors use the faster)")
    return max(measured.values()), line


def measure_bandwidths(nbytes: int, min_time: float,
                       kinds: tuple[str, ...] = BANDWIDTHS,
                       spreads: dict | None = None) -> dict[str, float]:
    """Read, write, copy and triad bandwidth in B/s on arrays of ``nbytes``, with the threads
    numba has now (the benchmarks use it to measure the floor in their own run; a race
    re-measures the read ceiling it doubts with ``kinds=("read_bw",)``)."""
    probes = bandwidth_kernels(nbytes, kinds)
    found = {}
    for kind, (fn, moved) in probes.items():
        m = measure(fn, min_time=min_time, repeats=5)
        if spreads is not None:  # run-to-run spread: interquartile range over the median
            spreads[kind] = m.iqr / m.median
        found[kind] = moved / m.median
    return found


def bandwidth_kernels(nbytes: int, kinds: tuple[str, ...] = BANDWIDTHS
                      ) -> dict[str, tuple[Callable[[], object], int]]:
    """``kind -> (call, bytes it moves)`` for the bandwidth kernels in ``kinds`` (in
    :data:`BANDWIDTHS`' order), on new arrays of ``nbytes`` each: for a caller that times them
    among other calls (the benchmark matrix interleaves them with each large cell)."""
    unknown = set(kinds) - set(BANDWIDTHS)
    if unknown:
        raise ValueError(f"unknown bandwidths {sorted(unknown)}; known: {BANDWIDTHS}")
    from . import bandwidth as k

    n = nbytes // 8
    a = np.ones(n)
    b = np.ones(n) if {"copy_bw", "triad_bw"} & set(kinds) else None
    c = np.ones(n) if "triad_bw" in kinds else None
    kernels = {
        "read_bw": (lambda: k.read(a.view(np.int64)), 1),
        "write_bw": (lambda: k.write(a), 1),
        "copy_bw": (lambda: k.copy(b, a), 2),
        "triad_bw": (lambda: k.triad(a, b, c, 3.0), 3),
    }
    return {k: (kernels[k][0], kernels[k][1] * a.nbytes) for k in BANDWIDTHS if k in kinds}


def _flop_rate(min_time: float) -> float:
    import numba

    from . import bandwidth as k

    a = np.full(numba.get_num_threads() * 4096, 0.5)  # stays in L1/L2
    # the fastest repeat: a ceiling is what the machine can do, and a parallel launch that
    # waited for a busy core's time slice (8 ms for this 1 MFLOP) says nothing about that
    seconds = measure(lambda: k.flops(a, 0.999, 0.0001), min_time=min_time, repeats=5).min
    return a.size * k.FLOP_STEPS * 2 / seconds


def _gemm_rates(min_time: float) -> dict[str, float]:
    rng = np.random.default_rng(0)
    rates = {}
    for name in GEMM_DTYPES:
        a = rng.random((GEMM_SIZE, GEMM_SIZE)).astype(name)
        b = rng.random((GEMM_SIZE, GEMM_SIZE)).astype(name)
        out = np.empty_like(a)
        m = measure(lambda a=a, b=b, out=out: np.matmul(a, b, out=out),
                    min_time=min_time, repeats=3)
        rates[name] = 2 * GEMM_SIZE**3 / m.min
    return rates


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without it, one-thread ceilings equal the all-thread ones
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def measure_roofline(*, nbytes: int = ARRAY_BYTES, min_time: float = 0.1) -> Roofline:
    """Measure this machine's ceilings now (about 10 s with the defaults).

    Parameters
    ----------
    nbytes : int
        Size of each bandwidth array; keep it far above the last-level cache.
    min_time : float
        Seconds per timing repeat.

    Returns
    -------
    Roofline
    """
    import numba  # the kernels' threads; imported only to measure (see chokepoint.program.api)

    started = time.perf_counter()
    threads = numba.get_num_threads()
    spread: dict[str, float] = {}
    all_threads = {**measure_bandwidths(nbytes, min_time, spreads=spread),
                   "flops": _flop_rate(min_time)}
    numba.set_num_threads(1)
    try:
        one_thread = {**measure_bandwidths(nbytes, min_time), "flops": _flop_rate(min_time)}
    finally:
        numba.set_num_threads(threads)
    # BLAS last: its threads spin for a while after a call and would steal numba's cores
    with _one_blas_thread():
        one_thread["gemm"] = _gemm_rates(min_time)
    all_threads["gemm"] = _gemm_rates(min_time)
    return Roofline(
        **all_threads,
        **{f"{k}_1t": v for k, v in one_thread.items()},
        machine=machine_info(),
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        seconds=time.perf_counter() - started,
        spread=spread,
    )


_memo: Roofline | None = None

#: most seconds a process waits for another one measuring the roofline (about 10 s) before it
#: uses what is cached, or measures without writing
LOCK_WAIT = 120.0

_RATES = ("read_bw", "write_bw", "copy_bw", "triad_bw", "read_bw_1t", "write_bw_1t",
          "copy_bw_1t", "triad_bw_1t", "flops", "flops_1t")


def _number(value: object, *, zero: bool = False) -> bool:
    """A finite positive number (not a bool), or zero too with ``zero``."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and (value > 0 or (zero and value == 0)))


def _table(value: object, *, zero: bool = False) -> bool:
    """A dict of names to :func:`_number` values; a non-empty one unless ``zero`` (the
    spreads)."""
    return (isinstance(value, dict) and (bool(value) or zero)
            and all(isinstance(k, str) and _number(v, zero=zero) for k, v in value.items()))


def _damage(data: object) -> str | None:
    """What makes a roofline cache file's JSON unusable, or None when it is sound."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    wrong = [k for k in _RATES if not _number(data.get(k))]
    wrong += [k for k in ("gemm", "gemm_1t") if not _table(data.get(k))]
    wrong += [] if _table(data.get("spread", {}), zero=True) else ["spread"]
    wrong += [] if _number(data.get("seconds"), zero=True) else ["seconds"]
    wrong += [k for k, kind in (("machine", dict), ("measured_at", str))
              if not isinstance(data.get(k), kind)]
    return f"missing or of the wrong type or range: {', '.join(wrong)}" if wrong else None


def _cached(path: Path, machine: dict, *, say: bool = True) -> Roofline | None:
    """The roofline cached at ``path`` for ``machine``; None when there is none, it is another
    machine's, or it is damaged (then measured again: a RuntimeWarning says so, with ``say``)."""
    try:
        text = path.read_text()
    except OSError:
        return None  # not measured yet
    try:
        data = json.loads(text)
        problem = _damage(data)
    except ValueError:
        data, problem = None, "not JSON"
    if problem is not None:
        if say:
            warnings.warn(f"chokepoint: the roofline cache {path} is damaged ({problem}): "
                          "it is treated as absent and the roofline measured again",
                          RuntimeWarning, stacklevel=3)
        return None
    if data["machine"] != machine:
        return None  # another NumPy, numba or thread count: measured again
    return Roofline(**{k: data[k] for k in Roofline.__dataclass_fields__ if k in data})


def _watched() -> tuple[Roofline, Load | None]:
    """Measure the roofline, and the load the other processes put on the machine meanwhile."""
    with watch() as w:
        roof = measure_roofline()
    return roof, w.load


def _measured(path: Path, machine: dict, refresh: bool) -> Roofline:
    """Measure the roofline and cache it at ``path``, one process at a time.

    A process that finds another one measuring waits for it (up to :data:`LOCK_WAIT` s) and uses
    its result, unless ``refresh``; past the wait it uses what is cached, or measures without
    writing. A measurement in doubt (:func:`_doubt`: other processes kept the machine busy) is
    not trusted silently: a RuntimeWarning says so (it is cached all the same; one with a
    ceiling that is not a finite positive number is not).
    """
    with locked(path.with_suffix(".lock"), LOCK_WAIT) as held:
        # what another process measured while this one waited (the damage was said before)
        found = None if refresh else _cached(path, machine, say=False)
        if found is not None:
            return found
        roof, load = _watched()
        doubt = _doubt(roof, load)
        # a busy machine's ceilings are cached all the same, said: on a machine that stays
        # busy (a shared CI runner) not caching them cost every later process 10 s
        damaged = _damage(roof.to_dict()) is not None
        if doubt is not None:
            warnings.warn(f"chokepoint: {doubt}, so this machine's roofline may be wrong (floors "
                          f"too high); {'not cached' if damaged else 'cached'}: run "
                          "`chokepoint roofline --refresh` when the machine is idle",
                          RuntimeWarning, stacklevel=3)
        if held and not damaged:
            write_atomic(path, json.dumps(roof.to_dict(), indent=2))
    return roof


def _doubt(roof: Roofline, load: Load | None) -> str | None:
    """Why a roofline just measured is not to be trusted, or None: other processes kept the
    machine busy meanwhile (two processes measuring at once each measured ceilings 2.4-4.5x too
    low), or a ceiling is not a finite positive number."""
    problem = _damage(roof.to_dict())
    if problem is not None:
        return f"the roofline measured {problem}"
    if load is not None and load.busy:
        return (f"other processes used {load.others + load.steal:.1f} of {load.cpus} cores "
                "while the roofline was measured")
    return None


def roofline(*, refresh: bool = False) -> Roofline:
    """This machine's roofline: from memory, from the cache file, or measured and cached.

    A cache file that is damaged (not a JSON object, a ceiling that is not a positive number) is
    treated as absent, with a RuntimeWarning. While one process measures, another one waits for
    its result (see :func:`_measured`).

    Parameters
    ----------
    refresh : bool
        Measure again even when a cached result exists.

    Returns
    -------
    Roofline
    """
    global _memo
    machine = machine_info()
    if _memo is not None and not refresh and _memo.machine == machine:
        return _memo
    path = cache_path(machine)
    found = None if refresh else _cached(path, machine)
    _memo = found if found is not None else _measured(path, machine, refresh)
    return _memo
