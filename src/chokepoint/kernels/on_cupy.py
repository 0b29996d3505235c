"""The kernels on CuPy arrays: one CuPy elementwise kernel per operation, same semantics.

The CUDA source of each kernel is generated from the same expression table as the CPU engines
(:data:`~.ops.OPS`): :func:`cuda_expression` translates an expression's Python syntax tree
(``select`` -> ``?:``, ``logical_not`` -> ``!``, ``logical_and`` -> ``&&``) into C. Half
precision computes in float and rounds once, as on the CPU. ``relu_with_mask`` writes ``y`` and a
bool mask, then packs it with ``cupy.packbits`` (a :class:`PackedMask` whose bits live on the
GPU); ``relu_backward`` reads those bits directly. Arguments are validated with the NumPy path
on empty arrays first, so errors are the same as on the CPU.

Torch CUDA tensors arrive here through DLPack (:func:`from_torch`) and leave the same way.
"""

from __future__ import annotations

import ast
import functools

import numpy as np

from . import api
from .dispatch import KERNELS
from .mask import PackedMask
from .ops import OPS

__all__ = ["cuda_expression", "from_torch", *KERNELS]

_BINARY_OPERATORS = {ast.Mult: "*", ast.Add: "+", ast.Sub: "-", ast.Div: "/"}
_COMPARISONS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                ast.NotEq: "!="}


