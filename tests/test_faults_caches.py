"""Damaged, shared, half-written and unwritable caches (issue 32, items 4-10): the tuning, the
roofline, the C extension and numba's cache in a temporary cache directory (XDG_CACHE_HOME,
NUMBA_CACHE_DIR), never the user's."""

import contextlib
import errno
import fcntl
import importlib
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import chokepoint
from chokepoint.cli import main
from chokepoint.kernels import engine_numba, native, tuning
from chokepoint.measure.load import Load
from chokepoint.measure.roofline import roofline

roofline_module = importlib.import_module("chokepoint.measure.roofline")


@pytest.fixture
def caches(tmp_path, monkeypatch, launch_settings):
    """An empty cache directory; the tuning and the engine's choices restored afterwards."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(tuning, "_memo", None)
    monkeypatch.setattr(roofline_module, "_memo", None)
    return tmp_path / "cache" / "chokepoint"


def _fake_timings(monkeypatch):
    """tune() with made-up timings: nothing is timed."""
    monkeypatch.setattr(tuning, "_pair", lambda a, b, min_time: (1.0, 1.0))
    monkeypatch.setattr(tuning, "_STREAM_N", 4096)


def _full_disk(monkeypatch):
    def replace(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", replace)


def _measured(monkeypatch, roof, load=None):
    """roofline() "measures" ``roof`` at once, under ``load`` (a quiet machine by default: the
    tests' own machine may be busy); the calls made."""
    calls = []

    @contextlib.contextmanager
    def watch():
        class Watch:
            load = None

        yield Watch
        Watch.load = load

    monkeypatch.setattr(roofline_module, "watch", watch, raising=False)
    monkeypatch.setattr(roofline_module, "measure_roofline", lambda **kw: calls.append(1) or roof)
    return calls


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
    tuning.tune(engine_numba)
    assert not tuning.cache_path().exists()
    assert list(caches.iterdir()) == []


# the roofline cache (items 5, 6 and 10)


@pytest.mark.parametrize("damage", [[], None, 42, {"read_bw": 0}, {"read_bw": None},
                                    {"read_bw": float("nan")}, {"gemm": None},
                                    {"gemm_1t": {}}, {"machine": 3}])
def test_a_damaged_roofline_cache_is_measured_again(cached_roof, monkeypatch, damage):
    path = roofline_module.cache_path()
    data = {**cached_roof.to_dict(), **damage} if isinstance(damage, dict) else damage
    path.write_text(json.dumps(data))
    measured = _measured(monkeypatch, cached_roof)
    with pytest.warns(RuntimeWarning, match="roofline cache .* damaged"):
        assert roofline() == cached_roof
    assert measured == [1]
    assert json.loads(path.read_text()) == cached_roof.to_dict()  # repaired


def test_roofline_command_after_a_cache_that_is_no_object(cached_roof, monkeypatch, capsys):
    roofline_module.cache_path().write_text("[]")
    _measured(monkeypatch, cached_roof)
    with pytest.warns(RuntimeWarning, match="damaged"):
        assert main(["roofline"]) == 0
    assert "20.0 GB/s" in capsys.readouterr().out


def test_one_process_measures_the_roofline_while_another_waits(cached_roof, monkeypatch):
    roofline_module.cache_path().unlink()
    first, second, release = threading.Event(), threading.Event(), threading.Event()
    calls = []

    def measure(**kwargs):
        calls.append(1)
        (second if len(calls) > 1 else first).set()
        release.wait(5)
        return cached_roof

    _measured(monkeypatch, cached_roof)
    monkeypatch.setattr(roofline_module, "measure_roofline", measure)
    found = []
    threads = [threading.Thread(target=lambda: found.append(roofline())) for _ in range(2)]
    threads[0].start()
    assert first.wait(5)
    threads[1].start()  # the other "process": its own open of the lock file
    measured_twice = second.wait(1.0)  # a bounded wait: before the lock, it measured at once
    release.set()
    for thread in threads:
        thread.join(5)
    assert not measured_twice and calls == [1]
    assert found == [cached_roof, cached_roof]


def test_a_lock_held_too_long_means_measuring_without_writing(cached_roof, monkeypatch):
    path = roofline_module.cache_path()
    path.unlink()
    monkeypatch.setattr(roofline_module, "LOCK_WAIT", 0.1, raising=False)
    _measured(monkeypatch, cached_roof)
    with open(path.with_suffix(".lock"), "a") as other:  # another process measuring
        fcntl.flock(other, fcntl.LOCK_EX)
        assert roofline() == cached_roof
    assert not path.exists()  # its measurement is the one to cache


def test_a_roofline_measured_on_a_busy_machine_is_said(cached_roof, monkeypatch):
    # said, and cached all the same: on a machine that stays busy (a shared CI runner) not
    # caching it would cost every later process another measurement
    path = roofline_module.cache_path()
    path.unlink()
    assert hasattr(roofline_module, "watch")  # the load is watched while measuring
    _measured(monkeypatch, cached_roof, Load(seconds=10.0, cpus=2, own=2.0, others=1.8,
                                             steal=0.0))
    with pytest.warns(RuntimeWarning, match="other processes used 1.8 of 2 cores.*cached: run"):
        assert roofline() == cached_roof
    assert path.exists()


def test_a_full_disk_leaves_no_temporary_roofline_file(cached_roof, monkeypatch):
    path = roofline_module.cache_path()
    path.unlink()
    _measured(monkeypatch, cached_roof)
    _full_disk(monkeypatch)
    assert roofline() == cached_roof
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.endswith(".lock")) == []


