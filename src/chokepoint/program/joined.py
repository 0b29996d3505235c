"""Pairwise distances written over two lines: the broadcast difference on one, its reduction on
the next.

``diff = X[:, None, :] - C[None, :, :]`` then ``D = np.sqrt((diff ** 2).sum(axis=2))`` (or
``np.linalg.norm(diff, axis=2)``) is how nearest-neighbour and k-means code is often written.
Neither line alone is the distance computation :mod:`chokepoint.explain.distances` recognises:
the second reads a 3-D array, whose points the first line made. :func:`joined_distances` takes
the first line's captured points, recognises the second line's value as their distances (by
value, as for one line) and times the two lines as written against the matrix-product form on
the same values, side by side.
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Iterable

import numpy as np

from ..explain.distances import find_distances
from ..measure.timer import measure_interleaved
from .record import LineStat
from .replay import ReplayError, prepare

__all__ = ["assigned_name", "joined_distances", "producer_of"]

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


def _scope_and_previous(filename: str, line: int) -> tuple[ast.AST, ast.stmt] | None:
    """The innermost function (or the module) holding the statement at ``line`` of
    ``filename``, and the statement just before it in its block; None where there is none."""
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
                    return (scope, block[k - 1]) if k else None
                inner = scope if not isinstance(
                    stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else stmt
                if stmt.lineno < line <= (stmt.end_lineno or stmt.lineno):
                    return search(stmt, inner)
            for handler in getattr(node, "handlers", []) or []:
                if handler.lineno < line <= (handler.end_lineno or handler.lineno):
                    return search(handler, scope)
        return None

    return search(tree, tree)


def producer_of(stats: Iterable[LineStat], line: LineStat, name: str) -> LineStat | None:
    """The statement just before ``line`` in its block, where it is ``name = ...`` and ran as
    often; None otherwise (another statement between them could change what the pair
    computes, and one in another function reads other values)."""
    found = _scope_and_previous(line.statement.filename, line.statement.line)
    if found is None:
        return None
    previous = found[1]
    return next((s for s in stats if s.statement.filename == line.statement.filename
                 and s.statement.line == previous.lineno and s.hits == line.hits
                 and assigned_name(s) == name), None)


def _read_elsewhere(line: LineStat, name: str) -> bool:
    """Whether ``name`` is read in ``line``'s function (or module) outside ``line``."""
    found = _scope_and_previous(line.statement.filename, line.statement.line)
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
