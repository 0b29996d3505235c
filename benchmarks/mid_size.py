"""Mid-size calls (1e5 elements): where a call's time goes, and what the chooser runs.

    flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/mid_size.py

Part 1 times, in blocks of 10 ms alternated in one process (median of 12 blocks), a public
call beside the kernel it runs and the best peer: ``relu(X, out=O)`` against the parallel
kernel through numba's dispatcher, the checked parallel kernel the fast path calls, and
``torch.clamp``; ``relu_grad(X, out=B)`` against its kernels and ``np.greater``.

Part 2 runs the benchmark matrix's own timing of one cell (``matrix._time_cell``) three
times, with every peer and with NumPy alone, and counts the chooser's timed calls per
variant: after a block of torch or numexpr calls their thread pools spin, and our parallel
calls wait as they do beside a busy core. Part 3 times the same cells with the variant forced
(parallel, serial) beside the chooser's own choice. Part 4 times the calls that end a period
(the chooser decides in Python, cold after a large call) against those between (in C).

Results and what was tried: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter

import numpy as np

import chokepoint
from chokepoint.bench import matrix, peers
from chokepoint.kernels import engine_numba
from chokepoint.kernels.api import op_constants

N = 100_000


def _blocks(cases: dict, rounds: int = 12, seconds: float = 0.01) -> dict:
    """Per callable, the median over ``rounds`` of its median call in a block of
    ``seconds``; the blocks alternate, forwards then backwards."""
    medians = {k: [] for k in cases}
    for fn in cases.values():
        for _ in range(100):
            fn()
    order = list(cases)
    for r in range(rounds):
        for k in order if r % 2 else reversed(order):
            fn, calls, end = cases[k], [], time.perf_counter() + seconds
            while True:
                start = time.perf_counter()
                fn()
                stop = time.perf_counter()
                calls.append(stop - start)
                if stop > end:
                    break
            medians[k].append(statistics.median(calls))
    return {k: statistics.median(v) for k, v in medians.items()}


def where_the_time_goes(torch) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    out = np.empty_like(x)
    b = np.empty(N, bool)
    zero = op_constants("relu", x.dtype)
    kernel = {mode: engine_numba.kernel_for("relu", mode)
              for mode in ("parallel", "checked_parallel")}
    grad = {mode: engine_numba.kernel_for("relu_grad", mode) for mode in ("parallel", "serial")}
    cases = {
        "chokepoint.relu(X, out=O)": lambda: chokepoint.relu(x, out=out),
        "  parallel kernel": lambda: kernel["parallel"](x, out, *zero),
        "  checked parallel kernel": lambda: kernel["checked_parallel"](x, out, *zero),
        "chokepoint.relu_grad(X, out=B)": lambda: chokepoint.relu_grad(x, out=b),
        "  relu_grad parallel kernel": lambda: grad["parallel"](x, b, *zero),
        "  relu_grad serial kernel": lambda: grad["serial"](x, b, *zero),
        "np.greater(X, 0, out=B)": lambda: np.greater(x, 0, out=b),
    }
    if torch is not None:
        xt, ot = torch.from_numpy(x), torch.from_numpy(out)
        cases["torch.clamp(X, min=0, out=O)"] = lambda: torch.clamp(xt, min=0, out=ot)
    for name, seconds in _blocks(cases).items():
        print(f"{name:34} {seconds * 1e6:7.2f} us", flush=True)


def chooser_in_the_matrix(ne, torch) -> None:
    log: list[str] = []
    chooser = engine_numba.chooser
    record = chooser.record
    chooser.record = lambda name, n, variant, *rest: log.append(variant) or record(
        name, n, variant, *rest)
    try:
        for cell in ("relu out=", "relu_grad -> uint8"):
            _, ours, rivals = matrix._cases(N, np.dtype(np.float32), ne, torch)[cell]
            numpy_only = {k: v for k, v in rivals.items() if k not in ("torch", "numexpr")}
            for label, sub in (("every peer", rivals), ("NumPy alone", numpy_only)):
                for _ in range(3):
                    log.clear()
                    ours_s, peer, peer_s = matrix._time_cell(ours, sub, 0.02)
                    counts = Counter(log)
                    print(f"float32 1e5 {cell:20} {label:12} {peer_s / ours_s:5.2f}x ({peer}); "
                          f"timed calls parallel {counts['parallel']}, serial "
                          f"{counts['serial']}", flush=True)
    finally:
        chooser.record = record


def forced_variants(ne, torch) -> None:
    """The same cells with the chooser's choice forced to each variant, beside the chooser."""
    chooser = engine_numba.chooser
    choice = chooser._choice
    try:
        for cell in ("relu out=", "relu_grad -> uint8"):
            _, ours, rivals = matrix._cases(N, np.dtype(np.float32), ne, torch)[cell]
            for _ in range(2):
                ratios = []
                for mode in ("chooser", "parallel", "serial"):
                    # settled once the forced variant has a figure (decide sizes its period)
                    chooser._choice = choice if mode == "chooser" else (
                        lambda name, n, candidates, _mode=mode: (
                            _mode, (name, n.bit_length(), _mode) in chooser.figures))
                    chooser.expire()
                    ours_s, _, peer_s = matrix._time_cell(ours, rivals, 0.02)
                    ratios.append(f"{mode} {peer_s / ours_s:.2f}x")
                print(f"float32 1e5 {cell:20} " + ", ".join(ratios), flush=True)
    finally:
        chooser._choice = choice
        chooser.expire()


