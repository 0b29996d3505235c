"""Recognise pairwise squared (or plain) Euclidean distances by their values, and propose the
matrix-product form.

``((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)`` (k-means, nearest neighbours, RBF
kernels) makes an ``n x k x d`` intermediate twice and reduces it over a short axis: NumPy's
inner loops run ``d`` elements at a time. Expanded, ``|x - c|^2 = |x|^2 - 2 x.c + |c|^2``, the
middle term for all pairs is one matrix product (BLAS, at the machine's compute rate) and the
rest are ``n x k`` elementwise work. As the kernels are (:mod:`.rewrite`), the form is
recognised by value, not by syntax: any two 2-D float inputs of the statement whose rows match
the result's rows and columns are tried, in both orders, squared and under a square root
(``np.linalg.norm(X[:, None] - C, axis=-1)``).

The expanded form rounds differently: its error is a few ulp of ``|x|^2 + |c|^2``, not of the
distance, so the distances between nearby points far from the origin (coordinates in metres,
timestamps) lose their digits, and a distance that should be 0 is not (a square root makes
that error about the square root of an ulp). A candidate is accepted only when it is within
:data:`TOLERANCE_ULP` ulp of the largest of the statement's own values everywhere (the rule the
fused rewrites keep, with room for ``d`` products), and the rewrite says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .rewrite import max_ulp

__all__ = ["TOLERANCE_ULP", "Distances", "find_distances"]

#: the expanded form may differ from the statement's values by this many ulp of their largest
#: magnitude, per coordinate plus two (the rounding of the sums and the product)
TOLERANCE_ULP = 8
#: rows of the result compared first, before the whole result is computed
_LOOK_ROWS = 64


@dataclass
class Distances:
    """The matrix-product form of a statement's pairwise distances.

    Attributes
    ----------
    statement : str
        The rewrite, as code (``np`` must be imported).
    call : callable
        Computes it on the user's inputs.
    error : float
        Its largest difference from the statement's values, in ulp of their largest magnitude
        (see :func:`chokepoint.explain.rewrite.max_ulp`).
    root : bool
        Whether the statement's values are distances (a square root), not squared distances.
    """

    statement: str
    call: Callable[[], np.ndarray]
    error: float
    root: bool

    @property
    def values(self) -> str:
        """How its values compare with the statement's, as the reports say it."""
        return (f"values within {self.error:.2g} ulp of the largest (a pair of nearby points "
                "keeps that absolute error, not its own digits)")


def _code(a: str, b: str, root: bool) -> str:
    b_norms = f"({a} * {a}).sum(axis=1)" if a == b else f"({b} * {b}).sum(axis=1)"
    squared = (f"np.maximum(({a} * {a}).sum(axis=1)[:, None] - 2 * ({a} @ {b}.T) + {b_norms}, "
               "0)")
    return f"np.sqrt({squared})" if root else squared


def _squared(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``|x_i - c_j|^2`` for all pairs, as :func:`_code` writes it."""
    return np.maximum((x * x).sum(axis=1)[:, None] - 2 * (x @ c.T) + (c * c).sum(axis=1), 0)


def _matches(x, c, theirs, root: bool, tolerance: float) -> float | None:
    """The error of the expanded form against ``theirs`` in ulp of its largest magnitude
    (:func:`~chokepoint.explain.rewrite.max_ulp`), or None where it is over ``tolerance``."""
    with np.errstate(all="ignore"):
        ours = _squared(x, c)
        if root:
            ours = np.sqrt(ours)
    if not np.all(np.isfinite(theirs)):
        return None
    error = max_ulp(ours.astype(theirs.dtype, copy=False), theirs)
    return error if error <= tolerance else None


def find_distances(inputs: dict[str, np.ndarray], result) -> Distances | None:
    """The matrix-product form of ``result`` when it holds the pairwise (squared) distances
    between the rows of two of ``inputs`` (or of one with itself), else None.

    Parameters
    ----------
    inputs : dict of str to ndarray
        The statement's arrays by name; the rewrite's code uses these names.
    result : ndarray
        The statement's value on them.
    """
    if (not isinstance(result, np.ndarray) or result.ndim != 2 or result.dtype.kind != "f"
            or result.size == 0):
        return None
    n, k = result.shape
    points = {name: a for name, a in inputs.items()
              if isinstance(a, np.ndarray) and a.ndim == 2 and a.dtype == result.dtype
              and a.shape[1] > 0}
    for (a, x), (b, c) in itertools.product(points.items(), repeat=2):
        if x.shape[0] != n or c.shape[0] != k or x.shape[1] != c.shape[1]:
            continue
        bound = TOLERANCE_ULP * (x.shape[1] + 2)
        for root in (False, True):
            # a look at the first rows, then the whole result
            # (its ulp are of its own largest value, smaller than the whole's: room for that)
            if _matches(x[:_LOOK_ROWS], c, result[:_LOOK_ROWS], root, 16 * bound) is None:
                continue
            error = _matches(x, c, result, root, bound)
            if error is None:
                continue

            def call(x=x, c=c, root=root) -> np.ndarray:
                squared = _squared(x, c)
                return np.sqrt(squared) if root else squared

            return Distances(statement=_code(a, b, root), call=call, error=error, root=root)
    return None
