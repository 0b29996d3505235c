"""Recognise a ReLU-family expression by its values, and propose chokepoint's kernel for it.

Recognition is by value, not by syntax: the statement's result is compared with each kernel's on
the user's data, then both run on the same shapes filled with the values where conventions
differ (-1, -0.0, 0.0, subnormals, 1, 6, 7, infinities), so a rewrite keeps the result's values
including at zero (``ceil(clip(X, 0, 1))`` is ``relu_grad(X)``, ``X >= 0`` is
``relu_grad(X, at_zero=1)``). NaN is checked separately and any difference is stated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import kernels
from ..kernels.backend import set_backend
from ..measure.race import agreement

__all__ = ["FASTER", "Rewrite", "find_rewrite"]

#: a rewrite (a kernel, a fused kernel) is proposed only when it measured at least this much
#: faster than the code it replaces, timed interleaved with it after :func:`settle` calls
FASTER = 1.05

_SPECIALS = [-2.0, -1.0, -0.0, 0.0, 5e-324, -5e-324, 0.25, 1.0, 2.0, 6.0, 7.0, np.inf, -np.inf]


@dataclass
class Rewrite:
    """A faster statement with the same values.

    Attributes
    ----------
    statement : str
        The rewrite, as code (``chokepoint`` must be imported).
    call : callable
        Runs it on the user's inputs.
    note : str
        Differences worth knowing (NaN handling, a narrower dtype available).
    bytes : int
        Bytes it moves: its inputs once and its result once.
    """

    statement: str
    call: Callable[[], object]
    note: str
    bytes: int
    narrow: Rewrite | None = None

    @property
    def values(self) -> str:
        """How its values compare with the statement's, as the reports say it: the same on the
        user's data, and at NaN inputs too unless :attr:`note` says where they differ."""
        return "same values except at NaN inputs" if self.note else "same values"


def _dtype_arg(dtype: np.dtype) -> str:
    return f"np.{np.dtype(dtype).name}" if np.dtype(dtype) != bool else "bool"


def _candidates(arrays: dict[str, np.ndarray], result: np.ndarray):
    floats = {n: a for n, a in arrays.items()
              if a.dtype.kind == "f" and a.shape == result.shape}
    if len(floats) == 1:
        (name, x), = floats.items()
        if result.dtype in kernels.GRAD_DTYPES:
            for at_zero in (0, 1):
                dtype = "" if result.dtype == np.uint8 else f", dtype={_dtype_arg(result.dtype)}"
                zero = ", at_zero=1" if at_zero else ""
                yield (f"chokepoint.relu_grad({name}{zero}{dtype})",
                       lambda x, a=at_zero: kernels.relu_grad(x, at_zero=a, dtype=result.dtype),
                       (name,))
        if result.dtype == x.dtype:
            yield f"chokepoint.relu({name})", kernels.relu, (name,)
            yield f"chokepoint.relu6({name})", kernels.relu6, (name,)
            yield f"chokepoint.hardtanh({name})", kernels.hardtanh, (name,)
    if len(floats) == 2:
        names = list(floats)
        for g, x in (names, names[::-1]):
            if floats[g].dtype == floats[x].dtype == result.dtype:
                for at_zero in (0, 1):
                    zero = ", at_zero=1" if at_zero else ""
                    yield (f"chokepoint.relu_backward({g}, {x}{zero})",
                           lambda gv, xv, a=at_zero: kernels.relu_backward(gv, xv, at_zero=a),
                           (g, x))


def _specials_like(a: np.ndarray, shape=None) -> np.ndarray:
    values = np.array([*_SPECIALS, np.nan], dtype=a.dtype)
    return np.resize(values, a.shape if shape is None else shape)


def _on_specials(code, namespace, func, inputs, names):
    """Run kernel and statement on arrays of the values where conventions differ, and NaN:
    first on a short 1-D array (enough for elementwise statements), else at full shape."""
    for shape in ((len(_SPECIALS) + 1,), None):
        probes = {n: _specials_like(inputs[n], shape) for n in names}
        try:
            theirs = np.asarray(eval(code, {**namespace, **probes}))
        except Exception:
            if shape is None:
                raise
            continue
        ours = np.asarray(func(*[probes[n] for n in names]))
        if ours.shape == theirs.shape:
            return ours, theirs, probes
    return ours, theirs, probes


def find_rewrite(statement: str, namespace: dict, inputs: dict[str, np.ndarray],
                 result) -> Rewrite | None:
    """A chokepoint kernel call with the statement's values, or None."""
    if not isinstance(result, np.ndarray) or result.ndim == 0:
        return None
    code = compile(statement, "<explain>", "eval")
    # a cheap look first: the candidates are elementwise, so one that differs from the result
    # on evenly spaced elements differs on all of them. The NumPy engine computes the look:
    # the first numba call of a process loads its compiler (0.45 s), paid then only for a
    # kernel that matched
    step = max(1, result.size // 65536)
    wanted = result.reshape(-1)[::step]
    for text, func, names in _candidates(inputs, result):
        args = [inputs[n] for n in names]
        try:
            with set_backend("numpy"):
                look = np.asarray(func(*[np.ascontiguousarray(a.reshape(-1)[::step])
                                         for a in args]))
            if not agreement(look, wanted)[0]:
                continue
            value = np.asarray(func(*args))
            if value.shape != result.shape or not agreement(value, result)[0]:
                continue
            ours, theirs, probes = _on_specials(code, namespace, func, inputs, names)
        except Exception:  # the statement cannot run on other values: not recognised
            continue
        if ours.shape != theirs.shape:
            continue
        nan_at = np.zeros(ours.shape, bool)
        for n in names:
            nan_at |= np.isnan(probes[n])
        with np.errstate(invalid="ignore"):
            equal = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))
        if not (equal | nan_at).all():
            continue
        note = ""
        if not equal[nan_at].all():
            first = np.flatnonzero(nan_at & ~equal)[0]
            note = (f"at NaN inputs the statement gives {theirs.reshape(-1)[first].item()!r} "
                    f"where the kernel gives {ours.reshape(-1)[first].item()!r}; equal "
                    "everywhere else")
        out_bytes = result.size * np.dtype(result.dtype).itemsize
        found = Rewrite(statement=text, call=lambda f=func, a=args: f(*a), note=note,
                        bytes=sum(a.nbytes for a in args) + out_bytes)
        if text.startswith("chokepoint.relu_grad") and result.dtype.itemsize > 1:
            narrow_text = text.split(", dtype=")[0] + ")"
            at_zero = 1 if "at_zero=1" in text else 0
            found.narrow = Rewrite(
                statement=narrow_text,
                call=lambda a=args, z=at_zero: kernels.relu_grad(*a, at_zero=z), note=note,
                bytes=sum(a.nbytes for a in args) + result.size)
        return found
    return None
