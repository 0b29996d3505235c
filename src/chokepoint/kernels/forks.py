"""``fork()`` in a process whose other threads are starting to use the kernels: the child works.

A child forked while another thread compiled a kernel (or loaded one from numba's disk cache), or
loaded the engine, inherited the lock of that work held by a thread it does not have, and hung
for ever on its first call: numba's compiler lock, the engine's load lock. Before a fork the
forking thread takes both, so that the fork waits for that work to end (a compile may take
seconds); after it the parent and the child give them back. The locks that guard work a child
can redo are replaced in the child instead (:mod:`.native`, :mod:`.engine_numba`,
:mod:`chokepoint.fuse.codegen`).
"""

from __future__ import annotations

import os

from numba.core.compiler_lock import global_compiler_lock

from . import backend

__all__: list[str] = []


def _before_fork() -> None:
    """Wait for another thread's engine load, then for its compile; hold both over the fork."""
    backend._lock.acquire()  # first: a thread loading the engine may compile while holding it
    global_compiler_lock.acquire()  # an RLock: the forking thread may be compiling itself


def _after_fork() -> None:
    """In the parent and in the child: give back what :func:`_before_fork` took."""
    global_compiler_lock.release()
    backend._lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork,
                        after_in_child=_after_fork)
