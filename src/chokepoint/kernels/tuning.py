"""The numba engine's variant choices, measured on this machine and cached.

Which variant of a kernel is fastest depends on the CPU, not on the code: on one AMD EPYC the
streaming (non-temporal store) variant of the mask backward was 4x faster than the plain
parallel one, on another 2.4x slower; the size from which two threads beat one depends on the
thread start-up cost. So they are measured, in a few seconds, by :func:`tune` (``chokepoint
tune``), and cached per machine beside the roofline; :func:`current` reads the cache and falls
back on :data:`DEFAULT` before the machine was tuned.

What is chosen:

``parallel_min``
    The size (elements) from which the parallel variant runs: the smallest size from which it
    measured at least :data:`GAIN` times faster than the serial one, at that size and every larger
    size tried.
``stream_maps``, ``stream_masks``
    Whether calls whose arrays together take at least ``settings.stream_min_bytes`` (the last-level
    cache) may write their output with non-temporal stores, for the elementwise select kernels
    (relu, relu_backward...) and for the 1-bit mask kernels: only where streaming measured at
    least :data:`GAIN` times faster than the plain parallel variant here. Where they may, the
    calls still weigh streaming against the plain variants (``engine_numba.candidates``).
    Never when a map's ``out`` is also an input (see ``engine_numba.can_stream``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..cachefile import write_atomic

__all__ = ["DEFAULT", "GAIN", "PASSES", "Tuning", "cache_path", "choose_parallel_min", "current",
           "forget", "tune"]

#: a variant must be this much faster to be chosen
GAIN = 1.1
#: sizes tried for the parallel threshold
_SIZES = tuple(1 << k for k in range(12, 23))
#: each comparison is measured this many times (every size once, then again), and each
#: variant keeps its fastest median: a moment of interference slows one pass, not the others.
#: In one pass, two runs of ``chokepoint tune`` in a row on a 2-core Zen 3 VM chose parallel
#: from 1048576 and from 65536 elements (at 262144: serial / parallel 0.97 then 1.64; in a
#: steady loop 1.70)
PASSES = 3
#: elements of the streaming comparison (32 MB of float32 an array: past settings.stream_min_bytes)
_STREAM_N = 1 << 23


@dataclass(frozen=True)
class Tuning:
    """The engine's variant choices (see the module notes).

    Attributes
    ----------
    parallel_min : int
    stream_maps, stream_masks : bool
    measured_at : str
        When they were measured ("" for the defaults).
    evidence : dict
        The timings behind each choice, in seconds.
    """

    parallel_min: int = 1 << 16
    stream_maps: bool = True
    stream_masks: bool = True
    measured_at: str = ""
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


#: the choices before this machine is tuned (those of the machine the kernels were written on)
DEFAULT = Tuning()

_memo: Tuning | None = None


def _machine_key() -> dict:
    """The machine, and the kernels' code: a choice measured on other kernels does not hold
    (a variant's speed against another changes when its loop does), so a changed
    ``engine_numba.py`` is tuned again."""
    from ..measure.machine import machine_info

    m = machine_info()
    key = {k: m[k] for k in ("cpu", "cores", "threads", "numba")}
    engine = Path(__file__).with_name("engine_numba.py")
    key["kernels"] = hashlib.sha256(engine.read_bytes()).hexdigest()[:16]
    return key


def cache_path() -> Path:
    """This machine's tuning file."""
    import platformdirs

    key = json.dumps(_machine_key(), sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(platformdirs.user_cache_dir("chokepoint")) / f"tuning-{digest}.json"


def _count(value: object) -> int | None:
    """A size in elements: a whole number from 1 to 2**62 (an integral float too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 1 <= value <= 1 << 62 else None


def _flag(value: object) -> bool | None:
    """A JSON true or false (not a number or a string)."""
    return value if isinstance(value, bool) else None


def _text(value: object) -> str | None:
    """A string."""
    return value if isinstance(value, str) else None


def _mapping(value: object) -> dict | None:
    """A JSON object."""
    return value if isinstance(value, dict) else None


#: each field of the cache file, and what makes its value sound (None: damaged)
_FIELDS = {"parallel_min": _count, "stream_maps": _flag, "stream_masks": _flag,
           "measured_at": _text, "evidence": _mapping}


def _parse(data: object) -> tuple[Tuning, list[str]] | None:
    """The tuning in a cache file's JSON, and the fields it ignored (damaged or missing: their
    defaults are used); None when it is not a JSON object at all."""
    if not isinstance(data, dict):
        return None
    sound = {name: check(data.get(name)) for name, check in _FIELDS.items()}
    ignored = [name for name, value in sound.items() if value is None]
    return Tuning(**{k: v for k, v in sound.items() if v is not None}), ignored


def _read(path: Path) -> Tuning:
    """The tuning cached at ``path``, else :data:`DEFAULT`; a damaged file or field is said once
    (a RuntimeWarning) and its defaults are used."""
    try:
        text = path.read_text()
    except OSError:
        return DEFAULT  # not tuned yet (or an unreadable directory)
    try:
        data = json.loads(text)
    except ValueError:  # a truncated write (of an older version), another program's file
        _warn_damaged(path, "not JSON")
        return DEFAULT
    parsed = _parse(data)
    if parsed is None:
        _warn_damaged(path, f"a JSON {type(data).__name__}, not an object")
        return DEFAULT
    tuned, ignored = parsed
    if ignored:
        _warn_damaged(path, f"{', '.join(ignored)} missing or of the wrong type or range")
    return tuned


def _warn_damaged(path: Path, what: str) -> None:
    """Say that the tuning cache at ``path`` is damaged (``what``), and what happens now."""
    warnings.warn(f"chokepoint: the tuning cache {path} is damaged ({what}): the defaults are "
                  "used instead; run `chokepoint tune` to measure again, or delete the file",
                  RuntimeWarning, stacklevel=4)  # current()'s caller


def current() -> Tuning:
    """The cached tuning of this machine, else :data:`DEFAULT` (nothing is measured here).

    A damaged cache file (not JSON, or a field of the wrong type or range) does not stop the
    kernels: each damaged field takes its default, and a RuntimeWarning says so, once (the
    tuning is remembered until :func:`forget`).
    """
    global _memo
    if _memo is None:
        _memo = _read(cache_path())
    return _memo


def _pair(a, b, min_time: float) -> tuple[float, float]:
    from ..measure.timer import measure_interleaved

    first, second = measure_interleaved([a, b], min_time=min_time, repeats=3)
    return first.median, second.median


def _fastest(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """Each variant's fastest time over the passes (interference only ever slows a pass)."""
    return min(a for a, _ in pairs), min(b for _, b in pairs)


def _parallel_min(engine, min_time: float) -> tuple[int, dict]:
    serial, parallel = engine.kernel_for("relu", "serial"), engine.kernel_for("relu", "parallel")
    rng = np.random.default_rng(0)
    zero = np.float64(0)
    arrays = {n: (rng.standard_normal(n), np.empty(n)) for n in _SIZES}
    passes: dict[int, list] = {n: [] for n in _SIZES}
    for _ in range(PASSES):
        for n, (x, out) in arrays.items():
            passes[n].append(_pair(lambda x=x, o=out: serial(x, o, zero),
                                   lambda x=x, o=out: parallel(x, o, zero), min_time))
    times = {n: _fastest(pairs) for n, pairs in passes.items()}
    return choose_parallel_min(times, engine.numba.get_num_threads()), {
        str(n): {"serial_s": s, "parallel_s": p} for n, (s, p) in times.items()}


def choose_parallel_min(times: dict[int, tuple[float, float]], threads: int) -> int:
    """The smallest size from which the parallel time (``times[n] = (serial, parallel)``) is
    at least :data:`GAIN` times faster at that size and every larger one. When no size wins:
    never parallel on one thread; else the default (a busy machine hid the gain: keeping
    every array serial would cost half the speed once it is idle)."""
    if threads < 2:
        return 1 << 62
    chosen = None
    for n in sorted(times, reverse=True):
        serial, parallel = times[n]
        if serial < GAIN * parallel:
            break
        chosen = n
    return DEFAULT.parallel_min if chosen is None else chosen


def _stream_gain(engine, name: str, args: tuple, min_time: float) -> tuple[bool, dict]:
    parallel, stream = engine.kernel_for(name, "parallel"), engine.kernel_for(name, "stream")
    p, s = _fastest([_pair(lambda: parallel(*args), lambda: stream(*args), min_time)
                     for _ in range(PASSES)])
    return p >= GAIN * s, {"parallel_s": p, "stream_s": s}


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on this system
        return None


def tune(engine, *, min_time: float = 0.02, save: bool = True) -> Tuning:
    """Measure the variant choices on this machine (a few seconds) and cache them (replacing a
    damaged cache file).

    Parameters
    ----------
    engine : module
        The numba engine (:mod:`.engine_numba`), handed in by the caller (this module stays
        below it): its kernels are timed, and it takes the choices (``engine.apply_tuning``).

    Returns
    -------
    Tuning
    """
    global _memo

    started = time.perf_counter()
    parallel_min, sizes = _parallel_min(engine, min_time)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(_STREAM_N).astype(np.float32)
    g = rng.standard_normal(_STREAM_N).astype(np.float32)
    out = np.empty_like(x)
    zero = np.float32(0)
    maps, maps_times = _stream_gain(engine, "relu_backward", (g, x, out, zero), min_time)
    bits = np.packbits(x > 0, bitorder="little")
    masks, mask_times = _stream_gain(engine, "mask_backward", (g, bits, out, zero), min_time)
    tuned = Tuning(parallel_min=parallel_min, stream_maps=maps, stream_masks=masks,
                   measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   evidence={"parallel_min": sizes, "stream_maps": maps_times,
                             "stream_masks": mask_times, "load_average": _load(),
                             "seconds": time.perf_counter() - started})
    if save:  # where it cannot be written (read-only, full), it holds for this process only
        write_atomic(cache_path(), json.dumps(tuned.to_dict(), indent=2))
    _memo = tuned
    engine.apply_tuning(tuned)
    return tuned


def forget() -> None:
    """Drop the remembered tuning (tests; the next :func:`current` reads the cache again)."""
    global _memo
    _memo = None

