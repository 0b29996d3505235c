"""Vectorisable elementary functions for the numba engine.

numba's ``math.exp`` is a call of the C library's scalar ``exp`` (the llvmlite wheels from PyPI
carry no SVML), so LLVM cannot vectorise a loop that uses it. The functions here are written in
arithmetic, selects and bit casts only, which LLVM turns into SIMD code inside the generated
``prange`` loops.

:func:`exp`
    Cody-Waite reduction ``x = k ln2 + r`` with ``|r| <= ln2 / 2`` (multiply-adds, ln2 in two
    parts), a Taylor polynomial for ``exp(r)`` summed as ``1 + (r + r**2 q(r))`` and ``2**k``
    built from its bits (in two halves, so that results in the subnormal range round once and
    overflow gives inf). float64: degree 13, at most 1 ulp from ``np.exp``; float32: computed in
    float32 with degree 7, at most 1 ulp from float64 ``exp`` rounded to float32. NaN, ±inf, ±0,
    overflow and underflow as the C library; NaN is carried through the arithmetic, not selected.
    (``tests/kernels/test_vecmath.py`` checks those bounds.)

:func:`expm1`
    ``e**x - 1``: a Taylor polynomial for ``|x| < 0.5`` (degree 17 in float64, 9 in float32, so
    ``expm1(-0.0)`` is -0.0 and tiny arguments keep full precision), ``exp(x) - 1`` beyond.

:func:`tanh`
    ``expm1(2x) / (expm1(2x) + 2)`` (no cancellation near 0, ``tanh(-0.0)`` is -0.0), and ±1 where
    ``|x|`` is so large that the result rounds to ±1 anyway (20 in float64, 9 in float32).

:func:`sinh`, :func:`cosh`
    glibc's method without branches: from ``expm1`` below 22 (float32: 9), where
    ``exp(x) - exp(-x)`` would cancel; ``exp(|x|) / 2`` above, and ``exp(|x| / 2)`` squared in
    the last sliver before overflow (710.48, float32 89.42), whose results are still finite. At
    most 2 ulp from float64 NumPy (3 in that sliver, float64); ``sinh(-0.0)`` is -0.0, tiny
    arguments are returned as they are.

:func:`log1p`
    fdlibm's ``log1p`` (``s_log1p.c``, as musl writes it) without branches: ``u = 1 + x`` split
    into ``2**k * m`` with ``m`` in [sqrt(2)/2, sqrt(2)) by bit arithmetic, fdlibm's minimax
    polynomial for ``log(m)`` (degree 14 in float64, 8 in float32) and the term ``c / u`` that
    recovers what rounding ``1 + x`` lost. At most 1 ulp from ``np.log1p`` (float64) and from
    float64 log1p rounded to float32 (every float32 > -1 checked); ``log1p(-0.0)`` is -0.0,
    ``log1p(-1)`` -inf, NaN below -1, ``+inf`` and tiny arguments are returned as they are.

:func:`log`
    log1p's fdlibm core on ``x`` itself (``e_log.c``), subnormals first scaled by a power of 2:
    at most 1 ulp from the float64 ``log`` (float32: rounded once; NumPy's own float32 log is
    3 ulp from it). 2.7 against libm's 4.9 ns float64, 1.5 against 3.3 float32.

:func:`erf`
    float64: fdlibm's ``s_erf.c`` (``x + x P/Q`` below 0.84375, ``erx + P1/Q1`` below 1.25,
    ``1 - exp(-x*x - 0.5625 + R/S) / x`` below 6, 1 beyond), every piece evaluated and the
    result selected, the two (R, S) sets picked per element by selects; at most 1 ulp from
    ``math.erf`` in the tests. float32: two polynomials fitted for float32
    (``tools/fit_erf32.py``), ``x + x P(x*x)`` below 1 and ``1 - exp(-x*x) G(|x|)`` below 3.925,
    no division; at most 1 ulp from ``math.erf`` rounded to float32 for every float32. Both
    odd, ``erf(-0.0)`` is -0.0, ``erf(±inf)`` ±1.

:func:`arctan2`
    Cephes's ``atan`` made branch-free, with one division for its three-way reduction and both
    operands scaled by a power of 2 where the larger is tiny or huge; the quadrant from the
    operands' sign bits, so ``arctan2(±0, -0)`` is ±pi and every C99 special case holds. At most
    2 ulp from ``np.arctan2`` (float64), 2 from it in float64 rounded (float32); 10-26x faster
    than libm's scalar ``atan2`` in a loop (2.9 against 25.6 ns float64, 1.1 against 28.1
    float32, one core).

:func:`sin`, :func:`cos`
    musl's (fdlibm's) method without branches: ``x = n pi/2 + y``, pi/2 in three 33-bit parts
    (float64; every round of ``__rem_pio2``'s medium case, so ``y`` is a double-double) or two
    (float32, computed in float64 as musl's ``sinf``), ``__sin`` / ``__cos`` on ``y`` and the
    quadrant by selects. At most 1 ulp from NumPy (float64) and from float64 rounded
    (float32). The reduction is exact only below :data:`REDUCE_LIMIT_64` (1.6e6) and
    :data:`REDUCE_LIMIT_32` (4e8): beyond, Payne-Hanek's would be needed, so callers check the
    range (fuse's guarded kernels fall back on libm for the whole call). 3.3 against libm's
    22 ns float64, 1.8 against 13 float32 (one core, a loop of 1e6).

:func:`tan`
    The same reduction as :func:`sin`, then musl's ``__tan`` (float64) without branches: at
    most 2 ulp from NumPy (glibc's), 1.7 against libm's 8.7 ns. float32: sine and cosine of
    the reduced argument in float64, their quotient rounded once (1 ulp from float64 ``tan``
    rounded). The same range bounds as :func:`sin`.

:func:`arctan`, :func:`arcsin`, :func:`arccos`
    :func:`arctan2`'s code on ``(x, 1)``, ``(x, sqrt(1 - x*x))`` and ``(sqrt(1 - x*x), x)``:
    at most 2 ulp from NumPy's float64 functions and from them rounded (float32, computed in
    float32). NaN outside [-1, 1], ±0 and ±1 as the C library.

:func:`ndtr`, :func:`npdf`
    The standard normal CDF ``(1 + erf(x / sqrt 2)) / 2`` and density ``exp(-x*x / 2) / sqrt(2
    pi)``, in torch's formulas (GELU is ``x ndtr(x)``, its derivative ``ndtr(x) + x npdf(x)``).
    float64: from :func:`erf` and :func:`exp`. float32: one polynomial over the whole range
    (``tools/fit_ndtr32.py``), ``erfc(|x| / sqrt 2) = exp(-x*x / 2) R(s)``, ``s = p|x| / (1 +
    p|x|)``; its ``exp(-x*x / 2)`` is npdf's, computed once in a kernel that calls both. Within
    7.8e-8 absolute of the float64 formula and 1 ulp for ``x >= 0``; below 0 a difference near
    1, as in torch (0 from -5.5426 on, where erf rounds to -1). npdf within 2 ulp for ``|x| <= 1``
    (float32 rounds ``x * x``, as torch does: 9 ulp at 5.4).

Every overload is inlined by numba (``inline="always"``): left to LLVM, the call stayed a call
in the serial kernels (``erf``, and ``expm1`` in ELU: 17.7 ns an element against 3.2 inlined) and
their loops scalar. Conditionals are :func:`_where` selects, not ``a if c else b`` (see there).
Divisors are kept nonzero even where the result is selected away, so that the functions also work
under numba's default error model, which raises on a division by zero (the kernels use NumPy's).

``exp`` rounds ``x / ln2`` to an integer with the ``1.5 * 2**p`` shifter instead of
``math.floor``, whose float-to-integer conversion has no vector instruction on AVX2: float32
``exp`` went from 2.6 to 1.1 ns an element (one core, cache-resident, AMD EPYC), the same bits.

Other dtypes (integers) are refused at compile time; the kernels only pass float32 and float64.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

from .vocabulary import NPDF, SQRT1_2

__all__ = ["NPDF", "REDUCE_LIMIT_32", "REDUCE_LIMIT_64", "SQRT1_2", "arccos", "arcsin", "arctan",
           "arctan2", "cos", "cosh", "erf", "exp", "expm1", "log", "log1p", "logical_and",
           "logical_not", "ndtr", "npdf", "select", "sin", "sinh", "tan", "tanh"]


@intrinsic
def _where(typingctx, c, a, b):
    """``a if c else b`` as one LLVM ``select`` (both already evaluated).

    Python's conditional expression becomes branches in numba's IR; inlined into a kernel more
    than once (``inline="always"``), those branches' variables trip a pedantic SSA check of numba
    on Python 3.11 (numba issue 9489: a ``NumbaIRAssumptionWarning`` per use). A select has no
    branches, and is what LLVM's vectoriser wants anyway.
    """
    result = typingctx.unify_types(a, b)

    def codegen(context, builder, sig, args):
        cond = context.cast(builder, args[0], sig.args[0], types.boolean)
        return builder.select(cond, context.cast(builder, args[1], sig.args[1], result),
                              context.cast(builder, args[2], sig.args[2], result))

    return result(c, a, b), codegen


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


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` as LLVM's ``fmuladd``: one fused instruction where the CPU has FMA (one
    rounding), a multiply and an add where it has not (never a libm call). All three in
    ``a``'s type."""
    def codegen(context, builder, sig, args):
        t = context.get_value_type(sig.return_type)
        name = f"llvm.fmuladd.f{sig.return_type.bitwidth}"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]), name)
        return builder.call(fn, list(args))

    return a(a, a, a), codegen


