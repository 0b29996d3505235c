"""The roofline's measuring kernels (numba ``prange`` loops): read, write, copy, triad and a
float64 multiply-add chain. A module of their own so that :mod:`.roofline` imports numba only
when it measures.
"""

from __future__ import annotations

import functools

import numba

from .. import jit

__all__ = ["FLOP_STEPS", "copy", "flops", "read", "triad", "write"]

#: multiply-adds per element in :func:`flops`
FLOP_STEPS = 64
#: the measuring kernels' decorator: cached on disk where numba can, compiled each time if not
KERNEL = functools.partial(jit.njit, parallel=True, nogil=True)


@KERNEL
def read(a):
    total = 0
    for i in numba.prange(a.shape[0]):
        total += a[i]
    return total


@KERNEL
def write(a):
    for i in numba.prange(a.shape[0]):
        a[i] = 1.0


@KERNEL
def copy(src, dst):
    for i in numba.prange(dst.shape[0]):
        dst[i] = src[i]


@KERNEL
def triad(a, b, c, s):
    for i in numba.prange(a.shape[0]):
        a[i] = b[i] + s * c[i]


@KERNEL
def flops(a, m, c):
    # each element's chain is independent, so the loop vectorises across elements
    for i in numba.prange(a.shape[0]):
        v = a[i]
        for _ in range(FLOP_STEPS):
            v = v * m + c
        a[i] = v
