"""How long explain takes on the origin workload, phase by phase, in one process.

    python benchmarks/explain_time.py [--cols 10000]

Prints the wall time of ``chokepoint.explain("np.ceil(np.clip(X, 0, 1))")`` on
X = randn(3072, cols) and of its phases (setup, timing, tracing, probes, rewrite).
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cols", type=int, default=10000)
    args = parser.parse_args(argv)
    import warnings

    import chokepoint.explain.api as api
    from chokepoint.measure.roofline import roofline

    roofline()  # measured or loaded before the clock starts: it is cached per machine
    phases: dict[str, float] = {}

    def timed(name):
        original = getattr(api, name)

        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - start

        setattr(api, name, wrapper)

    for name in ("run_setup", "measure_counted", "_peak_extra", "trace", "build_model",
                 "probe_operations", "measured_rewrite", "derive_findings"):
        timed(name)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        e = api.explain("np.ceil(np.clip(X, 0, 1))", f"X = np.random.randn(3072, {args.cols})")
    total = time.perf_counter() - start
    print(f"explain on X = randn(3072, {args.cols}): {total:.2f} s "
          f"(the statement itself: {e.median_s * 1e3:.1f} ms)")
    for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"  {name.strip('_'):16} {seconds:6.2f} s")
    print(f"  {'other':16} {total - sum(phases.values()):6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