# Polynomials by Estrin's scheme, coefficients lowest first: pairs c[i] + x c[i+1], then pairs
# of those with x**2, x**4, x**8. Horner's rule is one chain of dependent multiply-adds (13 for
# exp's degree 13), whose latency bounded the loops; Estrin's depth is about log2 of the degree.
# The functions below keep the last two or three terms (1 + r + r**2 / 2 ...) in Horner form
# outside, where the rounding of the sum matters most.
@numba.njit(inline="always")
def _estrin4(x, x2, c):
    return _fma(x2, _fma(x, c[3], c[2]), _fma(x, c[1], c[0]))


@numba.njit(inline="always")
def _estrin5(x, x2, c):
    return _fma(x2, _fma(x2, c[4], _fma(x, c[3], c[2])), _fma(x, c[1], c[0]))


@numba.njit(inline="always")
def _estrin6(x, x2, c):
    return _fma(x2 * x2, _fma(x, c[5], c[4]), _estrin4(x, x2, c))


@numba.njit(inline="always")
def _estrin7(x, x2, c):
    return _fma(x2 * x2, _fma(x2, c[6], _fma(x, c[5], c[4])), _estrin4(x, x2, c))


@numba.njit(inline="always")
def _estrin8(x, x2, c):
    return _fma(x2 * x2, _estrin4(x, x2, c[4:]), _estrin4(x, x2, c))


@numba.njit(inline="always")
def _estrin11(x, x2, c):
    x4 = x2 * x2
    return _fma(x4 * x4, _fma(x2, c[10], _fma(x, c[9], c[8])), _estrin8(x, x2, c))


@numba.njit(inline="always")
def _estrin13(x, x2, c):
    x4 = x2 * x2
    return _fma(x4 * x4, _estrin5(x, x2, c[8:]), _estrin8(x, x2, c))


@numba.njit(inline="always")
def _estrin15(x, x2, c):
    x4 = x2 * x2
    return _fma(x4 * x4, _estrin7(x, x2, c[8:]), _estrin8(x, x2, c))


def _inverse_factorials(first: int, last: int, dtype=float) -> tuple:
    return tuple(dtype(1.0 / math.factorial(i)) for i in range(first, last + 1))


#: exp's Taylor terms 1/3! .. 1/13! (float64) and 1/3! .. 1/7! (float32)
_EXP64_Q = _inverse_factorials(3, 13)
_EXP32_Q = _inverse_factorials(3, 7, np.float32)
#: expm1's terms 1/3! .. 1/17! (float64) and 1/3! .. 1/9! (float32), times x**2 below
_EXPM1_64_Q = _inverse_factorials(3, 17)
_EXPM1_32_Q = _inverse_factorials(3, 9, np.float32)


def _define(name: str, f32, f64, doc: str, fallback=None):
    """The public function ``name``: ``fallback`` (by default ``math.<name>``) in Python, and
    in numba code (through an overload inlined by numba, see the module notes) ``f32`` for
    float32 and ``f64`` for float64; other types are refused at compile time."""
    fallback = fallback or getattr(math, name)

    def function(x: float) -> float:
        return fallback(x)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc

    @overload(function, inline="always")
    def _implementation(x):
        if isinstance(x, types.Float) and x.bitwidth == 32:
            return lambda x: f32(x)
        if isinstance(x, types.Float) and x.bitwidth == 64:
            return lambda x: f64(x)
        return None

    return function


@numba.njit(inline="always")
def _exp64_reduced(c):
    """``(p, k)`` with ``exp(c) = p * 2**k`` for finite ``c`` (NaN gives a NaN ``p``): the
    Cody-Waite reduction and the polynomial, shared by :func:`_exp64` and :func:`_exp64_normal`.
    ``k = round(c / ln2)`` by the 1.5 * 2**52 shifter: its low bits hold k, with no conversion
    between float and integer (AVX2 has no vector instruction for it)."""
    t = _fma(c, 1.4426950408889634, 6755399441055744.0)
    k = t - 6755399441055744.0
    r = _fma(k, -1.90821492927058770002e-10, _fma(k, -6.93147180369123816490e-01, c))
    r2 = r * r
    # 1 + (r + r**2 (1/2 + r q(r))): the last addition rounds once, what it adds is small
    p = _fma(r2, _fma(r, _estrin11(r, r2, _EXP64_Q), 0.5), r) + 1.0
    return p, _f64_bits(t) - np.int64(0x4338000000000000)


