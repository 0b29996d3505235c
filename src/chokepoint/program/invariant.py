"""A statement in a loop that computes the same value on every run: loop-invariant.

A line of a function (outside any loop of it) called again and again is in the same case where
it reads the same values at each call: computing it once, outside the function, does the
same. Later lines of the loop or function that only update the name it binds, reading
nothing else that could change (``cdf = np.cumsum(...)`` then ``cdf /= cdf[-1]``), go with
it.

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
from typing import NamedTuple

import numpy as np

from ..measure.timer import measure
from .analyse import unseen_calls
from .groups import first_claim, inside, stores
from .record import LineStat
from .replay import ReplayError, is_simple_name_assign, prepare

__all__ = ["Scope", "attach", "compared_runs", "hoistable", "invariant_parts", "scope_of",
           "updates"]

#: the parts of a statement that compute something (a bare name or number is no work)
_WORK = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Compare)
#: parts of these run some runs only, or many times a run: not searched
_NOT_EVERY_RUN = (ast.IfExp, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                  ast.GeneratorExp)


def compared_runs(hits: int) -> int:
    """How many of a statement's runs after its first had their inputs compared with the
    first's: each captured again, its 2nd, 4th, 8th... (:func:`.record.recaptured`)."""
    return max(0, hits.bit_length() - 1)


class Scope(NamedTuple):
    """What a statement runs again and again in: the body of its innermost loop, or, for a
    line of a function outside any loop of it, the function's body."""

    header: LineStat  # the loop's header, or the function's ``def``
    function: bool
    entries: int  # runs that would do: one per entry of the loop; one for a function

    def holds(self, other: LineStat, by_key: dict) -> bool:
        """Whether ``other`` runs in this scope (a loop's body at any depth; a function's
        own lines)."""
        h, o = self.header.statement, other.statement
        if self.function:
            return o.filename == h.filename and o.function == h.line and o.line > h.line
        return inside(other, h, by_key)

    @property
    def function_name(self) -> str:
        """The function's name, from its ``def`` line ("" for a loop)."""
        if not self.function:
            return ""
        return self.header.statement.code.split("def ", 1)[-1].split("(", 1)[0].strip()


def scope_of(stat: LineStat, by_key: dict) -> Scope | None:
    """``stat``'s :class:`Scope`, None at a module's top level (or where the loop's header or
    the function's ``def`` was not recorded)."""
    st = stat.statement
    key = st.loop if st.loop is not None else st.function
    header = None if key is None else by_key.get((st.filename, key))
    if header is None:
        return None
    if st.loop is not None:
        return Scope(header, False, max(1, header.hits - stat.hits))  # a header runs once
        # more per entry of its loop
    return Scope(header, True, 1)


def _compared_each_time(stat: LineStat) -> bool:
    """Whether every run of ``stat`` captured again had its inputs compared."""
    return (stat.capture is not None and stat.input_sums is not None and stat.compared > 0
            and stat.compared == compared_runs(stat.hits))


def hoistable(stat: LineStat, stats: list[LineStat], by_key: dict
              ) -> tuple[str, list[LineStat]] | None:
    """The name ``stat`` binds where it is loop-invariant (see the module's notes), with the
    later lines that only update it (:func:`updates`), else None."""
    st = stat.statement
    scope = scope_of(stat, by_key)
    if scope is None or stat.mutates or stat.varying or not _compared_each_time(stat):
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
    if name in scope.header.statement.names or _reads_files(tree):
        return None
    kept = updates(stat, name, stats, by_key)
    for other in stats:
        o = other.statement
        if other is stat or not o.code or not scope.holds(other, by_key):
            continue
        # another line binding or writing it, or reading it before it is computed (the
        # first run reads what the loop was entered with): hoisting it changes the loop
        if (stores(o.code, name) and other not in kept) or (o.line < st.line
                                                            and name in o.names):
            return None
        if scope.function and _hands_out(o.code, name) and not (
                _returns(o.code, name) and _callers_keep(scope, stats)):
            return None  # the caller may change it: a value kept between calls would change
    return name, kept


