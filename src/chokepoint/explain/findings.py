"""Evidence -> findings: each kind with the share of time it explains, or ruled out.

The vocabulary is fixed (docs/interfaces.md). A kind becomes a finding only when a probe
measured its effect on this machine, beyond the run-to-run spread of the probe's own base
measurement; a suspicion the measurement does not confirm goes to ``ruled_out`` with its
numbers, and a confirmed effect under :data:`MINOR` of the time goes to ``minor``.

Shares are additive. Each operation's measured seconds are handed out once, rule by rule, in
the order of :data:`RULES`: first what a probe measured it would save (page faults, the values,
the layout, a conversion, one thread, per-call overhead), then the rest to what bounds it
(memory or compute); the statement-level byte counts (extra passes, a wide output) are carved
out of the memory-bound time. Shares are fractions of the larger of the statement's time and the
sum of its operations' times, so they sum to at most 1.

Each rule is a small function of the evidence (numbers in, :class:`Cause` out); the sentences
are in :mod:`chokepoint.report.words`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..measure.roofline import Roofline
from ..report import words
from .model import Model
from .probes import Probe

__all__ = ["KINDS", "MINOR", "Cause", "Finding", "OpEvidence", "RuledOut", "derive_findings"]

KINDS = ("memory-bound", "compute-bound", "extra-passes", "temporaries", "wide-output",
         "allocation", "data-dependent", "strided-access", "dtype-conversion", "overhead",
         "single-threaded")

#: an operation is memory-bound when it runs this much faster per element in cache
MEMORY_BOUND_SPEEDUP = 1.6
#: findings explaining less than this share of the time are minor
MINOR = 0.01
#: an operation without a cache probe counts as memory-bound at this fraction of the roof
NEAR_ROOF = 0.5
#: shares below this are the rounding of the carving, not time
ROUNDING = 1e-9


@dataclass
class Finding:
    """A measured cause."""

    kind: str
    share: float
    evidence: str
    suggestion: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RuledOut:
    """A suspected cause that the measurement did not confirm."""

    kind: str
    evidence: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class OpEvidence:
    """What was measured for one operation."""

    label: str
    seconds: float
    in_bytes: int
    out_bytes: int
    allocates: bool
    produces_result: bool
    probes: dict[str, Probe]
    flops: int = 0
    gemm: bool = False
    dtype: str = "float64"
    source: str = ""
    conversion: bool = False  # an explicit astype: a pass whose whole point is converting
    creation: bool = False  # makes an array from no array (np.ones(n), np.arange(n))
    unexplained: float = 0.0  # seconds no rule was handed (set by derive_findings)
    needed: int | None = None  # its bytes one pass per step needs (None: not counted)

    @property
    def nbytes(self) -> int:
        return self.in_bytes + self.out_bytes


@dataclass
class Cause:
    """What one rule found: seconds per operation (indexes into the evidence list) with the
    numbers behind them, or the reason it was not confirmed."""

    kind: str
    seconds: dict[int, float] = field(default_factory=dict)
    facts: list[dict] = field(default_factory=list)  # one per operation, for the wording
    ruled: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # statement-level numbers


class Ledger:
    """Each operation's seconds, handed out once."""

    def __init__(self, ops: list[OpEvidence]):
        self.left = [max(op.seconds, 0.0) for op in ops]

    def take(self, i: int, seconds: float) -> float:
        taken = min(max(seconds, 0.0), self.left[i])
        self.left[i] -= taken
        return taken


def _confirmed(p: Probe, fraction: float = 0.1) -> bool:
    return p.saved > 0 and p.significant(fraction)