@numba.njit(inline="always")
def _exp32_reduced(c):
    """:func:`_exp64_reduced` for float32 (the 1.5 * 2**23 shifter; ln2 split so that
    ``k * hi`` is exact for ``|k| < 2**8``)."""
    t = _fma(c, np.float32(1.44269504), np.float32(12582912.0))
    k = t - np.float32(12582912.0)
    r = _fma(k, np.float32(-1.428606765330187e-06), _fma(k, np.float32(-0.693145751953125), c))
    r2 = r * r
    inner = _fma(r2, _estrin4(r, r2, _EXP32_Q[1:]), _fma(r, _EXP32_Q[0], np.float32(0.5)))
    p = _fma(r2, inner, r) + np.float32(1.0)
    return p, _f32_bits(t) - np.int32(0x4B400000)


@numba.njit(inline="always")
def _exp64(x):
    # NaN passes the clamps (a comparison with NaN is false) and the arithmetic below
    c = _where(x > 709.8, 709.8, x)  # beyond: inf (the product below overflows)
    c = _where(c < -745.2, -745.2, c)  # beyond: 0
    p, k = _exp64_reduced(c)
    k1 = k >> np.int64(1)  # 2**k in two halves: subnormal results round once
    k2 = k - k1
    return (p * _f64_from_bits((k1 + np.int64(1023)) << np.int64(52))
            * _f64_from_bits((k2 + np.int64(1023)) << np.int64(52)))


@numba.njit(inline="always")
def _exp32(x):
    c = _where(x > np.float32(88.8), np.float32(88.8), x)
    c = _where(c < np.float32(-104.0), np.float32(-104.0), c)
    p, k = _exp32_reduced(c)
    k1 = k >> np.int32(1)
    k2 = k - k1
    return (p * _f32_from_bits((k1 + np.int32(127)) << np.int32(23))
            * _f32_from_bits((k2 + np.int32(127)) << np.int32(23)))


@numba.njit(inline="always")
def _exp64_normal(c):
    """``exp(c)`` for ``c`` in [-708, 0] or NaN: where the result is a normal number, so that
    :func:`_exp64`'s clamps, NaN selects and two-step scaling are not needed (erf's tail)."""
    p, k = _exp64_reduced(c)
    return p * _f64_from_bits((k + np.int64(1023)) << np.int64(52))


@numba.njit(inline="always")
def _exp32_normal(c):
    """``exp(c)`` for ``c`` in [-87, 0] or NaN (see :func:`_exp64_normal`); the same bits as
    :func:`_exp32` there, 17% faster inside erf."""
    p, k = _exp32_reduced(c)
    return p * _f32_from_bits((k + np.int32(127)) << np.int32(23))


exp = _define("exp", _exp32, _exp64,
              "``e**x``; in numba code, the vectorisable implementation for the argument's dtype.")


@numba.njit(inline="always")
def _expm1_64(x):
    q = _estrin15(x, x * x, _EXPM1_64_Q)
    small = _fma(_fma(q, x, 0.5), x, 1.0) * x  # (1 + x/2 + x**2 q(x)) x: keeps -0.0
    return _where(abs(x) < 0.5, small, _exp64(x) - 1.0)


@numba.njit(inline="always")
def _expm1_32(x):
    q = _estrin7(x, x * x, _EXPM1_32_Q)
    small = _fma(_fma(q, x, np.float32(0.5)), x, np.float32(1.0)) * x
    return _where(abs(x) < np.float32(0.5), small, _exp32(x) - np.float32(1.0))


expm1 = _define("expm1", _expm1_32, _expm1_64,
                "``e**x - 1``; in numba code, the vectorisable implementation for the "
                "argument's dtype.")


@numba.njit(inline="always")
def _tanh64(x):
    e = _expm1_64(2.0 * x)
    t = e / (e + 2.0)
    one = _where(x > 0.0, 1.0, -1.0)
    return _where(abs(x) > 20.0, one, t)


@numba.njit(inline="always")
def _tanh32(x):
    e = _expm1_32(np.float32(2.0) * x)
    t = e / (e + np.float32(2.0))
    one = _where(x > np.float32(0.0), np.float32(1.0), np.float32(-1.0))
    return _where(abs(x) > np.float32(9.0), one, t)


tanh = _define("tanh", _tanh32, _tanh64,
               "Hyperbolic tangent; in numba code, the vectorisable implementation for the dtype.")


# sinh and cosh: glibc's e_sinh.c / e_cosh.c (and their float versions) without branches:
# expm1 below 22 (float32: 9), where exp(|x|) - exp(-|x|) would cancel; 0.5 * exp(|x|) above, as
# exp(|x| / 2) squared so that results up to the overflow threshold (710.48, float32 89.42)
# stay finite.
@numba.njit(inline="always")
def _sinh64(x):
    ax = abs(x)
    h = _where(x < 0.0, -0.5, 0.5)
    t = _expm1_64(_where(ax < 22.0, ax, 22.0))
    below = h * _where(ax < 1.0, 2.0 * t - t * t / (t + 1.0), t + t / (t + 1.0))
    # exp(|x|), or near overflow exp(|x| / 2) squared (finite up to 710.48): one exp for both
    near = ax >= 709.78
    e = _exp64(_where(near, 0.5 * ax, ax))
    big = _where(near, (h * e) * e, h * e)
    r = _where(ax < 22.0, below, big)
    return _where(ax < 3.725290298461914e-09, x, r)  # |x| < 2**-28 (and ±0): sinh(x) is x


@numba.njit(inline="always")
def _sinh32(x):
    ax = abs(x)
    h = _where(x < np.float32(0.0), np.float32(-0.5), np.float32(0.5))
    t = _expm1_32(_where(ax < np.float32(9.0), ax, np.float32(9.0)))
    one = np.float32(1.0)
    below = h * _where(ax < one, np.float32(2.0) * t - t * t / (t + one), t + t / (t + one))
    near = ax >= np.float32(88.72)
    e = _exp32(_where(near, np.float32(0.5) * ax, ax))
    big = _where(near, (h * e) * e, h * e)
    r = _where(ax < np.float32(9.0), below, big)
    return _where(ax < np.float32(0.000244140625), x, r)  # |x| < 2**-12: x


@numba.njit(inline="always")
def _cosh64(x):
    ax = abs(x)
    t = _expm1_64(_where(ax < 0.34657359027997264, ax, 0.0))  # below ln2 / 2
    w = 1.0 + t
    tiny = 1.0 + (t * t) / (w + w)
    near = ax >= 709.78  # as in _sinh64: one exp for the middle, the top and near overflow
    e = _exp64(_where(near, 0.5 * ax, ax))
    mid = 0.5 * e + 0.5 / e
    big = _where(near, (0.5 * e) * e, 0.5 * e)
    return _where(ax < 0.34657359027997264, tiny, _where(ax < 22.0, mid, big))


@numba.njit(inline="always")
def _cosh32(x):
    ax = abs(x)
    half = np.float32(0.5)
    t = _expm1_32(_where(ax < np.float32(0.34657359), ax, np.float32(0.0)))
    w = np.float32(1.0) + t
    tiny = np.float32(1.0) + (t * t) / (w + w)
    near = ax >= np.float32(88.72)
    e = _exp32(_where(near, half * ax, ax))
    mid = half * e + half / e
    big = _where(near, (half * e) * e, half * e)
    return _where(ax < np.float32(0.34657359), tiny, _where(ax < np.float32(9.0), mid, big))


