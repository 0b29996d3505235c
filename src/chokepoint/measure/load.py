"""What else the machine did while something was timed: other processes' CPU time and steal.

A race on a machine whose other cores are busy still ranks its candidates, but a neighbour
sharing the memory bus, the last-level cache or (on a virtual machine) the physical core moves
timings by tens of percent, and not alike for every candidate: the demo once ranked
``relu_grad`` behind ``(X >= 0).view('i1')`` (11.6 against 9.16 ms) with one core busy, where
alone both ran about 9 ms. :func:`watch` measures it, so that the report can say so.

On Linux the CPUs this process may run on are read from ``/proc/stat`` (their busy and steal
time) before and after, and this process's own CPU time (threads and waited-for children, the
race's worker processes included) from :func:`os.times`: what the CPUs did beyond that was
other processes' work. Elsewhere nothing is measured (:func:`watch` yields an empty watch).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["BUSY_CORES", "Load", "cpu_times", "load_between", "watch"]

#: a measurement is called busy when other processes and steal took at least this many cores
#: on average (a quiet 2-core machine measured 0.00-0.05 here; one CPU-bound neighbour 1.0)
BUSY_CORES = 0.25

#: shorter than this, ``/proc/stat``'s 10 ms ticks cannot tell a quarter of a core apart
_MIN_SECONDS = 0.2

_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class Load:
    """The CPUs' work while something was timed, in cores (CPU seconds per second).

    Attributes
    ----------
    seconds : float
        Wall time watched.
    cpus : int
        CPUs this process may run on.
    own : float
        Cores this process used (its threads, and its children that ended).
    others : float
        Cores the other processes used on those CPUs.
    steal : float
        Cores the hypervisor gave to other virtual machines (steal time).
    """

    seconds: float
    cpus: int
    own: float
    others: float
    steal: float

    @property
    def busy(self) -> bool:
        """Whether other processes and steal took :data:`BUSY_CORES` or more, over a watch long
        enough to tell."""
        return self.seconds >= _MIN_SECONDS and self.others + self.steal >= BUSY_CORES

    def to_dict(self) -> dict:
        """JSON-ready, ``busy`` included."""
        return {**asdict(self), "busy": self.busy}


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def cpu_times(cpus: list[int], stat: str | None = None) -> tuple[float, float] | None:
    """Busy and steal seconds of ``cpus`` since boot, from ``/proc/stat`` (or its ``stat``
    text); None where it cannot be read. Busy is user, nice, system, irq and softirq (guest
    time is in user); idle and iowait are not."""
    try:
        text = _STAT.read_text() if stat is None else stat
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    wanted = {f"cpu{i}" for i in cpus}
    busy = steal = 0
    found = 0
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] not in wanted or len(fields) < 9:
            continue
        user, nice, system, _idle, _iowait, irq, softirq, stolen = map(int, fields[1:9])
        busy += user + nice + system + irq + softirq
        steal += stolen
        found += 1
    if found == 0:
        return None
    return busy / tick, steal / tick


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def load_between(before: tuple, after: tuple, cpus: int) -> Load | None:
    """The load from two ``(wall, own, busy, steal)`` samples (``busy``/``steal`` None where
    ``/proc/stat`` was not read)."""
    wall = after[0] - before[0]
    if before[2] is None or after[2] is None or wall <= 0:
        return None
    own = (after[1] - before[1]) / wall
    busy = (after[2] - before[2]) / wall
    steal = (after[3] - before[3]) / wall
    # the ticks and os.times round differently: a quiet machine must not read as negative
    return Load(seconds=wall, cpus=cpus, own=own, others=max(0.0, busy - own),
                steal=max(0.0, steal))


class _Watch:
    """What :func:`watch` yields: its :attr:`load` is set when the block ends."""

    load: Load | None = None


@contextlib.contextmanager
def watch() -> Iterator[_Watch]:
    """Measure the machine's load over a block::

        with watch() as w:
            ...
        w.load  # a Load, or None where it cannot be measured
    """
    cpus = _cpus()
    w = _Watch()

    def sample() -> tuple:
        times = cpu_times(cpus)
        busy, steal = times if times else (None, None)
        return time.perf_counter(), _own_seconds(), busy, steal

    before = sample()
    try:
        yield w
    finally:
        w.load = load_between(before, sample(), len(cpus))
