"""``explain``: where the time of array code goes, measured on this machine.

The code may be an expression, statements, a cell, or a call of the user's functions. It runs
several times: once to check it (and whether it mutates its inputs), repeatedly to time it, once
traced, once under tracemalloc, and each operation that takes at least :data:`PROBED` of the
time again under each probe — always on fresh copies of the setup's arrays, never on the
user's. Each operation carries the file and line of the user's code that issued it; the lines
are summed into a line_profiler-like table against the machine's ceilings.
"""

from __future__ import annotations

import ast
import contextlib
import linecache
import math
import time
import tracemalloc
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from ..kernels.adaptive import settle
from ..measure.roofline import Roofline, roofline
from ..measure.statements import Statement, arrays_in, mutated, run_setup
from ..measure.timer import Measurement, measure_counted, measure_interleaved
from ..measure.userstate import Restored, UserState, user_state
from ..report.words import changes_globals, later_run
from .distances import Distances, find_distances
from .findings import Finding, OpEvidence, RuledOut, derive_findings
from .lines import line_rewrites
from .model import Model, build_model
from .probes import (
    FRESH_BYTES,
    ProbeSettings,
    ProbeSkipped,
    probe_bytes,
    probe_op,
    skipped,
    subset,
    time_op,
)
from .rewrite import (
    CLOSE_ULP,
    FASTER,
    find_rewrite,
    lift_slices,
    max_ulp,
    slice_assignment,
    touched_bytes,
)
from .trace import CREATIONS, trace, untraced

__all__ = ["PROBED", "ExplainError", "Explanation", "allocated", "explain", "floor_of",
           "measured_rewrite", "probe_operations", "rewrite_into"]

#: operations taking at least this share of the traced time are probed; the others are timed
PROBED = 0.01
#: an operation whose traced call took this long is not timed again before its probes
SLOW_OP_S = 0.1
#: a statement whose first run took this long (or half of ``min_time``, when more) is timed
#: call by call, 3 repeats, as probes time slow operations: the 1-2-5 ladder's repeats cost
#: many runs of a slow statement
SLOW_STATEMENT_S = 0.05


class ExplainError(RuntimeError):
    """The statement could not be explained (it raised, or is not an expression)."""


@dataclass
class Explanation:
    """Where a statement's time goes. ``to_dict()`` is the JSON of ``chokepoint explain``."""

    statement: str
    setup: str
    median_s: float
    iqr_s: float
    floor_s: float
    model: Model
    ops: list[dict]
    findings: list[Finding]
    ruled_out: list[RuledOut]
    machine: dict
    rewrite: dict | None = None
    warnings: list[str] = field(default_factory=list)
    runs: int = 0
    op_elements: list[int] = field(default_factory=list, repr=False)
    #: per operation, the seconds no finding explains (for the text report; not in the JSON)
    op_unexplained: list[float] = field(default_factory=list, repr=False)
    lines: list[dict] = field(default_factory=list)
    minor: list[Finding] = field(default_factory=list)
    floor: dict = field(default_factory=dict)
    line_rewrites: list[dict] = field(default_factory=list)

    @property
    def bytes_moved(self) -> int:
        return self.model.bytes_moved

    @property
    def bytes_min(self) -> int:
        return self.model.bytes_min

    def to_dict(self) -> dict:
        """JSON-ready: the docs/interfaces.md schema, plus ``rewrite`` and ``warnings``."""
        return {
            "statement": self.statement,
            "time": {"median_s": self.median_s, "iqr_s": self.iqr_s},
            "floor_s": self.floor_s,
            "bytes_moved": self.bytes_moved,
            "bytes_min": self.bytes_min,
            "ops": self.ops,
            "findings": [f.to_dict() for f in self.findings],
            "ruled_out": [r.to_dict() for r in self.ruled_out],
            "machine": self.machine,
            "rewrite": self.rewrite,
            "warnings": self.warnings,
            "lines": self.lines,
            "minor": [{"kind": f.kind, "share": f.share, "evidence": f.evidence}
                      for f in self.minor],
            "floor": self.floor,
            "line_rewrites": self.line_rewrites,
        }

    def to_html(self) -> str:
        """A self-contained HTML report (see :mod:`chokepoint.report.html`)."""
        from ..report.html import explanation_html

        return explanation_html(self)

    def _repr_html_(self) -> str:  # Jupyter
        from ..report.html import explanation_html

        return explanation_html(self, full=False)

    def roofline_points(self) -> list[tuple[str, float, float]]:
        """Each timed operation as ``(name, elements per byte, elements per second)``."""
        return [(op["name"], n / (op["in_bytes"] + op["out_bytes"]), n / op["time_s"])
                for op, n in zip(self.ops, self.op_elements, strict=True)
                if op["time_s"] and n and op["in_bytes"] + op["out_bytes"]]

    def plot(self, path):
        """Write the roofline chart of the operations (.png or .svg)."""
        from ..report.plots import roofline_figure, save_figure

        return save_figure(roofline_figure(self.roofline_points(), self.machine["read_bw"],
                                           self.machine["flops"]), path)

    def text(self) -> str:
        """The human report."""
        from ..report.text import explanation_text

        return explanation_text(self)

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython
        printer.text(self.text())


