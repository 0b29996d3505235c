"""Choosing serial or parallel per call, from the times the calls themselves took.

A parallel kernel waits for its slowest thread. When another process keeps a core busy, that
thread gets the core only at the scheduler's next time slice, and a parallel call can take many
times a serial one. No constant threshold and no tuning run foresees that; the calls can
measure it.

:class:`Chooser` keeps, per kernel and size class (a power of two), the seconds per element of
each variant it ran: its mean call over the last few decisions (:data:`WINDOW`). It runs the
faster one, and re-measures the other when its figure is older than :data:`STALE` seconds
(longer for a variant whose calls cost much more, so that re-measuring takes at most
:data:`BUDGET` of the time): at most one exploration (a call, or :data:`SAMPLE` short ones) per
size class every 50 ms or more, so a steady loop pays almost nothing for it, and a machine
whose load changes is followed within a fraction of a second. The first call of a size class
runs the engine's default choice. The candidates are the default and serial; a call whose
output can stream has three (streaming, parallel, serial): whether non-temporal stores pay
depends on the CPU, the kernel and the output, and whether LLVM vectorises a fused kernel's
unrolled streaming lanes on the expression.

A call's time depends on the variant that ran before it: after serial calls, the input is in
one core's cache and the thread pool's threads sleep. So the first call of a variant after
another one ran is not timed; the next call chooses again, and is. Where the calls are short,
the first :data:`WARM` calls after a switch are not counted at all, and a stale variant is
re-measured over :data:`SAMPLE` calls after them (counted, those cold first calls kept
whichever variant was running).

A fresh figure (the first for a variant, or the first after it went stale; for calls longer
than :data:`STALE`, older than two of them) takes two calls and keeps the faster of them, and
a variant that lost on one call is run once more: one slow call (the first touch of a new
output array on a VM) would otherwise keep the parallel kernel off until it went stale.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

__all__ = ["BUDGET", "PERIOD", "PERIOD_CAP", "PERIOD_MAX", "SAMPLE", "SETTLE_CALLS", "SHORT",
           "STALE", "WARM", "WINDOW", "Chooser", "Decision", "settle"]

#: a variant's figure older than this (seconds) is measured again (:data:`BUDGET` bounds what
#: it costs): short enough that a figure taken in a slow moment does not last a benchmark cell
STALE = 0.05
#: one call in this many per kernel and size class is chosen and timed (see Chooser.decide)
SAMPLE = 8
#: or one in as many as take this long (seconds), when that is more: a decision runs in Python,
#: cold after a call that streamed megabytes, so it must be rare; a longer period only delays
#: a switch (each untimed call is timed all the same, see Decision)
PERIOD = 5e-3
#: a period ends early once its calls have taken this long (seconds; :meth:`Decision.count`,
#: and the C path, which is handed it): its length is counted in calls, from the
#: figure, and calls that became far slower (a parallel kernel waiting for a busy core's time
#: slice) would otherwise hold one for seconds
PERIOD_MAX = 2 * PERIOD
#: a variant whose SAMPLE calls take less than this (seconds) is re-measured over SAMPLE calls
#: after WARM (see _explore_calls); longer ones over one, whose cold first call is a small
#: share of it
SHORT = 4e-3
#: a switch to a variant whose calls are short runs this many calls before any is counted
#: (see the module notes): a parallel kernel's first calls after serial ones wait while its
#: threads wake and half its data moves to the other core; the serial kernel's first calls
#: after parallel ones wait for the other half. Counted, they kept whichever variant ran
WARM = 4
#: at most this fraction of the time goes to re-measuring the slower variant
BUDGET = 0.01
#: a variant's figure is the mean call over its last this many entries (a timed call, or the
#: calls between two decisions)
WINDOW = 4
#: the calls between two decisions count at most this many times the figure they update: a
#: new dtype's first call compiles its kernel (seconds) or loads it (milliseconds), and only
#: the timed calls know which call is a first one (:meth:`Chooser.record`); a busy core's
#: slow calls make a period a few times slower, not this many
PERIOD_CAP = 50.0
#: untimed calls that take a kernel through its exploration (see :func:`settle`): with three
#: candidates the chooser's last call of a losing variant is the 12th and the first call of
#: the winner after it, untimed, the 13th (two candidates: the 7th and 8th);
#: ``test_settle_covers_the_exploration`` checks it
SETTLE_CALLS = 16


def settle(call: Callable[[], object]) -> None:
    """Call ``call`` :data:`SETTLE_CALLS` times, untimed, before timing it.

    A kernel's first calls in a process compile (or load) each of its variants and try them;
    timed among them, a repeat measures a compile or an exploratory variant. After these
    calls, what is timed is the speed a loop of the user's gets.
    """
    for _ in range(SETTLE_CALLS):
        call()


class Decision:
    """The chooser's live decision for one kernel and size class (:meth:`Chooser.decision`):
    the variant that the next ``left`` calls run untimed, and what the calls counted since it
    was made took (``seconds`` over ``calls``).

    A caller may run those calls itself, the decision in hand: ``left -= 1`` and the variant
    for each, :meth:`count` for its time, and :meth:`Chooser.decide` when ``left`` is 0 (the
    kernels' fast path in Python, and the C path, which reads these fields by name). The next
    decision counts the calls' time: a busy core makes a few parallel calls wait for a time
    slice, which the one timed call in :data:`SAMPLE` mostly misses.
    """

    __slots__ = ("calls", "left", "seconds", "variant")

    def __init__(self) -> None:
        self.variant: str | None = None  # None before the first decision
        self.left = 0
        self.seconds = 0.0
        self.calls = 0

    def __repr__(self) -> str:
        return (f"Decision(variant={self.variant!r}, left={self.left}, "
                f"seconds={self.seconds!r}, calls={self.calls})")

    def count(self, seconds: float) -> None:
        """One of the untimed calls took ``seconds``. Once they took :data:`PERIOD_MAX` in
        all, the next call decides: calls far slower than planned (see :data:`PERIOD_MAX`)."""
        self.seconds += seconds
        self.calls += 1
        if self.seconds > PERIOD_MAX:
            self.left = 0

    def _start(self, variant: str | None, left: int) -> None:
        self.variant = variant
        self.left = left
        self.seconds = 0.0
        self.calls = 0


class Chooser:
    """Serial, parallel or streaming per kernel and size class; see the module notes."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        # (kernel, size class, variant) -> (seconds per element, when measured, calls counted);
        # a kernel is named by any hashable (the fused kernels by their plan)
        self.figures: dict[tuple, tuple[float, float, int]] = {}
        self._compiled: set[tuple] = set()  # call signatures that have run once
        # key of figures -> its last entries: (seconds per element in all, calls)
        self._samples: dict[tuple, list[tuple[float, int]]] = {}
        # (kernel, size, default, others) -> its Decision
        self._last: dict[tuple, Decision] = {}
        self._warming: set[int] = set()  # ids of the decisions whose period is a warm-up

    def decide(self, name, n: int, default: str,
               others: tuple[str, ...] = ("serial",)) -> tuple[str, bool]:
        """The variant for this call, and whether to time it (then :meth:`record` it).

        One call in :data:`SAMPLE` per kernel and size class, or in as many as take
        :data:`PERIOD` seconds when that is more, makes the choice (:meth:`_choice`) and is
        timed; the calls between run the same variant untimed (by the chooser: see
        :class:`Decision`): choosing and recording run in Python, slower than a small kernel. A
        variant run only to be measured (a slower one, re-measured) runs for that one call,
        or for :data:`SAMPLE` calls when it is stale and its calls are short
        (:func:`_explore_calls`): then the next call chooses again.
        """
        # the candidates too: the default is this call's (streaming only where this out can
        # stream), and a variant decided for one call must be one this call can run
        last = self.decision(name, n, default, others)
        if last.left > 0:
            last.left -= 1
            return last.variant, False
        if self._warming and id(last) in self._warming:  # the calls after a switch: not counted
            self._warming.discard(id(last))
        elif last.calls:  # the untimed calls the caller counted (Decision): one figure's worth
            key = (name, n.bit_length(), last.variant)
            seconds = last.seconds / max(n, 1)
            old = self.figures.get(key)
            if old is not None:  # a first call among them (a new dtype) compiled its kernel
                seconds = min(seconds, PERIOD_CAP * old[0] * last.calls)
            self._add(key, seconds, last.calls, last.seconds / last.calls)
        variant, settled = self._choice(name, n, (default, *others))
        figure = self.figures.get((name, n.bit_length(), variant))
        if last.variant is not None and last.variant != variant:
            # the first call after another variant: its data are in the other variant's
            # caches (see the module notes), so it is not timed and the next call chooses
            # again; where its calls are short, the first WARM calls are not counted (not in
            # the first exploration, which stays short: see SETTLE_CALLS)
            calls = (WARM - 1 if figure is not None and figure[2] >= 2
                     and _explore_calls(figure[0] * n) > 1 else 0)
            if calls:
                self._warming.add(id(last))
            last._start(variant, calls)
            return variant, False
        # the calls after this one: SAMPLE, or as many as take PERIOD; a variant run to be
        # measured runs once, or when it is stale SAMPLE times where its calls are short
        # (_explore_calls; the first exploration stays short: see SETTLE_CALLS)
        if not settled:
            calls = 0 if figure is None or figure[2] < 2 else _explore_calls(figure[0] * n) - 1
        else:
            call = figure[0] * n
            calls = max(SAMPLE, round(PERIOD / call) if call > 0 else SAMPLE) - 1
        last._start(variant, calls)
        return variant, True

    def decision(self, name, n: int, default: str,
                 others: tuple[str, ...] = ("serial",)) -> Decision:
        """The live :class:`Decision` for kernel ``name``'s size class of ``n`` among these
        candidates: :meth:`decide` updates it in place, so a caller may keep it."""
        key = (name, n.bit_length(), default, others)
        last = self._last.get(key)
        if last is None:
            last = self._last[key] = Decision()
        return last

    @contextlib.contextmanager
    def timing(self, name, n: int, default: str, others: tuple[str, ...],
               signature: tuple = (), count: bool = True) -> Iterator[str]:
        """Decide, run, count: the variant for this call (a ``with`` block runs it), its time
        recorded where the chooser asked for it (:meth:`record`, with the compiled
        ``signature``) and, with ``count``, counted in its decision otherwise; nothing when
        the block raises."""
        decision = self.decision(name, n, default, others)
        counted = count and decision.left > 0
        variant, timed = self.decide(name, n, default, others)
        start = time.perf_counter()
        yield variant
        seconds = time.perf_counter() - start
        if timed:
            self.record(name, n, variant, seconds, signature)
        elif counted:
            decision.count(seconds)

    def expire(self) -> None:
        """End every decision now: the next call of each kernel chooses again (after a fork,
        where the parent's parallel choices may not run)."""
        for last in self._last.values():
            last._start(last.variant, 0)
        self._warming.clear()

    def _choice(self, name, n: int, candidates: tuple[str, ...]) -> tuple[str, bool]:
        """(variant, settled): settled is False while a variant is run to be measured.

        Each candidate without a figure is run first, in order; then the fastest, unless a
        slower one is due to be measured again (:func:`_retry`). A tie goes to the later
        candidate (serial: it leaves the other core alone).
        """
        size = n.bit_length()
        figures = {}
        for variant in candidates:
            figure = self.figures.get((name, size, variant))
            if figure is None:
                return variant, False
            figures[variant] = figure
        best = min(reversed(candidates), key=lambda variant: figures[variant][0])
        now = self.clock()
        for variant in candidates:
            if variant != best and _retry(figures[variant], figures[best], n, now):
                return variant, False
        return best, True

    def compiled(self, name, variants: tuple[str, ...], signature: tuple) -> None:
        """Count the first calls of ``variants`` with ``signature`` too (see :meth:`record`):
        for kernels compiled before their first call (the C path's cfuncs)."""
        for variant in variants:
            self._compiled.add((name, variant, *signature))

    def record(self, name, n: int, variant: str, seconds: float,
               signature: tuple = ()) -> None:
        """What a call of ``variant`` took. The first call of each ``signature`` (the dtypes
        it ran with) is not counted: it compiled the kernel, or loaded it from disk."""
        compiled = (name, variant, *signature)
        if compiled not in self._compiled:
            self._compiled.add(compiled)
            return
        self._add((name, n.bit_length(), variant), seconds / max(n, 1), 1, seconds)

    def _add(self, key: tuple, seconds: float, calls: int, span: float) -> None:
        """``calls`` calls of ``key`` (kernel, size class, variant) took ``seconds`` per
        element in all, ``span`` seconds a call. (Written out plainly: each decision calls
        this once or twice, and generator sums made a decision slower.)"""
        now = self.clock()
        old = self.figures.get(key)
        # nothing recent: the new time replaces it. Recent is STALE, or two such calls:
        # calls longer than STALE would otherwise never make a figure of two entries, and
        # the loser would be run again after every call of the winner
        if old is None or now - old[1] > max(STALE, 2 * span):
            entries = self._samples[key] = [(seconds, calls)]
            count = 1
        else:
            entries = self._samples[key]
            if old[2] == 1:  # a fresh figure's second entry: the faster of the two (the
                # first touch of a new output makes one call far slower than the ones after)
                if seconds * entries[0][1] < entries[0][0] * calls:
                    entries[0] = (seconds, calls)
            else:
                entries.append((seconds, calls))
                if len(entries) > WINDOW:
                    del entries[0]
            count = old[2] + 1
        total = 0.0
        made = 0
        for entry_seconds, entry_calls in entries:
            total += entry_seconds
            made += entry_calls
        # The mean call over the last WINDOW entries (a timed call, or the calls of a
        # decision's period). A busy core makes a few calls very slow: those count by their
        # share of the calls (a median of timed calls is blind to them), and one stray call
        # moves the figure only by its share of some 30 calls.
        self.figures[key] = (total / made, now, count)


def _retry(loser: tuple[float, float, int], winner: tuple[float, float, int], n: int,
           now: float) -> bool:
    """Whether the losing variant runs once more: its figure is one call old, or stale.

    Stale is :data:`STALE` seconds, or longer where a call of the loser costs so much more
    than one of the winner that re-measuring it every :data:`STALE` seconds would take more
    than :data:`BUDGET` of the time (a 200 ms serial GELU against a 100 ms parallel one:
    every 30 s).
    """
    if loser[2] < 2:
        return True
    # seconds an exploration costs: all the calls it runs, each slower by the difference:
    # short calls, the warm-up and SAMPLE calls; long ones, the untimed first call after the
    # switch and the two timed calls of a fresh figure (counting only the timed call made
    # long calls re-measured too often)
    calls = _explore_calls(loser[0] * n)
    runs = calls + WARM if calls > 1 else 3
    extra = (loser[0] - winner[0]) * n * runs
    return now - loser[1] > max(STALE, extra / BUDGET)


def _explore_calls(call: float) -> int:
    """How many calls re-measure a losing variant whose calls take ``call`` seconds: one, or
    :data:`SAMPLE` where they are short. A parallel kernel re-measured on 1e5 elements after
    serial calls (or another library's calls) runs while its threads wake and the other half
    of its data moves to the other core: with one or two of its first calls measured, the
    serial kernel kept winning."""
    return SAMPLE if call * SAMPLE < SHORT else 1