def _saved(op: OpEvidence, p: Probe) -> float:
    """What the probe saved, as seconds of the operation's measured time: the fraction of its
    own base that the change saved, times that time. The probe's base is another measurement
    of the same call (slower when it ran into a busy moment): its seconds taken as they are
    could claim more of the operation than the operation took. A probe whose two sides wrote
    into one preallocated ``out=`` saved a fraction of the operation without its fresh memory
    (as the ``out`` probe measured it): of the whole time, the threads probe claimed more
    than its threads saved, the page faults being most of the call."""
    if p.base.median <= 0:
        return 0.0
    seconds = op.seconds
    out = op.probes.get("out")
    if p.into_out and out is not None and out.base.median > 0:
        seconds *= min(1.0, out.changed.median / out.base.median)
    return seconds * p.saved / p.base.median


def _probe_rule(kind: str, names: tuple[str, ...], fraction: float = 0.1):
    """A rule: what the named probes saved, where they were significant. Several probes of one
    kind on one operation (constant and sorted values) measure the same cause twice: the
    operation gives the largest of their savings, not their sum."""
    def rule(ops: list[OpEvidence], ledger: Ledger, model: Model, roof: Roofline) -> Cause:
        cause = Cause(kind)
        for i, op in enumerate(ops):
            saved = 0.0
            for name in names:
                p = op.probes.get(name)
                if p is None:
                    continue
                fact = {"op": op.label, "source": op.source, "probe": name,
                        "base_s": p.base.median,
                        "changed_s": p.changed.median, "detail": p.detail,
                        "into_out": p.into_out}
                if p.load is not None and p.load.busy:
                    fact["busy"] = {"others": p.load.others + p.load.steal,
                                    "cpus": p.load.cpus}
                if _confirmed(p, fraction):
                    saved = max(saved, _saved(op, p))
                    cause.facts.append(fact)
                else:
                    cause.ruled.append(fact)
            if saved > 0:
                cause.seconds[i] = ledger.take(i, saved)
        return cause
    return rule


def allocation_rule(ops, ledger, model, roof) -> Cause:
    """Page faults on a fresh result: the ``out`` probe on the operation producing it."""
    return _split_out_rule("allocation", ops, ledger, lambda op: op.produces_result)


def temporaries_rule(ops, ledger, model, roof) -> Cause:
    """Page faults on fresh intermediates: the ``out`` probe on the other operations."""
    cause = _split_out_rule("temporaries", ops, ledger, lambda op: not op.produces_result)
    cause.extra["temporaries_bytes"] = model.temporaries
    return cause


def _split_out_rule(kind, ops, ledger, chosen) -> Cause:
    cause = Cause(kind)
    for i, op in enumerate(ops):
        p = op.probes.get("out")
        if p is None or not chosen(op):
            continue
        fact = {"op": op.label, "source": op.source, "base_s": p.base.median,
                "changed_s": p.changed.median}
        if _confirmed(p):
            cause.seconds[i] = ledger.take(i, _saved(op, p))
            cause.facts.append(fact)
        else:
            cause.ruled.append(fact)
    return cause


data_dependent_rule = _probe_rule("data-dependent", ("constant", "sorted", "subnormal"), 0.15)
#: strided operands, and a reduction along a short axis (its elements far apart in memory
#: from the next row's: the ``short-axis`` probe moves that axis first)
strided_rule = _probe_rule("strided-access", ("contiguous", "short-axis"))
single_threaded_rule = _probe_rule("single-threaded", ("threads",))


def conversion_rule(ops, ledger, model, roof) -> Cause:
    """Mixed dtypes converted inside a ufunc (the ``cast`` probe), and explicit ``astype``
    passes (their whole time)."""
    cause = _probe_rule("dtype-conversion", ("cast",))(ops, ledger, model, roof)
    for i, op in enumerate(ops):
        if op.conversion:
            cause.seconds[i] = cause.seconds.get(i, 0.0) + ledger.take(i, op.seconds)
            cause.facts.append({"op": op.label, "probe": "astype", "base_s": op.seconds,
                                "bytes": op.nbytes})
    return cause


