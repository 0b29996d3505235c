"""Activation kernels: the public functions (built from the registry), the packed mask, and
engine selection."""

from . import api, forks  # noqa: F401  (forks: its fork hooks)
from .api import GRAD_DTYPES as GRAD_DTYPES
from .backend import BACKENDS as BACKENDS
from .backend import get_backend as get_backend
from .backend import set_backend as set_backend
from .mask import PackedMask as PackedMask
from .registry import NAMES

globals().update({name: getattr(api, name) for name in NAMES})

__all__ = sorted(["BACKENDS", "GRAD_DTYPES", "PackedMask", "get_backend",
                  "set_backend", *NAMES])
