"""Text tables (rich) for race results."""

from __future__ import annotations

import io
import shutil

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..measure.timer import format_seconds
from .words import STEPS, busy_machine, race_note, rewrite_values, sweep_failures, visible

__all__ = ["escape_markup", "explanation_text", "floor_text", "format_seconds", "line_cause",
           "line_rate", "lines_table", "plain", "race_table", "race_text", "ratio_text",
           "ratio_words", "rewrites_text", "short_source", "terminal_width", "unexplained_text"]


def escape_markup(text: object) -> str:
    """``text`` (a statement, a note, an error) made safe to embed in a rich markup string:
    ``X[mask]`` stays ``X[mask]`` and ``'[/x]'`` raises no MarkupError. Use it for every
    user-supplied string in a ``console.print(f"...")``; :func:`plain` for table cells.
    Control and bidi characters are shown as escapes (:func:`~.words.visible`)."""
    return escape(visible(text))


def plain(text: object) -> Text:
    """``text`` as a rich Text, never parsed as markup (for table cells), its control and
    bidi characters shown as escapes (:func:`~.words.visible`)."""
    return Text(visible(text))


def ratio_text(c) -> str:
    """A candidate's ratio to the reference with its 95% interval: ``0.12x [0.11, 0.13]``,
    ``1.01x [0.98, 1.04] indistinguishable``, ``3.1x [0.35, 4.85] too noisy``; ``-`` without
    one."""
    from ..measure.stats import ranking

    if c.ratio is None or c.ratio_ci is None:
        return "-"
    low, high = c.ratio_ci
    text = f"{c.ratio:.3g}x [{low:.3g}, {high:.3g}]"
    rank = ranking(c.ratio_ci)
    return f"{text} {rank}" if rank in ("indistinguishable", "too noisy") else text


def ratio_words(c, reference: str) -> str | None:
    """A sentence on a candidate against the reference, or None without a ratio: faster or
    slower, indistinguishable (what its interval says about 1), or too noisy to rank, with
    about how many repeats would rank it."""
    from ..measure.stats import SAME_WITHIN, ranking, repeats_to_rank

    if c.ratio is None or c.ratio_ci is None:
        return None
    low, high = c.ratio_ci
    interval = f"95% interval [{low:.3g}, {high:.3g}]"
    includes = (f"the {interval} includes 1" if low <= 1 <= high else
                f"the {interval} reaches within {SAME_WITHIN:.0%} of 1, as where identical "
                "code's arrays lie in memory moves it")
    rank = ranking(c.ratio_ci)
    if rank == "indistinguishable":
        return f"{c.statement} is indistinguishable from {reference}: ratio {c.ratio:.3g}, " \
               f"{includes}"
    if rank == "too noisy":
        needed = repeats_to_rank(c.ratio, c.ratio_ci, c.runs)
        return (f"{c.statement} against {reference}: too noisy to rank with {c.runs} repeats "
                f"(ratio {c.ratio:.3g}, {includes}); about {needed} repeats would rank them "
                f"(--repeats {needed})")
    interval = f"ratio {c.ratio:.3g}, {interval}"
    if rank == "faster":
        return f"{c.statement} is {1 / c.ratio:.3g}x faster than {reference} ({interval})"
    return f"{c.statement} is {c.ratio:.3g}x slower than {reference} ({interval})"


def race_table(result) -> Table:
    """A rich Table of a :class:`~chokepoint.measure.race.RaceResult`."""
    m = result.machine
    title = (f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('threads', '?')} threads;"
             f" roof: read {m.get('bandwidth', m.get('read_bw', 0)) / 1e9:.1f} GB/s")
    table = Table(title=title, title_justify="left")
    for name, justify in [("candidate", "left"), ("median", "right"), ("± IQR", "right"),
                          ("min", "right"), ("relative", "right"),
                          ("vs reference (95% CI)", "right"), ("GB/s", "right"),
                          ("% roof", "right"), ("agrees", "center"), ("note", "left")]:
        table.add_column(name, justify=justify, overflow="fold")
    for c in result.candidates:
        label = plain(c.statement + ("  [reference]" if c.statement == result.reference
                                     else ""))
        if c.error:
            table.add_row(label, "failed", "", "", "", "", "", "", "", plain(c.error))
            continue
        agrees = {True: "yes", False: "NO", None: "-"}[c.agrees]
        table.add_row(
            label, format_seconds(c.median_s), format_seconds(c.iqr_s), format_seconds(c.min_s),
            f"{c.relative:.2f}x" if c.relative else "-", ratio_text(c),
            f"{c.gbps:.1f}" if c.gbps is not None else "-",
            f"{100 * c.roof_fraction:.0f}%" if c.roof_fraction is not None else "-",
            agrees, plain(race_note(c)))
    return table


