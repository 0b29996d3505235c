"""The reports of ``chokepoint run``: the words for each measured cause (numbers in, sentences
out), the text report and the HTML page."""

from __future__ import annotations

import html
import linecache
import math
import textwrap

from ..measure.timer import format_seconds
from .html import figure_html, page
from .text import terminal_width
from .words import visible

__all__ = ["cause_evidence", "cause_suggestion", "fresh_memory_text", "grows_advice",
           "joins_text", "json_ready", "program_html", "program_text"]

#: lines shown in the text report's table (the rest collapsed into one row)
SHOWN_LINES = 12
#: the indent of a rewrite's code lines in the headline (kept as written, never folded)
CODE_INDENT = "      "


def _ms(s: float | None) -> str:
    return "-" if s is None else format_seconds(s)


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if x >= 0.01 or x == 0 else f"{100 * x:.1g}%"


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _listed(codes: list[str], shown: int = 3) -> str:
    """``a[:, k]``, ``b[:, k]`` and 2 more."""
    more = f" and {len(codes) - shown} more" if len(codes) > shown else ""
    return ", ".join(codes[:shown]) + more


#: a cause besides the largest has its advice said where it holds this share of the line
SECOND_ADVICE = 0.25


def cause_evidence(cause: dict) -> str:
    """What was measured, in one sentence."""
    kind = cause["kind"]
    hits = cause.get("hits", 1)
    per = f" ({_runs(hits)})" if hits > 1 else ""
    if cause.get("first_use") and "captured_hit" in cause:
        return (f"its run {cause['captured_hit']} (whose values were replayed) took "
                f"{_ms(cause['captured_run_s'])} in the program and made "
                f"{_mb(cause['new_bytes'])} of new memory; replayed"
                + (", with the page faults of fresh memory measured above"
                   if cause["compared_s"] > cause["replay_s"] else "")
                + f", {_ms(cause['compared_s'])}: "
                f"{_ms(cause['seconds'])} of its {_runs(hits)} went to pages used for the "
                "first time (or taken back by the OS since)")
    if cause.get("first_use"):
        grew = (f"grew the process by {_mb(cause['peak_growth'])}"
                if cause["peak_growth"] >= cause.get("new_bytes", 0) else
                f"made {_mb(cause['new_bytes'])} of new memory")
        runs = (f" (its {hits} runs {_ms(cause['run_s'])} in all)"
                if hits > 1 and "run_s" in cause else "")
        kept = cause.get("kept_bytes", 0)
        return (f"its first run took {_ms(cause['first_run_s'])}{runs} and {grew}; replayed "
                f"on memory already used, {_ms(cause['replay_s'])} a run: "
                + (f"{_ms(cause['seconds'])} of the {_ms(cause['first_touch_s'])} that went to "
                   f"pages used for the first time fell on memory it does not keep (it left "
                   f"{_mb(kept)} resident, touched once whatever the code)"
                   if kept and cause.get("first_touch_s", 0) > cause["seconds"] else
                   f"{_ms(cause['seconds'])} went to pages used for the first time (or taken "
                   "back by the OS since)"))
    if kind in ("allocation", "temporaries"):
        said = []
        if "program_faults" in cause:  # the recording counted the line's page faults
            said.append(
                f"in the program it faulted in {cause['program_faults']:.0f} pages a run "
                + (f"beyond the {cause['kept_faults']:.0f} of the memory it keeps "
                   if cause.get("kept_faults", 0) >= 1 else "")
                + f"({_mb(cause['new_bytes'])} of new arrays a run); replayed with each new "
                f"array on fresh pages ({cause['fresh_faults']:.0f} faults) it took "
                f"{_ms(cause['fresh_s'])}, with freed memory reused "
                f"({cause['reused_faults']:.0f}) {_ms(cause['reused_s'])}: "
                f"{_ms(cause['fault_s'])} a fault, "
                f"{_ms(cause.get('faults_s', cause['seconds']))} in all{per}")
        elif "reused_s" in cause:
            what = ("its temporaries and result" if kind == "temporaries" and
                    cause.get("temporaries_bytes") else "its new arrays")
            said.append(f"{_mb(cause['new_bytes'])} of new arrays per run: "
                        f"{_ms(cause['as_written_s'])} as written, {_ms(cause['reused_s'])} with "
                        f"freed memory reused{per}; the page faults of {what} cost "
                        f"{_ms(cause['seconds'])}" if "blocked_s" not in cause else
                        f"{_mb(cause['new_bytes'])} of new arrays per run: "
                        f"{_ms(cause['as_written_s'])} as written, {_ms(cause['reused_s'])} "
                        f"with freed memory reused{per}")
        if "blocked_s" in cause:  # a large intermediate, measured on blocks of rows
            ratio = cause["largest_bytes"] / max(cause["own_bytes"], 1)
            said.append(f"its largest intermediate is {_mb(cause['largest_bytes'])}, "
                        f"{ratio:.0f}x what it reads and writes ({_mb(cause['own_bytes'])}): "
                        f"on blocks of {cause['rows']} rows it took "
                        f"{_ms(cause['blocked_s'])} against {_ms(cause['unblocked_s'])} as "
                        f"written{per}, with the same values")
        return "; ".join(said)
    if kind == "strided-access" and cause.get("line"):
        where = (f"in the program it took {_ms(cause['run_per_hit_s'])} a run "
                 f"({_ms(cause['replay_s'])} replayed, its data left in the cache); with the "
                 "caches emptied before each run, " if cause.get("cold") else "")
        return (f"{where}{_ms(cause['written_s'])} as written and "
                f"{_ms(cause['contiguous_s'])} with {_listed(cause['operands'])} contiguous"
                f"{per}: {_ms(cause['seconds'])} went to reading and writing one element per "
                "cache line" + (" from memory" if cause.get("cold") else ""))
    if kind == "extra-passes" and "fused_s" in cause:
        return (f"one fused pass ({cause['fused']}) measured {_ms(cause['fused_s'])} a run "
                f"against {_ms(cause['as_written_s'])} as written: not faster, whatever the "
                "bytes the passes move")
    if kind == "loop-invariant":
        where = (f"each call of `{cause['function_name']}` ({cause['loop']})"
                 if cause.get("function") else f"each run of the loop at {cause['loop']}")
        once = ("once would do" if cause.get("function")
                else f"{cause['entries']} time(s) would do")
        if cause.get("update"):
            return (f"it only updates `{cause['name']}`, which {_listed(cause['with'])} "
                    f"computes the same on {where}: with it, {once}")
        what = (f"what `{cause['name']}` reads was the same" if cause.get("part")
                else "it read the same values")
        also = (f" (with {_listed(cause['with'])}, which only "
                f"{'update' if len(cause['with']) > 1 else 'updates'} it)"
                if cause.get("with") else "")
        return (f"{what} on the {cause['compared']} of its {cause['hits']} runs "
                "compared (its first, 2nd, 4th, 8th...): it computes the same "
                f"`{cause['name']}`{also} on {where}, {once}")
    if kind == "group-by-masks":
        mask = f"`{cause['mask']}`" if cause["mask"] else "the comparison"
        lines = cause["lines"]
        loops = cause.get("loops", 1)
        return (f"a group-by as a loop of masks: each of its {cause['groups']} runs"
                + (f" (in {loops} runs of the loop)" if loops > 1 else "")
                + f" compares all {cause['rows']:,} rows of `{cause['key']}` with "
                f"`{cause['group']}`"
                + (f", and {lines - 1} more line(s) of the loop gather or count with {mask}"
                   if lines > 1 else "")
                + f" ({_ms(cause['scanned_s'])} in all); sorting `{cause['key']}` once "
                + ("(as 16-bit keys, which NumPy sorts by radix) " if cause.get("narrow") else "")
                + ("a loop " if loops > 1 else "")
                + f"took {_ms(cause['sort_s'] / loops)} here"
                + (f" and gathering what they index {_ms(cause['gather_s'] / loops)}"
                   if cause["gather_s"] else "")
                + ", after which each group's rows are a slice")
    if kind == "blas-threads":
        load = cause.get("load")
        busy = (f"; the machine was busy (load {load:.1f} per core)"
                if load is not None and load > 0.5 else "")
        return (f"the matrix product took {_ms(cause['all_threads_s'])} with "
                f"{cause['threads']} BLAS threads and {_ms(cause['one_thread_s'])} with one"
                f"{per}{busy}")
    if kind == "numpy-scalars":
        said, made = [], []
        if cause["names"]:
            are = "is a NumPy scalar" if len(cause["names"]) == 1 else "are NumPy scalars"
            said.append(f"{', '.join(cause['names'])} {are} ({', '.join(cause['types'])})")
            made.append("Python numbers")
        if cause.get("lists"):
            said.append(f"{', '.join(cause['lists'])} "
                        f"{'is' if len(cause['lists']) == 1 else 'are'} read one element at a "
                        "time")
            made.append(f"lists (made once in {_ms(cause['lists_s'])})")
        return (f"{'; '.join(said)}: the line took {_ms(cause['as_written_s'])} a run, "
                f"{_ms(cause['python_s'])} with them as {' and '.join(made)} (same value)")
    if kind == "overhead":
        if cause.get("header"):
            return (f"the interpreter's work of looping: {hits} iterations, "
                    f"{_ms(cause['seconds'] / max(hits, 1))} each")
        parts = ([f"{cause['calls']} NumPy call(s) at about {_ms(cause['call_s'])} each, "
                  "their fixed cost or their whole time on small data"] if cause["calls"] else [])
        if cause.get("opaque_s"):
            parts.append(f"{_ms(cause['opaque_s'])} in calls chokepoint does not trace, whose "
                         "arguments and value are small")
        return (f"{_runs(hits)} at {_ms(cause.get('run_per_hit_s', cause['per_hit_s']))} each "
                f"({_ms(cause['per_hit_s'])} replayed), of which "
                f"{_ms(cause['overhead_s'])} is interpreter and per-call overhead"
                + (f" ({', and '.join(parts)})" if parts else "")
                + f" and {_ms(cause['work_s'])} the arrays' own work")
    return cause.get("evidence", "")


