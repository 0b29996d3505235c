"""out= and in-place, overlap, strides and layouts."""

import numpy as np
import pytest

import chokepoint

from . import reference as ref


def test_out_is_returned_and_filled():
    x = np.linspace(-2, 2, 9)
    out = np.empty_like(x)
    assert chokepoint.relu(x, out=out) is out
    assert ref.same(out, ref.relu(x))


@pytest.mark.parametrize("n", [10, 300_001])
def test_in_place_backward_on_grad(n):
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal(n), rng.standard_normal(n)
    expected = ref.relu_backward(g, x)
    assert chokepoint.relu_backward(g, x, out=g) is g
    assert ref.same(g, expected)
    y = x.copy()
    chokepoint.relu_with_mask(y, out=y)
    assert ref.same(y, ref.relu(x))


@pytest.mark.parametrize("shift", [1, -1, 3])
def test_partial_overlap_is_computed_correctly(shift):
    base = np.random.default_rng(0).standard_normal(200_000)
    x = base[100:-100]
    out = base[100 + shift:base.size - 100 + shift]
    expected = ref.relu(x.copy())
    chokepoint.relu(x, out=out)
    assert ref.same(out, expected)


def test_strided_out_and_fortran_mix():
    x = np.random.default_rng(2).standard_normal((40, 30))
    out = np.zeros((40, 60))[:, ::2]
    chokepoint.relu(x.T.copy().T, out=out)  # F-ordered input, strided out
    assert ref.same(out, ref.relu(x))
    g = np.asfortranarray(x)
    assert ref.same(chokepoint.relu_backward(g, x), ref.relu_backward(x, x))


def test_mask_of_fortran_array_uses_c_order():
    x = np.asfortranarray(np.random.default_rng(3).standard_normal((17, 9)))
    y, mask = chokepoint.relu_with_mask(x)
    assert ref.same(y, ref.relu(x))
    assert np.array_equal(mask.unpack(bool), x > 0)
    g = np.asfortranarray(np.ones_like(x))
    assert ref.same(chokepoint.relu_backward(g, mask), ref.relu_backward(g, x))


def test_may_share_and_partial_overlap():
    from chokepoint.kernels.layout import may_share, partial_overlap

    a, b = np.zeros(16), np.zeros(16)
    assert not may_share(a, b) and may_share(a, a)  # each owns its memory
    assert may_share(a[2:], a) and not may_share(a[:8], a[8:])
    buf = bytearray(128)  # foreign memory, two arrays over it: neither owns it
    assert may_share(np.frombuffer(buf), np.frombuffer(buf))
    # views of different owners cannot overlap; views of one owner, or memory reached
    # through a buffer, a strided trick or a reinterpretation, ask NumPy
    assert not may_share(a.reshape(4, 4)[1], b[::2]) and may_share(a.reshape(4, 4)[1], a[4:6])
    assert may_share(np.frombuffer(a), a[3:]) and may_share(a.view(np.int64)[5:], a[:6])
    strided = np.lib.stride_tricks.as_strided(a, (4,), (0,))
    assert may_share(strided, a) and not may_share(strided, b)
    assert not partial_overlap(a, a) and not partial_overlap(a, a[:])  # in place
    assert partial_overlap(a[1:], a[:-1])
