"""The largest ulp difference between fuse (libm through numba) and NumPy, per function and dtype.

One small kernel per function and dtype: a chain of all of them under np.where compiled no
faster (13.9 s against 11.4 s for float32's 23) and was one 45 s test that two test processes
could not share. ``python tests/fuse/test_ulp.py`` prints the table that README and
benchmarks/RESULTS.md quote; the test asserts the bounds below.
"""

from __future__ import annotations

import numpy as np
import pytest

import chokepoint

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed

# function -> (domain low, high); binary functions take y from the same domain
UNARY = {
    "exp": (-80, 80), "exp2": (-100, 100), "expm1": (-40, 40), "log": (1e-30, 1e30),
    "log2": (1e-30, 1e30), "log10": (1e-30, 1e30), "log1p": (-0.99, 1e10),
    "sin": (-100, 100), "cos": (-100, 100), "tan": (-100, 100), "arcsin": (-1, 1),
    "arccos": (-1, 1), "arctan": (-1e4, 1e4), "sinh": (-80, 80), "cosh": (-80, 80),
    "tanh": (-20, 20), "arcsinh": (-1e6, 1e6), "arccosh": (1, 1e6), "arctanh": (-1, 1),
    "cbrt": (-1e6, 1e6),
}
BINARY = {"arctan2": (-100, 100), "hypot": (-1e3, 1e3), "power": (0.01, 10)}
FUNCTIONS = [*UNARY, *BINARY]
N = 2500  # per function: all of them under the parallel size, one serial kernel to compile

#: The largest difference measured here (AMD EPYC Zen 4, NumPy 2.4, glibc libm), in ulp.
BOUNDS = {np.float64: 3, np.float32: 3}


def _inputs(name: str, dtype):
    rng = np.random.default_rng(0)
    lo, hi = {**UNARY, **BINARY}[name]
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, lo, hi])
    x = np.concatenate([rng.uniform(lo, hi, N), np.repeat(specials, 9)]).astype(dtype)
    y = np.concatenate([rng.uniform(lo, hi, N), np.tile(specials, 9)]).astype(dtype)
    return x, y


def _ordered(a: np.ndarray) -> np.ndarray:
    """Integers in the order of the floats, so that their difference counts ulps."""
    i = a.view(f"i{a.itemsize}").astype(np.int64)
    return np.where(i < 0, np.iinfo(f"i{a.itemsize}").min - i, i)


def ulp_of(name: str, dtype) -> int:
    """Largest ulp difference of fuse's ``name`` from NumPy's (NaN in both counts as equal).

    Also checks that NaN, infinities and the sign of zero results are NumPy's.
    """
    x, y = _inputs(name, dtype)
    if name in BINARY:
        mine = chokepoint.fuse(f"np.{name}(x, y)")(x=x, y=y)
        args = (x, y)
    else:
        mine = chokepoint.fuse(f"np.{name}(x)")(x=x)
        args = (x,)
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(*args)
    both_nan = np.isnan(ref) & np.isnan(mine)
    diff = np.abs(_ordered(mine) - _ordered(ref))
    assert (np.isnan(ref) == np.isnan(mine)).all(), name
    zero = ref == 0
    assert (np.signbit(ref[zero]) == np.signbit(mine[zero])).all(), name
    return int(np.where(both_nan, 0, diff).max())


def ulp_table(dtype) -> dict[str, int]:
    """:func:`ulp_of` of every function."""
    return {name: ulp_of(name, dtype) for name in FUNCTIONS}


def vectorised_table(dtype) -> dict[str, int]:
    """The same for the functions fuse computes with vecmath's vectorised code only where every
    argument of a call is in range (``codegen.GUARDED``): above, the infinities among the specials
    send the whole call to libm. One kernel per function, finite specials only."""
    from chokepoint.fuse.codegen import GUARDED

    rng = np.random.default_rng(1)
    table = {}
    for name in GUARDED:
        x = np.concatenate([rng.uniform(-100, 100, N), [np.nan, 0.0, -0.0, 1.0, -1.0, 1e5],
                            np.arange(1, 2000) * np.pi / 2]).astype(dtype)
        ours = chokepoint.fuse(f"np.{name}(x)")(x=x)
        with np.errstate(all="ignore"):
            ref = getattr(np, name)(x)
        assert (np.signbit(ref[ref == 0]) == np.signbit(ours[ref == 0])).all(), name
        both_nan = np.isnan(ref) & np.isnan(ours)
        table[name] = int(np.where(both_nan, 0, np.abs(_ordered(ours) - _ordered(ref))).max())
    return table


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vectorised_ulp_bounds(dtype):
    table = vectorised_table(dtype)
    assert max(table.values()) <= BOUNDS[dtype], table


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_transcendental_ulp_bounds(name, dtype):
    assert ulp_of(name, dtype) <= BOUNDS[dtype]


if __name__ == "__main__":
    from chokepoint.fuse import costs

    # fuse's kernels, as under the tests (conftest.py): NumPy's ufuncs on blocks give 0 ulp
    costs.POLICY = "never"
    tables = {np.dtype(d).name: ulp_table(d) for d in (np.float64, np.float32)}
    print(f"{'function':<10} {'float64':>8} {'float32':>8}")
    for name in FUNCTIONS:
        print(f"{name:<10} {tables['float64'][name]:>8} {tables['float32'][name]:>8}")
    vectorised = {np.dtype(d).name: vectorised_table(d) for d in (np.float64, np.float32)}
    for name in vectorised["float64"]:
        print(f"{name + ' (v)':<10} {vectorised['float64'][name]:>8} "
              f"{vectorised['float32'][name]:>8}")
