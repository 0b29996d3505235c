"""Every row of the docs/interfaces.md conventions table, and bit-for-bit agreement with PyTorch
CPU."""

import numpy as np
import pytest

import chokepoint

from . import reference as ref

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed

S = 0.01
# x: relu, relu', leaky' (slope S), relu6', hardtanh' on (-1, 1) — docs/interfaces.md, checked
# on torch 2.13
TABLE = [
    (np.nan, np.nan, 1, S, 0, 0),
    (-0.0, -0.0, 0, S, 0, 1),
    (0.0, 0.0, 0, S, 0, 1),
    (1e-320, 1e-320, 1, 1, 1, 1),
    (-1.0, 0.0, 0, S, 0, 0),
    (1.0, 1.0, 1, 1, 1, 0),
    (6.0, 6.0, 1, 1, 0, 0),
    (np.inf, np.inf, 1, 1, 0, 0),
    (-np.inf, 0.0, 0, S, 0, 0),
]


@pytest.mark.parametrize(("x", "relu", "relu_d", "leaky_d", "relu6_d", "hardtanh_d"), TABLE)
def test_design_table_row(x, relu, relu_d, leaky_d, relu6_d, hardtanh_d):
    xs = np.array([x])
    one = np.ones(1)
    assert ref.same(chokepoint.relu(xs), np.array([relu]))
    assert chokepoint.relu_grad(xs)[0] == relu_d
    assert chokepoint.relu_backward(one, xs)[0] == relu_d
    assert chokepoint.relu_backward(one, chokepoint.relu_with_mask(xs)[1])[0] == relu_d
    assert chokepoint.leaky_relu_backward(one, xs, S)[0] == leaky_d
    assert chokepoint.relu6_backward(one, xs)[0] == relu6_d
    assert chokepoint.hardtanh_backward(one, xs)[0] == hardtanh_d


def test_at_zero_one_is_the_greater_equal_convention():
    xs = np.array([-0.0, 0.0, -1e-320, 1e-320, -1.0, 2.0])
    assert chokepoint.relu_grad(xs, at_zero=1).tolist() == [1, 1, 0, 1, 0, 1]
    assert chokepoint.relu_grad(np.array([np.nan]), at_zero=1)[0] == 1  # documented NaN rule


def test_backward_is_a_select_not_a_product():
    g = np.array([np.nan, np.inf, -np.inf, np.nan])
    x = np.array([-1.0, 0.0, -2.0, 3.0])
    assert ref.same(chokepoint.relu_backward(g, x), np.array([0.0, 0.0, 0.0, np.nan]))


torch = pytest.importorskip("torch", reason="torch is the semantic oracle; pip install torch")
F = torch.nn.functional


def _oracle_inputs(dtype):
    rng = np.random.default_rng(0)
    random = (rng.standard_normal(4000) * 4).astype(dtype)
    specials = ref.specials(dtype)
    # specials inside the vectorised body and again in the scalar tail
    return np.concatenate([specials, random, specials[:7]])


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


@pytest.mark.parametrize("dtype", ref.FLOATS)
def test_forward_is_bit_identical_to_torch(dtype):
    x = _oracle_inputs(dtype)
    tx = _t(x)
    pairs = [
        (chokepoint.relu(x), torch.relu(tx)),
        (chokepoint.leaky_relu(x, 0.1), F.leaky_relu(tx, 0.1)),
        (chokepoint.hardtanh(x, -0.3, 2.5), F.hardtanh(tx, -0.3, 2.5)),
        (chokepoint.relu6(x), F.relu6(tx)),
        (chokepoint.relu_with_mask(x)[0], torch.relu(tx)),
    ]
    for ours, theirs in pairs:
        assert ref.same(ours, theirs.numpy())


@pytest.mark.parametrize("dtype", ref.FLOATS)
def test_backward_matches_torch_for_every_non_nan_input(dtype):
    x = _oracle_inputs(dtype)
    g = np.random.default_rng(1).standard_normal(x.size).astype(dtype)
    tx, tg = _t(x), _t(g)
    aten = torch.ops.aten
    pairs = [
        (chokepoint.relu_backward(g, x), aten.threshold_backward(tg, tx, 0)),
        (chokepoint.relu_backward(g, chokepoint.relu_with_mask(x)[1]),
         aten.threshold_backward(tg, tx, 0)),
        (chokepoint.leaky_relu_backward(g, x, 0.1), aten.leaky_relu_backward(tg, tx, 0.1, False)),
        (chokepoint.hardtanh_backward(g, x, -0.3, 2.5), aten.hardtanh_backward(tg, tx, -0.3, 2.5)),
        (chokepoint.relu6_backward(g, x), aten.hardtanh_backward(tg, tx, 0.0, 6.0)),
    ]
    numbers = ~np.isnan(x)
    for ours, theirs in pairs:
        assert ref.same(ours[numbers], theirs.numpy()[numbers])


def test_relu_grad_matches_torch_autograd():
    x = _oracle_inputs(np.float64)
    x = x[~np.isnan(x)]
    tx = _t(x).requires_grad_()
    torch.relu(tx).sum().backward()
    assert ref.same(chokepoint.relu_grad(x, dtype=np.float64), tx.grad.numpy())