def _statement_inputs(statement: Statement, namespace: dict) -> dict[str, np.ndarray]:
    return {k: v for k, v in arrays_in(namespace, statement.names).items() if v.size > 0}


def _remember_source(statement: Statement) -> None:
    """Let linecache (tracebacks, the per-line table) show the lines of a typed statement."""
    if statement.filename.startswith("<"):
        lines = [""] * (statement.first_line - 1) + [
            line + "\n" for line in statement.source.splitlines()]
        linecache.cache[statement.filename] = (len(statement.source), None, lines,
                                               statement.filename)


@contextlib.contextmanager
def allocated() -> Iterator[list[int]]:
    """The peak of new memory inside the block, from tracemalloc (NumPy reports its array
    buffers there): a one-element list, filled on exit."""
    peak = [0]
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        yield peak
    finally:
        peak[0] = max(0, tracemalloc.get_traced_memory()[1] - before)
        if not was_tracing:
            tracemalloc.stop()


def _peak_extra(fn) -> int | None:
    """Peak memory a call allocates beyond its result."""
    with allocated() as peak:
        value = fn()
    result = int(np.asarray(value).nbytes) if isinstance(value, np.ndarray) else 0
    return max(0, peak[0] - result)


def _op_dtype(op) -> str:
    r = op.result_array
    if r is not None:
        return str(r.dtype)
    return str(op.inputs[0].dtype) if op.inputs else "float64"


def probe_operations(tr, result, total: float, roof: Roofline, settings: ProbeSettings,
                     model: Model, *, probed: float = PROBED, retime: bool = True,
                     max_op_s: float = math.inf, deadline: float = math.inf):
    """Time every traced operation, and probe those that matter: the JSON rows, each row's
    element count (for the roofline chart) and the evidence for the findings. With
    ``retime=False`` nothing runs again: each operation keeps the time of its traced call,
    and none is probed; an operation slower than ``max_op_s`` is timed, not probed (its
    probes would run it dozens of times). Past ``deadline`` (``time.perf_counter()``), the
    operations left keep their traced time and are not probed (a line of many small calls
    takes long to time one by one)."""
    measured: dict[int, tuple[float, dict]] = {}
    scratch: dict = {}  # arrays the operations' probes share, dropped on return
    timed = [op for op in tr.ops if op.func is not None and not op.is_view]
    # every operation timed quickly first (the traced call paid for first touches); those at
    # PROBED of the time or more are then probed: their causes, not only their time
    quick = replace(settings, min_time=settings.min_time / 6, repeats=3)
    if not retime:
        probed = math.inf

    def quick_time(op) -> Measurement:
        # a call as slow as a probe's whole budget is timed well enough by its traced call
        if not retime or op.seconds > SLOW_OP_S or time.perf_counter() > deadline:
            return Measurement(times=[op.seconds], loops=1)
        try:  # into a copy of what it writes (out=, an assignment's target)
            return time_op(op, quick)
        except MemoryError:
            skipped(f"timing {op.label} again")
            return Measurement(times=[op.seconds], loops=1)

    limit = probe_bytes()
    first = {id(op): quick_time(op) for op in timed}
    known = sum(m.median for m in first.values()) or 1.0
    for op in timed:
        m = first[id(op)]
        if m.median >= probed * known and m.median <= max_op_s \
                and time.perf_counter() < deadline:
            slow = m.median * m.loops >= settings.min_time  # a good enough base already
            try:
                m, probes = _probed(op, m, slow, settings, scratch, limit)
            except MemoryError:
                skipped(f"probing {op.label}")
                probes = []
            measured[id(op)] = (m.median, {p.name: p for p in probes})
        else:  # under 1%: its time, not its causes
            measured[id(op)] = (m.median, {})
    known = sum(seconds for seconds, _ in measured.values())
    rows, elements, evidence = [], [], []
    needed = model.op_needed or [None] * len(tr.ops)
    for op, op_needed in zip(tr.ops, needed, strict=True):
        if op.is_view:
            seconds, probes = 0.0, {}
        elif op.func is None:  # opaque: what the traced operations do not account for
            seconds, probes = max(0.0, total - known), {}
        else:
            seconds, probes = measured[id(op)]
        gbps = (op.in_bytes + op.out_bytes) / seconds / 1e9 if seconds > 0 else 0.0
        rows.append({"name": op.text, "in_bytes": op.in_bytes, "out_bytes": op.out_bytes,
                     "allocates": op.allocates, "time_s": seconds, "gbps": gbps,
                     "roof_fraction": gbps * 1e9 / roof.bandwidth, "source": op.source,
                     "flops": op.flops,
                     "gflops": op.flops / seconds / 1e9 if seconds > 0 else 0.0})
        if op.gemm and op.flops and seconds > 0:
            rows[-1]["ceiling_fraction"] = op.flops / seconds / roof.gemm_ceiling(_op_dtype(op))
        r = op.result_array
        elements.append(0 if r is None else r.size)
        if seconds > 0:
            produces = result is not None and r is not None and np.may_share_memory(r, result)
            evidence.append(OpEvidence(
                label=op.label, seconds=seconds, in_bytes=op.in_bytes, out_bytes=op.out_bytes,
                allocates=op.allocates, produces_result=produces, probes=probes,
                flops=op.flops, gemm=op.gemm, dtype=_op_dtype(op), source=op.source,
                conversion=op.name == "ndarray.astype", needed=op_needed,
                creation=op.name in CREATIONS and not op.inputs))
    return rows, elements, evidence


