"""The sentences of explain's findings and of a race's notes: numbers in (a
:class:`~chokepoint.explain.findings.Cause`, a :class:`~chokepoint.measure.race.CandidateResult`),
words out. Kept apart from the measurements so that each rule is tested on numbers and each
sentence on made-up numbers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..measure.stats import TARGET_PRECISION
from ..measure.timer import format_seconds

__all__ = ["Context", "busy_machine", "changes_globals", "evidence", "later_run", "line_rewrite",
           "race_note", "rewrite_values", "ruled_out", "suggestion", "sweep_failures",
           "untimed_temporaries", "visible"]

#: what "one pass per step" means, where a program reads an array again after changing it
STEPS = ("the same steps fused: each array read once each time it changes, written once when "
         "its value is needed")
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


def visible(text: object) -> str:
    """``text`` (the user's code, labels, errors) with every character that a terminal or a
    browser acts on instead of showing written as its escape: control characters (ESC
    ``\\x1b`` starts a terminal command), bidi controls (U+202E ``\\u202e`` reverses the
    report's own sentences that follow it), other invisible ones. Line breaks and tabs are
    kept."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in "\n\t" else
                   ch.encode("unicode_escape").decode("ascii") for ch in text)


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


def _integer(dtype: str) -> bool:
    """An integer or boolean dtype's name: NumPy's matrix products of these skip BLAS."""
    try:
        return np.dtype(dtype).kind in "iub"
    except TypeError:
        return False


def _fact(kind: str, f: dict, c: Context) -> str:
    if kind in ("allocation", "temporaries"):
        if "peak_extra" in f:
            return (f"{_mb(c.model.temporaries)} of intermediates, peak extra memory "
                    f"{_mb(f['peak_extra'])} (tracemalloc)")
        return (f"{f['op']}: {_ms(f['base_s'])} into fresh memory, {_ms(f['changed_s'])} into "
                "a preallocated out=")
    if kind == "compute-bound" and f.get("gemm"):
        ceiling = (f"{f['dtype']} matmul ceiling (measured)" if not _integer(f["dtype"]) else
                   f"floating-point matmul ceiling (measured; NumPy multiplies {f['dtype']} "
                   "matrices without BLAS)")
        return (f"{f['op']}: {f['flops'] / 1e9:.3g} GFLOP in {_ms(f['seconds'])} = "
                f"{f['rate'] / 1e9:.1f} GFLOP/s, {100 * f['rate'] / f['ceiling']:.0f}% of the "
                f"{f['ceiling'] / 1e9:.1f} GFLOP/s {ceiling}")
    if kind == "compute-bound":
        rate = f["bytes"] / f["seconds"] / 1e9 if f["seconds"] > 0 else 0.0
        return (f"{f['op']}: {_mb(f['bytes'])} in {_ms(f['seconds'])} = {rate:.1f} GB/s, "
                f"{f['speedup']:.1f}x per element on cache-resident data: as slow in cache")
    if kind == "memory-bound":
        # above the roof (measured from memory), the data came from a cache: a percentage
        # over 100 of the memory's roof says nothing
        where = (f"{100 * f['rate'] / f['roof']:.0f}% of the {f['roof'] / 1e9:.1f} GB/s roof"
                 if f["rate"] <= f["roof"] else
                 f"above the {f['roof'] / 1e9:.1f} GB/s memory roof: its data was in a cache")
        text = (f"{f['op']}: {_mb(f['bytes'])} in {_ms(f['seconds'])} = {f['rate'] / 1e9:.1f} "
                f"GB/s ({where})")
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
        return _passes(f)
    if kind == "wide-output":
        wasted = f["result"] - f["needed"]
        return (f"the result is {_mb(f['result'])}, but its values fit in {f['dtype']} "
                f"({_mb(f['needed'])}): {_mb(wasted)} written for nothing, "
                f"{_ms(f.get('seconds', 0.0))} of the {_ms(f.get('pool_s', 0.0))} the "
                "operations writing it took (their bytes' part of it)")
    what = _PROBE_WHAT.get(f.get("probe", ""), f.get("detail", "the change"))
    return _compared(f, what)


def _passes(f: dict) -> str:
    """Extra passes: the bytes beyond one pass (per step, for a loop), and the seconds they
    are of the time of the operations that move them, never more than that time."""
    one = (f"one pass per step ({STEPS})" if f.get("steps") else
           "one pass over the same inputs and result")
    head = f"{f['passes']} passes move {_mb(f['moved'])}; {one} moves {_mb(f['one_pass'])}"
    if f["extra"] <= 0:
        return f"{f['passes']} operations but no bytes beyond one pass (views and scalars)"
    if not f.get("seconds"):
        return (f"{head} ({_mb(f['extra'])} more), but no memory- or compute-bound elementwise "
                "operation moves them: not priced")
    return (f"{head} ({_mb(f['extra'])} more); the memory- and compute-bound elementwise "
            f"operations took {_ms(f['pool_s'])}, of which {_ms(f['seconds'])} is their "
            f"{_mb(f['priced'])} beyond one pass")


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
        return _passes({**fact, "seconds": 0.0})
    busy = fact.get("busy")
    if busy:
        return (_fact(kind, fact, c) + " (no significant difference; other processes used "
                f"{busy['others']:.2f} of the {busy['cpus']} cores meanwhile, so the probe "
                "could not show it: explain again on a quiet machine)")
    return _fact(kind, fact, c) + " (no significant difference)"


def untimed_temporaries(model) -> str:
    """Temporaries whose operations take no ``out=``."""
    return (f"{_mb(model.temporaries)} of intermediates, but their operations take no out=; "
            "cost not measured")


def rewrite_values(r: dict) -> str:
    """How a measured rewrite of a line compares: its values, and the time it saves in this
    program when that was measured."""
    saves = (f", saves about {_ms(r['saved_s'])} here ({100 * r['share']:.0f}% of the time)"
             if r.get("saved_s") else "")
    return f"{r.get('values', 'same values')}{saves}"


def line_rewrite(r: dict) -> str:
    """A measured rewrite of a line: the kernel call, where, how much faster than the code it
    replaces, its values and the time it saves (:func:`rewrite_values`)."""
    where = r["source"].rsplit("/", 1)[-1]
    return (f"{r['statement']} at {where} (measured {r['speedup']:.1f}x faster than "
            f"{r['replaces']}, {rewrite_values(r)})")


def _line_rewrites(cause, c: Context) -> list[str]:
    """The measured rewrites of the lines this finding is about, the largest saving first."""
    sources = {f.get("source") for f in cause.facts}
    found = [r for r in c.line_rewrites if r["source"] in sources]
    found.sort(key=lambda r: r.get("saved_s", 0.0), reverse=True)
    return [line_rewrite(r) for r in found]


def suggestion(cause, c: Context) -> str:
    """What to do about a finding: the measured rewrites of its lines when there are some.
    A matrix product's advice stays first when the finding holds one: a rewrite of a line the
    finding also holds comes after it, never left out (the finding lumps that line in with the
    products, and the rewrite is the one change measured to save time)."""
    found = _line_rewrites(cause, c)
    if not found:
        return _advice(cause, c)
    if cause.kind == "compute-bound" and any(f.get("gemm") for f in cause.facts):
        return f"{_advice(cause, c)}; measured: " + "; ".join(found)
    return "; ".join(found)


def _advice(cause, c: Context) -> str:
    fused = c.rewrite or "fuse the passes into one (chokepoint.fuse, numexpr, or a chokepoint " \
                         "kernel)"
    kind = cause.kind
    if kind == "memory-bound":
        floor = c.roof.floor_seconds(c.model.bytes_min)
        return f"move fewer bytes: the floor for this statement is {_ms(floor)}; {fused}"
    if kind == "compute-bound":
        gemm = [f for f in cause.facts if f.get("gemm")]
        if any(_integer(f["dtype"]) for f in gemm):
            return (c.rewrite or "the product in float64, cast back: NumPy multiplies integer "
                    "matrices without BLAS (exact while every sum stays below 2**53)")
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
        values = ("a branch-free formulation, or a kernel whose speed does not depend on the "
                  "values")
        # a gather through an index array in random order waits on memory, not on branches:
        # the probe sorted the indices, so the advice is the order of the reads
        order = ("read in order: sort the index array (or keep the data in the order it is "
                 "read), or gather fewer bytes (only the columns used)")
        gathers = [f for f in cause.facts if str(f.get("detail", "")).startswith(
            "the index array")]
        if not gathers:
            return values
        if len(gathers) == len(cause.facts):
            return order
        others = sum(_weight(f) for f in cause.facts if f not in gathers)
        return f"{order}; {values}" if sum(map(_weight, gathers)) >= others \
            else f"{values}; {order}"
    if kind == "strided-access":
        layout = ("make the input contiguous once (np.ascontiguousarray) when it is used more "
                  "than once, or reorder the loop")
        short = ("keep the short axis first (shape (d, n) instead of (n, d)), so NumPy reduces "
                 "it over whole rows; or a matrix product (x @ np.ones(d) for a sum)")
        probes = {f.get("probe") for f in cause.facts}
        if probes == {"short-axis"}:
            return short
        return f"{layout}; {short}" if "short-axis" in probes else layout
    if kind == "dtype-conversion":
        return ("keep the data in the dtype it is used in (cast once, outside the hot loop)")
    if kind == "overhead":
        return "batch the work into fewer calls on larger arrays"
    if kind == "single-threaded":
        return (f"a multi-threaded kernel: {c.rewrite}" if c.rewrite else
                "a multi-threaded engine (chokepoint.fuse, numexpr, numba prange, chokepoint's "
                "kernels)")
    return fused


# ----------------------------------------------------------------------------- race notes

def _shown(value: object) -> str:
    """An element of a mismatch: a number as Python writes it, text as it is."""
    return value if isinstance(value, str) else repr(value)


def _mismatch(m: dict) -> str:
    kind = m.get("kind")
    path = m.get("path") or ""
    at = f" at {path}" if path else ""
    if kind == "structure":
        return (f"returns {m['structure']}{at} where the reference has "
                f"{m['expected_structure']}")
    if kind == "shape":
        return (f"shape {tuple(m['shape'])}{at} differs from the reference's "
                f"{tuple(m['expected_shape'])}")
    if kind == "incomparable":
        return f"cannot compare with the reference{at}: {m['error']}"
    if kind == "no-value":
        return "returns no value"
    return (f"differs at {m['count']} of {m['total']} elements, {_first(m['first_index'], path)} "
            f"({_shown(m['value'])} vs {_shown(m['expected'])})")


def _first(index: list, path: str) -> str:
    """Where a disagreement of values starts: the item of a tuple, list or dict (``path``)
    and the index in it."""
    if index and path:
        return f"first at {path}, index {tuple(index)}"
    if index:
        return f"first at index {tuple(index)}"
    return f"first at {path}" if path else "the scalar differs"


def _tolerance(t: dict, *, agrees: bool) -> str:
    """The tolerance floats were compared with, and the largest difference found."""
    if t.get("ulps") is not None:
        within = (f"{t['ulps']:.3g} ulp of the reference's largest magnitude "
                  f"{t['scale']:.3g} (atol {t['atol']:.2g})")
    else:
        within = f"rtol {t['rtol']:.2g}, atol {t['atol']:.2g}"
    largest = f"largest difference {t['max_difference']:.2g}"
    if agrees:
        return f"agrees within {within}, not bit for bit: {largest}"
    return f"beyond {within}: {largest}"


def _not_compared(c) -> str:
    if c.not_compared == "reference-failed":
        return "reference failed: not compared"
    if c.not_compared == "reference-no-value":
        return "not compared: the reference returns no value and changes none of its inputs"
    if c.not_compared == "other-inputs":
        return (f"not compared: setup gave it other inputs ({', '.join(c.differing_inputs)}) "
                "than the reference; make the setup deterministic (seed its generator)")
    return f"not compared: {c.not_compared}"


def _interrupted(c) -> str:
    if c.workers is not None and c.workers_planned and c.workers < c.workers_planned:
        return f"interrupted after {c.workers} of {c.workers_planned} processes"
    if not c.runs:
        return "not timed: interrupted"
    return f"interrupted after {c.runs} of {c.runs_planned} repeats"


def _stale_roof(c) -> list[str]:
    s = c.stale_roof
    said = []
    if s.get("fraction") is not None:
        when = f"measured {s['measured_at']}" if s.get("measured_at") else "cached"
        text = (f"ran at {100 * s['fraction']:.0f}% of the roofline's read bandwidth "
                f"({s['bandwidth'] / 1e9:.1f} GB/s, {when}) streaming from memory, so the "
                "roofline no longer holds")
        fresh = s.get("rechecked")
        if fresh is None:
            text += (f"; re-measuring it failed ({s.get('error')}): the roofline is stale, "
                     "run chokepoint roofline --refresh")
        elif fresh > s["bandwidth"]:
            text += (f"; re-measured now: {fresh / 1e9:.1f} GB/s, which the % roof uses "
                     "(chokepoint roofline --refresh updates the cache)")
        else:
            text += (f"; re-measured now: {fresh / 1e9:.1f} GB/s, no higher: the roofline is "
                     "not what is wrong")
        said.append(text)
    rechecked = s.get("rechecked")
    if (rechecked is not None and rechecked > s["bandwidth"] and c.roof_fraction is not None
            and c.roof_fraction > 1.0):
        said.append(f"at {100 * c.roof_fraction:.0f}% of the re-measured roof: part of its "
                    "data comes from a cache, or it moves fewer bytes than counted")
    return said


def _noisy(c) -> str:
    spread = f"noisy: IQR is {100 * c.iqr_s / c.median_s:.0f}% of the median"
    within = f"within ±{100 * TARGET_PRECISION:.0f}%"
    needed = c.repeats_needed
    if needed > c.runs:
        return f"{spread}; about {needed} repeats would pin the median {within} " \
               f"(--repeats {needed})"
    return f"{spread}, though its {c.runs} repeats pin the median {within}"


def busy_machine(load, what: str = "race") -> str:
    """What a :class:`~chokepoint.measure.load.Load` says of a measurement: empty when the
    machine was quiet (or the load unknown), else who was busy and what that means."""
    if load is None or not load.busy:
        return ""
    steal = f", the hypervisor {load.steal:.2f} (steal time)" if load.steal >= 0.05 else ""
    return (f"the machine was busy during the {what}: other processes used {load.others:.2f} of "
            f"its {load.cpus} cores on average{steal}. A neighbour sharing memory bandwidth and "
            "caches moves timings by tens of percent, not alike for every candidate: close "
            "rankings may not hold; rerun on a quiet machine to trust them")


def sweep_failures(sizes: list[int], sweep_errors: dict[str, list[str | None]]) -> list[str]:
    """One sentence per candidate and error of a size sweep: at which sizes the candidate
    failed, and what it raised (the table shows only the last size)."""
    said = []
    for label, errors in sweep_errors.items():
        at: dict[str, list[str]] = {}
        for n, error in zip(sizes, errors, strict=False):
            if error is not None:
                at.setdefault(error, []).append(str(n))
        said.extend(f"{label} failed at n={', '.join(ns)}: {error}" for error, ns in at.items())
    return said


def _ordinal(n: int) -> str:
    """``1`` -> ``"1st"``, ``2`` -> ``"2nd"``, ``11`` -> ``"11th"``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def later_run(exc: BaseException, run: int) -> str:
    """Code that worked on its first run and raised on run ``run`` (``L.pop()``, ``input()``):
    ``"raised IndexError on its 2nd run: pop from empty list"``."""
    return f"raised {type(exc).__name__} on its {_ordinal(run)} run: {exc}"


def changes_globals(names: list[str]) -> str:
    """Code whose first run changed globals of the user's functions, which explain and race
    put back: names as :meth:`~chokepoint.measure.userstate.UserState.changed` gives them."""
    return (f"changes global state outside its inputs ({', '.join(names)}): put back before "
            "every later run (untimed) and when done")


def race_note(c) -> str:
    """A race candidate's note: the structured fields of a
    :class:`~chokepoint.measure.race.CandidateResult` (how it disagrees, what it writes or
    mutates, its copies or its cache, its processes, why it was not compared, a stale roof,
    its noise) as clauses joined by ``"; "``; empty when there is nothing to say."""
    said = []
    if c.mismatch:
        said.append(_mismatch(c.mismatch))
    if c.tolerance:
        said.append(_tolerance(c.tolerance, agrees=not c.mismatch))
    if c.dtype_differs:
        at = f" at {c.dtype_differs['path']}" if c.dtype_differs.get("path") else ""
        said.append(f"dtype {c.dtype_differs['dtype']}{at} vs reference "
                    f"{c.dtype_differs['expected']}")
    if c.writes:
        said.append(f"writes its result into {', '.join(c.writes)}")
    if c.mutates:
        said.append(f"mutates its inputs ({', '.join(c.mutates)}): timed on them as set up, "
                    "put back before every call (untimed)")
    if c.changes_globals:
        said.append(changes_globals(c.changes_globals))
    if c.copies:
        said.append(f"rotated among {c.copies} copies of the inputs")
    if c.cache_hot:
        said.append(f"cache-hot: working set {(c.bytes or 0) / 2**20:.2f} MiB fits in the "
                    f"{(c.cache_bytes or 0) / 2**20:.0f} MiB cache")
    if c.workers:
        said.append(f"timed in {c.workers} worker process{'es' if c.workers > 1 else ''}")
    if c.interrupted:
        said.append(_interrupted(c))
    if c.not_compared:
        said.append(_not_compared(c))
    if c.stale_roof:
        said.extend(_stale_roof(c))
    if c.repeats_needed is not None and c.median_s and c.iqr_s is not None:
        said.append(_noisy(c))
    return "; ".join(said)
