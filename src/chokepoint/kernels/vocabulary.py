"""The elementary functions of the expression vocabulary, bound once per engine.

:data:`~.ops.FUNCTIONS` names what an expression may call; this module says what each name is
on each engine: numba (scalar functions inlined into the generated loop), NumPy (ufuncs applied
to a block) and CUDA (C function names, for :mod:`.on_cupy`). Replacing an implementation (for
instance by the vectorisable ones of :mod:`.vecmath`) is a change here only.

float32 stays float32 on every engine: numba's ``math.exp`` of a float32 is ``expf``; the NumPy
ufuncs keep the dtype of their input; CUDA's ``exp`` is overloaded for float.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["CUDA", "CUDA_PREAMBLE", "NPDF", "NUMPY", "SQRT1_2", "numba_functions"]

#: sqrt(1/2), ndtr's scale of x for erf (in the numba, NumPy and CUDA bindings alike)
SQRT1_2 = math.sqrt(0.5)
#: 1/sqrt(2 pi), npdf's factor: torch's kBeta, M_2_SQRTPI * M_SQRT1_2 * 0.5
NPDF = 2.0 / math.sqrt(math.pi) * SQRT1_2 * 0.5


@functools.cache
def numba_functions() -> dict:
    """name -> function callable from numba's nopython code.

    Bound on first use: importing numba at ``import chokepoint`` would change the heap of the
    program ``chokepoint run`` records (see :mod:`chokepoint.program.api`), and the NumPy
    engine needs none of it.
    """
    from . import vecmath

    return {
        "select": vecmath.select,
        "logical_not": vecmath.logical_not,
        "logical_and": vecmath.logical_and,
        "exp": vecmath.exp,  # vectorisable; libm's exp is a scalar call numba cannot vectorise
        "expm1": vecmath.expm1,
        "log1p": vecmath.log1p,
        "erf": vecmath.erf,
        "tanh": vecmath.tanh,
        "sinh": vecmath.sinh,
        "cosh": vecmath.cosh,
        "ndtr": vecmath.ndtr,
        "npdf": vecmath.npdf,
    }


_erf_double = np.frompyfunc(math.erf, 1, 1)


def _erf(a: np.ndarray) -> np.ndarray:
    """``erf`` elementwise in ``a``'s dtype (NumPy has none; computed with ``math.erf``)."""
    a = np.asarray(a)
    return _erf_double(a.astype(np.float64)).astype(a.dtype)


def _ndtr(a: np.ndarray) -> np.ndarray:
    """``(1 + erf(a / sqrt(2))) / 2`` in ``a``'s dtype, as torch writes GELU's CDF."""
    a = np.asarray(a)
    t = a.dtype.type
    return t(0.5) * (t(1.0) + _erf(a * t(SQRT1_2)))


def _npdf(a: np.ndarray) -> np.ndarray:
    """``exp(-a*a / 2) / sqrt(2 pi)`` in ``a``'s dtype, as torch writes GELU's density."""
    a = np.asarray(a)
    t = a.dtype.type
    return np.exp(t(-0.5) * a * a) * t(NPDF)


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
    "ndtr": _ndtr,
    "npdf": _npdf,
}

#: name -> C function (CUDA's math library overloads each for float and double; the others
#: are defined, for both, in :data:`CUDA_PREAMBLE`)
CUDA = {"exp": "exp", "expm1": "expm1", "log1p": "log1p", "erf": "erf", "tanh": "tanh",
        "sinh": "sinh", "cosh": "cosh", "ndtr": "chokepoint_ndtr", "npdf": "chokepoint_npdf"}

#: device functions the CUDA kernels may call, for float and double (CUDA's own ``normcdf``
#: has no float overload, and differs from torch's formula)
CUDA_PREAMBLE = f"""
__device__ inline float chokepoint_ndtr(float x) {{
  return 0.5f * (1.0f + erff(x * {np.float32(SQRT1_2)}f)); }}
__device__ inline double chokepoint_ndtr(double x) {{
  return 0.5 * (1.0 + erf(x * {SQRT1_2!r})); }}
__device__ inline float chokepoint_npdf(float x) {{
  return expf(-0.5f * x * x) * {np.float32(NPDF)}f; }}
__device__ inline double chokepoint_npdf(double x) {{
  return exp(-0.5 * x * x) * {NPDF!r}; }}
"""
