"""The vectorisable functions of the numba engine: ulp bounds, special values, no libm calls."""

import math
import platform
import re
import warnings

import numba
import numpy as np
import pytest

from chokepoint.kernels import vecmath

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed


@pytest.fixture(autouse=True)
def backend():
    """vecmath's functions are numba code whichever engine the public functions use: tested
    once, not once per engine as the other kernel tests (tests/kernels/conftest.py)."""
    return "numba"


@numba.njit
def _apply(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.exp(x[i])


@numba.njit
def _apply_expm1(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.expm1(x[i])


@numba.njit
def _apply_tanh(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.tanh(x[i])


@numba.njit
def _apply_log1p(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.log1p(x[i])


@numba.njit
def _apply_erf(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.erf(x[i])


_math_erf = np.vectorize(math.erf, otypes=[np.float64])


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ints = np.int64 if a.dtype == np.float64 else np.int32
    return np.abs(a.view(ints).astype(np.int64) - b.view(ints).astype(np.int64))


@pytest.mark.parametrize(("dtype", "lo", "hi"), [(np.float64, -745.0, 709.7),
                                                 (np.float32, -103.0, 88.7)])
def test_exp_within_one_ulp(dtype, lo, hi):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(lo, hi, 200_000), rng.uniform(-3, 3, 200_000),
                        rng.uniform(-1e-6, 1e-6, 1000)]).astype(dtype)
    out = np.empty_like(x)
    _apply(x, out)
    reference = np.exp(x.astype(np.float64)).astype(dtype)  # float32: exp rounded once
    assert _ulps(out, reference).max() <= 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exp_special_values_as_the_c_library(dtype):
    big = 709.79 if dtype == np.float64 else 88.73
    tiny = -745.2 if dtype == np.float64 else -104.0
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, big, 1e4, tiny, -1e4, 1e-300, -1e-300],
                 dtype)
    out = np.empty_like(x)
    _apply(x, out)
    with np.errstate(over="ignore", under="ignore"):
        expected = np.array([math.exp(v) if v < 700 else math.inf for v in x.astype(float)]
                            ).astype(dtype)
    expected[0] = np.nan
    np.testing.assert_array_equal(out, expected)


def _libm_exp_loaded(fn) -> bool:
    x = np.ones(64)
    fn(x, np.empty_like(x))
    asm = next(iter(fn.inspect_asm().values()))
    # a call of the C library's exp is an indirect call through `movabsq $exp, %reg`
    return any("$exp," in line for line in asm.splitlines())


def test_exp_calls_no_libm():
    @numba.njit
    def ours(x, out):
        for i in range(x.shape[0]):
            out[i] = vecmath.exp(x[i])

    @numba.njit
    def libm(x, out):
        for i in range(x.shape[0]):
            out[i] = math.exp(x[i])

    assert _libm_exp_loaded(libm)  # the check sees a libm call where there is one
    assert not _libm_exp_loaded(ours)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_functions_used_twice_inline_without_warnings_or_calls(dtype):
    # each function twice in one loop: numba's inliner warned (NumbaIRAssumptionWarning) when an
    # inlined overload had conditional expressions, and a function left to LLVM stayed a call,
    # which kept the serial loop scalar (SiLU's backward: 17 ns an element against 2.7)
    @numba.njit(error_model="numpy")
    def twice(x, out):
        for i in range(x.shape[0]):
            v = x[i]
            out[i] = (vecmath.exp(v) + vecmath.exp(-v) + vecmath.expm1(v) + vecmath.expm1(-v)
                      + vecmath.tanh(v) + vecmath.tanh(-v) + vecmath.log1p(abs(v))
                      + vecmath.log1p(abs(v) + 1) + vecmath.erf(v) + vecmath.erf(-v)
                      + vecmath.ndtr(v) + vecmath.ndtr(-v) + vecmath.npdf(v) - vecmath.npdf(-v))

    x = np.linspace(-3, 3, 64).astype(dtype)
    out = np.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        twice(x, out)
    body = next(iter(twice.inspect_llvm().values()))
    body = body[body.index("define"):]
    calls = "".join(line for line in body.splitlines() if " call " in line)
    assert "chokepoint7kernels7vecmath" not in calls  # numba's mangled names of vecmath's
    v = x.astype(np.float64)
    expected = (np.exp(v) + np.exp(-v) + np.expm1(v) + np.expm1(-v) + np.tanh(v) + np.tanh(-v)
                + np.log1p(abs(v)) + np.log1p(abs(v) + 1) + 1.0)  # erf(v) + erf(-v) is 0,
    # ndtr(v) + ndtr(-v) is 1 and npdf(v) - npdf(-v) is 0
    assert np.allclose(out, expected, rtol=1e-5 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize(("dtype", "lo", "hi"), [(np.float64, -50.0, 709.0),
                                                 (np.float32, -30.0, 88.0)])
def test_expm1_within_two_ulp(dtype, lo, hi):
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.uniform(lo, hi, 100_000), rng.uniform(-1, 1, 200_000),
                        np.geomspace(1e-30, 0.6, 2000), -np.geomspace(1e-30, 0.6, 2000)]
                       ).astype(dtype)
    out = np.empty_like(x)
    _apply_expm1(x, out)
    assert _ulps(out, np.expm1(x.astype(np.float64)).astype(dtype)).max() <= 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_expm1_special_values(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-38, -1e4, 1e4], dtype)
    out = np.empty_like(x)
    _apply_expm1(x, out)
    with np.errstate(over="ignore"):
        expected = np.expm1(x)
    np.testing.assert_array_equal(out, expected)
    assert np.signbit(out[4])  # expm1(-0.0) is -0.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tanh_within_four_ulp_and_special_values(dtype):
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.uniform(-25, 25, 200_000), rng.uniform(-1, 1, 200_000),
                        np.geomspace(1e-30, 0.6, 2000), -np.geomspace(1e-30, 0.6, 2000)]
                       ).astype(dtype)
    out = np.empty_like(x)
    _apply_tanh(x, out)
    assert _ulps(out, np.tanh(x.astype(np.float64)).astype(dtype)).max() <= 4
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-38, 30.0, -30.0], dtype)
    out = np.empty_like(special)
    _apply_tanh(special, out)
    np.testing.assert_array_equal(out, np.tanh(special))
    assert np.signbit(out[4])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log1p_within_two_ulp(dtype):
    # measured: at most 1 ulp here, and over every float32 > -1
    rng = np.random.default_rng(10)
    x = np.concatenate([10.0 ** rng.uniform(-40, 300, 200_000),  # many magnitudes, overflow in f32
                        -1.0 + 10.0 ** rng.uniform(-16, 0, 100_000),  # near -1
                        rng.uniform(-0.3, 0.42, 200_000),  # 1 + x in [sqrt(2)/2, sqrt(2)): k = 0
                        np.geomspace(1e-30, 0.6, 2000), -np.geomspace(1e-30, 0.6, 2000)])
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    x = x[np.isfinite(x) & (x > -1)]
    out = np.empty_like(x)
    _apply_log1p(x, out)
    assert _ulps(out, np.log1p(x.astype(np.float64)).astype(dtype)).max() <= 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log1p_special_values(dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -1.5, -1e30, tiny, -tiny,
                  np.finfo(dtype).tiny, np.finfo(dtype).max, 1e-30, -1e-30], dtype)
    out = np.empty_like(x)
    _apply_log1p(x, out)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.log1p(x)
    np.testing.assert_array_equal(out, expected)
    assert out[5] == -np.inf and np.isnan(out[6:8]).all()
    assert np.signbit(out[4])  # log1p(-0.0) is -0.0
    assert out[8] == tiny and out[9] == -tiny  # tiny x: x itself


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_erf_within_two_ulp_and_odd(dtype):
    # float64 against math.erf (itself within 1 ulp), float32 against it rounded once;
    # measured: at most 1 ulp in both (float32: over every float32, tools/fit_erf32.py --check)
    rng = np.random.default_rng(12)
    x = np.concatenate([rng.uniform(-7, 7, 150_000),
                        rng.uniform(-1.5, 1.5, 150_000),  # the fdlibm intervals' ends
                        10.0 ** rng.uniform(-300 if dtype == np.float64 else -38, 0.8, 50_000),
                        np.array([0.84375, 1.0, 1.25, 2.857142857142857, 3.925, 6.0]),
                        np.nextafter(np.array([0.84375, 1.0, 1.25, 2.857142857142857, 3.925, 6.0]),
                                     0)]
                       ).astype(dtype)
    out = np.empty_like(x)
    _apply_erf(x, out)
    assert _ulps(out, _math_erf(x.astype(np.float64)).astype(dtype)).max() <= 2
    negative = np.empty_like(x)
    _apply_erf(-x, negative)
    np.testing.assert_array_equal(negative, -out)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_erf_special_values(dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    # 3.925, 4.0: the float32 kernel's last polynomial value and its first plain 1
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 6.0, -6.0, 30.0, -1e30, tiny, -tiny,
                  3.925, 4.0, -4.0, 1.0, -1.0], dtype)
    out = np.empty_like(x)
    _apply_erf(x, out)
    expected = np.array([math.erf(v) for v in x.astype(np.float64)]).astype(dtype)
    np.testing.assert_array_equal(out, expected)
    assert np.signbit(out[4])  # erf(-0.0) is -0.0
    assert out[1] == 1 and out[2] == -1


