"""Writing the cache files (the roofline, the tuning) safely: whole or not at all, one at a time.

A cache file is written under a temporary name beside it and renamed over it, so that a reader
sees the old file or the new one, never part of one; the temporary is removed when the write
fails (a full disk, a read-only directory) or is interrupted, so that no failed run leaves one
behind. A measurement that another process may be making at the same moment takes a lock first
(:func:`locked`): two processes measuring the machine at once each measured it 2.4-4.5x slower
than it is, and cached that.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["POLL_SECONDS", "locked", "write_atomic"]

#: how often a process waiting for a lock tries it again
POLL_SECONDS = 0.05


def write_atomic(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` through a temporary file renamed over it.

    Parameters
    ----------
    path : Path
        The file; its directory is created.
    text : str
        Its new content.

    Returns
    -------
    bool
        Whether it was written. Not when the disk is full or the directory read-only (then the
        temporary file is removed and ``path`` left as it was).
    """
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    written = False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        os.replace(tmp, path)
        written = True
    except OSError:
        pass
    finally:
        if not written:  # failed, or interrupted (KeyboardInterrupt): no temporary left
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
    return written


def _try_lock(handle) -> bool:
    """Take the exclusive lock of an open file without waiting; whether it is held."""
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(handle) -> None:
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        pass


def _waited_for(handle, wait: float) -> bool:
    """Try the lock until ``wait`` seconds have passed; whether it is held."""
    deadline = time.monotonic() + wait
    while not _try_lock(handle):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True


@contextlib.contextmanager
def locked(path: Path, wait: float) -> Iterator[bool]:
    """Hold the exclusive lock of the lock file ``path`` (``fcntl.flock``) over a block.

    Another process (or another open of the file in this one) that holds it is waited for, up to
    ``wait`` seconds. The lock file is created and left in place (removing it would let two
    processes lock two different files); the lock ends with the block (unlocked explicitly, so
    that a child forked inside it does not keep it), or with the process.

    Parameters
    ----------
    path : Path
        The lock file, beside the file it guards.
    wait : float
        Most seconds to wait for another holder.

    Yields
    ------
    bool
        True when the lock is held, or cannot be taken here at all (no ``fcntl``, a lock file
        that cannot be created: then there is no one to wait for, and a write fails or not by
        itself); False when another holder kept it for ``wait`` seconds: then the block should
        not write what the lock guards.
    """
    try:
        import fcntl  # noqa: F401  (not on Windows)

        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")
    except (ImportError, OSError):
        yield True
        return
    with handle:
        try:
            held = _waited_for(handle, wait)
        except OSError:  # a file system without locks (ENOLCK): no one to wait for
            held = True
        try:
            yield held
        finally:
            # unlocked, not only closed: a child forked inside the block keeps a copy of this
            # descriptor, which would hold the lock for ever (the child then waited for it)
            _unlock(handle)
