"""The vectorisable exp of the numba engine: ulp bounds, special values, and that it vectorises."""

import math

import numba
import numpy as np
import pytest

from chokepoint.kernels import vecmath


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
