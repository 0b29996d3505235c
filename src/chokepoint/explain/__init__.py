"""Explain where an array expression's time goes: trace, model, probes, findings.

Importing this package sets the attribute ``chokepoint.explain`` to the package itself (Python
does that for every subpackage), so the package is made callable, as ``chokepoint.fuse`` is:
``chokepoint.explain(code, setup)`` is :func:`explain` whichever was imported first.
"""

import sys
import types

from .api import ExplainError, Explanation, explain
from .findings import KINDS

__all__ = ["KINDS", "ExplainError", "Explanation", "explain"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return explain(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
