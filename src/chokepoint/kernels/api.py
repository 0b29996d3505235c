"""The public kernels: one validation path, then one engine call.

Semantics are PyTorch CPU's:

* Forward results have the input's dtype and are bit-identical to torch: NaN propagates, the
  sign of zero is kept (``relu(-0.0)`` is ``-0.0``), infinities and subnormals pass through (no
  flush-to-zero).
* Derivatives at the kinks follow torch: ``relu'(0) = 0``, ``leaky_relu'(0) = slope``, and
  ``hardtanh``/``relu6`` have derivative 0 at both boundaries. ``relu_grad(..., at_zero=1)`` is
  the ``x >= 0`` convention instead.
* NaN convention for derivatives: ``relu`` and ``leaky_relu`` treat NaN as "not <= 0", so
  ``relu'(NaN) = 1`` (the gradient flows through, as torch's ``threshold_backward`` does) and
  ``leaky_relu'(NaN) = slope``; ``hardtanh`` and ``relu6`` pass the gradient only strictly inside
  ``(min_val, max_val)``, so their derivative at NaN is 0 (torch's vectorised kernels agree; its
  scalar tail loop gives 1 — we do not copy that inconsistency).
* Backward passes select, they do not multiply: where the derivative is 0 the result is an exact
  0 even if ``grad`` holds NaN or infinity, as in torch.
* dtypes: float16, float32 and float64; float16 is computed in float32 and rounded once. The
  exact operations (``relu``, ``relu_grad``, ``relu_backward``, ``relu_with_mask``) also take
  signed and unsigned integers and keep their dtype; the others raise TypeError for integers, as
  torch does for ``leaky_relu``. bool, complex, object, string and datetime dtypes raise
  TypeError everywhere.
* NumPy arrays (and array-likes) run here; dask arrays, torch tensors and CuPy arrays are
  handed to :mod:`.on_dask`, :mod:`.on_torch`, :mod:`.on_cupy` by :mod:`.dispatch`, which
  return the same kind of array.
* Any shape (0-d and empty included) and any strides. Everything is validated before anything is
  written: when a call raises, ``out`` is untouched. ``out`` may be an input itself (in place);
  an ``out`` that partly overlaps an input is computed through a buffer, so it is still correct.
"""

from __future__ import annotations

import math

import numpy as np

from . import engine_numpy
from .backend import engine
from .dispatch import dispatched
from .layout import allocation_order, flat_operands
from .mask import PackedMask
from .ops import OPS

__all__ = [
    "GRAD_DTYPES",
    "hardtanh",
    "hardtanh_backward",
    "leaky_relu",
    "leaky_relu_backward",
    "relu",
    "relu6",
    "relu6_backward",
    "relu_backward",
    "relu_grad",
    "relu_with_mask",
]

_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
#: dtypes that :func:`relu_grad` can write.
GRAD_DTYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.float16, np.float32,
                                          np.float64))


# ---------------------------------------------------------------------------------- validation

def _as_array(value, func: str, arg: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, PackedMask):
        raise TypeError(f"{func}: {arg} is a PackedMask; only relu_backward accepts a mask")
    try:
        return np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"{func}: {arg} cannot be converted to an array: {exc}") from exc


def _check_dtype(func: str, arg: str, a: np.ndarray, integers: bool) -> None:
    if a.dtype in _FLOATS or (integers and a.dtype.kind in "iu"):
        return
    accepted = "float16, float32, float64" + (" or an integer dtype" if integers else "")
    hint = " (cast integers to a float dtype first)" if a.dtype.kind in "iu" else ""
    raise TypeError(f"{func}: {arg} has dtype {a.dtype}; expected {accepted}{hint}")


def _check_same(func: str, grad: np.ndarray, x: np.ndarray, x_name: str = "x") -> None:
    if grad.dtype != x.dtype:
        raise TypeError(f"{func}: grad has dtype {grad.dtype} but {x_name} has {x.dtype}; "
                        "they must match")
    if grad.shape != x.shape:
        raise ValueError(f"{func}: grad has shape {grad.shape} but {x_name} has {x.shape}; "
                         "they must match (no broadcasting)")


def _check_out(func: str, out, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{func}: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"{func}: out has shape {out.shape}, expected {shape}")
    if out.dtype != dtype:
        raise TypeError(f"{func}: out has dtype {out.dtype}, expected {dtype}")
    if not out.flags.writeable:
        raise ValueError(f"{func}: out is read-only")


