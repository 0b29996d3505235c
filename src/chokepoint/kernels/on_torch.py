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
    tensors = [(f"argument {k + 1}" if isinstance(k, int) else k, a)
               for k, a in (*enumerate(args), *kwargs.items()) if isinstance(a, torch.Tensor)]
    for what, t in tensors:
        _check(name, t, what)
    devices = {t.device.type for _, t in tensors}
    if devices - {"cpu"}:
        if devices != {"cuda"}:
            raise TypeError(f"{name}: tensors on different devices ({sorted(devices)})")
        from . import on_cupy

        return on_cupy.from_torch(name, *args, **kwargs)

    def to_numpy(v):
        return v.numpy() if isinstance(v, torch.Tensor) else v

    if isinstance(kwargs.get("dtype"), torch.dtype):  # relu_grad: a torch dtype is fine too
        kwargs["dtype"] = torch.empty(0, dtype=kwargs["dtype"]).numpy().dtype
    out = kwargs.get("out")
    result = getattr(api, name)(*[to_numpy(a) for a in args],
                                **{k: to_numpy(v) for k, v in kwargs.items()})
    if isinstance(result, tuple):  # relu_with_mask
        y, mask = result
        return (out if out is not None else torch.from_numpy(y)), mask
    return out if out is not None else torch.from_numpy(result)


def _handler(name: str):
    def handler(*args, **kwargs):
        return _call(name, *args, **kwargs)

    handler.__name__ = handler.__qualname__ = name
    handler.__doc__ = f":func:`chokepoint.{name}` on tensors (same arguments)."
    return handler


globals().update({name: _handler(name) for name in KERNELS})
