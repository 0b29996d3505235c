"""A decorated function with loops, branches or shapes: run as Python, each array statement
fused (``fuse/statements.py``); its values are NumPy's as written."""

import numpy as np
import pytest

import chokepoint
from chokepoint.fuse.statements import needs_statements
from chokepoint.fuse.trace import FuseError

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed


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


def test_out_plans_and_dask_are_refused_with_the_reason():
    fused = chokepoint.fuse(heat)
    u = np.random.default_rng(1).random((20, 20))
    np.testing.assert_array_equal(fused(u.copy(), 2), heat(u.copy(), 2))
    with pytest.raises(TypeError, match="statement by statement"):
        fused(u.copy(), 2, out=np.empty_like(u))  # its result's shape is known only after
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


def test_a_closure_that_traces_whole_still_does_and_one_that_does_not_says_why():
    scale = 2.0

    def scaled(a):  # a loop over constants: traced whole, into one kernel, as before
        for _ in range(2):
            a = a * scale
        return a

    def shaped(a):
        return a * scale * a.shape[0]

    a = np.ones(3)
    np.testing.assert_array_equal(chokepoint.fuse(scaled)(a), a * 4)
    with pytest.raises(FuseError, match="enclosing function"):
        chokepoint.fuse(shaped)(a)


def builtin_named(x, steps):
    max = 2.0  # a local named like a builtin: Python's statement, not fuse's builtin
    for _ in range(steps):
        x = x / max
    return x


def numpy_argument(x, np):
    for _ in range(1):
        y = np.sin(x)  # not NumPy's sin: every statement stays Python
    return y


def lists_and_tuples(a, b):
    s, t = a.shape, b.shape
    for _ in range(1):
        u = s + t  # tuples: concatenated, as Python does
        acc = [1, 2]
        alias = acc
        acc += [3]  # a list extended in place
    return u, alias


def container_items(d, y, x, k):
    a = d["a"]
    for _ in range(1):
        d["a"] += y  # the array in the dict, in place: its other references see it
        x[k] += 1.5  # an element of an int array: NumPy's unsafe assignment
    return a, x


def guarded(u, k):
    n = u.shape[0]
    v = u[k + 1] if k + 1 < n else u[k]  # only the branch taken is evaluated
    return v * 2


def test_python_semantics_the_rewrite_keeps():
    x = np.arange(4.0)
    np.testing.assert_array_equal(chokepoint.fuse(builtin_named)(x, 2), x / 4)

    class Stub:
        @staticmethod
        def sin(v):
            return v + 100

    np.testing.assert_array_equal(chokepoint.fuse(numpy_argument)(x, Stub), x + 100)
    u, alias = chokepoint.fuse(lists_and_tuples)(np.ones((2, 3)), np.ones((4, 5)))
    assert u == (2, 3, 4, 5) and alias == [1, 2, 3]
    d = {"a": np.zeros(3)}
    a, xi = chokepoint.fuse(container_items)(d, np.ones(3), np.arange(3), 0)
    np.testing.assert_array_equal(a, np.ones(3))
    np.testing.assert_array_equal(xi, [1, 1, 2])
    np.testing.assert_array_equal(chokepoint.fuse(guarded)(np.arange(4.0), 3), 6.0)


def broadcast_into(x, y):
    for _ in range(1):
        x += y  # y's shape (1, 3) does not fit into x's (3,): NumPy raises
    return x


def test_an_in_place_operator_does_not_broadcast_its_target():
    with pytest.raises(ValueError):
        broadcast_into(np.zeros(3), np.ones((1, 3)))
    x = np.zeros(3)
    with pytest.raises(ValueError, match="non-broadcastable"):
        chokepoint.fuse(broadcast_into)(x, np.ones((1, 3)))
    np.testing.assert_array_equal(x, np.zeros(3))


def traceback_line(u, k):
    for _ in range(1):
        v = u[k] * 2  # an IndexError here: this line in the traceback
    return v


def test_an_error_names_the_statements_own_line():
    import traceback

    with pytest.raises(IndexError) as info:
        chokepoint.fuse(traceback_line)(np.arange(3.0), 10)
    frames = traceback.extract_tb(info.value.__traceback__)
    line = traceback_line.__code__.co_firstlineno + 2
    assert any(f.filename == __file__ and f.lineno == line for f in frames), frames


def adds_in_place(x, y):
    x += y  # straight-line, but traced whole this would leave the caller's x as it was
    return x * 2


def test_an_update_in_place_writes_the_callers_array_as_numpy():
    from chokepoint.fuse.statements import writes_in_place

    x = np.zeros(3)
    np.testing.assert_array_equal(chokepoint.fuse(adds_in_place)(x, np.ones(3)), [2, 2, 2])
    np.testing.assert_array_equal(x, np.ones(3))
    assert writes_in_place(adds_in_place) and not writes_in_place(heat.__wrapped__
                                                                  if hasattr(heat, "__wrapped__")
                                                                  else builtin_named)
