"""The allocator a recorded program met, and the settings its replays are timed under.

glibc serves a large block with ``mmap`` (fresh pages, faulted in on first touch) when it is at
least the *mmap threshold*, and gives the top of its heap back to the system when more than the
*trim threshold* is free there. Both start at 128 KiB and rise as the program frees mmapped
blocks (to the freed block's size, at most 32 MiB; the trim threshold to twice that), so the
same statement pays page faults on every run in one process and none in another. A Jacobi step
on 160 x 160 arrays (200 KB temporaries) ran at 319 us and 114 faults a run under the
thresholds its program had reached (308 KB), and at 71 us with none under 32 MiB.

So the replays do not use the analysing process's own thresholds (its imports moved them):
:func:`program_allocator` reads the program's at its end, and :func:`as_in_program` sets them
for the statement as written; :func:`reused_memory` is the one change the fresh-memory probe
makes (freed memory kept and reused). Elsewhere than glibc none of this is available, and the
probe is not made.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["SETTLED", "Allocator", "as_in_program", "available", "faults", "fresh_memory",
           "program_allocator", "release_heap", "reused_memory"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
_DEFAULT_MMAP_MAX = 65536
#: glibc's thresholds: where the mmap threshold starts, and the most its dynamic rise reaches
#: on a 64-bit machine (DEFAULT_MMAP_THRESHOLD_MAX)
_START, _MOST = 128 * 2**10, 32 * 2**20
#: the sizes tried when reading the threshold grow by this factor (the reading is this close)
_STEP = 1.25
_IS_MMAPPED = 0x2  # in the size word before a block: glibc's chunk header
#: the most blocks a reading takes before it gives up (free chunks inside a fragmented heap)
_MOST_PROBES = 256


@dataclass(frozen=True)
class Allocator:
    """glibc's thresholds, in bytes: blocks of ``mmap_threshold`` or more are mapped fresh; more
    than ``trim_threshold`` free at the heap's top goes back to the system."""

    mmap_threshold: int
    trim_threshold: int

    def to_dict(self) -> dict:
        return {"mmap_threshold": self.mmap_threshold, "trim_threshold": self.trim_threshold}


class _MallInfo(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name, _ in _MallInfo._fields_]


def _libc():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - glibc's chunk layout is read below
        libc.mallopt  # noqa: B018
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    info = getattr(libc, "mallinfo2", None) or libc.mallinfo  # mallinfo2: glibc 2.33 on
    info.restype = _MallInfo2 if info is getattr(libc, "mallinfo2", None) else _MallInfo
    libc.heap_info = info
    return libc


_LIBC = _libc()
#: where a program freeing large arrays settles: for replays of a run whose reading is missing
SETTLED = Allocator(_MOST, 2 * _MOST)
#: the thresholds the replays run under, and the probes restore (:func:`as_in_program`)
_program = SETTLED


def available() -> bool:
    """Whether the allocator's thresholds can be read and set (glibc)."""
    return _LIBC is not None


def _served_by_map(size: int, held: list[int]) -> bool:
    """Whether a block of ``size`` bytes is served by ``mmap`` now. Blocks are taken (and held
    in ``held``) until one is mapped or grows the heap: a free chunk inside the heap serves a
    block of any size without either, and says nothing of the threshold."""
    while len(held) < _MOST_PROBES:
        grown = _LIBC.heap_info().arena
        p = _LIBC.malloc(size)
        if not p:
            raise MemoryError(size)
        held.append(p)
        if ctypes.c_size_t.from_address(p - ctypes.sizeof(ctypes.c_size_t)).value & _IS_MMAPPED:
            return True
        if _LIBC.heap_info().arena > grown:
            return False
    raise MemoryError("the heap's free chunks did not run out")


def program_allocator() -> Allocator | None:
    """Read the thresholds now, within :data:`_STEP` (call it when the program ends, before
    anything else allocates). None off glibc, or where the reading did not end."""
    if _LIBC is None:
        return None
    # free memory at the heap's top would serve any block without a map: given back first
    # (the thresholds do not move)
    _LIBC.malloc_trim(0)
    held: list[int] = []
    size = _START
    try:
        while size < _MOST and not _served_by_map(size, held):
            size = int(size * _STEP) // 4096 * 4096
    except MemoryError:
        return None
    finally:
        for p in held:  # the one mapped block, freed, raises the threshold to its size
            _LIBC.free(p)
    size = min(size, _MOST)
    # glibc raises the trim threshold with the mmap threshold, to twice it
    return Allocator(size, _START if size == _START else 2 * size)


def as_in_program(allocator: Allocator | None) -> None:
    """Set the thresholds the program ran with (:data:`SETTLED` without a reading), for the
    replays and for the probes to restore (``mallopt`` ends glibc's own adjustment: under
    ``profile()`` the application keeps them)."""
    global _program
    _program = allocator or SETTLED
    _set(_program)


def _set(allocator: Allocator) -> None:
    if _LIBC is None:
        return
    _LIBC.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
    _LIBC.mallopt(_M_MMAP_THRESHOLD, allocator.mmap_threshold)
    _LIBC.mallopt(_M_TRIM_THRESHOLD, allocator.trim_threshold)
    # what the analysis freed back to the system: else the statement as written would be
    # served from it, and meet a heap the program did not have
    _LIBC.malloc_trim(0)


@contextlib.contextmanager
def reused_memory() -> Iterator[None]:
    """Inside, large blocks come from the heap and freed ones stay there: a new array lands on
    pages already touched, as in a buffer allocated once and reused. Afterwards the program's
    thresholds again (:func:`as_in_program`)."""
    if _LIBC is None:
        raise RuntimeError("the allocator is not glibc's: fresh memory cannot be told apart")
    _LIBC.mallopt(_M_MMAP_MAX, 0)
    _LIBC.mallopt(_M_TRIM_THRESHOLD, 2**30)
    try:
        yield
    finally:
        _set(_program)


reused_memory.set_up_each_time = True


@contextlib.contextmanager
def fresh_memory() -> Iterator[None]:
    """Inside, every block of 128 KiB or more is mapped fresh and unmapped when freed (glibc's
    start, before a freed block raises its thresholds): each new array's pages are faulted in,
    which prices a page fault on the statement's own arrays. Afterwards the program's
    thresholds again."""
    if _LIBC is None:
        raise RuntimeError("the allocator is not glibc's: fresh memory cannot be told apart")
    _set(Allocator(_START, _START))
    try:
        yield
    finally:
        _set(_program)


fresh_memory.set_up_each_time = True


def faults() -> int:
    """The process's minor page faults so far (0 where unknown)."""
    try:
        import resource
    except ImportError:
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def release_heap() -> None:
    """Give the heap's free memory back to the system (after the probes)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
