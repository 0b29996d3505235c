"""ReLU-family kernels: the public functions, the packed mask, and engine selection."""

from .api import (
    GRAD_DTYPES,
    hardtanh,
    hardtanh_backward,
    leaky_relu,
    leaky_relu_backward,
    relu,
    relu6,
    relu6_backward,
    relu_backward,
    relu_grad,
    relu_with_mask,
)
from .backend import BACKENDS, get_backend, set_backend
from .mask import PackedMask

__all__ = [
    "BACKENDS",
    "GRAD_DTYPES",
    "PackedMask",
    "get_backend",
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
    "set_backend",
]
