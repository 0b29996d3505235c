"""explain on four realistic programs that no issue names: the headline (first finding, its
advice), the slowest line and the 'not explained' share, per program.

    flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/explain_real_programs.py [NAME]

mlp: a float32 MLP training step (batch 256, 1024 -> 1024 -> 10, softmax cross-entropy, SGD);
heat: ten steps of a 5-point stencil on a 1024 x 1024 grid (2-D slices); pipeline: normalise
columns, filter rows, argsort, unique, bincount (2M rows); mixed: float64 column-major data
scaled by float32 weights, a matvec, a strided row reduction. The programs are the functions
of this file, so that explain attributes their lines here.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np


def mlp_data(batch=256, d=1024, h=1024, classes=10, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch, d), dtype=np.float32)
    y = rng.integers(0, classes, batch)
    W1 = (0.02 * rng.standard_normal((d, h))).astype(np.float32)
    W2 = (0.02 * rng.standard_normal((h, classes))).astype(np.float32)
    return X, y, W1, np.zeros(h, np.float32), W2, np.zeros(classes, np.float32)


def train_step(X, y, W1, b1, W2, b2, lr=0.1):
    n = X.shape[0]
    z1 = X @ W1 + b1
    a1 = np.maximum(z1, 0)
    logits = a1 @ W2 + b2
    logits = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    p = e / e.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(n), y]).mean()
    g = p.copy()
    g[np.arange(n), y] -= 1
    g /= n
    dW2 = a1.T @ g
    db2 = g.sum(axis=0)
    da1 = g @ W2.T
    dz1 = np.where(z1 > 0, da1, 0)
    dW1 = X.T @ dz1
    db1 = dz1.sum(axis=0)
    W1 -= lr * dW1
    b1 -= lr * db1
    W2 -= lr * dW2
    b2 -= lr * db2
    return loss


def diffuse(u, steps=10, alpha=0.1):
    u = u.copy()
    for _ in range(steps):
        lap = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
               - 4 * u[1:-1, 1:-1])
        u[1:-1, 1:-1] += alpha * lap
    return u


def pipeline(table, keys):
    mu = table.mean(axis=0)
    sd = table.std(axis=0)
    z = (table - mu) / sd
    keep = z[:, 0] > -0.5
    zk = z[keep]
    kk = keys[keep]
    order = np.argsort(kk, kind="stable")
    kk = kk[order]
    zk = zk[order]
    uniq, inverse = np.unique(kk, return_inverse=True)
    sums = np.bincount(inverse, weights=zk[:, 1])
    counts = np.bincount(inverse)
    return uniq, sums / counts


def score(X, w, s):
    Xs = X * s  # float64 * float32, column-major
    r = Xs @ w
    rows = X[::2]  # every other row: strided
    c = rows.sum(axis=1)
    return r[::2] + c


_DIR = os.path.dirname(os.path.abspath(__file__))
_HERE = f"import sys; sys.path.insert(0, {_DIR!r}); from explain_real_programs import *; "
PROGRAMS = {
    "mlp": ("train_step(X, y, W1, b1, W2, b2)", _HERE + "X, y, W1, b1, W2, b2 = mlp_data()"),
    "heat": ("diffuse(u)", _HERE + "u = np.random.default_rng(2).random((1024, 1024))"),
    "pipeline": ("pipeline(table, keys)",
                 _HERE + "rng = np.random.default_rng(3); "
                 "table = rng.standard_normal((2_000_000, 4)); "
                 "keys = rng.integers(0, 50_000, 2_000_000)"),
    "mixed": ("score(X, w, s)",
              _HERE + "rng = np.random.default_rng(4); "
              "X = np.asfortranarray(rng.standard_normal((4000, 2000))); "
              "w = rng.standard_normal(2000).astype(np.float32); "
              "s = rng.random(2000).astype(np.float32)"),
}


def scale(e) -> float:
    """What the shares are fractions of: the larger of the time and the operations' sum."""
    return max(e.median_s, sum(op["time_s"] for op in e.ops))


def main(names: list[str]) -> int:
    from chokepoint.explain import explain
    from chokepoint.measure.roofline import roofline
    from chokepoint.report.text import floor_text, short_source, unexplained_text

    roof = roofline()
    for name in names or PROGRAMS:
        statement, setup = PROGRAMS[name]
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            e = explain(statement, setup, roof=roof)
        wall = time.perf_counter() - start
        findings = ", ".join(f"{f.kind} {100 * f.share:.0f}%" for f in e.findings)
        slowest = max(e.lines, key=lambda line: line["time_s"])
        head = e.findings[0] if e.findings else None
        rewrites = "; ".join(
            f"{short_source(r['source'])} {r['statement']} ({r['speedup']:.1f}x, saves "
            f"{r.get('saved_s', 0) * 1e3:.2f} ms)" for r in e.line_rewrites)
        print(f"{name}: {statement}\n  {e.median_s * 1e3:.1f} ms, floor {e.floor_s * 1e3:.2f} ms;"
              f" explained in {wall:.1f} s\n  findings: {findings or 'none'}\n"
              f"  headline advice: {head.suggestion if head else '-'}\n"
              f"  slowest line: {short_source(slowest['source'])} {slowest['code']} "
              f"{slowest['time_s'] * 1e3:.2f} ms ({100 * slowest['share']:.0f}%, "
              f"{slowest['cause']})\n  {unexplained_text(e) or 'all explained'}\n"
              f"  line rewrites: {rewrites or 'none'}\n  {floor_text(e).strip()}",
              flush=True)
        for f in e.findings:
            if f.kind in ("extra-passes", "wide-output"):
                print(f"  {f.kind} ({100 * f.share:.0f}%, {f.share * scale(e) * 1e3:.2f} ms): "
                      f"{f.evidence}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
