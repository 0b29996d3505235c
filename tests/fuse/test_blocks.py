"""fuse on blocks with NumPy's ufuncs (where NumPy's loops are faster on the machine): NumPy's
values bit for bit, the choice by the measured figures, and their cache."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chokepoint
from chokepoint.fuse import blocks, costs


@pytest.fixture
def numpy_blocks(monkeypatch):
    monkeypatch.setattr(costs, "POLICY", "always")


def _bitwise(ours, ref):
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    same = ours.view(f"u{ref.itemsize}") == ref.view(f"u{ref.itemsize}")
    assert (same | (np.isnan(ours) & np.isnan(ref))).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [100, blocks.BLOCK * 5 + 7])  # one block; several, 2 threads
def test_values_are_numpys_bit_for_bit(numpy_blocks, dtype, size):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(size) * 3).astype(dtype)
    b = rng.random(size).astype(dtype)
    a[:9] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 88.0, -88.0, 1e30]
    code = ("np.where(a > 0.5, np.tan(a) * 2, np.arcsin(b)) + np.clip(np.sinh(a), -1, b) "
            "- np.float32(0.5) * np.arctan2(a, b) + 3 * 2")
    with np.errstate(all="ignore"):
        ref = eval(code, {"np": np, "a": a, "b": b})
    f = chokepoint.fuse(code)
    _bitwise(f(a=a, b=b), ref)
    out = np.full(size, 7, ref.dtype)
    assert f(a=a, b=b, out=out) is out
    _bitwise(out, ref)
    assert f.plan({"a": a.dtype, "b": b.dtype}).on_blocks


def test_threads_share_the_blocks_and_a_scalar_input(numpy_blocks):
    import numba

    x = np.linspace(-1, 1, blocks.BLOCK * 9 + 3)
    f = chokepoint.fuse("np.tan(x) * s + x")
    for threads in (1, 2, 3):
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        _bitwise(f(x=x, s=0.25), np.tan(x) * 0.25 + x)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def test_the_choice_follows_the_figures(monkeypatch):
    monkeypatch.setattr(costs, "POLICY", "auto")
    table = {("tan", "float64"): (9e-9, 1.4e-9), ("sin", "float64"): (1.7e-9, 8.2e-9),
             ("exp", "float64"): (0.8e-9, 0.8e-9), ("add", "float64"): (0.2e-9, 0.3e-9),
             ("cos", "float32"): (1.1e-9, 0.8e-9), ("add", "float32"): (0.1e-9, 0.15e-9)}
    monkeypatch.setattr(costs, "figures", lambda op, dtype: table[(op, dtype)])
    assert costs.numpy_faster([("tan", "float64")])
    assert not costs.numpy_faster([("sin", "float64")])
    assert not costs.numpy_faster([("exp", "float64")])  # equal: the kernel (no temporaries)
    assert not costs.numpy_faster([("tan", "float64"), ("sin", "float64"), ("sin", "float64")])
    assert not costs.numpy_faster([])
    assert not costs.numpy_faster([("add", "float64"), ("multiply", "float64")])
    # cos alone goes to NumPy; with five arithmetic passes over NumPy's blocks, not
    assert costs.numpy_faster([("cos", "float32")])
    assert not costs.numpy_faster([("cos", "float32")] + [("multiply", "float32")] * 5)
    f = chokepoint.fuse("np.tan(a) + np.sin(a)")
    a = np.linspace(0, 1, 1000)
    f(a=a)
    plan = f.plan({"a": a.dtype})
    assert plan.operations == [("tan", "float64"), ("sin", "float64"), ("add", "float64")]
    assert not plan.on_blocks  # 10.7 ns against 9.9: not 1.2x (tan alone is)
    monkeypatch.setattr(costs, "POLICY", "never")
    assert not costs.numpy_faster([("tan", "float64")])


def test_figures_are_measured_once_and_cached_on_disk(monkeypatch, tmp_path):
    monkeypatch.setattr(costs, "path", lambda: tmp_path / "fuse.json")
    monkeypatch.setattr(costs, "_cache", None)
    kernel, numpy = costs.figures("exp", np.float64)
    assert kernel > 0 and numpy > 0
    assert json.loads((tmp_path / "fuse.json").read_text()) == {"exp:float64": [kernel, numpy]}
    monkeypatch.setattr(costs, "_cache", None)
    monkeypatch.setattr(costs, "_measure", lambda *a: pytest.fail("measured again"))
    assert costs.figures("exp", "float64") == (kernel, numpy)
    (tmp_path / "fuse.json").write_text('{"exp:float64": [1, "x"], "tan": 3}')  # damaged
    monkeypatch.setattr(costs, "_cache", None)
    assert costs._load() == {}
