"""The causes of one hot statement, measured on its replay (see :mod:`.replay`).

Each cause is a :class:`Cause`: its kind, the seconds of the line it holds (per execution
measured on the replay, times the executions the recording counted, never more than the line's
recorded time), and the numbers behind it. The wording is written in
:mod:`chokepoint.report.program`. Causes are handed the line's time once, in this order: fresh
memory, BLAS threads, a large intermediate (:mod:`.blocked`), per-call and interpreter
overhead, then what the operation probes of ``explain`` found in what is left.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import linecache
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..explain.api import (
    allocated,
    floor_of,
    measured_rewrite,
    probe_operations,
    rewrite_into,
)
from ..explain.findings import derive_findings
from ..explain.lines import line_rewrites, python_alike, sort_call
from ..explain.model import build_model
from ..explain.probes import ProbeSettings, clear_after_three, significant
from ..explain.rewrite import slice_assignment, statement_part
from ..explain.trace import Trace, trace
from ..measure import statements as _statements
from ..measure.roofline import Roofline
from ..measure.timer import Measurement, format_seconds, measure_interleaved
from ..usercode import user_file
from .blocked import blocked, largest_intermediate
from .heap import available as reused_memory_available
from .heap import fresh_memory, reused_memory
from .joined import assigned_name, joined_distances, sorted_extreme
from .record import PAGE_BYTES, LineStat
from .replay import grown_name, is_simple_name_assign, prepare, run_once, timed_under
from .strided import strided_line, timed_layouts
from .vectorise import vectorised_loop

__all__ = ["Cause", "LineAnalysis", "analyse_line", "call_cost", "kept_share",
           "one_time", "program_refaults", "python_lists", "python_numbers",
           "unmodelled", "unseen_calls"]

#: new memory per execution from which the fresh-memory probe runs (below it, malloc reuses
#: its own free lists and no page is faulted)
FRESH_MIN_BYTES = 256 * 2**10
#: a page fault costs at most this many times writing the page at the memory bandwidth
FAULT_COST = 4
#: the process's peak growing by this much during a line's first run (or the line making this
#: much new memory), and that run taking FIRST_USE_RATIO times its replay, is memory used for
#: the first time
FIRST_USE_BYTES = 4 * 2**20
FIRST_USE_RATIO = 1.3
#: a rewrite is proposed when it measured at least this much faster than the line
FASTER = 1.05
#: a line whose unexplained time in the run is this many times its replays' says so
SLOWER_IN_RUN = 1.5
#: repeats a side of a comparison of whole lines that three repeats did not settle
#: (:func:`~chokepoint.explain.probes.clear_after_three` stops the clear ones at three)
UNSETTLED_REPEATS = 5
#: the kinds a line-level probe measures; explain's per-operation rules for them are dropped
LINE_KINDS = ("allocation", "temporaries", "blas-threads", "numpy-scalars", "overhead")
#: about how many times explain's probes run an operation: one slower than what is left of the
#: line's budget over this is timed, not probed
PROBE_CALLS = 40
#: a line of more operations than this (a loop inside a comprehension) keeps their traced
#: times: timing each again costs far more than the calls
RETIMED_OPS = 2000
#: operations traced in a line at most: recording one costs 20-100 us (a comprehension over
#: 100,000 elements took 20 s to trace and to list); the rest run plain, but for operations
#: on arrays over 8 KiB
TRACED_OPS = 5000
#: operations holding at least this share of a line's replayed time get explain's probes
PROBED_SHARE = 0.1
#: a NumPy call moving at most this many bytes is all fixed cost (its work is a few hundred
#: elements: nanoseconds against the microsecond of dispatch)
SMALL_CALL_BYTES = 8 * 1024
#: an untraced call on small data counts as fixed cost only where tracing the line allocated
#: at most this much (the tracer's own objects take 40-55 KiB; a draw of 10**6 values, 8 MB)
OPAQUE_NEW_BYTES = 64 * 2**10
#: and at most this long a call: a longer one is work whatever its arrays' size
OPAQUE_CALL_S = 200e-6
#: NumPy operations whose work no model here counts (a sort's comparisons, an FFT's
#: butterflies, a set operation's, an interpolation's search per element, a running sum's
#: chain of dependent additions: any ufunc's ``accumulate`` too): their floor is not known, so
#: their time is recoverable only where a measured cause or rewrite holds it (``ndarray.``
#: methods alike)
UNMODELLED = frozenset({
    "cumsum", "cumprod", "nancumsum", "nancumprod", "interp", "cumulative_sum",
    "cumulative_prod",
    "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
    "rfftn", "irfftn", "hfft", "ihfft", "sort", "argsort", "lexsort", "partition",
    "argpartition", "unique", "unique_all", "unique_counts", "unique_inverse",
    "unique_values", "searchsorted", "median", "nanmedian", "percentile", "nanpercentile",
    "quantile", "nanquantile", "isin", "in1d", "intersect1d", "setdiff1d", "setxor1d",
    "union1d", "convolve", "correlate", "histogram", "histogram2d", "histogramdd"})


def unmodelled(name: str) -> bool:
    """Whether a traced operation's work has no model here (:data:`UNMODELLED`)."""
    return name.removeprefix("ndarray.") in UNMODELLED or name.endswith(".accumulate")


@dataclass
class Cause:
    """One measured cause of a line's time."""

    kind: str
    seconds: float  # of the line's recorded time
    numbers: dict = field(default_factory=dict)
    evidence: str = ""  # explain's wording, for the per-operation kinds

    def to_dict(self) -> dict:
        return {"kind": self.kind, "seconds": self.seconds, **self.numbers,
                **({"evidence": self.evidence} if self.evidence else {})}


@dataclass
class LineAnalysis:
    """What the replay of one statement measured."""

    replay_s: float  # per execution
    ops_s: float  # per execution: its NumPy operations timed alone
    calls: int  # operations per execution (views excluded)
    bytes: int  # per execution: inputs once, needed writes once
    flops: int
    new_bytes: int  # per execution: new arrays
    floor_s: float  # per execution
    causes: list[Cause]
    ruled_out: list[dict]
    rewrite: dict | None
    notes: list[str]
    ops: list[dict]
    #: per execution: the replay's time beyond its operations, its interpreter's steps and its
    #: small opaque calls (a random generator filling a large array): work no floor is known for
    unseen_s: float = 0.0
    #: in all its runs: its first run's first touches of memory it left resident (the program
    #: keeps it: no code computing the same avoids touching it once)
    kept_s: float = 0.0
    #: its first run's time beyond its later runs' that neither memory explains (a module
    #: loaded, a library set up on its first use): paid once whatever the code
    once_s: float = 0.0


_COSTS: dict[str, float] = {}


def _cost(name: str, fn) -> float:
    """Seconds ``fn`` takes here, the best of 5 samples, measured once per process."""
    if name not in _COSTS:
        times = timed_under(fn, [contextlib.nullcontext], samples=5, target_s=0.002)
        _COSTS[name] = min(times[0])
    return _COSTS[name]


def call_cost() -> float:
    """Seconds one NumPy call costs on one element here (a ufunc's fixed cost), measured once."""
    a = np.ones(1)
    return _cost("call", lambda: np.add(a, a))


def step_costs() -> tuple[float, float]:
    """Seconds the interpreter takes here for a basic-index view (``a[:, j]``: a new array
    object, no data) and for a step of plain Python (``j + 1``), measured once."""
    a, j = np.ones((4, 4)), 1
    return _cost("view", lambda: a[:, j]), _cost("step", lambda: j + 1)


def _no_restore() -> None:
    """The restore of a statement that leaves the same values when run again: nothing."""


