"""Issue 13 items 8, 10, 11, 12: inputs a hostile user passes, each refused clearly or handled."""

from fractions import Fraction

import numpy as np
import pytest

import chokepoint


def test_masked_arrays_are_refused():
    m = np.ma.masked_array([-1.0, 2.0], mask=[0, 1])
    with pytest.raises(TypeError, match="masked array"):
        chokepoint.relu(m)
    with pytest.raises(TypeError, match="masked array"):
        chokepoint.relu_backward(np.ones(2), m)


def test_matrix_is_refused():
    with pytest.raises(TypeError, match=r"numpy\.matrix"):
        chokepoint.relu(np.matrix([[-1.0, 2.0]]))


@pytest.mark.parametrize("dtype", [">i4", ">f8", "<f4" if np.little_endian else ">f4"])
def test_non_native_byte_order_is_converted(dtype):
    x = np.array([-1, 2], dtype)
    y = chokepoint.relu(x)
    assert y.dtype.isnative and y.tolist() == [0, 2]
    assert x.tolist() == [-1, 2]  # the input is not touched


def test_out_with_non_native_byte_order_names_it():
    with pytest.raises(TypeError, match="byte order"):
        chokepoint.relu(np.ones(2), out=np.empty(2, ">f8"))


def test_torch_numpy_scalar_parameter_and_keyword_dispatch():
    torch = pytest.importorskip("torch", reason="torch dispatch")
    t = torch.ones(3, dtype=torch.float64)
    assert torch.equal(chokepoint.leaky_relu(-t, np.float64(0.1)), torch.full((3,), -0.1,
                                                                                 dtype=torch.float64))
    assert isinstance(chokepoint.relu(x=t), torch.Tensor)
    assert isinstance(chokepoint.relu_backward(grad=t, x_or_mask=t), torch.Tensor)


def test_one_rule_for_parameters():
    x = np.ones(2)
    with pytest.raises(ValueError, match="too large"):
        chokepoint.leaky_relu(x, negative_slope=10**400)
    with pytest.raises(ValueError, match="at_zero must be the integer 0 or 1, got an array"):
        chokepoint.relu_grad(x, at_zero=np.array([0, 1]))
    # np.float64(1.0) and Fraction(1) get the same answer: not integers, refused alike
    for value in (np.float64(1.0), Fraction(1), 1.0, True):
        with pytest.raises(ValueError, match="at_zero"):
            chokepoint.relu_grad(x, at_zero=value)
    assert chokepoint.relu_grad(x, at_zero=np.int64(1)).tolist() == [1, 1]
    with pytest.raises(TypeError, match="real number"):
        chokepoint.elu(x, alpha=np.array([1.0, 2.0]))
    assert chokepoint.leaky_relu(-x, Fraction(1, 2)).tolist() == [-0.5, -0.5]
