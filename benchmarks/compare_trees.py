"""Per-call time of the kernels' routes in two source trees, alternating, side by side.

Run: ``git worktree add /tmp/base <commit>`` then
``flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/compare_trees.py /tmp/base``.

A change of the call path (the C path, the Python fast path, the launcher) must keep its
speed; this times the same calls under the base tree's ``src`` and this one's, each round a
fresh process per tree, the trees alternating, and prints the median per call of each and
their ratio (this tree over the base: above 1.00 this tree is slower). The routes: a small
call (10 and 1,000 elements: the C path's serial kernel), a mid-size one (1e5: the chooser's
decided variant in C; again with the C path off: the Python fast path) and a large one
(3e6 into ``out=``: the launcher), relu_backward on float32, and a fused ``a * b + c``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

_MEASURE = r"""
import json, os, sys, time
import numpy as np
import chokepoint
from chokepoint.kernels import native

def per_call(fn, seconds=0.15):
    for _ in range(40):  # past the chooser's first decisions
        fn()
    best = []
    for _ in range(5):
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 5:
            fn()
            n += 1
        best.append((time.perf_counter() - start) / n)
    return min(best)

rng = np.random.default_rng(0)
out = {}
for n in (10, 1000, 100_000, 3_000_000):
    g = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    o = np.empty_like(x)
    out[f"relu_backward {n:.0e} out="] = per_call(lambda: chokepoint.relu_backward(g, x, out=o))
    if n == 100_000:
        module = native.load()
        was = module.set_enabled(False) if module is not None else None
        out[f"relu_backward {n:.0e} out= (Python path)"] = per_call(
            lambda: chokepoint.relu_backward(g, x, out=o))
        if module is not None:
            module.set_enabled(was)
f = chokepoint.fuse("a * b + c")
for n in (1000, 3_000_000):
    a = rng.standard_normal(n)
    o = np.empty_like(a)
    out[f"fuse a*b+c {n:.0e}"] = per_call(lambda: f(a=a, b=a, c=a, out=o))
print(json.dumps(out))
"""


def _round(src: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, "-c", _MEASURE], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="the base tree (a git worktree)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trees = {"base": args.base.resolve() / "src", "this": HERE / "src"}
    times: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    for _ in range(args.rounds):
        for name, src in trees.items():
            for case, seconds in _round(src).items():
                times[name].setdefault(case, []).append(seconds)
    print(f"{'case':42} {'base us':>9} {'this us':>9} {'this/base':>9}")
    for case, base in times["base"].items():
        b = statistics.median(base) * 1e6
        t = statistics.median(times["this"][case]) * 1e6
        print(f"{case:42} {b:9.2f} {t:9.2f} {t / b:9.2f}")


if __name__ == "__main__":
    main()