def _small(value: object) -> bool:
    """Whether ``value`` holds at most :data:`SMALL_CALL_BYTES` of data (an array, anything
    with ``nbytes``, a list, tuple or dict of such; scalars and strings count nothing)."""
    if isinstance(value, (list, tuple, dict)):
        items = list(value.values() if isinstance(value, dict) else value)
        return len(items) <= SMALL_CALL_BYTES // 8 and sum(
            getattr(v, "nbytes", 8) for v in items) <= SMALL_CALL_BYTES and all(
            _small(v) for v in items if isinstance(v, (list, tuple, dict)))
    return getattr(value, "nbytes", 0) <= SMALL_CALL_BYTES


def _argument(node: ast.expr, ns: dict) -> tuple[bool, object]:
    """``(known, value)`` of a call's argument read from ``ns`` without running anything: a
    name, an attribute chain on one, a starred one, a list or tuple of such, a constant."""
    if isinstance(node, ast.Starred):
        return _argument(node.value, ns)
    if isinstance(node, ast.Constant):
        return True, node.value
    if isinstance(node, ast.Name):
        return node.id in ns, ns.get(node.id)
    if isinstance(node, ast.Attribute):
        known, base = _argument(node.value, ns)
        if not known:
            return False, None
        try:  # as stored: a property or another descriptor would run code, and is not known
            value = inspect.getattr_static(base, node.attr)
        except AttributeError:
            return False, None
        return not hasattr(type(value), "__get__"), value
    if isinstance(node, (ast.List, ast.Tuple)):
        found = [_argument(e, ns) for e in node.elts]
        return all(k for k, _ in found), [v for _, v in found]
    return False, None


def _small_data(tree: ast.AST, ns: dict, result: object) -> bool:
    """Whether a statement whose traced operations are all small works on small data only:
    its value, and every argument of its calls that is not itself a call or an operation
    (those were traced, or are untraced calls judged by their own arguments), readable
    without running anything and of at most :data:`SMALL_CALL_BYTES`. Arrays it only indexes
    with an operator (``F @ truth[t - 1]``) are read a piece at a time; one it passes to a
    call as ``d['X']`` is not known, and is not small."""
    if not _small(result):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare,
                                    ast.Subscript)):
                    continue  # traced (the caller judges those operations' results)
                known, value = _argument(arg, ns)
                if not known or not _small(value):
                    return False
    return True