def _returns(code: str, name: str) -> bool:
    """Whether a statement is ``return name``."""
    try:
        node = ast.parse(code).body[0]
    except (SyntaxError, IndexError):
        return False
    return isinstance(node, ast.Return) and isinstance(node.value, ast.Name) \
        and node.value.id == name


def _callers_keep(scope: Scope, stats: list[LineStat]) -> bool:
    """Whether every line calling the function of ``scope`` binds what it returns to a name
    (``C = dct_matrix(8)``) that no other line of the caller's function (or module) writes
    into, hands to a call or hands out: the value it returns is then never changed, and
    keeping it between calls gives the callers the same. False where a call is in any other
    form, or no caller was recorded."""
    fname = scope.function_name
    callers = 0
    for caller in stats:
        c = caller.statement
        if not c.code or fname not in c.code or c.kind in ("FunctionDef", "AsyncFunctionDef"):
            continue
        try:  # a compound statement's header is parsed with a body
            tree = ast.parse(c.code + ("\n    pass" if c.code.rstrip().endswith(":") else ""))
        except SyntaxError:
            return False
        calls = [
            n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
                (isinstance(n.func, ast.Name) and n.func.id == fname)
                or (isinstance(n.func, ast.Attribute) and n.func.attr == fname))]
        if not calls:
            continue
        bound = is_simple_name_assign(tree)
        if bound is None or len(calls) != 1 or tree.body[0].value is not calls[0]:
            return False
        callers += 1
        for other in stats:
            o = other.statement
            if (other is caller or o.filename != c.filename or o.function != c.function
                    or not o.code):
                continue
            if stores(o.code, bound) or _hands_out(o.code, bound):
                return False
    return callers > 0


#: NumPy's functions that read a file, whose content a program may change between runs
_FILE_READERS = frozenset({"load", "loadtxt", "genfromtxt", "fromfile", "memmap",
                           "fromregex", "open"})


def _reads_files(tree: ast.AST) -> bool:
    """Whether a statement calls something that reads a file (``np.load``, ``open``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(
                f, ast.Name) else ""
            if name in _FILE_READERS:
                return True
    return False


def _hands_out(code: str, name: str) -> bool:
    """Whether a statement hands ``name`` itself to its function's caller or to an object
    (``return w``, ``yield w, x``, ``self.w = w``, ``cache[k] = w``)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return True

    def bare(value: ast.AST | None) -> bool:
        if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
            return any(bare(e) for e in value.elts)
        if isinstance(value, ast.Dict):
            return any(bare(v) for v in value.values)
        return isinstance(value, ast.Name) and value.id == name

    for node in ast.walk(tree):
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and bare(node.value):
            return True
        if isinstance(node, ast.Assign) and bare(node.value) and any(
                isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets):
            return True
    return False


