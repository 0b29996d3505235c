"""A statement in a loop that computes the same value on every run: loop-invariant.

The recorder checksums what a statement in a loop reads at its first run and compares it at
each run it captures again, its 2nd, 4th, 8th... (:func:`.record.input_sums`: each array's
CRC-32, numbers and strings as themselves; nothing else comparable). ``name = expression``
reading the same inputs each time, without a random generator or another library's call,
computes the same value each time: once before the loop does the same, and the loop's other
runs of it are saved. It is not said where another line of the loop writes into ``name`` or
binds it (``acc = np.zeros(n)`` then ``acc += x``: the loop needs a fresh one each run), or
reads it before it is computed (its first run reads what the loop was entered with).

A part of a statement can be loop-invariant where the whole is not: ``contrib = rank[src] /
out_degree[src]`` gathers ``out_degree[src]`` again on every run though neither name changes
(the recorder compares the inputs name by name). :func:`invariant_parts` finds the largest
parts of the expression reading only names that were the same at every run compared, written
by no line of the loop (the statement included), with no random draw or another library's
call; :func:`attach` times each on the captured values, and its runs beyond one per entry of
the loop are the cause's time.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable

import numpy as np

from ..measure.timer import measure
from .analyse import unseen_calls
from .groups import first_claim, inside, stores
from .record import LineStat
from .replay import ReplayError, is_simple_name_assign, prepare

__all__ = ["attach", "compared_runs", "hoistable", "invariant_parts"]

#: the parts of a statement that compute something (a bare name or number is no work)
_WORK = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Compare)
#: parts of these run some runs only, or many times a run: not searched
_NOT_EVERY_RUN = (ast.IfExp, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                  ast.GeneratorExp)


def compared_runs(hits: int) -> int:
    """How many of a statement's runs after its first had their inputs compared with the
    first's: each captured again, its 2nd, 4th, 8th... (:func:`.record.recaptured`)."""
    return max(0, hits.bit_length() - 1)


def hoistable(stat: LineStat, stats: list[LineStat], by_key: dict) -> str | None:
    """The name ``stat`` binds where it is loop-invariant (see the module's notes), else
    None."""
    st = stat.statement
    if (st.loop is None or stat.mutates or stat.capture is None or stat.varying
            or stat.compared <= 0 or stat.compared != compared_runs(stat.hits)):
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


def _value(tree: ast.Module) -> ast.expr | None:
    """The expression a one-statement ``tree`` computes (an assignment's value, an
    expression's), else None."""
    node = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
        return node.value
    return None


def invariant_parts(stat: LineStat, stats: list[LineStat], by_key: dict) -> list[ast.expr]:
    """The largest parts of ``stat``'s expression that compute the same value on every run of
    its loop (see the module's notes); none where the statement was not compared at each run
    captured again, or where nothing in it is the same."""
    st = stat.statement
    if (st.loop is None or stat.mutates or stat.capture is None or stat.input_sums is None
            or stat.compared <= 0 or stat.compared != compared_runs(stat.hits)):
        return []
    same = set(stat.input_sums) - stat.varying
    loop = by_key.get((st.filename, st.loop))
    try:
        tree = ast.parse(st.code)
    except SyntaxError:
        return []
    value = _value(tree)
    if not same or loop is None or value is None:
        return []
    # every line of the loop, this one too: a name written or handed to a call in it is not
    # the same from one run to the next, whatever the runs compared saw
    lines = [o.statement.code for o in stats
             if o.statement.code and (o is stat or inside(o, loop.statement, by_key))]
    ns = {**stat.capture.globals, **stat.capture.values}
    found: list[ast.expr] = []

    def search(node: ast.AST) -> None:
        # the whole value is the statement's (hoistable's rule: ``acc = np.zeros(n)`` then
        # ``acc += x`` needs a fresh one each run); a part of it makes a temporary
        if isinstance(node, _WORK) and node is not value:
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if (names and names <= same and not names & set(loop.statement.names)
                    and not any(stores(code, n) for code in lines for n in names)
                    and not unseen_calls(node, ns)):
                found.append(node)
                return
        if isinstance(node, _NOT_EVERY_RUN):
            return
        for child in ast.iter_child_nodes(node):
            search(child)

    search(value)
    return found


#: a part timed once this long or longer is not timed again (a decomposition of a large matrix
#: is seconds; the run's probing budget is not spent on it)
SLOW_PART_S = 0.02
_NOTHING = compile("None", "<nothing>", "eval")


def _seconds(fn: Callable[[], object]) -> float:
    """The best time of ``fn``: one call where it took :data:`SLOW_PART_S` or more, else the
    best of a few rounds of enough calls to be timed."""
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    if once >= SLOW_PART_S:
        return once
    return measure(fn, min_time=0.002, repeats=5, warmup=False).min


def _parts_seconds(stat: LineStat, parts: list[ast.expr], deadline: float) -> float | None:
    """Seconds a run of ``stat`` spends on ``parts``, each timed alone on its captured
    values, less what evaluating an expression costs here (a scalar's ``w[0]`` is 55 ns
    inline and 180 ns through ``eval``); None where one cannot be run there, or past
    ``deadline``."""
    try:
        namespace = prepare(stat).namespace()
    except ReplayError:
        return None
    baseline = _seconds(lambda: eval(_NOTHING, namespace))
    total = 0.0
    for part in parts:
        if time.perf_counter() > deadline:
            return None
        code = compile(ast.Expression(part), "<part>", "eval")
        try:
            with np.errstate(all="ignore"):
                total += max(0.0, _seconds(lambda code=code: eval(code, namespace)) - baseline)
        except Exception:  # the part does not run on its own: no cause
            return None
    return total


def attach(rows: dict[int, dict], stats: list[LineStat], display: Callable[[LineStat], str],
           min_seconds: float, deadline: float = float("inf")) -> None:
    """Give each loop-invariant line (``rows``: the report's rows by ``id`` of their
    LineStat) a ``loop-invariant`` cause: its time less one run per entry of its loop, where
    that is at least ``min_seconds``; first in the line's ledger. A line with loop-invariant
    parts (:func:`invariant_parts`): their time, measured, on the runs beyond one per entry
    (``part``: True); parts are not timed after ``deadline``."""
    by_key = {s.statement.key: s for s in stats}
    for stat in stats:
        row = rows.get(id(stat))
        if row is None or stat.statement.loop is None:
            continue
        loop = by_key.get((stat.statement.filename, stat.statement.loop))
        if loop is None:
            continue
        entries = max(1, loop.hits - stat.hits)  # a loop's header runs once more per entry
        name = hoistable(stat, stats, by_key)
        part = name is None
        if name is not None:
            seconds = row["time_s"] * (1.0 - entries / stat.hits)
        else:
            try:  # one line's failure never loses the report
                parts = invariant_parts(stat, stats, by_key)
                if not parts or row["time_s"] < min_seconds:
                    continue
                per_run = _parts_seconds(stat, parts, deadline)
            except Exception:
                continue
            if per_run is None:
                continue
            # at most the line's own time a run, in the program
            seconds = min(per_run, row["time_s"] / stat.hits) * (stat.hits - entries)
            name = "`, `".join(ast.unparse(p) for p in parts)
        if seconds < min_seconds:
            continue
        first_claim(row, {"kind": "loop-invariant", "seconds": seconds, "hits": stat.hits,
                          "entries": entries, "name": name, "loop": display(loop),
                          "compared": stat.compared + 1, "part": part})