sinh = _define("sinh", _sinh32, _sinh64,
               "Hyperbolic sine; in numba code, the vectorisable implementation for the dtype.")


cosh = _define("cosh", _cosh32, _cosh64,
               "Hyperbolic cosine; in numba code, the vectorisable implementation for the dtype.")


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
def _log64_split(u):
    """``(f, k)`` with ``u = 2**k (1 + f)``, ``1 + f`` in [sqrt(2)/2, sqrt(2)), for a positive
    normal ``u``: adding 1 - sqrt(2)/2 to the bits moves the exponent up where the mantissa is
    >= sqrt(2)."""
    iu = _f64_bits(u) + np.int64(0x3FF0000000000000 - _SQRT1_2_BITS_64)
    k = (iu >> np.int64(52)) - np.int64(1023)
    f = _f64_from_bits((iu & np.int64(0x000FFFFFFFFFFFFF)) + np.int64(_SQRT1_2_BITS_64)) - 1.0
    return f, k


@numba.njit(inline="always")
def _log64_sum(f, k, c):
    """``log(2**k (1 + f)) + c`` for small ``c``: fdlibm's polynomial and sum."""
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2_64 + w * (_LG4_64 + w * _LG6_64))
    t2 = z * (_LG1_64 + w * (_LG3_64 + w * (_LG5_64 + w * _LG7_64)))
    dk = np.float64(k)
    return s * (hfsq + (t2 + t1)) + (dk * _LN2_LO_64 + c) - hfsq + f + dk * _LN2_HI_64


@numba.njit(inline="always")
def _log1p64(x):
    u = 1.0 + x
    f, k = _log64_split(u)
    # u - 1 is exact for k < 2, u - x beyond; u is 0 only at x = -1 (selected below), and a
    # division by 0 would raise under numba's default error model
    c = (_where(k >= 2, 1.0 - (u - x), x - (u - 1.0))) / (_where(u != 0.0, u, 1.0))
    r = _log64_sum(f, k, c)
    # |x| < 2**-54 (and ±0): log1p(x) rounds to x
    r = _where(abs(x) < 5.551115123125783e-17, x, r)
    r = _where(x == -1.0, -math.inf, r)
    r = _where(x < -1.0, math.nan, r)
    return _where((x == math.inf) | (x != x), x, r)


@numba.njit(inline="always")
def _log64(x):
    # subnormals scaled into the normal range first (2**54, exact)
    sub = x < 2.2250738585072014e-308
    f, k = _log64_split(_where(sub, x * 18014398509481984.0, x))
    r = _log64_sum(f, k - _where(sub, np.int64(54), np.int64(0)), 0.0)
    r = _where(x == 0.0, -math.inf, r)
    r = _where(x < 0.0, math.nan, r)
    return _where((x == math.inf) | (x != x), x, r)


@numba.njit(inline="always")
def _log32_split(u):
    iu = _f32_bits(u) + np.int32(0x3F800000 - _SQRT1_2_BITS_32)
    k = (iu >> np.int32(23)) - np.int32(127)
    f = (_f32_from_bits((iu & np.int32(0x007FFFFF)) + np.int32(_SQRT1_2_BITS_32))
         - np.float32(1.0))
    return f, k


@numba.njit(inline="always")
def _log32_sum(f, k, c):
    hfsq = np.float32(0.5) * f * f
    s = f / (np.float32(2.0) + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2_32 + w * _LG4_32)
    t2 = z * (_LG1_32 + w * _LG3_32)
    dk = np.float32(k)
    return s * (hfsq + (t2 + t1)) + (dk * _LN2_LO_32 + c) - hfsq + f + dk * _LN2_HI_32


@numba.njit(inline="always")
def _log1p32(x):
    u = np.float32(1.0) + x
    f, k = _log32_split(u)
    c = ((_where(k >= np.int32(2), np.float32(1.0) - (u - x), x - (u - np.float32(1.0))))
         / (_where(u != np.float32(0.0), u, np.float32(1.0))))
    r = _log32_sum(f, k, c)
    r = _where(abs(x) < np.float32(5.9604645e-08), x, r)  # |x| < 2**-24
    r = _where(x == np.float32(-1.0), np.float32(-math.inf), r)
    r = _where(x < np.float32(-1.0), np.float32(math.nan), r)
    return _where((x == np.float32(math.inf)) | (x != x), x, r)


@numba.njit(inline="always")
def _log32(x):
    sub = x < np.float32(1.1754944e-38)
    f, k = _log32_split(_where(sub, x * np.float32(16777216.0), x))  # 2**24
    r = _log32_sum(f, k - _where(sub, np.int32(24), np.int32(0)), np.float32(0.0))
    r = _where(x == np.float32(0.0), np.float32(-math.inf), r)
    r = _where(x < np.float32(0.0), np.float32(math.nan), r)
    return _where((x == np.float32(math.inf)) | (x != x), x, r)


log = _define("log", _log32, _log64,
              "The natural logarithm; in numba code, the vectorisable implementation for the "
              "dtype.")
log1p = _define("log1p", _log1p32, _log1p64,
                "``log(1 + x)``; in numba code, the vectorisable implementation for the "
                "argument's dtype.")


