"""explain's rewrites by value: every registered kernel's NumPy formulation is recognised."""

import math

import numpy as np
import pytest

from chokepoint.explain.rewrite import CLOSE_ULP, find_rewrite, lift_slices, literals, touched_bytes
from chokepoint.kernels.registry import KERNELS

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed

ERF = np.vectorize(math.erf, otypes=[np.float64])  # SciPy's erf, without SciPy


def _found(statement: str, dtype=np.float64, scale: float = 3.0):
    rng = np.random.default_rng(0)
    X = (rng.standard_normal(100_000) * scale).astype(dtype)
    G = rng.standard_normal(100_000).astype(dtype)
    ns = {"np": np, "X": X, "G": G, "erf": ERF}
    with np.errstate(all="ignore"):
        result = np.asarray(eval(statement, ns))
    names = {n for n in ("G", "X") if n in statement.replace("np.", "")}
    return find_rewrite(statement, ns, {n: ns[n] for n in sorted(names)}, result)


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k.formulation], ids=lambda k: k.name)
def test_each_kernels_numpy_formulation_gets_that_kernel(kernel):
    found = _found(kernel.formulation)
    assert found is not None, kernel.formulation
    assert found.statement.startswith(f"chokepoint.{kernel.name}("), found.statement
    assert found.ulp <= CLOSE_ULP


def test_every_kernel_but_the_mask_forward_has_a_formulation():
    assert {k.name for k in KERNELS if not k.formulation} == {"relu_with_mask"}


@pytest.mark.parametrize(("statement", "dtype", "call"), [
    ("np.clip(X, -2, 2)", np.float64, "chokepoint.hardtanh(X, min_val=-2, max_val=2)"),
    ("np.where(X > 0, X, 0.2 * X)", np.float32, "chokepoint.leaky_relu(X, negative_slope=0.2)"),
    ("np.where(X > 0, X, 1.5 * np.expm1(X))", np.float64, "chokepoint.elu(X, alpha=1.5)"),
    ("np.log1p(np.exp(2 * X)) / 2", np.float32, "chokepoint.softplus(X, beta=2)"),
    ("0.5 * X * (1 + np.tanh(np.sqrt(2 / np.pi) * (X + 0.044715 * X ** 3)))", np.float64,
     "chokepoint.gelu(X, approximate='tanh')"),
    ("np.clip(X, 0, 6)", np.float32, "chokepoint.relu6(X)"),  # before hardtanh(0, 6)
])
def test_the_numbers_a_statement_writes_are_tried_as_parameters(statement, dtype, call):
    found = _found(statement, dtype)
    assert found is not None and found.statement == call


def test_exact_kernels_say_same_values_and_transcendental_ones_say_their_ulp():
    assert _found("np.maximum(X, 0)").values == "same values"
    silu = _found("X / (1 + np.exp(-X))")
    assert 0 < silu.ulp <= CLOSE_ULP and silu.values.startswith("values within")


def test_a_gradient_times_a_mask_says_where_infinities_differ():
    # G * (X > 0) is NaN at G = inf and X <= 0 (inf * 0); torch's relu_backward gives 0
    found = _found("G * (X > 0)")
    assert found.statement == "chokepoint.relu_backward(G, X)"
    assert "infinite" in found.values and "infinite inputs" in found.note


@pytest.mark.parametrize("statement", ["X * 2 + 1", "np.maximum(X, 0.5)", "np.exp(X)",
                                       "np.where(X > 0, X, 0.3 * X) + 1"])
def test_other_code_gets_no_kernel(statement):
    assert _found(statement) is None


def test_literals_read_negative_numbers_and_skip_booleans():
    assert literals("np.clip(X, -2, 2.5) * True + X ** 3 - 2") == [-2, 2.5, 3, 2]


def test_slices_of_names_become_arguments_once_each():
    u, n = np.ones((5, 5)), 3
    ns = {"np": np, "u": u, "n": n, "u_0": 1.0}
    assert lift_slices("(u[2:, 1:-1] + u[:-2, 1:-1]) * u[2:, 1:-1]", ns) == (
        "(u_1 + u_2) * u_1", {"u_1": "u[2:, 1:-1]", "u_2": "u[:-2, 1:-1]"})
    assert lift_slices("np.sin(u[1:n - 1, 0])", ns) == ("np.sin(u_1)", {"u_1": "u[1:n - 1, 0]"})
    assert lift_slices("u + 1", ns) == ("u + 1", {})
    # an element of an array is a NumPy scalar: an argument too; a Python list's is not
    ns.update(w=np.arange(4.0), i=2, lst=[1.0, 2.0])
    assert lift_slices("u * w[i] + lst[0]", ns) == ("u * w_0 + lst[0]", {"w_0": "w[i]"})
    assert lift_slices("u[2:, 1:-1] + missing[1:]", ns) == (
        "u_1 + missing[1:]", {"u_1": "u[2:, 1:-1]"})  # not evaluable: left as written


def test_overlapping_views_count_their_memory_once():
    u = np.zeros((100, 50))
    shifted = [u[2:, 1:-1], u[:-2, 1:-1], u[1:-1, 2:], u[1:-1, :-2]]
    assert touched_bytes(shifted) == u.nbytes - 2 * 8  # all but the first and last element
    other = np.zeros(10)
    assert touched_bytes([u, other, u[:10], np.zeros(0)]) == u.nbytes + other.nbytes


@pytest.mark.parametrize("code, target, value", [
    ("img += 120 * np.exp(-d)", "img", "img + (120 * np.exp(-d))"),
    ("u[1:-1] -= dt * (u[2:] - u[:-2])", "u[1:-1]", "u[1:-1] - (dt * (u[2:] - u[:-2]))"),
    ("v[1:, k] = a * b", "v[1:, k]", "a * b"),
])
def test_an_assignment_into_a_slice_or_in_place_is_fused_into_its_target(code, target, value):
    from chokepoint.explain.rewrite import slice_assignment
    from chokepoint.measure.statements import Statement

    found = slice_assignment(Statement.parse(code))
    assert found is not None and found[0] == target and found[1].source == value


@pytest.mark.parametrize("code", ["x //= 2", "x[[1, 2]] += 1", "x = a * b", "obj.x += 1"])
def test_other_assignments_are_not_fused_into_a_target(code):
    from chokepoint.explain.rewrite import slice_assignment
    from chokepoint.measure.statements import Statement

    assert slice_assignment(Statement.parse(code)) is None


def test_a_fancy_index_in_place_is_no_target_for_a_fused_kernel():
    # x[idx] += ... with idx an array: x[idx] is a copy, writing into it would change nothing
    from chokepoint.explain.api import _target

    x, idx = np.zeros(10), np.array([1, 2])
    assert _target("x[idx]", {"x": x, "idx": idx}, np.zeros(2)) is None
    # on a later axis the copy has a base: still no target
    u, m = np.zeros((4, 6)), np.arange(6) % 2 == 0
    assert _target("u[:, m]", {"u": u, "m": m}, np.zeros((4, 3))) is None
    assert _target("u[:, idx]", {"u": u, "idx": idx}, np.zeros((4, 2))) is None
    assert _target("u[:, 1:4]", {"u": u}, np.zeros((4, 3))) is not None
    assert _target("x[1:3]", {"x": x}, np.zeros(2)) is not None
    assert _target("x", {"x": x}, np.zeros(10)) is None  # not a view: only x += ...
    assert _target("x", {"x": x}, np.zeros(10), in_place=True) is x