_LIBM = {"sin": ("sin", "sinf", "cos", "cosf"), "cos": ("sin", "sinf", "cos", "cosf"),
         "log1p": ("log1p", "log1pf", "log", "logf"),
         "erf": ("erf", "erff", "exp", "expf"),
         "ndtr": ("erf", "erff", "exp", "expf"),
         "npdf": ("exp", "expf"),
         "arctan2": ("atan2", "atan2f", "atan", "atanf"),
         "tan": ("tan", "tanf", "sin", "sinf", "cos", "cosf"),
         "arctan": ("atan", "atanf", "atan2", "atan2f"),
         "arcsin": ("asin", "asinf", "atan2", "atan2f", "atan", "atanf"),
         "arccos": ("acos", "acosf", "atan2", "atan2f", "atan", "atanf")}
#: a C library function the check must see called, per vecmath function
_LIBM_CALL = {"sin": math.sin, "cos": math.cos, "log1p": math.log1p, "erf": math.erf,
              "ndtr": math.erf, "npdf": math.exp,
              "arctan2": math.atan2, "tan": math.tan, "arctan": math.atan, "arcsin": math.asin,
              "arccos": math.acos}


def _libm_called(asm: str, names) -> bool:
    # a call of the C library is an indirect call through `movabsq $name, %reg`
    return any(f"${name}," in line for line in asm.splitlines() for name in names)