def cause_suggestion(cause: dict, line: dict) -> str:
    """What to do about it (a measured rewrite, when there is one, is said instead)."""
    kind = cause["kind"]
    if cause.get("first_use"):
        return ("reuse arrays the program already has (out=, in-place operators) instead of "
                "new ones, so that the process does not grow")
    if kind == "temporaries" and "blocked_s" in cause:
        return ("make no intermediate larger than the result: reformulate it (a matrix "
                "product, np.einsum) or evaluate it on blocks of rows that fit in the cache")
    if kind in ("allocation", "temporaries"):
        return ("allocate the result once outside the loop and write into it (out=), or fuse "
                "the expression (chokepoint.fuse) so that no temporary is made")
    if kind == "strided-access" and cause.get("line"):
        return ("lay the arrays out with the axis these slices run along last (one "
                "np.ascontiguousarray(a.transpose(...)) before the loop, the indices reordered), "
                "so that each slice is contiguous")
    if kind == "loop-invariant":
        if cause.get("function"):
            return (f"compute `{cause['name']}` once, outside the function at "
                    f"{cause['loop']} (pass it in, or keep it between calls): nothing it "
                    "reads changed from call to call")
        return (f"compute `{cause['name']}` once, before the loop at {cause['loop']} (nothing "
                "it reads changes inside it)")
    if kind == "group-by-masks":
        key = cause["key"]
        sortable = f"{key}.astype(np.uint16)" if cause.get("narrow") else key
        return (f"sort the rows by {key} once, before the loop (order = np.argsort({sortable}, "
                f"kind='stable'); k = {key}[order]; each array x it indexes as x[order], "
                "once); then group g is rows lo:hi, lo = np.searchsorted(k, g) and hi = "
                "np.searchsorted(k, g, side='right'): its rows a slice, its count hi - lo"
                + (f" (all groups' sums at once: np.bincount({key}, weights=x))"
                   if cause.get("integers") else ""))
    if kind == "numpy-scalars":
        advice = []
        if cause["names"]:
            advice.append("make them Python numbers where they are made (a, b = arr.tolist() "
                          "instead of a, b = arr; float(x), x.item()): each NumPy scalar "
                          "operation dispatches like a ufunc")
        if cause.get("lists"):
            a = cause["lists"][0]
            axes = cause.get("list_axes", {}).get(a, 1)
            index = "".join(f"[{k}]" for k in "ijklmn"[:axes])
            said = (f"read {', '.join(cause['lists'])} from lists ({a}_list = {a}.tolist() "
                    f"before the loop, then {a}_list{index}): each element read from an array "
                    "is made a NumPy scalar")
            kept = cause.get("written") or []
            if kept:
                said += (f"; {', '.join(kept)} {'is' if len(kept) == 1 else 'are'} written "
                         "in the loop too: write the list there as well, or it goes stale")
            advice.append(said)
        return "; ".join(advice)
    if kind == "blas-threads":
        return ("limit BLAS to one thread around this product (threadpoolctl."
                "threadpool_limits(1)), or leave the other cores free")
    if kind == "overhead":
        if cause.get("header") or line.get("loop"):
            return ("vectorise the loop: one NumPy call over all iterations instead of one "
                    "per iteration")
        return "batch the calls"
    return ""


