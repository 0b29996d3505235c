"""Fusion of elementwise NumPy code into one parallel numba kernel: :func:`fuse`."""

from .api import Fused, fuse
from .trace import FuseError

__all__ = ["FuseError", "Fused", "fuse"]
