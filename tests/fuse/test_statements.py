"""A decorated function with loops, branches or shapes: run as Python, each array statement
fused (``fuse/statements.py``); its values are NumPy's as written."""

import numpy as np
import pytest

import chokepoint
from chokepoint.fuse.statements import needs_statements
from chokepoint.fuse.trace import FuseError


def heat(u, steps, alpha=0.1):
    n = u.shape[0]
    for _ in range(steps):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                                 + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    if n > 2:
        u *= 0.5
    total = 0.0
    total += 1  # a scalar: Python's
    return u * total


def updates(x, idx, steps):
    y = x  # an alias sees every in-place update, as with NumPy's operators
    for k in range(steps):
        x += 1.0
        x[idx] = x[idx] * 2  # a fancy index: NumPy's assignment
        x[0:2] += np.sin(x[2:4])  # in place into a slice, reading another
        x[k] = -x[k]  # an element
    z = np.zeros(len(x))  # not an expression fuse takes: Python's
    z[:] = 3
    while steps > 0:
        steps -= 1
        z = z - np.exp(-x)
    return x + y + z


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_stencil_loop_gives_numpys_values_and_fuses_its_steps(dtype):
    fused = chokepoint.fuse(heat)
    u = np.random.default_rng(0).random((60, 50)).astype(dtype)
    expected, got = heat(u.copy(), 4), fused(u.copy(), 4)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)  # the same arithmetic, in the same order
    ran = {s.code: s.python is None for s in fused._statements.statements}
    assert ran["u_0 + alpha * (u_1 + u_2 + u_3 + u_4 - 4 * u_0)"]  # the step: fused
    assert not ran["total + 1"]  # a scalar: Python's


def test_in_place_updates_fancy_indices_elements_and_aliases_as_numpy():
    fused = chokepoint.fuse(updates)
    x = np.linspace(0, 1, 10)
    idx = np.array([1, 3, 5])
    expected, got = updates(x.copy(), idx, 3), fused(x.copy(), idx, 3)
    np.testing.assert_allclose(got, expected, rtol=4e-16, atol=0)  # exp/sin: within an ulp


def test_an_in_place_operator_that_cannot_cast_raises_and_leaves_the_array():
    def add(x):
        for _ in range(1):
            x += 1.5
        return x

    fused = chokepoint.fuse(add)
    x = np.arange(5)
    with pytest.raises(TypeError):
        add(x.copy())  # NumPy: same_kind casting
    with pytest.raises(TypeError, match="same_kind"):
        fused(x)
    np.testing.assert_array_equal(x, np.arange(5))


def test_out_receives_the_result_and_dask_and_plans_are_refused():
    fused = chokepoint.fuse(heat)
    u = np.random.default_rng(1).random((20, 20))
    out = np.empty_like(u)
    assert fused(u.copy(), 2, out=out) is out
    np.testing.assert_array_equal(out, heat(u.copy(), 2))
    with pytest.raises(FuseError, match="statement by statement"):
        fused.plan({"u": u.dtype, "steps": int})


def test_which_functions_run_statement_by_statement():
    def straight(a, b):
        return np.sin(a) * b + 1

    def shaped(a):
        return a * a.shape[0]

    assert not needs_statements(straight)  # traced whole, one kernel
    assert needs_statements(heat) and needs_statements(updates) and needs_statements(shaped)
    a = np.arange(6.0)
    np.testing.assert_array_equal(chokepoint.fuse(shaped)(a), a * 6)


def test_a_closure_with_loops_is_refused_with_its_names():
    scale = 2.0

    def scaled(a):
        for _ in range(2):
            a = a * scale
        return a

    with pytest.raises(FuseError, match="scale"):
        chokepoint.fuse(scaled)
