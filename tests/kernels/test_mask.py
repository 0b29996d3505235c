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


def test_mask_is_immutable_and_checks_its_bits():
    # issue 13.9: a mask changed after construction made relu_backward read uninitialised memory
    _, mask = chokepoint.relu_with_mask(np.ones(8))
    for name, value in [("shape", (1000,)), ("bits", np.zeros(125, np.uint8)), ("at_zero", 1)]:
        with pytest.raises(AttributeError):
            setattr(mask, name, value)
    assert mask.shape == (8,) and mask.at_zero == 0
    with pytest.raises(ValueError, match="read-only"):
        mask.bits[0] = 0
    # even a mask forced out of step (bypassing the properties) is refused, not read past its end
    object.__setattr__(mask, "_shape", (1000,))
    with pytest.raises(ValueError, match="bytes"):
        chokepoint.relu_backward(np.ones(1000), mask)
    with pytest.raises(ValueError, match="bytes"):
        mask.unpack()


def test_mask_leaves_the_callers_bits_writable():
    bits = np.array([0b101], np.uint8)
    mask = PackedMask(bits, (3,))
    bits[0] = 0b111  # the caller's array is not frozen; the mask sees its bytes
    assert bits.flags.writeable and not mask.bits.flags.writeable
    assert chokepoint.relu_backward(np.ones(3), mask).tolist() == [1, 1, 1]
    assert pickle.loads(pickle.dumps(mask)) == mask


def test_read_only_bits_run_on_every_engine():  # the conftest runs it once per engine
    x = np.random.default_rng(1).standard_normal(300_001)  # parallel and tail paths
    _, mask = chokepoint.relu_with_mask(x)
    got = chokepoint.relu_backward(np.ones_like(x), mask)
    assert np.array_equal(got, (x > 0).astype(float))