def grows_advice(line: dict) -> str:
    """What to do about an array grown by concatenation (``x = np.hstack([x, y])``)."""
    name = line["grows"]
    return (f"{name} is copied whole into a new array on each of its {_runs(line['hits'])}, "
            f"to add a part: allocate {name} once at its final size (np.empty) and write "
            "each part into its slice")


def joins_text(joins: dict) -> str:
    """What a rewrite of two lines replaces (:mod:`chokepoint.program.joined`)."""
    first, second = joins["lines"]
    if joins.get("loop"):
        return (f"in place of the loop at lines {first}-{second}: it took "
                f"{_ms(joins['lines_s'])} a run over its {joins['rows']:,} rows, timed side "
                "by side with it")
    return (f"in place of lines {first} and {second}, where {joins['name']} is not used "
            f"otherwise: the two lines took {_ms(joins['lines_s'])} a run, timed side by "
            "side with it")


def _floor(line: dict) -> str:
    if not line.get("analysed"):
        return "-"
    return _ms(line["floor_s"]) if line.get("modelled", True) else "unknown"


def _rate(line: dict) -> str:
    t = line["time_s"]
    if not line.get("analysed") or t <= 0 or line.get("python_s") == t:
        return ""
    if line["flops"] and line["flops"] >= line["bytes"]:  # arithmetic intensity of 1 and up
        return f"{line['flops'] / t / 1e9:.1f} GFLOP/s"
    rate = line["bytes"] / t / 1e9
    return f"{rate:.1f} GB/s" if rate >= 0.05 else ""


