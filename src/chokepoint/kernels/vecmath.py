"""Vectorisable elementary functions for the numba engine.

numba's ``math.exp`` is a call of the C library's scalar ``exp`` (the llvmlite wheels from PyPI
carry no SVML), so LLVM cannot vectorise a loop that uses it. The functions here are written in
arithmetic, selects and bit casts only, which LLVM turns into SIMD code inside the generated
``prange`` loops.

:func:`exp`
    Cody-Waite reduction ``x = k ln2 + r`` with ``|r| <= ln2 / 2``, a Taylor polynomial for
    ``exp(r)`` and ``2**k`` built from its bits (in two halves, so that results in the subnormal
    range round once and overflow gives inf). float64: degree 13, at most 1 ulp from
    ``np.exp``; float32: computed in float32 with degree 7, at most 1 ulp from float64 ``exp``
    rounded to float32. NaN, ±inf, ±0, overflow and underflow as the C library.
    (``tests/kernels/test_vecmath.py`` checks those bounds.)

:func:`expm1`
    ``e**x - 1``: a Taylor polynomial for ``|x| < 0.5`` (degree 17 in float64, 9 in float32, so
    ``expm1(-0.0)`` is -0.0 and tiny arguments keep full precision), ``exp(x) - 1`` beyond.

:func:`tanh`
    ``expm1(2x) / (expm1(2x) + 2)`` (no cancellation near 0, ``tanh(-0.0)`` is -0.0), and ±1 where
    ``|x|`` is so large that the result rounds to ±1 anyway (20 in float64, 9 in float32).

Other dtypes (integers) are refused at compile time; the kernels only pass float32 and float64.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

__all__ = ["exp", "expm1", "tanh"]


@intrinsic
def _f64_from_bits(typingctx, i):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def _f32_from_bits(typingctx, i):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@numba.njit(inline="always")
def _exp64(x):
    c = x if x == x else 0.0
    c = 709.8 if c > 709.8 else c  # beyond: inf (the product below overflows)
    c = -745.2 if c < -745.2 else c  # beyond: 0
    k = math.floor(c * 1.4426950408889634 + 0.5)
    r = (c - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    ki = np.int64(k)
    k1 = ki >> np.int64(1)
    k2 = ki - k1
    res = (p * _f64_from_bits((k1 + np.int64(1023)) << np.int64(52))
           * _f64_from_bits((k2 + np.int64(1023)) << np.int64(52)))
    return res if x == x else x


@numba.njit(inline="always")
def _exp32(x):
    c = x if x == x else np.float32(0.0)
    c = np.float32(88.8) if c > np.float32(88.8) else c
    c = np.float32(-104.0) if c < np.float32(-104.0) else c
    k = np.float32(math.floor(c * np.float32(1.44269504) + np.float32(0.5)))
    # ln2 split so that k * hi is exact for |k| < 2**8
    r = (c - k * np.float32(0.693145751953125)) - k * np.float32(1.428606765330187e-06)
    p = np.float32(1.0 / 5040.0)
    p = p * r + np.float32(1.0 / 720.0)
    p = p * r + np.float32(1.0 / 120.0)
    p = p * r + np.float32(1.0 / 24.0)
    p = p * r + np.float32(1.0 / 6.0)
    p = p * r + np.float32(0.5)
    p = p * r + np.float32(1.0)
    p = p * r + np.float32(1.0)
    ki = np.int32(k)
    k1 = ki >> np.int32(1)
    k2 = ki - k1
    res = (p * _f32_from_bits((k1 + np.int32(127)) << np.int32(23))
           * _f32_from_bits((k2 + np.int32(127)) << np.int32(23)))
    return res if x == x else x


def exp(x: float) -> float:
    """``e**x``; in numba code, the vectorisable implementation for the argument's dtype."""
    return math.exp(x)


@overload(exp)
def _exp_overload(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: _exp32(x)
    if isinstance(x, types.Float) and x.bitwidth == 64:
        return lambda x: _exp64(x)
    return None


@numba.njit(inline="always")
def _expm1_64(x):
    p = 1.0 / 355687428096000.0
    p = p * x + 1.0 / 20922789888000.0
    p = p * x + 1.0 / 1307674368000.0
    p = p * x + 1.0 / 87178291200.0
    p = p * x + 1.0 / 6227020800.0
    p = p * x + 1.0 / 479001600.0
    p = p * x + 1.0 / 39916800.0
    p = p * x + 1.0 / 3628800.0
    p = p * x + 1.0 / 362880.0
    p = p * x + 1.0 / 40320.0
    p = p * x + 1.0 / 5040.0
    p = p * x + 1.0 / 720.0
    p = p * x + 1.0 / 120.0
    p = p * x + 1.0 / 24.0
    p = p * x + 1.0 / 6.0
    p = p * x + 0.5
    p = p * x + 1.0
    small = p * x
    return small if abs(x) < 0.5 else _exp64(x) - 1.0


@numba.njit(inline="always")
def _expm1_32(x):
    p = np.float32(1.0 / 362880.0)
    p = p * x + np.float32(1.0 / 40320.0)
    p = p * x + np.float32(1.0 / 5040.0)
    p = p * x + np.float32(1.0 / 720.0)
    p = p * x + np.float32(1.0 / 120.0)
    p = p * x + np.float32(1.0 / 24.0)
    p = p * x + np.float32(1.0 / 6.0)
    p = p * x + np.float32(0.5)
    p = p * x + np.float32(1.0)
    small = p * x
    return small if abs(x) < np.float32(0.5) else _exp32(x) - np.float32(1.0)


def expm1(x: float) -> float:
    """``e**x - 1``; in numba code, the vectorisable implementation for the argument's dtype."""
    return math.expm1(x)


@overload(expm1)
def _expm1_overload(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: _expm1_32(x)
    if isinstance(x, types.Float) and x.bitwidth == 64:
        return lambda x: _expm1_64(x)
    return None


@numba.njit(inline="always")
def _tanh64(x):
    e = _expm1_64(2.0 * x)
    t = e / (e + 2.0)
    one = 1.0 if x > 0.0 else -1.0
    return one if abs(x) > 20.0 else t


@numba.njit(inline="always")
def _tanh32(x):
    e = _expm1_32(np.float32(2.0) * x)
    t = e / (e + np.float32(2.0))
    one = np.float32(1.0) if x > np.float32(0.0) else np.float32(-1.0)
    return one if abs(x) > np.float32(9.0) else t


def tanh(x: float) -> float:
    """Hyperbolic tangent; in numba code, the vectorisable implementation for the dtype."""
    return math.tanh(x)


@overload(tanh)
def _tanh_overload(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: _tanh32(x)
    if isinstance(x, types.Float) and x.bitwidth == 64:
        return lambda x: _tanh64(x)
    return None
