"""Which engine runs the kernels: numba (default) or NumPy.

``CHOKEPOINT_BACKEND=numpy`` in the environment selects the NumPy engine; so does a failed
``import numba`` (with a warning). :func:`set_backend` switches at run time, and works as a context
manager to switch back.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

from . import engine_numpy

__all__ = ["BACKENDS", "get_backend", "set_backend"]

BACKENDS = ("numba", "numpy")


def _load(name: str) -> ModuleType:
    if name == "numpy":
        return engine_numpy
    if name == "numba":
        from . import engine_numba  # imports numba

        return engine_numba
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")


def _initial() -> ModuleType:
    name = os.environ.get("CHOKEPOINT_BACKEND", "numba").strip().lower() or "numba"
    try:
        return _load(name)
    except ImportError as exc:
        warnings.warn(f"chokepoint: numba is unavailable ({exc}); using the NumPy engine",
                      RuntimeWarning, stacklevel=3)
        return engine_numpy


_engine: ModuleType | None = None


def engine() -> ModuleType:
    """The engine module in use (loaded on first use, so that import stays fast)."""
    global _engine
    if _engine is None:
        _engine = _initial()
    return _engine


def get_backend() -> str:
    """Name of the engine in use: ``"numba"`` or ``"numpy"``."""
    return engine().NAME


class set_backend:
    """Select the engine; usable as a context manager that restores the previous one.

    Parameters
    ----------
    name : {"numba", "numpy"}

    Examples
    --------
    >>> import chokepoint
    >>> with chokepoint.set_backend("numpy"):
    ...     chokepoint.get_backend()
    'numpy'
    """

    def __init__(self, name: str):
        global _engine
        self._previous = engine()
        _engine = _load(name)

    def __enter__(self) -> set_backend:
        return self

    def __exit__(self, *exc_info) -> None:
        global _engine
        _engine = self._previous
