"""explain on programs: the headline findings and how long explain takes, per program.

    flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/explain_programs.py

The programs of issue 10: a CIFAR-10-sized training step (examples/two_layer_net.py), a mask
assignment, a boolean compress, a matrix product, numexpr's benchmark expression and the origin
one-liner. For each: the statement's time, the floor, the findings (kind and share) and the
wall time of the explanation (roofline cached beforehand).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")

PROGRAMS = [
    ("step(X, y, W1, b1, W2, b2)",
     f"import sys; sys.path.insert(0, {EXAMPLES!r}); from two_layer_net import *; "
     "X, y, W1, b1, W2, b2 = data()"),
    ("G[X <= 0] = 0", "X = np.random.randn(4_000_000); G = np.random.randn(4_000_000)"),
    ("X[X > 0]", "X = np.random.randn(20_000_000)"),
    ("A @ B", "A = np.random.randn(2000, 2000); B = np.random.randn(2000, 2000)"),
    ("np.sin(a) + np.log(b) * np.sqrt(c)",
     "a = np.random.rand(10_000_000); b = np.random.rand(10_000_000) + 0.5; "
     "c = np.random.rand(10_000_000)"),
    ("np.ceil(np.clip(X, 0, 1))", "X = np.random.randn(3072, 10000)"),
]


def main() -> int:
    from chokepoint.explain import explain
    from chokepoint.measure.roofline import roofline

    roof = roofline()
    for statement, setup in PROGRAMS:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            e = explain(statement, setup, roof=roof)
        wall = time.perf_counter() - start
        findings = ", ".join(f"{f.kind} {100 * f.share:.0f}%" for f in e.findings)
        rewrites = [r["statement"] for r in e.line_rewrites]
        if e.rewrite:
            rewrites.insert(0, e.rewrite["statement"])
        print(f"{statement}\n  {e.median_s * 1e3:.1f} ms, floor {e.floor_s * 1e3:.1f} ms "
              f"({e.floor.get('bound')}); explained in {wall:.1f} s\n  findings: {findings}\n"
              f"  slowest op: {max(e.ops, key=lambda o: o['time_s'])['name']}\n"
              f"  rewrites: {'; '.join(rewrites) or 'none'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
