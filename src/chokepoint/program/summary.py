"""The report of a recorded run: every line's time and recoverable time, the slowest lines
replayed and their causes measured (:func:`analyse_program`), and :class:`ProgramReport`.

The design is in ``docs/run.md``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..explain.probes import ProbeSettings
from ..measure.roofline import Roofline, cache_path, roofline
from ..measure.statements import preserved_rng
from .analyse import LineAnalysis, analyse_line
from .api import BUDGET_S, shown_path
from .groups import attach as attach_groups
from .heap import as_in_program, release_heap
from .invariant import attach as attach_invariant
from .joined import consumer_of, producer_of
from .record import LineStat, Recorder
from .replay import ReplayError, grown_name
from .strided import release as release_strided
from .vectorise import header_of

__all__ = ["CLOSE", "LITTLE", "SCHEMA", "ProgramReport", "analyse_program", "recoverable",
           "uncertain"]

SCHEMA = 1
#: the lines replayed are the slowest ones holding this share of the lines' time...
COVER = 0.9
#: ...at most this many
MAX_LINES = 10
#: a line holding this share of the run is replayed past COVER (within MAX_LINES and the
#: budget): left out, its whole time counted recoverable and it took the headline in one run
#: of two
WORTH_SHARE = 0.05
#: lines under this share of the wall time are not replayed
MIN_LINE_SHARE = 0.005
#: a line's largest measured cause names the line when it holds this share of its time
CAUSE_SHARE = 0.25
#: below this share of the run, all the lines' recoverable time together is "little to recover"
#: (the report then names the slowest line before the headline)
LITTLE = 0.1
#: lines whose recoverable time is within this share of the headline's are named beside it
CLOSE = 0.15
#: each line's own operation probes and rewrites start within this share of the budget
LINE_BUDGET = 0.25
#: a line whose hook's calls into library functions are at least this share of its recorded
#: time is timed by its replay (LineStat.recorded_ns); the price itself read 0.6-1.7x its usual
#: value in a fresh process on a busy VM, so a third is enough to doubt the line
HOOK_UNCERTAIN = 0.3
#: a line run this many times or more, each run under TRACED_SHORT_NS of its own time, is
#: timed by its replay too: the traced interpreter runs its every instruction slower
TRACED_HITS = 1000
TRACED_SHORT_NS = 2000
#: said of such a line whose replay did not time it
UNCERTAIN_NOTE = ("its time is uncertain: most of what was recorded was the recording's own "
                  "cost in the library functions it calls, and no replay timed it")
#: how the per-operation probes time things in a run (shorter than explain's own)
RUN_PROBES = ProbeSettings(min_time=0.01, repeats=3)


@dataclass
class ProgramReport:
    """Where a program's time went. ``to_dict()`` is the JSON of ``chokepoint run --json``."""

    program: str
    argv: list[str]
    exit_status: int
    wall_s: float
    recording_s: float
    probing_s: float
    machine: dict
    lines: list[dict]
    loops: list[dict] = field(default_factory=list)
    error: str | None = None  # the program's exception, formatted
    notes: list[str] = field(default_factory=list)
    roof: Roofline | None = field(default=None, repr=False)
    #: glibc's thresholds as the program left them (:mod:`.heap`), None where unknown
    allocator: dict | None = None

    @property
    def findings(self) -> list[dict]:
        """Every measured cause of every line, as shares of the wall time, largest first."""
        out = []
        for line in self.lines:
            for cause in line.get("causes", []):
                share = cause["seconds"] / self.wall_s if self.wall_s > 0 else 0.0
                out.append({"kind": cause["kind"], "share": share, "source": line["source"],
                            **{k: v for k, v in cause.items() if k != "kind"}})
        out.sort(key=lambda f: f["share"], reverse=True)
        return out

    @property
    def fresh_memory(self) -> dict:
        """The fresh-memory causes that rest on the page faults counted in the program: their
        seconds together, on how many lines, and the thresholds the program ran under."""
        causes = [c for line in self.lines for c in line.get("causes", [])
                  if c["kind"] in ("allocation", "temporaries") and "faults_s" in c]
        return {"seconds": sum(c["faults_s"] for c in causes), "lines": len(causes),
                "allocator": self.allocator}

    @property
    def unexplained_share(self) -> float:
        """The share of the wall time that no measured cause holds."""
        return max(0.0, 1.0 - sum(f["share"] for f in self.findings))

    @property
    def little_to_recover(self) -> bool:
        """Whether the lines' recoverable time together is under :data:`LITTLE` of the run."""
        return sum(line["recoverable_s"] for line in self.lines) < LITTLE * self.wall_s

    @property
    def headline(self) -> dict:
        top = self.lines[0] if self.lines else None
        if top is None:
            return {"source": None, "cause": None, "recoverable_s": 0.0, "rewrite": None,
                    "close": [], "unknown": None}
        # lines whose recoverable time is this close are a tie: which comes first moves with
        # the machine's noise from run to run
        close = [line["source"] for line in self.lines[1:4]
                 if line["recoverable_s"] >= (1 - CLOSE) * top["recoverable_s"] > 0]
        # a line spending more than that in work whose floor is not known (a sort, an FFT,
        # another library's call) is named too: none of it counts as recoverable, and all of
        # it may be (a whole sort for its last element)
        unknown = max(self.lines, key=lambda line: line.get("unseen_s", 0.0))
        return {"source": top["source"], "code": top["code"], "cause": top["cause"],
                "recoverable_s": top["recoverable_s"], "time_s": top["time_s"],
                "rewrite": top["rewrite"], "close": close,
                "unknown": unknown["source"] if unknown is not top
                and unknown.get("unseen_s", 0.0) > top["recoverable_s"] else None}

    def to_dict(self) -> dict:
        """JSON-ready (schema 1, documented in docs/run.md)."""
        return {"schema": SCHEMA, "program": self.program, "argv": self.argv,
                "exit_status": self.exit_status, "wall_s": self.wall_s,
                "overhead": {"recording_s": self.recording_s, "probing_s": self.probing_s},
                "machine": self.machine, "lines": self.lines, "loops": self.loops,
                "headline": self.headline, "findings": self.findings,
                "unexplained_share": self.unexplained_share, "error": self.error,
                "notes": self.notes, "fresh_memory": self.fresh_memory}

    def text(self, width: int | None = None) -> str:
        from ..report.program import program_text

        return program_text(self, width=width)

    def to_html(self) -> str:
        from ..report.program import program_html

        return program_html(self)

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:  # Jupyter
        return self.to_html()

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython
        printer.text(self.text())