def _asm(fn, dtype) -> str:
    x = np.ones(64, dtype)
    fn(x, np.empty_like(x))
    return next(iter(fn.inspect_asm().values()))


@pytest.mark.parametrize("name", ["sin", "cos", "tan", "log1p", "erf", "ndtr", "npdf", "arctan2",
                                  "arctan", "arcsin", "arccos"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_calls_no_libm_and_vectorises(name, dtype):
    ours_fn, libm_fn = getattr(vecmath, name), _LIBM_CALL[name]
    if name == "arctan2":  # binary: the second operand is the element's neighbour
        def call(f, x, i):
            return f(x[i], x[i - 1])
    else:
        def call(f, x, i):
            return f(x[i])
    call = numba.njit(inline="always")(call)

    @numba.njit(parallel=True)
    def ours(x, out):
        for i in numba.prange(x.shape[0]):
            out[i] = call(ours_fn, x, i)

    @numba.njit
    def libm(x, out):
        for i in range(x.shape[0]):
            out[i] = call(libm_fn, x, i)

    assert _libm_called(_asm(libm, dtype), _LIBM[name])  # the check sees a libm call
    asm = _asm(ours, dtype)
    assert not _libm_called(asm, _LIBM[name])
    # the function is inlined into the loop (no `movabsq $<vecmath symbol>` for a call of the
    # overload, as when erf's body was past LLVM's inlining threshold), and the loop vectorised
    assert "chokepoint7kernels7vecmath" not in asm
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert len(re.findall(r"\bv?(?:mul|add|sub|fmadd\w*)p[sd]\s", asm)) >= 10


@numba.njit(error_model="numpy")
def _apply_sinh_cosh(x, s, c):
    for i in range(x.shape[0]):
        s[i] = vecmath.sinh(x[i])
        c[i] = vecmath.cosh(x[i])


@pytest.mark.parametrize(("dtype", "edge"), [(np.float64, 710.4758600739439),
                                             (np.float32, 89.41598)])
def test_sinh_cosh_within_two_ulp_and_special_values(dtype, edge):
    rng = np.random.default_rng(10)
    x = np.concatenate([rng.uniform(-edge, edge, 200_000), rng.uniform(-1, 1, 200_000),
                        rng.uniform(-30, 30, 100_000), np.geomspace(1e-30, 30, 4000),
                        -np.geomspace(1e-30, 30, 4000),
                        np.linspace(edge - 1.5, edge - 1e-4, 2000)]).astype(dtype)
    s, c = np.empty_like(x), np.empty_like(x)
    _apply_sinh_cosh(x, s, c)
    wide = x.astype(np.float64)
    # within 2 ulp; 3 in the last sliver before overflow (exp(|x| / 2) squared: two roundings)
    bound = np.where(np.abs(x) < edge - 0.7, 2, 3)
    assert (_ulps(s, np.sinh(wide).astype(dtype)) <= bound).all()
    assert (_ulps(c, np.cosh(wide).astype(dtype)) <= bound).all()
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-38, -1e-38, edge * 1.01,
                        -edge * 1.01], dtype)
    s, c = np.empty_like(special), np.empty_like(special)
    _apply_sinh_cosh(special, s, c)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, np.sinh(special))
        np.testing.assert_array_equal(c, np.cosh(special))
    assert np.signbit(s[4]) and not np.signbit(c[4])  # sinh(-0.0) = -0.0, cosh(-0.0) = 1


