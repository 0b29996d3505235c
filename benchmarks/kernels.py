"""chokepoint's kernels against NumPy, numexpr, torch and the bandwidth floor, in one process.

    python benchmarks/kernels.py [--quick] [--min-time SECONDS]

The same as ``chokepoint bench``; results and what was tried are in benchmarks/RESULTS.md.
"""

import sys

from chokepoint.bench import main

if __name__ == "__main__":
    sys.exit(main())