def _check_real(func: str, **values: float) -> None:
    for name, value in values.items():
        if (isinstance(value, (bool, np.bool_, complex, np.complexfloating))
                or not isinstance(value, (int, float, np.number))):
            raise TypeError(f"{func}: {name} must be a real number, got {value!r}")
        if math.isnan(float(value)):
            raise ValueError(f"{func}: {name} must not be NaN")


def _check_at_zero(func: str, at_zero) -> int:
    if at_zero not in (0, 1) or isinstance(at_zero, float):
        raise ValueError(f"{func}: at_zero must be 0 or 1, got {at_zero!r}")
    return int(at_zero)


def _result(func: str, out, shape, dtype, inputs) -> np.ndarray:
    """``out`` after checking it, or a new array laid out like the inputs."""
    if out is None:
        return np.empty(shape, dtype, order=allocation_order(inputs))
    _check_out(func, out, shape, np.dtype(dtype))
    return out


def _params(dtype: np.dtype, slope: float = 0.0, lo: float = 0.0, hi: float = 0.0):
    """The operation's constants in the computation dtype (float32 for float16)."""
    compute = np.dtype(np.float32) if dtype == np.float16 else dtype
    cast = compute.type
    return cast(0), cast(slope), cast(lo), cast(hi)


def _engine_for(*dtypes: np.dtype):
    # numba has no float16 on the CPU: half precision always runs on the NumPy engine.
    return engine_numpy if np.dtype(np.float16) in dtypes else engine()


# ------------------------------------------------------------------------------------ runners

def _unary(op: str, func: str, x, out, *, out_dtype=None, **constants) -> np.ndarray:
    x = _as_array(x, func, "x")
    _check_dtype(func, "x", x, OPS[op].integers)
    out_dtype = x.dtype if out_dtype is None else np.dtype(out_dtype)
    result = _result(func, out, x.shape, out_dtype, [x])
    (flat_x,), flat_out, finish = flat_operands([x], result)
    _engine_for(x.dtype, out_dtype).unary(op, flat_x, flat_out, *_params(x.dtype, **constants))
    finish()
    return result


def _binary(op: str, func: str, grad, x, out, **constants) -> np.ndarray:
    grad = _as_array(grad, func, "grad")
    x = _as_array(x, func, "x")
    _check_dtype(func, "x", x, OPS[op].integers)
    _check_same(func, grad, x)
    result = _result(func, out, x.shape, x.dtype, [grad, x])
    (flat_g, flat_x), flat_out, finish = flat_operands([grad, x], result)
    _engine_for(x.dtype).binary(op, flat_g, flat_x, flat_out, *_params(x.dtype, **constants))
    finish()
    return result


# ---------------------------------------------------------------------------------- the kernels

@dispatched
def relu(x, *, out=None) -> np.ndarray:
    """Rectified linear unit, ``max(x, 0)`` with torch's NaN and signed-zero behaviour.

    Parameters
    ----------
    x : array_like
        float16, float32, float64 or integer input.
    out : numpy.ndarray, optional
        Where to write the result: ``x``'s shape and dtype. May be ``x`` itself.

    Returns
    -------
    numpy.ndarray
        ``out`` if given, else a new array of ``x``'s dtype.

    Examples
    --------
    >>> import numpy as np, chokepoint
    >>> chokepoint.relu(np.array([-2.0, -0.0, 3.0, np.nan]))
    array([ 0., -0.,  3., nan])
    """
    return _unary("relu", "relu", x, out)


