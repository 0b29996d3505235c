"""The user's state a statement reaches through the globals of the user's functions.

A statement's named inputs are copies (:func:`~chokepoint.measure.statements.run_setup`), but a
user's function keeps its own globals: ``def bump(): A[:] += 1`` changes the user's ``A``
however often explain or race calls it. This module is the one place that keeps what such
calls can change and puts it back.

:func:`user_state` follows the user's functions a statement names (``fn.__code__.co_names``
resolved in ``fn.__globals__``, recursively for the user functions found there; a function is
the user's when its code does not lie in the standard library, site-packages or chokepoint)
and saves, for each global they use: its binding, a copy of its array, or the contents of its
list, dict or set (and copies of the arrays among them, one level down). After the first run
:meth:`UserState.changed` says which of them changed; :meth:`UserState.restore` puts them back
(before every later run, untimed, and when done).

Not covered: attributes of objects (``self.W += 1``), closures' cells, files.
"""

from __future__ import annotations

import functools
import os
import sysconfig
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from .statements import same_array

__all__ = ["Restored", "UserState", "user_functions", "user_state"]

_CONTAINERS = (list, dict, set)


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Folders whose code is not the user's: Python's, installed packages', chokepoint's."""
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    dirs.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs)


def _is_user_code(fn: types.FunctionType) -> bool:
    filename = fn.__code__.co_filename
    return filename.startswith("<") or not os.path.realpath(filename).startswith(
        _library_dirs())


def _same_items(old, new) -> bool:
    """Whether a list, dict or set holds the same objects as its saved copy ``old``."""
    if len(old) != len(new):
        return False
    if isinstance(new, dict):
        return old.keys() == new.keys() and all(old[k] is new[k] for k in old)
    if isinstance(new, set):
        return {id(x) for x in old} == {id(x) for x in new}
    return all(a is b for a, b in zip(old, new, strict=True))


def _function_of(value) -> types.FunctionType | None:
    """The Python function behind ``value`` (a function, a bound method, a partial)."""
    if isinstance(value, types.MethodType):
        value = value.__func__
    if isinstance(value, functools.partial):
        value = value.func
    return value if isinstance(value, types.FunctionType) else None


def _names_read(code: types.CodeType) -> set[str]:
    """The global (and attribute) names of ``code`` and of the code nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


def user_functions(roots: Iterable[object]) -> list[types.FunctionType]:
    """The user's functions among ``roots`` and those they call through their globals."""
    found: dict[int, types.FunctionType] = {}
    todo = [fn for fn in map(_function_of, roots) if fn is not None]
    while todo:
        fn = todo.pop()
        if id(fn) in found or not _is_user_code(fn):
            continue
        found[id(fn)] = fn
        for name in _names_read(fn.__code__):
            called = _function_of(fn.__globals__.get(name))
            if called is not None:
                todo.append(called)
    return list(found.values())


@dataclass
class _Saved:
    """One global of a user function as it was: its binding, and its contents' copy."""

    owner: dict
    name: str
    where: str
    present: bool
    value: object
    contents: object = None
    arrays: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    def rebound(self) -> bool:
        return (self.name in self.owner) != self.present or (
            self.present and self.owner[self.name] is not self.value)

    def changed(self) -> bool:
        if self.rebound():
            return True
        v = self.value
        if isinstance(v, np.ndarray) and self.contents is not None:
            return not same_array(v, self.contents)
        if type(v) in _CONTAINERS and not _same_items(self.contents, v):
            return True
        return any(not same_array(a, copy) for a, copy in self.arrays)

    def restore(self) -> None:
        if self.rebound():
            if self.present:
                self.owner[self.name] = self.value
            else:
                self.owner.pop(self.name, None)
        v = self.value
        if isinstance(v, np.ndarray) and self.contents is not None:
            np.copyto(v, self.contents)
        elif isinstance(v, list):
            v[:] = self.contents
        elif isinstance(v, (dict, set)):
            v.clear()
            v.update(self.contents)
        for a, copy in self.arrays:
            np.copyto(a, copy)


def _saved(owner: dict, name: str, where: str) -> _Saved:
    present = name in owner
    value = owner.get(name)
    saved = _Saved(owner, name, where, present, value)
    if isinstance(value, np.ndarray) and value.flags.writeable:
        saved.contents = value.copy()
    elif type(value) in _CONTAINERS:
        saved.contents = type(value)(value)
        items = value.values() if isinstance(value, dict) else value
        saved.arrays = [(a, a.copy()) for a in items
                        if isinstance(a, np.ndarray) and a.flags.writeable]
    return saved


class UserState:
    """The globals the user's functions use, as they were when it was made."""

    def __init__(self, saved: list[_Saved]):
        self._saved = saved
        self._changing: list[_Saved] = []

    def changed(self) -> list[str]:
        """What differs from the saved state (``"bump()'s global A"``); what differs is
        then put back by :meth:`restore`."""
        self._changing = [s for s in self._saved if s.changed()]
        return [f"{s.where}'s global {s.name}" for s in self._changing]

    @property
    def changes(self) -> bool:
        """Whether the last :meth:`changed` found a change."""
        return bool(self._changing)

    def restore(self, everything: bool = False) -> None:
        """Put back what :meth:`changed` found changed; with ``everything``, whatever differs
        now."""
        for s in (self._saved if everything else self._changing):
            if not everything or s.changed():
                s.restore()


def user_state(roots: Iterable[object]) -> UserState:
    """Save the globals that the user's functions among ``roots`` (values a statement names, a
    candidate's function) use, and those of the user functions they call.

    Raises
    ------
    MemoryError
        When the copies do not fit.
    """
    saved: list[_Saved] = []
    seen: set[tuple[int, str]] = set()
    for fn in user_functions(roots):
        owner = fn.__globals__
        for name in sorted(_names_read(fn.__code__)):
            value = owner.get(name)
            if (id(owner), name) in seen or _function_of(value) is not None or isinstance(
                    value, (types.ModuleType, type)):
                continue
            seen.add((id(owner), name))
            saved.append(_saved(owner, name, f"{fn.__name__}()"))
    return UserState(saved)


class Restored:
    """``fn`` with a ``restore`` method, which the timer calls before every call, untimed
    (:func:`~chokepoint.measure.timer.measure`): each of ``restores`` in turn."""

    def __init__(self, fn: Callable[[], object], *restores: Callable[[], None]):
        self.fn, self.restores = fn, restores

    def restore(self) -> None:
        for restore in self.restores:
            restore()

    def __call__(self):
        return self.fn()