def _source(stat: LineStat) -> str:
    return f"{shown_path(stat.statement.filename)}:{stat.statement.line}"


def _row(stat: LineStat, wall_s: float) -> dict:
    st = stat.statement
    time_s = stat.ns / 1e9
    code = st.code.split("\n")[0] if st.code else ""
    return {"source": _source(stat), "code": code, "hits": stat.hits,
            "time_s": time_s, "python_s": None, "bytes": 0, "flops": 0, "new_bytes": 0,
            "floor_s": 0.0, "recoverable_s": time_s, "unseen_s": 0.0, "kept_s": 0.0,
            "once_s": 0.0,
            "share": time_s / wall_s if wall_s > 0 else 0.0, "cause": None, "rewrite": None,
            "analysed": False, "modelled": True, "why_not": None, "causes": [],
            "ruled_out": [], "notes": [],
            "loop": f"{shown_path(st.filename)}:{st.loop}" if st.loop else None,
            "grows": grown_name(st.code) if stat.hits > 1 and st.code else None,
            "_stat": stat}


def _replayed_time(row: dict, stat: LineStat, wall_s: float) -> None:
    """A line timed by its replay (see LineStat.recorded_ns): its row's time and share are
    the replay's, and what was recorded is kept beside them."""
    if stat.recorded_ns:
        row.update(time_s=stat.ns / 1e9, share=stat.ns / 1e9 / wall_s if wall_s > 0 else 0.0,
                   recorded_s=stat.recorded_ns / 1e9)


def _apply(row: dict, stat: LineStat, a: LineAnalysis, wall_s: float) -> None:
    hits = stat.hits
    _replayed_time(row, stat, wall_s)
    row.update(analysed=True, bytes=a.bytes * hits, flops=a.flops * hits,
               new_bytes=a.new_bytes * hits, floor_s=min(row["time_s"], a.floor_s * hits),
               python_s=min(row["time_s"], max(0.0, a.replay_s - a.ops_s) * hits),
               replay_s=a.replay_s, causes=[c.to_dict() for c in a.causes],
               ruled_out=a.ruled_out, rewrite=a.rewrite, notes=a.notes, ops=a.ops)
    row["once_s"] = min(a.once_s, row["time_s"])
    if a.calls:
        unseen = a.unseen_s / a.replay_s if a.replay_s > 0 else 0.0
        row["unseen_s"] = min(1.0, unseen) * row["time_s"]
        row["kept_s"] = min(a.kept_s, row["time_s"])
        measured = max(sum(c.seconds for c in a.causes),
                       (a.rewrite or {}).get("saved_s") or 0.0)
        row["recoverable_s"] = recoverable(row["time_s"], row["floor_s"], unseen, measured,
                                           row["kept_s"] + row["once_s"])
    else:
        # no operation chokepoint can see (a random generator's method, a C extension): no
        # floor is known, and what is recoverable is only what was measured
        row["modelled"] = False
        row["recoverable_s"] = min(row["time_s"], sum(c.seconds for c in a.causes))
    # a line's cause is its largest measured cause when that holds a good part of its time;
    # a 5% finding is not what a 400 ms line is about
    top = a.causes[0] if a.causes else None
    row["cause"] = top.kind if top and top.seconds >= CAUSE_SHARE * row["time_s"] else None


