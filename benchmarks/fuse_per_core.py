"""fuse per core against NumPy, function by function (issue 33), in one process.

    flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/fuse_per_core.py
        [--n 2000000] [--threads 1] [--rounds 5] [--only TEXT]

Each of fuse's transcendental functions and issue 33's two chains, float32 and float64, on
``n`` elements in [0.01, 0.99] (``arccosh`` on [1.01, 1.99]), with ``--threads`` threads for
numba and for fuse's NumPy blocks (NumPy itself is single-threaded). Three candidates, timed by
``measure_interleaved`` in rounds alternating their order: NumPy, fuse with its kernel always
(``costs.POLICY = "never"``, what fuse did before the choice) and fuse as it chooses
(``"auto"``: the kernel, or NumPy's ufuncs on blocks where this machine's measured figures say
they are faster). Printed: NumPy's time over each fuse's (below 1.0x: slower than NumPy), and
which way "auto" went.
"""

from __future__ import annotations

import argparse
import sys

import numba
import numpy as np

import chokepoint
from chokepoint.fuse import costs
from chokepoint.measure.timer import measure_interleaved

UNARY = ["exp", "expm1", "log", "log1p", "log2", "log10", "exp2", "cbrt", "sin", "cos", "tan",
         "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
         "arctanh"]
BINARY = ["arctan2", "hypot", "power"]
CHAINS = ["np.exp(a) + np.tan(b) - np.sinh(c)", "np.sin(a) + np.log(b) * np.sqrt(c)"]


def _fused(code: str, policy: str, values: dict, out: np.ndarray):
    costs.POLICY = policy
    f = chokepoint.fuse(code)
    f(**values, out=out)  # its plan's choice is made on this first call
    plan = f.plan({n: v.dtype for n, v in values.items()})
    costs.POLICY = "auto"
    return (lambda: f(**values, out=out)), plan.on_blocks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", help="cases whose code contains this text")
    args = parser.parse_args(argv)
    numba.set_num_threads(args.threads)
    cases = [f"np.{f}(a)" for f in UNARY] + [f"np.{f}(a, b)" for f in BINARY] + CHAINS
    cases = [c for c in cases if args.only in c]
    print(f"n={args.n}, {args.threads} thread(s); NumPy's time over fuse's", flush=True)
    for dtype in ("float32", "float64"):
        rng = np.random.default_rng(0)
        base = {k: (0.01 + 0.98 * rng.random(args.n)).astype(dtype) for k in "abc"}
        out = np.empty(args.n, dtype)
        for code in cases:
            values = {k: v for k, v in base.items() if f"{k})" in code or f"{k}," in code}
            if "arccosh" in code:
                values = {k: v + np.asarray(1, dtype) for k, v in values.items()}
            with np.errstate(all="ignore"):
                candidates = {"numpy": lambda c=code, v=values: eval(c, {"np": np, **v})}
                candidates["kernel"], _ = _fused(code, "never", values, out)
                candidates["auto"], on_blocks = _fused(code, "auto", values, out)
                measured = dict(zip(candidates, measure_interleaved(
                    list(candidates.values()), min_time=0.05, repeats=args.rounds),
                    strict=True))
            numpy_s = measured["numpy"].median
            ratio = {k: numpy_s / m.median for k, m in measured.items()}
            print(f"{code:<40} {dtype}: numpy {numpy_s * 1e3:7.2f} ms, kernel "
                  f"{ratio['kernel']:5.2f}x, auto {ratio['auto']:5.2f}x "
                  f"({'NumPy blocks' if on_blocks else 'kernel'})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
