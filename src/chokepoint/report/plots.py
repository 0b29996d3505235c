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
    """A legend label: shortened, and with ``$`` escaped (matplotlib reads $...$ as math)."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("$", r"\$")


def _check_suffix(path: Path) -> None:
    if path.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"plot file must end in .png or .svg, got {path.name!r}")


def race_figure(result):
    """The race's main figure.

    With sizes: time against size, log-log, one line per candidate (as perfplot). Without:
    a horizontal bar per candidate, its median with the IQR as error bar.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    if result.sizes:
        for label, medians in result.sweep.items():
            points = [(n, t) for n, t in zip(result.sizes, medians, strict=False)
                      if t is not None]
            if points:
                ax.loglog(*zip(*points, strict=True), marker="o", label=_label(label))
        ax.set_xlabel("n")
        ax.set_ylabel("median time per call [s]")
        ax.legend(fontsize="small")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title("time against size")
    else:
        ran = [c for c in result.candidates if c.median_s is not None]
        ax.barh([_label(c.statement) for c in ran], [c.median_s * 1e3 for c in ran],
                xerr=[c.iqr_s * 1e3 for c in ran], color="tab:blue")
        ax.invert_yaxis()
        ax.set_xlabel("median time per call [ms]")
        ax.set_title("median time per call")
    return fig


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
