"""The allocator's thresholds: read as a program left them, set for the replays (glibc only).

Each test runs in a new process: ``mallopt`` fixes the thresholds for the rest of a process's
life, and the test process's own history (a thousand tests' frees) decides where they are.
"""

import subprocess
import sys
import textwrap

import pytest

from chokepoint.program import heap

pytestmark = pytest.mark.skipif(not heap.available(), reason="the allocator is not glibc's")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_the_thresholds_are_read_where_a_freed_block_raised_them():
    # 16 MiB: mapped (glibc starts at 128 KiB, and a new process has no free chunk that large),
    # then freed, which raises the threshold to its size
    out = _run("""\
        import numpy as np
        from chokepoint.program import heap
        before = heap._LIBC.heap_info().hblkhd
        a = np.ones(2**24 // 8)
        mapped = heap._LIBC.heap_info().hblkhd - before
        del a
        found = heap.program_allocator()
        print(found.mmap_threshold, found.trim_threshold, mapped)
        """)
    mmap, trim, mapped = map(int, out.split())
    assert mapped >= 2**24  # the premise: the block was mapped
    assert 2**24 <= mmap <= 1.25 * (2**24 + 4096) + 4096
    assert trim == 2 * mmap


def test_a_set_threshold_is_read_back_and_the_probes_restore_it():
    out = _run("""\
        from chokepoint.program import heap
        heap.as_in_program(heap.Allocator(256 * 1024, 512 * 1024))
        with heap.reused_memory():
            pass
        with heap.fresh_memory():
            pass
        print(heap.program_allocator().mmap_threshold)
        """)
    assert 256 * 1024 <= int(out) <= 1.25 * 256 * 1024 + 4096


def test_fresh_memory_faults_every_new_array_in_and_reused_memory_none():
    # 1 MiB arrays (under the 4 MiB from which NumPy asks for huge pages): 256 pages each
    out = _run("""\
        import numpy as np
        from chokepoint.program import heap
        from chokepoint.program.replay import timed_under
        heap.as_in_program(None)
        make = lambda: np.ones(2**20 // 8)
        faults = []
        timed_under(make, [heap.fresh_memory, heap.reused_memory], faults=faults)
        print(*(sorted(f)[len(f) // 2] for f in faults))
        """)
    fresh, reused = map(float, out.split())
    assert fresh >= 200 and reused <= 8