def terminal_width(default: int) -> int:
    """The width reports are laid out for: ``COLUMNS`` when set, else the terminal's, else
    ``default`` (output to a file or a pipe)."""
    return shutil.get_terminal_size((default, 24)).columns


def race_text(result, width: int | None = None) -> str:
    """The race table as plain text, ``width`` columns wide (:func:`terminal_width`'s by
    default)."""
    width = width or terminal_width(140)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None)
    console.print(race_table(result))
    for c in result.candidates:
        words = ratio_words(c, result.reference)
        if words:
            console.print(plain(words))
    if result.sizes:
        console.print(plain(f"sizes swept: {result.sizes}; the table shows "
                            f"n={result.sizes[-1]}"))
        for failure in sweep_failures(result.sizes, result.sweep_errors):
            console.print(plain(failure))
    busy = busy_machine(getattr(result, "load", None))
    if busy:
        console.print(plain(f"Busy machine: {busy}."))
    if result.interrupted:
        console.print(plain(f"[{result.interrupted}: results so far]"))
    return buffer.getvalue()


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


#: the operations table lists at most this many operations under PROBED of the time
SHOWN_OPS = 12


def short_source(source: str) -> str:
    """``/path/to/net.py:26`` -> ``net.py:26``."""
    head, _, line = source.rpartition(":")
    return f"{head.rsplit('/', 1)[-1]}:{line}" if head else source


def line_rate(line: dict) -> str:
    """GFLOP/s for a line that mostly computes, GB/s otherwise."""
    if line.get("flops") and line.get("gflops", 0) >= line.get("gbps", 0):
        return f"{line['gflops']:.1f} GFLOP/s"
    return f"{line.get('gbps', 0):.1f} GB/s"


def lines_table(e) -> Table:
    """The per-line table of an explanation (line_profiler-like, against the ceilings)."""
    table = Table(title="lines (time per line of your code, against this machine's ceilings)",
                  title_justify="left")
    for name, justify in [("line", "left"), ("code", "left"), ("time", "right"),
                          ("share", "right"), ("bytes", "right"), ("rate", "right"),
                          ("% ceiling", "right"), ("cause", "left")]:
        table.add_column(name, justify=justify, overflow="fold")
    for line in e.lines:
        table.add_row(plain(short_source(line["source"])), plain(line["code"]),
                      format_seconds(line["time_s"]), f"{100 * line['share']:.1f}%",
                      _mb(line["bytes"]), line_rate(line),
                      f"{100 * line.get('ceiling_fraction', 0):.0f}%",
                      plain(line_cause(line)))
    return table


def line_cause(line: dict) -> str:
    """A line's main cause, and that a measured rewrite saves time on it."""
    cause = line.get("cause") or ""
    r = line.get("rewrite")
    if not r:
        return cause
    said = f"rewrite {r['speedup']:.0f}x faster"
    if r.get("saved_s"):
        said += f", saves {format_seconds(r['saved_s'])}"
    return f"{cause}; {said}" if cause else said


def rewrites_text(e) -> list[str]:
    """The lines with a measured rewrite, the largest saving first: said under the findings,
    where the author reads, whatever finding holds the line's time."""
    found = sorted(getattr(e, "line_rewrites", None) or [],
                   key=lambda r: r.get("saved_s", 0.0), reverse=True)
    said = []
    for r in found:
        said.append(f"  {short_source(r['source'])}: {r['code']}  ->  {r['statement']}: "
                    f"measured {format_seconds(r['measured_s'])} against "
                    f"{format_seconds(r['original_s'])}, {r['speedup']:.1f}x faster, "
                    f"{rewrite_values(r)}" + (f" ({r['note']})" if r.get("note") else ""))
    return said