def _cell(text: str, width: int) -> str:
    text = visible(text).replace("\n", " ").replace("\t", " ")
    return text if len(text) <= width else text[:max(0, width - 3)] + "..."


def _headline_lines(r) -> list[str]:
    h = r.headline
    if h["source"] is None:
        return ["no line of your code ran under the recording (nothing to rank)"]
    top = r.lines[0]
    out = []
    recoverable = sum(line["recoverable_s"] for line in r.lines)
    if r.wall_s > 0 and r.little_to_recover:
        slowest = max(r.lines, key=lambda line: line["time_s"])
        out.append(f"little to recover: the lines' recoverable time adds up to "
                   f"{_ms(recoverable)} ({_pct(recoverable / r.wall_s)} of the run); the "
                   f"slowest line, {slowest['source']}, took {_ms(slowest['time_s'])}"
                   + (f" against a floor of {_ms(slowest['floor_s'])}"
                      if slowest.get("analysed") and slowest.get("modelled", True) else ""))
    out += [f"headline: {h['source']}  {_cell(top['code'], 90)}",
           f"  {_ms(top['time_s'])} ({_pct(top['share'])} of the run) in {_runs(top['hits'])}; "
           f"floor {_floor(top)}; recoverable "
           f"{_ms(top['recoverable_s'])}"]
    if h.get("close"):
        recoverable_of = {line["source"]: line["recoverable_s"] for line in r.lines}
        out.append("  close behind (which comes first may change from run to run): "
                   + ", ".join(f"{source} ({_ms(recoverable_of[source])})"
                               for source in h["close"]))
    if h.get("unknown"):
        other = next(line for line in r.lines if line["source"] == h["unknown"])
        out.append(f"  more time, of no known floor, at {other['source']}: {_ms(other['time_s'])} "
                   f"({_pct(other['share'])} of the run), {_ms(other['unseen_s'])} of it in "
                   "work chokepoint has no model of (a sort, an FFT, another library's call): "
                   "not counted as recoverable, but all of it may be (a whole sort for one "
                   "element)")
    for cause in top["causes"][:3]:
        out.append(f"  {cause['kind']} ({_ms(cause['seconds'])}): {cause_evidence(cause)}")
    if top["analysed"]:
        once = top.get("once_s", 0.0)
        left = top["time_s"] - sum(c["seconds"] for c in top["causes"]) - once
        if once > 0.25 * top["time_s"]:
            out.append(f"  {_ms(once)} of it was its first run's alone ({_ms(top['replay_s'])} "
                       "a run replayed): paid once whatever the code (a module loaded, a "
                       "library set up on its first use), not counted as recoverable")
        if left > 0.25 * top["time_s"]:
            rewritten = (": the rewrite below measured what another formulation saves"
                         if top["rewrite"] else "")
            out.append(f"  not explained: {_ms(left)} of its {_ms(top['time_s'])} (no probe "
                       f"measured a cause for it{rewritten})")
        # a cause with the first claim on the line's time (a loop-invariant line, a group-by)
        # holds what it holds whatever the work's floor
        claimed = any(c.get("first") for c in top["causes"])
        if top.get("unseen_s", 0.0) > 0.25 * top["time_s"] and not claimed:
            counted = ("only what the rewrite below saves is counted as recoverable"
                       if top["rewrite"] else "that time is not counted as recoverable")
            out.append(f"  {_ms(top['unseen_s'])} of it ran in work whose floor chokepoint "
                       "does not know (a random generator's method, a sort, an FFT, a compiled "
                       f"library's function): {counted}")
    loop = next((lp for lp in r.loops if top["loop"] == lp["source"]
                 or top["source"] == lp["source"]), None)
    if loop and top["cause"] == "overhead":
        out.append(f"  the loop at {loop['source']} ran {loop['iterations']} times: "
                   f"{_ms(loop['time_s'])}, of which {_ms(loop['overhead_s'])} measured as "
                   "interpreter and per-call overhead")
    if top["rewrite"]:
        rw = top["rewrite"]
        said = (f"{rw['speedup']:.1f}x faster on your values "
                f"({rw.get('values') or 'checked'}), saves {_ms(rw['saved_s'])}")
        if "\n" in rw["code"]:  # a loop: its lines as code, not folded into one
            out.append(f"  rewrite, {said}:")
            out += [CODE_INDENT + visible(code) for code in rw["code"].splitlines()]
        else:
            out.append(f"  rewrite: {rw['code']} -- {said}")
        if rw.get("joins"):
            out.append(f"  ({joins_text(rw['joins'])})")
        if rw.get("note"):  # a fused kernel's compile time, where values differ, ...
            out.append(f"  ({rw['note']})")
    elif top.get("grows"):
        out.append(f"  -> {grows_advice(top)}")
    elif top["cause"]:
        # the largest cause's advice, and another's where it holds a good part of the line
        # too (NumPy scalars beside the calls' overhead)
        said = []
        for cause in top["causes"]:
            if cause is top["causes"][0] or cause["seconds"] >= SECOND_ADVICE * top["time_s"]:
                advice = cause_suggestion(cause, top)
                if advice and advice not in said:
                    said.append(advice)
                    out.append(f"  -> {advice}")
    if top["why_not"]:
        out.append(f"  ({top['why_not']})")
    for note in top["notes"]:
        out.append(f"  note: {note}")
    return out


