"""Races with process isolation: each candidate set up and timed in fresh worker processes."""

import numpy as np
import pytest

from chokepoint.measure.race import race

FAST = {"min_time": 0.005, "repeats": 4}
ORIGIN = ["np.ceil(np.clip(X, 0, 1))", "(X >= 0).view('i1')"]


def doubled(X):
    """A module-level callable: pickled by reference, imported by the worker."""
    return X * 2


def test_processes_rank_the_origin_candidates_as_in_process(roof):
    setup = "X = np.random.randn(3072, 1000)"
    inside = race(ORIGIN, setup, roof=roof, min_time=0.01, repeats=6)
    isolated = race(ORIGIN, setup, roof=roof, min_time=0.01, repeats=6, processes=2)
    assert inside.mode == "in-process" and isolated.to_dict()["mode"] == "processes"
    for r in (inside, isolated):
        ref, fast = r.candidates
        assert fast.agrees is True  # the value came back from the worker and was compared
        assert fast.ratio_ci[1] < 0.8, (r.mode, fast.ratio, fast.ratio_ci)
        assert fast.median_s < ref.median_s
    for c in isolated.candidates:
        assert c.runs == 6  # 3 repeats in each of 2 processes
        assert c.workers == c.workers_planned == 2 and not c.interrupted
        assert "timed in 2 worker processes" in c.note


def test_failures_stay_with_their_candidate_in_processes(roof):
    def local(X):
        return X

    r = race(["X + 1", "1 / 0", "import os; os._exit(3)", local, doubled, "print('hi') or X"],
             "X = np.arange(4.0)", roof=roof, processes=1, **FAST)
    ok, zero, crash, unsendable, module_level, printing = r.candidates
    assert ok.median_s > 0 and ok.error is None
    assert zero.error.startswith("ZeroDivisionError")
    assert "exited with code 3" in crash.error
    assert "cannot send" in unsendable.error and "importable" in unsendable.error
    assert module_level.median_s > 0 and module_level.agrees is False
    assert printing.agrees is False and printing.error is None  # stdout is not the channel


def test_the_structured_fields_come_back_from_the_worker(roof):
    r = race(["X + 1", "np.add(X, 1, out=Y)", "X.fill(7)", "X + 2"],
             "X = np.arange(5.0); Y = np.empty(5)", roof=roof, processes=1, **FAST)
    _, into, fills, wrong = r.candidates
    assert into.writes == ["Y"] and into.agrees is True
    # compared by what it leaves in X
    assert fills.mutates == ["X"] and fills.mismatch["kind"] == "values"
    assert fills.mismatch["value"] == 7.0
    assert wrong.mismatch["first_index"] == [0] and wrong.mismatch["count"] == 5
    for c in r.candidates:
        assert c.cache_hot and c.cache_bytes > c.bytes > 0
        assert c.workers == c.workers_planned == 1 and c.runs_planned == FAST["repeats"]
    assert r.to_dict()["candidates"][1]["writes"] == ["Y"]


def test_user_variables_go_to_the_worker_and_unpicklable_ones_are_named(roof):
    user = {"A": np.arange(5.0), "lock": __import__("threading").Lock(), "np": np}
    r = race(["A * 2", "A + A", "lock.locked() or A", "np.multiply(A, 2)"], namespace=user,
             roof=roof, processes=1, **FAST)
    assert r.candidates[1].agrees is True
    assert "cannot send your variable 'lock'" in r.candidates[2].error
    assert r.candidates[3].agrees is True  # the module np went by name
    assert np.array_equal(user["A"], np.arange(5.0))


def test_processes_must_be_a_positive_integer(roof):
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="processes"):
            race(["1"], roof=roof, processes=bad)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, from /proc."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:  # it ended meanwhile
            continue
        # "pid (name) state ppid ...": the name may hold spaces and parentheses
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _poll(check, seconds: float):
    """``check()``'s first true answer within ``seconds``, else None."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(0.05)
    return None


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self"), reason="needs /proc")
def test_sigterm_kills_the_worker_removes_its_folder_and_exits_143(cached_roof, tmp_path):
    # issue 32.11: SIGTERM orphaned the worker (still timing) and left the pickles of the
    # user's variables in $TMPDIR
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    parent = subprocess.Popen(
        [sys.executable, "-m", "chokepoint", "race", "--processes", "1", "-s", "import time",
         "time.sleep(120)", "--min-time", "0.001", "--repeats", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        assert _poll(lambda: list(tmp_path.glob("chokepoint-worker-*/task.pickle")), 60)
        worker = _poll(lambda: _children(parent.pid), 60)
        assert worker, "the worker process did not start"
        (worker,) = worker
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 143
        assert not list(tmp_path.glob("chokepoint-worker-*"))
        assert _poll(lambda: not _alive(worker), 10), "the worker outlived it"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        if worker is not None and _alive(worker):
            os.kill(worker, signal.SIGKILL)