def floor_text(e) -> str:
    """What the statement moves and computes, its floor, and how far above it it runs."""
    floor = getattr(e, "floor", None) or {}
    text = (f"  moves {_mb(e.bytes_moved)}; needs {_mb(e.bytes_min)} (inputs once, result once "
            f"at its narrowest dtype)")
    if floor.get("compute_s"):
        text += (f" and {floor['flops'] / 1e9:.3g} GFLOP: floor "
                 f"{format_seconds(e.floor_s)} ({floor['bound']}: memory "
                 f"{format_seconds(floor['memory_s'])}, compute "
                 f"{format_seconds(floor['compute_s'])})")
    else:
        text += f": floor {format_seconds(e.floor_s)}"
    if e.floor_s:
        text += f", {e.median_s / e.floor_s:.1f}x above it"
    return text + _steps_text(e, floor)


def _steps_text(e, floor: dict) -> str:
    """For a program that reads arrays again after it changes them (a loop rewriting the same
    arrays each step), what one pass per step moves and takes: a floor its author can reach by
    fusing each step, where the floor above assumes every array read once."""
    model = getattr(e, "model", None)
    one_pass = floor.get("one_pass_bytes")
    if not one_pass or model is None or one_pass <= model.bytes_inputs + model.result_bytes:
        return ""
    seconds = floor.get("one_pass_s", 0.0)
    text = f"; one pass per step ({STEPS}) moves {_mb(one_pass)}: {format_seconds(seconds)}"
    if seconds:
        text += f", {e.median_s / seconds:.1f}x above it"
    return text


#: the report says what no finding explains when it is at least this share of the time
UNEXPLAINED = 0.1


def unexplained_text(e) -> str | None:
    """The share of the time no finding explains, and where it is: the slowest operations
    without a cause, and the time between the operations (the statement's time beyond its
    operations timed alone). None when the findings explain nearly all of it.

    Findings rank the measured causes; without this line a finding of 19% reads as the
    headline of a program whose other 80% no probe explained (a sort, a reduction)."""
    ops = e.ops
    total = max(e.median_s, sum(op["time_s"] for op in ops))
    if total <= 0:
        return None
    found = [*e.findings, *(getattr(e, "minor", None) or [])]
    share = 1.0 - sum(f.share for f in found)
    if share < UNEXPLAINED:
        return None
    parts = []
    # seconds per operation that no rule was handed (an explanation built by explain() has
    # them; otherwise the operations without a cause, whole)
    left = getattr(e, "op_unexplained", None) or [
        0.0 if op.get("cause") else op["time_s"] for op in ops]
    bare = sorted(((op, s) for op, s in zip(ops, left, strict=True) if s >= 0.01 * total),
                  key=lambda pair: pair[1], reverse=True)
    for op, seconds in bare[:3]:
        where = short_source(op.get("source", ""))
        of = "" if seconds >= 0.99 * op["time_s"] else f" of {format_seconds(op['time_s'])}"
        parts.append(f"{op['name']} ({where + ', ' if where else ''}"
                     f"{format_seconds(seconds)}{of}, {100 * seconds / total:.0f}%)")
    if len(bare) > 3:
        parts.append(f"and {len(bare) - 3} more")
    text = f"not explained ({100 * share:.0f}% of the time)"
    if parts:
        text += ": no probe measured a cause for " + "; ".join(parts)
    between = e.median_s - sum(op["time_s"] for op in ops)
    if between >= 0.01 * total:
        text += (f"{';' if parts else ':'} {format_seconds(between)} "
                 f"({100 * between / total:.0f}%) between the operations (Python, and what "
                 "they cost in the program but not timed alone: fresh memory, cold caches)")
    return text


