"""Per-call time of fused chains on small arrays (a batch, a row of features), beside NumPy.

A call of C-contiguous arrays of one shape below the parallel size goes straight to the serial
kernel (`Fused._small`); a call with ``out=`` takes the general path (its checks, then the
same kernel). Fused, fused with ``out=`` and NumPy alternate in one process, rounds in
alternating order; the median of the rounds' best-of-autorange per call is printed.

    python benchmarks/fuse_small.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import timeit

import numpy as np

import chokepoint

CHAINS = {
    "exp(-(a - b)^2) * c + 1": ("np.exp(-(a - b) ** 2) * c + 1.0",
                                lambda a, b, c: np.exp(-(a - b) ** 2) * c + 1.0),
    "a * b + c": ("a * b + c", lambda a, b, c: a * b + c),
    "logistic loss": ("-(c * np.log(a + b * 1e-7) + (1 - c) * np.log(1 - a + b * 1e-7))",
                      lambda a, b, c: -(c * np.log(a + b * 1e-7)
                                        + (1 - c) * np.log(1 - a + b * 1e-7))),
}
SHAPES = [(16,), (128,), (128, 10), (8192,)]


def _per_call(fn) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(3, number)) / number


def _case(fused, numpy_fn, arrays: list[np.ndarray], rounds: int) -> dict[str, float]:
    """Microseconds per call of each side, median over ``rounds`` alternating rounds."""
    a, b, c = arrays
    out = np.empty_like(a)
    sides = {"fused": lambda: fused(a=a, b=b, c=c),
             "fused out=": lambda: fused(a=a, b=b, c=c, out=out),
             "NumPy": lambda: numpy_fn(a, b, c)}
    for fn in sides.values():
        fn()  # compiles, or loads from the disk cache
    times: dict[str, list[float]] = {k: [] for k in sides}
    order = list(sides)
    for r in range(rounds):
        for k in (order if r % 2 == 0 else order[::-1]):
            times[k].append(_per_call(sides[k]))
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"NumPy {np.__version__}")
    rng = np.random.default_rng(0)
    for name, (code, numpy_fn) in CHAINS.items():
        fused = chokepoint.fuse(code)
        for dtype in (np.float32, np.float64):
            for shape in SHAPES:
                arrays = [rng.uniform(0.01, 0.99, shape).astype(dtype) for _ in range(3)]
                med = _case(fused, numpy_fn, arrays, args.rounds)
                print(f"{name:<26} {np.dtype(dtype).name:<8} {shape!s:<10} "
                      f"fused {med['fused']:6.2f} us  out= {med['fused out=']:6.2f} us  "
                      f"NumPy {med['NumPy']:6.2f} us  NumPy/fused "
                      f"{med['NumPy'] / med['fused']:5.2f}x")


if __name__ == "__main__":
    main()