def updates(stat: LineStat, name: str, stats: list[LineStat], by_key: dict
            ) -> list[LineStat]:
    """The later lines of ``stat``'s scope that write ``name`` and read nothing else but
    what ``stat`` read the same at each run compared (``cdf /= cdf[-1]``): once per run of
    ``stat`` (as many runs, the same loop), without a call whose effect is unseen. Computed
    once with ``stat``, they give the same."""
    st = stat.statement
    scope = scope_of(stat, by_key)
    if scope is None or stat.capture is None or stat.input_sums is None:
        return []
    same = set(stat.input_sums) - stat.varying
    ns = {**stat.capture.globals, **stat.capture.values}
    later = sorted((o for o in stats if o is not stat and o.statement.code
                    and o.statement.line > st.line and scope.holds(o, by_key)),
                   key=lambda o: o.statement.line)
    found: list[LineStat] = []
    between: list[LineStat] = []  # the other lines from stat to the update
    for other in later:
        o = other.statement
        if not stores(o.code, name):
            between.append(other)
            continue
        try:
            tree = ast.parse(o.code)
        except SyntaxError:
            return found
        reads = set(o.names) - {name}
        # a line between that reads the name sees it before the update, or changes what
        # the update reads: computed once, both would see something else
        if (other.hits == stat.hits and o.loop == st.loop and o.function == st.function
                and reads <= same and not unseen_calls(tree, ns)
                and not any(isinstance(n, _NOT_EVERY_RUN) for n in ast.walk(tree))
                and not any(name in b.statement.names
                            or any(stores(b.statement.code, r) for r in reads)
                            for b in between)):
            found.append(other)
        else:
            return found  # later updates follow a write that does not go with it
    return found


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
    scope = scope_of(stat, by_key)
    if scope is None or stat.mutates or not _compared_each_time(stat):
        return []
    same = set(stat.input_sums) - stat.varying
    try:
        tree = ast.parse(st.code)
    except SyntaxError:
        return []
    value = _value(tree)
    if not same or value is None:
        return []
    header_names = set(scope.header.statement.names)
    # every line of the scope, this one too: a name written or handed to a call in it is not
    # the same from one run to the next, whatever the runs compared saw
    lines = [o.statement.code for o in stats
             if o.statement.code and (o is stat or scope.holds(o, by_key))]
    ns = {**stat.capture.globals, **stat.capture.values}
    found: list[ast.expr] = []

    def search(node: ast.AST) -> None:
        # the whole value is the statement's (hoistable's rule: ``acc = np.zeros(n)`` then
        # ``acc += x`` needs a fresh one each run); a part of it makes a temporary
        if isinstance(node, _WORK) and node is not value:
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if (names and names <= same and not names & header_names
                    and not any(stores(code, n) for code in lines for n in names)
                    and not unseen_calls(node, ns) and not _reads_files(node)):
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
    LineStat) a ``loop-invariant`` cause: its time less one run per entry of its loop (one in
    all for a function's line), where that is at least ``min_seconds``; first in the line's
    ledger. The later lines that only update what it binds (:func:`updates`) get theirs,
    computed alike (``update``: True). A line with loop-invariant parts
    (:func:`invariant_parts`): their time, measured, on the runs beyond one per entry
    (``part``: True); parts are not timed after ``deadline``."""
    by_key = {s.statement.key: s for s in stats}
    claims: list[tuple[LineStat, dict]] = []
    for stat in stats:
        row = rows.get(id(stat))
        scope = None if row is None else scope_of(stat, by_key)
        if scope is None:
            continue
        where = {"function_name": scope.function_name}
        found = hoistable(stat, stats, by_key)
        if found is not None:
            name, with_lines = found
            for line in (stat, *with_lines):
                claims.append((line, {"name": name, "part": False, **where,
                                      "update": line is not stat,
                                      "with": [display(w) for w in with_lines]
                                      if line is stat else [display(stat)],
                                      "seconds": None}))
            continue
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
        seconds = min(per_run, row["time_s"] / stat.hits) * (stat.hits - scope.entries)
        claims.append((stat, {"name": "`, `".join(ast.unparse(p) for p in parts),
                              "part": True, **where, "update": False, "with": [],
                              "seconds": seconds}))
    for stat, claim in claims:
        row = rows.get(id(stat))
        scope = scope_of(stat, by_key)
        if row is None or scope is None:
            continue
        seconds = claim.pop("seconds")
        if seconds is None:
            seconds = row["time_s"] * (1.0 - scope.entries / stat.hits)
        if seconds < min_seconds:
            continue
        first_claim(row, {"kind": "loop-invariant", "seconds": seconds, "hits": stat.hits,
                          "entries": scope.entries, "loop": display(scope.header),
                          "function": scope.function, "compared": stat.compared + 1, **claim})