#: the program's fresh-memory causes together are said as a program-wide finding from this
#: share of its run
FRESH_PROGRAM_SHARE = 0.1
#: what keeps glibc from mapping and trimming, as the replays with memory reused did (no block
#: mapped, and a trim threshold no program's free top reaches)
KEEP_FREED = "MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=4294967296"


def fresh_memory_text(fresh: dict, wall_s: float) -> str:
    """The program-wide fresh-memory finding (``ProgramReport.fresh_memory``), or "" under
    :data:`FRESH_PROGRAM_SHARE` of the run."""
    if wall_s <= 0 or fresh["seconds"] < FRESH_PROGRAM_SHARE * wall_s:
        return ""
    where = ""
    if fresh.get("allocator"):
        a = fresh["allocator"]
        where = (f" (at its end glibc mapped blocks from {_mb(a['mmap_threshold'])} and gave "
                 f"back more than {_mb(a['trim_threshold'])} free at its heap's top)")
    lines = fresh["lines"]
    return (f"fresh memory: {_ms(fresh['seconds'])} ({_pct(fresh['seconds'] / wall_s)} of the "
            f"run) on {lines} line{'s' if lines > 1 else ''}, their page faults counted in the "
            f"program{where}, priced on their replays with freed memory reused. Arrays "
            f"allocated once and written into (out=) should avoid it; so should running with "
            f"{KEEP_FREED}, which keeps freed memory for the next arrays as those replays did "
            "(none is then given back to the system while the program runs)")


