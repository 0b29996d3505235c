"""What `chokepoint run`'s recording costs: each program run plain, under the C hook (the common
line event in C, `_linetrace.c`) and under the Python hook, alternating, in one process; the
ratios of medians to the plain run.

The issue's limits: within 1.3x where the array operations take 50 us or more each, within 3x
for a loop of tiny operations. Probing is not included (it comes after the program, with its
own budget, and is printed by `chokepoint run` itself).

    python benchmarks/run_overhead.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import textwrap
import time

from chokepoint.program.record import Recorder

PROGRAMS = {
    # array operations of 50 us and more: a training-like loop on (2000, 256) float32
    "large ops (matmul, tanh, 2000x256)": """
        import numpy as np
        rng = np.random.default_rng(0)
        X = rng.standard_normal((2000, 256), dtype=np.float32)
        W = rng.standard_normal((256, 256), dtype=np.float32) * 0.05
        for step in range(30):
            H = np.tanh(X @ W)
            G = H * (1 - H * H)
            W -= 1e-4 * (X.T @ G)
        """,
    "stencil (1000x1000, 20 steps)": """
        import numpy as np
        u = np.zeros((1000, 1000)); u[500, 500] = 1.0
        for _ in range(20):
            lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
            u[1:-1, 1:-1] += 0.1 * lap
        """,
    # a loop of tiny operations: 20,000 iterations of calls on 4 elements
    "tiny ops (20,000 iterations)": """
        import numpy as np
        x = np.random.default_rng(0).random((20000, 4))
        y = np.empty(20000)
        for i in range(20000):
            row = x[i]
            y[i] = np.sqrt(row @ row) + row.max()
        """,
    # NumPy's own Python functions in a loop (np.linalg.solve runs about 20 library
    # functions and 90 of their lines a call): their line events, or none since their lines
    # are turned off in the C hook
    "library functions (np.linalg, np.median; 5,000)": """
        import numpy as np
        S, v, w = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([1.0, 2.0]), np.arange(32.0)
        total = 0.0
        for i in range(5000):
            total += np.linalg.solve(S, v)[0] + np.log(np.linalg.det(S)) + np.median(w)
        """,
    # pure Python: the hook's own cost per line event, with nothing to hide it (200,000
    # iterations of three trivial lines), at module level and in a function (where a Python
    # hook's trampoline also copies the locals to a dict and back at every event)
    "pure Python (200,000 iterations)": """
        s = 0
        for i in range(200000):
            if (i + 3) % 13 == 0 or i % 7 == 0:
                s += 1
        """,
    "pure Python in a function": """
        def count(n):
            a = b = c = d = 0
            s = 0
            for i in range(n):
                if (i + 3) % 13 == 0 or i % 7 == 0:
                    s += 1
            return s + a + b + c + d
        count(200000)
        """,
    # a small function of the user's called in a loop (each call a frame to trace)
    "user function calls (200,000)": """
        def area(w, h):
            return w * h
        total = 0
        for i in range(200000):
            total += area(i, 3)
        """,
    # element indexing of a small matrix in a triple loop (Floyd-Warshall, 60 nodes)
    "element loop (Floyd-Warshall, 60)": """
        import numpy as np
        def floyd(path):
            n = path.shape[0]
            for k in range(n):
                for i in range(n):
                    for j in range(n):
                        path[i, j] = min(path[i, j], path[i, k] + path[k, j])
        floyd(np.random.default_rng(0).integers(1, 100, (60, 60)).astype(np.float64))
        """,
}


def _run(code, hook: str) -> float:
    """Seconds of one run of ``code``: ``hook`` "plain" (no hook), "C" or "Python"."""
    scope = {"__name__": "__main__"}
    recorder = None if hook == "plain" else Recorder(compiled=hook == "C")
    start = time.perf_counter()
    if recorder is not None:
        recorder.start()
    try:
        exec(code, scope)
    finally:
        if recorder is not None:
            recorder.stop()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in PROGRAMS.items():
            path = os.path.join(tmp, "prog.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent(source))
            # a real file, so that the hook sees the program as the user's code
            code = compile(open(path).read(), path, "exec")
            _run(code, "plain")  # warm-up: imports, first touches
            hooks = ["plain", "C", "Python"] if Recorder().compiled else ["plain", "Python"]
            times: dict[str, list[float]] = {h: [] for h in hooks}
            for r in range(args.rounds):
                for hook in (hooks if r % 2 == 0 else hooks[::-1]):
                    times[hook].append(_run(code, hook))
            p = statistics.median(times["plain"])
            cells = "  ".join(f"{h} hook {statistics.median(times[h]) * 1e3:7.1f} ms "
                              f"({statistics.median(times[h]) / p:5.2f}x)" for h in hooks[1:])
            print(f"{name:<36} plain {p * 1e3:7.1f} ms  {cells}")

if __name__ == "__main__":
    main()
