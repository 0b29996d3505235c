"""chokepoint: ReLU-family kernels at the memory-bandwidth floor, and tools that measure where
NumPy code spends its time."""

from .kernels import (
    BACKENDS,
    GRAD_DTYPES,
    PackedMask,
    get_backend,
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
    set_backend,
)

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "GRAD_DTYPES",
    "PackedMask",
    "__version__",
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