def _unseen_callee(value: object) -> bool:
    """Whether a callee does work the tracer cannot see: a random generator's method, another
    library's function (NumPy's are traced; the builtins' and the user's own are not work of
    their own here)."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    while isinstance(value, functools.partial):
        value = value.func
    if inspect.isclass(value):  # a class's construction: its module's, or the user's own
        module = value.__module__ or ""
        if module.split(".")[0] in ("numpy", "builtins", "chokepoint"):
            return module.startswith("numpy.random")
        try:
            return not user_file(inspect.getfile(value))
        except (TypeError, OSError):
            return True
    owner = getattr(value, "__objclass__", None)  # a method of a class written in C
    bound = getattr(value, "__self__", None)
    if owner is None and bound is not None and not inspect.ismodule(bound):
        owner = type(bound)  # a method bound to an instance: np.random.rand
    module = getattr(owner if owner is not None else value, "__module__", None) or ""
    if module.startswith("numpy.random"):
        return True
    if module.split(".")[0] in ("numpy", "builtins", "chokepoint", ""):
        return False
    code = getattr(value, "__code__", None)
    return code is None or not user_file(code.co_filename)


def unseen_calls(tree: ast.AST, ns: dict) -> bool:
    """Whether the statement calls, by a name or an attribute chain read without running
    anything, something whose work the tracer cannot see (:func:`_unseen_callee`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                known, base = _argument(func.value, ns)
                if not known:
                    continue
                try:
                    value = inspect.getattr_static(base, func.attr)
                except AttributeError:
                    continue
            elif isinstance(func, ast.Name) and func.id in ns:
                value = ns[func.id]
            else:
                continue
            if _unseen_callee(value):
                return True
    return False


_STEPS = (ast.Call, ast.Subscript, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.Compare,
          ast.BoolOp)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _integer(node: ast.expr, ns: dict) -> int | None:
    """A ``range`` bound known without running code: a number, a name, ``len`` of a name."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "len" and len(node.args) == 1 and not node.keywords:
        return _length(node.args[0], ns)
    known, value = _argument(node, ns)
    return value if known and isinstance(value, int) and not isinstance(value, bool) else None


def _length(node: ast.expr, ns: dict) -> int | None:
    """How many elements a comprehension's ``for`` clause over ``node`` takes, where that is
    known without running code: a name's (``len``), ``range`` of numbers, names and their
    ``len``, ``enumerate`` or ``zip`` of such (None otherwise)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        name, args = node.func.id, node.args
        if name == "range" and 1 <= len(args) <= 3:
            bounds = [_integer(a, ns) for a in args]
            try:
                return len(range(*bounds))
            except (TypeError, ValueError, OverflowError):  # unknown, a step of 0, or 2**63
                return None
        if name in ("enumerate", "zip") and args:
            lengths = [_length(a, ns) for a in (args[:1] if name == "enumerate" else args)]
            return None if None in lengths else min(lengths)
        return None
    known, value = _argument(node, ns)
    if not known or isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        return None
    try:
        return len(value)
    except TypeError:  # a 0-d array
        return None


def _syntax_steps(tree: ast.AST, ns: dict | None = None) -> int:
    """Calls, subscripts, attribute reads and operators in a statement: the steps the
    interpreter takes besides the NumPy calls themselves; a comprehension's once per element
    of what it iterates, where that is known from ``ns`` (:func:`_length`)."""
    def count(node: ast.AST, times: int) -> int:
        if not isinstance(node, _COMPREHENSIONS):
            return times * isinstance(node, _STEPS) + sum(
                count(child, times) for child in ast.iter_child_nodes(node))
        total, inner = 0, times
        for clause in node.generators:
            total += count(clause.iter, inner)
            n = _length(clause.iter, ns) if ns is not None else None
            inner *= 1 if n is None else n
            total += sum(count(test, inner) for test in clause.ifs)
        parts = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
        return total + sum(count(part, inner) for part in parts)
    return count(tree, 1)


def _expression(statement: _statements.Statement) -> _statements.Statement | None:
    """The expression of ``name = expression`` or of an expression statement, as a
    Statement at the same place (for the kernel and fuse rewrites)."""
    if statement.is_expression:
        return statement
    if is_simple_name_assign(statement.tree) is None:
        return None
    return statement_part(statement, statement.tree.body[0].value)


class _Ledger:
    """The line's seconds, handed out once."""

    def __init__(self, seconds: float):
        self.left = max(0.0, seconds)

    def take(self, seconds: float) -> float:
        taken = min(max(0.0, seconds), self.left)
        self.left -= taken
        return taken


def _blas_limit():
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def kept_share(kept_bytes: int, new_bytes: int) -> float:
    """The share of a first run's first touches that fell on memory it left resident: its
    resident growth over what it touched (its new arrays, or that growth where larger: pages
    of an array made before and first written here)."""
    touched = max(kept_bytes, new_bytes)
    return min(1.0, kept_bytes / touched) if touched > 0 else 0.0


def one_time(first_s: float, line_s: float, hits: int, run_s: float, spread_s: float,
             kept_s: float = 0.0) -> float:
    """What a line's first run took beyond its other runs (and beyond ``run_s``, a run
    replayed), less ``kept_s``, when that exceeds the replay's spread and the first run took
    ``FIRST_USE_RATIO`` times a run: a one-time cost (``np.random.default_rng(0)``'s first call
    imports ``numpy.random``: 9 ms, against 14 us replayed), at most the line's time beyond
    its runs replayed. 0.0 otherwise."""
    others = (line_s - first_s) / (hits - 1) if hits > 1 else 0.0
    run = max(run_s, others)
    gap = first_s - run - kept_s
    if gap <= spread_s or first_s <= FIRST_USE_RATIO * run:
        return 0.0
    return max(0.0, min(gap, line_s - hits * run_s))


def program_refaults(stat: LineStat) -> float | None:
    """A line's page faults a run in the program beyond those of the memory its runs grew
    the process's resident peak by (None where none were counted). Those touch for the first time
    memory the program keeps (an RNN's hidden state appended to a list each step): any code
    computing the same touches it once. The rest touch again memory the process had: what
    reusing it saves."""
    if not stat.fault_hits:
        return None
    return max(0.0, stat.faults - stat.rss_grown / PAGE_BYTES) / stat.fault_hits


def _fresh_memory(times: list[list[float]], faults: list[list[float]], variants: list,
                  stat: LineStat, per_hit: float, new_bytes: int, temporaries: int,
                  causes: list[Cause], ruled: list[dict], ledger: _Ledger) -> float:
    """What fresh memory cost the line a run (its cause, or its ruling out, appended).

    The replay meets the program's allocator (:mod:`.heap`), but not the program's heap: the
    other lines of a loop decide what is free at its top, and so how often it is trimmed and
    faulted in again. Where the recording counted the line's page faults, the cause is those
    faults at what one cost this line, measured as its fresh-memory replay (every new array
    mapped fresh) against its reused-memory one; elsewhere, the replay as written against
    reused memory."""
    as_written, reused = times[0], times[variants.index(reused_memory)]
    kind = "temporaries" if temporaries else "allocation"
    numbers = {"as_written_s": float(np.median(as_written)), "reused_s": float(np.median(reused)),
               "new_bytes": new_bytes, "temporaries_bytes": temporaries, "hits": stat.hits}
    program_faults = program_refaults(stat)
    if program_faults is None:
        saved = numbers["as_written_s"] - numbers["reused_s"]
        if saved <= 0 or not significant(as_written, reused):
            ruled.append({"kind": kind, **numbers})
            return 0.0
        causes.append(Cause(kind, ledger.take(saved * stat.hits), numbers))
        return saved
    fresh = times[variants.index(fresh_memory)]
    counted = {k: float(np.median(faults[variants.index(v)])) for k, v in
               (("as_written", contextlib.nullcontext), ("reused", reused_memory),
                ("fresh", fresh_memory))}
    numbers.update(fresh_s=float(np.median(fresh)), program_faults=program_faults,
                   kept_faults=stat.rss_grown / PAGE_BYTES / stat.fault_hits,
                   **{f"{k}_faults": v for k, v in counted.items()})
    extra = counted["fresh"] - counted["reused"]
    if extra < 1 or not significant(fresh, reused):
        ruled.append({"kind": kind, **numbers})  # no page fault this line's own could price
        return 0.0
    numbers["fault_s"] = (numbers["fresh_s"] - numbers["reused_s"]) / extra
    # the program's faults beyond those of reused memory, at most as many as its arrays all
    # mapped fresh (others' faults: another thread's, an input's first touch, priced here at
    # what this line's faults cost, would be counted as its own), and at most what the line
    # took beyond its reused-memory replay
    faults = min(program_faults, counted["fresh"]) - counted["reused"]
    saved = min(max(0.0, faults) * numbers["fault_s"], max(0.0, per_hit - numbers["reused_s"]))
    if saved <= 0.0:
        ruled.append({"kind": kind, **numbers})
        return 0.0
    taken = ledger.take(saved * stat.hits)
    numbers["faults_s"] = taken  # this cause's seconds from the faults, whatever joins it
    causes.append(Cause(kind, taken, numbers))
    return saved


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    counts = [p.get("num_threads", 1) for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(counts, default=1)


def analyse_line(stat: LineStat, roof: Roofline, settings: ProbeSettings,
                 *, min_share_s: float = 0.0, rewrite: bool = True,
                 deadline: float = math.inf, include: tuple[str, ...] = (),
                 run_deadline: float = math.inf,
                 producer: Callable[[str], LineStat | None] | None = None,
                 consumer: Callable[[], LineStat | None] | None = None,
                 loop_header: Callable[[], LineStat | None] | None = None) -> LineAnalysis:
    """Replay ``stat`` and measure its causes.

    The line-level causes (fresh memory, BLAS threads, a large intermediate) are measured
    until ``run_deadline`` (the run's whole budget); the rewrite and the operations' probes
    until ``deadline`` (the line's share of it). ``producer``: the statement that made a name
    the line reads (two lines of pairwise distances are rewritten together, :mod:`.joined`);
    ``consumer``: the statement after it (a sort whose extreme the next line takes);
    ``loop_header``: the header of the loop holding it (a loop over rows vectorised,
    :mod:`.vectorise`).

    Raises
    ------
    ReplayError
        When it cannot be replayed (the message says why).
    """
    replay = prepare(stat, include)
    st = replay.statement
    line_s = stat.ns / 1e9
    notes = list(replay.notes)

    # what it does: its operations, their bytes and flops, traced on copies (the statement's
    # first run alone: does it run, does it change what it reads?)
    ns = replay.namespace()
    inputs = replay.arrays(ns)
    # ``name = expression`` is traced as its expression: the same operations, and its value
    # (the result the model writes once, what a rewrite must equal)
    expr = _expression(st)
    try:
        with np.errstate(all="ignore"), _statements.preserved_rng(), allocated() as peak:
            tr = trace(expr or st, ns, list(inputs), max_ops=TRACED_OPS)
        if not replay.mutates:
            replay.mutates = bool(_statements.mutated(replay.arrays(replay.pristine), ns))
    except Exception:  # the tracer's wrappers refused: run it plain, and time it without ops
        ns, _ = run_once(replay)
        tr = Trace()
        notes.append("its operations could not be traced (a library refused the tracer's "
                     "wrapped arrays): timed as a whole")
    if replay.mutates:
        ns = replay.namespace()
        inputs = replay.arrays(ns)
    fn = st.function(ns)
    with np.errstate(all="ignore"):
        repeats_same = replay.mutates and replay.repeats_same(fn, ns)
    # timed run after run as its loop ran it: restoring whole arrays between runs evicted what
    # the program read from the cache (a column loop replayed at twice its time in the
    # program, and the causes' shares of that replay were halved)
    restore = _no_restore if repeats_same else replay.restorer(ns)
    if repeats_same:
        notes.append("it changes what it reads, and a second run leaves the same values: "
                     "timed run after run, as in the program")
    elif replay.mutates:
        notes.append("it changes what it reads: each replay starts from the values it saw, "
                     "restored outside the timed region")
    # a replay of a line's arguments alone (print(E), L.append(E)) misses the call: it times
    # only a line whose recorded time is mostly the hook's calls into library functions
    if stat.recorded_ns and not (replay.arguments and stat.recorded_why != "library"):
        # the hook's price in its recorded time is uncertain: its replay's
        with np.errstate(all="ignore"):
            once = float(np.median(timed_under(fn, [contextlib.nullcontext], restore=restore,
                                               mutates=replay.mutates and not repeats_same)[0]))
        # short runs: the time with the hook's price taken out, or the replay's (its call
        # costs more than a 40 ns line), whichever is less: both are at least the line's
        library = stat.recorded_why == "library"
        kept, before = stat.recorded_ns, stat.ns
        stat.ns = int(min(kept, once * 1e9 * stat.hits))
        if before > 0:  # its first run, timed alike
            stat.first_ns = int(stat.first_ns * stat.ns / before)
        line_s = stat.ns / 1e9
        recorded = format_seconds(kept / 1e9)
        if stat.ns < kept:
            why = ("most of it the recording's own cost in the library functions it calls"
                   if library else "the recording slows the interpreter on each of its short "
                   "runs")
            notes.append(f"timed by its replay: {format_seconds(once)} a run, {stat.hits} runs "
                         f"(recorded {recorded}, {why})")
        else:
            notes.append(f"its replay ({format_seconds(once)} a run, {stat.hits} runs) took "
                         f"at least what was recorded ({recorded}): the recorded time is kept")
    model = build_model(tr, inputs)
    ops = [op for op in tr.ops if op.func is not None and not op.is_view]
    if len(tr.ops) > RETIMED_OPS:
        # the tracer's records of a comprehension's thousands of operations outweighed what
        # the line makes (148 MB for a sum over 100,000 products of elements): its own peak
        restore()
        with np.errstate(all="ignore"), _statements.preserved_rng(), allocated() as peak:
            fn()
        restore()
    # new memory: what the traced operations allocate beyond malloc's free lists (a scalar's
    # result is no new page), or what tracemalloc saw (arrays made by calls the tracer does not
    # see, np.ones(n), a generator's method)
    new_bytes = max(sum(op.out_bytes for op in ops
                        if op.allocates and op.out_bytes > SMALL_CALL_BYTES), peak[0])
    # a product BLAS computes (NumPy's own loop multiplies integer matrices: no threads)
    gemm = any(op.gemm and op.result_array is not None and op.result_array.dtype.kind in "fc"
               for op in ops)
    floor = floor_of(tr, model, roof)
    nbytes = max(model.bytes_min, model.bytes_one_pass)
    floor_s = max(roof.floor_seconds(nbytes), floor["compute_s"])
    # an array grown from itself (x = np.hstack([x, part])): the work is writing its new
    # part; copying the rest again each run is what allocating it once saves
    old = inputs.get(grown_name(stat.statement.code) or "") if stat.hits > 1 else None
    if isinstance(old, np.ndarray) and isinstance(tr.result, np.ndarray) \
            and tr.result.nbytes > old.nbytes:
        floor_s = max(roof.floor_seconds(2 * (tr.result.nbytes - old.nbytes)),
                      floor["compute_s"])

    causes: list[Cause] = []
    ruled: list[dict] = []
    ledger = _Ledger(line_s)

    # 1. as written, against the same with freed memory reused, and with one BLAS thread (a
    # matrix product): the settings alternate in one timing
    # page faults cost a few times what writing the pages costs: where that is a small part
    # of the line (a matrix product's result), reusing memory cannot save 10% of it
    per_hit = line_s / max(stat.hits, 1)
    fresh = (new_bytes >= FRESH_MIN_BYTES and reused_memory_available()
             and FAULT_COST * roof.floor_seconds(new_bytes) >= 0.1 * per_hit)
    threads = _blas_threads() if gemm else 1
    variants = [contextlib.nullcontext]
    if fresh:
        # fresh_memory prices a page fault: needed only where the recording counted them
        variants += [reused_memory, fresh_memory] if stat.fault_hits else [reused_memory]
    if threads > 1:
        variants.append(_blas_limit)
    faults: list[list[float]] = []
    with np.errstate(all="ignore"):
        times = timed_under(fn, variants, restore=restore,
                            mutates=replay.mutates and not repeats_same, faults=faults)
    as_written = Measurement(times[0], 1)
    replay_s = as_written.median
    work = _work_share(per_hit, [float(np.median(t)) for t, v in zip(times, variants, strict=True)
                                 if v in (contextlib.nullcontext, reused_memory)], stat.hits)
    if work < 1.0:
        notes.append(f"the run replayed took {format_seconds(replay_s)}, {stat.hits} runs "
                     f"{format_seconds(per_hit)} on average in the program: its work (a mask "
                     "selecting fewer elements later, say) is counted in that proportion")
    fresh_saved = 0.0  # per run
    if fresh:
        fresh_saved = _fresh_memory(times, faults, variants, stat, per_hit, new_bytes,
                                    model.temporaries, causes, ruled, ledger)

    # values captured again at a later run (record.recaptured) whose arrays are not the size
    # the first run read are that run's work, not the first run's nor the average's: they are
    # compared with that run alone, and the share it took beyond its replay stands for the
    # line's
    capture = stat.capture
    again = (capture is not None and not capture.copied and capture.hit > 1
             and capture.run_ns > 0 and capture.input_bytes != stat.first_bytes)
    program_run_s = capture.run_ns / 1e9 if again else per_hit

    # strided slices, the whole line on contiguous ones: from memory where the program ran the
    # line far slower than its replay, whose data stayed in the cache run after run
    # (:mod:`.strided`); measured before first use, which is what is left of that gap
    line_strided = time.perf_counter() < run_deadline and _strided_cause(
        st, ns, program_run_s, replay_s, stat.hits, line_s, causes, ruled, notes, ledger,
        cold=program_run_s > SLOWER_IN_RUN * replay_s)

    # memory used for the first time: the program's first execution of the line grew the
    # process (pages never touched before cost most on a VM); the replay reuses them. Or its
    # new memory's pages had been taken back by the OS since the process last used them (a VM
    # that returns freed memory to the host), which makes every run slower, not only the first
    # (beyond the page faults the fresh-memory cause counted in each run already)
    first_s = stat.first_ns / 1e9
    run_s = replay_s
    if fresh_saved:
        run_s = max(replay_s, float(np.median(times[variants.index(reused_memory)])) + fresh_saved)
    if again:
        first_gap = 0.0
        every = line_s * max(0.0, 1.0 - run_s / program_run_s)
    else:
        first_gap = first_s - replay_s
        every = line_s - stat.hits * run_s
    every -= sum(c.seconds for c in causes if c.kind == "strided-access")  # that gap's share
    excess = max(first_gap, every)
    # of a first run's new pages, those it left resident the program keeps: touched once
    # whatever the code (a column of an array np.empty made, written first here); of the
    # first run's gap only, and from as much growth as makes a first-use cause (the
    # recorder's own copies grow the process by some KiB)
    kept = (kept_share(stat.first_kept, new_bytes)
            if not again and stat.first_kept >= FIRST_USE_BYTES else 0.0)
    kept_s = max(0.0, first_gap) * kept
    if max(stat.peak_growth, new_bytes) >= FIRST_USE_BYTES \
            and excess - kept_s > as_written.iqr \
            and ((not again and first_s > FIRST_USE_RATIO * replay_s)
                 or program_run_s > FIRST_USE_RATIO * run_s):
        causes.append(Cause("allocation", ledger.take(excess - kept_s),
                            {"first_run_s": first_s, "replay_s": replay_s, "run_s": line_s,
                             "peak_growth": stat.peak_growth, "new_bytes": new_bytes,
                             "kept_bytes": stat.first_kept, "first_touch_s": excess,
                             "hits": stat.hits, "first_use": True,
                             **({"captured_hit": capture.hit, "captured_run_s": program_run_s,
                                 "compared_s": run_s} if again else {})}))

    # (a replay of a line's arguments alone, print(E), misses the call's own time: no gap of
    # its first run is one-time there)
    once_s = 0.0 if again or replay.arguments or any(
        c.kind == "allocation" for c in causes) else ledger.take(
        one_time(first_s, line_s, stat.hits, run_s, as_written.iqr, kept_s))

    if threads > 1:
        one_thread = times[variants.index(_blas_limit)]
        numbers = {"threads": threads, "all_threads_s": replay_s,
                   "one_thread_s": float(np.median(one_thread)), "hits": stat.hits,
                   "load": _load()}
        saved = replay_s - numbers["one_thread_s"]
        if saved > 0 and significant(times[0], one_thread):
            causes.append(Cause("blas-threads", ledger.take(saved * stat.hits),
                                numbers))
        else:
            ruled.append({"kind": "blas-threads", **numbers})

    # 1b. NumPy scalars (np.float64 from an array's element) in the line's arithmetic: the
    # same line on Python numbers of the same values
    # and arrays it reads one element at a time (grid[a, b] in a search), as nested lists
    scalars = python_numbers(ns, st.tree)
    lists = python_lists(ns, st.tree)
    valued = _valued(st) if scalars or lists else None
    if valued is not None and time.perf_counter() < run_deadline:
        _scalars_cause(st, valued, fn, ns, scalars, lists, restore,
                       replay.mutates and not repeats_same, stat, line_s, causes, ruled,
                       ledger)

    # 2. a large intermediate (a broadcast): the line on blocks of its result's rows (its
    # temporaries: in the cache, not through memory)
    result = tr.result if isinstance(tr.result, np.ndarray) and expr is not None else None
    block_rewrite = None
    largest = largest_intermediate(ops, inputs, result) if result is not None else 0
    if largest and not replay.mutates and time.perf_counter() > run_deadline:
        notes.append("the probing budget was spent before its large intermediate was "
                     "evaluated on blocks")
    elif largest and not replay.mutates:
        cause, block_rewrite = _blocked_cause(expr, is_simple_name_assign(st.tree), ns, inputs,
                                              result, largest, settings, stat.hits)
        if cause is not None and block_rewrite is not None:
            # evaluated on blocks, the intermediates' page faults go too: what the fresh-memory
            # probe took already is not counted twice, and one temporaries cause holds both
            extra = ledger.take(max(0.0, cause.seconds - fresh_saved * stat.hits))
            fresh_cause = next((c for c in causes if c.kind == "temporaries"), None)
            if fresh_cause is not None:
                fresh_cause.seconds += extra
                fresh_cause.numbers.update(cause.numbers)
            else:
                cause.seconds = extra
                causes.append(cause)
        elif cause is not None:
            ruled.append({"kind": cause.kind, **cause.numbers})

    # 3. the value (for the rewrites), and a rewrite checked on it and timed against the line
    found_rewrite, suggestion = None, None
    in_lines = []
    tried: dict = {}  # the fused kernel's timing, faster or not
    if rewrite and time.perf_counter() > deadline:
        notes.append("the probing budget was spent before a rewrite was tried")
    elif rewrite:
        try:
            with np.errstate(all="ignore"):
                if expr is not None and result is not None:
                    rns = ns if not replay.mutates else replay.namespace()
                    found_rewrite, suggestion = measured_rewrite(
                        expr, rns, replay.arrays(rns), result, replay_s, roof,
                        settings.min_time, tr, tried=tried)
                elif (into := slice_assignment(st)) is not None:
                    found_rewrite, suggestion = rewrite_into(
                        st, into, replay.namespace(), replay_s, roof, settings.min_time,
                        tried=tried)
                if tr.lines:
                    in_lines = line_rewrites(tr.lines, min_time=settings.min_time)
        except Exception as exc:  # the line's other measurements stand
            notes.append(f"a rewrite could not be tried: {type(exc).__name__}: {exc}")
    joined = (_joined(stat, producer, inputs, result, settings, notes, include)
              if rewrite and producer is not None and time.perf_counter() < run_deadline
              else [])
    if rewrite and consumer is not None and time.perf_counter() < run_deadline:
        joined += _extreme(stat, consumer, settings, notes, include)
    if rewrite and loop_header is not None and time.perf_counter() < run_deadline:
        header = loop_header()
        if header is not None:
            joined += _with_line(stat, header, vectorised_loop, settings, notes, include)
    rewrite_out = _rewrite(found_rewrite,
                           in_lines + [block_rewrite] * bool(block_rewrite) + joined,
                           replay_s, stat, line_s, notes)

    # 4. the operations alone (explain's per-operation probes on those that matter)
    late = time.perf_counter() > deadline
    many = len(ops) > RETIMED_OPS
    with np.errstate(all="ignore"):
        rows, _, evidence = probe_operations(
            tr, result, replay_s, roof, settings, model, probed=PROBED_SHARE,
            retime=not late and not many,
            max_op_s=max(0.0, deadline - time.perf_counter()) / PROBE_CALLS, deadline=deadline)
    if many and not late:
        notes.append(f"its {len(ops)} operations keep the time of their traced call (timed "
                     "one by one, they would take longer than the line)")
    elif late or time.perf_counter() > deadline:
        notes.append("the probing budget was spent: its operations were timed, not probed"
                     if late else "the probing budget ran out while its operations were timed: "
                     "the rest keep the time of their recorded call")
    ops_s = sum(r["time_s"] for r in rows if r["time_s"] > 0 and r["time_s"] == r["time_s"])

    # 5. per-call and interpreter overhead: calls on small arrays whole, a fixed cost for the
    # others, and the interpreter's work between them: each view it makes and each other step
    # of the line's syntax at their measured cost, never more than the replay's time beyond
    # its operations. That gap is not all interpreter: strided operations that ran from the
    # cache when timed alone (a column of a C-order array) miss it in the line, and such a
    # gap was once called overhead where the interpreter took a small part of it
    cost = call_cost()
    view_s, step_s = step_costs()
    timed = [r for r in rows if r["time_s"] == r["time_s"] and r["time_s"] > 0]
    small = [r for r in timed if r["in_bytes"] + r["out_bytes"] <= SMALL_CALL_BYTES]
    # not timed again, a small call keeps its traced time, which the tracer's own work
    # inflates (1.7 us for an x[i] of 0.1 us): at most the measured fixed cost of a call
    per_call = sum(r["time_s"] if not many else min(r["time_s"], cost) for r in small) \
        + cost * (len(timed) - len(small))
    untraced = bool(tr.untraced and timed and len(small) == len(timed))
    if untraced:
        # the same code's further elements (a comprehension's), after TRACED_OPS operations all
        # on small data: fixed cost too
        per_call = replay_s
        notes.append(f"its first {len(tr.ops)} operations were traced, all on small data; "
                     f"{tr.untraced} more ran untraced: their time is counted as theirs")
    views = sum(1 for op in tr.ops if op.is_view)
    steps = max(0, _syntax_steps(st.tree, ns) - len(timed) - views)
    interpreter = min(max(0.0, replay_s - ops_s), views * view_s + (steps + 1) * step_s)
    # calls the tracer does not see (a random generator's method, a compiled library's
    # function) on small arrays only: what they took is their fixed cost, not work
    opaque = 0.0
    # (no traced call at all: rng.choice(n, p=P[state]), whose row the tracer saw as a view)
    if (len(small) == len(timed) and all(_small(op.result) for op in tr.ops)
            and not replay.arguments and peak[0] <= OPAQUE_NEW_BYTES
            and _small_data(st.tree, ns, tr.result)):
        calls = sum(isinstance(node, ast.Call) for node in ast.walk(st.tree))
        opaque = min(max(0.0, replay_s - ops_s - interpreter), calls * OPAQUE_CALL_S)
    overhead = min(replay_s, per_call + interpreter + opaque)
    # the rest of the replay beyond all that is another library's work only where the line
    # calls one: a single np.add.at replayed in 53 ms against 36 ms timed alone
    unseen = (max(0.0, replay_s - ops_s - interpreter - opaque)
              if unseen_calls(st.tree, ns) else 0.0)
    unseen = min(replay_s, unseen + sum(
        r["time_s"] for op, r in zip(tr.ops, rows, strict=True)
        if unmodelled(op.name) and r["time_s"] > 0))
    calls = len(timed) + (tr.untraced if untraced else 0)
    numbers = {"hits": stat.hits, "calls": calls, "small_calls": calls - len(timed) + len(small),
               "call_s": per_call / calls if calls else cost, "per_hit_s": replay_s,
               "work_s": max(0.0, replay_s - overhead),
               "overhead_s": overhead, "opaque_s": opaque,
               "loop": f"{st.filename}:{stat.statement.loop}" if stat.statement.loop else None}
    # as a share of the replay, applied to the line's time in the run: the same calls cost
    # more there (other lines between them evict the interpreter's caches) but are no more
    # work
    fraction = overhead / replay_s if replay_s > 0 else 0.0
    numbers["run_per_hit_s"] = line_s / max(stat.hits, 1)
    if fraction > 0.1 and fraction * (line_s - once_s) > min_share_s:
        causes.append(Cause("overhead", ledger.take(fraction * (line_s - once_s)), numbers))

    # 6. what explain's rules find in the rest of the line's time. An operation that makes an
    # array from none (np.ones(n)) costs writing new memory, which the line's fresh-memory
    # probe measured; explain's rules would call the same time memory-bound
    evidence = [e for e in evidence if not e.creation]
    found, ruled_ops, _, _ = derive_findings(evidence, model, replay_s, roof,
                                             rewrite=suggestion, peak_extra=None,
                                             line_rewrites=in_lines)
    # its shares are of the replayed time; the line-level causes took theirs first. They
    # cover the line's time in the run only as far as its replays add up to it: a line that
    # ran slower in the program than replayed alone keeps the difference unexplained
    replayed = stat.hits * replay_s
    base = min(ledger.left, replayed)
    if ledger.left > SLOWER_IN_RUN * replayed and ledger.left - replayed > min_share_s:
        notes.append(f"in the program it took {format_seconds(line_s / max(stat.hits, 1))} a run, "
                     f"{format_seconds(replay_s)} replayed alone: the difference is not measured "
                     "here (the program's memory or caches were not the replay's)")
    fused = tried.get("fused")
    if fused is not None and fused["fused_s"] * FASTER > fused["as_written_s"]:
        # "tried, not faster" said once: the fused kernel is the one rewrite every chain gets
        notes.append(f"one fused pass was tried ({fused['code']}): "
                     f"{format_seconds(fused['fused_s'])} a run against "
                     f"{format_seconds(fused['as_written_s'])} as written, not faster")
    for f in found:
        if f.kind in LINE_KINDS or (line_strided and f.kind == "strided-access"):
            continue  # measured on the whole line already
        share = f.share * base
        if f.kind == "extra-passes" and fused is not None:
            # one pass was measured: it saves what it measured, not what the bytes suggest
            # (cache-resident arrays: ten NumPy passes of 16,000 elements in 55 us, fused 86)
            share = min(share, _fused_saving(fused, stat.hits))
            if share <= 0:
                ruled.append({"kind": "extra-passes", "fused": fused["code"],
                              "as_written_s": fused["as_written_s"],
                              "fused_s": fused["fused_s"], "hits": stat.hits})
        seconds = ledger.take(share)
        if seconds > 0:
            causes.append(Cause(f.kind, seconds, {"hits": stat.hits}, evidence=f.evidence))
    ruled.extend({"kind": r.kind, "evidence": r.evidence} for r in ruled_ops
                 if r.kind not in LINE_KINDS)
    causes.sort(key=lambda c: c.seconds, reverse=True)
    return LineAnalysis(replay_s=replay_s, ops_s=ops_s, calls=len(ops), bytes=int(nbytes * work),
                        flops=int(floor["flops"] * work), new_bytes=int(new_bytes * work),
                        floor_s=floor_s * work,
                        causes=causes, ruled_out=ruled, rewrite=rewrite_out, notes=notes,
                        unseen_s=unseen, kept_s=kept_s, once_s=once_s,
                        ops=[{k: r[k] for k in ("name", "time_s", "in_bytes", "out_bytes",
                                                 "flops")} for r in rows])


def _fused_saving(fused: dict, hits: int) -> float:
    """What one fused pass measured saving over ``hits`` runs (none where it was slower)."""
    return max(0.0, fused["as_written_s"] - fused["fused_s"]) * hits


def python_numbers(ns: dict, tree: ast.AST) -> dict[str, object]:
    """The names the line reads that hold NumPy scalars (``np.float64``, ``np.int64``,
    ``np.bool_``, ``np.complex128``: Python's own number types compute the same), as the
    Python numbers of the same values: NumPy's scalar arithmetic costs many times Python's
    (each operation a ufunc's dispatch)."""
    allowed = python_alike(tree)
    return {n: ns[n].item() for n in sorted(_read_names(tree))
            if isinstance(ns.get(n), np.generic) and ns[n].dtype in allowed}


def _read_names(tree: ast.AST) -> set[str]:
    """The names a line reads (an augmented assignment's target too)."""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}
    return read | {n.target.id for n in ast.walk(tree)
                   if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}


@contextlib.contextmanager
def _bound(ns: dict, values: dict):
    """``values`` bound in ``ns`` for the block, the old bindings back afterwards."""
    old = {k: ns[k] for k in values}
    ns.update(values)
    try:
        yield
    finally:
        ns.update(old)


def _same_value(a, b) -> bool:
    """The same values, shape and dtype (a Python int times an int8 array stays int8, an
    np.int64 makes it int64: not the same result), and not a list for an array."""
    if isinstance(a, np.ndarray) != isinstance(b, np.ndarray):
        return False
    try:
        x, y = np.asarray(a), np.asarray(b)
        return x.shape == y.shape and x.dtype == y.dtype and x.dtype.kind in "biufc" \
            and bool(np.array_equal(x, y, equal_nan=True))
    except (TypeError, ValueError):
        return False


def _valued(st: _statements.Statement) -> _statements.Statement | None:
    """The expression whose value a line computes: an expression, ``return E``, or the value
    assigned (``x = E``, ``total += E``, ``a[i] = E``); None for other statements."""
    if st.is_expression:
        return st
    body = st.tree.body
    if len(body) == 1 and isinstance(body[0], (ast.Assign, ast.AugAssign, ast.Return)) \
            and body[0].value is not None:
        return statement_part(st, body[0].value)
    return None


def python_lists(ns: dict, tree: ast.AST) -> dict[str, int]:
    """The arrays the line reads only one element at a time (every use of the name ``a[i]``
    or ``a[i, j]``: an index per axis, each an integer or names bound to integers), of the
    dtypes Python computes alike (:func:`~chokepoint.explain.lines.python_alike`), at most
    :data:`LIST_MAX` elements: name -> its number of axes. As nested lists (``tolist()``)
    they are indexed at a fraction of an array's cost, whose every element read makes a NumPy
    scalar."""
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    allowed = python_alike(tree)
    found: dict[str, bool] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name):
            continue
        a = ns.get(node.id)
        if not (type(a) is np.ndarray and a.ndim and a.dtype in allowed
                and 0 < a.size <= LIST_MAX):
            continue
        parent = parents.get(id(node))
        index = parent.slice if isinstance(parent, ast.Subscript) and parent.value is node \
            else None
        keys = index.elts if isinstance(index, ast.Tuple) else [index]
        element = (isinstance(node.ctx, ast.Load) and index is not None
                   and isinstance(parent.ctx, ast.Load) and len(keys) == a.ndim
                   and all(_integer_index(k, ns) for k in keys))
        found[node.id] = found.get(node.id, True) and element
    return {name: ns[name].ndim for name, element in sorted(found.items()) if element}


