"""Reuse of large result buffers, so that a fused call does not pay the page faults of fresh memory.

A new 80 MB array costs about 5 ms of page faults (the kernel zeroes each page on first touch)
against 8 ms for the whole of ``a + b * c`` at 1e7 float64 (benchmarks/RESULTS.md, "Fusion").
Results of :data:`MIN_BYTES` or more are therefore views of raw buffers kept here. A buffer is
handed out again only when nothing else refers to it: every array made from a result (views,
slices, reshapes) keeps the raw buffer as its ``base``, so its reference count tells. At most
:data:`MAX_BYTES` are kept; the least recently used buffer is dropped first.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

__all__ = ["MAX_BYTES", "MIN_BYTES", "empty"]

MIN_BYTES = 16 << 20
MAX_BYTES = 512 << 20

_buffers: list[np.ndarray] = []
_lock = threading.Lock()
# references to a free buffer: the list's and getrefcount's argument
_FREE_REFS = 2


def empty(shape: tuple[int, ...], dtype: np.dtype, order: str = "C") -> np.ndarray:
    """``np.empty(shape, dtype, order=order)``, from a free pooled buffer when large."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype, order=order)
    with _lock:
        raw = None
        for k in range(len(_buffers)):
            if _buffers[k].nbytes == nbytes and sys.getrefcount(_buffers[k]) == _FREE_REFS:
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