def overhead_rule(ops, ledger, model, roof) -> Cause:
    """Per-call overhead: the ``tiny`` probe (the operation on one element), counted when the
    statement's calls spend more than a tenth of its time there."""
    cause = Cause("overhead")
    tiny = [(i, op, op.probes["tiny"]) for i, op in enumerate(ops) if "tiny" in op.probes]
    if not tiny:
        return cause
    overhead = sum(p.changed.median for _, _, p in tiny)
    total = sum(op.seconds for op in ops)
    cause.extra = {"calls": len(tiny), "per_call_s": overhead / len(tiny), "seconds": overhead,
                   "total_s": total}
    if total > 0 and overhead / total > 0.1:
        for i, _, p in tiny:
            cause.seconds[i] = ledger.take(i, p.changed.median)
        cause.facts.append(cause.extra)
    else:
        cause.ruled.append(cause.extra)
    return cause


def cache_speedup(p: Probe) -> float:
    """How much faster per element the ``cache`` probe ran an operation on a cache-sized part:
    best time over best time. Another process only ever adds time, and a few repeats of the
    part in a busy moment moved the medians' ratio of ``X + 1.0`` under 1.6 (compute-bound)."""
    return p.base.min / max(p.changed.min, 1e-12)


def compute_rule(ops, ledger, model, roof) -> Cause:
    """Compute-bound: a matrix product above the machine balance (its flops per byte beyond
    what the bandwidth feeds the GEMM ceiling with), judged against the GEMM ceiling; an
    elementwise operation as slow per element in cache as out of it (the ``cache`` probe)."""
    cause = Cause("compute-bound")
    for i, op in enumerate(ops):
        if op.gemm and op.flops:
            ceiling = roof.gemm_ceiling(op.dtype)
            if op.flops / ceiling >= op.nbytes / roof.bandwidth:
                cause.seconds[i] = ledger.take(i, ledger.left[i])
                cause.facts.append({"op": op.label, "source": op.source, "flops": op.flops,
                                    "seconds": op.seconds,
                                    "rate": op.flops / op.seconds, "ceiling": ceiling,
                                    "dtype": op.dtype, "gemm": True,
                                    "one_thread": roof.gemm_ceiling(op.dtype, one_thread=True)})
            continue
        p = op.probes.get("cache")
        if p is not None and cache_speedup(p) < MEMORY_BOUND_SPEEDUP:
            cause.seconds[i] = ledger.take(i, ledger.left[i])
            cause.facts.append({"op": op.label, "source": op.source, "bytes": op.nbytes,
                                "seconds": op.seconds, "speedup": cache_speedup(p),
                                "gemm": False})
    return cause


def memory_rule(ops, ledger, model, roof) -> Cause:
    """Memory-bound: faster per element in cache (the ``cache`` probe), or an operation
    without that probe already moving bytes at more than half the roof. A matrix product below
    the machine balance has no such probe either: the roofline predicts it memory-bound, but
    one far below the roof (a thin product waiting on its threads, its calls' overhead) is
    bound by neither ceiling, and its time stays unexplained."""
    cause = Cause("memory-bound")
    for i, op in enumerate(ops):
        p = op.probes.get("cache")
        rate = op.nbytes / op.seconds if op.seconds > 0 else 0.0
        if p is not None:
            speedup = cache_speedup(p)
            bound = speedup >= MEMORY_BOUND_SPEEDUP
        else:
            speedup = None
            bound = rate >= NEAR_ROOF * roof.bandwidth
        if bound and ledger.left[i] > 0:
            cause.seconds[i] = ledger.take(i, ledger.left[i])
            cause.facts.append({"op": op.label, "source": op.source, "bytes": op.nbytes,
                                "seconds": op.seconds, "rate": rate, "roof": roof.bandwidth,
                                "speedup": speedup})
    return cause


