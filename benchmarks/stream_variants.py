"""Non-temporal ("stream") against plain parallel stores, per kernel, dtype and placement.

Calls the numba engine's two parallel variants of the same kernel directly, alternated in one
process (median of several rounds), on 3e7 elements: relu_backward into a separate ``out`` and in
place (``out=grad``), relu into a separate ``out`` and in place, the forward that emits the
1-bit mask, and the backward from it. Prints stream / parallel time ratios: above 1 means
streaming hurts there.

    python benchmarks/stream_variants.py [--n 30000000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import chokepoint
from chokepoint.kernels import engine_numba as en
from chokepoint.kernels.adaptive import settle


def _once(fn, *args, **kwargs) -> float:
    """Seconds for one call of ``fn`` (callers warm it up first)."""
    t = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t


def _numpy_backward(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """NumPy's best in-place ReLU backward: ``np.multiply(G, X > 0, out=G)``."""
    return np.multiply(g, x > 0, out=g)


def cases(n: int, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    o = np.empty_like(x)
    _, mask = chokepoint.relu_with_mask(x)
    zero = dtype(0)
    yield "relu_backward out=O", "relu_backward", (g, x, o, zero)
    yield "relu_backward out=G", "relu_backward", (g, x, g, zero)
    yield "relu out=O", "relu", (x, o, zero)
    yield "relu out=X", "relu", (x, x, zero)
    yield "mask forward out=O", "mask_forward", (x, o, np.empty_like(mask.bits), zero)
    yield "mask backward out=O", "mask_backward", (g, mask.bits, o, dtype(0))
    yield "mask backward out=G", "mask_backward", (g, mask.bits, g, dtype(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    n = args.n - args.n % 16  # the stream kernels cover whole steps (16 elements, masks 8)
    print(f"{n} elements; medians of {args.rounds} alternated rounds")
    print(f"{'case':28s} {'dtype':8s} {'stream ms':>10s} {'parallel ms':>12s} {'ratio':>7s}")
    for dtype in (np.float32, np.float64):
        for label, name, call in cases(n, dtype):
            stream = en._kernel(name, "stream")
            plain = en._kernel(name, "parallel")
            stream(*call), plain(*call)  # compile and warm
            ts, tp = [], []
            for _ in range(args.rounds):
                ts.append(_once(stream, *call))
                tp.append(_once(plain, *call))
            s, p = statistics.median(ts), statistics.median(tp)
            print(f"{label:28s} {np.dtype(dtype).name:8s} {s * 1e3:10.2f} {p * 1e3:12.2f} "
                  f"{s / p:7.2f}")
    print("\nin place through the public API (the variant _launch picks) against NumPy:")
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(0)
        x = rng.standard_normal(n).astype(dtype)
        g = rng.standard_normal(n).astype(dtype)
        settle(lambda g=g, x=x: chokepoint.relu_backward(g, x, out=g))  # past the exploration
        ours, numpy = [], []
        for _ in range(args.rounds):
            ours.append(_once(chokepoint.relu_backward, g, x, out=g))
            numpy.append(_once(_numpy_backward, g, x))
        o, p = statistics.median(ours), statistics.median(numpy)
        print(f"relu_backward(G, X, out=G) {np.dtype(dtype).name:8s} {o * 1e3:8.2f} ms; "
              f"np.multiply(G, X > 0, out=G) {p * 1e3:8.2f} ms; {p / o:5.2f}x")


def by_working_set(rounds: int = 15) -> None:
    """Stream against parallel below the 16 MiB output where streaming starts: whether it pays
    follows the working set (inputs and output) against the L3, not the output's size."""
    print("\nstream / parallel below stream_min_bytes (blocks of 10 calls, median):")
    for n in (1_000_000, 2_000_000, 4_000_000):
        for dtype in (np.float32, np.float64):
            rng = np.random.default_rng(0)
            x = rng.standard_normal(n).astype(dtype)
            g = rng.standard_normal(n).astype(dtype)
            o = np.empty_like(x)
            line = []
            for name, call in (("relu_backward", (g, x, o, dtype(0))), ("relu", (x, o, dtype(0)))):
                stream, plain = en._kernel(name, "stream"), en._kernel(name, "parallel")
                stream(*call), plain(*call)
                ts, tp = [], []
                for _ in range(rounds):
                    ts.append(sum(_once(stream, *call) for _ in range(10)) / 10)
                    tp.append(sum(_once(plain, *call) for _ in range(10)) / 10)
                s, p = statistics.median(ts), statistics.median(tp)
                working = (len(call) - 1) * x.nbytes / 2**20
                line.append(f"{name} ({working:.0f} MiB) {s * 1e6:6.0f} / {p * 1e6:6.0f} us "
                            f"({s / p:.2f})")
            print(f"{n:>9,} {np.dtype(dtype).name:8s} " + "; ".join(line), flush=True)


if __name__ == "__main__":
    main()
    by_working_set()
