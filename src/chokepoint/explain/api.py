"""``explain``: where an array expression's time goes, measured on this machine.

It runs the statement several times: once to check it (and whether it mutates its inputs),
repeatedly to time it, once traced, once under tracemalloc, and each operation again under each
probe — always on fresh copies of the setup's arrays, never on the user's.
"""

from __future__ import annotations

import tracemalloc
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..measure.roofline import Roofline, roofline
from ..measure.statements import arrays_in, compile_statement, mutated, names_used, run_setup
from ..measure.timer import measure
from .findings import Finding, OpEvidence, RuledOut, derive_findings
from .model import Model, build_model
from .probes import ProbeSettings, probe_op
from .rewrite import find_rewrite
from .trace import trace

__all__ = ["ExplainError", "Explanation", "explain"]


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

    @property
    def bytes_moved(self) -> int:
        return self.model.bytes_moved

    @property
    def bytes_min(self) -> int:
        return self.model.bytes_min

    def to_dict(self) -> dict:
        """JSON-ready: the DESIGN.md schema, plus ``rewrite`` and ``warnings``."""
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


def _statement_inputs(statement: str, namespace: dict) -> dict[str, np.ndarray]:
    return {k: v for k, v in arrays_in(namespace, names_used(statement)).items() if v.size > 0}


def _peak_extra(fn) -> int | None:
    """Peak memory a call allocates beyond its result, from tracemalloc (NumPy reports its
    array buffers there)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        value = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        if not was_tracing:
            tracemalloc.stop()
    result = int(np.asarray(value).nbytes) if isinstance(value, np.ndarray) else 0
    return max(0, peak - before - result)


def _probe_operations(tr, result, total: float, roof: Roofline, settings: ProbeSettings):
    """Time every traced operation under its probes: the JSON rows, each row's element count
    (for the roofline chart) and the evidence for the findings."""
    measured: dict[int, tuple[float, dict]] = {}
    scratch: dict = {}  # arrays the operations' probes share, dropped on return
    for op in tr.ops:
        if op.func is not None and not op.is_view:
            timed, probes = probe_op(op, settings, scratch)
            measured[id(op)] = (timed.median, {p.name: p for p in probes})
    known = sum(seconds for seconds, _ in measured.values())
    rows, elements, evidence = [], [], []
    for op in tr.ops:
        if op.is_view:
            seconds, probes = 0.0, {}
        elif op.func is None:  # opaque: what the traced operations do not account for
            seconds, probes = max(0.0, total - known), {}
        else:
            seconds, probes = measured[id(op)]
        gbps = (op.in_bytes + op.out_bytes) / seconds / 1e9 if seconds > 0 else 0.0
        rows.append({"name": op.text, "in_bytes": op.in_bytes, "out_bytes": op.out_bytes,
                     "allocates": op.allocates, "time_s": seconds, "gbps": gbps,
                     "roof_fraction": gbps * 1e9 / roof.bandwidth})
        r = op.result_array
        elements.append(0 if r is None else r.size)
        if seconds > 0:
            produces = result is not None and r is not None and np.may_share_memory(r, result)
            evidence.append(OpEvidence(label=op.label, seconds=seconds, in_bytes=op.in_bytes,
                                       out_bytes=op.out_bytes, allocates=op.allocates,
                                       produces_result=produces, probes=probes))
    return rows, elements, evidence


def _measured_rewrite(statement, namespace, inputs, result, total: float, roof: Roofline,
                      min_time: float) -> tuple[dict | None, str | None]:
    """The rewrite (and its narrow variant) timed, and the suggestion text for findings."""
    found = find_rewrite(statement, namespace, inputs, result)
    if found is None:
        return None, None

    def timed(candidate) -> dict:
        seconds = measure(candidate.call, min_time=min(min_time, 0.05), repeats=5).median
        return {"statement": candidate.statement,
                "predicted_s": roof.floor_seconds(candidate.bytes), "measured_s": seconds,
                "speedup": total / seconds, "note": candidate.note}

    rewrite = timed(found)
    suggestion = f"{found.statement}, one pass with the same values"
    if found.narrow is not None:
        rewrite["narrow"] = timed(found.narrow)
        suggestion = (f"{found.narrow.statement} (same values as uint8) or {found.statement}: "
                      "one pass")
    return rewrite, suggestion


def explain(statement: str, setup: str = "", *, namespace: dict | None = None,
            roof: Roofline | None = None, min_time: float = 0.1,
            probe_settings: ProbeSettings | None = None) -> Explanation:
    """Say where the time of ``statement`` goes.

    Parameters
    ----------
    statement : str
        An expression, e.g. ``"np.ceil(np.clip(X, 0, 1))"``.
    setup : str
        Code that makes its inputs (NumPy's global RNG is seeded first; ``np`` is there).
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
        When the statement is not an expression, or raises.
    """
    statement = statement.strip()
    try:
        compile(statement, "<explain>", "eval")
    except SyntaxError as exc:
        raise ExplainError(f"explain needs an expression (something with a value): {exc}") \
            from exc
    roof = roofline() if roof is None else roof
    settings = probe_settings or ProbeSettings()
    warned: list[str] = []

    # setup runs once; its arrays stay pristine, every run gets its own copies of them
    base = run_setup(setup, None, namespace, [statement])
    pristine = _statement_inputs(statement, base)

    def fresh() -> dict:
        return {**base, **{k: v.copy() for k, v in pristine.items()}}

    # 1. run it once: does it work, does it mutate its inputs?
    ns = fresh()
    inputs = _statement_inputs(statement, ns)
    fn = compile_statement(statement, ns)
    try:
        fn()
    except Exception as exc:
        raise ExplainError(f"the statement raised {type(exc).__name__}: {exc}") from exc
    changed = mutated(pristine, ns)
    if changed:
        warned.append(f"the statement mutates its inputs ({', '.join(changed)}): repeated runs "
                      "see changed data")

    # 2. time it, and its peak memory (on fresh copies only when it mutates its inputs)
    timing = measure(fn, min_time=min_time, repeats=5, warmup=False)
    ns = fresh() if changed else ns
    peak_extra = _peak_extra(compile_statement(statement, ns))

    # 3. trace it, and model its bytes
    ns = fresh() if changed else ns
    inputs = _statement_inputs(statement, ns)
    tr = trace(statement, ns, list(inputs))
    model = build_model(tr, inputs)

    # 4. probe each operation; 5. a rewrite with the same values, measured
    result = tr.result if isinstance(tr.result, np.ndarray) else None
    rows, elements, evidence = _probe_operations(tr, result, timing.median, roof, settings)
    rewrite, suggestion = _measured_rewrite(statement, ns, inputs, result, timing.median, roof,
                                            min_time)

    findings, ruled = derive_findings(evidence, model, timing.median, roof,
                                      rewrite=suggestion, peak_extra=peak_extra)
    machine = roof.summary()
    runs = 3 + timing.runs * timing.loops  # checked, timed, under tracemalloc, traced
    warned.append(f"explain ran the statement at least {runs} times, and each operation again "
                  "under each probe (on copies of the inputs)")
    for w in warned[:-1]:
        warnings.warn(w, RuntimeWarning, stacklevel=2)
    return Explanation(statement=statement, setup=setup, median_s=timing.median,
                       iqr_s=timing.iqr, floor_s=roof.floor_seconds(model.bytes_min),
                       model=model, ops=rows, findings=findings, ruled_out=ruled,
                       machine=machine, rewrite=rewrite, warnings=warned, runs=runs,
                       op_elements=elements)
