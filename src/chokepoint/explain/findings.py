"""Evidence -> findings: each kind with the share of time it explains, or ruled out.

The vocabulary is fixed (DESIGN.md). A kind becomes a finding only when a probe measured its
effect on this machine; a suspicion the measurement does not confirm goes to ``ruled_out`` with
its numbers. Shares are fractions of the statement's measured time; they are estimates from
separately timed operations and may overlap (the bytes of a temporary are also an extra pass).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..measure.roofline import Roofline
from ..measure.timer import format_seconds
from .model import Model
from .probes import Probe

__all__ = ["KINDS", "Finding", "OpEvidence", "RuledOut", "derive_findings"]

KINDS = ("memory-bound", "compute-bound", "extra-passes", "temporaries", "wide-output",
         "allocation", "data-dependent", "strided-access", "dtype-conversion", "overhead",
         "single-threaded")

#: an operation is memory-bound when it runs this much faster per element in cache
MEMORY_BOUND_SPEEDUP = 1.6


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


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _ms(s: float) -> str:
    return format_seconds(s)


def _gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds > 0 else float("nan")


def derive_findings(
    ops: list[OpEvidence], model: Model, total: float, roof: Roofline, *,
    rewrite: str | None, peak_extra: int | None,
) -> tuple[list[Finding], list[RuledOut]]:
    """Findings ordered by share, and the ruled-out suspicions."""
    findings: list[Finding] = []
    ruled: list[RuledOut] = []
    fused = rewrite or "fuse the passes into one (numexpr, numba, or a chokepoint kernel)"

    def share(seconds: float) -> float:
        return max(0.0, min(1.0, seconds / total)) if total > 0 else 0.0

    # memory- or compute-bound, per operation, from the cache probe
    bound = {"memory-bound": [], "compute-bound": []}
    for op in ops:
        probe = op.probes.get("cache")
        if probe is None:
            continue
        speedup = probe.base.median / max(probe.changed.median, 1e-12)
        rate = _gbps(op.in_bytes + op.out_bytes, op.seconds)
        kind = "memory-bound" if speedup >= MEMORY_BOUND_SPEEDUP else "compute-bound"
        bound[kind].append((op, speedup, rate))
    for kind, entries in bound.items():
        if not entries:
            continue
        seconds = sum(op.seconds for op, _, _ in entries)
        evidence = "; ".join(
            f"{op.label}: {_mb(op.in_bytes + op.out_bytes)} in {_ms(op.seconds)} = {rate:.1f} "
            f"GB/s ({100 * rate * 1e9 / roof.bandwidth:.0f}% of the {roof.bandwidth / 1e9:.1f} "
            f"GB/s roof), {speedup:.1f}x {'faster' if speedup >= 1 else 'slower'} per element "
            "on cache-resident data" for op, speedup, rate in entries)
        suggestion = (f"move fewer bytes: the floor for this statement is "
                      f"{_ms(roof.floor_seconds(model.bytes_min))}; {fused}"
                      if kind == "memory-bound" else
                      "a cheaper formulation of the slow operation (it is as slow in cache)")
        findings.append(Finding(kind, share(seconds), evidence, suggestion))

    ops_seconds = sum(op.seconds for op in ops)
    rate = model.bytes_moved / ops_seconds if ops_seconds > 0 else roof.bandwidth

    # extra passes: bytes beyond one pass over the inputs and the result as written
    one_pass = model.bytes_inputs + model.result_bytes
    extra = model.bytes_moved - one_pass
    if model.passes > 1 and extra > 0:
        findings.append(Finding(
            "extra-passes", share(extra / rate),
            f"{model.passes} passes move {_mb(model.bytes_moved)}; one pass over the same inputs "
            f"and result moves {_mb(one_pass)} ({_mb(extra)} more, about "
            f"{_ms(extra / rate)} at the {rate / 1e9:.1f} GB/s these operations reached)",
            fused))
    elif model.passes > 1:
        ruled.append(RuledOut("extra-passes", f"{model.passes} operations but no bytes beyond one "
                                              "pass (views and scalars)"))

    # allocation (the result) and temporaries (intermediates): page faults on fresh memory
    for kind, chosen in (("allocation", [o for o in ops if o.produces_result]),
                         ("temporaries", [o for o in ops if not o.produces_result])):
        probes = [(o, o.probes["out"]) for o in chosen if "out" in o.probes]
        if not probes:
            if kind == "temporaries" and model.temporaries:
                ruled.append(RuledOut(kind, f"{_mb(model.temporaries)} of intermediates, but "
                                            "their operations take no out=; cost not measured"))
            continue
        saved = sum(p.saved for _, p in probes)
        evidence = "; ".join(f"{o.label}: {_ms(p.base.median)} into fresh memory, "
                             f"{_ms(p.changed.median)} into a preallocated out="
                             for o, p in probes)
        if kind == "temporaries":
            evidence += (f"; {_mb(model.temporaries)} of intermediates"
                         + (f", peak extra memory {_mb(peak_extra)} (tracemalloc)"
                            if peak_extra is not None else ""))
        confirmed = any(p.significant() for _, p in probes) and saved > 0
        if kind == "temporaries" and model.temporaries and peak_extra:
            confirmed = True  # the memory itself was measured, whatever its time
        if confirmed:
            suggestion = (rewrite or "preallocate once and pass out=") if kind == "allocation" \
                else (rewrite or "write the intermediates into one reused buffer (out=)")
            findings.append(Finding(kind, share(max(saved, 0.0)), evidence, suggestion))
        else:
            ruled.append(RuledOut(kind, evidence + " (no significant difference)"))

    # wide output: the result written wider than its values need
    if model.narrow_dtype is not None and model.result_bytes > model.result_bytes_min:
        wasted = model.result_bytes - model.result_bytes_min
        findings.append(Finding(
            "wide-output", share(wasted / rate),
            f"the result is {_mb(model.result_bytes)}, but its values fit in "
            f"{model.narrow_dtype} ({_mb(model.result_bytes_min)}): {_mb(wasted)} written "
            f"for nothing, about {_ms(wasted / rate)} at {rate / 1e9:.1f} GB/s",
            rewrite or f"produce {model.narrow_dtype} directly"))

    # data-dependent speed: constant, sorted, subnormal-free inputs
    for name, what in (("constant", "constant inputs"), ("sorted", "sorted inputs"),
                       ("subnormal", "subnormals flushed")):
        probes = [(o, o.probes[name]) for o in ops if name in o.probes]
        for o, p in probes:
            text = (f"{o.label}: {_ms(p.base.median)} on your data, {_ms(p.changed.median)} "
                    f"with {what}" + (" (both into a preallocated out=)" if p.into_out else ""))
            if p.significant(0.15) and p.saved > 0:
                hint = ("flush subnormals (or avoid producing them)" if name == "subnormal"
                        else "a branch-free formulation, or a kernel whose speed does not "
                             "depend on the values")
                findings.append(Finding("data-dependent", share(p.saved), text, hint))
            else:
                ruled.append(RuledOut("data-dependent", text))

    # strided access
    for o in ops:
        p = o.probes.get("contiguous")
        if p is None:
            continue
        text = (f"{o.label}: {_ms(p.base.median)} strided, {_ms(p.changed.median)} contiguous"
                + (" (both into a preallocated out=)" if p.into_out else ""))
        if p.significant() and p.saved > 0:
            findings.append(Finding("strided-access", share(p.saved), text,
                                    "make the input contiguous once (np.ascontiguousarray) "
                                    "when it is used more than once, or reorder the loop"))
        else:
            ruled.append(RuledOut("strided-access", text))

    # dtype conversions
    for o in ops:
        p = o.probes.get("cast")
        if p is None:
            continue
        text = (f"{o.label}: {_ms(p.base.median)} with mixed dtypes, {_ms(p.changed.median)} "
                f"with {p.detail}")
        if p.significant() and p.saved > 0:
            findings.append(Finding("dtype-conversion", share(p.saved), text,
                                    "keep the operands in one dtype (cast once, outside the "
                                    "hot loop)"))
        else:
            ruled.append(RuledOut("dtype-conversion", text))

    # explicit conversion passes (astype): their whole time is conversion
    conversions = [o for o in ops if o.label.endswith(")") and ".astype(" in o.label]
    if conversions:
        seconds = sum(o.seconds for o in conversions)
        findings.append(Finding(
            "dtype-conversion", share(seconds),
            "; ".join(f"{o.label}: a pass of its own, {_mb(o.in_bytes + o.out_bytes)} in "
                      f"{_ms(o.seconds)}" for o in conversions),
            "keep the data in the dtype it is used in, or convert once outside the hot path"))

    # per-call overhead
    tiny = [(o, o.probes["tiny"]) for o in ops if "tiny" in o.probes]
    if tiny:
        overhead = sum(p.changed.median for _, p in tiny)
        text = (f"{len(tiny)} call(s) at {_ms(overhead / len(tiny))} each on one element: "
                f"{100 * overhead / total:.2g}% of {_ms(total)}")
        if overhead / total > 0.1:
            findings.append(Finding("overhead", share(overhead), text,
                                    "batch the work into fewer calls on larger arrays"))
        else:
            ruled.append(RuledOut("overhead", text))

    # single-threaded: a memory-bound operation held to what one thread can move, where more
    # threads move more. The ceilings are those of the operation's traffic: the read bandwidth
    # when it mostly reads, the copy bandwidth when it writes about as much as it reads.
    threads = roof.machine.get("threads") or 1
    slow, fast = [], []
    for op, _, rate in bound["memory-bound"]:
        writes = op.out_bytes > 0.25 * op.in_bytes
        one, every = ((roof.copy_bw_1t, roof.copy_bw) if writes
                      else (roof.read_bw_1t, roof.read_bw))
        verb = "copies" if writes else "reads"
        ceilings = (f"one thread {verb} at most {one / 1e9:.1f} GB/s, {threads} threads "
                    f"{every / 1e9:.1f} GB/s (measured roofline)")
        if threads < 2 or every < 1.3 * one:
            ruled.append(RuledOut("single-threaded", f"{op.label}: {rate:.1f} GB/s; {ceilings}: "
                                                     "more threads would not move more"))
        elif rate * 1e9 <= 1.2 * one:
            slow.append((op, rate, every, ceilings))
        else:
            fast.append((op, rate, ceilings))
    if slow:
        lost = sum(op.seconds * (1 - rate * 1e9 / every) for op, rate, every, _ in slow)
        text = "; ".join(f"{op.label}: {rate:.1f} GB/s, {ceilings}"
                         for op, rate, _, ceilings in slow)
        findings.append(Finding("single-threaded", share(lost), text,
                                f"a multi-threaded kernel: {rewrite}" if rewrite else
                                "a multi-threaded engine (numexpr, numba prange, "
                                "chokepoint's kernels)"))
    for op, rate, ceilings in fast:
        ruled.append(RuledOut("single-threaded", f"{op.label}: {rate:.1f} GB/s; {ceilings}"))
    findings.sort(key=lambda f: f.share, reverse=True)
    return findings, ruled
