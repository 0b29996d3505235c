"""Per-call time of each kernel on a 10-element float64 array, beside its NumPy peer.

Run: ``flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/call_overhead.py``.
Ours (through the C path, kernels/native.py), ours with the C path off (the Python fast path)
and the peer alternate in one process; the median of 7 autoranged repeats is printed.
"""

from __future__ import annotations

import statistics
import timeit

import numpy as np

import chokepoint
from chokepoint.kernels import native


def _per_call(stmt) -> float:
    timer = timeit.Timer(stmt)
    number, _ = timer.autorange()
    return number


def main() -> None:
    x = np.linspace(-2, 2, 10)
    g = np.ones(10)
    out = np.empty(10)
    cases = {
        "relu": (lambda: chokepoint.relu(x), lambda: np.maximum(x, 0)),
        "relu out=": (lambda: chokepoint.relu(x, out=out), lambda: np.maximum(x, 0, out=out)),
        "relu_grad": (lambda: chokepoint.relu_grad(x), lambda: np.greater(x, 0)),
        "relu_backward": (lambda: chokepoint.relu_backward(g, x), lambda: g * (x > 0)),
        "leaky_relu": (lambda: chokepoint.leaky_relu(x, 0.1),
                       lambda: np.where(x > 0, x, x * 0.1)),
        "hardtanh": (lambda: chokepoint.hardtanh(x), lambda: np.clip(x, -1, 1)),
        "silu": (lambda: chokepoint.silu(x), lambda: x / (1 + np.exp(-x))),
        "gelu": (lambda: chokepoint.gelu(x, "tanh"),
                 lambda: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))),
    }
    for ours, peer in cases.values():  # compile and warm (the first calls fill the C path)
        ours(), ours(), peer()
    module = native.load()
    print(f"C path: {native.status()}")

    print(f"{'kernel':16s} {'ours us':>9s} {'Python path':>12s} {'numpy us':>9s}")
    for name, (ours, peer) in cases.items():
        n = max(_per_call(ours), _per_call(peer))
        a, p, b = [], [], []
        for _ in range(7):
            a.append(timeit.timeit(ours, number=n) / n * 1e6)
            if module is not None:
                module.set_enabled(False)  # the Python path
                p.append(timeit.timeit(ours, number=n) / n * 1e6)
                module.set_enabled(True)
            b.append(timeit.timeit(peer, number=n) / n * 1e6)
        python = f"{statistics.median(p):12.2f}" if p else f"{'-':>12s}"
        print(f"{name:16s} {statistics.median(a):9.2f} {python} {statistics.median(b):9.2f}")


if __name__ == "__main__":
    main()
