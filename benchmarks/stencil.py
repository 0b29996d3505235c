"""Stencil steps on 2-D slices: chokepoint.fuse against NumPy and numexpr, in one process.

    flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/stencil.py [--n 2000]
        [--dtype float64] [--rounds 7]

Issue 33's cases on an n x n grid (float64 by default): a 5-point stencil step and npbench's
Jacobi 2-D step (each written into the interior of a second grid, ``out=`` a slice), and
ten explicit heat steps in a function with a loop (``chokepoint.fuse`` runs it as Python, each
step fused; numexpr cannot write a slice its inputs overlap), and ``a + b`` on two interior
slices into a fresh result with one thread
(``numba.set_num_threads(1)``; NumPy and numexpr single-threaded too). Timed with
``measure_interleaved`` (rounds alternating the candidates' order, about 0.1 s each a round);
printed: each one's median, and NumPy's time over each candidate's (above 1.0x:
faster than NumPy). Values are checked against NumPy's first.
"""

from __future__ import annotations

import argparse
import sys

import numba
import numexpr
import numpy as np

import chokepoint
from chokepoint.measure.timer import measure_interleaved

STENCIL = "0.25 * (n + s + e + w)"


def heat(u, steps):
    """Explicit heat steps in place, as users write them (a loop, a shape)."""
    n = u.shape[0]
    for _ in range(steps):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                               + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u[: n // 2]


fused_heat = chokepoint.fuse(heat)  # run as Python, its step fused
JACOBI = "0.2 * (c + w + e + s + n)"


def _cases(n: int, dtype: str) -> dict[str, dict]:
    rng = np.random.default_rng(0)
    u = rng.random((n, n), dtype=dtype)
    v = np.zeros_like(u)
    inner = (slice(1, -1), slice(1, -1))
    sides = {"n": u[:-2, 1:-1], "s": u[2:, 1:-1], "e": u[1:-1, 2:], "w": u[1:-1, :-2]}
    stencil, jacobi, add = (chokepoint.fuse(e) for e in (STENCIL, JACOBI, "a + b"))
    a, b = u[1:-1, 1:-1], u[:-2, 2:]
    grids = [u.copy(), u.copy()]  # each candidate's own, evolved alike

    def np_stencil():
        v[inner] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2])

    def np_jacobi():
        v[inner] = 0.2 * (u[1:-1, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] + u[2:, 1:-1]
                          + u[:-2, 1:-1])

    return {
        "5-point stencil, out= a slice": {
            "numpy": np_stencil,
            "numexpr": lambda: numexpr.evaluate(STENCIL, local_dict=sides, out=v[inner]),
            "fuse": lambda: stencil(**sides, out=v[inner]),
            "_value": lambda: v[inner].copy()},
        "Jacobi 2-D step, out= a slice": {
            "numpy": np_jacobi,
            "numexpr": lambda: numexpr.evaluate(JACOBI, local_dict={**sides, "c": u[inner]},
                                                out=v[inner]),
            "fuse": lambda: jacobi(**sides, c=u[inner], out=v[inner]),
            "_value": lambda: v[inner].copy()},
        "10 heat steps, a decorated function with a loop": {
            "numpy": lambda: heat(grids[0], 10),
            "fuse": lambda: fused_heat(grids[1], 10)},
        "a + b on slices, one thread": {
            "numpy": lambda: a + b,
            "numexpr": lambda: numexpr.evaluate("a + b", local_dict={"a": a, "b": b}),
            "fuse": lambda: add(a=a, b=b),
            "_one_thread": True},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    threads = numba.get_num_threads()
    for name, case in _cases(args.n, args.dtype).items():
        one = case.pop("_one_thread", False)
        value = case.pop("_value", None)
        numba.set_num_threads(1 if one else threads)
        numexpr.set_num_threads(1 if one else threads)
        results = {}
        for label, fn in case.items():
            r = fn()
            results[label] = np.array(r if r is not None else value(), copy=True)
        for label, r in results.items():
            rtol = 1e-12 if args.dtype == "float64" else 1e-6
            if not np.allclose(r, results["numpy"], rtol=rtol, atol=0):
                raise SystemExit(f"{name}: {label} differs from NumPy")
        for fn in case.values():  # compile, choose variants, touch the pages
            for _ in range(20):
                fn()
        measured = dict(zip(case, measure_interleaved(list(case.values()), min_time=0.1,
                                                      repeats=args.rounds), strict=True))
        base = measured["numpy"].median
        cells = ", ".join(f"{label} {m.median * 1e3:.2f} ms ({base / m.median:.2f}x)"
                          for label, m in measured.items())
        print(f"{name} ({args.n} x {args.n} {args.dtype}): {cells}", flush=True)
    numba.set_num_threads(threads)
    numexpr.set_num_threads(threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