def program_text(r, width: int | None = None) -> str:
    """The text report (what ``chokepoint run`` prints on stderr)."""
    width = width or terminal_width(120)
    src_w = min(40, max([len(line["source"]) for line in r.lines[:SHOWN_LINES]] + [4]))
    code_w = max(16, width - 66 - src_w)
    out = [f"chokepoint run {' '.join(r.argv) or r.program}: {_ms(r.wall_s)}, exit status "
           f"{r.exit_status}; recording cost {_ms(r.recording_s)}, probing "
           f"{_ms(r.probing_s)}", ""]
    out += [text if text.startswith(CODE_INDENT) else
            textwrap.fill(text, width, subsequent_indent="      ", break_on_hyphens=False)
            for text in _headline_lines(r)]
    out += ["", f"{'line':<{src_w}} {'hits':>7} {'time':>9} {'share':>6} {'rate':>12} "
            f"{'floor':>9} {'recover':>9} {'cause':<13} code"]
    shown = r.lines[:SHOWN_LINES]
    for line in shown:
        out.append(f"{_cell(line['source'], src_w):<{src_w}} {line['hits']:>7} "
                   f"{_ms(line['time_s']):>9} {_pct(line['share']):>6} {_rate(line):>12} "
                   f"{_floor(line):>9} "
                   f"{_ms(line['recoverable_s']):>9} {line['cause'] or '-':<13} "
                   f"{_cell(line['code'], code_w)}")
    rest = r.lines[SHOWN_LINES:]
    if rest:
        out.append(f"({len(rest)} more lines: {_ms(sum(x['time_s'] for x in rest))})")
    findings = r.findings
    if findings:
        out += ["", "measured causes (shares of the run):"]
        for f in findings[:8]:
            out.append(f"  {f['kind']:<15} {_pct(f['share']):>5}  {f['source']}")
    fresh = fresh_memory_text(r.fresh_memory, r.wall_s)
    if fresh:
        out += ["", textwrap.fill(fresh, width, subsequent_indent="  ", break_on_hyphens=False,
                                  break_long_words=False)]
    out.append(f"not explained: {_pct(r.unexplained_share)} of the run (no measured cause: "
               "time at the floor of lines not probed, Python in lines not replayed, the "
               "recording's own cost)")
    ruled = sum(len(line["ruled_out"]) for line in r.lines)
    if ruled:
        out.append(f"ruled out: {ruled} suspicion(s) measured and not confirmed (--json has "
                   "their numbers)")
    for note in r.notes:
        out.append(f"note: {note}")
    if r.error:
        out += ["", "the program raised:", r.error.rstrip()]
    return visible("\n".join(out))  # the program's code and errors, escaped


# -- JSON -----------------------------------------------------------------------------------------