# erf, float64: fdlibm's rational approximations (s_erf.c), all evaluated and selected:
# |x| < 0.84375: x + x * P(x*x) / Q(x*x); |x| < 1.25: erx + P1(|x| - 1) / Q1(|x| - 1);
# |x| < 6: 1 - exp(-x*x - 0.5625 + R(1/x**2) / S(1/x**2)) / |x|, with (R, S) one of two sets
# (below and above 1/0.35), chosen per element by selects on the coefficients; ±1 beyond 6.
# fdlibm splits x*x in two exps for erfc; erf = 1 - erfc does not need that accuracy.
_ERX = 8.45062911510467529297e-01
_PP0, _PP1, _PP2, _PP3, _PP4 = (
    1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
    -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ1, _QQ2, _QQ3, _QQ4, _QQ5 = (
    3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
    1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA0, _PA1, _PA2, _PA3, _PA4, _PA5, _PA6 = (
    -2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
    3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
    -2.16637559486879084300e-03)
_QA1, _QA2, _QA3, _QA4, _QA5, _QA6 = (
    1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
    1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA0, _RA1, _RA2, _RA3, _RA4, _RA5, _RA6, _RA7 = (
    -9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
    -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
    -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA1, _SA2, _SA3, _SA4, _SA5, _SA6, _SA7, _SA8 = (
    1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
    6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
    6.57024977031928170135e+00, -6.04244152148580987438e-02)
# above 1/0.35: one degree less (the selects above pad the top coefficient with 0)
_RB0, _RB1, _RB2, _RB3, _RB4, _RB5, _RB6 = (
    -9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
    -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
    -4.83519191608651397019e+02)
_SB1, _SB2, _SB3, _SB4, _SB5, _SB6, _SB7 = (
    3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
    3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
    -2.24409524465858183362e+01)


@numba.njit(inline="always")
def _erf64(x):
    ax = abs(x)
    # each branch's argument is clamped into its interval (NaN stays NaN), where its
    # denominator is positive: numba's default error model raises on a division by 0
    xs = _where(x > 0.84375, 0.84375, x)
    xs = _where(xs < -0.84375, -0.84375, xs)
    z = xs * xs
    p = _PP0 + z * (_PP1 + z * (_PP2 + z * (_PP3 + z * _PP4)))
    q = 1.0 + z * (_QQ1 + z * (_QQ2 + z * (_QQ3 + z * (_QQ4 + z * _QQ5))))
    small = x + x * (p / q)  # odd, keeps -0.0 and the subnormals
    s = _where(ax > 1.25, 1.25, ax)
    s = (_where(s < 0.84375, 0.84375, s)) - 1.0
    p = _PA0 + s * (_PA1 + s * (_PA2 + s * (_PA3 + s * (_PA4 + s * (_PA5 + s * _PA6)))))
    q = 1.0 + s * (_QA1 + s * (_QA2 + s * (_QA3 + s * (_QA4 + s * (_QA5 + s * _QA6)))))
    mid = _ERX + p / q
    a = _where(ax > 6.0, 6.0, ax)  # erf rounds to 1 from 6 on; NaN stays NaN
    a = _where(a < 1.25, 1.25, a)
    lo = a < 2.8571434020996094  # fdlibm's 1/0.35, where its high-word comparison puts it
    inv = 1.0 / a
    s = inv * inv
    r = _where(lo, _RA7, 0.0)
    r = (_where(lo, _RA6, _RB6)) + s * r
    r = (_where(lo, _RA5, _RB5)) + s * r
    r = (_where(lo, _RA4, _RB4)) + s * r
    r = (_where(lo, _RA3, _RB3)) + s * r
    r = (_where(lo, _RA2, _RB2)) + s * r
    r = (_where(lo, _RA1, _RB1)) + s * r
    r = (_where(lo, _RA0, _RB0)) + s * r
    d = _where(lo, _SA8, 0.0)
    d = (_where(lo, _SA7, _SB7)) + s * d
    d = (_where(lo, _SA6, _SB6)) + s * d
    d = (_where(lo, _SA5, _SB5)) + s * d
    d = (_where(lo, _SA4, _SB4)) + s * d
    d = (_where(lo, _SA3, _SB3)) + s * d
    d = (_where(lo, _SA2, _SB2)) + s * d
    d = (_where(lo, _SA1, _SB1)) + s * d
    d = 1.0 + s * d
    tail = 1.0 - _exp64_normal(-a * a - 0.5625 + r / d) * inv
    big = _where(ax < 1.25, mid, tail)
    big = _where(x < 0.0, -big, big)
    return _where(ax < 0.84375, small, big)


# float32: fdlibm's erff has the double's structure (four divisions, 16 selects) and took
# 3.0 ns an element; float32 needs less. Two polynomials fitted for it (tools/fit_erf32.py:
# weighted minimax, coefficients rounded to float32 one by one): |x| < 1: x + x * P(x*x), to
# 0.02 ulp of erf; 1 <= |x| < 3.925: 1 - exp(-x*x) * G(|x| - 2.4625), G ~ erfc(x) e**(x*x) to
# 0.1 ulp of erfc, so that 1 + erf (GELU's negative tail) is as accurate as erfc; beyond, 1 (erf
# rounds to 1 in float32 from 3.8325 on). No division.
_ERF32_P = tuple(np.float32(v) for v in (
    0.12837917, -0.37612626, 0.11283579, -0.026853347, 0.005187162, -0.0007997853, 7.806903e-05))
_ERF32_G = tuple(np.float32(v) for v in (
    0.21362989, -0.076251976, 0.025859362, -0.008382229, 0.0026092238, -0.000782587,
    0.00022698475, -6.436594e-05, 1.7605955e-05, -4.236479e-06, 1.102003e-06, -4.575966e-07,
    1.1158301e-07))
_ERF32_SPLIT = np.float32(1.0)
_ERF32_END = np.float32(3.925)
_ERF32_MID = np.float32(2.4625)


@numba.njit(inline="always")
def _erf32(x):
    ax = abs(x)
    xs = _where(x > _ERF32_SPLIT, _ERF32_SPLIT, x)  # keeps z small where the result is not used
    xs = _where(xs < -_ERF32_SPLIT, -_ERF32_SPLIT, xs)
    z = xs * xs
    p = _estrin7(z, z * z, _ERF32_P)
    small = _fma(x, p, x)  # odd, keeps -0.0 and the subnormals
    a = _where(ax > _ERF32_END, _ERF32_END, ax)
    t = a - _ERF32_MID
    g = _estrin13(t, t * t, _ERF32_G)
    big = np.float32(1.0) - _exp32_normal(-(a * a)) * g
    big = _where(ax >= _ERF32_END, np.float32(1.0), big)  # NaN: the comparison is false
    big = _where(x < np.float32(0.0), -big, big)
    return _where(ax < _ERF32_SPLIT, small, big)


erf = _define("erf", _erf32, _erf64,
              "The error function; in numba code, the vectorisable implementation for the dtype.")


# ndtr and npdf: the standard normal distribution's CDF Phi(x) = (1 + erf(x / sqrt(2))) / 2 and
# density phi(x) = exp(-x*x / 2) / sqrt(2 pi), GELU's pieces (x Phi(x); Phi(x) + x phi(x)).
# float64: from erf and exp above, exactly as torch writes them. float32: GELU needs Phi to an
# absolute accuracy only (1 + erf is rounded near 1 anyway), so one piece over the whole range:
# erf(|x| / sqrt 2) = 1 - exp(-x*x / 2) R(s), s = |x| / (|x| + q), R = 1 + s P(s) with P of
# degree 5 fitted for float32 (tools/fit_ndtr32.py), to 2.5e-9 of erfc (a twentieth of an ulp
# of 1/2; degree 7 reached 3e-11, which float32 cannot hold, for three more multiply-adds).
# It shares its exp(-x*x / 2) with npdf, so a kernel calling both (GELU's backward) computes it
# once. No branch for small |x| (erf's), no second piece, an exp without clamps above 0; q is
# exact (no multiply by p), and P's coefficients carry exp's 2**-64 (exact: no multiply either).
# 1.1-1.2 ns an element with degree 7 against 1.8 for (1 + erf(x / sqrt 2)) / 2 with
# :func:`erf` (one core, AMD EPYC, AVX2).
_NDTR32_Q = np.float32(3.75)
_NDTR32_R = (-2.9920666, 4.0391517, -2.9542055, 0.7381828, 0.44727203, -0.28889754)
_NDTR32_END = np.float32(5.6)  # erf(x / sqrt 2) rounds to 1 in float32 from 5.5426 on


@numba.njit(inline="always")
def _exp32_nonpositive_2p64(c):
    """``exp(c) * 2**64`` for ``c <= 0`` or NaN (always a normal number): :func:`_exp32` without
    its upper clamp and with ``2**k`` in one step. ndtr and npdf call it with the same argument
    (a kernel that calls both computes it once) and scale the product they form from it by
    ``2**-64``, once: off the critical path, and with one rounding for subnormal results."""
    p, k = _exp32_reduced(_where(c < np.float32(-104.0), np.float32(-104.0), c))  # below: 0
    return p * _f32_from_bits((k + np.int32(127 + 64)) << np.int32(23))


_2M64 = np.float32(2.0 ** -64)
_NPDF32_2M64 = np.float32(np.float32(NPDF) * _2M64)  # exact: a power of 2 apart
#: P's coefficients times 2**-64: exact (powers of 2 apart, all normal numbers)
_NDTR32_R_2M64 = tuple(np.float32(np.float32(v) * _2M64) for v in _NDTR32_R)


@numba.njit(inline="always")
def _ndtr32(x):
    e = _exp32_nonpositive_2p64((np.float32(-0.5) * x) * x)  # exp(-x*x / 2) 2**64
    a = abs(x)
    w = _where(a > _NDTR32_END, _NDTR32_END, a)  # NaN stays NaN
    s = w / (w + _NDTR32_Q)
    r = _fma(s, _estrin6(s, s * s, _NDTR32_R_2M64), _2M64)  # R * 2**-64
    m = _fma(-e, r, np.float32(1.0))
    # m = erf(|x| / sqrt 2) >= 0 (1 from END on: e R < 2**-25 there); x's sign, as torch's
    # 1 + erf(x / sqrt 2) gives it (0 where erf rounds to -1), then (1 + erf) / 2
    m = _f32_from_bits(_f32_bits(m) ^ (_f32_bits(x) & np.int32(-0x80000000)))
    return _fma(np.float32(0.5), m, np.float32(0.5))


@numba.njit(inline="always")
def _ndtr64(x):
    return 0.5 * (1.0 + _erf64(x * SQRT1_2))


@numba.njit(inline="always")
def _npdf32(x):
    return _exp32_nonpositive_2p64((np.float32(-0.5) * x) * x) * _NPDF32_2M64


@numba.njit(inline="always")
def _npdf64(x):
    return _exp64((-0.5 * x) * x) * NPDF


def _ndtr_fallback(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x * SQRT1_2))


def _npdf_fallback(x: float) -> float:
    return math.exp(-0.5 * x * x) * NPDF


ndtr = _define("ndtr", _ndtr32, _ndtr64,
               "The standard normal CDF ``(1 + erf(x / sqrt(2))) / 2``; in numba code, the "
               "vectorisable implementation for the dtype.", _ndtr_fallback)
npdf = _define("npdf", _npdf32, _npdf64,
               "The standard normal density ``exp(-x*x / 2) / sqrt(2 pi)``; in numba code, the "
               "vectorisable implementation for the dtype.", _npdf_fallback)


# arctan2: Cephes's atan (atan.c, atanf.c) on |y| / |x|, made branch-free and with one division
# for the reduction (as Agner Fog's vector class library does): z = |y| / |x| where that is at
# most tan(pi/8) (float64: 0.66), (|y| - |x|) / (|y| + |x|) + pi/4 up to tan(3pi/8), and
# -|x| / |y| + pi/2 beyond; then pi - angle where x's sign bit is set, and y's sign. pi/4, pi/2
# and pi are added in two parts (the low one is Cephes's MOREBITS). Both zero (0 / 0) and both
# infinite (inf / inf) are selected: 0 and pi/4 before the quadrant, as C99's atan2 gives them.
_ATAN64_P = (-6.485021904942025371773e1, -1.228866684490136173410e2,
             -7.500855792314704667340e1, -1.615753718733365076637e1,
             -8.750608600031904122785e-1)
_ATAN64_Q = (1.945506571482613964425e2, 4.853903996359136964868e2, 4.328810604912902668951e2,
             1.650270098316988542046e2, 2.485846490142306297962e1)
_ATAN32_P = tuple(np.float32(v) for v in (-3.33329491539e-1, 1.99777106478e-1,
                                          -1.38776856032e-1, 8.05374449538e-2))
_PI_2_HI, _PI_2_LO = math.pi / 2, 6.123233995736765886130e-17
_PI_HI, _PI_LO = math.pi, 2 * 6.123233995736765886130e-17
_PI_2_HI32 = np.float32(math.pi / 2)
_PI_2_LO32 = np.float32(math.pi / 2 - float(_PI_2_HI32))
_PI_HI32 = np.float32(math.pi)
_PI_LO32 = np.float32(math.pi - float(_PI_HI32))


@numba.njit(inline="always")
def _arctan2_64(y, x):
    ax, ay = abs(x), abs(y)
    # the comparisons and ay + ax below need neither subnormals nor overflow: scale both by a
    # power of 2 (exact) where the larger is below 2**-1000 or above 2**1000
    m = _where(ax > ay, ax, ay)
    f = _where(m > 2.0 ** 1000, 2.0 ** -600, _where(m < 2.0 ** -1000, 2.0 ** 600, 1.0))
    ax, ay = ax * f, ay * f
    small = ay <= 0.66 * ax
    big = ay > 2.41421356237309504880 * ax
    num = _where(small, ay, _where(big, -ax, ay - ax))
    den = _where(small, ax, _where(big, ay, ay + ax))
    z = num / _where(den != 0.0, den, 1.0)  # both zero: z = 0 (numba's error model)
    zz = z * z
    p = _fma(zz, _fma(zz, _fma(zz, _fma(zz, _ATAN64_P[4], _ATAN64_P[3]), _ATAN64_P[2]),
                      _ATAN64_P[1]), _ATAN64_P[0])
    q = _fma(zz, _fma(zz, _fma(zz, _fma(zz, zz + _ATAN64_Q[4], _ATAN64_Q[3]), _ATAN64_Q[2]),
                      _ATAN64_Q[1]), _ATAN64_Q[0])
    hi = _where(small, 0.0, _where(big, _PI_2_HI, 0.5 * _PI_2_HI))
    lo = _where(small, 0.0, _where(big, _PI_2_LO, 0.5 * _PI_2_LO))
    t = _fma(z * zz, p / q, z) + lo  # the angle is hi + t
    both_inf = (ax == math.inf) & (ay == math.inf)  # pi/4 (z is NaN)
    hi = _where(both_inf, 0.5 * _PI_2_HI, hi)
    t = _where(both_inf, 0.5 * _PI_2_LO, t)
    # x's sign bit set: pi - angle, with pi - hi exact or rounded once
    angle = _where(_f64_bits(x) < np.int64(0), (_PI_HI - hi) + (_PI_LO - t), hi + t)
    return _f64_from_bits(_f64_bits(angle) | (_f64_bits(y) & np.int64(-0x8000000000000000)))


@numba.njit(inline="always")
def _arctan2_32(y, x):
    ax, ay = abs(x), abs(y)
    m = _where(ax > ay, ax, ay)
    f = _where(m > np.float32(2.0 ** 100), np.float32(2.0 ** -60),
               _where(m < np.float32(2.0 ** -100), np.float32(2.0 ** 60), np.float32(1.0)))
    ax, ay = ax * f, ay * f
    small = ay <= np.float32(0.41421356237309503) * ax
    big = ay > np.float32(2.414213562373095) * ax
    num = _where(small, ay, _where(big, -ax, ay - ax))
    den = _where(small, ax, _where(big, ay, ay + ax))
    z = num / _where(den != np.float32(0.0), den, np.float32(1.0))
    zz = z * z
    p = _fma(zz, _fma(zz, _fma(zz, _ATAN32_P[3], _ATAN32_P[2]), _ATAN32_P[1]), _ATAN32_P[0])
    hi = _where(small, np.float32(0.0), _where(big, _PI_2_HI32, np.float32(0.5) * _PI_2_HI32))
    lo = _where(small, np.float32(0.0), _where(big, _PI_2_LO32, np.float32(0.5) * _PI_2_LO32))
    t = _fma(z * zz, p, z) + lo
    both_inf = (ax == np.float32(math.inf)) & (ay == np.float32(math.inf))
    hi = _where(both_inf, np.float32(0.5) * _PI_2_HI32, hi)
    t = _where(both_inf, np.float32(0.5) * _PI_2_LO32, t)
    angle = _where(_f32_bits(x) < np.int32(0), (_PI_HI32 - hi) + (_PI_LO32 - t), hi + t)
    return _f32_from_bits(_f32_bits(angle) | (_f32_bits(y) & np.int32(-0x80000000)))


def arctan2(y: float, x: float) -> float:
    """The angle of the point (x, y), as ``np.arctan2(y, x)``; in numba code, the vectorisable
    implementation for the dtype (binary, so not through :func:`_define`)."""
    return math.atan2(y, x)


@overload(arctan2, inline="always")
def _arctan2_implementation(y, x):
    if isinstance(y, types.Float) and y == x and y.bitwidth == 32:
        return lambda y, x: _arctan2_32(y, x)
    if isinstance(y, types.Float) and y == x and y.bitwidth == 64:
        return lambda y, x: _arctan2_64(y, x)
    return lambda y, x: np.arctan2(y, x)  # other types: numba's (libm's)


# sin, cos: musl's (fdlibm's) method without branches. x = n pi/2 + y with n = rint(x 2/pi):
# float64 takes pi/2 in three 33-bit parts with their tails, every round of __rem_pio2's
# "medium" case done (musl does the later ones only after a cancellation), so y is a
# double-double (y0, y1) good to 151 bits for |n| < 2**20: each n * part is exact. Then
# __sin / __cos on y (|y| <= pi/4) and the quadrant n mod 4 by selects. float32 computes in
# float64, as musl's sinf: two parts of pi/2 (25 bits and the rest, exact for |n| < 2**28) and
# __sindf / __cosdf, rounded once to float32. Beyond those ranges (|x| >= REDUCE_LIMIT_64 / _32)
# Payne-Hanek's reduction would be needed: the values there are wrong, and the caller (fuse's
# guarded kernels) checks the arguments' range and computes those calls with libm instead.
#: below this |x| the float64 reduction is exact (musl's medium case: 2**20 pi/2 is 1647099.3)
REDUCE_LIMIT_64 = 1.6e6
#: below this |x| the float32 reduction is exact (musl's __rem_pio2f: 2**28 pi/2 is 4.2e8)
REDUCE_LIMIT_32 = 4.0e8
_SHIFT = 6755399441055744.0  # 1.5 * 2**52: x + _SHIFT - _SHIFT rounds x to an integer
_INV_PIO2 = 6.36619772367581382433e-01
_PIO2_1 = 1.57079632673412561417e+00
_PIO2_2, _PIO2_2T = 6.07710050630396597660e-11, 2.02226624879595063154e-21
_PIO2_3, _PIO2_3T = 2.02226624871116645580e-21, 8.47842766036889956997e-32
_PIO2F_1, _PIO2F_1T = 1.57079631090164184570e+00, 1.58932547735281966916e-08
_S64 = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
        2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
_C64 = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
        -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)
_S32 = (-0.166666666416265235595, 0.0083333293858894631756, -0.000198393348360966317347,
        0.0000027183114939898219064)
_C32 = (-0.499999997251031003120, 0.0416666233237390631894, -0.00138867637746099294692,
        0.0000243904487962774090654)


@numba.njit(inline="always")
def _rem_pio2_64(x):
    """(y0, y1, n mod 4): x - n pi/2 as a double-double, for |x| < REDUCE_LIMIT_64."""
    t = x * _INV_PIO2 + _SHIFT
    fn = t - _SHIFT
    q = _f64_bits(t) & np.int64(3)
    r = x - fn * _PIO2_1
    w = fn * _PIO2_2
    s = r - w
    w = fn * _PIO2_2T - ((r - s) - w)
    r = s
    w3 = fn * _PIO2_3
    s = r - w3
    w = fn * _PIO2_3T - ((r - s) - w3)
    y0 = s - w
    return y0, (s - y0) - w, q


@numba.njit(inline="always")
def _sin_kernel64(x, y):
    z = x * x
    w = z * z
    r = _S64[1] + z * (_S64[2] + z * _S64[3]) + z * w * (_S64[4] + z * _S64[5])
    v = z * x
    return x - ((z * (0.5 * y - v * r) - y) - v * _S64[0])


@numba.njit(inline="always")
def _cos_kernel64(x, y):
    z = x * x
    w = z * z
    r = z * (_C64[0] + z * (_C64[1] + z * _C64[2])) + w * w * (_C64[3] + z * (_C64[4]
                                                                            + z * _C64[5]))
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * r - x * y))


