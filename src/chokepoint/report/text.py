"""Text tables (rich) for race results."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..measure.timer import format_seconds

__all__ = ["escape_markup", "explanation_text", "format_seconds", "plain", "race_table",
           "race_text"]


def escape_markup(text: object) -> str:
    """``text`` (a statement, a note, an error) made safe to embed in a rich markup string:
    ``X[mask]`` stays ``X[mask]`` and ``'[/x]'`` raises no MarkupError. Use it for every
    user-supplied string in a ``console.print(f"...")``; :func:`plain` for table cells."""
    return escape(str(text))


def plain(text: object) -> Text:
    """``text`` as a rich Text, never parsed as markup (for table cells)."""
    return Text(str(text))


def race_table(result) -> Table:
    """A rich Table of a :class:`~chokepoint.measure.race.RaceResult`."""
    m = result.machine
    title = (f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('threads', '?')} threads;"
             f" roof: read {m.get('read_bw', 0) / 1e9:.1f} GB/s")
    table = Table(title=title, title_justify="left")
    for name, justify in [("candidate", "left"), ("median", "right"), ("± IQR", "right"),
                          ("min", "right"), ("relative", "right"), ("GB/s", "right"),
                          ("% roof", "right"), ("agrees", "center"), ("note", "left")]:
        table.add_column(name, justify=justify, overflow="fold")
    for c in result.candidates:
        label = plain(c.statement + ("  [reference]" if c.statement == result.reference
                                     else ""))
        if c.error:
            table.add_row(label, "failed", "", "", "", "", "", "", plain(c.error))
            continue
        agrees = {True: "yes", False: "NO", None: "-"}[c.agrees]
        table.add_row(
            label, format_seconds(c.median_s), format_seconds(c.iqr_s), format_seconds(c.min_s),
            f"{c.relative:.2f}x" if c.relative else "-",
            f"{c.gbps:.1f}" if c.gbps is not None else "-",
            f"{100 * c.roof_fraction:.0f}%" if c.roof_fraction is not None else "-",
            agrees, plain(c.note))
    return table


def race_text(result, width: int = 140) -> str:
    """The race table as plain text."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None)
    console.print(race_table(result))
    if result.sizes:
        console.print(plain(f"sizes swept: {result.sizes}; the table shows "
                            f"n={result.sizes[-1]}"))
    if result.interrupted:
        console.print(plain(f"[{result.interrupted}: results so far]"))
    return buffer.getvalue()


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def explanation_text(e, width: int = 120) -> str:
    """The human report of an :class:`~chokepoint.explain.api.Explanation`."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False)
    m = e.machine
    console.print(plain(e.statement))
    console.print(f"  {format_seconds(e.median_s)} (± {format_seconds(e.iqr_s)} IQR) on "
                  f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores; "
                  f"roof {m.get('read_bw', 0) / 1e9:.1f} GB/s read")
    console.print(f"  moves {_mb(e.bytes_moved)}; needs {_mb(e.bytes_min)} (inputs once, result "
                  f"once at its narrowest dtype): floor {format_seconds(e.floor_s)}, "
                  f"{e.median_s / e.floor_s:.1f}x above it" if e.floor_s else "")
    table = Table(title="operations", title_justify="left")
    for name, justify in [("operation", "left"), ("read", "right"), ("written", "right"),
                          ("new memory", "center"), ("time", "right"), ("GB/s", "right"),
                          ("% roof", "right")]:
        table.add_column(name, justify=justify, overflow="fold")
    for op in e.ops:
        table.add_row(plain(op["name"]), _mb(op["in_bytes"]), _mb(op["out_bytes"]),
                      "yes" if op["allocates"] else "",
                      format_seconds(op["time_s"]) if op["time_s"] else "free",
                      f"{op['gbps']:.1f}", f"{100 * op['roof_fraction']:.0f}%")
    console.print(table)
    console.print("findings (measured here, by share of the time):")
    if not e.findings:
        console.print("  none: no probe measured an effect")
    for i, f in enumerate(e.findings, 1):
        console.print(f"  {i}. {escape_markup(f.kind)} ({100 * f.share:.0f}%): "
                      f"{escape_markup(f.evidence)}")
        console.print(f"     -> {escape_markup(f.suggestion)}")
    if e.ruled_out:
        console.print("ruled out (suspected, not confirmed by the measurement):")
        for r in e.ruled_out:
            console.print(f"  - {escape_markup(r.kind)}: {escape_markup(r.evidence)}")
    if e.rewrite:
        r = e.rewrite
        note = f" ({escape_markup(r['note'])})" if r.get("note") else ""
        console.print(f"rewrite: {escape_markup(r['statement'])} — predicted "
                      f"{format_seconds(r['predicted_s'])}, measured "
                      f"{format_seconds(r['measured_s'])}: {r['speedup']:.1f}x faster, same "
                      f"values{note}")
        if r.get("narrow"):
            n = r["narrow"]
            console.print(f"         {escape_markup(n['statement'])} (uint8, same values) — "
                          "predicted "
                          f"{format_seconds(n['predicted_s'])}, measured "
                          f"{format_seconds(n['measured_s'])}: {n['speedup']:.1f}x faster")
    for w in e.warnings:
        console.print(f"note: {escape_markup(w)}")
    return buffer.getvalue()
