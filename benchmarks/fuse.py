"""chokepoint.fuse against NumPy and numexpr on numexpr's benchmark expressions, in one process.

    flock /tmp/chokepoint-bench.lock python benchmarks/fuse.py [--quick] [--n SIZE]

float32 and float64, 1e5 and 1e7 elements; runs alternate between the candidates, each time is
the median of the repeats. ``fuse`` allocates its result as NumPy and numexpr do; ``fuse out=``
writes into a preallocated array. The floor is inputs read once plus the result written once at
the faster of the read and triad bandwidths, measured at the start of the run. Results:
RESULTS.md, "Fusion".
"""

from __future__ import annotations

import statistics
import sys
import time

import numexpr
import numpy as np

import chokepoint
from chokepoint.kernels.adaptive import settle
from chokepoint.measure.roofline import measure_floor_bandwidth

EXPRESSIONS = [
    "a + b * c",
    "a**2 + b**2 - 2 * a * b * np.cos(c)",
    "np.sin(a) + np.log(b) * np.sqrt(c)",
    "np.exp(a) + np.tan(b) - np.sinh(c)",
    "np.where(0.1 * a > np.arctan2(a, b), 2 * a, np.arctan2(a, b))",
    "np.sqrt(a**2 + b**2)",
]


def _time(fn, min_time: float) -> float:
    fn()
    loops, t = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        t = time.perf_counter() - start
        if t >= min_time:
            return t / loops
        loops *= 2


def _ulps(ours: np.ndarray, ref: np.ndarray) -> float:
    """Largest difference from NumPy in units of the last place of NumPy's largest result
    (0: the same bits). Not per element: where a sum cancels (``sin(a) + log(b) * sqrt(c)``
    passes 0), a 1 ulp difference in a term is millions of ulp of a result near 0."""
    if np.array_equal(ours, ref, equal_nan=True):
        return 0.0
    diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
    return float(np.nanmax(diff) / np.spacing(np.nanmax(np.abs(ref))))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    sizes = [int(float(argv[argv.index("--n") + 1]))] if "--n" in argv else [10**5, 10**7]
    repeats = 3 if quick else 5
    min_time = 0.02 if quick else 0.05
    bw, said = measure_floor_bandwidth()
    print(f"numexpr {numexpr.__version__} ({numexpr.get_num_threads()} threads), "
          f"NumPy {np.__version__}; {said}")
    print(f"{'expression':<62} {'dtype':<8} {'n':>5} {'numpy':>9} {'numexpr':>9} {'fuse':>9} "
          f"{'fuse out=':>9} {'np/fuse':>7} {'ne/fuse':>7} {'/floor':>6} {'compile':>7} vs NumPy")
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        for n in sizes:
            a, b, c = (rng.uniform(0.1, 1.0, n).astype(dtype) for _ in range(3))
            env = {"a": a, "b": b, "c": c, "np": np}
            for expr in EXPRESSIONS:
                start = time.perf_counter()
                f = chokepoint.fuse(expr)
                args = {x: env[x] for x in f.__signature__.parameters if x != "out"}
                ours = f(**args)
                compile_s = time.perf_counter() - start
                ref = eval(expr, env)
                out = np.empty_like(ref)
                ne_expr = expr.replace("np.", "")
                ulps = _ulps(ours, ref)
                candidates = {
                    "numpy": lambda e=expr, g=env: eval(e, g),
                    "numexpr": lambda e=ne_expr, a=args: numexpr.evaluate(e, local_dict=a),
                    "fuse": lambda f=f, a=args: f(**a),
                    "fuse out=": lambda f=f, a=args, o=out: f(**a, out=o),
                }
                # ours through the chooser's exploration (kernels/adaptive.py); otherwise
                # its exploratory calls are timed
                settle(candidates["fuse"])
                settle(candidates["fuse out="])
                times = {k: [] for k in candidates}
                for _ in range(repeats):
                    for k, fn in candidates.items():
                        times[k].append(_time(fn, min_time))
                med = {k: statistics.median(v) for k, v in times.items()}
                nbytes = (len(args) + 1) * n * np.dtype(dtype).itemsize
                floor = nbytes / bw
                print(f"{expr:<62} {np.dtype(dtype).name:<8} {n:>5.0e} "
                      f"{med['numpy'] * 1e3:>7.3f}ms {med['numexpr'] * 1e3:>7.3f}ms "
                      f"{med['fuse'] * 1e3:>7.3f}ms {med['fuse out='] * 1e3:>7.3f}ms "
                      f"{med['numpy'] / med['fuse']:>6.2f}x {med['numexpr'] / med['fuse']:>6.2f}x "
                      f"{med['fuse out='] / floor:>6.2f} {compile_s:>6.2f}s "
                      f"{'same' if ulps == 0 else f'{ulps:.1f} ulp of max'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
