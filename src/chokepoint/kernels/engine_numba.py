"""numba engine: one ``prange`` kernel generated per operation from :data:`~.ops.OPS`.

The kernels work on flat, C-contiguous 1-D arrays; :mod:`.layout` makes them. Each operation's
loop is generated from its expression (not written out per dtype): numba specialises the one
kernel for every dtype it meets, and caches the machine code on disk (``cache=True``), so a new
process with a warm cache pays about 0.1 s for its first calls instead of a compile.

Safety:

* No ``fastmath``: it would let LLVM drop NaN checks, the sign of zero and subnormals.
* ``error_model="numpy"``: a division is IEEE's (a zero divisor gives inf or NaN, as in NumPy
  and torch) instead of a check that raises. The check's branch kept LLVM from vectorising the
  serial loops of SiLU and softplus.
* Parallel launches take one process-wide lock. numba's ``workqueue`` threading layer aborts
  when two Python threads launch parallel kernels at once; with the lock any layer is safe, and on
  a memory-bound kernel that already uses every core the lock costs nothing. The fast path's
  parallel calls skip it once a launch showed a thread-safe layer (omp, tbb:
  ``settings.lock_free``).
* After ``fork()``, a child whose parent had started GNU OpenMP (numba's ``omp`` layer) cannot
  start it again; there the kernels run serially instead of aborting the child
  (``settings.serial_only``).
* Arrays of fewer than ``settings.parallel_min`` elements run the serial kernel: a parallel
  launch costs more than the work.

How a call runs is decided from one immutable :class:`Settings` value (:data:`settings`),
replaced whole by :func:`configure` and handed to the C path each time.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import operator
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .. import jit
from ..measure.machine import last_level_cache_bytes
from . import native as _native
from . import ops as _ops
from . import tuning as _tuning
from . import vecmath, vocabulary
from .adaptive import Chooser
from .ops import OPS

__all__ = [
    "CHECKED_MAX",
    "NAME",
    "Settings",
    "binary",
    "can_stream",
    "candidates",
    "chooser_key",
    "chosen",
    "configure",
    "configured",
    "has_stream_variant",
    "kernel_for",
    "launch",
    "launch_lock",
    "mask_backward",
    "mask_forward",
    "native_kernel",
    "noinline",
    "settings",
    "settings_lock",
    "stream8",
    "stream_step",
    "streamable",
    "streams",
    "streams_into",
    "unary",
]

NAME = "numba"
#: A hash of the modules whose code the kernels inline or are generated from, part of every
#: kernel's name. numba's disk cache tells a kernel's versions apart by the time stamp of the
#: file that defines it (this one) and by its own bytecode, not by the functions it calls: a
#: changed vecmath.exp alone would load the old machine code (seen: an edited float32 ndtr
#: timed as the old one). fuse's kernels carry it too.
DEPENDENCIES = hashlib.sha1(b"".join(Path(m.__file__).read_bytes()
                                     for m in (vecmath, vocabulary, _ops))).hexdigest()[:12]
#: Up to this many elements the fast path (and the C path) runs the chooser's decided variant
#: itself (its :class:`~.adaptive.Decision` in hand), with the checked kernels; a map's call
#: that can stream goes to the launcher from the fast path, and runs in the C path with its
#: streaming cfunc.
CHECKED_MAX = (16 << 20) // 8


@dataclasses.dataclass(frozen=True)
class Settings:
    """How calls run on this machine, now: one value, replaced whole by :func:`configure`.

    Attributes
    ----------
    parallel_min : int
        Calls of fewer elements run the serial kernel (the tuning measures it: below, a
        parallel launch costs more than the work).
    stream_min_bytes : int
        A call whose arrays together take at least this many bytes (the last-level cache's
        size) may write its output with non-temporal stores (:func:`can_stream`): they would
        not stay in the cache anyway, and streaming skips reading each output line first.
    stream_maps, stream_masks : bool
        Whether the maps (the mask kernels) have streaming variants to weigh here (the tuning
        found streaming faster on this machine).
    lock_free : bool
        Whether parallel kernels may run without the launch lock: True once a parallel launch
        showed a thread-safe threading layer (omp or tbb; numba's workqueue is not).
    serial_only : bool
        True in a forked child that cannot start parallel kernels: every kernel, fuse's too,
        runs its serial variant there.
    """

    parallel_min: int = 1 << 16
    stream_min_bytes: int = 32 << 20
    stream_maps: bool = True
    stream_masks: bool = True
    lock_free: bool = False
    serial_only: bool = False

    def __post_init__(self) -> None:
        # checked here, so that a value the C path cannot take is refused before anything
        # changes: integers (NumPy's too, not floats), and flags as their truth
        for name in ("parallel_min", "stream_min_bytes"):
            object.__setattr__(self, name, operator.index(getattr(self, name)))
        if self.parallel_min < 0:
            raise ValueError(f"parallel_min must be at least 0, got {self.parallel_min}")
        for name in ("stream_maps", "stream_masks", "lock_free", "serial_only"):
            object.__setattr__(self, name, bool(getattr(self, name)))


#: the settings every call reads (see :func:`configure`)
settings = Settings(stream_min_bytes=last_level_cache_bytes())
#: held while settings are replaced and handed to the C path: one thread's change cannot be
#: overtaken by an older value (the C extension's load hands them over too)
settings_lock = threading.RLock()


def configure(**changes) -> Settings:
    """Replace fields of :data:`settings` (the others kept) and hand the new value to the C
    path; returns the previous value (``configure(**dataclasses.asdict(old))`` restores
    it; :func:`configured` does so for a block). A bad value raises (TypeError, ValueError)
    with nothing changed; ``configure()`` hands the current value over again."""
    global settings
    with settings_lock:
        was = settings
        new = dataclasses.replace(settings, **changes)
        _native.push(new)
        settings = new
    return was


@contextlib.contextmanager
def configured(**changes) -> Iterator[Settings]:
    """:data:`settings` with ``changes`` inside a ``with`` block; after it, those fields as
    they were (a field changed inside the block, ``lock_free`` learnt by a first launch or
    ``serial_only`` set in a forked child, stays)."""
    was = configure(**changes)
    try:
        yield settings
    finally:
        configure(**{name: getattr(was, name) for name in changes})


# An elementwise map over one array (x) or two (grad, x); the lanes load what the op reads.
_MAP = """
def {fname}({arrays}, out, {params}):
    for i in {loop}(out.shape[0]):
{loads}
        out[i] = {expr}
"""
_LOADS = {1: "        v = x[i]", 2: "        v = x[i]\n        g = grad[i]"}
_ARRAYS = {1: "x", 2: "grad, x"}

# The parallel variant of a compute-bound map (exp, erf, ...: not the select-only ops): each
# thread runs the serial kernel on chunks of CHUNK elements, called without inlining (see
# noinline). Inlined into numba's parallel loop, the same expression compiled to 102
# instructions per 8 float32 GELUs instead of the serial loop's 58: there LLVM reloaded and
# re-broadcast its ~25 constants every iteration (an absolute address, then a broadcast),
# where the serial loop keeps them in registers or stack slots.
CHUNK = 8192
_MAP_CHUNKED = """
def {fname}({arrays}, out, {params}):
    n = out.shape[0]
    for c in prange((n + {chunk} - 1) // {chunk}):
        s = c * {chunk}
        e = min(s + {chunk}, n)
        serial({slices}, out[s:e], {params})
"""

# The fast path's calls below the size where streaming can pay (api.call_fast): C-contiguous arrays
# of one dtype (the caller checks what the dispatcher cannot tell apart), any number of
# dimensions. Shapes and overlap are checked here, far cheaper than in Python: it returns
# False, having written nothing, when the general path must take the
# call (a partial overlap is computed there through a buffer; exactly in place is fine). The
# body is the serial kernel ("checked", which LLVM inlines) or the parallel one
# ("checked_parallel").
_MAP_CHECKED = """
def {fname}({arrays}, out, {params}):
    if {shapes}:
        return False
    n = out.size
    o = out.ctypes.data
{overlaps}
    body({flats}, out.reshape(n), {params})
    return True
"""
_OVERLAP = """    p = {a}.ctypes.data
    if o < p + {a}.nbytes and p < o + out.nbytes and (o != p or {a}.itemsize != out.itemsize):
        return False"""

# One byte of the mask per iteration: bit k of byte j is element 8 * j + k (little bit order,
# as np.packbits(..., bitorder="little")). Each whole byte is one vector step (relu8: a load, a
# compare whose 8 lanes are the byte, a select, a store); the last partial byte is scalar (a
# scalar byte loop, a shift and an or per element, was no faster than NumPy).
_MASK_FORWARD = """
def {fname}(x, y, bits, zero):
    n = x.shape[0]
    for j in {loop}(n // 8):
        bits[j] = {relu8}(x, y, np.uint64(8) * np.uint64(j), zero)
    start = n - n % 8
    if start < n:
        byte = 0
        for i in range(start, n):
            v = x[i]
            y[i] = {relu}
            byte |= np.uint8({passes}) << np.uint8(i - start)
        bits[n // 8] = byte
"""

# Streaming variants (large outputs): 16 results per iteration, one vector step (step16: the
# op's expression on vectors, see _vector_step), written with 16-byte non-temporal stores, so
# the output's cache lines are not read before being overwritten; 16 lanes fill whole stores
# of 1-byte results too (relu_grad's uint8 and bool). They cover the first 16 * (n // 16)
# elements; the serial kernel finishes the tail. Indices are unsigned: a signed index makes
# numba emit a negative-index wraparound per access. Scalar lanes per iteration stayed scalar
# code, and could not fill a whole store with 1-byte results.
_MAP_STREAM = """
def {fname}({arrays}, out, {params}):
    for j in prange(out.shape[0] // 16):
        step16({arrays}, out, np.uint64(16) * np.uint64(j), {params})
"""

# The streaming mask forward: each whole byte one step of relu8_stream (relu8 with non-temporal
# stores); the last partial byte is the serial kernel's (launch's tail). A byte loop of scalar
# compares ahead of scalar lanes was slower than the parallel kernel's relu8 steps.
_MASK_FORWARD_STREAM = """
def {fname}(x, y, bits, zero):
    for j in prange(x.shape[0] // 8):
        bits[j] = {relu8}(x, y, np.uint64(8) * np.uint64(j), zero)
"""
# The backward from the mask: one byte of bits selects 8 elements of grad at once (see
# _select8: a vector load, the byte's bits as a lane mask, one select, one store), where a
# byte loop of scalar selects was vectorised across bytes with a shuffle per element.
# The streaming variant, as the others, covers the whole bytes and leaves the last partial one
# to the serial kernel (launch's tail).
_MASK_BACKWARD_STREAM = """
def {fname}(grad, bits, out, zero):
    n = out.shape[0]
    for j in {loop}(n // 8):
        select8_stream(grad, bits[j], out, np.uint64(8) * np.uint64(j), zero)
"""
_MASK_BACKWARD = _MASK_BACKWARD_STREAM.replace("select8_stream(", "select8(") + """\
    for i in range(n - n % 8, n):  # the last partial byte
        out[i] = select((bits[i // 8] >> np.uint8(i % 8)) & np.uint8(1), grad[i], zero)
"""


# The fast path's calls of the mask kernels (as _MAP_CHECKED): C-contiguous arrays of any
# number of dimensions, checked here; False, with nothing written, sends the call to the
# general path. y may be x itself; the bits never overlap y or out. The arguments come in the
# fast path's order (api.call_fast: the arrays, the output, the rest): the backward's bits
# before grad, the forward's bits after y.
_MASK_FORWARD_CHECKED = """
def {fname}(x, y, bits, zero):
    n = x.size
    if x.shape != y.shape or bits.shape[0] != (n + 7) // 8:
        return False
    o = y.ctypes.data
    p = x.ctypes.data
    if o < p + x.nbytes and p < o + y.nbytes and o != p:
        return False
    b = bits.ctypes.data
    if b < o + y.nbytes and o < b + bits.nbytes:
        return False
    body(x.reshape(n), y.reshape(n), bits, zero)
    return True
"""

_MASK_BACKWARD_CHECKED = """
def {fname}(bits, grad, out, zero):
    n = out.size
    if grad.shape != out.shape or bits.shape[0] != (n + 7) // 8:
        return False
    o = out.ctypes.data
    p = grad.ctypes.data
    if o < p + grad.nbytes and p < o + out.nbytes and o != p:
        return False
    b = bits.ctypes.data
    if b < o + out.nbytes and o < b + bits.nbytes:
        return False
    body(grad.reshape(n), bits, out.reshape(n), zero)
    return True
"""


def _select8_codegen(nontemporal: bool):
    def codegen(context, builder, sig, args):
        grad_t, _, out_t, _, zero_t = sig.args
        grad, byte, out, index, zero = args
        element = context.get_data_type(out_t.dtype)
        vector = ir.VectorType(element, 8)
        src = cgutils.get_item_pointer(context, builder, grad_t,
                                       context.make_array(grad_t)(context, builder, grad),
                                       [index], wraparound=False)
        dst = cgutils.get_item_pointer(context, builder, out_t,
                                       context.make_array(out_t)(context, builder, out),
                                       [index], wraparound=False)
        size = context.get_abi_sizeof(element)
        loaded = builder.load(builder.bitcast(src, vector.as_pointer()), align=size)
        i8x8 = ir.VectorType(ir.IntType(8), 8)
        lanes = builder.and_(_splat(builder, byte, i8x8),
                             ir.Constant(i8x8, [1 << k for k in range(8)]))
        mask = builder.icmp_unsigned("!=", lanes, ir.Constant(i8x8, [0] * 8))
        fills = _splat(builder, context.cast(builder, zero, zero_t, out_t.dtype), vector)
        _store8(builder, builder.select(mask, loaded, fills), dst, element, size, nontemporal)
        return context.get_dummy_value()

    return codegen


def _splat(builder, value, vector: ir.VectorType):
    """``value`` in every lane of ``vector``."""
    one = builder.insert_element(ir.Constant(vector, ir.Undefined), value,
                                 ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(one, ir.Constant(vector, ir.Undefined), ir.Constant(
        ir.VectorType(ir.IntType(32), vector.count), [0] * vector.count))


def _compare(builder, dtype, op: str, a, b, nan_passes: bool = False):
    """``a op b`` lane by lane for numba ``dtype`` values; with ``nan_passes`` a NaN lane
    compares true (unordered), else false."""
    if isinstance(dtype, types.Float):
        return (builder.fcmp_unordered if nan_passes else builder.fcmp_ordered)(op, a, b)
    return (builder.icmp_signed if dtype.signed else builder.icmp_unsigned)(op, a, b)


def _store8(builder, values, dst, element, size: int, nontemporal: bool) -> None:
    """Store the vector ``values`` (8 lanes, or 16) at ``dst``: one store, or with
    ``nontemporal`` 16-byte non-temporal stores, as :func:`stream8`'s (8 lanes of 1-byte
    elements: 8 bytes, one plain store)."""
    lanes = values.type.count
    vector = ir.VectorType(element, lanes)
    if not nontemporal or size * lanes < 16:
        builder.store(values, builder.bitcast(dst, vector.as_pointer()), align=size)
        return
    per_store = 16 // size
    part = ir.VectorType(element, per_store)
    metadata = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
    for first in range(0, lanes, per_store):
        piece = builder.shuffle_vector(values, ir.Constant(vector, ir.Undefined),
                                       ir.Constant(ir.VectorType(ir.IntType(32), per_store),
                                                   list(range(first, first + per_store))))
        where = builder.gep(dst, [ir.Constant(ir.IntType(64), first)])
        store = builder.store(piece, builder.bitcast(where, part.as_pointer()), align=16)
        store.set_metadata("nontemporal", metadata)


def _relu8_codegen(at_zero: bool, nontemporal: bool = False):
    def codegen(context, builder, sig, args):
        x_t, y_t, _, zero_t = sig.args
        x, y, index, zero = args
        element = context.get_data_type(x_t.dtype)
        vector = ir.VectorType(element, 8)
        size = context.get_abi_sizeof(element)
        src, dst = (cgutils.get_item_pointer(context, builder, t, context.make_array(t)(
            context, builder, a), [index], wraparound=False) for t, a in ((x_t, x), (y_t, y)))
        v = builder.load(builder.bitcast(src, vector.as_pointer()), align=size)
        zeros = _splat(builder, context.cast(builder, zero, zero_t, x_t.dtype), vector)
        # relu: select(v < zero, zero, v) keeps -0.0 and NaN, as OPS["relu"]; the
        # derivative's bit: logical_not(v <= zero) (or < with at_zero): NaN passes (the
        # integer inputs relu_with_mask takes compare signed or unsigned)
        below = _compare(builder, x_t.dtype, "<", v, zeros)
        passes = _compare(builder, x_t.dtype, ">=" if at_zero else ">", v, zeros, True)
        _store8(builder, builder.select(below, zeros, v), dst, element, size, nontemporal)
        return builder.bitcast(passes, ir.IntType(8))

    return codegen


_COMPARISONS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                ast.NotEq: "!="}
_ARITHMETIC = {ast.Mult: ("fmul", "mul"), ast.Add: ("fadd", "add"), ast.Sub: ("fsub", "sub")}
_LOGICAL = {"select": "select", "logical_not": "not_", "logical_and": "and_"}


def _vector_expr(builder, node: ast.AST, values: dict, dtype):
    """LLVM vector code for the expression ``node`` of a select-only op (see
    :func:`_vectorisable`): ``values`` maps each name (v, g, the parameters) to a vector of
    numba ``dtype``. Each operation means what it does in the scalar kernel: ordered float
    comparisons (NaN compares false, except ``!=``), selects, and and not on booleans,
    arithmetic in ``dtype``."""
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        op = _COMPARISONS[type(node.ops[0])]
        return _compare(builder, dtype, op, _vector_expr(builder, node.left, values, dtype),
                        _vector_expr(builder, node.comparators[0], values, dtype), op == "!=")
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        name = _ARITHMETIC[type(node.op)][not isinstance(dtype, types.Float)]
        return getattr(builder, name)(_vector_expr(builder, node.left, values, dtype),
                                      _vector_expr(builder, node.right, values, dtype))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _LOGICAL):
        args = [_vector_expr(builder, a, values, dtype) for a in node.args]
        return getattr(builder, _LOGICAL[node.func.id])(*args)
    raise NotImplementedError(f"no vector step for {ast.unparse(node)!r}")


def _vector_step(op) -> Callable:
    """The streaming variant's step for map ``op``: an intrinsic ``step16(*arrays, out, index,
    *params)`` that computes ``out[index + k]`` for k < 16 as one vector load per array, the
    expression on vectors (:func:`_vector_expr`) and 16-byte non-temporal stores (``index`` a
    multiple of 16, ``out`` 16-byte aligned: :func:`can_stream`). A boolean result (relu_grad)
    becomes 0 or 1 in ``out``'s dtype."""
    tree = ast.parse(op.expr, mode="eval").body
    names = ("g", "v") if op.arity == 2 else ("v",)

    def codegen(context, builder, sig, args):
        arity = op.arity
        array_types, out_t = sig.args[:arity], sig.args[arity]
        index = args[arity + 1]
        dtype = array_types[-1].dtype  # x's: the computation type (grad's is the same)
        element = context.get_data_type(dtype)
        vector = ir.VectorType(element, 16)

        def pointer(t, a):
            return cgutils.get_item_pointer(context, builder, t, context.make_array(t)(
                context, builder, a), [index], wraparound=False)

        values = {name: builder.load(builder.bitcast(pointer(t, a), vector.as_pointer()),
                                     align=context.get_abi_sizeof(element))
                  for name, t, a in zip(names, array_types, args[:arity], strict=True)}
        for name, t, value in zip(op.params, sig.args[arity + 2:], args[arity + 2:],
                                  strict=True):
            values[name] = _splat(builder, context.cast(builder, value, t, dtype), vector)
        result = _vector_expr(builder, tree, values, dtype)
        target = context.get_data_type(out_t.dtype)
        if result.type.element == ir.IntType(1):  # a 0/1 derivative
            lanes = ir.VectorType(target, 16)
            result = (builder.uitofp(result, lanes) if isinstance(out_t.dtype, types.Float)
                      else builder.zext(result, lanes))
        elif out_t.dtype != dtype:  # the kernels' callers give out the inputs' dtype
            raise TypeError(f"{op.name}: no streaming step from {dtype} into {out_t.dtype}")
        _store8(builder, result, pointer(out_t, args[arity]), target,
                context.get_abi_sizeof(target), True)
        return context.get_dummy_value()

    def typer(typingctx, *args):
        return types.void(*args), codegen

    return _intrinsic(typer, op.arity + 2 + len(op.params))


def _intrinsic(typer: Callable, arity: int):
    """An intrinsic of ``arity`` arguments whose typing is ``typer(typingctx, *args)``: numba
    lowers an intrinsic's arguments one by one (not as ``*args``), so it needs a fixed
    signature, written out here."""
    names = ", ".join(f"a{k}" for k in range(arity))
    namespace = {"typer": typer}
    exec(f"def call(typingctx, {names}):\n    return typer(typingctx, {names})\n", namespace)
    return intrinsic(namespace["call"])


@intrinsic
def _relu8(typingctx, x, y, index, zero):
    """``y[index + k] = relu(x[index + k])`` for k < 8 (one vector load, select and store),
    and the byte whose bit k is ``x[index + k] > zero`` or NaN: the mask forward's step
    (``index`` a multiple of 8, within both arrays; ``y`` may be ``x``)."""
    return types.uint8(x, y, index, zero), _relu8_codegen(False)


@intrinsic
def _relu8_at_zero(typingctx, x, y, index, zero):
    """:func:`_relu8` with the bit ``x[index + k] >= zero`` or NaN."""
    return types.uint8(x, y, index, zero), _relu8_codegen(True)


@intrinsic
def _relu8_stream(typingctx, x, y, index, zero):
    """:func:`_relu8` with 16-byte non-temporal stores (``y`` 16-byte aligned, as
    :func:`can_stream` checks)."""
    return types.uint8(x, y, index, zero), _relu8_codegen(False, True)


@intrinsic
def _relu8_at_zero_stream(typingctx, x, y, index, zero):
    """:func:`_relu8_at_zero` with 16-byte non-temporal stores."""
    return types.uint8(x, y, index, zero), _relu8_codegen(True, True)


@intrinsic
def _select8(typingctx, grad, byte, out, index, zero):
    """``out[index + k] = grad[index + k] if bit k of byte else zero`` for k < 8, as one vector
    load, select and store (``index`` a multiple of 8, within both arrays)."""
    return types.void(grad, byte, out, index, zero), _select8_codegen(False)


@intrinsic
def _select8_stream(typingctx, grad, byte, out, index, zero):
    """:func:`_select8` with 16-byte non-temporal stores (``out`` 16-byte aligned, as
    :func:`can_stream` checks)."""
    return types.void(grad, byte, out, index, zero), _select8_codegen(True)


@intrinsic
def stream8(typingctx, arr, index, v0, v1, v2, v3, v4, v5, v6, v7):
    """Store v0..v7 at arr[index:index + 8] with 16-byte non-temporal stores.

    16-byte stores need only 16-byte alignment, which NumPy's allocator gives every array;
    callers check the address (:func:`can_stream`). Four (float64) or two (float32) stores fill
    consecutive parts of a cache line, which the CPU's write-combining buffers merge.
    """
    def codegen(context, builder, sig, args):
        arrty = sig.args[0]
        ary = context.make_array(arrty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, arrty, ary, [args[1]],
                                       wraparound=False)
        element = context.get_data_type(arrty.dtype)
        per_store = 16 // context.get_abi_sizeof(element)
        vector = ir.VectorType(element, per_store)
        nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        values = [context.cast(builder, v, t, arrty.dtype)
                  for v, t in zip(args[2:], sig.args[2:], strict=True)]
        for first in range(0, 8, per_store):
            packed = ir.Constant(vector, ir.Undefined)
            for k in range(per_store):
                packed = builder.insert_element(packed, values[first + k],
                                                ir.Constant(ir.IntType(32), k))
            where = builder.gep(ptr, [ir.Constant(ir.IntType(64), first)])
            store = builder.store(packed, builder.bitcast(where, vector.as_pointer()), align=16)
            store.set_metadata("nontemporal", nontemporal)
        return context.get_dummy_value()

    return types.void(arr, index, *([arr.dtype] * 8)), codegen


def noinline(dispatcher, arity: int):
    """An intrinsic that calls ``dispatcher`` (a jitted function) with its ``arity``
    arguments, and that LLVM may not inline: the call instruction carries ``noinline``, so the
    callee keeps the code it was compiled to on its own (see :data:`_MAP_CHUNKED`)."""
    callee = types.Dispatcher(dispatcher)

    def typer(typingctx, *args):
        sig = typingctx.resolve_function_type(callee, args, {})

        def codegen(context, builder, signature, values):
            name = dispatcher.overloads[sig.args].fndesc.llvm_func_name
            result = context.get_function(callee, sig)(builder, values)
            for block in builder.function.blocks:
                for instruction in block.instructions:
                    if (isinstance(instruction, ir.CallInstr)
                            and getattr(instruction.callee, "name", None) == name):
                        instruction.attributes.add("noinline")
            return result

        return sig, codegen

    return _intrinsic(typer, arity)


_NAMESPACE = {
    "__name__": __name__,  # numba's cache rebuilds a kernel's globals by importing this module
    "np": np,
    "prange": numba.prange,
    "stream8": stream8,
    "select8": _select8,
    "relu8": _relu8,
    "relu8_at_zero": _relu8_at_zero,
    "relu8_stream": _relu8_stream,
    "relu8_at_zero_stream": _relu8_at_zero_stream,
    "select8_stream": _select8_stream,
    **vocabulary.numba_functions(),
}
_kernels: dict[tuple[str, str], Callable] = {}
#: serial or parallel per kernel and size class, from the calls' own times
chooser = Chooser()
_compile_lock = threading.Lock()
#: held by every parallel launch, here and in fuse (numba's workqueue layer aborts when two
#: threads launch at once; see the module notes); replaced in a forked child
launch_lock = threading.Lock()


def _param_list(op) -> str:
    """The kernel's constant arguments: the op's own parameters, in :attr:`Op.params` order."""
    return ", ".join(op.params)


def _source(name: str, fname: str, mode: str) -> str:
    """Python source of kernel ``name`` in ``mode`` ("serial", "parallel", "stream", or
    "checked" and "checked_parallel": the fast path's calls, see :data:`_MAP_CHECKED`)."""
    loop = "range" if mode == "serial" else "prange"
    stream = mode == "stream"
    if name in OPS:
        op = OPS[name]
        if mode in _CHECKED:
            arrays = _ARRAYS[op.arity].split(", ")
            return _MAP_CHECKED.format(
                fname=fname, arrays=", ".join(arrays), params=_param_list(op),
                shapes=" or ".join(f"{a}.shape != out.shape" for a in arrays),
                overlaps="\n".join(_OVERLAP.format(a=a) for a in arrays),
                flats=", ".join(f"{a}.reshape(n)" for a in arrays))
        if _chunked(name, mode):
            return _MAP_CHUNKED.format(
                fname=fname, arrays=_ARRAYS[op.arity], params=_param_list(op), chunk=CHUNK,
                slices=", ".join(f"{a}[s:e]" for a in _ARRAYS[op.arity].split(", ")))
        if stream:
            return _MAP_STREAM.format(fname=fname, arrays=_ARRAYS[op.arity],
                                      params=_param_list(op))
        return _MAP.format(fname=fname, arrays=_ARRAYS[op.arity], loop=loop,
                           params=_param_list(op),
                           loads=_LOADS[op.arity], expr=op.expr)
    if name in ("mask_forward", "mask_forward_at_zero"):
        fields = {"relu": OPS["relu"].expr,
                  "passes": OPS[name.replace("mask_forward", "relu_grad")].expr}
        if stream:
            return _MASK_FORWARD_STREAM.format(fname=fname, relu8=name.replace(
                "mask_forward", "relu8") + "_stream")
        if mode in _CHECKED:
            return _MASK_FORWARD_CHECKED.format(fname=fname)
        return _MASK_FORWARD.format(fname=fname, loop=loop, relu8=name.replace(
            "mask_forward", "relu8"), **fields)
    if name == "mask_backward":
        if mode in _CHECKED:
            return _MASK_BACKWARD_CHECKED.format(fname=fname)
        template = _MASK_BACKWARD_STREAM if stream else _MASK_BACKWARD
        return template.format(fname=fname, loop="range" if mode == "serial" else "prange")
    raise KeyError(name)


def _kernel(name: str, mode: str) -> Callable:
    """The compiled kernel for ``name`` in ``mode``, generated and jitted on first use."""
    key = (name, mode)
    kernel = _kernels.get(key)
    if kernel is None:
        # a chunked kernel calls the serial one, a checked map its variant's (made first: the
        # lock is held below)
        chunked = _chunked(name, mode)
        serial = _kernel(name, "serial") if chunked else None
        body = _kernel(name, _CHECKED[mode]) if mode in _CHECKED else None
        with _compile_lock:
            kernel = _kernels.get(key)
            if kernel is None:
                fname = f"_{name}_{mode}_{DEPENDENCIES}"
                namespace = dict(_NAMESPACE)
                if chunked:
                    op = OPS[name]
                    namespace["serial"] = noinline(serial, op.arity + 1 + len(op.params))
                if body is not None:
                    namespace["body"] = body
                if mode == "stream" and name in OPS:
                    namespace["step16"] = _vector_step(OPS[name])
                # The file name ties numba's on-disk cache to this module: it is invalidated
                # when this file changes, and each kernel is keyed by its name and bytecode.
                exec(compile(_source(name, fname, mode), __file__, "exec"), namespace)
                parallel = mode in ("parallel", "stream")
                kernel = jit.njit(namespace[fname], parallel=parallel, nogil=True,
                                  error_model="numpy")
                _kernels[key] = kernel
    return kernel


#: the fast path's checked modes, and the variant each one runs
_CHECKED = {"checked": "serial", "checked_parallel": "parallel"}


def _chunked(name: str, mode: str) -> bool:
    """Whether kernel ``name``'s ``mode`` variant runs the serial one on chunks
    (:data:`_MAP_CHUNKED`): the parallel variant of a map that is not select-only."""
    return mode == "parallel" and name in OPS and not _STREAMING_OPS[name]


def has_stream_variant(name: str) -> bool:
    """Whether map ``name`` has a streaming variant worth running (:func:`_vectorisable`)."""
    return name in OPS and _STREAMING_OPS[name]


def streams(name: str) -> bool:
    """Whether map ``name`` streams on this machine: it has a streaming variant, and the
    tuning found streaming faster (see :func:`can_stream`)."""
    return settings.stream_maps and has_stream_variant(name)


def can_stream(name: str, inputs: tuple, out: np.ndarray | None, out_dtype=None) -> bool:
    """Whether kernel ``name``'s call on ``inputs`` (the arrays it reads) may write ``out``
    with non-temporal stores (None: a new array of ``out_dtype``, which NumPy aligns).

    Where the op has a streaming variant worth running (:func:`_vectorisable`, and the tuning
    found streaming faster on this machine: :mod:`.tuning`), the arrays together take at
    least ``settings.stream_min_bytes``, ``out``'s itemsize is one the variant writes whole 16-byte
    stores of, and ``out`` is 16-byte aligned. A map's ``out`` must not be one of its inputs
    (in place): those lines were just read into the cache, and streaming them out cost
    1.2-3.7x against plain stores on an AMD EPYC (benchmarks/stream_variants.py). The mask
    kernels stream in place too, because their plain variants are the slower ones there.
    """
    if name in OPS:
        if not streams(name):
            return False
        apart = inputs
    elif not settings.stream_masks:
        return False
    else:
        apart = ()
    if out is not None:
        return streamable(out, inputs, apart, _stream_sizes(name))
    itemsize = np.dtype(out_dtype).itemsize  # a new array: NumPy aligns it
    return (itemsize in _stream_sizes(name)
            and sum(a.nbytes for a in inputs) + inputs[0].size * itemsize
            >= settings.stream_min_bytes)


def streams_into(out: np.ndarray, operands) -> bool:
    """Whether another kernel's flat elementwise call (fuse's) may write ``out`` with
    non-temporal stores: the tuning found streaming the maps faster on this machine, and
    ``out`` is :func:`streamable` apart from its ``operands``."""
    return settings.stream_maps and streamable(out, operands, operands)


def streamable(out: np.ndarray, inputs, apart, sizes: tuple = (4, 8)) -> bool:
    """Whether ``out`` can take non-temporal stores: its itemsize one of ``sizes``, 16-byte
    aligned, sharing no memory with the arrays in ``apart``, and with the arrays in
    ``inputs`` at least ``settings.stream_min_bytes`` (see :func:`can_stream`)."""
    # the cheap tests first: the fast path asks this of every mid-size call it takes
    return (out.itemsize in sizes
            and out.nbytes + sum(a.nbytes for a in inputs if isinstance(a, np.ndarray))
            >= settings.stream_min_bytes
            and out.ctypes.data % 16 == 0
            and not any(isinstance(a, np.ndarray) and np.may_share_memory(a, out)
                        for a in apart))


def chooser_key(name: str, stream: bool):
    """The chooser's name for kernel ``name``'s calls: those that can stream apart, with
    figures of their own. A size class holds calls whose arrays outgrow the cache beside
    smaller or in-place ones that cannot stream; shared, the parallel kernel's figure from
    cache-resident calls would be weighed against streaming ones."""
    return (name, "stream") if stream else name


def candidates(stream: bool) -> tuple[str, tuple[str, ...]]:
    """The chooser's candidates (default, others) for a call: one that can stream weighs the
    plain parallel kernel beside the streaming one, since whether non-temporal stores pay
    depends on the CPU, the kernel and the output (the tuning measured one kernel)."""
    return ("stream", ("parallel", "serial")) if stream else ("parallel", ("serial",))


def stream_step(name: str) -> int:
    """How many elements one step of kernel ``name``'s streaming variant writes: the variant
    covers the first ``n - n % step`` of them, and the serial kernel the rest."""
    return 16 if name in OPS else 8


def _stream_sizes(name: str) -> tuple:
    """The output itemsizes kernel ``name``'s streaming variant writes whole 16-byte stores
    of (16 lanes for the maps; the mask kernels' 8 lanes of 1-byte elements make 8 bytes)."""
    return (1, 2, 4, 8) if name in OPS else (4, 8)


def _vectorisable(op) -> bool:
    """Whether ``op`` is selects, single comparisons and ``+ - *`` only (the ReLU
    family): what :func:`_vector_step` writes as vector code, so the ops that have a streaming
    variant. An integer op must have no arithmetic (numba's scalar kernels compute integers
    in int64, the vector step in the input's width).

    The compute-bound ones gain nothing from streaming: their time is the arithmetic.
    """
    for node in ast.walk(ast.parse(op.expr, mode="eval")):
        if isinstance(node, ast.Call):
            if (not isinstance(node.func, ast.Name) or node.func.id not in _LOGICAL
                    or node.keywords):
                return False
        elif isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                return False
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _ARITHMETIC or op.integers:
                return False
        elif not isinstance(node, (ast.Expression, ast.Name, ast.Load, *_COMPARISONS,
                                   *_ARITHMETIC)):
            return False
    return True


def _inputs(name: str, args: tuple) -> tuple:
    """The arrays kernel ``name`` reads, from its arguments (see :func:`launch`)."""
    if name in OPS:
        return args[:OPS[name].arity]
    if name == "mask_backward":
        return args[:2]  # grad, bits
    return args[:1]  # the mask forward's x


def apply_tuning(tuned) -> None:
    """Use the variant choices of a :class:`~chokepoint.kernels.tuning.Tuning`."""
    configure(parallel_min=int(tuned.parallel_min), stream_maps=bool(tuned.stream_maps),
              stream_masks=bool(tuned.stream_masks))


@contextlib.contextmanager
def chosen(name, n: int, stream: bool, signature: tuple = (), count: bool = True
           ) -> Iterator[str]:
    """The launcher: the variant a call of kernel ``name`` on ``n`` elements runs (a ``with``
    block runs it), from :data:`settings` and the chooser (serial, parallel or streaming from
    what the calls took on this machine, now: a busy core makes a parallel call wait for a
    time slice; see :mod:`.adaptive`), under the launch lock. ``stream``: whether the call
    can stream (:func:`can_stream`); ``signature``: the compiled kernel's (its first call is
    not counted); ``count``: whether the untimed calls count in the decision
    (:meth:`.Chooser.timing`). fuse's kernels run through it too."""
    if n < settings.parallel_min or settings.serial_only:
        yield "serial"
        return
    wide, others = candidates(stream)
    with launch_lock:
        with chooser.timing(chooser_key(name, stream), n, wide, others, signature,
                            count) as mode:
            yield mode
        if not settings.lock_free and mode != "serial":
            _learn_layer()


def launch(name: str, out: np.ndarray, *args) -> None:
    """Run kernel ``name`` over ``args``; ``out`` is the array it writes (the last for masks)."""
    n = out.shape[0]
    if n == 0:
        return
    if n < settings.parallel_min or settings.serial_only:  # chosen's answer, without its cost
        _kernel(name, "serial")(*args)
        return
    stream = can_stream(name, _inputs(name, args), out)
    # the first input's dtype and the output's name the compiled signature
    with chosen(name, n, stream, (args[0].dtype.char, out.dtype.char)) as mode:
        if mode == "stream":
            _kernel(name, "stream")(*args)
            # the tail of n % step elements (the serial kernels take any range)
            head = n - n % stream_step(name)
            if head < n:
                _kernel(name, "serial")(*_tail(name, args, head))
        else:
            _kernel(name, mode)(*args)


def _learn_layer() -> None:
    """Set ``settings.lock_free`` from the threading layer a parallel launch started."""
    try:
        free = numba.threading_layer() in ("omp", "tbb")
    except ValueError:  # no parallel region ran (numba's layer starts lazily)
        return
    if free != settings.lock_free:
        configure(lock_free=free)


def kernel_for(name: str, mode: str) -> Callable:
    """The compiled kernel for op ``name`` in ``mode`` (``"serial"``, ``"parallel"``,
    ``"stream"``, ``"checked"``, ``"checked_parallel"``): for callers that chose the variant
    themselves (the kernels' fast path)."""
    return _kernel(name, mode)


# The C path's kernels (native.py, _native.c): the serial kernel as a cfunc on raw pointers,
# fn(a, b, c, n, constants). The arrays in each kind's order (see _native.c); the constants are
# doubles, cast to the computation type (exact: each was a float32 or float64 value).
_NATIVE_ARRAYS = {
    1: ("carray(a, (n,), IN)", "carray(c, (n,), OUT)"),
    2: ("carray(a, (n,), IN)", "carray(b, (n,), IN)", "carray(c, (n,), OUT)"),
    "mask_forward": ("carray(a, (n,), IN)", "carray(b, (n,), IN)",
                     "carray(c, ((n + 7) // 8,), np.uint8)"),
    "mask_backward": ("carray(b, (n,), IN)", "carray(a, ((n + 7) // 8,), np.uint8)",
                      "carray(c, (n,), OUT)"),
}
_NATIVE = """
def {fname}(a, b, c, n, k):
    constants = carray(k, (8,))
    body({arrays}{constants})
"""
# the streaming cfunc (maps): the streaming kernel's whole steps, then the serial kernel's tail
_NATIVE_STREAM = """
def {fname}(a, b, c, n, k):
    constants = carray(k, (8,))
    {names} = {arrays}
    head = n - n % {step}
    body({names}{constants})
    serial({tails}{constants})
"""
NATIVE_SIGNATURE = types.void(types.voidptr, types.voidptr, types.voidptr, types.int64,
                              types.CPointer(types.float64))
_natives: dict[tuple, object] = {}


def native_kernel(name: str, dtype: np.dtype, out_dtype: np.dtype, mode: str = "serial"):
    """Kernel ``name``'s serial loop (or its ``mode`` variant: ``"parallel"``, or for the maps
    ``"stream"``, which finishes the last ``n % 16`` elements serially) as a numba ``cfunc``
    for the C path (see :mod:`.native`): ``fn(a, b, c, n, constants)`` on ``dtype`` inputs and
    an ``out_dtype`` output; its ``address`` goes in a ``Native`` table. The constants are
    ``OPS[name].params`` (the mask kernels': zero)."""
    key = (name, mode, dtype.str, out_dtype.str)
    kernel = _natives.get(key)
    if kernel is not None:
        return kernel
    body = _kernel(name, mode)  # the loop the cfunc calls
    if name in OPS:
        arrays, count = _NATIVE_ARRAYS[OPS[name].arity], len(OPS[name].params)
    else:
        arrays, count = _NATIVE_ARRAYS[name.replace("_at_zero", "")], 1
    fname = f"_{name}_native_{mode}_{dtype.str[1:]}_{out_dtype.str[1:]}_{DEPENDENCIES}"
    constants = "".join(f", T(constants[{i}])" for i in range(count))
    namespace = dict(_NATIVE_SPACE, body=body, IN=dtype.type, OUT=out_dtype.type,
                     T=dtype.type)
    if mode == "stream":
        names = ["g", "x", "o"][-len(arrays):]
        source = _NATIVE_STREAM.format(
            fname=fname, names=", ".join(names), arrays=", ".join(arrays), constants=constants,
            step=stream_step(name), tails=", ".join(f"{a}[head:]" for a in names))
        namespace["serial"] = _kernel(name, "serial")
    else:
        source = _NATIVE.format(fname=fname, arrays=", ".join(arrays), constants=constants)
    with _compile_lock:
        kernel = _natives.get(key)
        if kernel is None:
            exec(compile(source, __file__, "exec"), namespace)
            kernel = _natives[key] = jit.cfunc(NATIVE_SIGNATURE, namespace[fname],
                                               error_model="numpy")
    return kernel


_NATIVE_SPACE = {"__name__": __name__, "np": np, "carray": numba.carray}


def _tail(name: str, args: tuple, start: int) -> tuple:
    """``args`` cut to the elements from ``start`` on (``start`` is a multiple of 8)."""
    if name.startswith("mask_forward"):
        x, y, bits, zero = args
        return x[start:], y[start:], bits[start // 8:], zero
    if name == "mask_backward":
        grad, bits, out, zero = args
        return grad[start:], bits[start // 8:], out[start:], zero
    arrays = 2 if OPS[name].arity == 1 else 3
    return (*(a[start:] for a in args[:arrays]), *args[arrays:])


def unary(name: str, x: np.ndarray, out: np.ndarray, constants: tuple) -> None:
    """``out[i] = OPS[name](x[i])`` for flat contiguous ``x`` and ``out``.

    ``constants`` holds the values of ``OPS[name].params``, in the computation dtype.
    """
    launch(name, out, x, out, *constants)


def binary(name: str, grad: np.ndarray, x: np.ndarray, out: np.ndarray,
           constants: tuple) -> None:
    """``out[i] = OPS[name](grad[i], x[i])`` for flat contiguous arrays."""
    launch(name, out, grad, x, out, *constants)


def mask_forward(x: np.ndarray, y: np.ndarray, bits: np.ndarray, zero, at_zero: int) -> None:
    """``y = relu(x)`` and the packed derivative of ReLU in ``bits``, in one pass."""
    name = "mask_forward_at_zero" if at_zero else "mask_forward"
    launch(name, y, x, y, bits, zero)


def mask_backward(grad: np.ndarray, bits: np.ndarray, out: np.ndarray, zero) -> None:
    """``out = grad`` where the packed bit is set, else 0."""
    launch("mask_backward", out, grad, bits, out, zero)


_STREAMING_OPS = {name: _vectorisable(op) for name, op in OPS.items()}
apply_tuning(_tuning.current())  # this machine's measured choices, or the defaults


def _after_fork_in_child() -> None:
    global _compile_lock, launch_lock, settings_lock
    launch_lock = threading.Lock()  # the parent may have held it at the fork
    settings_lock = threading.RLock()
    _compile_lock = threading.Lock()  # held by another thread making a kernel
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel ran in the parent: the child may start any layer
        layer = None
    if layer == "omp":
        # the fast path's calls go back through launch (serial)
        configure(serial_only=True, lock_free=False)
        chooser.expire()
    else:  # a fork between configure's hand-over and its assignment: the child's own value
        configure()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
