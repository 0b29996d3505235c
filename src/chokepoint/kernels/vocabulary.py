"""The elementary functions of the expression vocabulary, bound once per engine.

:data:`~.ops.FUNCTIONS` names what an expression may call; this module says what each name is
on each engine: numba (scalar functions inlined into the generated loop), NumPy (ufuncs applied
to a block) and CUDA (C function names, for :mod:`.on_cupy`). Replacing an implementation (for
instance by the vectorisable ones of :mod:`.vecmath`) is a change here only.

float32 stays float32 on every engine: numba's ``math.exp`` of a float32 is ``expf``; the NumPy
ufuncs keep the dtype of their input; CUDA's ``exp`` is overloaded for float.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from . import vecmath

__all__ = ["CUDA", "NUMBA", "NUMPY"]


@numba.njit(inline="always")
def _select(c, a, b):
    return a if c else b


@numba.njit(inline="always")
def _logical_not(c):
    return not c


@numba.njit(inline="always")
def _logical_and(c, d):
    return c & d


#: name -> function callable from numba's nopython code
NUMBA = {
    "select": _select,
    "logical_not": _logical_not,
    "logical_and": _logical_and,
    "exp": vecmath.exp,  # vectorisable; libm's exp is a scalar call numba cannot vectorise
    "expm1": vecmath.expm1,
    "log1p": vecmath.log1p,
    "erf": vecmath.erf,
    "tanh": vecmath.tanh,
    "sinh": vecmath.sinh,
    "cosh": vecmath.cosh,
}

_erf_double = np.frompyfunc(math.erf, 1, 1)


def _erf(a: np.ndarray) -> np.ndarray:
    """``erf`` elementwise in ``a``'s dtype (NumPy has none; computed with ``math.erf``)."""
    a = np.asarray(a)
    return _erf_double(a.astype(np.float64)).astype(a.dtype)


#: name -> NumPy function on arrays
NUMPY = {
    "select": np.where,
    "logical_not": np.logical_not,
    "logical_and": np.logical_and,
    "exp": np.exp,
    "expm1": np.expm1,
    "log1p": np.log1p,
    "erf": _erf,
    "tanh": np.tanh,
    "sinh": np.sinh,
    "cosh": np.cosh,
}

#: name -> C function (CUDA's math library overloads each for float and double)
CUDA = {"exp": "exp", "expm1": "expm1", "log1p": "log1p", "erf": "erf", "tanh": "tanh",
        "sinh": "sinh", "cosh": "cosh"}