def explanation_text(e, width: int | None = None) -> str:
    """The human report of an :class:`~chokepoint.explain.api.Explanation`, ``width`` columns
    wide (:func:`terminal_width`'s by default)."""
    width = width or terminal_width(120)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False)
    m = e.machine
    console.print(plain(e.statement))
    console.print(f"  {format_seconds(e.median_s)} (± {format_seconds(e.iqr_s)} IQR) on "
                  f"{escape_markup(m.get('cpu', '?'))}, {m.get('cores', '?')} cores; "
                  f"roof {m.get('bandwidth', m.get('read_bw', 0)) / 1e9:.1f} GB/s read")
    console.print(plain(floor_text(e)))
    sources = {line["source"] for line in e.lines}
    if len(e.lines) > 1 or not all(s.startswith("<") for s in sources):
        console.print(lines_table(e))
    table = Table(title="operations", title_justify="left")
    for name, justify in [("operation", "left"), ("line", "left"), ("read", "right"),
                          ("written", "right"), ("new memory", "center"), ("time", "right"),
                          ("GB/s", "right"), ("GFLOP/s", "right"), ("cause", "left")]:
        table.add_column(name, justify=justify, overflow="fold")
    total = max(e.median_s, sum(op["time_s"] for op in e.ops)) or 1.0
    shown = [op for op in e.ops if op["time_s"] >= 0.01 * total] \
        if len(e.ops) > SHOWN_OPS else e.ops
    for op in shown:
        table.add_row(plain(op["name"]), plain(short_source(op.get("source", ""))),
                      _mb(op["in_bytes"]), _mb(op["out_bytes"]),
                      "yes" if op["allocates"] else "",
                      format_seconds(op["time_s"]) if op["time_s"] else "free",
                      f"{op['gbps']:.1f}",
                      f"{op['gflops']:.1f}" if op.get("flops") else "",
                      plain(op.get("cause") or ""))
    console.print(table)
    if len(shown) < len(e.ops):
        console.print(plain(f"  ({len(e.ops) - len(shown)} operations under 1% of the time "
                            "not shown; --json lists every one)"))
    console.print("findings (measured here, by share of the time; shares add up):")
    if not e.findings:
        console.print("  none: no probe measured an effect")
    for i, f in enumerate(e.findings, 1):
        console.print(f"  {i}. {escape_markup(f.kind)} ({100 * f.share:.0f}%): "
                      f"{escape_markup(f.evidence)}")
        console.print(f"     -> {escape_markup(f.suggestion)}")
    rewrites = rewrites_text(e)
    if rewrites:
        console.print("measured rewrites of your lines (values checked on your data; timed "
                      "here):")
        for text in rewrites:
            console.print(plain(text))
    unexplained = unexplained_text(e)
    if unexplained:
        console.print(plain(unexplained))
    minor = getattr(e, "minor", None) or []
    if minor:
        console.print(plain("minor (measured, under 1% of the time): " + ", ".join(
            f"{f.kind} ({100 * f.share:.2g}%)" if f.share else f"{f.kind} ({f.evidence})"
            for f in minor)))
    if e.ruled_out:
        console.print("ruled out (suspected, not confirmed by the measurement):")
        for r in e.ruled_out:
            console.print(f"  - {escape_markup(r.kind)}: {escape_markup(r.evidence)}")
    if e.rewrite:
        r = e.rewrite
        note = f" ({escape_markup(r['note'])})" if r.get("note") else ""
        console.print(f"rewrite: {escape_markup(r['statement'])} — predicted "
                      f"{format_seconds(r['predicted_s'])}, measured "
                      f"{format_seconds(r['measured_s'])}: {r['speedup']:.1f}x faster, "
                      f"{escape_markup(r.get('values', 'same values'))}{note}")
        if r.get("narrow"):
            n = r["narrow"]
            console.print(f"         {escape_markup(n['statement'])} "
                          f"(uint8, {escape_markup(n.get('values', 'same values'))}) — "
                          "predicted "
                          f"{format_seconds(n['predicted_s'])}, measured "
                          f"{format_seconds(n['measured_s'])}: {n['speedup']:.1f}x faster")
    for w in e.warnings:
        console.print(f"note: {escape_markup(w)}")
    return buffer.getvalue()
