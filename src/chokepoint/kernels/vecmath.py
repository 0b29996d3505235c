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

__all__ = ["erf", "exp", "expm1", "log1p", "tanh"]


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


@intrinsic
def _f64_bits(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _f32_bits(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


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


# log1p: fdlibm's method (s_log1p.c, as musl writes it without branches on the result path).
# 1 + x = 2**k * m with m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f), and
# log(1 + f) = f - f*f/2 + s * (f*f/2 + R(s*s)); R is fdlibm's minimax polynomial (Lg1..Lg7 for
# double, Lg1..Lg4 for float). c / u recovers what rounding 1 + x to u lost.
_LN2_HI_64 = 6.93147180369123816490e-01  # 0x3fe62e42fee00000: k * hi exact for |k| < 2000
_LN2_LO_64 = 1.90821492927058770002e-10
_LG1_64 = 6.666666666666735130e-01
_LG2_64 = 3.999999999940941908e-01
_LG3_64 = 2.857142874366239149e-01
_LG4_64 = 2.222219843214978396e-01
_LG5_64 = 1.818357216161805012e-01
_LG6_64 = 1.531383769920937332e-01
_LG7_64 = 1.479819860511658591e-01
_SQRT1_2_BITS_64 = 0x3FE6A09E667F3BCD  # sqrt(2)/2

_LN2_HI_32 = np.float32(6.9313812256e-01)  # 0x3f317180
_LN2_LO_32 = np.float32(9.0580006145e-06)  # 0x3717f7d1
_LG1_32 = np.float32(0.66666662693)  # 0x3f2aaaaa
_LG2_32 = np.float32(0.40000972152)  # 0x3eccce13
_LG3_32 = np.float32(0.28498786688)  # 0x3e91e9ee
_LG4_32 = np.float32(0.24279078841)  # 0x3e789e26
_SQRT1_2_BITS_32 = 0x3F3504F3


@numba.njit(inline="always")
def _log1p64(x):
    u = 1.0 + x
    # adding 1 - sqrt(2)/2 to the bits moves the exponent up where the mantissa is >= sqrt(2)
    iu = _f64_bits(u) + np.int64(0x3FF0000000000000 - _SQRT1_2_BITS_64)
    k = (iu >> np.int64(52)) - np.int64(1023)
    f = _f64_from_bits((iu & np.int64(0x000FFFFFFFFFFFFF)) + np.int64(_SQRT1_2_BITS_64)) - 1.0
    # u - 1 is exact for k < 2, u - x beyond; u is 0 only at x = -1 (selected below), and a
    # division by 0 would raise under numba's default error model
    c = (1.0 - (u - x) if k >= 2 else x - (u - 1.0)) / (u if u != 0.0 else 1.0)
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2_64 + w * (_LG4_64 + w * _LG6_64))
    t2 = z * (_LG1_64 + w * (_LG3_64 + w * (_LG5_64 + w * _LG7_64)))
    dk = np.float64(k)
    r = s * (hfsq + (t2 + t1)) + (dk * _LN2_LO_64 + c) - hfsq + f + dk * _LN2_HI_64
    r = x if abs(x) < 5.551115123125783e-17 else r  # |x| < 2**-54 (and ±0): log1p(x) rounds to x
    r = -math.inf if x == -1.0 else r
    r = math.nan if x < -1.0 else r
    return x if x == math.inf or x != x else r


@numba.njit(inline="always")
def _log1p32(x):
    u = np.float32(1.0) + x
    iu = _f32_bits(u) + np.int32(0x3F800000 - _SQRT1_2_BITS_32)
    k = (iu >> np.int32(23)) - np.int32(127)
    f = (_f32_from_bits((iu & np.int32(0x007FFFFF)) + np.int32(_SQRT1_2_BITS_32))
         - np.float32(1.0))
    c = (((np.float32(1.0) - (u - x)) if k >= np.int32(2) else (x - (u - np.float32(1.0))))
         / (u if u != np.float32(0.0) else np.float32(1.0)))
    hfsq = np.float32(0.5) * f * f
    s = f / (np.float32(2.0) + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2_32 + w * _LG4_32)
    t2 = z * (_LG1_32 + w * _LG3_32)
    dk = np.float32(k)
    r = s * (hfsq + (t2 + t1)) + (dk * _LN2_LO_32 + c) - hfsq + f + dk * _LN2_HI_32
    r = x if abs(x) < np.float32(5.9604645e-08) else r  # |x| < 2**-24
    r = np.float32(-math.inf) if x == np.float32(-1.0) else r
    r = np.float32(math.nan) if x < np.float32(-1.0) else r
    return x if x == np.float32(math.inf) or x != x else r


def log1p(x: float) -> float:
    """``log(1 + x)``; in numba code, the vectorisable implementation for the argument's dtype."""
    return math.log1p(x)


@overload(log1p, inline="always")
def _log1p_overload(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: _log1p32(x)
    if isinstance(x, types.Float) and x.bitwidth == 64:
        return lambda x: _log1p64(x)
    return None


# erf: fdlibm's rational approximations (s_erf.c / s_erff.c), all evaluated and selected:
# |x| < 0.84375: x + x * P(x*x) / Q(x*x); |x| < 1.25: erx + P1(|x| - 1) / Q1(|x| - 1);
# |x| < 6: 1 - exp(-x*x - 0.5625 + R(1/x**2) / S(1/x**2)) / |x|, with (R, S) one of two sets
# (below and above 1/0.35), chosen per element by selects on the coefficients; ±1 beyond 6.
# fdlibm splits x*x in two exps for erfc; erf = 1 - erfc does not need that accuracy.
_ERF_COEFFICIENTS = {
    "erx": (8.45062911510467529297e-01, 8.4506291151e-01),
    "pp": ((1.28379167095512558561e-01, -3.25042107247001499370e-01,
            -2.84817495755985104766e-02, -5.77027029648944159157e-03,
            -2.37630166566501626084e-05),
           (1.2837916613e-01, -3.2504209876e-01, -2.8481749818e-02, -5.7702702470e-03,
            -2.3763017452e-05)),
    "qq": ((3.97917223959155352819e-01, 6.50222499887672944485e-02,
            5.08130628187576562776e-03, 1.32494738004321644526e-04,
            -3.96022827877536812320e-06),
           (3.9791721106e-01, 6.5022252500e-02, 5.0813062117e-03, 1.3249473704e-04,
            -3.9602282413e-06)),
    "pa": ((-2.36211856075265944077e-03, 4.14856118683748331666e-01,
            -3.72207876035701323847e-01, 3.18346619901161753674e-01,
            -1.10894694282396677476e-01, 3.54783043256182359371e-02,
            -2.16637559486879084300e-03),
           (-2.3621185683e-03, 4.1485610604e-01, -3.7220788002e-01, 3.1834661961e-01,
            -1.1089469492e-01, 3.5478305072e-02, -2.1663755178e-03)),
    "qa": ((1.06420880400844228286e-01, 5.40397917702171048937e-01,
            7.18286544141962662868e-02, 1.26171219808761642112e-01,
            1.36370839120290507362e-02, 1.19844998467991074170e-02),
           (1.0642088205e-01, 5.4039794207e-01, 7.1828655899e-02, 1.2617121637e-01,
            1.3637083583e-02, 1.1984500103e-02)),
    "ra": ((-9.86494403484714822705e-03, -6.93858572707181764372e-01,
            -1.05586262253232909814e+01, -6.23753324503260060396e+01,
            -1.62396669462573470355e+02, -1.84605092906711035994e+02,
            -8.12874355063065934246e+01, -9.81432934416914548592e+00),
           (-9.8649440333e-03, -6.9385856390e-01, -1.0558626175e+01, -6.2375331879e+01,
            -1.6239666748e+02, -1.8460508728e+02, -8.1287437439e+01, -9.8143291473e+00)),
    "sa": ((1.96512716674392571292e+01, 1.37657754143519042600e+02,
            4.34565877475229228821e+02, 6.45387271733267880336e+02,
            4.29008140027567833386e+02, 1.08635005541779435134e+02,
            6.57024977031928170135e+00, -6.04244152148580987438e-02),
           (1.9651271820e+01, 1.3765776062e+02, 4.3456588745e+02, 6.4538726807e+02,
            4.2900814819e+02, 1.0863500214e+02, 6.5702495575e+00, -6.0424413532e-02)),
    # rb, sb: one degree less than ra, sa; padded with 0 so that a select picks either set
    "rb": ((-9.86494292470009928597e-03, -7.99283237680523006574e-01,
            -1.77579549177547519889e+01, -1.60636384855821916062e+02,
            -6.37566443368389627722e+02, -1.02509513161107724954e+03,
            -4.83519191608651397019e+02, 0.0),
           (-9.8649431020e-03, -7.9928326607e-01, -1.7757955551e+01, -1.6063638306e+02,
            -6.3756646729e+02, -1.0250950928e+03, -4.8351919556e+02, 0.0)),
    "sb": ((3.03380607434824582924e+01, 3.25792512996573918826e+02,
            1.53672958608443695994e+03, 3.19985821950859553908e+03,
            2.55305040643316442583e+03, 4.74528541206955367215e+02,
            -2.24409524465858183362e+01, 0.0),
           (3.0338060379e+01, 3.2579251099e+02, 1.5367296143e+03, 3.1998581543e+03,
            2.5530502930e+03, 4.7452853394e+02, -2.2440952301e+01, 0.0)),
}


def _erf_kernel(dtype, exp_):
    """The branch-free erf for ``dtype`` (the same code; constants of the dtype)."""
    t = dtype
    c = {name: (tuple(t(v) for v in pair[0 if t is np.float64 else 1])
                if isinstance(pair[0], tuple) else t(pair[0 if t is np.float64 else 1]))
         for name, pair in _ERF_COEFFICIENTS.items()}
    erx = c["erx"]
    pp0, pp1, pp2, pp3, pp4 = c["pp"]
    qq1, qq2, qq3, qq4, qq5 = c["qq"]
    pa0, pa1, pa2, pa3, pa4, pa5, pa6 = c["pa"]
    qa1, qa2, qa3, qa4, qa5, qa6 = c["qa"]
    ra0, ra1, ra2, ra3, ra4, ra5, ra6, ra7 = c["ra"]
    sa1, sa2, sa3, sa4, sa5, sa6, sa7, sa8 = c["sa"]
    rb0, rb1, rb2, rb3, rb4, rb5, rb6, rb7 = c["rb"]
    sb1, sb2, sb3, sb4, sb5, sb6, sb7, sb8 = c["sb"]
    zero, one, six = t(0.0), t(1.0), t(6.0)
    small_end, mid_end, quarter9 = t(0.84375), t(1.25), t(0.5625)
    # fdlibm's boundary 1/0.35, as its high-word comparison (double) or bits (float) place it
    split = t(2.8571434020996094) if t is np.float64 else t(2.857142925262451)

    @numba.njit(inline="always")
    def kernel(x):
        ax = abs(x)
        # each branch's argument is clamped into its interval (NaN stays NaN), where its
        # denominator is positive: numba's default error model raises on a division by 0
        xs = small_end if x > small_end else x
        xs = -small_end if xs < -small_end else xs
        z = xs * xs
        p = pp0 + z * (pp1 + z * (pp2 + z * (pp3 + z * pp4)))
        q = one + z * (qq1 + z * (qq2 + z * (qq3 + z * (qq4 + z * qq5))))
        small = x + x * (p / q)  # odd, keeps -0.0 and the subnormals
        s = mid_end if ax > mid_end else ax
        s = (small_end if s < small_end else s) - one
        p = pa0 + s * (pa1 + s * (pa2 + s * (pa3 + s * (pa4 + s * (pa5 + s * pa6)))))
        q = one + s * (qa1 + s * (qa2 + s * (qa3 + s * (qa4 + s * (qa5 + s * qa6)))))
        mid = erx + p / q
        a = six if ax > six else ax  # erf rounds to 1 from 6 on; NaN stays NaN
        a = mid_end if a < mid_end else a
        lo = a < split
        inv = one / a
        s = inv * inv
        r = (ra7 if lo else rb7)
        r = (ra6 if lo else rb6) + s * r
        r = (ra5 if lo else rb5) + s * r
        r = (ra4 if lo else rb4) + s * r
        r = (ra3 if lo else rb3) + s * r
        r = (ra2 if lo else rb2) + s * r
        r = (ra1 if lo else rb1) + s * r
        r = (ra0 if lo else rb0) + s * r
        d = (sa8 if lo else sb8)
        d = (sa7 if lo else sb7) + s * d
        d = (sa6 if lo else sb6) + s * d
        d = (sa5 if lo else sb5) + s * d
        d = (sa4 if lo else sb4) + s * d
        d = (sa3 if lo else sb3) + s * d
        d = (sa2 if lo else sb2) + s * d
        d = (sa1 if lo else sb1) + s * d
        d = one + s * d
        tail = one - exp_(-a * a - quarter9 + r / d) * inv
        big = mid if ax < mid_end else tail
        big = -big if x < zero else big
        return small if ax < small_end else big

    return kernel


_erf64 = _erf_kernel(np.float64, _exp64)
_erf32 = _erf_kernel(np.float32, _exp32)


def erf(x: float) -> float:
    """The error function; in numba code, the vectorisable implementation for the dtype."""
    return math.erf(x)


@overload(erf, inline="always")
def _erf_overload(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: _erf32(x)
    if isinstance(x, types.Float) and x.bitwidth == 64:
        return lambda x: _erf64(x)
    return None
