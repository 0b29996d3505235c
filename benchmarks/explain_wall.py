"""Wall time of ``chokepoint explain`` as a user runs it (a fresh process each time), for two
checkouts side by side: runs alternate A B A B ..., so that a machine drifting hits both alike.

    python benchmarks/explain_wall.py BEFORE_SRC AFTER_SRC [--rounds 3]

``BEFORE_SRC`` and ``AFTER_SRC`` are ``src`` folders (``git worktree add /tmp/before HEAD~3``
gives one). The workloads are issue 30's: the origin one-liner on X = randn(3072, 10000), the
CIFAR-10-sized training step in ``examples/``, and a cell of three lines. Prints each run's
seconds, then the medians and their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

CELL = """\
Z = X * W + b
A = np.maximum(Z, 0)
L = (A * A).sum()
"""

WORKLOADS = {
    "origin one-liner": ["-s", "X = np.random.randn(3072, 10000)", "np.ceil(np.clip(X, 0, 1))"],
    "training step": ["-s", "from two_layer_net import *; X, y, W1, b1, W2, b2 = data()",
                      "step(X, y, W1, b1, W2, b2)"],
    "three-line cell": ["-s", "X = np.random.randn(2000, 2000); W = np.random.randn(2000, 2000);"
                              " b = np.random.randn(2000)", "-f", "CELL"],
}


def _run(src: str, args: list[str], cell: Path) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(EXAMPLES)])}
    argv = [sys.executable, "-m", "chokepoint", "explain",
            *[str(cell) if a == "CELL" else a for a in args]]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{src}: {' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    cell = Path(os.environ.get("TMPDIR", "/tmp")) / "chokepoint_explain_wall_cell.py"
    cell.write_text(CELL)
    for name, workload in WORKLOADS.items():
        for src in (args.before, args.after):  # compiles and caches what a first run would
            _run(src, workload, cell)
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for label, src in (("before", args.before), ("after", args.after)):
                times[label].append(_run(src, workload, cell))
        b, a = (statistics.median(times[k]) for k in ("before", "after"))
        runs = {k: ", ".join(f"{t:.2f}" for t in v) for k, v in times.items()}
        print(f"{name}: before {b:.2f} s ({runs['before']}), after {a:.2f} s "
              f"({runs['after']}): {b / a:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
