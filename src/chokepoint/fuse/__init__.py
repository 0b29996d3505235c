"""Fusion of elementwise NumPy code into one parallel numba kernel: :func:`fuse`.

Importing this package sets the attribute ``chokepoint.fuse`` to the package itself (Python does
that for every subpackage), so the package is made callable: ``chokepoint.fuse(code)`` is
:func:`fuse` whichever was imported first.
"""

import sys
import types

from .api import Fused, fuse
from .trace import FuseError

__all__ = ["FuseError", "Fused", "fuse"]


class _CallableModule(types.ModuleType):
    def __call__(self, code):
        return fuse(code)


sys.modules[__name__].__class__ = _CallableModule
