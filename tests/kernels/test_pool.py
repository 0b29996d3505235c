"""The pool of large result buffers (kernels/pool.py): reused only when free, never shared
while any array refers to one, bounded, and off with CHOKEPOINT_POOL_BYTES=0."""

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels import engine_numba, pool


@pytest.fixture
def empty_pool(monkeypatch):
    monkeypatch.setattr(pool, "_buffers", [])
    monkeypatch.setattr(pool, "MAX_BYTES", 512 << 20)  # whatever CHOKEPOINT_POOL_BYTES says
    return pool


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_a_large_new_result_reuses_a_free_buffer_and_never_one_in_use(empty_pool):
    n = engine_numba.CHECKED_MAX + 3  # the fast path's size (above the C path's)
    x = np.linspace(-1, 1, n)
    first = chokepoint.relu(x)
    assert first.base is not None and first.base.nbytes == x.nbytes  # from the pool
    where = _address(first)
    second = chokepoint.relu_backward(x, x)  # `first` is alive: another buffer
    assert not np.may_share_memory(first, second)
    view = first[10:]
    del first
    third = chokepoint.relu(-x)  # `view` still refers to the first buffer
    assert not np.may_share_memory(view, third) and not np.may_share_memory(second, third)
    np.testing.assert_array_equal(view, np.maximum(x, 0)[10:])
    del view
    fourth = chokepoint.relu(x)  # now the first buffer is free again
    assert _address(fourth) == where
    np.testing.assert_array_equal(fourth, np.maximum(x, 0))
    np.testing.assert_array_equal(second, np.where(x > 0, x, 0))
    np.testing.assert_array_equal(third, np.maximum(-x, 0))


def test_the_general_path_pools_in_the_inputs_order(empty_pool, monkeypatch):
    monkeypatch.setattr(pool, "MIN_BYTES", 64)
    x = np.asfortranarray(np.linspace(-1, 1, 60).reshape(6, 10))
    y = chokepoint.relu(x)
    assert y.flags.f_contiguous and y.base is not None
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    g = chokepoint.relu_with_mask(x[:, ::2])[0]  # strided: the general path too
    np.testing.assert_array_equal(g, np.maximum(x[:, ::2], 0))


def test_release_drops_the_free_buffers_and_keeps_those_in_use(empty_pool, monkeypatch):
    monkeypatch.setattr(pool, "MIN_BYTES", 64)
    kept = pool.empty((100,), np.float64)
    dropped = pool.empty((50,), np.float32)
    assert pool.state() == {"buffers": 2, "bytes": 1000, "in_use": 2,
                            "max_bytes": pool.MAX_BYTES, "min_bytes": 64}
    del dropped
    assert pool.state()["in_use"] == 1
    assert pool.release() == 200
    assert pool.state()["buffers"] == 1 and kept.base is pool._buffers[0]


def test_the_pool_keeps_at_most_max_bytes(empty_pool, monkeypatch):
    monkeypatch.setattr(pool, "MIN_BYTES", 64)
    monkeypatch.setattr(pool, "MAX_BYTES", 2000)
    arrays = [pool.empty((100,), np.float64) for _ in range(4)]  # 800 bytes each, in use
    assert pool.state()["bytes"] == 1600  # the oldest two were let go (their arrays live on)
    assert all(a.base is not None for a in arrays)
    big = pool.empty((300,), np.float64)  # larger than MAX_BYTES: never kept
    assert big.base is None and pool.state()["buffers"] == 2


@pytest.mark.parametrize(("text", "expected"), [
    ("0", 0), ("64M", 64 << 20), ("1g", 1 << 30), ("4096", 4096), ("512MB", 512 << 20),
    ("64MiB", 64 << 20), ("1.5k", 1536)])
def test_the_size_in_the_environment(monkeypatch, text, expected):
    monkeypatch.setenv("CHOKEPOINT_POOL_BYTES", text)
    assert pool._max_bytes() == expected


@pytest.mark.parametrize("text", ["lots", "inf", "1e400", "-5", "nanM"])
def test_a_size_that_is_not_one_warns_and_keeps_the_default(monkeypatch, text):
    monkeypatch.setenv("CHOKEPOINT_POOL_BYTES", text)
    with pytest.warns(RuntimeWarning, match="CHOKEPOINT_POOL_BYTES"):
        assert pool._max_bytes(123) == 123


def test_max_bytes_zero_turns_the_pool_off(empty_pool, monkeypatch):
    monkeypatch.setattr(pool, "MIN_BYTES", 64)
    monkeypatch.setattr(pool, "MAX_BYTES", 0)
    a = pool.empty((100,), np.float64)
    assert a.base is None and pool.state()["buffers"] == 0
