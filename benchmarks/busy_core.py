"""A busy core: a parallel kernel against the serial one while another process keeps a core busy.

Static partitioning (numba's default) hands each thread an equal share up front: when one core
is taken by another process, its thread finishes last and the whole call waits for it. Dynamic
scheduling (``numba.parallel_chunksize``) lets the free thread take the straggler's chunks.

Run: ``flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/busy_core.py``.
Prints, for relu and relu_backward on 3e7 float32 and float64 elements (into ``out=``), the
median per call of: serial, parallel (static), parallel with chunks of 2**16 and 2**18
elements, alternated in one process; first on an idle machine, then with one busy core.
Then the public ``chokepoint.relu(x, out=o)`` against the serial kernel alone and
``np.maximum(x, 0, out=o)`` on 1e5 and 2e6 float32 elements, idle and busy: there the kernels'
chooser (``kernels/adaptive.py``) must turn to the serial kernel by itself (a call no slower
than the serial kernel's), and each call is the fast path's (``api.call_fast``).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import statistics
import time

import numba
import numpy as np

from chokepoint.kernels import engine_numba

N = 30_000_000


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def _variants(name, args):
    serial = engine_numba.kernel_for(name, "serial")
    parallel = engine_numba.kernel_for(name, "parallel")

    def chunked(size):
        def run():
            with numba.parallel_chunksize(size):
                parallel(*args)
        return run

    return {"serial": lambda: serial(*args), "parallel static": lambda: parallel(*args),
            "parallel chunks 2**16": chunked(1 << 16), "parallel chunks 2**18": chunked(1 << 18)}


def _race(cases: dict, rounds: int = 7) -> dict:
    times = {k: [] for k in cases}
    for fn in cases.values():
        fn()
    for _ in range(rounds):
        for k, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal(N).astype(dtype)
        g = rng.standard_normal(N).astype(dtype)
        out = np.empty_like(x)
        zero = dtype(0)
        kernels = {"relu": ("relu", (x, out, zero)),
                   "relu_backward": ("relu_backward", (g, x, out, zero))}
        for label, busy in (("idle", False), ("one busy core", True)):
            with _load(busy):
                for kname, (name, args) in kernels.items():
                    result = _race(_variants(name, args))
                    serial = result["serial"]
                    cells = ", ".join(f"{k} {v * 1e3:.1f} ms ({serial / v:.2f}x serial)"
                                      for k, v in result.items())
                    print(f"{np.dtype(dtype).name:8} {kname:14} {label:14} {cells}", flush=True)


@contextlib.contextmanager
def _load(busy: bool):
    """Another process spinning on one core while the block runs (none when not ``busy``)."""
    if not busy:
        yield
        return
    stop = mp.Event()
    spinner = mp.Process(target=_spin, args=(stop,), daemon=True)
    spinner.start()
    time.sleep(0.5)
    try:
        yield
    finally:
        stop.set()
        spinner.join()


def _blocks(cases: dict, rounds: int = 15, seconds: float = 0.02) -> dict:
    """Per callable, the median over ``rounds`` of the mean call in a block of ``seconds``,
    the blocks alternated (as the benchmark matrix times its cells)."""
    means = {k: [] for k in cases}
    for fn in cases.values():
        for _ in range(50):
            fn()
    for _ in range(rounds):
        for k, fn in cases.items():
            calls, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                fn()
                calls += 1
            means[k].append((time.perf_counter() - start) / calls)
    return {k: statistics.median(v) for k, v in means.items()}


def public() -> None:
    import chokepoint

    rng = np.random.default_rng(1)
    for n in (100_000, 2_000_000):
        x = rng.standard_normal(n).astype(np.float32)
        out = np.empty_like(x)
        serial = engine_numba.kernel_for("relu", "serial")  # the same for every n
        cases = {"chokepoint.relu": lambda x=x, out=out: chokepoint.relu(x, out=out),
                 "serial kernel": lambda x=x, out=out, k=serial: k(x, out, np.float32(0)),
                 "np.maximum": lambda x=x, out=out: np.maximum(x, 0, out=out)}
        for label, busy in (("idle", False), ("one busy core", True)):
            with _load(busy):
                result = _blocks(cases)
            ours, serial_s, peer = (result[k] for k in cases)
            print(f"float32  {n:>9,} relu out=  {label:14} ours {ours * 1e6:7.1f} us, serial "
                  f"kernel {serial_s * 1e6:7.1f} us ({serial_s / ours:.2f}x), np.maximum "
                  f"{peer * 1e6:7.1f} us ({peer / ours:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
    public()