@dispatched
def relu_grad(x, *, dtype=None, at_zero: int = 0, out=None) -> np.ndarray:
    """The derivative of ReLU as a 0/1 array.

    Parameters
    ----------
    x : array_like
        float16, float32, float64 or integer input of the forward pass.
    dtype : dtype, optional
        bool, int8, uint8, float16, float32 or float64. Defaults to ``out.dtype`` when ``out``
        is given, else uint8 (1 byte per element: the cheapest to write).
    at_zero : {0, 1}
        The derivative at ``x == 0`` (either sign). 0 is torch's and JAX's convention; 1 gives
        ``x >= 0``. NaN gives 1 in both (see the module notes).
    out : numpy.ndarray, optional
        Where to write the result.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> import numpy as np, chokepoint
    >>> chokepoint.relu_grad(np.array([-1.0, 0.0, 2.0]))
    array([0, 0, 1], dtype=uint8)
    >>> chokepoint.relu_grad(np.array([-1.0, 0.0, 2.0]), at_zero=1, dtype=np.float32)
    array([0., 1., 1.], dtype=float32)
    """
    at_zero = _check_at_zero("relu_grad", at_zero)
    if dtype is None:
        dtype = out.dtype if isinstance(out, np.ndarray) else np.uint8
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"relu_grad: dtype {dtype!r} is not a dtype") from exc
    if dtype not in GRAD_DTYPES:
        names = ", ".join(str(d) for d in GRAD_DTYPES)
        raise TypeError(f"relu_grad: dtype {dtype} is not supported; choose one of {names}")
    op = "relu_grad_at_zero" if at_zero else "relu_grad"
    return _unary(op, "relu_grad", x, out, out_dtype=dtype)


@dispatched
def relu_backward(grad, x_or_mask, *, at_zero: int | None = None, out=None) -> np.ndarray:
    """``grad * relu'(x)`` in one fused pass, with no temporaries.

    Parameters
    ----------
    grad : array_like
        Gradient of the loss with respect to ``relu(x)``.
    x_or_mask : array_like or PackedMask
        The forward pass's input (``grad``'s shape and dtype), or the mask that
        :func:`relu_with_mask` returned: 1 bit per element to read instead of ``x``.
    at_zero : {0, 1}, optional
        The derivative at ``x == 0``; default 0, or the mask's own convention. A mask cannot
        answer for another convention than the one it recorded (ValueError).
    out : numpy.ndarray, optional
        Where to write the result; ``out=grad`` works in place.

    Returns
    -------
    numpy.ndarray
        ``grad`` where the derivative is 1, an exact 0 elsewhere (even where ``grad`` is NaN).
    """
    func = "relu_backward"
    if isinstance(x_or_mask, PackedMask):
        return _relu_backward_from_mask(grad, x_or_mask, at_zero, out)
    at_zero = _check_at_zero(func, 0 if at_zero is None else at_zero)
    return _binary("relu_backward_at_zero" if at_zero else "relu_backward", func, grad,
                   x_or_mask, out)


def _relu_backward_from_mask(grad, mask: PackedMask, at_zero, out) -> np.ndarray:
    func = "relu_backward"
    if at_zero is not None and _check_at_zero(func, at_zero) != mask.at_zero:
        raise ValueError(f"{func}: the mask recorded at_zero={mask.at_zero}; it cannot give "
                         f"at_zero={at_zero} (pass x instead)")
    grad = _as_array(grad, func, "grad")
    _check_dtype(func, "grad", grad, integers=True)
    if grad.shape != mask.shape:
        raise ValueError(f"{func}: grad has shape {grad.shape} but the mask has {mask.shape}")
    result = _result(func, out, grad.shape, grad.dtype, [grad])
    (flat_g,), flat_out, finish = flat_operands([grad], result, c_only=True)
    zero = _params(grad.dtype)[0]
    _engine_for(grad.dtype).mask_backward(flat_g, mask.bits, flat_out, zero)
    finish()
    return result


