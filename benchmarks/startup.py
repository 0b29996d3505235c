"""Import + first call of chokepoint in a new process, with a cold and a warm numba cache.

    python benchmarks/startup.py

Each measurement is a fresh interpreter (``python -c``) timing ``import chokepoint`` and then
the first ``relu_grad``, ``relu``, ``relu_backward`` and ``relu_with_mask`` calls on a 1M
element array (large enough for the parallel kernels). The cold run uses an empty
NUMBA_CACHE_DIR, so it compiles; the warm runs load the machine code that run cached.
"""

import json
import os
import subprocess
import sys
import tempfile

SCRIPT = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
import chokepoint
t1 = time.perf_counter()
x = np.random.default_rng(0).standard_normal(1 << 20)
first = {}
for name, call in [("relu_grad", lambda: chokepoint.relu_grad(x)),
                   ("relu", lambda: chokepoint.relu(x)),
                   ("relu_backward", lambda: chokepoint.relu_backward(x, x)),
                   ("relu_with_mask", lambda: chokepoint.relu_with_mask(x))]:
    s = time.perf_counter(); call(); first[name] = time.perf_counter() - s
print(json.dumps({"import": t1 - t0, "first_calls": first}))
"""


def run(env):
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("cold cache", "warm cache", "warm cache"):
            r = run(env)
            calls = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in r["first_calls"].items())
            total = r["import"] + sum(r["first_calls"].values())
            print(f"{label:11} import {r['import'] * 1e3:4.0f} ms; first calls: {calls}; "
                  f"total {total:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
