"""The streaming maps' vector step against the scalar lanes it replaced, and against the floor.

Until the eleventh session the streaming variant of a select-only map (relu, leaky_relu,
hardtanh, relu_grad, the backwards) computed 8 results per iteration as 8 scalar lanes, packed
for 16-byte non-temporal stores (``engine_numba.stream8``). LLVM kept those lanes scalar: a
``vcmpltss`` and a ``vblendvps`` per element. Now each iteration is one vector step of 16 lanes
built from the op's expression (``engine_numba._vector_step``), which also streams 1-byte
results (relu_grad's uint8 and bool).

This script rebuilds the old scalar-lane kernel from the same expression and times, alternated
in one process on 3e7 elements (median of the rounds): the old streaming kernel, the new one,
the plain parallel kernel (plain stores), and the bandwidth kernels (read and triad, 128 MiB
each) for the floor: the kernel's bytes (inputs read once, output written once) at the faster
of the two rates measured in the same rounds.

    python benchmarks/stream_steps.py [--n 30000000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numba
import numpy as np

from chokepoint.kernels import engine_numba as en
from chokepoint.kernels.ops import OPS
from chokepoint.measure.roofline import bandwidth_kernels

# the streaming template before the vector step: 8 scalar lanes and stream8
_OLD = """
def {fname}({arrays}, out, {params}):
    for j in prange(out.shape[0] // 8):
        s = np.uint64(8) * np.uint64(j)
{lanes}
        stream8(out, s, r0, r1, r2, r3, r4, r5, r6, r7)
"""
_LANE = {1: "        v = x[s + np.uint64({k})]\n        r{k} = {expr}",
         2: "        v = x[s + np.uint64({k})]\n        g = grad[s + np.uint64({k})]\n"
            "        r{k} = {expr}"}
_ARRAYS = {1: "x", 2: "grad, x"}
_VALUES = {"zero": 0.0, "slope": 0.01, "lo": -1.0, "hi": 1.0}


def old_kernel(name: str):
    """The scalar-lane streaming kernel of op ``name``, as the engine built it before."""
    op = OPS[name]
    lanes = "\n".join(_LANE[op.arity].format(k=k, expr=op.expr) for k in range(8))
    fname = f"_old_{name}"
    namespace = {"np": np, "prange": numba.prange, "stream8": en.stream8,
                 **en._NAMESPACE}
    exec(_OLD.format(fname=fname, arrays=_ARRAYS[op.arity], params=", ".join(op.params),
                     lanes=lanes), namespace)
    return numba.njit(parallel=True, nogil=True, error_model="numpy")(namespace[fname])


def cases(n: int, dtype):
    """(label, op name, arguments) of the kernels that stream."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    o = np.empty_like(x)
    for name in ("relu", "leaky_relu", "hardtanh", "relu_backward", "leaky_relu_backward",
                 "hardtanh_backward"):
        params = tuple(dtype(_VALUES[p]) for p in OPS[name].params)
        arrays = (x,) if OPS[name].arity == 1 else (g, x)
        yield f"{name} out=O", name, (*arrays, o, *params)
    yield "relu_grad into uint8", "relu_grad", (x, np.empty(n, np.uint8), dtype(0))


def _once(fn, args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    n = args.n - args.n % 16  # both streaming kernels cover whole steps
    probes = bandwidth_kernels(128 << 20, ("read_bw", "triad_bw"))
    print(f"{n} elements; medians of {args.rounds} alternated rounds; ms, and / the floor "
          "(bytes at the faster of read and triad, timed in the same rounds)")
    print(f"{'case':28s} {'dtype':8s} {'old stream':>14s} {'new stream':>14s} "
          f"{'parallel':>14s} {'old/new':>8s}")
    for dtype in (np.float32, np.float64):
        for label, name, call in cases(n, dtype):
            kernels = {"old": old_kernel(name) if not label.startswith("relu_grad into")
                       else None,
                       "new": en._kernel(name, "stream"), "parallel": en._kernel(name, "parallel")}
            kernels = {k: v for k, v in kernels.items() if v is not None}
            for kernel in kernels.values():
                kernel(*call)  # compile and warm
            times: dict[str, list[float]] = {k: [] for k in (*kernels, *probes)}
            for _ in range(args.rounds):
                for key, kernel in kernels.items():
                    times[key].append(_once(kernel, call))
                for key, (probe, _) in probes.items():
                    times[key].append(_once(probe, ()))
            median = {k: statistics.median(v) for k, v in times.items()}
            rate = max(moved / median[k] for k, (_, moved) in probes.items())
            floor = sum(a.nbytes for a in call if isinstance(a, np.ndarray)) / rate
            cells = [f"{median[k] * 1e3:6.2f} {median[k] / floor:5.2f}x" if k in median
                     else f"{'-':>14s}" for k in ("old", "new", "parallel")]
            ratio = f"{median['old'] / median['new']:8.2f}" if "old" in median else f"{'-':>8s}"
            print(f"{label:28s} {np.dtype(dtype).name:8s} {' '.join(cells)} {ratio}")


if __name__ == "__main__":
    main()