def _integer_index(key: ast.expr, ns: dict) -> bool:
    """An index of one element: arithmetic of integer literals and names bound to integers
    (not an index array, a mask, a slice, None or ...)."""
    for n in ast.walk(key):
        if isinstance(n, ast.Name):
            if not isinstance(ns.get(n.id), (int, np.integer)) or isinstance(ns[n.id], bool):
                return False
        elif isinstance(n, ast.Constant):
            if type(n.value) is not int:
                return False
        elif not isinstance(n, (ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load)):
            return False
    return True


#: the largest array read one element at a time that is tried as a list (its tolist() once
#: costs about 20 ns an element)
LIST_MAX = 1_000_000


class _NestedIndex(ast.NodeTransformer):
    """``a[i, j]`` as ``a[i][j]`` for the names given (lists take one index at a time)."""

    def __init__(self, names) -> None:
        self.names = set(names)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.names \
                and isinstance(node.slice, ast.Tuple):
            nested: ast.expr = node.value
            for key in node.slice.elts:
                nested = ast.Subscript(value=nested, slice=key, ctx=ast.Load())
            return ast.copy_location(nested, node)
        return node


def _listed(st: _statements.Statement, lists: dict) -> _statements.Statement | None:
    """``st`` with its arrays in ``lists`` indexed as nested lists; None where it does not
    parse back."""
    tree = _NestedIndex(lists).visit(ast.parse(st.source))
    try:
        return _statements.Statement.parse(ast.unparse(ast.fix_missing_locations(tree)),
                                           filename=st.filename, first_line=st.first_line)
    except (SyntaxError, ValueError):
        return None


