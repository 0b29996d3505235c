"""Facts about this machine that the measurements and the kernels depend on: what identifies
it (:func:`machine_info`, the key of the roofline's and the tuning's caches) and the size of its
last-level cache (:func:`last_level_cache_bytes`: where a race rotates copies of its inputs and
where the kernels may stream their output).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

__all__ = ["last_level_cache_bytes", "machine_info"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    """What identifies this machine: the key of the roofline's and the tuning's caches."""
    import numba  # here, not at import: see chokepoint.program.api

    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "threads": numba.get_num_threads(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "python": platform.python_version(),
        "system": platform.system(),
    }


def last_level_cache_bytes() -> int:
    """Size of the last-level cache, within 8-64 MiB.

    Virtual machines often report the host's whole L3 (480 MB on ours, where a 246 MB array
    still streams at DRAM speed), so the sysfs value is capped; some report no L3 at all, and
    the largest cache left (an L2 of 1-2 MiB) would put many mid-size calls past it (the
    kernels stream beyond it: ``engine_numba.settings.stream_min_bytes``), so it is floored; 32 MiB
    when unknown.
    """
    path = Path("/sys/devices/system/cpu/cpu0/cache")
    sizes = []
    for index in path.glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
        except (OSError, ValueError):
            continue
    return min(max(max(sizes), 8 * 2**20), 64 * 2**20) if sizes else 32 * 2**20
