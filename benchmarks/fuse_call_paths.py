"""Two call paths of ``chokepoint.fuse`` against NumPy, rounds alternating in one process:

- a NumPy scalar argument (``w[i]``, an ``np.float64``) beside arrays, against the same value
  as a Python float (the lattice Boltzmann line ``rho * w[i] * (1 + cu + 0.5 * cu ** 2 - 1.5 *
  usq)`` on 80 x 200 float64, into ``out=``);
- a transcendental chain computed into one of its own inputs (``a + np.exp(-b) * c`` into
  ``a``), against the same into another array, and NumPy's ``np.add(a, np.exp(-b) * c,
  out=a)``.

    python benchmarks/fuse_call_paths.py [--rounds 7]

Prints each case's median time per call.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import chokepoint


def _per_call(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def _race(cases: dict, rounds: int, calls: int) -> dict[str, float]:
    for fn in cases.values():  # compiled, loaded, the chooser settled
        for _ in range(20):
            fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            times[name].append(_per_call(fn, calls))
    return {name: statistics.median(t) for name, t in times.items()}


def scalar_argument(rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    rho, cu, usq = (rng.random((80, 200)) for _ in range(3))
    w = np.arange(9.0) / 9
    feq = np.zeros((9, 80, 200))
    f = chokepoint.fuse("rho * w_0 * (1 + cu + 0.5 * cu ** 2 - 1.5 * usq)")
    return _race({
        "numpy": lambda: np.multiply(rho * w[3], 1 + cu + 0.5 * cu ** 2 - 1.5 * usq,
                                     out=feq[3]),
        "fuse, np.float64 argument": lambda: f(rho=rho, w_0=w[3], cu=cu, usq=usq, out=feq[3]),
        "fuse, float argument": lambda: f(rho=rho, w_0=float(w[3]), cu=cu, usq=usq,
                                          out=feq[3]),
    }, rounds, 500)


def into_an_input(n: int, rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    a, b, c = rng.random(n), rng.random(n), rng.random(n)
    other = np.empty(n)
    f = chokepoint.fuse("a + np.exp(-b) * c")
    return _race({
        "numpy into a": lambda: np.add(a, np.exp(-b) * c, out=a),
        "fuse into a": lambda: f(a=a, b=b, c=c, out=a),
        "fuse into another array": lambda: f(a=a, b=b, c=c, out=other),
    }, rounds, max(1, 200_000 // n * 5))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    for title, found in [("NumPy scalar argument, 80 x 200 float64", scalar_argument(args.rounds)),
                         ("into an input, 1e5 float64", into_an_input(10**5, args.rounds)),
                         ("into an input, 1e7 float64", into_an_input(10**7, args.rounds))]:
        print(title)
        for name, seconds in found.items():
            print(f"  {name:28s} {seconds * 1e6:10.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