def _scalars_cause(st: _statements.Statement, valued: _statements.Statement, fn, ns: dict,
                   scalars: dict, lists: dict[str, int], restore: Callable[[], None],
                   mutates: bool, stat: LineStat, line_s: float, causes: list[Cause],
                   ruled: list[dict], ledger: _Ledger) -> None:
    """The ``numpy-scalars`` cause: the line as written (``fn``; ``valued``, the expression
    whose value it computes, :func:`_valued`) against the same with its
    NumPy scalars as Python numbers and the arrays it reads element by element (``lists``) as
    nested lists, the line indexing them one axis at a time, where the value it computes is
    the same (else with the scalars alone); what that saves a run, less making the lists
    once."""
    value = valued.function(ns)
    with np.errstate(all="ignore"):
        restore()
        try:
            written = value()
        except Exception:
            return
        for names in (lists, {}):
            tried = _python_variant(st, ns, scalars, names, restore, written)
            if tried is not None:
                break
        else:
            return
        numbers_of, variant_fn, made = tried
        try:
            times = timed_under(fn, [contextlib.nullcontext, lambda: _bound(ns, numbers_of)],
                                restore=restore, mutates=mutates,
                                variant_fns=[None, variant_fn])
        except Exception:  # the line's other measurements stand
            return
    listed = sorted(k for k, v in numbers_of.items() if isinstance(v, list))
    names = sorted(k for k in numbers_of if k not in listed)
    numbers = {"names": names, "types": sorted({type(ns[n]).__name__ for n in names}),
               "lists": listed, "lists_s": made,
               "list_axes": {n: lists[n] for n in listed},
               "written": sorted(set(listed) & _written_names(st)) if listed else [],
               "as_written_s": float(np.median(times[0])),
               "python_s": float(np.median(times[1])), "hits": stat.hits}
    saved = numbers["as_written_s"] - numbers["python_s"]
    if saved > 0.1 * numbers["as_written_s"] and significant(times[0], times[1]):
        # as a share of the replay, applied to the line's time in the run
        share = saved / numbers["as_written_s"]
        taken = ledger.take(max(0.0, share * line_s - made))
        if taken > 0:
            causes.append(Cause("numpy-scalars", taken, numbers))
            return
    ruled.append({"kind": "numpy-scalars", **numbers})


