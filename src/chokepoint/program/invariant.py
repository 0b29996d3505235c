"""A statement in a loop that computes the same value on every run: loop-invariant.

The recorder checksums what a statement in a loop reads at its first run and compares it at
each run it captures again, its 2nd, 4th, 8th... (:func:`.record.input_sums`: each array's
CRC-32, numbers and strings as themselves; nothing else comparable). ``name = expression``
reading the same inputs each time, without a random generator or another library's call,
computes the same value each time: once before the loop does the same, and the loop's other
runs of it are saved. It is not said where another line of the loop writes into ``name`` or
binds it (``acc = np.zeros(n)`` then ``acc += x``: the loop needs a fresh one each run), or
reads it before it is computed (its first run reads what the loop was entered with).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .analyse import unseen_calls
from .groups import first_claim, inside, stores
from .record import LineStat
from .replay import is_simple_name_assign

__all__ = ["attach", "compared_runs", "hoistable"]


def compared_runs(hits: int) -> int:
    """How many of a statement's runs after its first had their inputs compared with the
    first's: each captured again, its 2nd, 4th, 8th... (:func:`.record.recaptured`)."""
    return max(0, hits.bit_length() - 1)


def hoistable(stat: LineStat, stats: list[LineStat], by_key: dict) -> str | None:
    """The name ``stat`` binds where it is loop-invariant (see the module's notes), else
    None."""
    st = stat.statement
    if (st.loop is None or stat.mutates or stat.capture is None or stat.same_inputs <= 0
            or stat.same_inputs != compared_runs(stat.hits)):
        return None
    try:
        tree = ast.parse(st.code)
    except SyntaxError:
        return None
    name = is_simple_name_assign(tree)
    if name is None:
        return None
    if unseen_calls(tree, {**stat.capture.globals, **stat.capture.values}):
        return None  # a random generator's draw reads the same generator and differs
    loop = by_key.get((st.filename, st.loop))
    if loop is None or name in loop.statement.names:
        return None
    for other in stats:
        o = other.statement
        if other is stat or not o.code or not inside(other, loop.statement, by_key):
            continue
        # another line binding or writing it, or reading it before it is computed (the
        # first run reads what the loop was entered with): hoisting it changes the loop
        if stores(o.code, name) or (o.line < st.line and name in o.names):
            return None
    return name


def attach(rows: dict[int, dict], stats: list[LineStat], display: Callable[[LineStat], str],
           min_seconds: float) -> None:
    """Give each loop-invariant line (``rows``: the report's rows by ``id`` of their
    LineStat) a ``loop-invariant`` cause: its time less one run per entry of its loop, where
    that is at least ``min_seconds``; first in the line's ledger."""
    by_key = {s.statement.key: s for s in stats}
    for stat in stats:
        row = rows.get(id(stat))
        name = hoistable(stat, stats, by_key) if row is not None else None
        if name is None:
            continue
        loop = by_key[(stat.statement.filename, stat.statement.loop)]
        entries = max(1, loop.hits - stat.hits)  # a loop's header runs once more per entry
        seconds = row["time_s"] * (1.0 - entries / stat.hits)
        if seconds < min_seconds:
            continue
        first_claim(row, {"kind": "loop-invariant", "seconds": seconds, "hits": stat.hits,
                          "entries": entries, "name": name, "loop": display(loop),
                          "compared": stat.same_inputs + 1})