@numba.njit(error_model="numpy")
def _apply_ndtr_npdf(x, cdf, pdf):
    for i in range(x.shape[0]):
        cdf[i] = vecmath.ndtr(x[i])
        pdf[i] = vecmath.npdf(x[i])


def _normal_references(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torch's GELU formulas in float64 at the float64 value of ``x``."""
    v = x.astype(np.float64)
    return (0.5 * (1.0 + _math_erf(v * math.sqrt(0.5))),
            np.exp(-0.5 * v * v) * vecmath.NPDF)


@pytest.mark.parametrize(("dtype", "cdf_abs", "cdf_ulps", "pdf_ulps"),
                         [(np.float64, 2.3e-16, 2, 3), (np.float32, 1.2e-7, 2, 4)])
def test_ndtr_npdf_within_bounds(dtype, cdf_abs, cdf_ulps, pdf_ulps):
    # measured (AMD EPYC, FMA): ndtr within 1.1e-16 / 7.8e-8 absolute of the float64 formula
    # and 1 ulp for x >= 0 (where it is at least 1/2); below 0 it is a difference near 1, as
    # torch computes it (12 ulp of the result at x = -2, float32). npdf 2 ulp for |x| <= 1
    # (float32 computes x * x in float32, as torch does: 9 ulp at |x| = 5.4, 18 at 8)
    rng = np.random.default_rng(21)
    x = np.concatenate([np.linspace(-8, 8, 100_001), rng.standard_normal(100_000) * 3,
                        10.0 ** rng.uniform(-30, 0, 10_000)]).astype(dtype)
    cdf, pdf = np.empty_like(x), np.empty_like(x)
    _apply_ndtr_npdf(x, cdf, pdf)
    ref_cdf, ref_pdf = _normal_references(x)
    assert np.abs(cdf - ref_cdf).max() <= cdf_abs
    upper = x >= 0
    assert _ulps(cdf[upper], ref_cdf[upper].astype(dtype)).max() <= cdf_ulps
    near = np.abs(x) <= 1
    assert _ulps(pdf[near], ref_pdf[near].astype(dtype)).max() <= pdf_ulps
    with np.errstate(under="ignore"):
        assert np.allclose(pdf, ref_pdf, rtol=64 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ndtr_npdf_special_values_and_tails(dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 40.0, -40.0, 1e30, -1e30],
                 dtype)
    cdf, pdf = np.empty_like(x), np.empty_like(x)
    _apply_ndtr_npdf(x, cdf, pdf)
    np.testing.assert_array_equal(cdf, np.array([np.nan, 1, 0, 0.5, 0.5, 0.5, 0.5, 1, 0, 1, 0],
                                                dtype))
    np.testing.assert_array_equal(pdf[1:], np.array([0, 0, *[vecmath.NPDF] * 4, 0, 0, 0, 0],
                                                    dtype))
    assert np.isnan(pdf[0])
    # the tails as torch's 1 + erf(x / sqrt(2)) gives them: 1 where erf rounds to 1, 0 where it
    # rounds to -1 (float32: from |x| = 5.5426 on), and the density down to the subnormals
    edge = 5.55 if dtype == np.float32 else 6 * math.sqrt(2)  # float64: erf is 1 from 6
    t = np.linspace(edge, 3 * edge, 1001).astype(dtype)
    cdf, pdf = np.empty_like(t), np.empty_like(t)
    _apply_ndtr_npdf(t, cdf, pdf)
    assert (cdf == 1).all()
    _apply_ndtr_npdf(-t, cdf, pdf)
    assert (cdf == 0).all() and not np.signbit(cdf).any()
    with np.errstate(under="ignore"):
        ref = _normal_references(t)[1]
    # relative to the normal range's bottom where the result is subnormal (x * x, e and the
    # product with 1 / sqrt(2 pi) round as in torch's float32 formula)
    scale = np.maximum(ref, np.finfo(dtype).tiny)
    assert (np.abs(pdf - ref) <= 256 * np.finfo(dtype).eps * scale + tiny).all()
    assert (pdf[ref < tiny / 4] == 0).all()


@numba.njit(error_model="numpy")
def _apply_exp32_nonpositive(x, out):  # as ndtr and npdf scale it
    for i in range(x.shape[0]):
        out[i] = vecmath._exp32_nonpositive_2p64(x[i]) * vecmath._2M64


def test_exp32_nonpositive_within_one_ulp():
    # ndtr's and npdf's exp: no upper clamp, and subnormal results from one rounding
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.uniform(-104, 0, 300_000), rng.uniform(-1e-3, 0, 10_000),
                        np.array([0.0, -0.0, -87.33, -103.97, -104.0, -1e4, -np.inf])]
                       ).astype(np.float32)
    out = np.empty_like(x)
    _apply_exp32_nonpositive(x, out)
    with np.errstate(under="ignore"):
        reference = np.exp(x.astype(np.float64)).astype(np.float32)
    assert _ulps(out, reference).max() <= 1
    nan = np.empty(1, np.float32)
    _apply_exp32_nonpositive(np.array([np.nan], np.float32), nan)
    assert np.isnan(nan[0])


