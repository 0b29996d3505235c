"""chokepoint: ReLU-family kernels at the memory-bandwidth floor, and tools that measure where
NumPy code spends its time."""

from . import kernels as _kernels
from .kernels import BACKENDS as BACKENDS
from .kernels import GRAD_DTYPES as GRAD_DTYPES
from .kernels import PackedMask as PackedMask
from .kernels import get_backend as get_backend
from .kernels import set_backend as set_backend
from .kernels.registry import NAMES as _NAMES

globals().update({_name: getattr(_kernels, _name) for _name in _NAMES})

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
    "profile": ("chokepoint.program", "profile"),
    "run_program": ("chokepoint.program", "run_program"),
    "ProgramReport": ("chokepoint.program", "ProgramReport"),
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

__all__ = sorted([
    "BACKENDS",
    "GRAD_DTYPES",
    "Explanation",
    "Measurement",
    "PackedMask",
    "ProgramReport",
    "RaceResult",
    "Roofline",
    "__version__",
    "explain",
    "fuse",
    "get_backend",
    "load_ipython_extension",
    "profile",
    "measure",
    "race",
    "roofline",
    "run_program",
    "set_backend",
    *_NAMES,
])
