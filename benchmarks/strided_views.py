"""Is explain's "strided-access" on a stencil's 2-D slices real? NumPy on row-contiguous views.

    flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/strided_views.py

The heat program of ``explain_real_programs.py`` adds slices such as ``u[:-2, 1:-1]`` and
``u[2:, 1:-1]`` of a 1024 x 1024 float64 grid: each row is contiguous, the arrays are not.
explain's contiguous probe copies them to contiguous memory and times the operation again.
This times ``np.add`` into a preallocated ``out`` on: the views as they are, contiguous copies
of them, and the same views of a grid whose rows start 64-byte aligned (is it alignment?).
Blocks of 30 ms alternated in one process; the median of the blocks' median calls.
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def _blocks(cases: dict, rounds: int = 12, seconds: float = 0.03) -> dict:
    medians = {k: [] for k in cases}
    for fn in cases.values():
        fn()
    for r in range(rounds):
        for k in (list(cases) if r % 2 else list(cases)[::-1]):
            calls, end = [], time.perf_counter() + seconds
            while time.perf_counter() < end:
                start = time.perf_counter()
                cases[k]()
                calls.append(time.perf_counter() - start)
            medians[k].append(statistics.median(calls))
    return {k: statistics.median(v) for k, v in medians.items()}


def main() -> None:
    u = np.random.default_rng(2).random((1024, 1024))
    a, b = u[:-2, 1:-1], u[2:, 1:-1]
    ca, cb = np.ascontiguousarray(a), np.ascontiguousarray(b)
    padded = np.zeros((1024, 1032))  # rows of 8256 bytes: each row starts 64-byte aligned
    padded[:, :1024] = u
    pa, pb = padded[:-2, :1022], padded[2:, :1022]
    out = np.empty((1022, 1022))
    result = _blocks({
        "views of u (rows contiguous, 8 B past a line)": lambda: np.add(a, b, out=out),
        "contiguous copies of the views": lambda: np.add(ca, cb, out=out),
        "views of a padded grid (rows 64 B aligned)": lambda: np.add(pa, pb, out=out),
    })
    base = result["contiguous copies of the views"]
    for name, seconds in result.items():
        print(f"{name:48} {seconds * 1e6:8.1f} us  ({seconds / base:.2f}x the copies)")


if __name__ == "__main__":
    main()