@numba.njit(inline="always")
def _quadrant(s, c, q):
    """sin(n pi/2 + y) from s = sin(y), c = cos(y) and q = n mod 4: s, c, -s, -c. The cosine
    is the same at q + 1."""
    v = _where((q & np.int64(1)) != np.int64(0), c, s)
    return _where((q & np.int64(2)) != np.int64(0), -v, v)


@numba.njit(inline="always")
def _sin64(x):
    y0, y1, q = _rem_pio2_64(x)
    return _quadrant(_sin_kernel64(y0, y1), _cos_kernel64(y0, y1), q)


@numba.njit(inline="always")
def _cos64(x):
    y0, y1, q = _rem_pio2_64(x)
    return _quadrant(_sin_kernel64(y0, y1), _cos_kernel64(y0, y1), q + np.int64(1))


@numba.njit(inline="always")
def _rem_pio2_32(x):
    """(y, n mod 4) in float64 for a float32 x, |x| < REDUCE_LIMIT_32."""
    d = np.float64(x)
    t = d * _INV_PIO2 + _SHIFT
    fn = t - _SHIFT
    return (d - fn * _PIO2F_1) - fn * _PIO2F_1T, _f64_bits(t) & np.int64(3)


@numba.njit(inline="always")
def _sin_kernel32(x):
    z = x * x
    w = z * z
    r = _S32[2] + z * _S32[3]
    s = z * x
    return (x + s * (_S32[0] + z * _S32[1])) + s * w * r


