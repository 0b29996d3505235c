"""The byte model of a traced statement: what it moves, what it must move, its floor."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .trace import Trace

__all__ = ["Model", "build_model", "narrowest_dtype"]


def narrowest_dtype(values: np.ndarray) -> np.dtype:
    """The narrowest dtype that holds every value of ``values`` exactly.

    0/1 (and bool) -> bool; integers -> the smallest integer type of their range; floats that
    round-trip through float32 or float16 -> that type; otherwise the dtype itself.
    """
    values = np.asarray(values)
    if values.dtype == bool or values.size == 0:
        return np.dtype(bool) if values.dtype == bool else values.dtype
    kind = values.dtype.kind
    if kind not in "iuf":
        return values.dtype
    finite = np.isfinite(values) if kind == "f" else np.ones(values.shape, bool)
    if finite.all():
        lo, hi = values.min(), values.max()
        if lo >= 0 and hi <= 1 and np.array_equal(values, values.astype(bool)):
            return np.dtype(bool)
        if kind in "iu" or np.array_equal(values, np.round(values)):
            for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64):
                info = np.iinfo(t)
                if info.min <= lo and hi <= info.max:
                    narrow = np.dtype(t)
                    return narrow if narrow.itemsize < values.dtype.itemsize else values.dtype
    if kind == "f":
        for t in (np.float16, np.float32):
            if np.dtype(t).itemsize >= values.dtype.itemsize:
                break
            with np.errstate(over="ignore"):
                if np.array_equal(values.astype(t).astype(values.dtype), values,
                                  equal_nan=True):
                    return np.dtype(t)
    return values.dtype


@dataclass
class Model:
    """Bytes and passes of a statement.

    Attributes
    ----------
    bytes_moved : int
        Bytes read and written by all operations (views are free).
    bytes_min : int
        The statement's inputs read once plus its result written once at the narrowest dtype
        that holds its values.
    bytes_inputs : int
        The statement's inputs, read once.
    result_bytes, result_bytes_min : int
        The result as written, and at its narrowest dtype.
    narrow_dtype : numpy.dtype or None
        That narrowest dtype (None when the result is not an array).
    passes : int
        Operations that read or write memory (views excluded).
    temporaries : int
        Bytes of intermediate results (written by one operation, read by another).
    """

    bytes_moved: int
    bytes_min: int
    bytes_inputs: int
    result_bytes: int
    result_bytes_min: int
    narrow_dtype: np.dtype | None
    passes: int
    temporaries: int


def build_model(tr: Trace, inputs: dict[str, np.ndarray]) -> Model:
    """The byte model of a trace whose statement read ``inputs``."""
    ops = [op for op in tr.ops if not op.is_view]
    moved = sum(op.in_bytes + op.out_bytes for op in ops)
    used = {id(a) for op in tr.ops for a in op.inputs}
    bytes_inputs = sum(a.nbytes for a in inputs.values() if id(a) in used or not tr.ops)
    result = tr.result if isinstance(tr.result, np.ndarray) else None
    result_bytes = result.nbytes if result is not None else 0
    narrow = narrowest_dtype(result) if result is not None else None
    result_min = result.size * narrow.itemsize if result is not None else 0
    final = {id(result)} if result is not None else set()
    base_ids = {id(a) for a in inputs.values()}
    temporaries = 0
    for op in ops:
        r = op.result_array
        if r is None or id(r) in final or id(r) in base_ids or not op.allocates:
            continue
        if result is not None and np.may_share_memory(r, result):
            continue  # the result is a view of this array: not a temporary
        temporaries += r.nbytes
    return Model(bytes_moved=moved, bytes_min=bytes_inputs + result_min,
                 bytes_inputs=bytes_inputs, result_bytes=result_bytes,
                 result_bytes_min=result_min, narrow_dtype=narrow, passes=len(ops),
                 temporaries=temporaries)
