"""New results (no ``out=``) from the pool of free buffers, against fresh memory and ``out=``.

``relu_backward(G, X)`` on large arrays, alternated in one process (median of several rounds):
with the pool (the default), with it off (``pool.MAX_BYTES = 0`` for the call: every result is a
new ``np.empty``, whose pages the kernel zeroes on first touch), into a preallocated ``out=``,
and the peers' fresh formulations (torch's ``threshold_backward``, NumPy's ``G * (X > 0)``).
Prints each against its bandwidth floor (3 arrays' bytes at the faster of the read and triad
bandwidths measured now).

    python benchmarks/fresh_results.py [--n 30000000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import chokepoint
from chokepoint.bench import peers
from chokepoint.kernels import pool
from chokepoint.kernels.adaptive import settle
from chokepoint.measure.roofline import measure_floor_bandwidth


def _without_pool(call):
    def run():
        kept = pool.MAX_BYTES
        pool.MAX_BYTES = 0
        try:
            return call()
        finally:
            pool.MAX_BYTES = kept
    return run


def _cases(n: int, dtype, torch) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    o = np.empty_like(x)
    cases = {
        "relu_backward(G, X), pooled": lambda: chokepoint.relu_backward(g, x),
        "relu_backward(G, X), fresh memory": _without_pool(lambda: chokepoint.relu_backward(g, x)),
        "relu_backward(G, X, out=O)": lambda: chokepoint.relu_backward(g, x, out=o),
        "numpy G * (X > 0)": lambda: g * (x > 0),
    }
    if torch is not None:
        tg, tx = torch.from_numpy(g), torch.from_numpy(x)
        cases["torch threshold_backward"] = lambda: torch.ops.aten.threshold_backward(tg, tx, 0)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30_000_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    _, torch = peers()
    bandwidth, said = measure_floor_bandwidth()
    print(f"{args.n:,} elements; medians of {args.rounds} alternated rounds; {said}")
    for dtype in (np.float32, np.float64):
        cases = _cases(args.n, dtype, torch)
        for call in cases.values():
            settle(call)
        times = {k: [] for k in cases}
        for _ in range(args.rounds):
            for label, call in cases.items():
                start = time.perf_counter()
                call()
                times[label].append(time.perf_counter() - start)
        floor = 3 * args.n * np.dtype(dtype).itemsize / bandwidth
        pooled = statistics.median(times["relu_backward(G, X), pooled"])
        print(f"\n{np.dtype(dtype).name}: floor {floor * 1e3:.2f} ms")
        for label, ts in times.items():
            t = statistics.median(ts)
            print(f"  {label:36s} {t * 1e3:8.2f} ms  {t / floor:5.2f}x floor  "
                  f"{t / pooled:5.2f}x pooled")


if __name__ == "__main__":
    main()