#: the rules in the order they are handed each operation's time
RULES: tuple[Callable, ...] = (allocation_rule, temporaries_rule, data_dependent_rule,
                               strided_rule, conversion_rule, single_threaded_rule,
                               overhead_rule, compute_rule, memory_rule)


def _pooled(i: int, pools: list[Cause]) -> float:
    return sum(pool.seconds.get(i, 0.0) for pool in pools)


def _take(i: int, pools: list[Cause], seconds: float) -> float:
    """Take ``seconds`` out of operation ``i``'s time in the pools (in order)."""
    taken = 0.0
    for pool in pools:
        step = min(pool.seconds.get(i, 0.0), seconds - taken)
        if step > 0:
            pool.seconds[i] -= step
            taken += step
    return taken


def byte_causes(ops: list[OpEvidence], model: Model, memory: Cause,
                compute: Cause, bandwidth: float = math.inf) -> list[Cause]:
    """Extra passes and a wide output, from the byte model, carved out of the time of the
    operations that move those bytes: the memory-bound time first, then the compute-bound time
    of operations that are not matrix products.

    Each operation gives the fraction of its pooled time that its extra bytes are of its bytes
    (:attr:`OpEvidence.needed`: the bytes one pass per step needs of it, see
    :func:`chokepoint.explain.model.one_pass_bytes`); for a compute-bound operation, at most
    what moving those bytes at ``bandwidth`` (the measured roof) takes: a chain of ``sin`` and
    ``cos`` is as slow fused into one pass as written, its time is arithmetic, not bytes. So
    an estimate never exceeds the measured time of the operations it is drawn from, and the
    seconds the sentence gives are the seconds the share is."""
    elementwise = Cause("compute-bound",
                        seconds={i: t for i, t in compute.seconds.items() if not ops[i].gemm})
    pools = [memory, elementwise]
    one_pass = model.bytes_one_pass or (model.bytes_inputs + model.result_bytes)
    extra = max(0, model.bytes_moved - one_pass)
    # without per-operation counts, each operation has the statement's fraction of extra bytes
    fraction = extra / model.bytes_moved if model.bytes_moved > 0 else 0.0
    wide = (1 - model.result_bytes_min / model.result_bytes
            if model.narrow_dtype is not None and model.result_bytes > model.result_bytes_min
            else 0.0)
    chosen = sorted({i for pool in pools for i in pool.seconds})
    pooled = {i: _pooled(i, pools) for i in chosen}
    need_passes, need_wide, priced, wasted_priced, writers_s = {}, {}, 0.0, 0.0, 0.0
    for i in chosen:
        op = ops[i]
        if op.nbytes <= 0 or pooled[i] <= 0:
            continue
        wasted = op.out_bytes * wide if op.produces_result else 0.0
        surplus = (op.nbytes - op.needed if op.needed is not None
                   else op.nbytes * fraction) if model.passes > 1 else 0.0
        surplus = min(max(surplus, 0.0), op.nbytes - wasted)
        # a compute-bound operation's bytes cost at most their time at the roof
        roof_s = (lambda b: math.inf) if memory.seconds.get(i) else (lambda b: b / bandwidth)
        need_passes[i] = min(pooled[i] * surplus / op.nbytes, roof_s(surplus))
        need_wide[i] = min(pooled[i] * wasted / op.nbytes, roof_s(wasted))
        priced += surplus
        wasted_priced += wasted
        writers_s += pooled[i] if wasted > 0 else 0.0
    pool_s = sum(pooled.values())
    causes = []
    passes = Cause("extra-passes", extra={"passes": model.passes, "moved": model.bytes_moved,
                                          "one_pass": one_pass, "extra": extra,
                                          "priced": priced, "pool_s": pool_s,
                                          "steps": one_pass > model.bytes_inputs
                                          + model.result_bytes})
    seconds = sum(_take(i, pools, t) for i, t in need_passes.items() if t > 0)
    if seconds > 0:
        passes.extra["seconds"] = seconds
        passes.seconds = {i: t for i, t in need_passes.items() if t > 0}
        passes.facts.append(passes.extra)
    elif model.passes > 1:
        passes.ruled.append(passes.extra)
    causes.append(passes)
    seconds = sum(_take(i, pools, t) for i, t in need_wide.items() if t > 0)
    if seconds > 0:
        cause = Cause("wide-output", extra={"result": model.result_bytes,
                                            "needed": model.result_bytes_min,
                                            "dtype": str(model.narrow_dtype),
                                            "priced": wasted_priced, "seconds": seconds,
                                            "pool_s": writers_s})
        cause.seconds = {i: t for i, t in need_wide.items() if t > 0}
        cause.facts.append(cause.extra)
        causes.append(cause)
    for i, t in elementwise.seconds.items():  # hand the carved time back
        compute.seconds[i] = t
    return causes


