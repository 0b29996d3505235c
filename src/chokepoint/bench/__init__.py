"""The kernel benchmark: chokepoint's kernels on the origin workload, side by side.

X = randn(3072, 10000) float64 (246 MB) and G of the same shape. Each kernel is raced, in one
process, against NumPy's best formulations (out= where it helps), numexpr and torch CPU when
installed, and the floor: the bytes the operation must move (inputs read once, output written
once) at the faster of the read and triad bandwidths measured in this same run. ``chokepoint
bench`` runs it; ``benchmarks/kernels.py`` too. The benchmark matrix (:mod:`.matrix`, ``chokepoint
bench --matrix``) is in this package, and both take the installed peers from :mod:`.peers`.
"""

from __future__ import annotations

import argparse

import numpy as np

import chokepoint
from chokepoint.kernels.adaptive import settle
from chokepoint.measure import measure
from chokepoint.measure.roofline import measure_floor_bandwidth

from .peers import peers

__all__ = ["add_arguments", "main", "peers", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's command-line options."""
    parser.add_argument("--quick", action="store_true",
                        help="a 10x smaller X, fewer repeats (with --matrix: no 3e7 cells)")
    parser.add_argument("--min-time", type=float, default=None,
                        help="seconds per timing repeat (default 0.2; 0.02 with --matrix)")
    parser.add_argument("--matrix", action="store_true",
                        help="every kernel x float32/float64 x 1e3..3e7 elements against each "
                             "peer's best formulation (see chokepoint.bench.matrix)")


def main(argv=None) -> int:
    """Run the benchmark and print medians, ratios to the floor and the required ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the benchmark (or, with ``--matrix``, the matrix) with parsed options."""
    if getattr(args, "matrix", False):
        from . import matrix

        args.min_time = 0.02 if args.min_time is None else args.min_time
        return matrix.run(args)
    args.min_time = 0.2 if args.min_time is None else args.min_time
    shape = (3072, 1000) if args.quick else (3072, 10000)
    rng = np.random.default_rng(0)
    X = rng.standard_normal(shape)
    G = rng.standard_normal(shape)
    n = X.size
    out8, outb, outf = np.empty(shape, np.uint8), np.empty(shape, bool), np.empty_like(X)
    bw, said = measure_floor_bandwidth(max(X.nbytes, 2**27), args.min_time)
    print(f"X {shape} float64, {X.nbytes / 1e6:.1f} MB; backend {chokepoint.get_backend()}; "
          f"{said}")

    ne, torch = peers()

    _, mask = chokepoint.relu_with_mask(X)
    groups = {
        "relu_grad (read 8 B, write 1 B per element)": (9 * n, [
            ("chokepoint.relu_grad(X, out=uint8)", lambda: chokepoint.relu_grad(X, out=out8)),
            ("chokepoint.relu_grad(X)  [new array]", lambda: chokepoint.relu_grad(X)),
            ("numpy (X > 0).view('i1')", lambda: (X > 0).view("i1")),
            ("numpy np.greater(X, 0, out=bool)", lambda: np.greater(X, 0, out=outb)),
            ("numpy np.ceil(np.clip(X, 0, 1))", lambda: np.ceil(np.clip(X, 0, 1))),
            *([("numexpr evaluate('X>0', out=bool)",
                lambda: ne.evaluate("X>0", local_dict={"X": X}, out=outb))] if ne else []),
        ]),
        "relu (read 8 B, write 8 B)": (16 * n, [
            ("chokepoint.relu(X, out=)", lambda: chokepoint.relu(X, out=outf)),
            ("numpy np.maximum(X, 0, out=)", lambda: np.maximum(X, 0, out=outf)),
            *([("numexpr where(X>0, X, 0) out=",
                lambda: ne.evaluate("where(X > 0, X, 0)", local_dict={"X": X},
                                    out=outf))] if ne else []),
            *([("torch.relu", lambda: torch.relu(torch.from_numpy(X)))] if torch else []),
        ]),
        "relu_with_mask (read 8 B, write 8 B + 1 bit)": (16.125 * n, [
            ("chokepoint.relu_with_mask(X, out=)",
             lambda: chokepoint.relu_with_mask(X, out=outf)),
        ]),
        "relu_backward (read 16 B, write 8 B)": (24 * n, [
            ("chokepoint.relu_backward(G, X, out=)",
             lambda: chokepoint.relu_backward(G, X, out=outf)),
            ("chokepoint.relu_backward(G, mask, out=)  [reads 8 B + 1 bit]",
             lambda: chokepoint.relu_backward(G, mask, out=outf), 16.125 * n),
            ("numpy np.multiply(G, X > 0, out=)", lambda: np.multiply(G, X > 0, out=outf)),
            *([("numexpr where(X>0, G, 0) out=",
                lambda: ne.evaluate("where(X > 0, G, 0)", local_dict={"X": X, "G": G},
                                    out=outf))] if ne else []),
            *([("torch threshold_backward(G, X, 0)",
                lambda: torch.ops.aten.threshold_backward(torch.from_numpy(G),
                                                          torch.from_numpy(X), 0))]
              if torch else []),
        ]),
    }
    medians = {}
    for title, (nbytes, candidates) in groups.items():
        floor = nbytes / bw
        print(f"\n{title}: floor {floor * 1e3:.2f} ms (those bytes at that bandwidth)")
        for label, fn, *own_bytes in candidates:
            if label.startswith("chokepoint"):
                settle(fn)  # through the chooser's exploration (kernels/adaptive.py)
            m = measure(fn, min_time=args.min_time, repeats=3 if args.quick else 7)
            medians[label] = m.median
            own_floor = own_bytes[0] / bw if own_bytes else floor
            print(f"  {label:<58} {m.median * 1e3:8.2f} ms  ±{m.iqr * 1e3:5.2f}  "
                  f"{m.median / own_floor:5.2f}x {'its ' if own_bytes else ''}floor")

    def ratio(slow, fast):
        if slow in medians and fast in medians:
            print(f"  {medians[slow] / medians[fast]:5.2f}x  {fast}  vs  {slow}")

    print("\nRequired ratios (ours faster by):")
    ours_grad = "chokepoint.relu_grad(X, out=uint8)"
    ratio("numexpr evaluate('X>0', out=bool)", ours_grad)
    ratio("numpy (X > 0).view('i1')", ours_grad)
    ratio("numpy np.maximum(X, 0, out=)", "chokepoint.relu(X, out=)")
    ratio("numpy np.multiply(G, X > 0, out=)", "chokepoint.relu_backward(G, X, out=)")
    ratio("torch threshold_backward(G, X, 0)", "chokepoint.relu_backward(G, X, out=)")
    ratio("chokepoint.relu_backward(G, X, out=)",
          "chokepoint.relu_backward(G, mask, out=)  [reads 8 B + 1 bit]")
    return 0

