"""Streaming by working set: mid-size calls whose arrays outgrow the last-level cache.

Until the eleventh session a call streamed (non-temporal stores) only when its output took at
least 16 MiB, and never below ``CHECKED_MAX`` (2**21 elements), where the C path runs the
calls. Now a map may stream where its arrays together take at least
``engine_numba.settings.stream_min_bytes`` (the last-level cache's size), the C path included, and
the chooser weighs streaming against the plain parallel and serial kernels.

This script times the public call with ``out=`` (and a new result), alternated in one
process: our call under the new rule, our call with mid-size streaming off
(``stream_min_bytes`` set past any size: the old behaviour below 16 MiB outputs), and torch's
best formulation. Each entry is the mean call of a block of calls, after a few untimed calls
that let the chooser and the C path take the new mode; the three take turns at coming first
(a call right after torch's runs slower: its threads still hold the cores); the median of the
rounds is printed.

    python benchmarks/working_set.py [--rounds 7] [--calls 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import chokepoint
from chokepoint.kernels import engine_numba as en
from chokepoint.kernels.adaptive import settle

_OFF = 1 << 62


def _block(call, calls: int) -> float:
    """Mean seconds of ``calls`` calls, after 4 untimed ones."""
    for _ in range(4):
        call()
    t = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - t) / calls


def cases(n: int, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    o = np.empty_like(x)
    tx, tg, to = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(o)
    threshold = torch.ops.aten.threshold_backward
    yield ("relu_backward out=", lambda: chokepoint.relu_backward(g, x, out=o),
           lambda: threshold.grad_input(tg, tx, 0, grad_input=to))
    yield ("relu_backward new", lambda: chokepoint.relu_backward(g, x),
           lambda: threshold(tg, tx, 0))
    yield ("hardtanh_backward out=", lambda: chokepoint.hardtanh_backward(g, x, out=o),
           lambda: torch.ops.aten.hardtanh_backward.grad_input(tg, tx, -1.0, 1.0,
                                                               grad_input=to))
    yield ("relu out=", lambda: chokepoint.relu(x, out=o),
           lambda: torch.clamp(tx, min=0, out=to))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    rule = en.settings.stream_min_bytes
    print(f"stream_min_bytes {rule / 2**20:.0f} MiB; us per call, medians of {args.rounds} "
          f"alternated blocks of {args.calls} calls")
    print(f"{'case':24s} {'dtype':8s} {'n':>8s} {'MB':>5s} {'new rule':>9s} {'off':>9s} "
          f"{'torch':>9s} {'off/new':>8s} {'torch/new':>9s}")
    for dtype in (np.float32, np.float64):
        for n in (1_000_000, 2_000_000, 4_000_000):
            for label, ours, peer in cases(n, dtype):
                arrays = 3 if "backward" in label else 2
                megabytes = arrays * n * np.dtype(dtype).itemsize / 1e6
                times: dict[str, list[float]] = {"new": [], "off": [], "torch": []}
                for mode in ("new", "off"):  # compile, and the chooser's first exploration
                    en.configure(stream_min_bytes=rule if mode == "new" else _OFF)
                    settle(ours)
                en.configure(stream_min_bytes=rule)
                peer()
                order = ["new", "off", "torch"]
                for _ in range(args.rounds):
                    for mode in order:  # each one after each other in turn
                        en.configure(stream_min_bytes=rule if mode == "new" else _OFF)
                        times[mode].append(_block(peer if mode == "torch" else ours,
                                                  args.calls))
                    order = order[1:] + order[:1]
                m = {k: statistics.median(v) for k, v in times.items()}
                print(f"{label:24s} {np.dtype(dtype).name:8s} {n:8d} {megabytes:5.0f} "
                      f"{m['new'] * 1e6:9.1f} {m['off'] * 1e6:9.1f} {m['torch'] * 1e6:9.1f} "
                      f"{m['off'] / m['new']:8.2f} {m['torch'] / m['new']:9.2f}")
    en.configure(stream_min_bytes=rule)


if __name__ == "__main__":
    main()