def derive_findings(
    ops: list[OpEvidence], model: Model, total: float, roof: Roofline, *,
    rewrite: str | None, peak_extra: int | None, line_rewrites: list[dict] | None = None,
) -> tuple[list[Finding], list[RuledOut], list[Finding], list[str | None]]:
    """Findings ordered by share, the ruled-out suspicions, the minor findings, and each
    operation's main cause."""
    ledger = Ledger(ops)
    causes = {rule: rule(ops, ledger, model, roof) for rule in RULES}
    memory = causes[memory_rule]
    main = _main_causes(len(ops), [*causes.values()])  # before the byte counts take theirs
    for op, left in zip(ops, ledger.left, strict=True):
        op.unexplained = left
    extra = byte_causes(ops, model, memory, causes[compute_rule], roof.bandwidth)
    scale = max(total, sum(op.seconds for op in ops))

    def share(seconds: float) -> float:
        fraction = seconds / scale if scale > 0 else 0.0
        # what the carving of the byte counts leaves of a pool it emptied is rounding
        # (4e-17 of the time), not a measured effect to list as minor
        return 0.0 if fraction < ROUNDING else min(1.0, fraction)

    found, ruled, minor = [], [], []
    context = words.Context(model=model, roof=roof, rewrite=rewrite, peak_extra=peak_extra,
                            total=total, line_rewrites=line_rewrites or [])
    temporaries = causes[temporaries_rule]
    if model.temporaries and peak_extra and not temporaries.facts:
        # the memory itself was measured (tracemalloc), whatever its time
        temporaries.facts.append({"peak_extra": peak_extra})
        temporaries.ruled.clear()
    for cause in [*causes.values(), *extra]:
        seconds = cause.extra.get("seconds") if cause.kind in ("extra-passes", "wide-output") \
            else sum(cause.seconds.values())
        if cause.facts:
            finding = Finding(cause.kind, share(seconds or 0.0),
                              words.evidence(cause, context), words.suggestion(cause, context))
            if finding.share >= MINOR:
                found.append(finding)
            elif finding.share > 0 or cause.kind == "temporaries":  # time, or memory, measured
                minor.append(finding)
        for fact in cause.ruled:
            ruled.append(RuledOut(cause.kind, words.ruled_out(cause.kind, fact, context)))
    if model.temporaries and not any(f.kind == "temporaries" for f in found + minor) \
            and not causes[temporaries_rule].ruled:
        ruled.append(RuledOut("temporaries", words.untimed_temporaries(model)))
    found.sort(key=lambda f: f.share, reverse=True)
    minor.sort(key=lambda f: f.share, reverse=True)
    return found, ruled, minor, main


def _main_causes(n: int, causes: list[Cause]) -> list[str | None]:
    """Per operation, the kind that was handed most of its time (None when none was)."""
    best: list[tuple[float, str | None]] = [(0.0, None)] * n
    for cause in causes:
        for i, seconds in cause.seconds.items():
            if seconds > best[i][0]:
                best[i] = (seconds, cause.kind)
    return [kind for _, kind in best]