def recoverable(time_s: float, floor_s: float, unseen_share: float, measured_s: float,
                kept_s: float = 0.0) -> float:
    """A modelled line's recoverable seconds: its time less its floor, less the share of it
    spent in work the tracer did not see (``unseen_share`` of its replay: a random generator's
    method, a compiled library's function), whose floor is unknown, less ``kept_s``, what its
    first run paid once whatever the code (first touches of memory the program keeps, a
    library set up on first use), unless measured causes account for more (each at most its
    time less its floor)."""
    modelled = time_s - floor_s - unseen_share * time_s - kept_s
    return max(0.0, min(time_s - floor_s, max(modelled, measured_s)))


def _loop_header(row: dict, stat: LineStat) -> None:
    """A loop's header holds the interpreter's work of looping: overhead, as recorded."""
    row.update(analysed=True, python_s=row["time_s"], cause="overhead",
               causes=[{"kind": "overhead", "seconds": row["time_s"], "hits": stat.hits,
                        "header": True}])


def _loops(rows: list[dict]) -> list[dict]:
    """Each loop with its lines' time (nested loops included) and the overhead measured in
    them."""
    by_source = {r["source"]: r for r in rows}
    loops: dict[str, dict] = {}
    for r in rows:
        parent = r["source"] if r["_stat"].statement.is_loop else r["loop"]
        seen: set[str] = set()
        while parent and parent not in seen:  # this loop, then the loops around it
            seen.add(parent)
            header = by_source.get(parent, {})
            entry = loops.setdefault(parent, {
                "source": parent, "code": header.get("code", ""),
                "iterations": header.get("hits", 0), "time_s": 0.0, "overhead_s": 0.0,
                "lines": 0})
            entry["time_s"] += r["time_s"]
            entry["overhead_s"] += sum(c["seconds"] for c in r["causes"]
                                       if c["kind"] == "overhead")
            entry["lines"] += 1
            parent = header.get("loop")
    return sorted(loops.values(), key=lambda e: e["time_s"], reverse=True)


def uncertain(recorded_ns: int, taken_ns: int, library_ns: float, hits: int) -> str:
    """Why a line's recorded time, ``taken_ns`` once the hook's price is taken out, is
    uncertain: "library" where the hook's calls into library functions were priced at
    :data:`HOOK_UNCERTAIN` of it or more,
    "interpreter" where its runs were many and short (the traced interpreter is slower on
    every instruction), else "" (see :attr:`.record.LineStat.recorded_ns`)."""
    if recorded_ns > 0 and library_ns >= HOOK_UNCERTAIN * recorded_ns:
        return "library"
    if hits >= TRACED_HITS and 0 < taken_ns < TRACED_SHORT_NS * hits:
        return "interpreter"
    return ""


