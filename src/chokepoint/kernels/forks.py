"""``fork()`` in a process whose other threads are starting to use the kernels: the child works.

A child forked while another thread compiled a kernel (or loaded one from numba's disk cache), or
loaded the engine, inherited the lock of that work held by a thread it does not have, and hung
for ever on its first call: numba's compiler lock, the engine's load lock. A child forked while
another thread built the C extension kept a copy of the write end of the pipe through which
``subprocess`` learns that the compiler started: the build then waited for that pipe's end of
file, holding the build's lock file, while the child waited for the lock (1 fork in 8 with a
core busy). Before a fork the forking thread takes all three (the build's first: a build
compiles and loads the engine inside it), so that the fork waits for that work to end (a
compile may take seconds); after it the parent and the child give them back. The locks that
guard work a child can redo are replaced in the child instead (:mod:`.native`,
:mod:`.engine_numba`, :mod:`chokepoint.fuse.codegen`).
"""

from __future__ import annotations

import logging  # noqa: F401 - imported before our hooks are registered: see below
import os
import sys

from . import backend, native

__all__: list[str] = []

_held: list = []  # the locks taken before a fork, in order (the child replaces the build's)


def _before_fork() -> None:
    """Wait for another thread's C build, engine load and compile; hold them over the fork."""
    # numba is imported on first use; until then nothing can hold its compiler lock (an RLock:
    # the forking thread may be compiling itself)
    compiler = getattr(sys.modules.get("numba.core.compiler_lock"), "global_compiler_lock", None)
    # the build first: a build loads the engine and compiles inside it; a thread loading the
    # engine may compile while holding it
    for lock in (native.build_lock, backend.engine_lock, compiler):
        if lock is not None:
            lock.acquire()
            _held.append(lock)  # only what was taken is given back


def _after_fork() -> None:
    """In the parent and in the child: give back what :func:`_before_fork` took."""
    while _held:
        _held.pop().release()


# Fork hooks run "before" in the reverse order of their registration, and logging's takes its
# lock: registered after ours (numba imports SciPy, which imports logging, on first use), a
# fork would hold logging's lock while waiting for a compile that needs it. Importing logging
# above registers its hook first, so that ours runs (and waits for the compile) first.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork,
                        after_in_child=_after_fork)