def _python_variant(st: _statements.Statement, ns: dict, scalars: dict, lists: dict,
                    restore: Callable[[], None], written) -> tuple | None:
    """``(bindings, the line's function under them, seconds making the lists)`` for the
    line with ``scalars`` as Python numbers and ``lists`` as nested lists, where its value is
    ``written``'s; None where it is not (or there is nothing to bind)."""
    if not scalars and not lists:
        return None
    listed = _listed(st, lists) if lists else st
    valued = _valued(listed) if listed is not None else None
    if valued is None:
        return None
    made = time.perf_counter()
    bindings = {**scalars, **{name: ns[name].tolist() for name in lists}}
    made = time.perf_counter() - made
    with _bound(ns, bindings):
        # made under the bindings: a name the line also assigns is read when it is made
        variant_fn, value = listed.function(ns), valued.function(ns)
        restore()
        try:
            as_python = value()
        except Exception:  # the line needs them as NumPy's (a method of np.float64)
            return None
    return (bindings, variant_fn, made) if _same_value(written, as_python) else None


def _written_names(st: _statements.Statement) -> set[str]:
    """Names whose elements the code around the line (its function, or its module) assigns:
    a list standing for such an array must be kept in step, not made once."""
    source = "".join(linecache.getlines(st.filename))
    try:
        tree = ast.parse(source) if source else None
    except (SyntaxError, ValueError):
        tree = None
    if tree is None:
        return set(_read_names(st.tree))  # unknown: every name it reads may be written
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.lineno <= st.first_line <= (node.end_lineno or node.lineno) \
                and node.lineno >= getattr(scope, "lineno", 0):
            scope = node
    return {n.value.id for n in ast.walk(scope)
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)}