def analyse_program(recorder: Recorder, *, program: str, argv: list[str], exit_status: int,
                    wall_s: float, roof: Roofline | None = None, budget_s: float = BUDGET_S,
                    settings: ProbeSettings = RUN_PROBES, error: str | None = None,
                    progress: Callable[[str], None] | None = None) -> ProgramReport:
    """The report of a recorded run: every line's time, the slowest lines replayed and their
    causes measured, within ``budget_s`` seconds of probing."""
    start = time.perf_counter()
    if roof is None:
        if progress is not None and not cache_path().exists():
            progress("measuring this machine's roofline (about 10 s, cached afterwards)")
        roof = roofline()
    # the hook's own cost, taken out of each line's time (it lands in the line it interrupts)
    costs = recorder.hook_cost_ns()
    # the lines' order of probing: by their time; an uncertain one's is anywhere between 0 and
    # what was recorded (the price of the hook's calls was off by 2.3x on a loop of NumPy's
    # small Python functions): half of that, until its replay says
    order = {}
    for s in recorder.lines.values():
        taken = costs.taken_out(s)
        library = costs.library_ns(s)
        s.recorded_why = uncertain(s.ns, taken, library, s.hits)
        # kept beside the replay's: what was recorded (the library's price uncertain), or
        # that less the hook's price (the interpreter's runs: at most that)
        if s.recorded_why == "library":
            s.recorded_ns = s.ns
        elif s.recorded_why:
            s.recorded_ns = taken
        order[id(s)] = max(taken, s.ns // 2) if s.recorded_why == "library" else taken
        if s.ns > 0:  # its captured run and its first, each with its share of the hook
            if s.capture is not None:
                s.capture.run_ns = int(s.capture.run_ns * taken / s.ns)
            s.first_ns = int(s.first_ns * taken / s.ns)
        s.ns = taken
    stats = sorted(recorder.lines.values(), key=lambda s: order[id(s)], reverse=True)
    estimated_s = sum(order.values()) / 1e9
    as_in_program(recorder.allocator)  # the statements replayed meet the program's allocator
    rows = [_row(s, wall_s) for s in stats]
    notes = []
    covered, probed = 0.0, 0
    deadline = start + budget_s
    for row in rows:
        stat = row["_stat"]
        if stat.statement.is_loop:
            _loop_header(row, stat)
            continue
        estimate = order[id(stat)] / 1e9
        if ((covered >= COVER * estimated_s and estimate < WORTH_SHARE * wall_s)
                or probed >= MAX_LINES or estimate < MIN_LINE_SHARE * wall_s):
            row["why_not"] = "not among the slowest lines"
            continue
        covered += estimate
        if time.perf_counter() > deadline:
            row["why_not"] = f"not probed: the probing budget ({budget_s:g} s) was spent"
            continue
        probed += 1
        if progress is not None:
            progress(f"probing {row['source']} ({row['time_s'] * 1e3:.1f} ms, "
                     f"{stat.hits} hits)")
        began = time.perf_counter()
        # each line's own probes start within its share of the budget
        line_deadline = min(deadline, began + budget_s * LINE_BUDGET)
        try:
            # a replay prints nothing and leaves the random generators as they were
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()), preserved_rng():
                _apply(row, stat, analyse_line(stat, roof, settings,
                                               min_share_s=0.01 * wall_s,
                                               deadline=line_deadline,
                                               run_deadline=deadline,
                                               include=recorder.include,
                                               producer=functools.partial(
                                                   producer_of, stats, stat),
                                               consumer=functools.partial(
                                                   consumer_of, stats, stat),
                                               loop_header=functools.partial(
                                                   header_of, stats, stat)), wall_s)
        except ReplayError as exc:
            row["why_not"] = f"not replayed: {exc}"
        except (Exception, SystemExit) as exc:  # one line's failure never loses the report
            row["why_not"] = f"its replay failed: {type(exc).__name__}: {exc}"
        row["probe_s"] = time.perf_counter() - began
    for row in rows:  # a line timed by its replay, or left uncertain where it was not
        stat = row["_stat"]
        if stat.recorded_ns and (stat.recorded_why == "library" or stat.ns < stat.recorded_ns):
            _replayed_time(row, stat, wall_s)  # a replay that failed may have timed it
            if not row["analysed"] and stat.recorded_why == "library":
                row["notes"] = [*row["notes"], UNCERTAIN_NOTE]
    # a group-by written as a loop of masks: its lines' causes, from the whole loop
    by_stat = {id(row["_stat"]): row for row in rows}
    attach_groups(by_stat, stats, _source, min_seconds=0.01 * wall_s, deadline=deadline)
    # a line computing the same value on every run of its loop
    attach_invariant(by_stat, stats, _source, min_seconds=0.01 * wall_s, deadline=deadline)
    for row in rows:
        if any(c.get("first") for c in row["causes"]):
            top = row["causes"][0]
            row["cause"] = top["kind"] if top["seconds"] >= CAUSE_SHARE * row["time_s"] else None
    release_strided()
    release_heap()
    lines_s = sum(s.ns for s in stats) / 1e9  # an uncertain line's time, its replay's
    loops = _loops(rows)
    for row in rows:
        row.pop("_stat")
    rows.sort(key=lambda r: (r["recoverable_s"], r["time_s"]), reverse=True)
    machine = roof.summary()
    uncaptured = [_source(s) for s in stats if s.over_budget]
    if uncaptured:
        notes.append(f"{len(uncaptured)} line(s) were over the capture budget: "
                     + ", ".join(uncaptured[:5]))
    return ProgramReport(program=program, argv=argv, exit_status=exit_status, wall_s=wall_s,
                         recording_s=max(0.0, wall_s - lines_s), probing_s=time.perf_counter()
                         - start, machine=machine, lines=rows, loops=loops, error=error,
                         notes=notes, roof=roof,
                         allocator=recorder.allocator.to_dict() if recorder.allocator else None)
