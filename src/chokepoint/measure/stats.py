"""Statistics of timing repeats: a bootstrap interval for the ratio of two medians, and how
many repeats a noisy measurement would need.

The ratio of a candidate to the reference is the ratio of their median seconds per call. Its
95% interval is a percentile bootstrap: each candidate's repeats are resampled with
replacement (independently of the other's), the ratio of the resampled medians is taken, and
the 2.5% and 97.5% quantiles of many such ratios are the interval. With few repeats (5 is the
race's default) the bootstrap distribution of a median is coarse and the interval is on the
narrow side of honest; it is still what says whether a 1.05x difference is there at all.

Randomness comes from a local ``np.random.default_rng(seed)`` with a fixed seed: the same
repeats always give the same interval, and the global NumPy RNG (the user's) is untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["NOISY_IQR", "RANKABLE", "SAME_WITHIN", "bootstrap_ratio", "indistinguishable",
           "ranking", "repeats_needed", "repeats_to_rank"]

#: a measurement whose IQR is more than this fraction of its median is called noisy (the
#: threshold torch.utils.benchmark warns at)
NOISY_IQR = 0.10

#: a ratio interval reaching within this fraction of 1 is "indistinguishable": the repeats'
#: bootstrap sees only repeat-to-repeat noise, and where identical code's arrays lie in memory
#: moves it by more. Identical ``X.copy()`` candidates (1e5 float64, each set up in fresh worker
#: processes) measured 1.006-1.012x with intervals as narrow as [1.001, 1.013], race after race
SAME_WITHIN = 0.02

#: an interval reaching the 1 +- 2% band is "indistinguishable" only when it also lies within
#: 1 +- 10%; wider, the repeats are too noisy to rank the two (a 3x ratio with the interval
#: [0.35, 4.85] says nothing either way)
RANKABLE = 0.10

#: the precision :func:`repeats_needed` aims at: the median known within +-5% (95%)
TARGET_PRECISION = 0.05


def bootstrap_ratio(times: Sequence[float], reference: Sequence[float], *,
                    confidence: float = 0.95, resamples: int = 4000,
                    seed: int = 0) -> tuple[float, float, float]:
    """``median(times) / median(reference)`` and its bootstrap interval.

    Parameters
    ----------
    times, reference : sequence of float
        Seconds per call of each repeat, of the candidate and of the reference.
    confidence : float
        Coverage of the interval (0.95: the 2.5% and 97.5% quantiles).
    resamples : int
        Bootstrap resamples.
    seed : int
        Seed of the local generator.

    Returns
    -------
    (ratio, low, high) : tuple of float
    """
    a = np.asarray(times, dtype=float)
    b = np.asarray(reference, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("bootstrap_ratio needs at least one repeat of each")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    rng = np.random.default_rng(seed)
    med_a = np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
    med_b = np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(med_a / med_b, [tail, 1 - tail])
    return float(np.median(a) / np.median(b)), float(low), float(high)


def indistinguishable(ci: Sequence[float] | None, within: float = SAME_WITHIN) -> bool:
    """Whether an interval ``[low, high]`` of a ratio reaches the band ``1 +- within``
    (:data:`SAME_WITHIN`, 2%): it contains 1, or misses it by less than placement in memory
    moves identical code."""
    return ci is not None and ci[0] <= 1.0 + within and ci[1] >= 1.0 / (1.0 + within)


def repeats_needed(median: float, iqr: float, *,
                   precision: float = TARGET_PRECISION) -> int:
    """Repeats that would pin ``median`` within ``+-precision`` of itself at 95%, for a
    measurement whose repeats spread by ``iqr``.

    Why the formula: for n repeats from a distribution with density f at its median, the
    sample median's standard error is 1 / (2 f(m) sqrt(n)) (its asymptotic normality); for a
    normal distribution f(m) = 1 / (sigma sqrt(2 pi)), so SE = sqrt(pi / 2) sigma / sqrt(n) =
    1.2533 sigma / sqrt(n). The IQR of a normal distribution is 1.349 sigma, so sigma is
    estimated robustly as IQR / 1.349, and SE = 0.929 IQR / sqrt(n). A 95% half-width of
    1.96 SE at most ``precision * median`` needs n >= (1.96 * 0.929 * IQR / (precision *
    median))**2, about (36.4 * IQR / median)**2 at 5%: 14 repeats at an IQR of 10% of the
    median, 54 at 20%. Timing distributions are skewed to the right, so this is a lower
    bound rather than a promise.
    """
    if not median > 0 or not iqr >= 0:
        return 1
    se_per_sqrt_n = math.sqrt(math.pi / 2) * iqr / 1.349
    return max(1, math.ceil((1.96 * se_per_sqrt_n / (precision * median)) ** 2))


def ranking(ci: Sequence[float]) -> str:
    """What an interval ``[low, high]`` of a ratio says: ``"faster"`` or ``"slower"`` when it
    misses the band ``1 +- SAME_WITHIN``, ``"indistinguishable"`` when it reaches that band
    and lies within ``1 +- RANKABLE``, else ``"too noisy"``."""
    if not indistinguishable(ci):
        return "faster" if ci[1] < 1.0 else "slower"
    if ci[0] >= 1.0 / (1.0 + RANKABLE) and ci[1] <= 1.0 + RANKABLE:
        return "indistinguishable"
    return "too noisy"


def repeats_to_rank(ratio: float, ci: Sequence[float], runs: int) -> int:
    """About how many repeats would narrow a too noisy interval enough to rank: to exclude 1
    if the ratio holds, or to within ``1 +- RANKABLE`` if it is near 1.

    The interval's half-width (in log ratio) shrinks as ``1 / sqrt(repeats)``: ``runs *
    (half / target) ** 2`` repeats bring it to ``target``, ``|log ratio|`` or
    ``log(1 + RANKABLE)``, whichever is larger. At least one more than ``runs``.
    """
    low, high = (max(float(x), 1e-300) for x in ci)
    half = (math.log(high) - math.log(low)) / 2
    target = max(abs(math.log(max(ratio, 1e-300))), math.log1p(RANKABLE))
    return max(runs + 1, math.ceil(max(runs, 1) * (half / target) ** 2))
