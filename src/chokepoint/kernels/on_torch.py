"""The kernels on torch tensors: zero-copy on the CPU, CuPy's kernels on CUDA.

A CPU tensor is viewed as a NumPy array (``Tensor.numpy()`` shares its memory), the NumPy
kernel runs, and the result comes back as a tensor sharing the result's memory
(``torch.from_numpy``); ``out=`` tensors are written in place. CUDA tensors go to CuPy through
DLPack (zero-copy) when CuPy is installed. Semantics are chokepoint's (which are torch's).

Tensors that require grad are refused with a TypeError: these kernels are not autograd
functions, and silently detaching would cut the user's graph. Call ``.detach()`` first, or use
torch's own functions inside autograd. bfloat16 has no NumPy dtype and is refused too.
"""

from __future__ import annotations

import torch

from . import api
from .dispatch import KERNELS

__all__ = [*KERNELS]


def _check(name: str, t, what: str) -> None:
    if t.requires_grad:
        raise TypeError(f"{name}: {what} requires grad; chokepoint's kernels are not autograd "
                        "functions: pass tensor.detach() (or use torch's functions in autograd)")
    if t.dtype == torch.bfloat16:
        raise TypeError(f"{name}: {what} is bfloat16, which NumPy cannot hold; use float32")
    if t.is_sparse:
        raise TypeError(f"{name}: {what} is sparse; pass a dense tensor")


def _call(name: str, *args, **kwargs):
    tensors = [a for a in (*args, kwargs.get("out")) if isinstance(a, torch.Tensor)]
    for i, t in enumerate(tensors):
        _check(name, t, "out" if t is kwargs.get("out") else f"tensor {i + 1}")
    devices = {t.device.type for t in tensors}
    if devices - {"cpu"}:
        if devices != {"cuda"}:
            raise TypeError(f"{name}: tensors on different devices ({sorted(devices)})")
        from . import on_cupy

        return on_cupy.from_torch(name, *args, **kwargs)

    def to_numpy(v):
        return v.numpy() if isinstance(v, torch.Tensor) else v

    out = kwargs.get("out")
    result = getattr(api, name)(*[to_numpy(a) for a in args],
                                **{k: to_numpy(v) for k, v in kwargs.items()})
    if isinstance(result, tuple):  # relu_with_mask
        y, mask = result
        return (out if out is not None else torch.from_numpy(y)), mask
    return out if out is not None else torch.from_numpy(result)


def relu(x, **kwargs):
    """:func:`chokepoint.relu` on a tensor."""
    return _call("relu", x, **kwargs)


def relu_grad(x, **kwargs):
    """:func:`chokepoint.relu_grad` on a tensor; ``dtype`` may be a torch or NumPy dtype."""
    dtype = kwargs.get("dtype")
    if isinstance(dtype, torch.dtype):
        kwargs["dtype"] = torch.empty(0, dtype=dtype).numpy().dtype
    return _call("relu_grad", x, **kwargs)


def relu_backward(grad, x_or_mask, **kwargs):
    """:func:`chokepoint.relu_backward` on tensors, from ``x`` or a PackedMask."""
    return _call("relu_backward", grad, x_or_mask, **kwargs)


def relu_with_mask(x, **kwargs):
    """:func:`chokepoint.relu_with_mask` on a tensor: ``(tensor, PackedMask)``."""
    return _call("relu_with_mask", x, **kwargs)


def leaky_relu(x, *args, **kwargs):
    """:func:`chokepoint.leaky_relu` on a tensor."""
    return _call("leaky_relu", x, *args, **kwargs)


def leaky_relu_backward(grad, x, *args, **kwargs):
    """:func:`chokepoint.leaky_relu_backward` on tensors."""
    return _call("leaky_relu_backward", grad, x, *args, **kwargs)


def hardtanh(x, *args, **kwargs):
    """:func:`chokepoint.hardtanh` on a tensor."""
    return _call("hardtanh", x, *args, **kwargs)


def hardtanh_backward(grad, x, *args, **kwargs):
    """:func:`chokepoint.hardtanh_backward` on tensors."""
    return _call("hardtanh_backward", grad, x, *args, **kwargs)


def relu6(x, **kwargs):
    """:func:`chokepoint.relu6` on a tensor."""
    return _call("relu6", x, **kwargs)


def relu6_backward(grad, x, **kwargs):
    """:func:`chokepoint.relu6_backward` on tensors."""
    return _call("relu6_backward", grad, x, **kwargs)