def _line_rows(tr, rows: list[dict], causes: list[str | None], total: float,
               roof: Roofline, rewrites: list[dict] | None = None) -> list[dict]:
    """The operations summed per line of the user's code, in the order the lines first ran;
    a line with a measured rewrite carries it (``rewrite``: the kernel call, its speed-up and
    the time it saves here), whatever the line's cause."""
    lines: dict[str, dict] = {}
    timed = iter(causes)
    for op, row in zip(tr.ops, rows, strict=True):
        cause = next(timed) if row["time_s"] > 0 else None
        key = op.source or "<untraced>"
        line = lines.get(key)
        if line is None:
            code = linecache.getline(op.filename, op.line).strip() if op.filename else ""
            line = lines[key] = {"source": key, "code": code, "time_s": 0.0, "share": 0.0,
                                 "bytes": 0, "flops": 0, "cause": None, "_causes": {},
                                 "ceiling_s": 0.0}
        line["time_s"] += row["time_s"]
        line["bytes"] += row["in_bytes"] + row["out_bytes"]
        line["flops"] += row["flops"]
        if op.gemm and op.flops:
            line["ceiling_s"] += op.flops / roof.gemm_ceiling(_op_dtype(op))
        else:
            line["ceiling_s"] += (row["in_bytes"] + row["out_bytes"]) / roof.bandwidth
        if cause is not None:
            line["_causes"][cause] = line["_causes"].get(cause, 0.0) + row["time_s"]
    scale = max(total, sum(line["time_s"] for line in lines.values())) or 1.0
    out = []
    for line in lines.values():
        causes_here = line.pop("_causes")
        line["cause"] = max(causes_here, key=causes_here.get) if causes_here else None
        line["share"] = line["time_s"] / scale
        seconds = line["time_s"]
        line["gbps"] = line["bytes"] / seconds / 1e9 if seconds > 0 else 0.0
        line["gflops"] = line["flops"] / seconds / 1e9 if seconds > 0 else 0.0
        line["ceiling_fraction"] = line.pop("ceiling_s") / seconds if seconds > 0 else 0.0
        found = [r for r in rewrites or [] if r["source"] == line["source"]]
        if found:
            best = max(found, key=lambda r: r.get("saved_s", 0.0))
            line["rewrite"] = {key: best[key] for key in (
                "statement", "replaces", "speedup", "saved_s", "share") if key in best}
        out.append(line)
    return out


def _rewrite_savings(tr, rows: list[dict], rewrites: list[dict], total: float) -> None:
    """Each measured rewrite of a line with the time it saves in this program: what it saved
    per call, times the calls (the times the line ran), never more than the line's measured
    time; and that as a share of the time (``saved_s``, ``share``, ``runs``, in place)."""
    times: dict[str, float] = {}
    for row in rows:
        times[row["source"]] = times.get(row["source"], 0.0) + row["time_s"]
    scale = max(total, sum(row["time_s"] for row in rows)) or 1.0
    for r in rewrites:
        filename, _, line = r["source"].rpartition(":")
        runs = max(1, tr.line_runs.get((filename, int(line)), 1)) if line.isdigit() else 1
        saved = min(times.get(r["source"], 0.0),
                    runs * max(0.0, r["original_s"] - r["measured_s"]))
        r.update(runs=runs, saved_s=saved, share=saved / scale)


