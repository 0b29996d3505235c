"""GELU, SiLU, ELU and softplus, forward and backward: chokepoint against torch CPU.

Ours and torch's calls alternate in one process (medians of ``--rounds``), both writing into a
preallocated output, on ``--n`` elements of float32 and float64. Prints each time, the ratio
(torch / ours: above 1 means we are faster) and the bandwidth floor (inputs read once, output
written once, at the faster of the read and triad bandwidths measured at the start).

    python benchmarks/activations.py [--n 30000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import chokepoint
from chokepoint.kernels.adaptive import settle
from chokepoint.measure.roofline import measure_floor_bandwidth


def _once(fn, *args, **kwargs) -> float:
    t = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t


def cases(x: np.ndarray, g: np.ndarray, o: np.ndarray):
    """(label, ours, torch's, bytes moved) for each kernel."""
    tx, tg, to = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(o)
    aten = torch.ops.aten
    one, two = x.nbytes * 2, x.nbytes * 3
    yield ("gelu", lambda: chokepoint.gelu(x, out=o),
           lambda: aten.gelu.out(tx, out=to), one)
    yield ("gelu_backward", lambda: chokepoint.gelu_backward(g, x, out=o),
           lambda: aten.gelu_backward.grad_input(tg, tx, grad_input=to), two)
    yield ("gelu tanh", lambda: chokepoint.gelu(x, approximate="tanh", out=o),
           lambda: aten.gelu.out(tx, approximate="tanh", out=to), one)
    yield ("silu", lambda: chokepoint.silu(x, out=o), lambda: aten.silu.out(tx, out=to), one)
    yield ("silu_backward", lambda: chokepoint.silu_backward(g, x, out=o),
           lambda: aten.silu_backward.grad_input(tg, tx, grad_input=to), two)
    yield ("elu", lambda: chokepoint.elu(x, out=o), lambda: aten.elu.out(tx, out=to), one)
    yield ("elu_backward", lambda: chokepoint.elu_backward(g, x, out=o),
           lambda: aten.elu_backward.grad_input(tg, 1.0, 1, 1.0, False, tx, grad_input=to),
           two)
    yield ("softplus", lambda: chokepoint.softplus(x, out=o),
           lambda: aten.softplus.out(tx, 1.0, 20.0, out=to), one)
    yield ("softplus_backward", lambda: chokepoint.softplus_backward(g, x, out=o),
           lambda: aten.softplus_backward.grad_input(tg, tx, 1.0, 20.0, grad_input=to), two)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    bandwidth, said = measure_floor_bandwidth()
    print(f"{args.n} elements, torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{said}; medians of {args.rounds}")
    print(f"{'kernel':20s} {'dtype':8s} {'ours ms':>9s} {'torch ms':>9s} {'torch/ours':>10s} "
          f"{'floor ms':>9s} {'ours/floor':>10s}")
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal(args.n) * 3).astype(dtype)
        g = rng.standard_normal(args.n).astype(dtype)
        o = np.empty_like(x)
        for label, ours, theirs, nbytes in cases(x, g, o):
            # compile and warm; ours through the chooser's exploration (kernels/adaptive.py),
            # or its exploratory serial calls are timed
            settle(ours)
            theirs()
            a, b = [], []
            for _ in range(args.rounds):
                a.append(_once(ours))
                b.append(_once(theirs))
            ta, tb = statistics.median(a), statistics.median(b)
            floor = nbytes / bandwidth
            print(f"{label:20s} {np.dtype(dtype).name:8s} {ta * 1e3:9.2f} {tb * 1e3:9.2f} "
                  f"{tb / ta:10.2f} {floor * 1e3:9.2f} {ta / floor:10.2f}")


if __name__ == "__main__":
    main()
