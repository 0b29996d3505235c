"""The ratio's bootstrap interval and the repeats a noisy measurement needs, on made-up
repeats."""

import numpy as np
import pytest

from chokepoint.measure.stats import (
    bootstrap_ratio,
    indistinguishable,
    ranking,
    repeats_needed,
    repeats_to_rank,
)


def test_identical_repeats_give_ratio_one_inside_the_interval():
    times = [1.0e-3, 1.1e-3, 0.9e-3, 1.05e-3, 0.95e-3]
    ratio, low, high = bootstrap_ratio(times, times)
    assert ratio == 1.0 and low < 1.0 < high
    assert indistinguishable([low, high])


def test_a_real_difference_gives_an_interval_far_from_one():
    rng = np.random.default_rng(7)
    ref = 1e-3 * (1 + 0.05 * rng.standard_normal(9))
    fast = 0.4e-3 * (1 + 0.05 * rng.standard_normal(9))
    ratio, low, high = bootstrap_ratio(fast, ref)
    assert ratio == pytest.approx(np.median(fast) / np.median(ref))
    assert 0.3 < low <= ratio <= high < 0.5
    assert not indistinguishable([low, high])


def test_interval_is_the_bootstraps_percentiles():
    # two repeats each: every resampled median is one of 1, 1.5, 2 (candidate) over
    # one of 1, 1.5, 2 (reference); the 2.5% and 97.5% quantiles are the extremes, 0.5 and 2
    ratio, low, high = bootstrap_ratio([1.0, 2.0], [1.0, 2.0], resamples=20000)
    assert ratio == 1.0
    assert low == pytest.approx(0.5) and high == pytest.approx(2.0)


def test_seeded_locally_and_the_global_rng_is_untouched():
    np.random.seed(123)  # noqa: NPY002 (the legacy global RNG is what must stay untouched)
    state = np.random.get_state()[1].copy()  # noqa: NPY002
    a, b = [1.0, 1.2, 0.9, 1.4], [1.1, 1.0, 1.3, 1.2]
    assert bootstrap_ratio(a, b) == bootstrap_ratio(a, b)
    assert np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    assert bootstrap_ratio(a, b, seed=1) != bootstrap_ratio(a, b, seed=2)


def test_bad_arguments():
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_ratio([], [1.0])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ratio([1.0], [1.0], confidence=95)


def test_repeats_needed_follows_the_median_standard_error():
    # (1.96 * sqrt(pi / 2) / 1.349 * IQR / median / 0.05) ** 2
    assert repeats_needed(1.0, 0.10) == 14
    assert repeats_needed(1.0, 0.20) == 54
    assert repeats_needed(2e-3, 0.4e-3) == 54  # only the ratio matters
    assert repeats_needed(1.0, 0.0) == 1
    assert repeats_needed(0.0, 0.1) == 1
    assert repeats_needed(1.0, 0.10, precision=0.01) == 332


def test_indistinguishable_is_an_interval_reaching_the_two_percent_band():
    assert indistinguishable([1.001, 1.019])  # identical code, placed elsewhere in memory
    assert indistinguishable([0.97, 0.981])
    assert not indistinguishable([1.021, 1.05])
    assert not indistinguishable([0.95, 0.98])  # 0.98 < 1 / 1.02
    assert not indistinguishable(None)
    assert indistinguishable([1.04, 1.06], within=0.05)



def test_ranking_tells_a_wide_interval_from_an_indistinguishable_one():
    assert ranking([0.97, 1.05]) == "indistinguishable"
    assert ranking([0.35, 4.85]) == "too noisy"  # 3.1x, yet the interval includes 1
    assert ranking([0.95, 1.4]) == "too noisy"  # a 30% gap the repeats cannot confirm
    assert ranking([1.1, 1.3]) == "slower" and ranking([0.3, 0.4]) == "faster"


def test_repeats_to_rank_narrow_the_interval_as_one_over_sqrt_repeats():
    # half-width in log ratio 1.31 against log 3.1 = 1.13: (1.31 / 1.13)**2 * 5 = 6.7
    assert repeats_to_rank(3.1, [0.35, 4.85], 5) == 7
    # near 1: narrow it to within 10%: (log(1.3 / 0.8) / 2 / log(1.1))**2 * 5 = 32.7
    assert repeats_to_rank(1.02, [0.8, 1.3], 5) == 33
    assert repeats_to_rank(1.0, [0.99, 1.01], 5) == 6  # always more than it has
