"""relu_backward on dask arrays three times the origin size, on a 2-worker local cluster.

    python benchmarks/dask_relu_backward.py [--rows 9216] [--repeats 5]

G and X are (9216, 10000) float64 (737 MB each), generated and persisted on the workers in
(1024, 10000) chunks. Each candidate's result is persisted and waited for, then dropped; the
median of the repeats is printed, with the ratio, in one process run. Workers run one thread
each and numba uses one thread per worker (NUMBA_NUM_THREADS=1), so both candidates get the
same two cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")  # inherited by the spawned workers


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=9216)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    import dask.array as da
    from dask.core import flatten
    from distributed import Client, LocalCluster, wait

    import chokepoint

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, memory_limit="10GiB") as cluster, \
            Client(cluster) as client:
        rng = da.random.default_rng(0)
        shape, chunks = (args.rows, 10000), (1024, 10000)
        X = rng.standard_normal(shape, chunks=chunks).persist()
        G = rng.standard_normal(shape, chunks=chunks).persist()
        wait([X, G])
        print(f"G, X: {shape} float64, {X.nbytes / 1e6:.0f} MB each, {X.numblocks} blocks; "
              f"2 workers x 1 thread")
        candidates = {
            "chokepoint.relu_backward(G, X)": lambda: chokepoint.relu_backward(G, X),
            "da.where(X > 0, G, 0)": lambda: da.where(X > 0, G, 0),
        }
        medians = {}
        for label, make in candidates.items():
            times = []
            for _ in range(args.repeats + 1):  # the first run warms the workers up
                lazy = make()
                keys = list(flatten(lazy.__dask_keys__()))
                start = time.perf_counter()
                result = lazy.persist()
                wait(result)
                times.append(time.perf_counter() - start)
                del result
                # the same graph has the same keys: wait until the cluster has dropped them,
                # or the next run would find the result still in memory
                deadline = time.monotonic() + 30
                while any(client.who_has(keys).values()) and time.monotonic() < deadline:
                    time.sleep(0.05)
            medians[label] = statistics.median(times[1:])
            print(f"  {label:<34} {medians[label] * 1e3:8.1f} ms  (runs: "
                  + ", ".join(f"{t * 1e3:.0f}" for t in times[1:]) + ")")
        check = client.compute((chokepoint.relu_backward(G, X) - da.where(X > 0, G, 0))
                               .__abs__().max(), sync=True)
        print(f"max |difference| = {check}")
        ours, theirs = medians.values()
        print(f"ratio: chokepoint {theirs / ours:.2f}x faster than da.where")
    return 0


if __name__ == "__main__":
    sys.exit(main())
