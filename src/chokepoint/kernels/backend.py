"""Which engine runs the kernels: numba (default) or NumPy.

``CHOKEPOINT_BACKEND=numpy`` in the environment selects the NumPy engine; so does a failed
``import numba`` (with a warning). :func:`set_backend` switches at run time: on its own for the
whole process, as a context manager for one block of one thread (or asyncio task).
"""

from __future__ import annotations

import contextvars
import os
import threading
import warnings
import weakref
from types import ModuleType

from . import engine_numpy

__all__ = ["BACKENDS", "default_engine", "engine_lock", "get_backend", "scoped_engine",
           "set_backend"]

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
                      RuntimeWarning, stacklevel=4)
        return engine_numpy


#: The engine a ``with set_backend(name):`` block chose for its own thread or task (None: the
#: process default, which plain ``set_backend(name)`` changes); the C path reads it too.
scoped_engine: contextvars.ContextVar[ModuleType | None] = contextvars.ContextVar(
    "chokepoint_backend", default=None)
#: guards the initial engine's load and the set_backend changes; held over a fork (.forks)
engine_lock = threading.Lock()
_initial_engine: ModuleType | None = None
# set_backend objects not yet entered, oldest first, with the engine each chose; the process
# default is the newest one's (a plain call is one that is never entered). See set_backend.
_changes: list[tuple[weakref.ref, ModuleType]] = []
#: The process default engine: ``_changes[-1]``'s, else the initial one (None before the first
#: call); the C path reads it by this name (a rename makes it fail to load, not misread)
default_engine: ModuleType | None = None


def _default() -> ModuleType:
    default = default_engine  # read without the lock: kernels call this every time
    if default is not None:
        return default
    global _initial_engine
    with engine_lock:
        if default_engine is not None:
            return default_engine
        if _initial_engine is None:
            _initial_engine = _initial()
        _update_default()
        return default_engine


def _update_default() -> None:
    """Recompute the process default after ``_changes`` changed (hold ``engine_lock``)."""
    global default_engine
    default_engine = _changes[-1][1] if _changes else _initial_engine


def engine() -> ModuleType:
    """The engine module in use (loaded on first use, so that import stays fast).

    The one a ``with set_backend(...):`` block of this thread (or asyncio task) chose, else the
    process default.
    """
    chosen = scoped_engine.get()
    return chosen if chosen is not None else _default()


def get_backend() -> str:
    """Name of the engine in use: ``"numba"`` or ``"numpy"``."""
    return engine().NAME


class set_backend:
    """Select the engine: for the whole process, or for one ``with`` block of one thread.

    ``set_backend(name)`` called on its own sets the process default, which every thread sees
    (unless it is inside a ``with`` block of its own).

    ``with set_backend(name):`` selects ``name`` in the current thread (or asyncio task: the
    choice is a :mod:`contextvars` variable) until the block ends, and leaves the process
    default and other threads alone. Threads started inside the block, and thread pools (such
    as dask's threaded scheduler), run with the process default; to carry the choice into
    them, run their work in ``contextvars.copy_context()``, or use a ``with`` block there.

    Between ``set_backend(name)`` and the ``with`` statement's ``__enter__`` (a few bytecodes),
    other threads see ``name`` as the default, since a call cannot know it will be entered.

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
        new = _load(name)
        self._engine = new
        self._tokens: list[contextvars.Token] = []  # one per __enter__ not yet exited
        with engine_lock:
            # entries before the newest one of a dead, never-entered object (a plain call, for
            # good) can never be the default again
            for i in range(len(_changes) - 1, -1, -1):
                if _changes[i][0]() is None:
                    del _changes[:i]
                    break
            _changes.append((weakref.ref(self), new))
            _update_default()

    def __enter__(self) -> set_backend:
        with engine_lock:
            # a context manager after all: undo the process-wide change, keep it local
            for i, (ref, _) in enumerate(_changes):
                if ref() is self:
                    del _changes[i]
                    break
            _update_default()
        self._tokens.append(scoped_engine.set(self._engine))
        return self

    def __exit__(self, *exc_info) -> None:
        if not self._tokens:
            return
        token = self._tokens.pop()
        try:
            scoped_engine.reset(token)
        except ValueError:  # exited in another context than it entered (a generator moved)
            scoped_engine.set(token.old_value if token.old_value is not contextvars.Token.MISSING
                         else None)
