"""``chokepoint run`` and ``chokepoint.profile()``: a whole program, run once, its lines ranked
by recoverable time, the causes of the top lines measured on their replays.

Running imports only the recorder: what analyses the run (:mod:`.summary`, explain, numba)
loads after the program ends, so that the program runs in the interpreter and heap it would
have alone (numba's import alone raised glibc's mmap threshold enough to halve the page faults
and the time of a program allocating 200 KB arrays). The design is in ``docs/run.md``.
"""

from __future__ import annotations

import functools
import os
import runpy
import sys
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from .heap import program_allocator
from .record import Recorder, user_file

if TYPE_CHECKING:
    from ..measure.roofline import Roofline
    from .summary import ProgramReport

__all__ = ["BUDGET_S", "profile", "run_program", "shown_path"]

#: probing stops starting new lines after this many seconds (``--budget``)
BUDGET_S = 30.0


def shown_path(filename: str) -> str:
    """A file name as the user would type it: relative to the working directory when inside
    it."""
    if filename.startswith("<"):
        return filename
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


def _exit_status(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_program(target: str, args: list[str] | None = None, *, module: bool = False,
                include: tuple[str, ...] = (), budget_s: float = BUDGET_S,
                capture_bytes: int | None = None, roof: Roofline | None = None,
                progress: Callable[[str], None] | None = None) -> ProgramReport:
    """Run a program once, as ``__main__`` with ``argv = [target, *args]``, and report where
    its time went.

    Parameters
    ----------
    target : str
        A script's path, or a module's name with ``module=True`` (``python -m``).
    args : list of str
        The program's arguments.
    include : tuple of str
        More paths whose code counts as the user's (site-packages and the standard library
        are left out otherwise).
    budget_s : float
        Seconds of probing after the run, at most (a line under way finishes).
    capture_bytes : int, optional
        The most bytes of arrays kept for the replays (default: a quarter of the memory
        available, at most 4 GiB).

    Returns
    -------
    ProgramReport
        Its ``exit_status`` is the program's (1 for an uncaught exception, whose traceback is
        in ``error``).
    """
    args = list(args or [])
    argv = [target, *args]
    if not module and not os.path.exists(target):
        raise FileNotFoundError(f"no such program: {target}")
    recorder = Recorder(include=tuple(include),
                        budget_bytes=capture_bytes or _default_capture_bytes())
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = argv
    if not module:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    else:
        sys.path.insert(0, os.getcwd())
    status, error, namespace, raised = 0, None, None, None
    start = time.perf_counter()
    recorder.start()
    try:
        if module:
            namespace = runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            namespace = runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        status, raised = _exit_status(exc), exc
    except KeyboardInterrupt as exc:
        status, error, raised = 130, "KeyboardInterrupt", exc
    except BaseException as exc:
        status, error, raised = 1, _program_traceback(exc), exc
    finally:
        recorder.stop()
        wall = time.perf_counter() - start
        # before the program's arrays are freed (its namespace, or the frames of the exception
        # that ended it: freeing them would move the thresholds again)
        recorder.allocator = program_allocator()
        del namespace, raised
        sys.argv, sys.path[:] = saved_argv, saved_path
    sys.stdout.flush()
    from .summary import analyse_program

    return analyse_program(recorder, program=target, argv=argv, exit_status=status, wall_s=wall,
                           roof=roof, budget_s=budget_s, error=error, progress=progress)


def _program_traceback(exc: BaseException) -> str:
    """The traceback as the program alone would have printed it: chokepoint's and runpy's
    frames left out."""
    tb = exc.__traceback__
    while tb is not None and not user_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _default_capture_bytes() -> int:
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        available = 4 * 2**30
    return int(min(4 * 2**30, available // 4))


class profile:
    """Profile a block or a function of a larger application, as ``chokepoint run`` does a
    program.

    ``with chokepoint.profile() as p: ...`` then ``p.report`` (a :class:`ProgramReport`); as a
    decorator, ``@chokepoint.profile()``, each call is profiled and its report printed. The
    text report goes to ``file`` (stderr) unless ``quiet``; ``json`` and ``html`` name files to
    write; ``name`` is what the report calls the block (the ``with``'s file and line by
    default).
    """

    def __init__(self, *, budget_s: float = BUDGET_S, include: tuple[str, ...] = (),
                 quiet: bool = False, json: str | None = None, html: str | None = None,
                 file=None, name: str | None = None):
        self.budget_s = budget_s
        self.include = include
        self.quiet = quiet
        self.json = json
        self.html = html
        self.file = file
        self.name = name  # what the report calls the block (default: the with's file:line)
        self.report: ProgramReport | None = None
        self._recorder: Recorder | None = None
        self._start = 0.0
        self._name = "<profile>"

    def __enter__(self) -> profile:
        frame = sys._getframe(1)
        self._name = self.name or f"{shown_path(frame.f_code.co_filename)}:{frame.f_lineno}"
        self._recorder = Recorder(include=self.include, budget_bytes=_default_capture_bytes())
        self._start = time.perf_counter()
        self._recorder.start()
        self._recorder.adopt(frame)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._recorder.stop()
        wall = time.perf_counter() - self._start
        self._recorder.allocator = program_allocator()
        error = "".join(traceback.format_exception(exc_type, exc, tb)) if exc_type else None
        from .summary import analyse_program

        self.report = analyse_program(self._recorder, program=self._name, argv=[],
                                      exit_status=1 if exc_type else 0, wall_s=wall,
                                      budget_s=self.budget_s, error=error)
        self._emit()

    def _emit(self) -> None:
        import json as _json

        if not self.quiet:
            print(self.report.text(), file=self.file or sys.stderr)
        if self.json:
            from ..report.program import json_ready

            with open(self.json, "w") as f:
                _json.dump(json_ready(self.report.to_dict()), f, indent=1, allow_nan=False)
        if self.html:
            with open(self.html, "w") as f:
                f.write(self.report.to_html())

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with profile(budget_s=self.budget_s, include=self.include, quiet=self.quiet,
                         json=self.json, html=self.html, file=self.file, name=self.name) as p:
                result = fn(*args, **kwargs)
            wrapper.report = p.report
            return result
        return wrapper
