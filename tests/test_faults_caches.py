"""Damaged, shared and half-written caches (issue 32, items 4, 5, 6, 10): the tuning and the
roofline in a temporary cache directory (XDG_CACHE_HOME), never the user's."""

import errno
import importlib
import json
import os

import numpy as np
import pytest

import chokepoint
from chokepoint.cli import main
from chokepoint.kernels import engine_numba, native, tuning

roofline_module = importlib.import_module("chokepoint.measure.roofline")


@pytest.fixture
def caches(tmp_path, monkeypatch):
    """An empty cache directory; the tuning and the engine's choices restored afterwards."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(tuning, "_memo", None)
    monkeypatch.setattr(roofline_module, "_memo", None)
    for name in ("PARALLEL_MIN", "_stream_maps", "_stream_masks"):
        monkeypatch.setattr(engine_numba, name, getattr(engine_numba, name))
    return tmp_path / "cache" / "chokepoint"


def _fake_timings(monkeypatch):
    """tune() with made-up timings: nothing is timed."""
    monkeypatch.setattr(tuning, "_pair", lambda a, b, min_time: (1.0, 1.0))
    monkeypatch.setattr(tuning, "_STREAM_N", 4096)


def _full_disk(monkeypatch):
    def replace(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", replace)


# the tuning cache (items 4 and 10)


@pytest.mark.parametrize("value", ['"abc"', "null", "1e400", "[1]", "true", "-3"])
def test_a_damaged_tuning_field_is_ignored_and_tune_repairs_it(caches, monkeypatch, capsys,
                                                                value):
    path = tuning.cache_path()
    path.parent.mkdir(parents=True)
    sound = tuning.Tuning(parallel_min=4096, stream_maps=False, measured_at="2026-01-01")
    path.write_text(json.dumps(sound.to_dict()).replace("4096", value))
    with pytest.warns(RuntimeWarning, match="tuning cache .* damaged .*parallel_min"):
        tuned = tuning.current()
    assert tuned.parallel_min == tuning.DEFAULT.parallel_min  # the damaged field's default
    assert (tuned.stream_maps, tuned.measured_at) == (False, "2026-01-01")  # the others kept
    engine_numba.apply_tuning(tuned)  # what importing the engine does
    x = np.linspace(-1, 1, 5000)
    assert np.array_equal(chokepoint.relu(x), np.maximum(x, 0))
    monkeypatch.setattr(native, "status", lambda: "not built here (a temporary cache)")
    assert main(["info"]) == 0
    assert f"{tuning.DEFAULT.parallel_min}" in capsys.readouterr().out
    _fake_timings(monkeypatch)
    assert main(["tune", "--json"]) == 0  # the repair
    assert json.loads(path.read_text())["parallel_min"] == tuning.DEFAULT.parallel_min


@pytest.mark.parametrize("text", ["[]", "null", "42", "{not json"])
def test_a_tuning_cache_that_is_no_object_means_the_defaults(caches, text):
    path = tuning.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.warns(RuntimeWarning, match="tuning cache .* damaged"):
        assert tuning.current() == tuning.DEFAULT


def test_a_full_disk_leaves_no_temporary_tuning_file(caches, monkeypatch):
    _fake_timings(monkeypatch)
    _full_disk(monkeypatch)
    tuning.tune()
    assert not tuning.cache_path().exists()
    assert list(caches.iterdir()) == []