def _checked_ceilings(evidence: list[OpEvidence], roof: Roofline,
                      total: float) -> tuple[Roofline, list[str]]:
    """The roofline, with each matmul ceiling raised to what the statement's own matrix
    products reached where they beat it (a ceiling measured on a busy machine, or a cached one
    that no longer holds: a floor above the measured time would be no floor), and the warning
    that says so."""
    import dataclasses

    gemm, gemm_1t, warned = dict(roof.gemm), dict(roof.gemm_1t), []
    products = [op for op in evidence if op.gemm and op.flops and op.seconds > 0]
    # the statement ran all its products in ``total`` at most: their rate was at least this
    overall = sum(op.flops for op in products) / total if total > 0 else 0.0
    for op in products:
        rate = max(op.flops / op.seconds, overall)
        name = "float32" if np.dtype(op.dtype).itemsize <= 4 else "float64"
        ceiling = roof.gemm_ceiling(op.dtype)
        if rate > 1.1 * ceiling and rate > gemm.get(name, 0):
            gemm[name] = rate
            warned.append(f"{op.label} reached {rate / 1e9:.1f} GFLOP/s, above the roofline's "
                          f"{name} matmul ceiling ({ceiling / 1e9:.1f} GFLOP/s, measured "
                          f"{roof.measured_at}): that ceiling no longer holds, so the floor and "
                          "the findings use the rate reached (chokepoint roofline --refresh "
                          "measures it again)")
    if not warned:
        return roof, []
    return dataclasses.replace(roof, gemm=gemm, gemm_1t=gemm_1t), warned


def floor_of(tr, model: Model, roof: Roofline) -> dict:
    """The least time: the larger of the memory floor (inputs read once, the result written
    once at its narrowest dtype) and the compute floor (each operation's flops over its
    ceiling: the matmul rate for matrix products, the higher of the elementwise and the matmul
    rate for the rest)."""
    # elementwise flops over the higher of the elementwise rate and the matmul rate: the
    # elementwise kernel of the roofline is a dependent multiply-add chain (latency-bound), and
    # no code outruns the machine's matmul, so the higher is still a floor
    compute = sum(op.flops / (roof.gemm_ceiling(_op_dtype(op)) if op.gemm else
                              max(roof.compute, roof.gemm_ceiling(_op_dtype(op))))
                  for op in tr.ops if op.flops and not op.is_view)
    memory = roof.floor_seconds(model.bytes_min)
    floor = {"memory_s": memory, "compute_s": compute, "flops": sum(op.flops for op in tr.ops),
             "bound": "compute" if compute > memory else "memory"}
    if model.bytes_one_pass:
        # what the same steps move fused (a loop rewriting an array reads and writes it once
        # per step): the floor of the program as written, where the memory floor is that of
        # any program with these inputs and result
        floor["one_pass_bytes"] = model.bytes_one_pass
        floor["one_pass_s"] = roof.floor_seconds(model.bytes_one_pass)
    return floor


def _probed(op, quick: Measurement, slow: bool, settings: ProbeSettings, scratch: dict,
            limit: int) -> tuple[Measurement, list]:
    """:func:`probe_op` of ``op`` (its ``quick`` timing as the base where it was ``slow``
    enough to be a good one), or of its first rows when it is larger than ``limit``
    (:func:`~chokepoint.explain.probes.subset`; each probe says so, and the operation keeps
    its quick timing)."""
    part, share = subset(op, limit, fresh=FRESH_BYTES)
    if part is op:
        return probe_op(op, settings, scratch, base=quick if slow else None)
    if quick.median > settings.slow:  # as few repeats as the whole operation would get
        settings = replace(settings, repeats=min(settings.repeats, 3))
    _, probes = probe_op(part, settings, scratch)
    return quick, [_scaled(p, share) for p in probes]


def _scaled(probe, share: float):
    """A probe of an operation's first rows (``share`` of them) in the whole operation's
    units: its times over ``share`` (ratios kept), its detail saying so. The cache and tiny
    probes are per element already."""
    said = f"; on its first {share:.0%} of rows"
    if probe.name in ("cache", "tiny"):
        return replace(probe, detail=probe.detail + said)

    def whole(m: Measurement) -> Measurement:
        return Measurement(times=[t / share for t in m.times], loops=m.loops)

    return replace(probe, base=whole(probe.base), changed=whole(probe.changed),
                   detail=probe.detail + said + ", times scaled to all of them")


