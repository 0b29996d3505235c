"""Fit the float32 coefficients of ``chokepoint.kernels.vecmath.ndtr`` (``_NDTR32_*``).

``python tools/fit_ndtr32.py`` prints them, with the largest error of the fit.

The float32 ``ndtr`` is one piece over the whole range:
``erfc(a / sqrt(2)) = exp(-a*a / 2) * R(s)``, ``a = |x|``, ``s = a / (a + q)`` in [0, 1),
``R(s) = 1 + s * P(s)`` with ``P`` of degree 5, for ``a`` up to 5.6 (past 5.5426, from where
``erf(a / sqrt(2))`` rounds to 1 in float32). GELU needs ``Phi(x) = (1 + erf(x / sqrt 2)) / 2``
to an absolute accuracy (it is rounded near 1 or differenced against 1, as in torch's formula),
so the error weight is ``exp(-a*a / 2)``: the fit minimises the absolute error of ``erfc``. The
variable ``s`` is exact where it matters (near 0, where ``t = 1 / (1 + a / q)`` would carry the
rounding of the sum into ``t - 1``); ``q`` is scanned over numbers exact in float32 (so that
``a + q`` is the kernel's only rounding before the division) for the smallest error. float32
needs about 5e-9 (a tenth of an ulp of 1/2): degree 5 reaches 3.2e-9 at ``q = 5``, two terms
fewer than degree 7 (3e-11, ``--degree 7``), whose extra accuracy float32 cannot hold; degree 4
reaches only 3.9e-8.

Each fit is weighted least squares at Chebyshev nodes driven towards minimax by Lawson's
reweighting, with the coefficients rounded to float32 one at a time from the lowest on (each
rounding absorbed by refitting the rest). References: ``math.erfc`` and ``math.exp`` in float64,
whose errors (1e-16) are far below the fit's (3e-11 of erfc).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from fit_erf32 import _chebyshev_nodes, _fit_float32  # the same fitting, run from tools/

END = 5.6
DEGREE = 5


def fit(q: float, degree: int = DEGREE, n: int = 3000) -> tuple[np.ndarray, float]:
    """float32 coefficients of ``P`` for this ``q``, and the largest absolute error of erfc."""
    a = _chebyshev_nodes(0.0, END, n)
    s = a / (a + q)
    scaled = np.array([math.erfc(v / math.sqrt(2)) * math.exp(v * v / 2) for v in a])
    y, w = scaled - 1, np.exp(-a * a / 2)
    v = np.vander(s, degree + 2, increasing=True)[:, 1:]  # s, s**2, ...: R = 1 + s P(s)
    return _fit_float32(v, y, w)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--degree", type=int, default=DEGREE)
    args = parser.parse_args()
    candidates = np.arange(1.5, 7.01, 0.125)  # exact in float32
    q, (c, error) = min(((q, fit(q, args.degree)) for q in candidates), key=lambda r: r[1][1])
    print(f"_NDTR32_Q = np.float32({np.float32(q)!s})")
    print("_NDTR32_R =", tuple(str(np.float32(v)) for v in c))
    print(f"largest absolute error of erfc(a / sqrt 2) in the fit: {error:.3g}")


if __name__ == "__main__":
    main()
