"""Bad input gets a clear error, and nothing is written when a call fails."""

import numpy as np
import pytest

import chokepoint


def _out_untouched(call, out):
    before = out.copy()
    with pytest.raises((TypeError, ValueError)) as info:
        call(out)
    assert np.array_equal(out, before, equal_nan=True)
    return info


@pytest.mark.parametrize(
    "x",
    [np.ones(3, np.complex128), np.ones(3, bool), np.array(["a", "b"]), np.array([1, None]),
     np.array(["2020-01-01"], "datetime64[D]"), np.ones(3, np.longdouble)
     if np.dtype(np.longdouble).itemsize > 8 else np.ones(3, np.complex64)],
)
def test_unsupported_dtypes_raise_type_error(x):
    for func in (chokepoint.relu, chokepoint.relu_grad, chokepoint.leaky_relu, chokepoint.relu6,
                 chokepoint.hardtanh):
        with pytest.raises(TypeError, match="dtype"):
            func(x)
    with pytest.raises(TypeError, match="dtype"):
        chokepoint.relu_with_mask(x)


def test_integers_rejected_where_the_result_is_not_exact():
    x = np.arange(-3, 3)
    with pytest.raises(TypeError, match="cast integers"):
        chokepoint.leaky_relu(x)
    with pytest.raises(TypeError, match="cast integers"):
        chokepoint.hardtanh_backward(x, x)


def test_out_wrong_shape_dtype_readonly_or_type():
    x = np.linspace(-1, 1, 6)
    out = np.full(6, 7.0)
    assert "shape" in str(_out_untouched(lambda o: chokepoint.relu(x, out=o[:5]), out).value)
    wrong = np.full(6, 7, np.float32)
    assert "dtype" in str(_out_untouched(lambda o: chokepoint.relu(x, out=o), wrong).value)
    readonly = np.full(6, 7.0)
    readonly.flags.writeable = False
    assert "read-only" in str(_out_untouched(lambda o: chokepoint.relu(x, out=o), readonly).value)
    with pytest.raises(TypeError, match=r"numpy\.ndarray"):
        chokepoint.relu(x, out=[0.0] * 6)


def test_backward_mismatches_leave_out_untouched():
    x = np.linspace(-1, 1, 6)
    out = np.full(6, 7.0)
    info = _out_untouched(lambda o: chokepoint.relu_backward(np.ones(5), x, out=o), out)
    assert "shape" in str(info.value)
    info = _out_untouched(
        lambda o: chokepoint.relu_backward(np.ones(6, np.float32), x, out=o), out)
    assert "dtype" in str(info.value)
    _, mask = chokepoint.relu_with_mask(x.reshape(2, 3))
    info = _out_untouched(lambda o: chokepoint.relu_backward(np.ones(6), mask, out=o), out)
    assert "mask" in str(info.value)
    info = _out_untouched(lambda o: chokepoint.relu_backward(
        np.ones((2, 3)), mask, at_zero=1, out=o.reshape(2, 3)), out)
    assert "at_zero" in str(info.value)


def test_bad_parameters():
    x = np.ones(4)
    with pytest.raises(ValueError, match="at_zero"):
        chokepoint.relu_grad(x, at_zero=2)
    with pytest.raises(ValueError, match="at_zero"):
        chokepoint.relu_backward(x, x, at_zero=0.5)
    with pytest.raises(TypeError, match="dtype"):
        chokepoint.relu_grad(x, dtype=np.int64)
    with pytest.raises(TypeError, match="dtype"):
        chokepoint.relu_grad(x, dtype="not a dtype")
    with pytest.raises(ValueError, match="min_val"):
        chokepoint.hardtanh(x, 2.0, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        chokepoint.leaky_relu(x, float("nan"))
    with pytest.raises(TypeError, match="real number"):
        chokepoint.leaky_relu(x, "0.1")
    with pytest.raises(TypeError, match="real number"):
        chokepoint.hardtanh(x, np.complex128(-1), 1.0)
    with pytest.raises(TypeError, match="mask"):
        chokepoint.relu(chokepoint.relu_with_mask(x)[1])


def test_relu_grad_dtype_must_agree_with_out():
    x = np.ones(4)
    out = np.zeros(4, np.float32)
    assert chokepoint.relu_grad(x, out=out) is out  # dtype taken from out
    _out_untouched(lambda o: chokepoint.relu_grad(x, dtype=np.uint8, out=o), out)
