"""Plots with matplotlib (optional dependency, ``pip install chokepoint[report]``)."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["figure_svg", "race_figure", "race_plot", "roofline_figure", "save_figure"]


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'chokepoint[report]'") from exc
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _label(text: str, limit: int = 60) -> str:
    """A legend label: control and bidi characters shown as escapes, shortened, and with
    ``$`` escaped (matplotlib reads $...$ as math)."""
    from .words import visible

    text = visible(text)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("$", r"\$")


def _labels(texts: list[str], limit: int) -> list[str]:
    """:func:`_label` of each text, kept distinct: one shortened alike an earlier one gets a
    suffix, ``" #2"`` (two candidates alike in their first ``limit`` characters)."""
    shown: list[str] = []
    for text in texts:
        label, k = _label(text, limit), 1
        while label in shown:
            k += 1
            label = f"{_label(text, limit)} #{k}"
        shown.append(label)
    return shown


def _check_suffix(path: Path) -> None:
    if path.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"plot file must end in .png or .svg, got {path.name!r}")


def race_figure(result):
    """The race's main figure.

    With sizes: time against size, log-log, one line per candidate (as perfplot). Without:
    a horizontal bar per candidate, its median with whiskers from the first to the third
    quartile of its repeats, the reference hatched and marked by a dashed line, each bar
    labelled with its ratio to the reference and that ratio's 95% interval.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    if result.sizes:
        for label, medians in zip(_labels(list(result.sweep), 60), result.sweep.values(),
                                  strict=True):
            points = [(n, t) for n, t in zip(result.sizes, medians, strict=False)
                      if t is not None]
            if points:
                ax.loglog(*zip(*points, strict=True), marker="o", label=label)
        ax.set_xlabel("n")
        ax.set_ylabel("median time per call [s]")
        ax.legend(fontsize="small")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title("time against size")
    else:
        _bars(ax, result)
    return fig


def _quartiles(c) -> tuple[float, float]:
    """A candidate's first and third quartile of seconds per call (its repeats' when known,
    else the median -+ half the IQR)."""
    import numpy as np

    times = getattr(c, "times", None)
    if times:
        q1, q3 = np.percentile(times, [25, 75])
        return float(q1), float(q3)
    half = (c.iqr_s or 0.0) / 2
    return c.median_s - half, c.median_s + half


def _bars(ax, result) -> None:
    """One horizontal bar per candidate that ran: its median, whiskers from the first to the
    third quartile, the reference hatched and named, each bar labelled with its ratio."""
    from ..measure.timer import format_seconds

    ran = [c for c in result.candidates if c.median_s is not None]
    if not ran:
        ax.text(0.5, 0.5, "no candidate ran", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return
    scale, unit = next(((s, u) for s, u in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"))
                        if max(c.median_s for c in ran) >= s), (1e-9, "ns"))
    medians = [c.median_s / scale for c in ran]
    quartiles = [_quartiles(c) for c in ran]
    whiskers = [[max(0.0, m - q1 / scale) for m, (q1, _) in zip(medians, quartiles,
                                                                 strict=True)],
                [max(0.0, q3 / scale - m) for m, (_, q3) in zip(medians, quartiles,
                                                                strict=True)]]
    is_ref = [c.statement == result.reference for c in ran]
    labels = [label + ("\n(reference)" if ref else "")
              for label, ref in zip(_labels([c.statement for c in ran], 48), is_ref,
                                    strict=True)]
    # bars at positions, not at their labels: matplotlib puts bars with equal labels on one
    bars = ax.barh(range(len(ran)), medians, xerr=whiskers, capsize=4,
                   color=["tab:orange" if ref else "tab:blue" for ref in is_ref],
                   edgecolor="black", linewidth=0.6,
                   error_kw={"elinewidth": 1.2, "ecolor": "black"})
    for bar, ref in zip(bars, is_ref, strict=True):
        if ref:
            bar.set_hatch("//")
    reference = next((m for m, ref in zip(medians, is_ref, strict=True) if ref), None)
    if reference is not None:
        ax.axvline(reference, color="tab:orange", ls="--", lw=1, label="reference median")
        ax.legend(fontsize="small", loc="lower right")
    from .text import ratio_text

    for bar, c, (_, q3) in zip(bars, ran, quartiles, strict=True):
        text = ("reference" if c.statement == result.reference else ratio_text(c))
        text = f"{format_seconds(c.median_s)}  {text}" if text != "-" else \
            format_seconds(c.median_s)
        ax.text(q3 / scale, bar.get_y() + bar.get_height() / 2, "  " + _label(text, 80),
                va="center", fontsize="small")
    ax.set_yticks(range(len(ran)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, max(q3 for _, q3 in quartiles) / scale * 1.6)
    ax.set_xlabel(f"median time per call [{unit}], whiskers: first to third quartile")
    ax.set_title("median time per call (ratio to the reference, 95% interval)")


def roofline_figure(points, bandwidth: float, peak: float, *, unit: str = "op"):
    """A roofline chart: each point ``(label, intensity, rate)`` in ops per byte and ops per
    second, under the bandwidth line and the compute ceiling."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    xs = [p[1] for p in points if p[1] > 0] or [0.1]
    lo, hi = min(min(xs) / 4, 0.01), max(max(xs) * 4, 4 * peak / bandwidth)
    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.loglog(grid, np.minimum(grid * bandwidth, peak), color="black", lw=2,
              label=f"roof: {bandwidth / 1e9:.1f} GB/s, {peak / 1e9:.1f} G{unit}/s")
    for label, intensity, rate in points:
        if intensity > 0 and rate > 0:
            ax.loglog([intensity], [rate], marker="o", ls="none", label=_label(label))
    ax.set_xlabel(f"arithmetic intensity [{unit} per byte]")
    ax.set_ylabel(f"achieved [{unit}/s]")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title("roofline (measured ceilings of this machine)")
    return fig


def save_figure(fig, path) -> Path:
    """Write ``fig`` to a .png or .svg file and close it."""
    path = Path(path)
    _check_suffix(path)
    plt = _pyplot()
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def figure_svg(fig) -> str:
    """``fig`` as an inline ``<svg>`` element (text kept as text), and close it."""
    import io

    import matplotlib

    plt = _pyplot()
    buffer = io.StringIO()
    try:
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            fig.savefig(buffer, format="svg")
    finally:
        plt.close(fig)
    svg = buffer.getvalue()
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)  # RDF with URLs: not needed
    return svg[svg.index("<svg"):]


def race_plot(result, path) -> Path:
    """Write a race's main plot (see :func:`race_figure`) to ``path`` (.png or .svg)."""
    _check_suffix(Path(path))
    return save_figure(race_figure(result), path)
