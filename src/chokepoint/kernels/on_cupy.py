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
import inspect

import numpy as np

from . import api, vocabulary
from .dispatch import KERNELS
from .mask import PackedMask
from .ops import OPS
from .registry import BY_NAME

__all__ = ["cuda_expression", "from_torch", "kernel_source", *KERNELS]

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
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return f"(-{emit(node.operand)})"
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
            if node.func.id in vocabulary.CUDA and len(args) == 1:
                return f"{vocabulary.CUDA[node.func.id]}({args[0]})"
        raise ValueError(f"cannot translate {ast.dump(node)} to CUDA")

    return emit(ast.parse(expr, mode="eval").body)


@functools.cache
def _kernel(name: str):
    import cupy

    source = kernel_source(name)
    return cupy.ElementwiseKernel(source[0], "O y", source[1], f"chokepoint_{name}",
                                  preamble=vocabulary.CUDA_PREAMBLE)


def kernel_source(name: str) -> tuple[str, str]:
    """``(in_params, body)`` of the CuPy ElementwiseKernel for operation ``name``.

    The constants are the operation's own (:attr:`~.ops.Op.params`), of the computation type
    ``C``; half precision inputs compute in float (``C``) and round once on the store.

    Examples
    --------
    >>> kernel_source("relu")
    ('X x, C zero', 'C v = (C)x; y = (O)(((v < zero) ? (zero) : (v)));')
    """
    op = OPS[name]
    constants = "".join(f", C {p}" for p in op.params)
    body = f"y = (O)({cuda_expression(op.expr)});"
    if op.arity == 1:
        return f"X x{constants}", f"C v = (C)x; {body}"
    return f"X grad, X x{constants}", f"C v = (C)x; C g = (C)grad; {body}"


@functools.cache
def _mask_backward_kernel():
    import cupy

    return cupy.ElementwiseKernel(
        "X grad, raw uint8 bits, C zero", "O y",
        "C g = (C)grad; y = (O)((((bits[i >> 3] >> (i & 7)) & 1) != 0) ? g : zero);",
        "chokepoint_mask_backward")


def _meta(a) -> np.ndarray:
    return np.empty((0,) * a.ndim, dtype=a.dtype)


def _constants(op: str, dtype, values: dict | None = None) -> tuple:
    """The op's constants in the computation dtype: the CPU path's own rule."""
    return api.op_constants(op, np.dtype(dtype), values)


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


def _run(name: str, *args, **kwargs):
    """A registry kernel on CuPy arrays: validated by the NumPy path on empty arrays first."""
    kernel = BY_NAME[name]
    bound = inspect.signature(getattr(api, name)).bind(*args, **kwargs)
    bound.apply_defaults()
    values = list(bound.arguments.values())
    arrays, params, out = values[:kernel.arity], values[kernel.arity:-1], values[-1]
    if kernel.arity == 2 and arrays[0].shape != arrays[1].shape:
        raise ValueError(f"{name}: grad has shape {arrays[0].shape} but x has "
                         f"{arrays[1].shape}; they must match (no broadcasting)")
    dtype = getattr(api, name)(*[_meta(a) for a in arrays], *params).dtype
    op, constants = api.resolve(kernel, *params)
    y = _output(name, out, arrays[-1].shape, dtype)
    _kernel(op)(*arrays, *_constants(op, arrays[-1].dtype, constants), y)
    return y


def _handler(name: str):
    def handler(*args, **kwargs):
        return _run(name, *args, **kwargs)

    handler.__name__ = handler.__qualname__ = name
    handler.__doc__ = f":func:`chokepoint.{name}` on CuPy arrays (same arguments)."
    return handler


globals().update({name: _handler(name) for name in KERNELS if BY_NAME[name].resolve})


def relu_grad(x, *, dtype=None, at_zero: int = 0, out=None):
    """:func:`chokepoint.relu_grad` on a CuPy array."""
    dtype = api.relu_grad(_meta(x), dtype=dtype if dtype is not None else
                          (out.dtype if out is not None else None), at_zero=at_zero).dtype
    y = _output("relu_grad", out, x.shape, dtype)
    op = "relu_grad_at_zero" if at_zero else "relu_grad"
    _kernel(op)(x, *_constants(op, x.dtype), y)
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
        bits = mask.checked_bits("relu_backward")
        y = _output("relu_backward", out, grad.shape, grad.dtype)
        _mask_backward_kernel()(grad, bits, _constants("relu", grad.dtype)[0], y)
        return y
    op = "relu_backward_at_zero" if at_zero else "relu_backward"
    if grad.shape != x_or_mask.shape:
        raise ValueError(f"relu_backward: grad has shape {grad.shape} but x has "
                         f"{x_or_mask.shape}; they must match (no broadcasting)")
    dtype = api.relu_backward(_meta(grad), _meta(x_or_mask), at_zero=at_zero).dtype
    y = _output("relu_backward", out, grad.shape, dtype)
    _kernel(op)(grad, x_or_mask, *_constants(op, grad.dtype), y)
    return y


def relu_with_mask(x, *, at_zero: int = 0, out=None):
    """:func:`chokepoint.relu_with_mask` on a CuPy array: ``(y, PackedMask)`` with GPU bits."""
    import cupy

    api.relu_with_mask(_meta(x), at_zero=at_zero)
    passes = cupy.empty(x.shape, bool)
    grad_op = "relu_grad_at_zero" if at_zero else "relu_grad"
    _kernel(grad_op)(x, *_constants(grad_op, x.dtype), passes)
    y = globals()["relu"](x, out=out)
    bits = cupy.packbits(passes.reshape(-1), bitorder="little")
    return y, PackedMask(bits, x.shape, at_zero)


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
