"""numba engine: one ``prange`` kernel generated per operation from :data:`~.ops.OPS`.

The kernels work on flat, C-contiguous 1-D arrays; :mod:`.layout` makes them. Each operation's
loop is generated from its expression (not written out per dtype): numba specialises the one
kernel for every dtype it meets, and caches the machine code on disk (``cache=True``), so a new
process with a warm cache pays about 0.1 s for its first calls instead of a compile.

Safety:

* No ``fastmath``: it would let LLVM drop NaN checks, the sign of zero and subnormals.
* Parallel launches take one process-wide lock. numba's ``workqueue`` threading layer aborts
  when two Python threads launch parallel kernels at once; with the lock any layer is safe, and on
  a memory-bound kernel that already uses every core the lock costs nothing.
* After ``fork()``, a child whose parent had started GNU OpenMP (numba's ``omp`` layer) cannot
  start it again; there the kernels run serially instead of aborting the child.
* Arrays of fewer than :data:`PARALLEL_MIN` elements run the serial kernel: a parallel launch
  costs more than the work.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numba
import numpy as np

from .ops import OPS

__all__ = [
    "NAME",
    "PARALLEL_MIN",
    "binary",
    "mask_backward",
    "mask_forward",
    "unary",
]

NAME = "numba"
PARALLEL_MIN = 1 << 16

_UNARY = """
def {fname}(x, out, zero, slope, lo, hi):
    for i in {loop}(out.shape[0]):
        v = x[i]
        out[i] = {expr}
"""

_BINARY = """
def {fname}(grad, x, out, zero, slope, lo, hi):
    for i in {loop}(out.shape[0]):
        v = x[i]
        g = grad[i]
        out[i] = {expr}
"""

# One byte of the mask per iteration: bit k of byte j is element 8 * j + k (little bit order,
# as np.packbits(..., bitorder="little")).
_MASK_FORWARD = """
def {fname}(x, y, bits, zero):
    n = x.shape[0]
    for j in {loop}(bits.shape[0]):
        start = 8 * j
        stop = min(start + 8, n)
        byte = 0
        for i in range(start, stop):
            v = x[i]
            y[i] = {relu}
            byte |= np.uint8({passes}) << np.uint8(i - start)
        bits[j] = byte
"""

_MASK_BACKWARD = """
def {fname}(grad, bits, out, zero):
    n = out.shape[0]
    for j in {loop}(bits.shape[0]):
        start = 8 * j
        stop = min(start + 8, n)
        byte = bits[j]
        for i in range(start, stop):
            g = grad[i]
            out[i] = select((byte >> np.uint8(i - start)) & np.uint8(1), g, zero)
"""


@numba.njit(inline="always")
def _select(c, a, b):
    return a if c else b


@numba.njit(inline="always")
def _logical_not(c):
    return not c


@numba.njit(inline="always")
def _logical_and(c, d):
    return c & d


_NAMESPACE = {
    "__name__": __name__,  # numba's cache rebuilds a kernel's globals by importing this module
    "np": np,
    "prange": numba.prange,
    "select": _select,
    "logical_not": _logical_not,
    "logical_and": _logical_and,
}
_kernels: dict[tuple[str, bool], Callable] = {}
_compile_lock = threading.Lock()
_launch_lock = threading.Lock()
_serial_only = False


def _source(name: str, fname: str, loop: str) -> str:
    """Python source of the kernel ``name``, as function ``fname`` looping with ``loop``."""
    if name in OPS:
        op = OPS[name]
        template = _UNARY if op.arity == 1 else _BINARY
        return template.format(fname=fname, loop=loop, expr=op.expr)
    if name in ("mask_forward", "mask_forward_at_zero"):
        passes = OPS["relu_grad_at_zero" if name.endswith("at_zero") else "relu_grad"].expr
        return _MASK_FORWARD.format(fname=fname, loop=loop, relu=OPS["relu"].expr, passes=passes)
    if name == "mask_backward":
        return _MASK_BACKWARD.format(fname=fname, loop=loop)
    raise KeyError(name)


def _kernel(name: str, parallel: bool) -> Callable:
    """The compiled kernel for ``name``, generated and jitted on first use."""
    key = (name, parallel)
    kernel = _kernels.get(key)
    if kernel is None:
        with _compile_lock:
            kernel = _kernels.get(key)
            if kernel is None:
                fname = f"_{name}_{'parallel' if parallel else 'serial'}"
                src = _source(name, fname, "prange" if parallel else "range")
                namespace = dict(_NAMESPACE)
                # The file name ties numba's on-disk cache to this module: it is invalidated
                # when this file changes, and each kernel is keyed by its name and bytecode.
                exec(compile(src, __file__, "exec"), namespace)
                kernel = numba.njit(parallel=parallel, cache=True, nogil=True)(namespace[fname])
                _kernels[key] = kernel
    return kernel


def _launch(name: str, n: int, *args) -> None:
    if n == 0:
        return
    if n < PARALLEL_MIN or _serial_only:
        _kernel(name, False)(*args)
        return
    kernel = _kernel(name, True)
    with _launch_lock:
        kernel(*args)


def unary(name: str, x: np.ndarray, out: np.ndarray, zero, slope, lo, hi) -> None:
    """``out[i] = OPS[name](x[i])`` for flat contiguous ``x`` and ``out``."""
    _launch(name, out.shape[0], x, out, zero, slope, lo, hi)


def binary(name: str, grad: np.ndarray, x: np.ndarray, out: np.ndarray, zero, slope, lo,
           hi) -> None:
    """``out[i] = OPS[name](grad[i], x[i])`` for flat contiguous arrays."""
    _launch(name, out.shape[0], grad, x, out, zero, slope, lo, hi)


def mask_forward(x: np.ndarray, y: np.ndarray, bits: np.ndarray, zero, at_zero: int) -> None:
    """``y = relu(x)`` and the packed derivative of ReLU in ``bits``, in one pass."""
    name = "mask_forward_at_zero" if at_zero else "mask_forward"
    _launch(name, x.shape[0], x, y, bits, zero)


def mask_backward(grad: np.ndarray, bits: np.ndarray, out: np.ndarray, zero) -> None:
    """``out = grad`` where the packed bit is set, else 0."""
    _launch("mask_backward", out.shape[0], grad, bits, out, zero)


def _after_fork_in_child() -> None:
    global _launch_lock, _serial_only
    _launch_lock = threading.Lock()  # the parent may have held it at the fork
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel ran in the parent: the child may start any layer
        return
    if layer == "omp":
        _serial_only = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