@dispatched
def relu_with_mask(x, *, at_zero: int = 0, out=None) -> tuple[np.ndarray, PackedMask]:
    """``relu(x)`` and a packed 1-bit mask of its derivative, in one pass.

    Keep the mask instead of ``x`` for the backward pass: ``relu_backward(grad, mask)`` reads
    1 bit per element instead of ``x.itemsize`` bytes (64 times less memory for float64).

    Parameters
    ----------
    x : array_like
        float16, float32, float64 or integer input.
    at_zero : {0, 1}
        The derivative recorded at ``x == 0``.
    out : numpy.ndarray, optional
        Where to write ``relu(x)``.

    Returns
    -------
    y : numpy.ndarray
    mask : PackedMask
    """
    func = "relu_with_mask"
    at_zero = _check_at_zero(func, at_zero)
    x = _as_array(x, func, "x")
    _check_dtype(func, "x", x, integers=True)
    result = _result(func, out, x.shape, x.dtype, [x])
    bits = np.empty((x.size + 7) // 8, np.uint8)
    (flat_x,), flat_out, finish = flat_operands([x], result, c_only=True)
    zero = _params(x.dtype)[0]
    _engine_for(x.dtype).mask_forward(flat_x, flat_out, bits, zero, at_zero)
    finish()
    return result, PackedMask(bits, x.shape, at_zero)


@dispatched
def leaky_relu(x, negative_slope: float = 0.01, *, out=None) -> np.ndarray:
    """Leaky ReLU: ``x`` where ``x > 0``, else ``negative_slope * x``.

    Parameters
    ----------
    x : array_like
        float16, float32 or float64 input.
    negative_slope : float
        Slope for ``x <= 0``, cast to the computation dtype as torch does.
    out : numpy.ndarray, optional
        Where to write the result.

    Returns
    -------
    numpy.ndarray
    """
    _check_real("leaky_relu", negative_slope=negative_slope)
    return _unary("leaky_relu", "leaky_relu", x, out, slope=negative_slope)


@dispatched
def leaky_relu_backward(grad, x, negative_slope: float = 0.01, *, out=None) -> np.ndarray:
    """``grad`` where ``x > 0``, else ``grad * negative_slope``, in one pass.

    Parameters
    ----------
    grad : array_like
        Gradient with respect to ``leaky_relu(x)``.
    x : array_like
        The forward pass's input (``grad``'s shape and dtype).
    negative_slope : float
        The forward pass's slope. The derivative at 0 and at NaN is the slope.
    out : numpy.ndarray, optional
        Where to write the result; ``out=grad`` works in place.

    Returns
    -------
    numpy.ndarray
    """
    _check_real("leaky_relu_backward", negative_slope=negative_slope)
    return _binary("leaky_relu_backward", "leaky_relu_backward", grad, x, out,
                   slope=negative_slope)


def _check_bounds(func: str, min_val: float, max_val: float) -> None:
    _check_real(func, min_val=min_val, max_val=max_val)
    if min_val > max_val:
        raise ValueError(f"{func}: min_val ({min_val}) must not exceed max_val ({max_val})")


@dispatched
def hardtanh(x, min_val: float = -1.0, max_val: float = 1.0, *, out=None) -> np.ndarray:
    """Clamp ``x`` to ``[min_val, max_val]``; NaN and the sign of zero pass through.

    Parameters
    ----------
    x : array_like
        float16, float32 or float64 input.
    min_val, max_val : float
        The bounds, ``min_val <= max_val``.
    out : numpy.ndarray, optional
        Where to write the result.

    Returns
    -------
    numpy.ndarray
    """
    _check_bounds("hardtanh", min_val, max_val)
    return _unary("hardtanh", "hardtanh", x, out, lo=min_val, hi=max_val)


@dispatched
def hardtanh_backward(grad, x, min_val: float = -1.0, max_val: float = 1.0, *,
                      out=None) -> np.ndarray:
    """``grad`` strictly inside ``(min_val, max_val)``, else 0 (boundaries and NaN included).

    Parameters
    ----------
    grad : array_like
        Gradient with respect to ``hardtanh(x)``.
    x : array_like
        The forward pass's input (``grad``'s shape and dtype).
    min_val, max_val : float
        The forward pass's bounds.
    out : numpy.ndarray, optional
        Where to write the result; ``out=grad`` works in place.

    Returns
    -------
    numpy.ndarray
    """
    _check_bounds("hardtanh_backward", min_val, max_val)
    return _binary("hardtanh_backward", "hardtanh_backward", grad, x, out, lo=min_val,
                   hi=max_val)


@dispatched
def relu6(x, *, out=None) -> np.ndarray:
    """``min(max(x, 0), 6)``: :func:`hardtanh` with bounds 0 and 6.

    Parameters
    ----------
    x : array_like
        float16, float32 or float64 input.
    out : numpy.ndarray, optional
        Where to write the result.

    Returns
    -------
    numpy.ndarray
    """
    return _unary("hardtanh", "relu6", x, out, lo=0.0, hi=6.0)


@dispatched
def relu6_backward(grad, x, *, out=None) -> np.ndarray:
    """``grad`` where ``0 < x < 6``, else 0: :func:`hardtanh_backward` with bounds 0 and 6.

    Parameters
    ----------
    grad : array_like
        Gradient with respect to ``relu6(x)``.
    x : array_like
        The forward pass's input.
    out : numpy.ndarray, optional
        Where to write the result; ``out=grad`` works in place.

    Returns
    -------
    numpy.ndarray
    """
    return _binary("hardtanh_backward", "relu6_backward", grad, x, out, lo=0.0, hi=6.0)
