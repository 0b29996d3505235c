"""The tracer records operations; the model counts their bytes."""

import numpy as np
import pytest

from chokepoint.explain.model import build_model, narrowest_dtype
from chokepoint.explain.trace import trace


def _trace(statement, **arrays):
    return trace(statement, {"np": np, **arrays}, list(arrays))


def test_chain_of_ufuncs_is_recorded_with_bytes():
    X = np.ones((100, 10))
    tr = _trace("np.ceil(np.clip(X, 0, 1))", X=X)
    assert [op.text for op in tr.ops] == ["t1 = np.clip(X, 0, 1)", "t2 = np.ceil(t1)"]
    assert all(op.allocates and op.in_bytes == X.nbytes == op.out_bytes for op in tr.ops)
    model = build_model(tr, {"X": X})
    assert model.passes == 2
    assert model.bytes_moved == 4 * X.nbytes
    assert model.temporaries == X.nbytes
    assert model.narrow_dtype == np.dtype(bool)
    assert model.bytes_min == X.nbytes + X.size


def test_views_are_free_and_methods_operators_indexing_traced():
    X = np.arange(20.0).reshape(4, 5)
    tr = _trace("(X.T[::2] >= 3).view('i1')", X=X)
    names = [op.name for op in tr.ops]
    assert names == ["ndarray.T", "getitem", "greater_equal", "ndarray.view"]
    views = [op for op in tr.ops if op.is_view]
    assert len(views) == 3 and all(op.in_bytes == op.out_bytes == 0 for op in views)
    assert tr.ops[1].text == "t2 = t1[::2]"


def test_out_argument_is_not_an_allocation():
    X, Y = np.ones(10), np.empty(10)
    tr = _trace("np.add(X, 1, out=Y)", X=X, Y=Y)
    assert not tr.ops[0].allocates


def test_untraced_code_is_one_opaque_operation():
    ne = pytest.importorskip("numexpr", reason="numexpr stands for untraced code")
    X = np.ones(1000)
    tr = trace("ne.evaluate('X >= 0')", {"ne": ne, "X": X}, ["X"])
    assert [op.name for op in tr.ops] == ["opaque"]
    assert tr.ops[0].in_bytes == X.nbytes and tr.ops[0].out_bytes == X.size


@pytest.mark.parametrize(("values", "expected"), [
    (np.array([0.0, 1.0, 1.0]), bool),
    (np.array([0, 1], np.int64), bool),
    (np.array([-3.0, 100.0]), np.int8),
    (np.array([0.5, 0.25]), np.float16),
    (np.array([0.1]), np.float64),
    (np.array([np.nan, 1.5]), np.float16),
    (np.array([70000.0]), np.int32),
])
def test_narrowest_dtype(values, expected):
    assert narrowest_dtype(values) == np.dtype(expected)
