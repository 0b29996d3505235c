"""Every kernel x {float32, float64} x {1e3, 1e5, 2e6, 3e7} against NumPy, numexpr and torch.

    flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/matrix.py [--quick]

The same as ``chokepoint bench --matrix`` (see ``chokepoint.bench.matrix``); results and what was
tried are in benchmarks/RESULTS.md.
"""

import sys

from chokepoint.bench.matrix import main

if __name__ == "__main__":
    sys.exit(main())