def cuda_expression(expr: str) -> str:
    """The C expression for an :data:`~.ops.OPS` expression.

    Examples
    --------
    >>> cuda_expression("select(v < zero, zero, v)")
    '((v < zero) ? (zero) : (v))'
    """
    def emit(node) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return repr(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
            return f"({emit(node.left)} {_BINARY_OPERATORS[type(node.op)]} {emit(node.right)})"
        if isinstance(node, ast.Compare) and len(node.ops) == 1 \
                and type(node.ops[0]) in _COMPARISONS:
            return (f"({emit(node.left)} {_COMPARISONS[type(node.ops[0])]} "
                    f"{emit(node.comparators[0])})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = [emit(a) for a in node.args]
            if node.func.id == "select" and len(args) == 3:
                return f"({args[0]} ? ({args[1]}) : ({args[2]}))"
            if node.func.id == "logical_not" and len(args) == 1:
                return f"(!{args[0]})"
            if node.func.id == "logical_and" and len(args) == 2:
                return f"({args[0]} && {args[1]})"
        raise ValueError(f"cannot translate {ast.dump(node)} to CUDA")

    return emit(ast.parse(expr, mode="eval").body)


@functools.cache
def _kernel(name: str):
    import cupy

    op = OPS[name]
    body = f"y = (O)({cuda_expression(op.expr)});"
    if op.arity == 1:
        params, prologue = "X x, C zero, C slope, C lo, C hi", "C v = (C)x;"
    else:
        params, prologue = "X grad, X x, C zero, C slope, C lo, C hi", \
            "C v = (C)x; C g = (C)grad;"
    return cupy.ElementwiseKernel(params, "O y", f"{prologue} {body}", f"chokepoint_{name}")


@functools.cache
def _mask_backward_kernel():
    import cupy

    return cupy.ElementwiseKernel(
        "X grad, raw uint8 bits, C zero", "O y",
        "C g = (C)grad; y = (O)((((bits[i >> 3] >> (i & 7)) & 1) != 0) ? g : zero);",
        "chokepoint_mask_backward")


def _meta(a) -> np.ndarray:
    return np.empty((0,) * a.ndim, dtype=a.dtype)


def _constants(dtype, **values) -> tuple:
    """zero, slope, lo, hi in the computation dtype: the CPU path's own rule."""
    return api._params(np.dtype(dtype), **values)


def _output(name: str, out, shape, dtype):
    import cupy

    if out is None:
        return cupy.empty(shape, dtype)
    if not isinstance(out, cupy.ndarray):
        raise TypeError(f"{name}: out must be a cupy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"{name}: out has shape {out.shape}, expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{name}: out has dtype {out.dtype}, expected {dtype}")
    return out


def _unary(name: str, op: str, x, out=None, **constants):
    dtype = getattr(api, name)(_meta(x), **_public(name, constants)).dtype
    y = _output(name, out, x.shape, dtype)
    _kernel(op)(x, *_constants(x.dtype, **constants), y)
    return y


def _binary(name: str, op: str, grad, x, out=None, **constants):
    if grad.shape != x.shape:
        raise ValueError(f"{name}: grad has shape {grad.shape} but x has {x.shape}; "
                         "they must match (no broadcasting)")
    dtype = getattr(api, name)(_meta(grad), _meta(x), **_public(name, constants)).dtype
    y = _output(name, out, x.shape, dtype)
    _kernel(op)(grad, x, *_constants(x.dtype, **constants), y)
    return y


def _public(name: str, constants: dict) -> dict:
    """The public function's keyword arguments for ``constants`` (for validation)."""
    mapping = {"leaky_relu": {"slope": "negative_slope"},
               "leaky_relu_backward": {"slope": "negative_slope"},
               "hardtanh": {"lo": "min_val", "hi": "max_val"},
               "hardtanh_backward": {"lo": "min_val", "hi": "max_val"}}.get(name)
    return {mapping[k]: v for k, v in constants.items()} if mapping else {}


def relu(x, *, out=None):
    """:func:`chokepoint.relu` on a CuPy array."""
    return _unary("relu", "relu", x, out)


def relu_grad(x, *, dtype=None, at_zero: int = 0, out=None):
    """:func:`chokepoint.relu_grad` on a CuPy array."""
    dtype = api.relu_grad(_meta(x), dtype=dtype if dtype is not None else
                          (out.dtype if out is not None else None), at_zero=at_zero).dtype
    y = _output("relu_grad", out, x.shape, dtype)
    op = "relu_grad_at_zero" if at_zero else "relu_grad"
    _kernel(op)(x, *_constants(x.dtype), y)
    return y


def relu_backward(grad, x_or_mask, *, at_zero: int | None = None, out=None):
    """:func:`chokepoint.relu_backward` on CuPy arrays, from ``x`` or a GPU mask."""
    if isinstance(x_or_mask, PackedMask):
        mask = x_or_mask
        api.relu_backward(_meta(grad), PackedMask(np.empty(0, np.uint8), (0,) * grad.ndim,
                                                  mask.at_zero), at_zero=at_zero)
        if grad.shape != mask.shape:
            raise ValueError(f"relu_backward: grad has shape {grad.shape} but the mask has "
                             f"{mask.shape}")
        y = _output("relu_backward", out, grad.shape, grad.dtype)
        _mask_backward_kernel()(grad, mask.bits, _constants(grad.dtype)[0], y)
        return y
    op = "relu_backward_at_zero" if at_zero else "relu_backward"
    api.relu_backward(_meta(grad), _meta(x_or_mask), at_zero=at_zero)
    return _binary("relu_backward", op, grad, x_or_mask, out)


def relu_with_mask(x, *, at_zero: int = 0, out=None):
    """:func:`chokepoint.relu_with_mask` on a CuPy array: ``(y, PackedMask)`` with GPU bits."""
    import cupy

    api.relu_with_mask(_meta(x), at_zero=at_zero)
    passes = cupy.empty(x.shape, bool)
    _kernel("relu_grad_at_zero" if at_zero else "relu_grad")(x, *_constants(x.dtype), passes)
    y = relu(x, out=out)
    bits = cupy.packbits(passes.reshape(-1), bitorder="little")
    return y, PackedMask(bits, x.shape, at_zero)


def leaky_relu(x, negative_slope: float = 0.01, *, out=None):
    """:func:`chokepoint.leaky_relu` on a CuPy array."""
    return _unary("leaky_relu", "leaky_relu", x, out, slope=negative_slope)


def leaky_relu_backward(grad, x, negative_slope: float = 0.01, *, out=None):
    """:func:`chokepoint.leaky_relu_backward` on CuPy arrays."""
    return _binary("leaky_relu_backward", "leaky_relu_backward", grad, x, out,
                   slope=negative_slope)


def hardtanh(x, min_val: float = -1.0, max_val: float = 1.0, *, out=None):
    """:func:`chokepoint.hardtanh` on a CuPy array."""
    return _unary("hardtanh", "hardtanh", x, out, lo=min_val, hi=max_val)


def hardtanh_backward(grad, x, min_val: float = -1.0, max_val: float = 1.0, *, out=None):
    """:func:`chokepoint.hardtanh_backward` on CuPy arrays."""
    return _binary("hardtanh_backward", "hardtanh_backward", grad, x, out, lo=min_val,
                   hi=max_val)


def relu6(x, *, out=None):
    """:func:`chokepoint.relu6` on a CuPy array."""
    api.relu6(_meta(x))
    return _unary("hardtanh", "hardtanh", x, out, lo=0.0, hi=6.0)


def relu6_backward(grad, x, *, out=None):
    """:func:`chokepoint.relu6_backward` on CuPy arrays."""
    api.relu6_backward(_meta(grad), _meta(x))
    return _binary("hardtanh_backward", "hardtanh_backward", grad, x, out, lo=0.0, hi=6.0)


def from_torch(name: str, *args, **kwargs):
    """Run kernel ``name`` on CUDA tensors through DLPack (zero-copy both ways)."""
    try:
        import cupy
    except ImportError as exc:
        raise TypeError(f"{name}: CUDA tensors need CuPy (pip install cupy-cuda12x)") from exc
    import torch

    def to_cupy(v):
        return cupy.from_dlpack(v) if isinstance(v, torch.Tensor) else v

    result = globals()[name](*[to_cupy(a) for a in args],
                             **{k: to_cupy(v) for k, v in kwargs.items()})
    out = kwargs.get("out")
    if isinstance(result, tuple):
        return (out if out is not None else torch.from_dlpack(result[0])), result[1]
    return out if out is not None else torch.from_dlpack(result)
