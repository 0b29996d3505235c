"""Reuse of large result buffers, so that a new result does not pay the page faults of fresh memory.

Memory the operating system hands out is zeroed on first touch. A new 80 MB array costs about
5 ms of page faults against 8 ms for the whole of ``a + b * c`` at 1e7 float64
(benchmarks/RESULTS.md, "Fusion"), and ``relu_backward(G, X)`` on 3e7 float32 took 16.9 ms
with fresh memory against 10.0 ms into ``out=`` (benchmarks/fresh_results.py): the kernel is as
fast, the first touch of 120 MB doubles the bytes written. glibc's ``malloc`` keeps freed
blocks below 32 MB for the next call, but maps (and unmaps) larger ones afresh each time.

So the results of the public kernels and of fused functions, when :data:`MIN_BYTES` or larger,
are views of raw buffers kept here. A buffer is handed out again only when nothing else refers
to it: every array made from a result (views, slices, reshapes, a ``torch.from_numpy``) keeps
the raw buffer as its ``base``, so its reference count tells. At most :data:`MAX_BYTES` are kept
(``CHOKEPOINT_POOL_BYTES``, 0 turns the pool off); the least recently used buffer is dropped
first, and :func:`release` drops every free one now.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import warnings

import numpy as np

__all__ = ["MAX_BYTES", "MIN_BYTES", "empty", "release", "state"]

#: results at least this large come from the pool (glibc reuses smaller blocks itself)
MIN_BYTES = 16 << 20
_SUFFIXES = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _max_bytes(default: int = 512 << 20) -> int:
    """``CHOKEPOINT_POOL_BYTES`` (bytes, or with a k/M/G suffix: binary, ``MB`` and ``MiB``
    alike), else ``default``."""
    text = os.environ.get("CHOKEPOINT_POOL_BYTES", "").strip().lower()
    text = text.removesuffix("b").removesuffix("i")
    if not text:
        return default
    scale = _SUFFIXES.get(text[-1], 1)
    try:
        number = float(text[:-1] if scale > 1 else text)
        value = int(number * scale) if math.isfinite(number) else -1
    except (ValueError, OverflowError):
        value = -1
    if value < 0:
        warnings.warn(f"chokepoint: CHOKEPOINT_POOL_BYTES={os.environ['CHOKEPOINT_POOL_BYTES']!r}"
                      f" is not a size in bytes (like 512M); using {default >> 20} MB",
                      RuntimeWarning, stacklevel=2)
        return default
    return value


#: at most this many bytes of buffers are kept (the ones in use count)
MAX_BYTES = _max_bytes()

_buffers: list[np.ndarray] = []
_lock = threading.Lock()
# references to a free buffer: the list's and getrefcount's argument
_FREE_REFS = 2


def _free(k: int) -> bool:
    """Whether no array refers to ``_buffers[k]`` (hold ``_lock``). Indexed, never through a
    loop variable: whether a local holds a reference of its own depends on the Python
    version (3.14 borrows them)."""
    return sys.getrefcount(_buffers[k]) == _FREE_REFS


def empty(shape: tuple[int, ...], dtype: np.dtype, order: str = "C") -> np.ndarray:
    """``np.empty(shape, dtype, order=order)``, from a free pooled buffer when large."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or nbytes > MAX_BYTES:
        return np.empty(shape, dtype, order=order)
    with _lock:
        raw = None
        for k in range(len(_buffers)):
            if _buffers[k].nbytes == nbytes and _free(k):
                raw = _buffers.pop(k)
                break
        if raw is None:
            raw = np.empty(nbytes, np.uint8)
        _buffers.append(raw)  # most recently used last
        while sum(b.nbytes for b in _buffers) > MAX_BYTES and len(_buffers) > 1:
            _buffers.pop(0)
    flat = raw.view(dtype)
    if order == "F":
        return flat.reshape(shape[::-1]).T
    return flat.reshape(shape)


def release() -> int:
    """Drop every kept buffer that no result refers to; the bytes dropped (the memory goes back
    to the operating system once NumPy frees it)."""
    with _lock:
        free = [k for k in range(len(_buffers)) if _free(k)]
        dropped = sum(_buffers[k].nbytes for k in free)
        for k in reversed(free):
            del _buffers[k]
    return dropped


def state() -> dict:
    """What the pool keeps now: ``buffers``, ``bytes``, ``in_use`` (buffers a result refers
    to), ``max_bytes`` and ``min_bytes``."""
    with _lock:
        in_use = sum(not _free(k) for k in range(len(_buffers)))
        return {"buffers": len(_buffers), "bytes": sum(b.nbytes for b in _buffers),
                "in_use": in_use, "max_bytes": MAX_BYTES, "min_bytes": MIN_BYTES}
