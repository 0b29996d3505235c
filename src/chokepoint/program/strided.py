"""A line's strided slices, measured on the whole line, where the program meets them.

A slice such as ``u[:, :, k]`` of a C-order array reads one element of each cache line it
touches. The line is timed as written (reading and writing the same arrays as the program's
line) and with each strided slice it reads a contiguous copy (and, where it assigns into a
strided slice, a contiguous buffer as its target): the operands' layout changed, as laying the
arrays out with that axis last would change it (the slices of one array then lie in separate
rows, as the copies do). The difference is what that layout would save.

Replayed alone, run after run, a strided slice's cache lines stay in the
cache; in a program's loop the other lines' arrays may evict them, and each run reads them from
memory again (a vertical advection stencil's line: 186 us a run replayed, 775 us in the
program). Where the program ran the line far slower than its replay, both are timed with the
caches emptied before each run (:func:`evict`).
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..explain.rewrite import lift_slices, slice_assignment
from ..measure.machine import last_level_cache_bytes
from ..measure.statements import Statement
from .replay import is_simple_name_assign, timed_under

__all__ = ["EVICT_FACTOR", "StridedLine", "evict", "is_strided", "release", "strided_line",
           "timed_layouts"]

#: the caches are emptied by writing this many times the last-level cache's bytes
EVICT_FACTOR = 2
#: the name the contiguous variant's target buffer is bound to
_TARGET = "_chokepoint_target"

_evict_buffer: np.ndarray | None = None


def evict() -> None:
    """Write :data:`EVICT_FACTOR` times the last-level cache's bytes, so that what a line
    reads next comes from memory (plain stores: a memset may bypass the cache)."""
    global _evict_buffer
    if _evict_buffer is None:
        _evict_buffer = np.zeros(EVICT_FACTOR * last_level_cache_bytes() // 8)
    np.add(_evict_buffer, 1.0, out=_evict_buffer)


def release() -> None:
    """The eviction buffer given back (it is made again when next needed): a program analysed
    inside a long-running application does not keep it."""
    global _evict_buffer
    _evict_buffer = None


def is_strided(a: object) -> bool:
    """Whether no axis of ``a`` (of more than one element) has its elements adjacent: each
    element it reads is on a cache line of its own or shares one with few others (a column,
    ``u[:, :, k]``). A transposed array or a slice of rows is not."""
    if not isinstance(a, np.ndarray) or a.size < 2:
        return False
    steps = [abs(s) for s, n in zip(a.strides, a.shape, strict=True) if n > 1]
    return bool(steps) and min(steps) > a.itemsize


@dataclass
class StridedLine:
    """The line's code with its strided slices as names, and the two namespaces it runs in."""

    code: str  # the statement, each lifted slice a name (its target ``_TARGET[...]``)
    operands: list[str]  # the user's code of each strided slice (the target's first)
    as_written: dict = field(repr=False)  # the slices themselves, views of the namespace's
    contiguous: dict = field(repr=False)  # contiguous copies of them (a buffer as the target)
    kept: np.ndarray | None = field(default=None, repr=False)  # the target's values before

    @property
    def strided_bytes(self) -> int:
        return sum(v.nbytes for k, v in self.as_written.items()
                   if k in self.contiguous and self.contiguous[k] is not v)

    def restore(self) -> None:
        """The target's values as they were (runs write it, and may read it)."""
        if self.kept is not None:
            np.copyto(self.as_written[_TARGET], self.kept)


def strided_line(statement: Statement, ns: dict) -> StridedLine | None:
    """The line as :class:`StridedLine` where it reads or writes a strided basic slice of a
    name (``name = value``, ``name[index] = value`` or ``name[index] += value``); None
    otherwise. As written, the line
    reads and writes the arrays of ``ns`` as the program's line does (a recursion's
    ``y[:, k] = ... y[:, k - 1]``: one array); :meth:`StridedLine.restore` puts back what it
    writes."""
    tree = statement.tree
    node = tree.body[0] if len(tree.body) == 1 else None
    # an augmented assignment keeps its operator (below), not slice_assignment's sum
    into = slice_assignment(statement) if isinstance(node, ast.Assign) else None
    operator = ""
    if into is not None:
        target_code, value = into[0], into[1].source
    elif is_simple_name_assign(tree) is not None:
        target_code, value = None, ast.unparse(node.value)
    elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) \
            and isinstance(node.target.value, ast.Name):  # y[:, k] += ...
        target_code, value = ast.unparse(node.target), ast.unparse(node.value)
        operator = ast.unparse(ast.BinOp(ast.Name("a"), node.op, ast.Name("b")))[2:-2]
    else:
        return None
    try:
        lifted, args = lift_slices(value, ns)
        views = {name: eval(code, dict(ns)) for name, code in args.items()}
    except Exception:  # not evaluable on its own: not probed
        return None
    strided = {name for name, v in views.items() if is_strided(v)}
    as_written = dict(ns) | views
    contiguous = as_written | {n: np.ascontiguousarray(views[n]) for n in strided}
    operands = [args[n] for n in sorted(strided)]
    kept = None
    if target_code is not None:
        try:
            target = eval(target_code, dict(ns))
        except Exception:
            return None
        if not isinstance(target, np.ndarray):
            return None
        kept = target.copy()
        as_written[_TARGET] = target
        contiguous[_TARGET] = np.empty_like(target, order="C") if is_strided(target) else target
        if is_strided(target):
            operands.insert(0, target_code)
        code = f"{_TARGET}[...] {operator}= {lifted}"
    else:
        code = f"{is_simple_name_assign(tree)} = {lifted}"
    if not operands:
        return None
    return StridedLine(code, operands, as_written, contiguous, kept)


def timed_layouts(line: StridedLine, cold: bool,
                  samples: int = 7) -> tuple[list[float], list[float]]:
    """Seconds of one run of the line as written and on contiguous operands, the two
    alternating, the target's values restored before each run; ``cold``: the caches emptied
    after that. Each run binds its names afresh (a line that rebinds a name it reads runs
    the same every time)."""
    code = compile(line.code, "<strided>", "exec")
    scope = dict(line.as_written)

    def run() -> None:
        exec(code, scope, {})

    def restore() -> None:
        line.restore()
        if cold:
            evict()

    @contextlib.contextmanager
    def contiguous() -> Iterator[None]:
        scope.update(line.contiguous)
        try:
            yield
        finally:
            scope.update(line.as_written)

    settings: list[Callable[[], contextlib.AbstractContextManager]] = [
        contextlib.nullcontext, contiguous]
    try:
        with np.errstate(all="ignore"):
            as_written, on_contiguous = timed_under(run, settings, restore=restore,
                                                    mutates=True, samples=samples)
    finally:
        line.restore()
    return as_written, on_contiguous