@numba.njit(inline="always")
def _cos_kernel32(x):
    z = x * x
    w = z * z
    r = _C32[2] + z * _C32[3]
    return ((1.0 + z * _C32[0]) + w * _C32[1]) + (w * z) * r


@numba.njit(inline="always")
def _sin32(x):
    y, q = _rem_pio2_32(x)
    v = _quadrant(_sin_kernel32(y), _cos_kernel32(y), q)
    # tiny x: sin(x) is x (float64 keeps -0.0 and subnormals, but the sum's rounding of the
    # double to float32 is x itself anyway); selected so that -0.0 stays -0.0
    return _where(abs(x) < np.float32(2.0 ** -12), x, np.float32(v))


@numba.njit(inline="always")
def _cos32(x):
    y, q = _rem_pio2_32(x)
    return np.float32(_quadrant(_sin_kernel32(y), _cos_kernel32(y), q + np.int64(1)))


# tan: the same reduction, then musl's __tan (float64) made branch-free: |y| >= 0.6744 is
# folded to pi/4 - |y|, its polynomial of degree 27, and the odd quadrants' -1 / tan computed
# as a rounded quotient plus its correction; the two quotients (where |y| is large, where the
# quadrant is odd) share one division. float32: sin and cos of y in float64 and their quotient
# rounded once, as musl's tanf computes in double.
_T64 = (3.33333333333334091986e-01, 1.33333333333201242699e-01, 5.39682539762260521377e-02,
        2.18694882948595424599e-02, 8.86323982359930005737e-03, 3.59207910759131235356e-03,
        1.45620945432529025516e-03, 5.88041240820264096874e-04, 2.46463134818469906812e-04,
        7.81794442939557092300e-05, 7.14072491382608190305e-05, -1.85586374855275456654e-05,
        2.59073051863633712884e-05)
