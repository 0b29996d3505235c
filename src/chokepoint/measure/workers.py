"""Process isolation for races (``race(..., processes=N)``, ``--processes N``), pyperf's model.

Each candidate's setup and timing run in a fresh Python process, one process at a time, and
the race goes round-robin over processes: worker 1 of A, worker 1 of B, ..., worker 2 of A,
... so that drift still hits all candidates alike, and each candidate's repeats come from N
processes whose memory layout, allocator state and page placement differ: what in-process
timing cannot average out (two arrays alike in every value can differ in speed by where they
lie).

A worker is ``python -m chokepoint.measure.workers IN OUT``: it reads its task (pickled) from
the file IN and writes its result to OUT; nothing goes through its stdout, which the user's
code may print to. It is started with :mod:`subprocess`, not :mod:`multiprocessing`, so it
never re-imports the caller's ``__main__``: races with processes work from scripts without an
``if __name__ == "__main__"`` guard, from IPython and from Jupyter (the pitfall of pyperf,
its issue #145). The price is what has to cross: statements and setups as text; a callable
candidate or setup, and the user's variables the code names, by pickle (modules by name).

A worker never outlives the race: SIGTERM (``timeout``, batch schedulers) while a worker runs
is raised as ``SystemExit(143)``, so the stack unwinds, the worker is killed and its folder
(the task and result pickles, the user's variables) removed, and the process exits with 143
(128 + SIGTERM) as it would have. Any other exception (Ctrl-C included) does the same.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Iterator
from pathlib import Path

__all__ = ["WorkerError", "run_in_worker", "sendable_namespace", "work"]


class WorkerError(RuntimeError):
    """A worker process could not be started, or died without a result."""


def sendable_namespace(base: dict | None, names: set[str]) -> dict:
    """The entries of ``base`` that ``names`` mention, ready to pickle: modules become
    ``("module", name)`` markers, re-imported in the worker.

    Raises
    ------
    TypeError
        When a named value cannot be pickled, naming it.
    """
    sent = {}
    for name, value in (base or {}).items():
        if name not in names:
            continue
        if isinstance(value, types.ModuleType):
            sent[name] = _Module(value.__name__)
            continue
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise TypeError(
                f"cannot send your variable {name!r} ({type(value).__name__}) to a worker "
                f"process: {exc}; make it in the setup (-s), or race in-process") from None
        sent[name] = value
    return sent


class _Module:
    """A module, sent by name."""

    def __init__(self, name: str):
        self.name = name


def _receive_namespace(sent: dict) -> dict:
    import importlib

    return {k: importlib.import_module(v.name) if isinstance(v, _Module) else v
            for k, v in sent.items()}


def _environment() -> dict:
    """The worker's environment: this one, with this process's import path, so that the
    worker imports the same chokepoint and the user's modules (callables are pickled by
    reference)."""
    paths = [p for p in sys.path if p and Path(p).is_dir()]
    if "" in sys.path or not sys.path:
        paths.insert(0, os.getcwd())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """While the block runs, SIGTERM raises ``SystemExit(143)`` instead of ending the process
    outright, so that what the block holds is released on the way out (the worker killed, its
    folder removed). Only where SIGTERM has its default action and in the main thread (where
    Python runs signal handlers); a handler of the user's is left alone."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def terminate(signum: int, frame) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_in_worker(task: dict, *, timeout: float | None = None) -> dict:
    """Run ``task`` (see :func:`work`) in a fresh Python process and return its result.

    What the worker prints goes to this process's stderr. However this call ends (a
    result, an exception, Ctrl-C, SIGTERM), the worker is gone and its folder removed.

    Raises
    ------
    WorkerError
        When the worker dies (a crash, a signal) or writes no result.
    TypeError
        When the task cannot be pickled.
    """
    # subprocess.run kills the worker on any exception, before the folder is removed
    with _sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="chokepoint-worker-") as folder:
        inbox, outbox = Path(folder) / "task.pickle", Path(folder) / "result.pickle"
        try:
            inbox.write_bytes(pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise TypeError(f"cannot send this candidate to a worker process: {exc} (a "
                            "callable must be importable: defined in a module, not in "
                            "__main__ or a notebook cell; or race in-process)") from None
        proc = subprocess.run(
            [sys.executable, "-m", "chokepoint.measure.workers", str(inbox), str(outbox)],
            capture_output=True, text=True, env=_environment(), timeout=timeout,
            check=False)
        printed = (proc.stdout or "") + (proc.stderr or "")
        if printed.strip():
            print(printed, end="" if printed.endswith("\n") else "\n", file=sys.stderr)
        if not outbox.exists():
            tail = printed.strip().splitlines()[-1:] or ["no output"]
            raise WorkerError(f"the worker process exited with code {proc.returncode} "
                              f"without a result ({tail[0]})")
        return pickle.loads(outbox.read_bytes())


def work(task: dict) -> dict:
    """In the worker: set the candidate up, check it, time it (the calibration's repeat
    dropped, as in-process races do); returns the candidate's result so far (a pickled
    CandidateResult: its structured fields, ``writes``, ``mutates``, ``copies``, ``cache_hot``
    ..., go back with it; the parent keeps the first worker's and merges the repeats), its
    repeats, loops, and its value when the task asks for it."""
    from .candidates import make_copies, prepare
    from .timer import measure

    base = _receive_namespace(task["base"])
    result, value, timed = prepare(task["candidate"], task["setup"], task["n"], base,
                                    rotate=task["rotate"], cache_bytes=task["cache_bytes"])
    (failed,) = make_copies([timed])
    if failed is not None:
        raise failed
    m = measure(timed, min_time=task["min_time"], repeats=task["repeats"] + 1, warmup=False)
    return {"result": result, "times": m.times[1:], "loops": m.loops,
            "value": value if task["want_value"] else None}


def main(argv: list[str]) -> int:
    inbox, outbox = argv
    # run as python -m, this file is __main__; the task's pickles name the real module
    from chokepoint.measure import workers

    try:
        task = pickle.loads(Path(inbox).read_bytes())
        answer = workers.work(task)
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # the candidate's failure, reported, not a crash
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        data = pickle.dumps({"error": f"its value cannot be sent back from the worker: {exc}"})
    Path(outbox).write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