@numba.njit(error_model="numpy")
def _apply_arctan2(y, x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.arctan2(y[i], x[i])


@pytest.mark.parametrize(("dtype", "bound"), [(np.float64, 2), (np.float32, 2)])
def test_arctan2_within_bound_of_numpy(dtype, bound):
    # measured (AMD EPYC, Intel Emerald Rapids): 2 ulp float64 (6% of values differ), 2 float32,
    # over wide magnitudes. float32 against float64's arctan2 rounded: NumPy's own float32
    # arctan2 depends on the CPU (its AVX-512 loop is 3 ulp from that, ours 4 from it there)
    rng = np.random.default_rng(31)
    n = 200_000
    y = np.concatenate([rng.standard_normal(n), rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(
        -30, 30, n)]).astype(dtype)
    x = np.concatenate([rng.standard_normal(n), rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(
        -30, 30, n)]).astype(dtype)
    out = np.empty_like(x)
    _apply_arctan2(y, x, out)
    reference = np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(dtype)
    assert _ulps(out, reference).max() <= bound


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_arctan2_special_values_and_extremes_as_numpy(dtype):
    fi = np.finfo(dtype)
    # every pair of signed zeros, infinities, NaN and ordinary values: C99's table, bit for bit
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0], dtype)
    ys, xs = (a.ravel().copy() for a in np.meshgrid(special, special))
    out = np.empty_like(xs)
    _apply_arctan2(ys, xs, out)
    expected = np.arctan2(ys, xs)
    ordinary = np.isfinite(xs) & np.isfinite(ys) & (xs != 0) & (ys != 0)
    np.testing.assert_array_equal(out[~ordinary], expected[~ordinary])
    assert _ulps(out[ordinary], expected[ordinary]).max() <= 3
    number = ~np.isnan(expected)
    assert (np.signbit(out[number]) == np.signbit(expected[number])).all()
    # subnormal, tiny and huge operands (scaled inside, so the reduction sees neither
    # subnormals nor overflow): within 1 ulp
    big = np.array([fi.smallest_subnormal, 3 * fi.smallest_subnormal, fi.tiny, 7 * fi.tiny,
                    fi.max, fi.max / 3, 1e-30, 1.0, 1e30], dtype)
    big = np.concatenate([big, -big])
    ys, xs = (a.ravel().copy() for a in np.meshgrid(big, big))
    out = np.empty_like(xs)
    _apply_arctan2(ys, xs, out)
    assert _ulps(out, np.arctan2(ys, xs)).max() <= 1


