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


def producer_of(stats: Iterable[LineStat], line: LineStat, name: str) -> LineStat | None:
    """The statement that assigns ``name`` just before ``line``: in its file and its loop, the
    last ``name = ...`` above it, once per execution of ``line`` (the same hits)."""
    found = None
    for s in stats:
        st = s.statement
        if (st.filename == line.statement.filename and st.line < line.statement.line
                and st.loop == line.statement.loop and s.hits == line.hits
                and assigned_name(s) == name
                and (found is None or st.line > found.statement.line)):
            found = s
    return found


def joined_distances(line: LineStat, producer: LineStat, result: np.ndarray,
                     min_time: float) -> dict | None:
    """The matrix-product form of ``producer`` and ``line`` together, where ``line``'s value
    (``result``) holds the pairwise (squared) distances between the rows of two 2-D arrays
    ``producer`` read, timed against the two lines as written: the rewrite (a dict as
    :func:`chokepoint.program.analyse.analyse_line`'s candidates) when it measured faster,
    else None."""
    target = assigned_name(line)
    if target is None:
        return None
    try:
        replay = prepare(producer)
    except ReplayError:
        return None
    ns = replay.namespace()
    points = {n: a for n, a in replay.arrays(ns).items()
              if a.ndim == 2 and a.dtype.kind == "f"}
    found = find_distances(points, result)
    if found is None:
        return None
    both = compile(f"{producer.statement.code}\n{line.statement.code}\n",
                   f"<lines {producer.statement.line} and {line.statement.line}>", "exec")
    scope = replay.namespace()

    def as_written() -> None:
        exec(both, scope)

    with np.errstate(all="ignore"):
        before, after = measure_interleaved([as_written, found.call], min_time=min_time,
                                            repeats=REPEATS)
    return {"statement": f"{target} = {found.statement}",
            "speedup": before.median / after.median, "measured_s": after.median,
            "values": found.values, "lines_s": before.median,
            "replaces": {"lines": [producer.statement.line, line.statement.line],
                         "name": assigned_name(producer), "lines_s": before.median}}