_PIO4, _PIO4_LO = 7.85398163397448278999e-01, 3.06161699786838301793e-17
_HIGH_WORD = np.int64(-0x100000000)  # the upper 32 bits of a float64


@numba.njit(inline="always")
def _tan_kernel64(x, y, odd):
    """tan(x + y) for |x + y| <= pi/4 (a double-double), or -1 / tan(x + y) where ``odd``."""
    big = abs(x) >= 0.6744
    neg = x < 0.0
    x = _where(big, (_PIO4 - abs(x)) + (_PIO4_LO - _where(neg, -y, y)), x)
    y = _where(big, 0.0, y)
    z = x * x
    w = z * z
    r = _T64[1] + w * (_T64[3] + w * (_T64[5] + w * (_T64[7] + w * (_T64[9] + w * _T64[11]))))
    v = z * (_T64[2] + w * (_T64[4] + w * (_T64[6] + w * (_T64[8] + w * (_T64[10]
                                                                       + w * _T64[12])))))
    s = z * x
    r = y + z * (s * (r + v) + y) + s * _T64[0]
    w = x + r
    sign = _where(odd, -1.0, 1.0)
    # w is 0 for x = ±0 (the caller selects x there): kept nonzero for numba's error model
    q = _where(big, w * w, -1.0) / _where(big, w + sign, _where(w != 0.0, w, 1.0))
    folded = sign - 2.0 * (x + (r - q))
    w0 = _f64_from_bits(_f64_bits(w) & _HIGH_WORD)  # -1 / w to full precision, as musl does
    a0 = _f64_from_bits(_f64_bits(q) & _HIGH_WORD)
    inverse = a0 + q * (1.0 + a0 * w0 + a0 * (r - (w0 - x)))
    return _where(big, _where(neg, -folded, folded), _where(odd, inverse, w))


@numba.njit(inline="always")
def _tan64(x):
    y0, y1, q = _rem_pio2_64(x)
    v = _tan_kernel64(y0, y1, (q & np.int64(1)) != np.int64(0))
    return _where(abs(x) < 2.0 ** -27, x, v)  # tan(x) rounds to x; keeps -0.0


@numba.njit(inline="always")
def _tan32(x):
    y, q = _rem_pio2_32(x)
    s, c = _sin_kernel32(y), _cos_kernel32(y)
    odd = (q & np.int64(1)) != np.int64(0)
    d = _where(odd, s, c)
    v = _where(odd, -c, s) / _where(d != 0.0, d, 1.0)  # s is 0 at x = ±0 (selected below)
    return _where(abs(x) < np.float32(2.0 ** -12), x, np.float32(v))


sin = _define("sin", _sin32, _sin64,
              "The sine; in numba code, the vectorisable implementation for the dtype, exact in "
              "its reduction only below ``REDUCE_LIMIT_64`` / ``_32`` (see the notes above).")
cos = _define("cos", _cos32, _cos64,
              "The cosine; in numba code, the vectorisable implementation for the dtype, exact "
              "in its reduction only below ``REDUCE_LIMIT_64`` / ``_32``.")


tan = _define("tan", _tan32, _tan64,
              "The tangent; in numba code, the vectorisable implementation for the dtype, exact "
              "in its reduction only below ``REDUCE_LIMIT_64`` / ``_32``.")


# arctan, arcsin, arccos: arctan2's code (Cephes's atan), on (x, 1), (x, sqrt(1 - x*x)) and
# (sqrt(1 - x*x), x); 1 - x*x is one fused multiply-add up to |x| = 1/2 and (1 - |x|)(1 + |x|)
# above, where 1 - |x| is exact. Outside [-1, 1] the square root is NaN, and so the result.
@numba.njit(inline="always")
def _arctan64(x):
    return _arctan2_64(x, 1.0)


@numba.njit(inline="always")
def _arctan32(x):
    return _arctan2_32(x, np.float32(1.0))


@numba.njit(inline="always")
def _root64(x):
    """sqrt(1 - x*x), rounded once before the root."""
    a = abs(x)
    return np.sqrt(_where(a <= 0.5, _fma(-x, x, 1.0), (1.0 - a) * (1.0 + a)))


@numba.njit(inline="always")
def _root32(x):
    one = np.float32(1.0)
    a = abs(x)
    return np.sqrt(_where(a <= np.float32(0.5), _fma(-x, x, one), (one - a) * (one + a)))


@numba.njit(inline="always")
def _arcsin64(x):
    return _arctan2_64(x, _root64(x))


@numba.njit(inline="always")
def _arcsin32(x):
    return _arctan2_32(x, _root32(x))


@numba.njit(inline="always")
def _arccos64(x):
    return _arctan2_64(_root64(x), x)


@numba.njit(inline="always")
def _arccos32(x):
    return _arctan2_32(_root32(x), x)


arctan = _define("arctan", _arctan32, _arctan64, "The arctangent; in numba code, the "
                 "vectorisable implementation for the dtype.", math.atan)
arcsin = _define("arcsin", _arcsin32, _arcsin64, "The arcsine; in numba code, the "
                 "vectorisable implementation for the dtype.", math.asin)
arccos = _define("arccos", _arccos32, _arccos64, "The arccosine; in numba code, the "
                 "vectorisable implementation for the dtype.", math.acos)


@numba.njit(inline="always")
def select(c, a, b):
    """``a if c else b``: the vocabulary's ``select`` (NumPy's ``where``) on scalars."""
    return a if c else b


@numba.njit(inline="always")
def logical_not(c):
    """``not c`` on a scalar."""
    return not c


@numba.njit(inline="always")
def logical_and(c, d):
    """``c & d`` on scalar booleans."""
    return c & d