def _work_share(per_hit: float, replays: list[float], hits: int) -> float:
    """The share of the replayed run's work that an average run of the line did: 1, unless
    the line ran more than once and even its fastest replay (as written, or into memory
    already used) took :data:`SLOWER_IN_RUN` times the program's average run. The bytes and
    flops of one run, counted once per run, would then price every run at the replayed one's
    (a Mandelbrot's masked update, replayed on an early run's mask: 14 GB at the floor for a
    204 ms line)."""
    fastest = min(replays, default=0.0)
    if hits < 2 or fastest <= 0 or per_hit <= 0 or fastest <= SLOWER_IN_RUN * per_hit:
        return 1.0
    return per_hit / fastest


def _strided_cause(st: _statements.Statement, ns: dict, program_run_s: float,
                   replay_s: float, hits: int, line_s: float, causes: list[Cause],
                   ruled: list[dict], notes: list[str], ledger: _Ledger, *,
                   cold: bool) -> bool:
    """The line as written against its strided slices contiguous (``cold``: the caches
    emptied before each run), on ``ns`` (the replay's own copies, left as they were): a
    strided-access cause (True) where that measured faster, as the share of a run in the
    program (``program_run_s``) it saves, at most what that run took beyond the contiguous
    one."""
    try:
        line = strided_line(st, ns)
        if line is None:
            return False
        written, contiguous = timed_layouts(line, cold)
    except Exception as exc:  # MemoryError included: the line's other measurements stand
        notes.append(f"its strided slices could not be timed contiguous: "
                     f"{type(exc).__name__}: {exc}")
        return False
    numbers = {"written_s": float(np.median(written)),
               "contiguous_s": float(np.median(contiguous)), "cold": cold,
               "run_per_hit_s": program_run_s, "replay_s": replay_s, "operands": line.operands,
               "strided_bytes": line.strided_bytes, "hits": hits, "line": True}
    if cold and numbers["written_s"] > program_run_s:
        # both ran from memory, slower than the program's run, whose loop had left part of
        # what it reads in the cache (a column's neighbour shares its cache lines): their
        # ratio, applied to that run (a lasso's column of X: 77 us against 38 us contiguous,
        # 11 us a run in the program; 4 us by hand on the transpose's rows)
        saved = program_run_s * (1.0 - numbers["contiguous_s"] / numbers["written_s"])
    else:
        saved = min(program_run_s, numbers["written_s"]) - numbers["contiguous_s"]
    if saved <= 0 or program_run_s <= 0 or not significant(written, contiguous):
        ruled.append({"kind": "strided-access", **numbers})
        return False
    causes.append(Cause("strided-access", ledger.take(line_s * saved / program_run_s),
                        numbers))
    return True


