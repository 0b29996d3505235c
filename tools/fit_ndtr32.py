"""Fit the float32 coefficients of ``chokepoint.kernels.vecmath.ndtr`` (``_NDTR32_*``).

``python tools/fit_ndtr32.py`` prints them, with the largest error of the fit.

The float32 ``ndtr`` is one piece over the whole range:
``erfc(a / sqrt(2)) = exp(-a*a / 2) * R(s)``, ``a = |x|``, ``s = p a / (1 + p a)`` in [0, 1),
``R(s) = 1 + s * P(s)`` with ``P`` of degree 7, for ``a`` up to 5.6 (past 5.5426, from where
``erf(a / sqrt(2))`` rounds to 1 in float32). GELU needs ``Phi(x) = (1 + erf(x / sqrt 2)) / 2``
to an absolute accuracy (it is rounded near 1 or differenced against 1, as in torch's formula),
so the error weight is ``exp(-a*a / 2)``: the fit minimises the absolute error of ``erfc``. The
variable ``s`` is exact where it matters (near 0, where ``t = 1 / (1 + p a)`` would carry the
rounding of ``1 + p a`` into ``t - 1``); ``p`` is scanned for the smallest error (degree 6 needs
large alternating coefficients, degree 7 at ``p = 0.34`` has ``sum |c| = 5.4``).

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
DEGREE = 7


def fit(p: float, degree: int = DEGREE, n: int = 3000) -> tuple[np.ndarray, float]:
    """float32 coefficients of ``P`` for this ``p``, and the largest absolute error of erfc."""
    a = _chebyshev_nodes(0.0, END, n)
    s = p * a / (1 + p * a)
    scaled = np.array([math.erfc(v / math.sqrt(2)) * math.exp(v * v / 2) for v in a])
    y, w = scaled - 1, np.exp(-a * a / 2)
    v = np.vander(s, degree + 2, increasing=True)[:, 1:]  # s, s**2, ...: R = 1 + s P(s)
    return _fit_float32(v, y, w)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--degree", type=int, default=DEGREE)
    args = parser.parse_args()
    candidates = [float(np.float32(p)) for p in np.linspace(0.15, 0.6, 46)]
    p, (c, error) = min(((p, fit(p, args.degree)) for p in candidates), key=lambda r: r[1][1])
    print(f"_NDTR32_P = np.float32({np.float32(p)!s})")
    print("_NDTR32_R =", tuple(str(np.float32(v)) for v in c))
    print(f"largest absolute error of erfc(a / sqrt 2) in the fit: {error:.3g}")


if __name__ == "__main__":
    main()
