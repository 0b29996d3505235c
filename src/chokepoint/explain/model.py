"""The byte model of a traced statement: what it moves, what it must move, its floor."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .probes import WHOLE_ARRAY
from .trace import CREATIONS, Op, Trace, advanced

__all__ = ["Model", "build_model", "narrowest_dtype", "one_pass_bytes"]


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
    lo, hi = values.min(), values.max()  # NaN when any value is: min and max propagate it
    if np.isfinite(lo) and np.isfinite(hi):
        # one pass of compares, not a bool copy promoted back
        if lo >= 0 and hi <= 1 and ((values == 0) | (values == 1)).all():
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
    bytes_one_pass : int
        What one pass per step moves (:func:`one_pass_bytes`): each array read once each time
        it changes, each write that must reach memory written once. For a single expression
        this is ``bytes_inputs + result_bytes``; for a loop that rewrites an array each step,
        that array read and written once per step. 0 when not computed.
    op_needed : list of int
        Per operation of the trace (views included, as 0), its bytes that one pass needs; the
        rest of its bytes are extra passes.
    """

    bytes_moved: int
    bytes_min: int
    bytes_inputs: int
    result_bytes: int
    result_bytes_min: int
    narrow_dtype: np.dtype | None
    passes: int
    temporaries: int
    bytes_one_pass: int = 0
    op_needed: list[int] = field(default_factory=list, repr=False)


def build_model(tr: Trace, inputs: dict[str, np.ndarray]) -> Model:
    """The byte model of a trace whose statement read ``inputs``."""
    ops = [op for op in tr.ops if not op.is_view]
    moved = sum(op.in_bytes + op.out_bytes for op in ops)
    bytes_inputs = sum(_read_once(tr, inputs).values()) if tr.ops else sum(
        a.nbytes for a in inputs.values())
    result = tr.result if isinstance(tr.result, np.ndarray) else None
    result_bytes = result.nbytes if result is not None else 0
    narrow = narrowest_dtype(result) if result is not None else None
    if result is not None and any(op.name in CREATIONS and op.result_array is result
                                  for op in ops):
        # np.ones(n), np.arange(n), np.zeros_like(grid): the dtype the user asked for (its
        # values now say nothing of those the program writes into it later)
        narrow = result.dtype
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
    needed = one_pass_bytes(tr, inputs)
    return Model(bytes_moved=moved, bytes_min=bytes_inputs + result_min,
                 bytes_inputs=bytes_inputs, result_bytes=result_bytes,
                 result_bytes_min=result_min, narrow_dtype=narrow, passes=len(ops),
                 temporaries=temporaries, bytes_one_pass=sum(needed), op_needed=needed)


def _read_once(tr: Trace, inputs: dict[str, np.ndarray]) -> dict[int, int]:
    """Per input array, the bytes of it the statement reads: all of it when an operation reads
    it whole; through basic indexing, what the indexing selects (a row, a slice, one element),
    at most the array once; nothing when it is only assigned into."""
    whole: set[int] = set()
    part: dict[int, int] = {}
    for op in tr.ops:
        target = op.args[0] if op.kind == "index" and op.args else None
        basic = target is not None and len(op.args) > 1 and not advanced(op.args[1])
        for a in op.inputs:
            if basic and a is target:
                if op.name == "getitem":
                    r = op.result_array
                    part[id(a)] = part.get(id(a), 0) + (r.nbytes if r is not None
                                                         else a.itemsize)
                continue
            whole.add(id(a))
    return {id(a): a.nbytes if id(a) in whole else min(a.nbytes, part.get(id(a), 0))
            for a in inputs.values()}