@numba.njit(error_model="numpy")
def _apply_log(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.log(x[i])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_within_one_ulp_and_special_values(dtype):
    # log1p's fdlibm core on x itself (subnormals scaled by a power of 2 first); measured 1 ulp
    # from the float64 log (rounded to float32: NumPy's own float32 log is 3 ulp from it)
    fi = np.finfo(dtype)
    rng = np.random.default_rng(41)
    e = np.log10(fi.max) - 0.1
    x = np.concatenate([10.0 ** rng.uniform(-e, e, 200_000), rng.uniform(0.5, 2.0, 100_000),
                        np.array([fi.smallest_subnormal, 3 * fi.smallest_subnormal, fi.tiny,
                                  0.7 * fi.tiny, fi.max, 1.0, np.nextafter(dtype(1), 2),
                                  np.nextafter(dtype(1), 0)])]).astype(dtype)
    out = np.empty_like(x)
    _apply_log(x, out)
    assert _ulps(out, np.log(x.astype(np.float64)).astype(dtype)).max() <= 1
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -fi.tiny, 1.0], dtype)
    out = np.empty_like(special)
    _apply_log(special, out)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(out, np.log(special))
    assert out[-1] == 0 and not np.signbit(out[-1])


@numba.njit
def _apply_sin_cos(x, s, c):
    for i in range(x.shape[0]):
        s[i] = vecmath.sin(x[i])
        c[i] = vecmath.cos(x[i])


