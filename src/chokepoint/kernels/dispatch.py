"""Which implementation serves a call: by the library of its array arguments.

One table (:data:`LIBRARIES`) maps a library's top-level module name to the module of
chokepoint that handles its arrays; that module is imported only when such an array arrives,
so dask, torch and cupy stay optional. The library of a type is looked up once and cached.

Rule for mixed arguments: every array argument of one call must come from the same library
(Python and NumPy scalars are parameters, not arrays; lists are fine; a
:class:`PackedMask` goes with numpy, torch CPU and cupy,
a dask mask with dask). Anything else raises TypeError naming both libraries — convert first
(``da.from_array``, ``torch.from_numpy``, ``cupy.asarray``).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType

import numpy as np

from .registry import NAMES

__all__ = ["KERNELS", "LIBRARIES", "dispatched", "library_of"]

#: the public kernels (from the registry); every handler module in LIBRARIES implements each
KERNELS = NAMES

#: library (top-level module of the array's type) -> chokepoint module that handles it
LIBRARIES = {
    "dask": "chokepoint.kernels.on_dask",
    "torch": "chokepoint.kernels.on_torch",
    "cupy": "chokepoint.kernels.on_cupy",
}

_library_of_type: dict[type, str] = {}


def library_of(value) -> str | None:
    """``"numpy"``, ``"dask"``, ``"torch"``, ``"cupy"`` for arrays; None for anything else.

    NumPy scalars (``np.float64(0.1)``) are None: they are parameters, not arrays.
    """
    kind = type(value)
    known = _library_of_type.get(kind)
    if known is None:
        top = kind.__module__.split(".", 1)[0]
        if issubclass(kind, np.ndarray):
            known = "numpy"
        elif issubclass(kind, np.generic):
            known = ""
        elif top in LIBRARIES:
            known = top
        elif top == "chokepoint":  # masks: PackedMask is "any", a dask mask is "dask"
            known = getattr(kind, "library", "") or ""
        else:
            known = ""
        _library_of_type[kind] = known
    return known or None


_SCALARS = frozenset({int, float, str, type(None)})


def _handler(library: str) -> ModuleType:
    return importlib.import_module(LIBRARIES[library])


def dispatched(func: Callable, name: str | None = None) -> Callable:
    """Route a public kernel to the handler of its arrays' library (NumPy runs ``func``);
    ``name``: the kernel's name in the handlers, where it is not ``func``'s."""
    name = name or func.__name__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        # fast path: plain NumPy arrays and Python scalars (the common call)
        if all(type(a) is np.ndarray or type(a) in _SCALARS for a in args) and \
                all(type(v) is np.ndarray or type(v) in _SCALARS for v in kwargs.values()):
            return func(*args, **kwargs)
        libraries = {}
        for where, value in (*enumerate(args), *kwargs.items()):
            library = library_of(value)
            if library is not None:
                libraries.setdefault(library, where)
        foreign = [lib for lib in libraries if lib not in ("numpy", "any")]
        if not foreign:
            return func(*args, **kwargs)
        if len(foreign) > 1 or "numpy" in libraries:
            found = ", ".join(f"{where if isinstance(where, str) else f'argument {where + 1}'} "
                              f"is {lib}" for lib, where in libraries.items())
            raise TypeError(f"{name}: arrays from different libraries ({found}); convert them "
                            "to one library first")
        return getattr(_handler(foreign[0]), name)(*args, **kwargs)

    wrapper.__wrapped_numpy__ = func
    return wrapper