def json_ready(value):
    """``value`` with NaN and infinities as None, tuples as lists, NumPy scalars as Python's
    (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


# -- HTML -----------------------------------------------------------------------------------------


def _e(value) -> str:
    return html.escape(visible(value), quote=True)


def _source_blocks(r) -> str:
    """The source around the hot lines, each line with a heat bar of its share."""
    by_file: dict[str, dict[int, dict]] = {}
    for line in r.lines:
        name, _, number = line["source"].rpartition(":")
        if number.isdigit():
            by_file.setdefault(name, {})[int(number)] = line
    parts = []
    top = max((line["share"] for line in r.lines), default=0) or 1.0
    for name, rows in by_file.items():
        hot = sorted(rows, key=lambda n: rows[n]["share"], reverse=True)[:8]
        if not hot or rows[hot[0]]["share"] < 0.01:
            continue
        first, last = max(1, min(hot) - 3), max(hot) + 3
        body = []
        for n in range(first, last + 1):
            text = linecache.getline(name, n).rstrip("\n")
            if not text and n > max(hot):
                break
            row = rows.get(n)
            bar = (f'<span class="share" style="width:{60 * row["share"] / top:.1f}px"></span>'
                   if row else "")
            info = (f'{_e(_ms(row["time_s"]))} {_e(_pct(row["share"]))}'
                    f'{" " + _e(row["cause"]) if row["cause"] else ""}' if row else "")
            body.append(f'<tr><td>{n}</td><td class="text">{bar}</td><td>{info}</td>'
                        f'<td class="text"><code>{_e(text)}</code></td></tr>')
        parts.append(f"<h3><code>{_e(name)}</code></h3><table>{''.join(body)}</table>")
        if len(parts) >= 4:
            break
    return "".join(parts)


#: lines drawn on the roofline chart (the most recoverable ones): a legend stays legible
PLOTTED_LINES = 10


def roofline_points(r) -> list[tuple[str, float, float]]:
    """The analysed lines doing arithmetic, as ``(source, flops per byte, flops per
    second)``."""
    points = []
    for line in r.lines:
        if line.get("analysed") and line["flops"] and line["bytes"] and line["time_s"] > 0:
            points.append((f"{line['source']} {line['code']}", line["flops"] / line["bytes"],
                           line["flops"] / line["time_s"]))
    return points[:PLOTTED_LINES]


def _roofline(r) -> str:
    points = roofline_points(r)
    if not points:
        return "<p>No analysed line does arithmetic chokepoint counts.</p>"
    m = r.machine
    gemm = m.get("gemm") or {}
    peak = max([m.get("compute") or 0.0, *[v for v in gemm.values() if v]]) or 1e9

    def make():
        from .plots import roofline_figure

        return roofline_figure(points, m["bandwidth"], peak, unit="flop")

    return figure_html(make, "roofline-plot",
                       "each analysed line: its flops over its bytes, and the flops per second "
                       "it reached, under this machine's measured bandwidth and compute "
                       "ceilings")


def program_html(r) -> str:
    """A self-contained page: headline and rewrite first, the lines table, the source of the
    hot functions with a heat bar per line, the measured causes."""
    parts: list[str] = []
    code: list[str] = []
    for text in [*_headline_lines(r), ""]:
        if text.startswith(CODE_INDENT):  # a rewrite's lines: one block, as written
            code.append(text.removeprefix(CODE_INDENT))
            continue
        if code:
            parts.append(f"<pre>{_e(chr(10).join(code))}</pre>")
            code = []
        if text:
            parts.append(f"<div>{_e(text)}</div>")
    head = "".join(parts)
    rows = []
    for line in r.lines[:40]:
        rows.append(
            "<tr>" + "".join(f"<td>{_e(v)}</td>" for v in (
                line["source"], line["hits"], _ms(line["time_s"]), _pct(line["share"]),
                _rate(line), _floor(line),
                _ms(line["recoverable_s"]), line["cause"] or "-"))
            + f'<td class="text"><code>{_e(line["code"])}</code></td></tr>')
    header = "".join(f"<th>{h}</th>" for h in ("line", "hits", "time", "share", "rate",
                                               "floor", "recoverable", "cause"))
    causes = "".join(
        f'<div class="finding"><b>{_e(f["kind"])}</b> {_e(_pct(f["share"]))} at '
        f'<code>{_e(f["source"])}</code>: {_e(cause_evidence(f))}</div>'
        for f in r.findings[:12])
    body = (f"<h1>chokepoint run <code>{_e(' '.join(r.argv) or r.program)}</code></h1>"
            f'<p class="machine">{_e(_ms(r.wall_s))}, exit status {r.exit_status}; '
            f"recording cost {_e(_ms(r.recording_s))}, probing {_e(_ms(r.probing_s))}; "
            f"{_e(r.machine.get('cpu', ''))}</p>"
            f'<div class="finding">{head}</div>'
            f"<h2>Lines, by recoverable time</h2><table><tr>{header}"
            f'<th class="text">code</th></tr>{"".join(rows)}</table>'
            f"<h2>Measured causes</h2>{causes or '<p>none</p>'}"
            + (f"<p>{_e(fresh)}</p>" if (fresh := fresh_memory_text(r.fresh_memory, r.wall_s))
               else "")
            + f"<p>Not explained: {_e(_pct(r.unexplained_share))} of the run.</p>"
            f"<h2>Source</h2>{_source_blocks(r)}"
            f"<h2>Roofline</h2>{_roofline(r)}"
            + (f"<h2>The program raised</h2><pre>{_e(r.error)}</pre>" if r.error else ""))
    return page(f"chokepoint run {r.program}", body)
