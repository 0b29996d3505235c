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


# Measurement tools load on first use: they import numba, which the kernels defer too.
_LAZY = {
    "race": ("chokepoint.measure.race", "race"),
    "RaceResult": ("chokepoint.measure.race", "RaceResult"),
    "measure": ("chokepoint.measure.timer", "measure"),
    "Measurement": ("chokepoint.measure.timer", "Measurement"),
    "roofline": ("chokepoint.measure.roofline", "roofline"),
    "explain": ("chokepoint.explain", "explain"),
    "Explanation": ("chokepoint.explain", "Explanation"),
    "Roofline": ("chokepoint.measure.roofline", "Roofline"),
    "fuse": ("chokepoint.fuse", "fuse"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'chokepoint' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:
    """``%load_ext chokepoint``: registers the ``%race`` magic (see :mod:`chokepoint.magic`)."""
    from .magic import load_ipython_extension as load

    load(ipython)

__all__ = [
    "BACKENDS",
    "GRAD_DTYPES",
    "Explanation",
    "Measurement",
    "PackedMask",
    "RaceResult",
    "Roofline",
    "__version__",
    "explain",
    "fuse",
    "get_backend",
    "hardtanh",
    "hardtanh_backward",
    "leaky_relu",
    "leaky_relu_backward",
    "load_ipython_extension",
    "measure",
    "race",
    "relu",
    "relu6",
    "relu6_backward",
    "relu_backward",
    "relu_grad",
    "relu_with_mask",
    "roofline",
    "set_backend",
]