def _root(a: np.ndarray) -> np.ndarray:
    """The array owning ``a``'s memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _geometry(a: np.ndarray) -> tuple:
    return a.__array_interface__["data"][0], a.shape, a.strides


def _whole_mask(op: Op) -> bool:
    """``a[mask]`` or ``a[mask] = v`` with a boolean mask of ``a``'s shape: an elementwise
    step under the mask (``z[alive] = z[alive] ** 2 + c[alive]`` is one masked loop over z, c
    and alive)."""
    target, key = op.args[0], op.args[1]
    return (isinstance(target, np.ndarray) and isinstance(key, np.ndarray)
            and key.dtype == bool and key.shape == target.shape)


def _fusable(op: Op) -> bool:
    """An elementwise pass that one fused loop could do element by element: a ufunc or an
    elementwise function whose inputs broadcast to its result, a basic assignment, a copy."""
    if op.name in ("ndarray.copy", "copy", "ndarray.astype"):
        return True
    if op.kind == "index":
        if op.name == "setitem" and not advanced(op.args[1]):
            return True
        return op.name in ("getitem", "setitem") and _whole_mask(op)
    result = op.result_array
    if op.gemm or getattr(op.func, "signature", None) or op.name in WHOLE_ARRAY:
        return False
    if str(getattr(op.func, "__module__", "")).startswith(("numpy.fft", "numpy.linalg")):
        return False
    if op.kind not in ("ufunc", "function") or "." in op.name or result is None \
            or result.ndim == 0:
        return False
    try:
        return all(np.broadcast_shapes(a.shape, result.shape) == result.shape
                   for a in op.inputs)
    except ValueError:
        return False


def _reads_writes(op: Op) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The arrays an operation reads, and the views it writes."""
    if op.name == "getitem" and len(op.args) > 1 and not advanced(op.args[1]):
        return [], []  # one element (a view is no operation)
    if op.name == "setitem":
        target, key = op.args[0], op.args[1]
        reads = [a for a in op.inputs if a is not target]
        try:
            written = target if advanced(key) else target[key]
        except (IndexError, TypeError, ValueError):
            written = target
        return reads, [written] if isinstance(written, np.ndarray) else [target]
    outs = op.kwargs.get("out")
    outs = [a for a in (outs if isinstance(outs, tuple) else (outs,))
            if isinstance(a, np.ndarray)]
    results = outs or [r for r in (op.result if isinstance(op.result, tuple) else (op.result,))
                       if isinstance(r, np.ndarray)]
    return list(op.inputs), results


def one_pass_bytes(tr: Trace, inputs: dict[str, np.ndarray]) -> list[int]:
    """Per operation of ``tr``, the bytes that one pass per step needs of it.

    "One pass" is what the same program moves when each run of consecutive elementwise
    operations is fused into one loop (an operation that is not elementwise, such as a matrix
    product, a reduction, a sort or a gather, is a run of its own). In each run every array is
    read once each time it changes (its first read after each write that reached memory), and
    a write reaches memory only when something needs it there: the final value of an input or
    of the result, a value read in another run, by an operation that is not elementwise, or
    through another view (a stencil's shifted slices), or a value written by an operation that
    is not elementwise. A temporary read back element by element in its run
    (``t = a + b; t * c``) stays in registers, and so does an in-place update read back through
    the same view (``u[1:-1] += x``, then the assignment of that slice to itself). For
    ``np.ceil(np.clip(X, 0, 1))`` that is X read once and the result written once; for ten
    steps of a stencil on ``u``, u read and written once per step.
    """
    ops = [op for op in tr.ops if not op.is_view and op.func is not None]
    persistent = {id(_root(a)) for a in inputs.values()}
    if isinstance(tr.result, np.ndarray):
        persistent.add(id(_root(tr.result)))
    sizes: dict[int, int] = {}
    version: dict[int, int] = {}
    writes: list[dict] = []  # per write: op, root, version, geometry, bytes, needed
    written_by: dict[tuple[int, int], dict] = {}
    reads: list[tuple] = []  # op index, run, root, version, array
    last: dict[int, int] = {}  # root -> its last version
    run, fused_before = 0, False
    for k, op in enumerate(ops):
        fusable = _fusable(op)
        if not (fusable and fused_before):
            run += 1  # a new loop: the first elementwise operation after another kind, or not
        fused_before = fusable
        read, wrote = _reads_writes(op)
        for a in read:
            r = _root(a)
            sizes[id(r)] = r.nbytes
            v = version.get(id(r), 0)
            reads.append((k, run, id(r), v, a))
            w = written_by.get((id(r), v))
            if w is not None and not (fusable and w["run"] == run
                                      and _geometry(a) == w["geometry"]):
                w["needed"] = True  # read in another loop, through another view, or whole
        for a in wrote:
            r = _root(a)
            sizes[id(r)] = r.nbytes
            v = version[id(r)] = version.get(id(r), 0) + 1
            last[id(r)] = v
            nbytes = op.out_bytes if op.name == "setitem" else a.nbytes
            w = {"op": k, "run": run, "root": id(r), "version": v,
                 "geometry": _geometry(a), "bytes": nbytes, "needed": not fusable}
            writes.append(w)
            written_by[id(r), v] = w
    for w in writes:
        if w["root"] in persistent and last[w["root"]] == w["version"]:
            w["needed"] = True  # the value the statement leaves behind
    needed = [0] * len(ops)
    credited: dict[tuple[int, int, int], int] = {}
    for k, run, root, v, a in reads:
        w = written_by.get((root, v))
        if w is not None and not w["needed"]:
            continue  # a value the fused loop keeps in registers
        key = (run, root, v)
        take = min(a.nbytes, sizes[root] - credited.get(key, 0))
        if take > 0:
            credited[key] = credited.get(key, 0) + take
            needed[k] += take
    for w in writes:
        if w["needed"]:
            needed[w["op"]] += w["bytes"]
    index = {id(op): k for k, op in enumerate(ops)}
    return [min(needed[index[id(op)]], op.in_bytes + op.out_bytes) if id(op) in index else 0
            for op in tr.ops]
