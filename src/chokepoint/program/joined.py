"""Rewrites of two lines together, where one makes an array only the next one reads.

Pairwise distances: ``diff = X[:, None, :] - C[None, :, :]`` then ``D = np.sqrt((diff **
2).sum(axis=2))`` (or ``np.linalg.norm(diff, axis=2)``) is how nearest-neighbour and k-means code
is often written. Neither line alone is the distance computation
:mod:`chokepoint.explain.distances` recognises: the second reads a 3-D array, whose points the
first line made. :func:`joined_distances` takes the first line's captured points, recognises the
second line's value as their distances (by value, as for one line) and times the two lines as
written against the matrix-product form on the same values, side by side.

A sort for its extreme: ``order = np.argsort(scores, axis=0)`` then ``best = order[-1]`` sorts
every column to keep one index of each, which ``np.argmax(scores, axis=0)`` finds in one pass
(:func:`sorted_extreme`; ``np.sort`` and its first or last row: ``np.min``, ``np.max``).
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Iterable

import numpy as np

from ..explain.distances import find_distances
from ..explain.lines import (
    extreme_agreement,
    extreme_code,
    extreme_selection,
    sort_call,
    sorted_operand,
)
from ..measure.timer import measure_interleaved
from .groups import stores
from .record import LineStat
from .replay import ReplayError, prepare

__all__ = ["assigned_name", "consumer_of", "extreme_uses", "joined_distances", "producer_of",
           "sorted_extreme", "timed_side_by_side"]

#: repeats of the side-by-side timing
REPEATS = 5


def assigned_name(stat: LineStat) -> str | None:
    """The name a statement ``name = expression`` assigns, else None."""
    if stat.statement.kind != "Assign":
        return None
    try:
        tree = ast.parse(stat.statement.code)
    except SyntaxError:
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    if (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)):
        return node.targets[0].id
    return None


def _scope_and_neighbours(filename: str, line: int
                          ) -> tuple[ast.AST, ast.stmt | None, ast.stmt | None] | None:
    """The innermost function (or the module) holding the statement at ``line`` of
    ``filename``, and the statements just before and just after it in its block (None where
    there is none); None where the statement is not found."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return None

    def search(node: ast.AST, scope: ast.AST):
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for k, stmt in enumerate(block):
                if not isinstance(stmt, ast.stmt):
                    continue
                if stmt.lineno == line:
                    return (scope, block[k - 1] if k else None,
                            block[k + 1] if k + 1 < len(block) else None)
                inner = scope if not isinstance(
                    stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else stmt
                if stmt.lineno < line <= (stmt.end_lineno or stmt.lineno):
                    return search(stmt, inner)
            for handler in getattr(node, "handlers", []) or []:
                if handler.lineno < line <= (handler.end_lineno or handler.lineno):
                    return search(handler, scope)
        return None

    return search(tree, tree)


def _neighbour(stats: Iterable[LineStat], line: LineStat, statement: ast.stmt | None
               ) -> LineStat | None:
    """The recorded statement at ``statement``'s line that ran as often as ``line``."""
    if statement is None:
        return None
    return next((s for s in stats if s.statement.filename == line.statement.filename
                 and s.statement.line == statement.lineno and s.hits == line.hits), None)


def producer_of(stats: Iterable[LineStat], line: LineStat, name: str) -> LineStat | None:
    """The statement just before ``line`` in its block, where it is ``name = ...`` and ran as
    often; None otherwise (another statement between them could change what the pair
    computes, and one in another function reads other values)."""
    found = _scope_and_neighbours(line.statement.filename, line.statement.line)
    made = _neighbour(stats, line, found[1]) if found is not None else None
    return made if made is not None and assigned_name(made) == name else None


def consumer_of(stats: Iterable[LineStat], line: LineStat) -> LineStat | None:
    """The statement just after ``line`` in its block, where it ran as often; None
    otherwise."""
    found = _scope_and_neighbours(line.statement.filename, line.statement.line)
    return _neighbour(stats, line, found[2]) if found is not None else None


def _read_elsewhere(line: LineStat, name: str) -> bool:
    """Whether ``name`` is read in ``line``'s function (or module) outside ``line``."""
    found = _scope_and_neighbours(line.statement.filename, line.statement.line)
    if found is None:
        return True
    first, last = line.statement.line, line.statement.end_line
    return any(isinstance(node, ast.Name) and node.id == name
               and isinstance(node.ctx, ast.Load) and not first <= node.lineno <= last
               for node in ast.walk(found[0]))


def joined_distances(line: LineStat, producer: LineStat, min_time: float,
                     include: tuple[str, ...] = ()) -> dict | None:
    """The matrix-product form of ``producer`` and ``line`` together, where the two lines run
    on the values ``producer`` read give the pairwise (squared) distances between the rows
    of two 2-D arrays among them, timed against the two lines as written: the rewrite (a dict
    as :func:`chokepoint.program.analyse.analyse_line`'s candidates) when it measured faster,
    else None. Not where the name ``producer`` assigns is read elsewhere in the function."""
    target, name = assigned_name(line), assigned_name(producer)
    if target is None or name is None or _read_elsewhere(line, name):
        return None
    try:
        replay = prepare(producer, include)
    except ReplayError:
        return None
    both = compile(f"{producer.statement.code}\n{line.statement.code}\n",
                   f"<lines {producer.statement.line} and {line.statement.line}>", "exec")
    # the pair run on the values the first line read: its value is what the rewrite must give
    scope = replay.namespace()
    try:
        with np.errstate(all="ignore"):
            exec(both, scope)
    except Exception:
        return None
    ns = replay.namespace()
    points = {n: a for n, a in replay.arrays(ns).items()
              if a.ndim == 2 and a.dtype.kind == "f"}
    found = find_distances(points, scope.get(target))
    if found is None:
        return None
    scope = replay.namespace()

    def as_written() -> None:
        exec(both, scope)

    with np.errstate(all="ignore"):
        before, after = measure_interleaved([as_written, found.call], min_time=min_time,
                                            repeats=REPEATS)
    return {"statement": f"{target} = {found.statement}",
            "speedup": before.median / after.median, "measured_s": after.median,
            "values": found.values, "lines_s": before.median,
            "joins": {"lines": [producer.statement.line, line.statement.line],
                      "name": name, "lines_s": before.median}}


def timed_side_by_side(written, rewritten, written_ns: dict, rewritten_ns: dict,
                       min_time: float):
    """Code as written and its rewrite (compiled), each run in its own namespace, timed in
    one round-robin of :data:`REPEATS`: their two Measurements."""

    def as_written() -> None:
        exec(written, written_ns)

    def rewrite() -> None:
        exec(rewritten, rewritten_ns)

    with np.errstate(all="ignore"):
        before, after = measure_interleaved([as_written, rewrite], min_time=min_time,
                                            repeats=REPEATS)
    return before, after


# -- a sort for its extreme -----------------------------------------------------------------------

def extreme_uses(scope: ast.AST, name: str, lines: tuple[int, int], ndim: int, axis: int
                 ) -> list[tuple[ast.Subscript, int]] | None:
    """The reads of ``name`` in ``scope`` outside the statement at ``lines`` (first, last),
    with which end each takes, where every one takes the first or last entry along ``axis``
    (of ``ndim``) and nothing else; None where any read is something else, or there is none.
    """
    parents = {id(child): node for node in ast.walk(scope)
               for child in ast.iter_child_nodes(node)}
    uses = []
    for node in ast.walk(scope):
        if not (isinstance(node, ast.Name) and node.id == name):
            continue
        if lines[0] <= node.lineno <= lines[1] and not isinstance(node.ctx, ast.Load):
            continue  # the sort's own assignment
        parent = parents.get(id(node))
        if not isinstance(node.ctx, ast.Load) or not isinstance(parent, ast.Subscript) \
                or parent.value is not node or not isinstance(parent.ctx, ast.Load):
            return None
        picked = extreme_selection(parent, ndim)
        if picked is None or picked[0] != axis:
            return None
        uses.append((parent, picked[1]))
    return uses or None


def _changes_what_it_reads(consumer: LineStat, made: ast.expr) -> bool:
    """Whether ``consumer`` may change a name the expression ``made`` reads: binds it, writes
    into it or hands it to a call (:func:`.groups.stores`: ``s.sort()``, ``out=s``). Its
    entry would then no longer be the extreme of what it reads, and, run again and again to
    be timed, the pair would sort other values each time."""
    read = {n.id for n in ast.walk(made) if isinstance(n, ast.Name)}
    return any(stores(consumer.statement.code, n) for n in read)


def _declared_outside(scope: ast.AST, name: str) -> bool:
    """Whether ``scope`` declares ``name`` global or nonlocal (read elsewhere, unseen)."""
    return any(isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names
               for node in ast.walk(scope))


def sorted_extreme(line: LineStat, consumer: LineStat, min_time: float,
                   include: tuple[str, ...] = ()) -> dict | None:
    """``name = <a sort of a>`` on ``line``, every read of ``name`` in ``consumer`` (the next
    statement) its first or last entry along the sorted axis, and none elsewhere (nor
    ``name`` global): the consumer with those reads as ``np.argmax``/``np.argmin``
    (``np.max``/``np.min`` of a sort) of ``a``, checked on the captured values
    (:func:`~chokepoint.explain.lines.extreme_agreement`) and timed against the two lines
    as written, side by side: the rewrite, a dict as :func:`joined_distances` gives (the
    caller proposes it where it measured faster); else None."""
    name = assigned_name(line)
    found = _scope_and_neighbours(line.statement.filename, line.statement.line)
    if name is None or found is None or found[2] is None or _declared_outside(found[0], name):
        return None
    made = ast.parse(line.statement.code).body[0].value
    sort = sort_call(made)
    if sort is None or _changes_what_it_reads(consumer, made):
        return None
    try:
        replay, after = prepare(line, include), prepare(consumer, include)
    except ReplayError:
        return None
    ns = {**after.namespace(), **replay.namespace()}
    sorted_ = sorted_operand(sort, ns)
    if sorted_ is None:
        return None
    a, axis = sorted_
    own = (line.statement.line, line.statement.end_line)
    uses = extreme_uses(found[0], name, own, a.ndim, axis)
    consumer_lines = (consumer.statement.line, consumer.statement.end_line)
    if uses is None or not all(consumer_lines[0] <= u.lineno <= consumer_lines[1]
                               for u, _ in uses):
        return None
    replaced = {ast.unparse(u): extreme_code(sort, end, a.ndim) for u, end in uses}

    class Replace(ast.NodeTransformer):
        def visit_Subscript(self, node):
            text = ast.unparse(node)
            if text in replaced:
                return ast.parse(replaced[text], mode="eval").body
            return self.generic_visit(node)

    rewritten = ast.unparse(Replace().visit(ast.parse(consumer.statement.code)))
    both = compile(f"{line.statement.code}\n{consumer.statement.code}\n",
                   f"<lines {line.statement.line} and {consumer.statement.line}>", "exec")
    alone = compile(rewritten, f"<line {consumer.statement.line} rewritten>", "exec")
    picks = [compile(ast.Expression(u), "<pick>", "eval") for u, _ in uses]
    theirs_ns, ours_ns = dict(ns), dict(ns)
    try:
        with np.errstate(all="ignore"):
            exec(both, theirs_ns)
            theirs = [eval(p, theirs_ns) for p in picks]
            ours = [eval(compile(replaced[ast.unparse(u)], "<ours>", "eval"), ours_ns)
                    for u, _ in uses]
    except Exception:
        return None
    agreed = [extreme_agreement(sort, end, a, axis, o, t)
              for (_, end), o, t in zip(uses, ours, theirs, strict=True)]
    if None in agreed:
        return None
    before, after_m = timed_side_by_side(both, alone, dict(ns), dict(ns), min_time)
    values = ("same values" if all(v == "same values" for v, _ in agreed)
              else "the same values at the indices")
    return {"statement": rewritten, "speedup": before.median / after_m.median,
            "measured_s": after_m.median, "lines_s": before.median, "values": values,
            "note": "; ".join(dict.fromkeys(n for _, n in agreed if n)),
            "joins": {"lines": [line.statement.line, consumer.statement.line],
                      "name": name, "lines_s": before.median}}