def _sin_cos_arguments(dtype, limit) -> np.ndarray:
    """Uniform, log-uniform up to the reduction's bound, and next to multiples of pi/2 (the
    reduction's cancellations)."""
    rng = np.random.default_rng(3)
    n = 200_000
    near = np.arange(1, n) * (np.pi / 2)
    x = np.concatenate([rng.uniform(-7, 7, n), np.exp(rng.uniform(-40, np.log(limit), n)),
                        -np.exp(rng.uniform(-40, np.log(limit), n)), near,
                        np.nextafter(near, 0)]).astype(dtype)
    return x[np.abs(x) < limit]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sin_cos_within_one_ulp_below_the_reduction_bound(dtype):
    limit = vecmath.REDUCE_LIMIT_64 if dtype == np.float64 else vecmath.REDUCE_LIMIT_32
    x = _sin_cos_arguments(dtype, limit)
    s, c = np.empty_like(x), np.empty_like(x)
    _apply_sin_cos(x, s, c)
    # float64 against NumPy (the C library's, correctly rounded or nearly); float32 against
    # float64 rounded once (NumPy's own float32 SIMD sin is up to 1.5 ulp from it)
    x64 = x.astype(np.float64)
    assert _ulps(s, np.sin(x64).astype(dtype)).max() <= 1
    assert _ulps(c, np.cos(x64).astype(dtype)).max() <= 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sin_cos_special_values(dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([0.0, -0.0, tiny, -tiny, np.inf, -np.inf, np.nan, 1e-30], dtype)
    s, c = np.empty_like(x), np.empty_like(x)
    _apply_sin_cos(x, s, c)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(s, np.sin(x))
        np.testing.assert_array_equal(c, np.cos(x))
    assert np.signbit(s[1]) and not np.signbit(s[0])  # sin(-0.0) is -0.0


@numba.njit(error_model="numpy")
def _apply_inverse_trig(x, t, a, s, c):
    for i in range(x.shape[0]):
        t[i] = vecmath.tan(x[i])
        a[i] = vecmath.arctan(x[i])
        s[i] = vecmath.arcsin(x[i])
        c[i] = vecmath.arccos(x[i])


def _trig(x):
    outs = [np.empty_like(x) for _ in range(4)]
    _apply_inverse_trig(x, *outs)
    return dict(zip(("tan", "arctan", "arcsin", "arccos"), outs, strict=True))


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return getattr(np, name)(x.astype(np.float64)).astype(x.dtype)


@pytest.mark.parametrize(("dtype", "bounds"), [
    # measured (AMD EPYC Zen 4): tan 2 ulp float64 (musl's __tan; 1 float32, rounded from
    # float64), arctan 1, arcsin and arccos 2 (float32 computed in float32)
    (np.float64, {"tan": 2, "arctan": 2, "arcsin": 2, "arccos": 2}),
    (np.float32, {"tan": 1, "arctan": 2, "arcsin": 2, "arccos": 2})])
def test_tan_and_inverse_trig_within_bounds(dtype, bounds):
    rng = np.random.default_rng(47)
    limit = vecmath.REDUCE_LIMIT_64 if dtype == np.float64 else 1e6
    wide = np.concatenate([rng.uniform(-100, 100, 100_000), rng.uniform(-limit, limit, 50_000),
                           np.arange(1, 4000) * (np.pi / 2), rng.uniform(-0.8, 0.8, 50_000),
                           rng.uniform(-1, 1, 50_000) * 10.0 ** rng.uniform(-30, 4, 50_000)])
    unit = np.concatenate([rng.uniform(-1, 1, 200_000), 1 - 10.0 ** rng.uniform(-16, 0, 20_000),
                           -1 + 10.0 ** rng.uniform(-16, 0, 20_000),
                           rng.uniform(-1, 1, 20_000) * 10.0 ** rng.uniform(-30, 0, 20_000)])
    for name, x in (("tan", wide), ("arctan", wide), ("arcsin", unit), ("arccos", unit)):
        x = x.astype(dtype)
        if dtype == np.float64 or name != "tan":  # float64 against NumPy (glibc's)
            x = x[np.abs(x) < vecmath.REDUCE_LIMIT_64]
        ours = _trig(x)[name]
        worst = int(_ulps(ours, _reference(name, x)).max())
        assert worst <= bounds[name], (name, worst)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tan_and_inverse_trig_special_values(dtype):
    fi = np.finfo(dtype)
    x = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
                  fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, fi.max, -fi.max],
                 dtype)
    ours = _trig(x)
    for name in ("arctan", "arcsin", "arccos"):
        expected = _reference(name, x)
        np.testing.assert_array_equal(np.isnan(ours[name]), np.isnan(expected), err_msg=name)
        number = ~np.isnan(expected)
        assert _ulps(ours[name][number], expected[number]).max() <= 1, name
        assert (np.signbit(ours[name][number]) == np.signbit(expected[number])).all(), name
    # tan: zeros keep their sign, tiny arguments are themselves, NaN and infinities give NaN
    # (beyond the reduction bound the caller computes with libm, as for sin and cos)
    t = ours["tan"][:5]
    assert t[0] == 0 and not np.signbit(t[0]) and t[1] == 0 and np.signbit(t[1])
    assert np.isnan(t[2:]).all()
    np.testing.assert_array_equal(ours["tan"][11:14], x[11:14])


@numba.njit  # numba's default error model: a division by zero raises
def _trig_default_model(x):
    return (vecmath.tan(x), vecmath.arctan(x), vecmath.arcsin(x), vecmath.arccos(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tan_and_inverse_trig_divide_by_no_zero(dtype):
    # every divisor is kept nonzero where its quotient is selected away (the module notes)
    for value in (0.0, -0.0, 1.0, -1.0, 2.0, np.pi / 2):
        got = _trig_default_model(dtype(value))
        with np.errstate(all="ignore"):
            ref = [getattr(np, f)(dtype(value)) for f in ("tan", "arctan", "arcsin", "arccos")]
        for a, b in zip(got, ref, strict=True):
            assert (np.isnan(a) and np.isnan(b)) or abs(a - b) <= 4 * abs(np.spacing(b)), value