# the C extension's build (item 10)


def test_a_killed_build_is_cleaned_up_by_the_next_process(tmp_path, monkeypatch):
    folder = tmp_path / "native"
    old, legacy, live = folder / "build-abc123", folder / "tmpk2j3_x", folder / "build-live"
    for build in (old, legacy, live):
        build.mkdir(parents=True)
        (build / "_native.o").write_bytes(b"\0" * 64)
    hour_ago = time.time() - 3600
    for build in (old, legacy):
        os.utime(build, (hour_ago, hour_ago))
    monkeypatch.setattr(native, "_cache_path", lambda source=None: folder / "_native-test.so")

    def no_compiler(target, source=None):
        raise OSError("no C compiler (test)")

    monkeypatch.setattr(native, "_compile", no_compiler)
    with pytest.raises(OSError, match="no C compiler"):
        native._built()
    left = sorted(p.name for p in folder.iterdir() if p.name != "build.lock")
    assert left == ["build-live"]  # a build under way


# the C extension (item 7)


def _native_status(env: dict) -> subprocess.CompletedProcess:
    """A new process's ``native.status()``, with the cache directory of ``env``."""
    code = "from chokepoint.kernels import native; print(native.status())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_truncated_c_extension_is_built_again(tmp_path):
    if native.disabled():
        pytest.skip("CHOKEPOINT_NATIVE=0")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = _native_status(env)
    if not first.stdout.startswith("on"):
        pytest.skip(f"no C path here: {first.stdout}{first.stderr}")
    [library] = (tmp_path / "cache" / "chokepoint" / "native").glob("_native-*.so")
    library.write_bytes(library.read_bytes()[:20000])  # head -c 20000: SIGBUS on loading it
    again = _native_status(env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.startswith("on"), again.stdout + again.stderr
    assert native.intact(library) and library.stat().st_size > 20000


def test_a_damaged_c_extension_that_cannot_be_built_is_never_loaded(tmp_path, monkeypatch):
    library = tmp_path / "native" / "_native-test.so"
    library.parent.mkdir()
    library.write_bytes(b"\x7fELF" + b"\0" * 100)
    (tmp_path / "native" / "_native-test.so.sha256").write_text("20000 0123")
    monkeypatch.setattr(native, "_cache_path", lambda source=None: library)

    def read_only(target, source=None):
        raise OSError("Read-only file system (test)")

    def never(path, name=None):
        raise AssertionError(f"{path} was loaded")

    monkeypatch.setattr(native, "_compile", read_only)
    monkeypatch.setattr(native, "_import", never)
    with pytest.warns(RuntimeWarning, match="C extension .* damaged .* Python path"):
        with pytest.raises(OSError, match="Read-only"):
            native._built()  # load() says why in status(), and every call takes Python


# numba's disk cache of the kernels (items 8 and 9)

#: a kernel (its C path's cfunc too), a fused function and the roofline's kernels, in a new
#: process; the prelude (``{prelude}``) runs first
_KERNELS = """{prelude}
import numpy as np
import chokepoint
from chokepoint.measure import roofline
x = np.linspace(-2, 2, 64, dtype=np.float32)
assert abs(chokepoint.gelu(x)[-1] - 1.9545) < 1e-3  # 2 Phi(2)
assert np.array_equal(chokepoint.fuse(lambda a, b: a * b + 1)(x, x), x * x + 1)
print("ok")
"""


def _run_kernels(env: dict, prelude: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _KERNELS.format(prelude=prelude)], env=env,
                          capture_output=True, text=True, timeout=120)


