"""A traced graph evaluated with NumPy's own ufuncs on cache-sized blocks (numexpr's design).

Where NumPy's loop for a function is faster per element than the fused kernel's (NumPy 2 runs
SIMD ``tan``, ``arcsin``, ``sinh``... on AVX-512 CPUs, where the kernel calls libm one element
at a time), a plan is computed this way instead (:mod:`.costs` decides, by measurement). Each
operation of the graph runs on a block of :data:`BLOCK` elements into a buffer that stays in
the cache, so there are no full-size temporaries; the values are NumPy's own, bit for bit
(the same ufunc loops on the same dtypes). Threads take blocks one at a time from a shared
counter: a thread on a core another process keeps busy simply takes fewer.
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .trace import Node, topological

__all__ = ["BLOCK", "BLOCK_BYTES", "PARALLEL_MIN", "block_size", "evaluate", "order"]

#: bytes of the result a block holds (1 MiB: 262,144 float32 elements, 131,072 float64), in the
#: L2 or L3 cache; each block costs a few microseconds of Python per operation, and float32
#: chains on blocks of 65,536 elements ran 0.91-1.01x NumPy per core, 1.00-1.12x on 262,144
BLOCK_BYTES = 1 << 20


def block_size(dtype: np.dtype) -> int:
    """Elements per block for a result of ``dtype`` (1-byte and 2-byte results as 4-byte)."""
    return BLOCK_BYTES // max(np.dtype(dtype).itemsize, 4)


#: elements per block of a float64 result
BLOCK = block_size(np.dtype(np.float64))

#: calls below this many elements run on one thread: handing one of a few blocks to a pool
#: thread costs more than it saves
PARALLEL_MIN = 262_144

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_local = threading.local()  # each thread's block buffers
_pool_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _pool, _pool_size, _pool_lock
    # the parent's threads are not in the child
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def order(result: Node) -> list[Node]:
    """The operations of ``result``'s graph, each after its operands."""
    return [n for n in topological(result) if n.op not in ("input", "scalar")]


def _program(steps: list[Node], values: dict) -> list[tuple]:
    """Each step as ``(function, operands, weak)``: an operand is ``("array", value)`` (sliced
    per block), ``("value", value)`` (a scalar) or ``("step", k)``; worked out once, so that a
    block costs little more than its ufunc calls."""
    index = {id(node): k for k, node in enumerate(steps)}
    program = []
    for node in steps:
        operands = []
        for a in node.args:
            if id(a) in index:
                operands.append(("step", index[id(a)]))
                continue
            value = values[a.name] if a.op == "input" else a.value
            array = isinstance(value, np.ndarray) and value.ndim
            operands.append(("array" if array else "value", value))
        if node.op == "where":
            function = _where
        elif node.op in ("clip", "clip_scalar"):
            function = np.clip
        else:
            function = getattr(np, node.op)
        program.append((function, operands, node.weak))
    return program


def _where(c, a, b, out):
    np.copyto(out, np.where(c, a, b), casting="unsafe")
    return out


def _block(program: list[tuple], steps: list[Node], out: np.ndarray, start: int, stop: int,
           buffers: dict, size: int) -> None:
    """Compute ``out[start:stop]``, one operation at a time into the thread's ``buffers``
    (by step, dtype and block size, kept from call to call: allocated per call, each buffer was
    mapped and faulted afresh)."""
    n = stop - start
    computed: list = [None] * len(program)
    last = len(program) - 1
    for k, (function, operands, weak) in enumerate(program):
        args = [value[start:stop] if kind == "array" else value if kind == "value"
                else computed[value] for kind, value in operands]
        if weak:  # Python arithmetic on Python scalars: a Python scalar
            computed[k] = steps[k].dtype(function(*args))
            continue
        if k == last:
            target = out[start:stop]
        else:
            key = (k, steps[k].dtype, size)
            buffer = buffers.get(key)
            if buffer is None:
                buffer = buffers[key] = np.empty(size, steps[k].dtype)
            target = buffer[:n]
        computed[k] = function(*args, out=target)


def evaluate(result: Node, values: dict, out: np.ndarray, threads: int = 1) -> None:
    """Compute the graph of ``result`` into ``out`` (1-d, C-contiguous), every array in
    ``values`` (input name -> value) being 1-d and of ``out``'s length; on ``threads``
    threads. One operation is one call on the whole array (NumPy's own call: no temporaries
    to save)."""
    global _pool, _pool_size
    steps = order(result)
    if not steps or steps[-1] is not result:  # the code returns an input or a constant
        value = values[result.name] if result.op == "input" else result.value
        np.copyto(out, value, casting="unsafe")
        return
    program = _program(steps, values)
    size = out.size if len(steps) == 1 and threads == 1 else block_size(out.dtype)
    blocks = range(0, out.size, size)
    counter = itertools.count()  # next() is atomic under the GIL: blocks go one at a time

    def work() -> None:
        buffers = getattr(_local, "buffers", None)
        if buffers is None:
            buffers = _local.buffers = {}
        with np.errstate(all="ignore"):  # as the kernels: NumPy's values, no warnings
            for k in iter(lambda: next(counter), None):
                if k >= len(blocks):
                    return
                _block(program, steps, out, blocks[k], min(blocks[k] + size, out.size),
                       buffers, size)

    threads = max(1, min(threads, len(blocks)))
    if threads == 1:
        work()
        return
    with _pool_lock:
        if _pool is None or _pool_size < threads - 1:
            if _pool is not None:
                _pool.shutdown(wait=False)  # its threads end once idle
            _pool_size = threads - 1
            _pool = ThreadPoolExecutor(max_workers=_pool_size,
                                       thread_name_prefix="chokepoint-fuse")
        pool = _pool
    others = [pool.submit(work) for _ in range(threads - 1)]
    work()
    for f in others:
        f.result()
