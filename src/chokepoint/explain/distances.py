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
distance, so the distance between two nearby points far from the origin keeps only absolute
accuracy. A candidate is accepted when it is that close to the statement's values everywhere,
and the rewrite says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["TOLERANCE_EPS", "Distances", "find_distances"]

#: the expanded form may differ from the statement by this many machine epsilons (per
#: coordinate, plus two) of ``|x|^2 + |c|^2``: the rounding of the sums and the product
TOLERANCE_EPS = 8
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
        Its largest difference from the statement's squared distances, relative to
        ``|x|^2 + |c|^2`` of the same pair.
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
        return (f"values within {self.error:.1g} of |x|^2 + |c|^2 of each pair (the expanded "
                "form loses digits between nearby points far from the origin)")


def _code(a: str, b: str, root: bool) -> str:
    b_norms = f"({a} * {a}).sum(axis=1)" if a == b else f"({b} * {b}).sum(axis=1)"
    squared = (f"np.maximum(({a} * {a}).sum(axis=1)[:, None] - 2 * ({a} @ {b}.T) + {b_norms}, "
               "0)")
    return f"np.sqrt({squared})" if root else squared


def _squared(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``|x_i - c_j|^2`` for all pairs, as :func:`_code` writes it."""
    return np.maximum((x * x).sum(axis=1)[:, None] - 2 * (x @ c.T) + (c * c).sum(axis=1), 0)


def _error(x: np.ndarray, c: np.ndarray, ours: np.ndarray, theirs: np.ndarray) -> float:
    """Largest ``|ours - theirs|`` relative to ``|x|^2 + |c|^2`` of each pair (0 for zeros)."""
    scale = (x * x).sum(axis=1)[:, None] + (c * c).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(ours - theirs) / scale
    rel = np.where(scale > 0, rel, np.where(ours == theirs, 0.0, np.inf))
    return float(rel.max()) if rel.size else 0.0


def _matches(x, c, theirs, root: bool, tolerance: float) -> float | None:
    """The error of the expanded form against ``theirs`` (squared first when ``root``), or
    None where it is not within ``tolerance``."""
    with np.errstate(all="ignore"):
        ours = _squared(x, c)
        if root:
            theirs = theirs.astype(np.float64) ** 2
    if not np.all(np.isfinite(theirs)):
        return None
    error = _error(x, c, ours, theirs)
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
    tolerance = TOLERANCE_EPS * np.finfo(result.dtype).eps
    for (a, x), (b, c) in itertools.product(points.items(), repeat=2):
        if x.shape[0] != n or c.shape[0] != k or x.shape[1] != c.shape[1]:
            continue
        bound = tolerance * (x.shape[1] + 2)
        for root in (False, True):
            # a look at the first rows, then the whole result
            if _matches(x[:_LOOK_ROWS], c, result[:_LOOK_ROWS], root, bound) is None:
                continue
            error = _matches(x, c, result, root, bound)
            if error is None:
                continue

            def call(x=x, c=c, root=root) -> np.ndarray:
                squared = _squared(x, c)
                return np.sqrt(squared) if root else squared

            return Distances(statement=_code(a, b, root), call=call, error=error, root=root)
    return None
