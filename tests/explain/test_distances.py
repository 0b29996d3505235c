"""Pairwise distances recognised by value (:mod:`chokepoint.explain.distances`): no timing."""

import numpy as np
import pytest

from chokepoint.explain.distances import find_distances


@pytest.fixture
def points():
    rng = np.random.default_rng(0)
    return rng.normal(size=(500, 7)), rng.normal(size=(13, 7))


def _squared(x, c):
    return ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)


def test_squared_distances_are_recognised_with_the_users_names(points):
    x, c = points
    found = find_distances({"X": x, "C": c}, _squared(x, c))
    assert found is not None and not found.root
    assert found.statement == ("np.maximum((X * X).sum(axis=1)[:, None] - 2 * (X @ C.T) "
                               "+ (C * C).sum(axis=1), 0)")
    np.testing.assert_allclose(found.call(), _squared(x, c), atol=1e-12)
    assert found.error <= 8 * (7 + 2)  # ulp of the largest distance
    assert "values within" in found.values


def test_a_norm_along_the_last_axis_is_recognised_under_a_square_root(points):
    x, c = points
    result = np.linalg.norm(x[:, None] - c, axis=-1)
    found = find_distances({"c": c, "x": x}, result)
    assert found is not None and found.root
    assert found.statement.startswith("np.sqrt(np.maximum((x * x)")
    assert "(x @ c.T)" in found.statement
    np.testing.assert_allclose(found.call(), result, atol=1e-7)


def test_the_order_of_the_result_picks_which_points_are_rows(points):
    x, c = points
    found = find_distances({"X": x, "C": c}, _squared(c, x))  # (13, 500): centres first
    assert found is not None and "(C @ X.T)" in found.statement


def test_distances_of_a_set_with_itself(points):
    x, _ = points
    found = find_distances({"P": x}, _squared(x, x))
    assert found is not None and "(P @ P.T)" in found.statement
    assert (found.call() >= 0).all()  # rounding below zero is clipped


def test_float32_is_recognised_within_its_own_precision(points):
    x, c = (a.astype(np.float32) for a in points)
    found = find_distances({"X": x, "C": c}, _squared(x, c))
    assert found is not None and found.call().dtype == np.float32


@pytest.mark.parametrize("other", [
    lambda x, c: np.abs(x[:, None, :] - c[None, :, :]).sum(axis=2),  # city-block
    lambda x, c: ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2) + 1e-3,  # shifted
    lambda x, c: x @ c.T,  # a product, not a distance
])
def test_other_values_are_not_distances(points, other):
    x, c = points
    assert find_distances({"X": x, "C": c}, other(x, c)) is None


def test_shapes_that_cannot_be_pairwise_distances(points):
    x, c = points
    assert find_distances({"X": x, "C": c}, _squared(x, c)[:, :5]) is None
    assert find_distances({"X": x}, _squared(x, c)) is None
    assert find_distances({"X": x, "C": c}, np.float64(1.0)) is None
    assert find_distances({"X": x.astype(np.float32), "C": c}, _squared(x, c)) is None


@pytest.mark.parametrize("root", [False, True])
def test_nearby_points_far_from_the_origin_are_not_rewritten(root):
    # |x|^2 - 2 x.c + |c|^2 cancels: squared distances of a few units from points 5e6 away
    # come out wrong by their own size (a review measured 209% off under a square root)
    rng = np.random.default_rng(0)
    x, c = 5e6 + rng.uniform(0, 10, (2000, 2)), 5e6 + rng.uniform(0, 10, (12, 2))
    result = _squared(x, c)
    assert find_distances({"X": x, "C": c}, np.sqrt(result) if root else result) is None


def test_distances_of_a_set_with_itself_under_a_square_root_are_not_rewritten(points):
    # a distance that is 0 comes out as the square root of a rounding error
    x, _ = points
    assert find_distances({"P": x}, np.sqrt(_squared(x, x))) is None


def test_nan_in_the_result_is_not_matched(points):
    x, c = points
    result = _squared(x, c)
    result[3, 4] = np.nan
    assert find_distances({"X": x, "C": c}, result) is None
