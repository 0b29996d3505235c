"""Text tables (rich) for race results."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

__all__ = ["format_seconds", "race_table", "race_text"]


def format_seconds(seconds: float | None) -> str:
    """``0.0123`` -> ``"12.3 ms"``; ``None`` -> ``"-"``."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


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
        label = c.statement + ("  [reference]" if c.statement == result.reference else "")
        if c.error:
            table.add_row(label, "failed", "", "", "", "", "", "", c.error)
            continue
        agrees = {True: "yes", False: "NO", None: "-"}[c.agrees]
        table.add_row(
            label, format_seconds(c.median_s), format_seconds(c.iqr_s), format_seconds(c.min_s),
            f"{c.relative:.2f}x" if c.relative else "-",
            f"{c.gbps:.1f}" if c.gbps is not None else "-",
            f"{100 * c.roof_fraction:.0f}%" if c.roof_fraction is not None else "-",
            agrees, c.note)
    return table


def race_text(result, width: int = 140) -> str:
    """The race table as plain text."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None)
    console.print(race_table(result))
    if result.sizes:
        console.print(f"sizes swept: {result.sizes}; the table shows n={result.sizes[-1]}")
    if result.interrupted:
        console.print(f"[{result.interrupted}: results so far]")
    return buffer.getvalue()
