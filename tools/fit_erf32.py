"""Fit the float32 erf coefficients of ``chokepoint.kernels.vecmath`` (``_ERF32_P``, ``_ERF32_G``).

``python tools/fit_erf32.py`` prints them; ``--check`` then compares the kernel with ``math.erf``
rounded to float32 over every float32 in [0, 4.5) (erf is odd; beyond, the kernel returns 1), which
takes a few minutes and a few GB.

The two pieces, with errors measured in ulps of the float32 result:

* ``|x| < 1``: ``erf(x) = x + x * P(x*x)``; the error weight is ``x / erf(x)``.
* ``1 <= |x| < 3.925``: ``erf(x) = 1 - exp(-x*x) * G(|x| - 2.4625)`` with ``G`` approximating
  ``erfc(x) * exp(x*x)``; the error weight is ``1 / G``: erfc to about 0.1 ulp *relative*, not
  only erf to a fraction of an ulp, so that ``1 + erf(x)`` (GELU's negative tail) keeps erfc's
  accuracy and ties round as with the C library's erf. (Weighted by ``exp(-x*x)``, degree 8 was
  within 1 ulp too, but float32 GELU then differed from GELU with libm's erf at 17 of 513 points
  of [-6, 6].) From 3.8325 on erf rounds to 1.

Measured: within 1 ulp of ``math.erf`` rounded to float32 for every float32; different from it at
5.7% of x in (1e-3, 4) and 0.11% of x in (2, 4), against 6.4% and 0.14% for fdlibm's erff.

Each is a weighted least-squares fit at Chebyshev nodes, driven towards minimax by Lawson's
reweighting, with the coefficients rounded to float32 one at a time from the constant term on
(each rounding absorbed by refitting the rest). References come from mpmath at 40 digits.
"""

from __future__ import annotations

import argparse
import math

import mpmath
import numpy as np

SPLIT, END, MID = 1.0, 3.925, 2.4625
DEGREE_P, DEGREE_G = 6, 12


def _chebyshev_nodes(a: float, b: float, n: int) -> np.ndarray:
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


def _lawson(v: np.ndarray, y: np.ndarray, w: np.ndarray, iterations: int = 80) -> np.ndarray:
    """Coefficients ``c`` that (nearly) minimise ``max |w * (v @ c - y)|``."""
    weights = np.full(len(y), 1.0 / len(y))
    for _ in range(iterations):
        sw = np.sqrt(weights) * w
        c = np.linalg.lstsq(v * sw[:, None], y * sw, rcond=None)[0]
        weights = weights * np.abs(w * (v @ c - y))
        weights /= weights.sum()
    return c


def _fit_float32(v: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    fixed: list[float] = []
    for j in range(v.shape[1]):
        rest = y - v[:, :j] @ np.array(fixed) if j else y
        fixed.append(float(np.float32(_lawson(v[:, j:], rest, w)[0])))
    c = np.array(fixed)
    return c, float(np.abs(w * (v @ c - y)).max())


def fit() -> tuple[np.ndarray, np.ndarray]:
    mpmath.mp.dps = 40
    x = _chebyshev_nodes(1e-4, SPLIT, 4000)
    p, error_p = _fit_float32(np.vander(x * x, DEGREE_P + 1, increasing=True),
                              np.array([float(mpmath.erf(v) / v - 1) for v in x]),
                              x / np.array([math.erf(v) for v in x]) * 2.0**24)
    x = _chebyshev_nodes(SPLIT, END, 4000)
    g, error_g = _fit_float32(np.vander(x - MID, DEGREE_G + 1, increasing=True),
                              np.array([float(mpmath.erfc(v) * mpmath.exp(v * v)) for v in x]),
                              1 / np.array([float(mpmath.erfc(v) * mpmath.exp(v * v))
                                            for v in x]) * 2.0**24)
    print(f"fit errors: P {error_p:.3f} ulps of erf, G {error_g:.3f} ulps of erfc")
    return p, g


def check() -> None:
    import numba

    from chokepoint.kernels import vecmath

    @numba.njit(parallel=True)
    def apply(x, out):
        for i in numba.prange(x.shape[0]):
            out[i] = vecmath.erf(x[i])

    erf = np.vectorize(math.erf, otypes=[np.float64])
    top = int(np.float32(4.5).view(np.int32))
    worst = 0
    for start in range(0, top, 5_000_000):
        x = np.arange(start, min(start + 5_000_000, top), dtype=np.int32).view(np.float32)
        out = np.empty_like(x)
        apply(x, out)
        ref = erf(x.astype(np.float64)).astype(np.float32)
        worst = max(worst, int(np.abs(out.view(np.int32).astype(np.int64)
                                      - ref.view(np.int32).astype(np.int64)).max()))
    print(f"every float32 in [0, 4.5): at most {worst} ulp from math.erf rounded to float32")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare over every float32")
    args = parser.parse_args()
    p, g = fit()
    for name, c in (("_ERF32_P", p), ("_ERF32_G", g)):
        print(f"{name} = ({', '.join(str(np.float32(v)) for v in c)})")
    if args.check:
        check()


if __name__ == "__main__":
    main()
