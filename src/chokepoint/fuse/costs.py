"""Per function and dtype, the fused kernel's seconds per element and NumPy's, on this machine.

Which is faster depends on the CPU and on NumPy's build: on an AVX-512 CPU NumPy 2 runs SIMD
``tan``, ``arcsin``, ``sinh``... where the kernel calls libm one element at a time (``tan``
float32: 25x slower than NumPy per core), while on the same CPU the kernel's own vectorised
``sin`` float64 is 5x faster than NumPy's. So each function is timed once, the first time a
plan uses it, both ways, on :data:`SIZE` elements in one thread, and the figures are cached on
disk per machine, NumPy and kernel code (:func:`path`). A plan is evaluated on blocks with
NumPy's ufuncs (:mod:`.blocks`) when its NumPy estimate is at least :data:`GAIN` times below
the kernel's (:func:`numpy_faster`).

The environment variable ``CHOKEPOINT_FUSE_NUMPY`` (read at import into :data:`POLICY`) sets
the choice for every plan instead: ``always`` (NumPy's ufuncs on blocks), ``never`` (the
kernel), ``auto`` (measured; the default).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import threading
import time
from pathlib import Path

import numpy as np

from ..kernels import tuning
from .trace import TRANSCENDENTAL

__all__ = ["GAIN", "POLICY", "SIZE", "figures", "numpy_faster", "path"]

#: elements a function is timed on: below the kernels' parallel threshold (one thread both
#: ways), large enough that a call's fixed cost is a few percent of it
SIZE = 60_000
#: NumPy's ufuncs are used where the plan's functions take this many times less in NumPy
GAIN = 1.2
_BINARY = {"arctan2", "hypot", "power", "add"}
#: "auto", "always" or "never" (see the module notes)
POLICY = os.environ.get("CHOKEPOINT_FUSE_NUMPY", "auto").strip().lower()
if POLICY not in ("auto", "always", "never"):
    raise ValueError(f"CHOKEPOINT_FUSE_NUMPY={POLICY!r}: expected auto, always or never")

_lock = threading.Lock()
_cache: dict[str, list[float]] | None = None


def path() -> Path:
    """The cache file: beside the kernels' tuning, keyed by NumPy's version and the kernel code."""
    here = Path(__file__).parent
    code = b"".join(path.read_bytes() for path in (here / "codegen.py", here / "costs.py",
                                                     here.parent / "kernels" / "vecmath.py"))
    key = hashlib.sha256(code + np.__version__.encode()).hexdigest()[:12]
    tuned = tuning.cache_path()
    return tuned.with_name(f"{tuned.stem}-fuse-{key}.json")


def _load() -> dict[str, list[float]]:
    try:
        data = json.loads(path().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items()
            if isinstance(v, list) and len(v) == 2
            and all(isinstance(x, float) and x > 0 for x in v)}


def _save(data: dict[str, list[float]]) -> None:
    target = path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_suffix(f".{threading.get_ident()}.tmp")
        scratch.write_text(json.dumps(data, sort_keys=True))
        scratch.replace(target)  # atomic: another process reads the old file or this one
    except OSError:
        pass  # a read-only cache: measured again by the next process


def _inputs(op: str, dtype: np.dtype) -> list[np.ndarray]:
    x = np.linspace(0.01, 0.99, SIZE, dtype=dtype)
    if op == "arccosh":
        x = x + dtype.type(1)
    return [x, x[::-1].copy()] if op in _BINARY else [x]


def _measure(op: str, dtype: np.dtype) -> list[float]:
    """[kernel, NumPy] seconds per element: the median of 5 rounds that alternate them."""
    from . import codegen
    from .api import fuse

    arrays = _inputs(op, dtype)
    names = ["a", "b"][:len(arrays)]
    plan = fuse(f"np.{op}({', '.join(names)})").plan({n: dtype for n in names})
    kernel = codegen.kernel(plan, ((True,),) * len(arrays), "serial")
    ufunc = getattr(np, op)
    out = np.empty(SIZE, plan.dtype)
    calls = {"kernel": lambda: kernel(out, *arrays), "numpy": lambda: ufunc(*arrays, out=out)}
    times: dict[str, list[float]] = {k: [] for k in calls}
    for call in calls.values():
        call()  # compiled (or loaded), and the pages touched
    for r in range(5):
        for name in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            loops, start = 0, time.perf_counter()
            while loops == 0 or time.perf_counter() - start < 2e-3:
                calls[name]()
                loops += 1
            times[name].append((time.perf_counter() - start) / loops / SIZE)
    return [statistics.median(times["kernel"]), statistics.median(times["numpy"])]


def figures(op: str, dtype) -> tuple[float, float]:
    """(kernel, NumPy) seconds per element of ``op`` on ``dtype``: cached, or measured now."""
    global _cache
    dtype = np.dtype(dtype)
    key = f"{op}:{dtype.name}"
    with _lock:
        if _cache is None:
            _cache = _load()
        found = _cache.get(key)
        if found is None:
            found = _cache[key] = _measure(op, dtype)
            _save({**_load(), key: found})
    return found[0], found[1]


def numpy_faster(operations: list[tuple[str, str]]) -> bool:
    """Whether NumPy's ufuncs on blocks compute a plan of these ``(ufunc name, loop dtype)``
    at least :data:`GAIN` times faster than the kernel does (no transcendental function: no),
    unless :data:`POLICY` decides. The arithmetic costs the kernel nothing (it is fused with
    the loads) and NumPy a pass over a cached block each, at ``add``'s figure: without it,
    a chain of arithmetic around one slow ufunc went to NumPy for that ufunc."""
    if POLICY != "auto":
        return POLICY == "always"
    if not any(op in TRANSCENDENTAL for op, _ in operations):
        return False
    kernel = numpy = 0.0
    for op, dtype in operations:
        if op in TRANSCENDENTAL:
            k, n = figures(op, dtype)
            kernel += k
            numpy += n
        else:
            numpy += figures("add", dtype if dtype in ("float32", "float64") else "float32")[1]
    return numpy * GAIN <= kernel