def _blocked_cause(expr: _statements.Statement, target: str | None, ns: dict, inputs: dict,
                   result: np.ndarray, largest: int, settings: ProbeSettings,
                   hits: int) -> tuple[Cause | None, dict | None]:
    """The ``temporaries`` cause of a large intermediate: the line as written against the same
    expression on blocks of rows (:func:`.blocked.blocked`), with the same values; the cause
    (its seconds the whole saving over the run; None where nothing was tried) and the blocked
    code as a rewrite where it measured faster."""
    plan = blocked(expr.source, target, ns, inputs, result, largest)
    if plan is None:
        return None, None
    try:
        with np.errstate(all="ignore"):
            same = np.array_equal(plan.call(), result, equal_nan=result.dtype.kind in "fc")
    except Exception:  # the expression does not take a block of rows
        same = False
    if not same:  # it mixes rows: blocks give other values
        return None, None
    with np.errstate(all="ignore"):
        written, on_blocks = measure_interleaved(
            [expr.function(ns), plan.call], min_time=settings.min_time,
            repeats=max(settings.repeats, UNSETTLED_REPEATS), enough=clear_after_three)
    numbers = {"largest_bytes": largest,
               "own_bytes": sum(a.nbytes for a in inputs.values()) + result.nbytes,
               "rows": plan.rows, "unblocked_s": written.median,
               "blocked_s": on_blocks.median, "hits": hits}
    saved = written.median - on_blocks.median
    if saved <= 0 or not significant(written.times, on_blocks.times):
        return Cause("temporaries", 0.0, numbers), None
    rewrite = {"statement": plan.code, "speedup": written.median / on_blocks.median,
               "measured_s": on_blocks.median, "values": "same values", "note": ""}
    return Cause("temporaries", saved * hits, numbers), rewrite


def _with_line(stat: LineStat, other: LineStat, rewrite: Callable, settings: ProbeSettings,
               notes: list[str], include: tuple[str, ...]) -> list[dict]:
    """``rewrite(stat, other, min_time, include)``, a rewrite of the line with ``other`` (the
    statement just before or after it), as a candidate capped at the two lines' time; none
    where there is none, or it failed (``notes`` says so)."""
    try:
        found = rewrite(stat, other, settings.min_time, include)
    except Exception as exc:  # the line's other measurements stand
        notes.append(f"its rewrite with line {other.statement.line} could not be tried: "
                     f"{type(exc).__name__}: {exc}")
        return []
    if found is None:
        return []
    found["cap_s"] = (stat.ns + other.ns) / 1e9
    return [found]


def _joined(stat: LineStat, producer: Callable[[str], LineStat | None], inputs: dict,
            result, settings: ProbeSettings, notes: list[str],
            include: tuple[str, ...]) -> list[dict]:
    """The line's pairwise distances rewritten with the line that made the 3-D difference it
    reduces (:func:`.joined.joined_distances`), as a candidate rewrite; none where it is not
    that."""
    if not isinstance(result, np.ndarray) or result.ndim != 2 or result.dtype.kind != "f":
        return []
    made = next((m for m in (producer(n) for n, v in inputs.items()
                             if v.ndim == 3 and v.dtype == result.dtype) if m is not None), None)
    if made is None:
        return []
    return _with_line(stat, made, joined_distances, settings, notes, include)


def _extreme(stat: LineStat, consumer: Callable[[], LineStat | None], settings: ProbeSettings,
             notes: list[str], include: tuple[str, ...]) -> list[dict]:
    """The line's sort rewritten with the next line, which takes only its first or last entry
    (:func:`.joined.sorted_extreme`), as a candidate rewrite; none where it is not that."""
    if assigned_name(stat) is None or sort_call(
            ast.parse(stat.statement.code).body[0].value) is None:
        return []
    after = consumer()
    if after is None:
        return []
    return _with_line(stat, after, sorted_extreme, settings, notes, include)


def _rewrite(found: dict | None, in_lines: list[dict], replay_s: float, stat: LineStat,
             line_s: float, notes: list[str] | None = None) -> dict | None:
    """The measured rewrite of the line that saves the most, with what it saves over the run
    (a rewrite of two lines, ``lines_s`` a run as written, what it saves of both, up to
    ``cap_s``; a rewrite of a part of the line, ``original_s`` that part's time, what the part
    saves). A compiled rewrite (fuse) of a line run once, whose one run saves less than the
    rewrite's first call took in this process (``first_call_s``: compiling, or loading
    numba's cache), is not proposed, and ``notes`` says why; in a loop its first call is said
    beside what its runs save."""
    # the ratio measured beside the replay, applied to a run as the program took it where that
    # was less: a replay on fresh pages can take longer (a heat step's line replayed in 2.9 ms
    # for 1.2 ms a run in the program, and its rewrite "saved" the whole line)
    run_s = min(replay_s, line_s / stat.hits) if stat.hits else replay_s
    candidates = []
    if found is not None and found["speedup"] >= FASTER:
        candidates.append({"code": found["statement"], "speedup": found["speedup"],
                           "measured_s": found["measured_s"],
                           "values": found.get("values", ""), "note": found.get("note", ""),
                           "first_call_s": found.get("first_call_s")})
    for r in in_lines:
        if r.get("speedup", 0) >= FASTER:
            candidates.append({"code": r["statement"], "speedup": r["speedup"],
                               "measured_s": r["measured_s"], "values": r.get("values", ""),
                               "note": r.get("note", ""), "lines_s": r.get("lines_s"),
                               "cap_s": r.get("cap_s"), "joins": r.get("joins"),
                               "original_s": r.get("original_s")})
    best, best_saved = None, 0.0
    for c in candidates:
        lines_s, cap_s, part_s = c.pop("lines_s", None), c.pop("cap_s", None), \
            c.pop("original_s", None)
        if c.get("joins") is None:
            c.pop("joins", None)
        if lines_s is not None:
            per_hit = lines_s - c["measured_s"]
        elif part_s is not None:
            # a part of the line (f ** 3 in a GELU): what the part saves, not the part's
            # speedup applied to the whole line
            # its saving as a share of the part, the part at most the whole replay: a part
            # timed slower alone than the line replayed (a scatter-add on a fresh copy) saves
            # no more than its ratio of the line
            part_saved = (min(part_s, replay_s) * max(0.0, 1.0 - c["measured_s"] / part_s)
                          if part_s > 0 else 0.0)
            per_hit = min(run_s, part_saved * min(1.0, run_s / replay_s) if replay_s else 0.0)
            c["part_speedup"] = c["speedup"]
            after = max(replay_s - part_saved, replay_s / c["speedup"])
            c["speedup"] = replay_s / after if after > 0 else c["speedup"]
            if c["speedup"] < FASTER:  # a faster part of a line it hardly changes
                continue
        else:
            per_hit = run_s - run_s / c["speedup"]
        c["saved_s"] = min(cap_s if cap_s is not None else line_s, per_hit * stat.hits)
        first_call = c.get("first_call_s")
        if first_call is None:
            c.pop("first_call_s", None)
        elif stat.hits == 1 and c["saved_s"] <= first_call:
            if notes is not None:
                notes.append(f"a compiled rewrite measured {c['speedup']:.1f}x faster "
                             f"({c['code']}), but its first call took "
                             f"{format_seconds(first_call)} here (compiling, or loading "
                             "numba's cache), more than the line's one run would save "
                             f"({format_seconds(c['saved_s'])})")
            continue
        if best is None or c["saved_s"] > best_saved:
            best, best_saved = c, c["saved_s"]
    return best


def _load() -> float | None:
    """The machine's one-minute load average per core (None where unknown)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return None
