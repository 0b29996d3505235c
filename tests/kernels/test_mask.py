"""The packed mask: size, layout, unpacking, and its use in the backward pass."""

import pickle

import numpy as np
import pytest

import chokepoint
from chokepoint import PackedMask


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (8,), (9,), (3, 5, 7), ()])
def test_mask_bits_match_packbits(shape):
    x = np.random.default_rng(0).standard_normal(shape)
    _, mask = chokepoint.relu_with_mask(x)
    expected = np.packbits((x > 0).ravel(), bitorder="little")
    assert np.array_equal(mask.bits, expected)
    assert mask.shape == tuple(shape)
    assert mask.nbytes == (x.size + 7) // 8
    assert np.array_equal(mask.unpack(np.float32), (x > 0).astype(np.float32))


def test_mask_is_64x_smaller_than_float64():
    x = np.ones((64, 1000))
    assert chokepoint.relu_with_mask(x)[1].nbytes * 64 == x.nbytes


def test_at_zero_recorded_and_used():
    x = np.array([-0.0, 0.0, -1.0, 1.0])
    _, mask = chokepoint.relu_with_mask(x, at_zero=1)
    assert mask.unpack().tolist() == [1, 1, 0, 1]
    assert chokepoint.relu_backward(np.ones(4), mask).tolist() == [1, 1, 0, 1]


def test_mask_pickles_and_compares():
    _, mask = chokepoint.relu_with_mask(np.arange(-5.0, 6.0))
    again = pickle.loads(pickle.dumps(mask))
    assert again == mask
    assert "shape=(11,)" in repr(mask)


def test_mask_constructor_validates():
    with pytest.raises(ValueError, match="bytes"):
        PackedMask(np.zeros(3, np.uint8), (9,))
    with pytest.raises(ValueError, match="at_zero"):
        PackedMask(np.zeros(2, np.uint8), (9,), at_zero=3)