def decision_calls() -> None:
    """Part 4: a public call that ends a period (the chooser decides, in Python, and times it)
    against the calls between decisions (in C), and decide's own time, per size and dtype."""
    chooser = engine_numba.chooser
    decide = chooser.decide
    spent: list[float] = []

    def timed_decide(*args, **kwargs):
        start = time.perf_counter()
        try:
            return decide(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    for n in (N, 2_000_000):
        for dtype in (np.float32, np.float64):
            x = np.random.default_rng(0).standard_normal(n).astype(dtype)
            out = np.empty_like(x)
            for _ in range(300):  # past the exploration
                chokepoint.relu(x, out=out)
            decision = chooser.decision("relu", n, "parallel")
            calls, deciding = [], []
            spent.clear()
            chooser.decide = timed_decide
            try:
                for _ in range(2000):
                    deciding.append(decision.left == 0)
                    start = time.perf_counter()
                    chokepoint.relu(x, out=out)
                    calls.append(time.perf_counter() - start)
            finally:
                del chooser.decide  # the class's method again
            mine = [t for t, d in zip(calls, deciding, strict=True) if d]
            others = [t for t, d in zip(calls, deciding, strict=True) if not d]
            # the median deciding call's extra time, spread over all calls
            extra = (len(mine) * (statistics.median(mine) - statistics.median(others))
                     / len(calls))
            print(f"relu {np.dtype(dtype).name} {n:>9,}: {len(mine):4} decisions in "
                  f"{len(calls)} calls; a deciding call {statistics.median(mine) * 1e6:7.1f} "
                  f"us, the others {statistics.median(others) * 1e6:7.1f} us (decide "
                  f"{statistics.median(spent) * 1e6:5.1f} us): {extra * 1e6:5.2f} us a call, "
                  f"{extra / statistics.median(others):.1%}", flush=True)


def main() -> None:
    ne, torch = peers()
    print(f"where a {N:,}-element float32 call's time goes (median call, blocks alternated)")
    where_the_time_goes(torch)
    print("\nthe chooser in the matrix's cells")
    chooser_in_the_matrix(ne, torch)
    print("\nthe same cells (every peer), the variant forced")
    forced_variants(ne, torch)
    print("\nwhat a decision costs: the call that ends a period against the others")
    decision_calls()


if __name__ == "__main__":
    main()
