"""The sentences of explain's findings: numbers in (a :class:`~chokepoint.explain.findings.Cause`),
words out. Kept apart from the rules so that each rule is tested on numbers and each sentence
on made-up numbers."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..measure.timer import format_seconds

__all__ = ["Context", "evidence", "ruled_out", "suggestion", "untimed_temporaries"]

#: evidence lists at most this many operations, then says how many more
SHOWN = 4


@dataclass
class Context:
    """What every sentence may need besides its cause."""

    model: object
    roof: object
    rewrite: str | None
    peak_extra: int | None
    total: float
    line_rewrites: list = field(default_factory=list)


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _ms(s: float) -> str:
    return format_seconds(s)


def _joined(parts: list[str]) -> str:
    if len(parts) > SHOWN:
        parts = [*parts[:SHOWN], f"and {len(parts) - SHOWN} more"]
    return "; ".join(parts)


def _compared(f: dict, what: str) -> str:
    return (f"{f['op']}: {_ms(f['base_s'])} on your data, {_ms(f['changed_s'])} with {what}"
            + (" (both into a preallocated out=)" if f.get("into_out") else ""))


_PROBE_WHAT = {"constant": "constant inputs", "subnormal": "subnormals flushed",
               "contiguous": "contiguous inputs", "threads": "the work split across threads"}


def _fact(kind: str, f: dict, c: Context) -> str:
    if kind in ("allocation", "temporaries"):
        if "peak_extra" in f:
            return (f"{_mb(c.model.temporaries)} of intermediates, peak extra memory "
                    f"{_mb(f['peak_extra'])} (tracemalloc)")
        return (f"{f['op']}: {_ms(f['base_s'])} into fresh memory, {_ms(f['changed_s'])} into "
                "a preallocated out=")
    if kind == "compute-bound" and f.get("gemm"):
        return (f"{f['op']}: {f['flops'] / 1e9:.3g} GFLOP in {_ms(f['seconds'])} = "
                f"{f['rate'] / 1e9:.1f} GFLOP/s, {100 * f['rate'] / f['ceiling']:.0f}% of the "
                f"{f['ceiling'] / 1e9:.1f} GFLOP/s {f['dtype']} matmul ceiling (measured)")
    if kind == "compute-bound":
        rate = f["bytes"] / f["seconds"] / 1e9 if f["seconds"] > 0 else 0.0
        return (f"{f['op']}: {_mb(f['bytes'])} in {_ms(f['seconds'])} = {rate:.1f} GB/s, "
                f"{f['speedup']:.1f}x per element on cache-resident data: as slow in cache")
    if kind == "memory-bound":
        text = (f"{f['op']}: {_mb(f['bytes'])} in {_ms(f['seconds'])} = {f['rate'] / 1e9:.1f} "
                f"GB/s ({100 * f['rate'] / f['roof']:.0f}% of the {f['roof'] / 1e9:.1f} GB/s "
                "roof)")
        if f.get("speedup") is not None:
            text += f", {f['speedup']:.1f}x faster per element on cache-resident data"
        return text
    if kind == "dtype-conversion" and f.get("probe") == "astype":
        return f"{f['op']}: a pass of its own, {_mb(f['bytes'])} in {_ms(f['base_s'])}"
    if kind == "dtype-conversion":
        return f"{f['op']}: {_ms(f['base_s'])} with mixed dtypes, {_ms(f['changed_s'])} with " \
               f"{f['detail']}"
    if kind == "data-dependent" and f.get("probe") == "sorted":
        return _compared(f, "sorted inputs" if f["detail"].startswith("float") else f["detail"])
    if kind == "overhead":
        return (f"{f['calls']} call(s) at {_ms(f['per_call_s'])} each on one element: "
                f"{100 * f['seconds'] / f['total_s']:.2g}% of {_ms(f['total_s'])}")
    if kind == "extra-passes":
        return (f"{f['passes']} passes move {_mb(f['moved'])}; one pass over the same inputs and "
                f"result moves {_mb(f['one_pass'])} ({_mb(f['extra'])} more, about "
                f"{_ms(f['extra'] / f['rate'])} at the {f['rate'] / 1e9:.1f} GB/s these "
                "operations reached)" if f.get("rate") else
                f"{f['passes']} operations but no bytes beyond one pass (views and scalars)")
    if kind == "wide-output":
        wasted = f["result"] - f["needed"]
        return (f"the result is {_mb(f['result'])}, but its values fit in {f['dtype']} "
                f"({_mb(f['needed'])}): {_mb(wasted)} written for nothing, about "
                f"{_ms(wasted / f['rate'])} at {f['rate'] / 1e9:.1f} GB/s")
    what = _PROBE_WHAT.get(f.get("probe", ""), f.get("detail", "the change"))
    return _compared(f, what)


def _weight(f: dict) -> float:
    return f.get("seconds", f.get("base_s", 0.0)) or 0.0


def evidence(cause, c: Context) -> str:
    """The numbers behind a finding, as a sentence: the slowest operations first."""
    facts = sorted(cause.facts, key=_weight, reverse=True)
    return _joined([_fact(cause.kind, f, c) for f in facts])


def ruled_out(kind: str, fact: dict, c: Context) -> str:
    """A suspicion the measurement did not confirm, with its numbers."""
    if kind == "overhead":
        return _fact(kind, fact, c)
    if kind == "extra-passes":
        return _fact(kind, {**fact, "rate": 0}, c)
    return _fact(kind, fact, c) + " (no significant difference)"


def untimed_temporaries(model) -> str:
    """Temporaries whose operations take no ``out=``."""
    return (f"{_mb(model.temporaries)} of intermediates, but their operations take no out=; "
            "cost not measured")


def _line_rewrite(cause, c: Context) -> str | None:
    """The measured rewrite of a line this finding is about, as advice."""
    sources = {f.get("source") for f in cause.facts}
    for r in c.line_rewrites:
        if r["source"] in sources:
            where = r["source"].rsplit("/", 1)[-1]
            return (f"{r['statement']} at {where} (measured {r['speedup']:.1f}x faster than "
                    f"{r['replaces']}, same values)")
    return None


def suggestion(cause, c: Context) -> str:
    """What to do about a finding: the measured rewrite of its line when there is one."""
    if cause.kind not in ("compute-bound",) and (found := _line_rewrite(cause, c)):
        return found
    return _advice(cause, c)


def _advice(cause, c: Context) -> str:
    fused = c.rewrite or "fuse the passes into one (chokepoint.fuse, numexpr, or a chokepoint " \
                         "kernel)"
    kind = cause.kind
    if kind == "memory-bound":
        floor = c.roof.floor_seconds(c.model.bytes_min)
        return f"move fewer bytes: the floor for this statement is {_ms(floor)}; {fused}"
    if kind == "compute-bound":
        gemm = [f for f in cause.facts if f.get("gemm")]
        if gemm:
            f64 = [f for f in gemm if f["dtype"] == "float64"]
            if f64:
                f32 = c.roof.gemm_ceiling("float32")
                return (f"fewer flops (smaller or fewer matrix products), or float32: its "
                        f"matmul ceiling here is {f32 / 1e9:.0f} GFLOP/s against "
                        f"{f64[0]['ceiling'] / 1e9:.0f} for float64")
            return ("fewer flops: smaller or fewer matrix products (the matmul already runs "
                    "near this machine's ceiling)" if all(f["rate"] >= 0.5 * f["ceiling"]
                                                          for f in gemm)
                    else "a better-shaped product (larger, contiguous operands) or batching: "
                         "it runs well below the matmul ceiling")
        return "a cheaper formulation of the slow operation (it is as slow in cache)"
    if kind == "extra-passes":
        return fused
    if kind == "temporaries":
        return c.rewrite or "write the intermediates into one reused buffer (out=)"
    if kind == "allocation":
        return c.rewrite or "preallocate once and pass out="
    if kind == "wide-output":
        return c.rewrite or f"produce {cause.extra.get('dtype')} directly"
    if kind == "data-dependent":
        if any(f.get("probe") == "subnormal" for f in cause.facts):
            return "flush subnormals (or avoid producing them)"
        return ("a branch-free formulation, or a kernel whose speed does not depend on the "
                "values")
    if kind == "strided-access":
        return ("make the input contiguous once (np.ascontiguousarray) when it is used more "
                "than once, or reorder the loop")
    if kind == "dtype-conversion":
        return ("keep the data in the dtype it is used in (cast once, outside the hot loop)")
    if kind == "overhead":
        return "batch the work into fewer calls on larger arrays"
    if kind == "single-threaded":
        return (f"a multi-threaded kernel: {c.rewrite}" if c.rewrite else
                "a multi-threaded engine (chokepoint.fuse, numexpr, numba prange, chokepoint's "
                "kernels)")
    return fused
