"""Plots with matplotlib (optional dependency, ``pip install chokepoint[report]``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["race_plot"]


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'chokepoint[report]'") from exc
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _check_suffix(path: Path) -> None:
    if path.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"plot file must end in .png or .svg, got {path.name!r}")


def race_plot(result, path) -> Path:
    """Write a race's main plot to ``path`` (.png or .svg).

    With sizes: time against size, log-log, one line per candidate (as perfplot). Without:
    a horizontal bar per candidate, its median with the IQR as error bar.
    """
    path = Path(path)
    _check_suffix(path)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    try:
        if result.sizes:
            for label, medians in result.sweep.items():
                points = [(n, t) for n, t in zip(result.sizes, medians, strict=False)
                          if t is not None]
                if points:
                    ax.loglog(*zip(*points, strict=True), marker="o", label=label)
            ax.set_xlabel("n")
            ax.set_ylabel("median time per call [s]")
            ax.legend(fontsize="small")
            ax.grid(True, which="both", alpha=0.3)
        else:
            ran = [c for c in result.candidates if c.median_s is not None]
            labels = [c.statement for c in ran]
            ax.barh(labels, [c.median_s * 1e3 for c in ran],
                    xerr=[c.iqr_s * 1e3 for c in ran], color="tab:blue")
            ax.invert_yaxis()
            ax.set_xlabel("median time per call [ms]")
        ax.set_title("chokepoint race")
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