@contextlib.contextmanager
def _skips_said(warned: list[str]):
    """Collect the :class:`ProbeSkipped` warnings of the block into ``warned`` (explain warns
    them once, with the others, at its end); other warnings pass on as they were."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ProbeSkipped)
        yield
    for w in caught:
        if issubclass(w.category, ProbeSkipped):
            warned.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _rewrite_repeats(total: float) -> int:
    """Repeats of a rewrite's round-robin with a statement of ``total`` seconds: 3 for a slow
    one (see :data:`SLOW_STATEMENT_S`), else 5."""
    return 3 if total >= SLOW_STATEMENT_S else 5


def _side_by_side(calls: list, min_time: float, total: float) -> list[Measurement]:
    """The statement (first) and its rewrites timed in one round-robin. Where the rewrite's
    best run is :data:`FASTER` and its median is not, a moment of load decided the median (a
    parallel kernel waiting on a busy core's time slices: a fused reduction 1.45-1.5x faster
    beside a busy core, except in such a moment): measured once more, with twice the repeats,
    and that measurement stands."""
    repeats = _rewrite_repeats(total)
    found = measure_interleaved(calls, min_time=min(min_time, 0.02), repeats=repeats)
    before, after = found[0], found[1]
    if after.median * FASTER > before.median and after.min * FASTER <= before.min:
        found = measure_interleaved(calls, min_time=min(min_time, 0.02), repeats=2 * repeats)
    return found


def measured_rewrite(statement: Statement, namespace, inputs, result, total: float,
                      roof: Roofline, min_time: float, tr=None,
                      into: tuple[str, Statement] | None = None, tried: dict | None = None
                      ) -> tuple[dict | None, str | None]:
    """The rewrite (and its narrow variant) timed, and the suggestion text for findings: only
    when it measured faster than the statement. A chokepoint kernel where one has the same
    values; else, for a chain of elementwise operations, the fused kernel. ``into``: the
    statement is the value of ``target[slices] = statement`` (the target's code, and that whole
    line): the fused kernel writes into the target (``out=``) and is timed against the line.
    ``tried``, where given, gets the fused kernel's timing whether or not it was faster
    (``tried["fused"]``: its code, ``as_written_s`` and ``fused_s``): it measures what one pass
    saves, which the extra-passes rule only estimates from bytes."""
    if not statement.is_expression:
        return None, None
    if into is not None:
        return _fused_rewrite(statement, namespace, result, total, roof, min_time, tr, into,
                              tried)
    found = find_rewrite(statement.source, namespace, inputs, result)
    if found is None:
        distances = find_distances(inputs, result)
        if distances is not None:
            found_distances = _distances_rewrite(statement, namespace, distances, result, total,
                                                 roof, min_time)
            if found_distances[0] is not None:
                return found_distances
        return _fused_rewrite(statement, namespace, result, total, roof, min_time, tr,
                              tried=tried)

    statement_fn = statement.function(dict(namespace))
    # the rewrite and its narrow variant timed with the statement in one round-robin: the
    # statement's runs are shared (timed once per pair, they cost a run each)
    candidates = [c for c in (found, found.narrow) if c is not None]
    for candidate in candidates:
        settle(candidate.call)
    before, *after = _side_by_side([statement_fn, *(c.call for c in candidates)], min_time,
                                   total)

    def timed(candidate, m: Measurement) -> dict:
        return {"statement": candidate.statement,
                "predicted_s": roof.floor_seconds(candidate.bytes),
                "measured_s": m.median, "speedup": before.median / m.median,
                "note": candidate.note, "values": candidate.values}

    rewrite = timed(found, after[0])
    if rewrite["speedup"] < FASTER:
        return None, None  # not faster here: no rewrite to propose
    suggestion = f"{found.statement}, one pass with the {found.values}"
    if found.narrow is not None:
        rewrite["narrow"] = timed(found.narrow, after[1])
        suggestion = (f"{found.narrow.statement} (same values as uint8) or {found.statement}: "
                      "one pass")
    return rewrite, suggestion


def _distances_rewrite(statement: Statement, namespace, distances: Distances, result,
                       total: float, roof: Roofline, min_time: float
                       ) -> tuple[dict | None, str | None]:
    """Pairwise distances by a matrix product (:mod:`.distances`), timed side by side with the
    statement; proposed only when faster."""
    statement_fn = statement.function(dict(namespace))
    before, after = _side_by_side([statement_fn, distances.call], min_time, total)
    if after.median * FASTER > before.median:
        return None, None
    rewrite = {"statement": distances.statement,
               "predicted_s": roof.floor_seconds(result.nbytes),
               "measured_s": after.median, "speedup": before.median / after.median,
               "note": "", "values": distances.values, "distances": True,
               "error": distances.error}
    return rewrite, (f"{distances.statement}: the pairs' products as one matrix product, "
                     f"measured {rewrite['speedup']:.1f}x faster ({distances.values})")


def rewrite_into(line: Statement, into: tuple[str, Statement], namespace: dict, total: float,
                 roof: Roofline, min_time: float, tried: dict | None = None
                 ) -> tuple[dict | None, str | None]:
    """The fused rewrite of ``line``, ``target[slices] = value`` (``into``: see
    :func:`~chokepoint.explain.rewrite.slice_assignment`), writing into the target: the value
    traced on ``namespace`` (copies: the rewrite writes where the line does), checked against
    it and timed against the whole line (``tried``: see :func:`measured_rewrite`)."""
    target, value = into
    inputs = _statement_inputs(value, namespace)
    traced = trace(value, dict(namespace), list(inputs))
    if not isinstance(traced.result, np.ndarray):
        return None, None
    return measured_rewrite(value, namespace, inputs, traced.result, total, roof, min_time,
                            traced, into=(target, line), tried=tried)


def _fused_rewrite(statement: Statement, namespace, result, total: float, roof: Roofline,
                   min_time: float, tr, into: tuple[str, Statement] | None = None,
                   tried: dict | None = None) -> tuple[dict | None, str | None]:
    """``chokepoint.fuse(...)`` for an expression of two or more elementwise operations, its
    values checked against the statement's on the user's data, timed side by side (``into``,
    ``tried``: see :func:`measured_rewrite`)."""
    from ..fuse import fuse
    from ..fuse.trace import REDUCTIONS, FuseError

    # views and elements (w[i]) are fuse's arguments (lift_slices), not its operations
    chain = [op for op in (tr.ops if tr is not None else []) if not op.is_view
             and not (op.kind == "index" and np.ndim(op.result) == 0)]
    # fuse takes ufuncs, functions it knows, and the reductions' methods (x.max(axis=1))
    if (result is None or result.dtype.kind not in "fiub" or len(chain) < 2
            or any(op.gemm or op.kind not in ("ufunc", "function", "method")
                   or (op.kind == "method" and op.name.split(".")[-1] not in REDUCTIONS)
                   for op in chain)):
        return None, None
    try:
        # a stencil's slices (u[2:, 1:-1]) are arguments: fuse reads them in place
        source, slices = lift_slices(statement.source, namespace)
        fused = fuse(source)
        names = list(fused.arguments)
        values = {n: eval(slices[n], dict(namespace)) if n in slices else namespace[n]
                  for n in names}
        first = time.perf_counter()
        ours = np.asarray(fused(**values))
        compile_s = time.perf_counter() - first
    except (FuseError, KeyError, TypeError, ValueError, SyntaxError, NotImplementedError):
        return None, None  # not fusable (an axis reduction, indexing, a Python branch...)
    if ours.shape != result.shape or ours.dtype != result.dtype:
        return None, None
    ulp = max_ulp(ours, result)  # an integer or boolean result: 0 when equal, else inf
    if ulp > CLOSE_ULP:
        return None, None
    arguments = [f"{n}={slices.get(n, n)}" for n in names]
    # x += ...: x itself is the target; x[i] += ... (i an array: a copy) must be a view
    line = into[1].tree.body[0] if into is not None else None
    target = (_target(into[0], namespace, ours, isinstance(line, ast.AugAssign)
                      and isinstance(line.target, ast.Name))
              if into is not None else None)
    if into is not None and target is None:
        return None, None
    if target is not None:
        arguments.append(f"out={into[0]}")
        values_out = {**values, "out": target}  # where the line writes: one pass, no copy
    else:
        values_out = values
    code = f"chokepoint.fuse({source!r})({', '.join(arguments)})"
    statement_fn = (into[1] if into is not None else statement).function(dict(namespace))
    settle(lambda: fused(**values_out))
    before, after = _side_by_side([statement_fn, lambda: fused(**values_out)], min_time, total)
    if tried is not None:
        tried["fused"] = {"code": code, "as_written_s": before.median, "fused_s": after.median}
    if after.median * FASTER > before.median:
        return None, None
    same = "same values" if ulp == 0 else \
        f"values within {ulp:.2g} ulp of the result's largest magnitude of NumPy's"
    nbytes = touched_bytes(v for v in values.values() if isinstance(v, np.ndarray)) \
        + result.nbytes
    rewrite = {"statement": code, "predicted_s": roof.floor_seconds(nbytes),
               "measured_s": after.median, "speedup": before.median / after.median,
               "note": (f"its first call compiled in {compile_s:.2g} s (cached on disk "
                        "afterwards)"), "fused": True, "max_ulp": ulp, "values": same,
               "first_call_s": compile_s}
    passes = _passes(fused.plans[0])
    said = "one pass" if passes == 1 else f"{passes} passes (a reduction first)"
    return rewrite, f"{code}: {said}, measured {rewrite['speedup']:.1f}x faster ({same})"


def _target(code: str, namespace: dict, value: np.ndarray, in_place: bool = False
            ) -> np.ndarray | None:
    """The array ``code`` (``u[1:-1, 1:-1]``) names in ``namespace``, where it is a writable
    view of the shape and dtype of ``value`` (what fuse's ``out=`` takes), else None;
    ``in_place`` (``x += ...``): the array itself may be it."""
    try:
        target = eval(code, dict(namespace))
        node = ast.parse(code, mode="eval").body
        # a view of the array the code indexes, not a copy (u[:, mask], u[:, idx] are copies
        # whose base is set: writing into them would change nothing)
        whole = eval(ast.unparse(node.value), dict(namespace)) \
            if isinstance(node, ast.Subscript) else target
    except Exception:  # the user's code: any error means no such view
        return None
    # plain arrays only: a masked array's out= would write into its masked entries too
    if (type(target) is not np.ndarray or (target.base is None and not in_place)
            or not isinstance(whole, np.ndarray) or not np.may_share_memory(target, whole)
            or not target.flags.writeable or target.shape != value.shape
            or target.dtype != value.dtype):
        return None
    return target


def _passes(plan) -> int:
    """How many passes over its operands a fused plan makes: one, and one per reduction it
    reads (each computed first)."""
    return 1 + sum(_passes(stage) for stage in plan.stages.values())


def _parse(statement: str | Statement) -> Statement:
    if isinstance(statement, Statement):
        return statement
    try:
        return Statement.parse(statement)
    except (SyntaxError, ValueError, TypeError) as exc:
        raise ExplainError(f"explain cannot parse the code: {exc}") from exc


def explain(statement: str | Statement, setup: str = "", *, namespace: dict | None = None,
            roof: Roofline | None = None, min_time: float = 0.1,
            probe_settings: ProbeSettings | None = None) -> Explanation:
    """Say where the time of ``statement`` goes.

    Parameters
    ----------
    statement : str or Statement
        An expression (``"np.ceil(np.clip(X, 0, 1))"``), statements (``"G[X <= 0] = 0"``),
        a multi-line cell, or a call of the user's functions (``"step(X, y, W1, b1)"``).
        A :class:`~chokepoint.measure.statements.Statement` keeps its file name and line
        numbers (``chokepoint explain -f FILE``).
    setup : str
        Code that makes its inputs (seeded generators; the user's RNG state is kept).
    namespace : dict, optional
        Names visible to setup and statement (the IPython user namespace for ``%explain``);
        arrays in it are copied, never modified.
    roof : Roofline, optional
        This machine's roofline; measured or read from the cache when omitted.
    min_time : float
        Seconds per timing repeat of the whole statement.
    probe_settings : ProbeSettings, optional
        How the per-operation probes are timed.

    Returns
    -------
    Explanation

    Raises
    ------
    ExplainError
        When the code does not parse, or raises.
    """
    stmt = _parse(statement)
    _remember_source(stmt)
    roof = roofline() if roof is None else roof
    settings = probe_settings or ProbeSettings()

    # setup runs once; its arrays stay pristine, every run gets its own copies of them
    try:
        base = run_setup(setup, None, namespace, [stmt.source])
    except SystemExit as exc:
        raise ExplainError(f"the setup raised SystemExit: {exc}") from exc
    try:
        state = user_state(base[name] for name in stmt.names if name in base)
    except MemoryError as exc:
        raise ExplainError("explain cannot keep a copy of the globals your functions use "
                           "(MemoryError), to put them back after each run") from exc
    try:
        return _explained(stmt, setup, base, state, roof, settings, min_time)
    finally:
        state.restore(everything=True)  # whatever a run, a probe or a rewrite changed


@contextlib.contextmanager
def _later_run(done: int) -> Iterator[None]:
    """What the statement raises after ``done`` runs that worked, as an ExplainError saying on
    which run (``calls`` of :func:`~chokepoint.measure.timer.measure`'s error, else the next
    one): ``L.pop()``, ``input()``, a program deleting its input file."""
    try:
        yield
    except (Exception, SystemExit) as exc:
        run = done + getattr(exc, "calls", 1)
        raise ExplainError(f"the statement {later_run(exc, run)}") from exc


def _explained(stmt: Statement, setup: str, base: dict, state: UserState, roof: Roofline,
               settings: ProbeSettings, min_time: float) -> Explanation:
    """:func:`explain` after the setup: every run of the statement, its probes and report.
    ``state`` is what the user's functions can change; put back before every later run when
    the first changed it."""
    warned: list[str] = []
    pristine = _statement_inputs(stmt, base)

    def fresh() -> dict:
        return {**base, **{k: v.copy() for k, v in pristine.items()}}

    # 1. run it once: does it work, does it mutate its inputs, or globals of the user's
    # functions (said now, before it runs again)?
    ns = fresh()
    try:
        fn = stmt.function(ns)
    except SyntaxError as exc:  # too deeply nested for the compiler, as a function body
        raise ExplainError(f"explain cannot compile the code: {exc}") from exc
    try:
        start = time.perf_counter()
        fn()
        first_s = time.perf_counter() - start
    except (Exception, SystemExit) as exc:  # sys.exit() in the code must not end the caller
        raise ExplainError(f"the statement raised {type(exc).__name__}: {exc}") from exc
    changed = mutated(pristine, ns)
    if changed:
        warned.append(f"the statement mutates its inputs ({', '.join(changed)}): repeated runs "
                      "see changed data")
    moved = state.changed()
    said = f"the statement {changes_globals(moved)}" if moved else None
    if said:
        warned.append(said)
        warnings.warn(said, RuntimeWarning, stacklevel=3)
        state.restore()

    # 2. time it, and its peak memory (on fresh copies only when it mutates its inputs)
    slow = first_s >= max(SLOW_STATEMENT_S, min_time / 2)
    with _later_run(1):
        timing, done = measure_counted(Restored(fn, state.restore) if moved else fn,
                                       min_time=0.0 if slow else min_time,
                                       repeats=3 if slow or min_time * 5 >= 2 else 5,
                                       warmup=False)
    ns = fresh() if changed else ns
    state.restore()
    with _later_run(1 + done):
        peak_extra = _peak_extra(stmt.function(ns))

    # 3. trace it, and model its bytes
    ns = fresh() if changed else ns
    state.restore()
    inputs = _statement_inputs(stmt, ns)
    try:
        tr = trace(stmt, ns, list(inputs))
    except Exception as exc:
        # a library refused the tracer's arrays (numba typing a traced argument): the
        # statement's work is one untraced operation; what the plain run raises is the
        # statement's own failure
        ns = fresh() if changed else ns
        state.restore()
        inputs = _statement_inputs(stmt, ns)
        with _later_run(2 + done):
            tr = untraced(stmt, ns, list(inputs))
        first_line = (str(exc).strip().splitlines() or [""])[0][:120]
        warned.append(f"its operations could not be traced ({type(exc).__name__}: "
                      f"{first_line}): timed as a whole")
    model = build_model(tr, inputs)

    # 4. a rewrite with the same values, measured, while the statement's memory is recent
    # (on a VM, pages freed seconds ago cost much more to touch again); 5. probe each
    # operation. What runs out
    # of memory is skipped and said (ProbeSkipped), the report kept
    result = tr.result if isinstance(tr.result, np.ndarray) else None
    with _skips_said(warned):
        try:
            # the traced arrays stay as traced for the probes: a statement that changes its
            # inputs runs on copies, its inputs read from them
            rns = fresh() if changed else ns
            # a reduction's NumPy scalar too: its fused rewrite is compared with it
            value = np.asarray(tr.result) if isinstance(tr.result, np.generic) else result
            into = slice_assignment(stmt)
            if into is not None:  # v[1:-1, 1:-1] = ...: fused into that slice
                rewrite, suggestion = rewrite_into(stmt, into, fresh(), timing.median, roof,
                                                   min_time)
            else:
                rewrite, suggestion = measured_rewrite(
                    stmt, rns, _statement_inputs(stmt, rns) if changed else inputs, value,
                    timing.median, roof, min_time, tr)
        except MemoryError:
            rewrite, suggestion = None, None
            skipped("measuring a rewrite")
        state.restore()
        rows, elements, evidence = probe_operations(tr, result, timing.median, roof, settings,
                                                      model)
        # an expression's own line is the statement's rewrite's, when it has one (the line
        # patterns would time a part of it again); without one, a count written as a sum
        # or the first k of a sort is still found in it
        captures = [c for c in tr.lines if not (
            stmt.is_expression and c.filename == stmt.filename and rewrite is not None)]
        try:
            in_lines = line_rewrites(captures, min_time=settings.min_time)
        except MemoryError:
            in_lines = []
            skipped("measuring the lines' rewrites")

    roof, stale = _checked_ceilings(evidence, roof, timing.median)
    warned.extend(stale)
    _rewrite_savings(tr, rows, in_lines, timing.median)
    findings, ruled, minor, causes = derive_findings(
        evidence, model, timing.median, roof, rewrite=suggestion, peak_extra=peak_extra,
        line_rewrites=in_lines)
    left = iter(evidence)
    op_unexplained = [next(left).unexplained if row["time_s"] > 0 else 0.0 for row in rows]
    for row, cause in zip((r for r in rows if r["time_s"] > 0), causes, strict=True):
        row["cause"] = cause
    machine = roof.summary()
    runs = 3 + done  # checked, timed, under tracemalloc, traced
    warned.append(f"explain ran the statement at least {runs} times, and each operation again "
                  "under each probe (on copies of the inputs)")
    for w in warned[:-1]:
        if w != said:
            warnings.warn(w, RuntimeWarning, stacklevel=3)
    floor = floor_of(tr, model, roof)
    return Explanation(statement=stmt.source, setup=setup, median_s=timing.median,
                       iqr_s=timing.iqr, floor_s=max(floor["memory_s"], floor["compute_s"]),
                       model=model, ops=rows, findings=findings, ruled_out=ruled,
                       machine=machine, rewrite=rewrite, warnings=warned, runs=runs,
                       op_elements=elements,
                       op_unexplained=op_unexplained,
                       lines=_line_rows(tr, rows, causes, timing.median, roof, in_lines),
                       minor=minor, floor=floor, line_rewrites=in_lines)