def _numba_env(root) -> dict:
    """A process's environment whose numba and chokepoint caches are under ``root``."""
    return {**os.environ, "NUMBA_CACHE_DIR": str(root / "numba"),
            "XDG_CACHE_HOME": str(root / "cache")}


@pytest.fixture(scope="module")
def warm_numba_cache(tmp_path_factory):
    """A numba cache (and a C extension) that a process filled with the kernels' code."""
    root = tmp_path_factory.mktemp("warm")
    done = _run_kernels(_numba_env(root))
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((root / "numba").rglob("*.nbc")), "numba cached nothing"
    return root


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_damaged_numba_cache_files_are_compiled_again(warm_numba_cache, tmp_path, suffix):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(warm_numba_cache, root)  # the damage is done on a copy
    damaged = list((root / "numba").rglob(f"*{suffix}"))
    for path in damaged:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    done = _run_kernels(_numba_env(root))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert done.stderr.count("damaged numba cache file") == 1, done.stderr[-2000:]
    again = _run_kernels(_numba_env(root))  # saved over the damaged files: loaded silently
    assert again.returncode == 0 and "damaged" not in again.stderr, again.stderr[-2000:]


#: numba's last place to cache in, the package's own __pycache__, made unwritable (root writes
#: to a directory whatever its mode)
_READ_ONLY_PACKAGE = """
import numba.core.caching as caching
def unwritable(self):
    raise PermissionError(13, "Read-only file system", self.get_cache_path())
caching.InTreeCacheLocator.ensure_cache_path = unwritable
"""


def test_a_read_only_install_and_home_compile_uncached(tmp_path):
    blocker = tmp_path / "a-file"  # no directory can be made under a file, root's neither
    blocker.write_text("")
    env = {**os.environ, "HOME": str(blocker / "home"), "XDG_CACHE_HOME": str(blocker / "cache"),
           "NUMBA_CACHE_DIR": str(blocker / "numba")}
    done = _run_kernels(env, _READ_ONLY_PACKAGE)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert done.stderr.count("no writable directory to cache") == 1, done.stderr[-2000:]


def test_a_kernel_whose_cache_cannot_be_written_runs_uncached(tmp_path, monkeypatch):
    import numba

    from chokepoint import jit

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setattr(jit, "_said", set())

    def full_disk(self, key, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(numba.core.caching.IndexDataCacheFile, "save", full_disk)

    def twice(a):
        return 2 * a

    with pytest.warns(RuntimeWarning, match="could not cache a kernel .*No space left"):
        assert jit.njit(twice)(21) == 42


def test_a_kernel_is_saved_to_numbas_cache_under_a_lock_on_its_index(tmp_path):
    # numba picks a saved kernel's data file from its index: two processes saving two
    # signatures of one kernel at once could leave one entry naming the other's code
    from types import SimpleNamespace

    from chokepoint.jit import _guarded_save

    cache = SimpleNamespace(cache_path=str(tmp_path), _impl=SimpleNamespace(filename_base="k"))
    held = []

    def save(sig, data):
        with open(tmp_path / "k.lock") as other:  # another process's attempt, in effect
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append(True)
            else:
                fcntl.flock(other, fcntl.LOCK_UN)
                held.append(False)

    _guarded_save(cache, save)(("float64",), b"")
    assert held == [True]
    with open(tmp_path / "k.lock") as after:  # released
        fcntl.flock(after, fcntl.LOCK_EX | fcntl.LOCK_NB)
