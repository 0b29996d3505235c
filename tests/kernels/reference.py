"""float64 NumPy references for the kernels, written independently of chokepoint's op table."""

import numpy as np

FLOATS = (np.float16, np.float32, np.float64)


def compute_dtype(dtype):
    return np.float32 if np.dtype(dtype) == np.float16 else np.dtype(dtype).type


def _finish(values64, dtype):
    """Round once to the computation dtype, then to the storage dtype (torch's half rule)."""
    return values64.astype(compute_dtype(dtype)).astype(dtype)


def relu(x):
    x64 = x.astype(np.float64)
    return _finish(np.where(x64 < 0, 0.0, x64), x.dtype)


def relu_grad(x, at_zero=0):
    x64 = x.astype(np.float64)
    negative = x64 < 0 if at_zero else x64 <= 0
    return ~negative


def relu_backward(g, x, at_zero=0):
    return _finish(np.where(relu_grad(x, at_zero), g.astype(np.float64), 0.0), x.dtype)


def leaky_relu(x, slope):
    x64 = x.astype(np.float64)
    s = np.float64(compute_dtype(x.dtype)(slope))
    return _finish(np.where(x64 > 0, x64, x64 * s), x.dtype)


def leaky_relu_backward(g, x, slope):
    g64 = g.astype(np.float64)
    s = np.float64(compute_dtype(x.dtype)(slope))
    return _finish(np.where(x.astype(np.float64) > 0, g64, g64 * s), x.dtype)


def hardtanh(x, lo=-1.0, hi=1.0):
    x64 = x.astype(np.float64)
    lo = np.float64(compute_dtype(x.dtype)(lo))
    hi = np.float64(compute_dtype(x.dtype)(hi))
    return _finish(np.where(x64 < lo, lo, np.where(x64 > hi, hi, x64)), x.dtype)


def hardtanh_backward(g, x, lo=-1.0, hi=1.0):
    x64 = x.astype(np.float64)
    inside = (x64 > compute_dtype(x.dtype)(lo)) & (x64 < compute_dtype(x.dtype)(hi))
    return _finish(np.where(inside, g.astype(np.float64), 0.0), x.dtype)


def same(a, b):
    """Bit-identical values and equal dtypes and shapes (NaN == NaN, -0.0 != +0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        numbers = ~np.isnan(a)
        return bool(np.array_equal(a, b, equal_nan=True)
                    and np.array_equal(np.signbit(a[numbers]), np.signbit(b[numbers])))
    return bool(np.array_equal(a, b))


def specials(dtype):
    """Every value of the docs/interfaces.md conventions table, and the boundaries of each op."""
    tiny = np.finfo(dtype).smallest_subnormal
    values = [np.nan, -0.0, 0.0, tiny, -tiny, -1.0, 1.0, 6.0, -6.0, np.inf, -np.inf, 0.5, -0.5,
              5.999, 6.001, 1e-3, -1e-3, np.finfo(dtype).max, np.finfo(dtype).min]
    return np.array(values, dtype=dtype)
