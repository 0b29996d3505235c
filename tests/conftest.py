"""Shared fixtures."""

import dataclasses
import importlib
import os

# fuse's kernels, not NumPy's ufuncs on blocks, unless a test asks (tests/fuse/test_blocks.py):
# the kernels' tests then test the kernels on every machine, and no test measures functions
os.environ.setdefault("CHOKEPOINT_FUSE_NUMPY", "never")

import pytest

from chokepoint.measure.machine import machine_info
from chokepoint.measure.roofline import Roofline

roofline_module = importlib.import_module("chokepoint.measure.roofline")

#: the environment as the session began (after the setting above)
_ENVIRON = dict(os.environ)


@pytest.fixture
def launch_settings():
    """``engine_numba.configure`` for one test: its settings (the C path's too) restored
    after it."""
    from chokepoint.kernels import engine_numba

    was = engine_numba.settings
    yield engine_numba.configure
    engine_numba.configure(**dataclasses.asdict(was))


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test leaves the environment as it found it. dask.distributed's cluster sets
    ``MALLOC_TRIM_THRESHOLD_=65536`` and ``OMP/OPENBLAS/MKL_NUM_THREADS=1`` in the test process's
    own environment: every later subprocess inherited them (glibc's thresholds fixed, so a
    program's fresh memory behaved as in no user's run, and BLAS on one thread)."""
    yield
    for key in set(os.environ) - set(_ENVIRON):
        if not key.startswith("PYTEST_"):  # pytest's own, which it removes itself
            del os.environ[key]
    for key, value in _ENVIRON.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def small_roof() -> Roofline:
    """A fixed roofline, so that tests do not spend 10 s measuring the machine."""
    return Roofline(read_bw=20e9, write_bw=10e9, copy_bw=15e9, triad_bw=15e9,
                    read_bw_1t=10e9, write_bw_1t=5e9, copy_bw_1t=8e9, triad_bw_1t=8e9,
                    flops=20e9, flops_1t=10e9, gemm={"float32": 100e9, "float64": 50e9},
                    gemm_1t={"float32": 50e9, "float64": 25e9}, machine=machine_info(),
                    measured_at="2026-12-02T00:00:00", seconds=0.0)


@pytest.fixture
def roof():
    return small_roof()


@pytest.fixture
def cached_roof(monkeypatch, tmp_path):
    """roofline() answers from a cache file in a temporary cache directory (also for
    subprocesses, through XDG_CACHE_HOME)."""
    import json

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(roofline_module, "_memo", None)
    roof = small_roof()
    path = roofline_module.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(roof.to_dict()))
    return roof
