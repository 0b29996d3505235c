"""The timer's statistics and autorange, on deterministic fake clocks."""

import gc

import pytest

from chokepoint.measure import measure, measure_interleaved


class FakeClock:
    """Advances by ``cost(call_index)`` seconds for every call of the timed function."""

    def __init__(self, costs):
        self.now = 0.0
        self.calls = 0
        self.costs = costs

    def clock(self):
        return self.now

    def fn(self):
        self.now += self.costs(self.calls)
        self.calls += 1


def test_autorange_reaches_min_time_with_1_2_5_steps():
    fake = FakeClock(lambda i: 0.001)
    m = measure(fake.fn, min_time=0.2, repeats=3, clock=fake.clock)
    assert m.loops == 200  # 1 ms per call: 200 loops last 0.2 s
    assert m.runs == 3
    assert m.median == pytest.approx(0.001)
    assert m.iqr == pytest.approx(0.0, abs=1e-12)


def test_statistics_of_known_repeats():
    # warm-up call costs 1 s; then every call of repeat r costs (r + 1) ms
    loops = 1
    fake = FakeClock(lambda i: 1.0 if i == 0 else 0.001 * ((i - 1) // loops + 1))
    m = measure(fake.fn, min_time=0.0, repeats=5, clock=fake.clock)
    assert m.loops == 1
    assert m.times == pytest.approx([0.001, 0.002, 0.003, 0.004, 0.005])
    assert m.median == pytest.approx(0.003)
    assert m.min == pytest.approx(0.001)
    assert m.iqr == pytest.approx(0.004 - 0.002)


def test_slow_function_runs_once_per_repeat_and_gc_restored():
    fake = FakeClock(lambda i: 0.5)
    assert gc.isenabled()
    m = measure(fake.fn, min_time=0.2, repeats=2, clock=fake.clock)
    assert (m.loops, m.runs) == (1, 2)
    assert fake.calls == 1 + 2  # warm-up, then one call per repeat
    assert gc.isenabled()


def test_gc_disabled_while_timing():
    states = []
    measure(lambda: states.append(gc.isenabled()), min_time=0.0, repeats=2)
    assert states and not any(states)


def test_bad_arguments():
    with pytest.raises(ValueError, match="repeats"):
        measure(lambda: None, repeats=0)
    with pytest.raises(ValueError, match="min_time"):
        measure(lambda: None, min_time=float("nan"))


def test_to_dict_and_repr():
    fake = FakeClock(lambda i: 0.002)
    m = measure(fake.fn, min_time=0.0, repeats=3, clock=fake.clock)
    d = m.to_dict()
    assert d["runs"] == 3 and d["median"] == pytest.approx(0.002)
    assert "2 ms" in repr(m)


def test_interleaved_keeps_what_was_measured_when_a_callable_raises():
    calls = {"a": 0, "b": 0}

    def a():
        calls["a"] += 1

    def b():
        calls["b"] += 1
        if calls["b"] > 3:
            raise ValueError("b")

    with pytest.raises(ValueError) as info:
        measure_interleaved([a, b], min_time=0.0, repeats=5, warmup=False)
    assert info.value.interleaved_index == 1
    first, second = info.value.interleaved_partial
    # a b, b a, a b, then b fails first in its round: three repeats each were measured
    assert (first.runs, second.runs) == (3, 3)

    def stop():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        measure_interleaved([a, stop, a], min_time=0.0, repeats=3, warmup=False)
    assert info.value.interleaved_index is None
    assert info.value.interleaved_partial[0].runs == 1
    assert info.value.interleaved_partial[1:] == [None, None]


class Restoring(FakeClock):
    """A call costing 1 ms whose restore costs 9.5 ms (the clock advances for both); the call
    is fast (0.1 ms) when it finds its input already changed, as ``B[B < 0] = 0`` does."""

    def __init__(self):
        super().__init__(lambda i: 0.001)
        self.changed = False
        self.restores = 0

    def fn(self):
        self.now += 0.0001 if self.changed else 0.001
        self.changed = True
        self.calls += 1

    def restore(self):
        self.now += 0.0095
        self.changed = False
        self.restores += 1

    def __call__(self):
        self.fn()


@pytest.mark.parametrize("interleaved", [False, True])
def test_restore_runs_before_every_call_outside_the_timed_region(interleaved):
    fake = Restoring()
    if interleaved:
        m, = measure_interleaved([fake], min_time=0.2, repeats=3, warmup=False,
                                 clock=fake.clock)
    else:
        m = measure(fake, min_time=0.2, repeats=3, warmup=False, clock=fake.clock)
    assert fake.restores == fake.calls  # every call saw its input as set up
    assert m.median == pytest.approx(0.001)  # the call's time; neither restore's nor 0.1 ms
    # loops fill min_time of wall time, restores included (10.5 ms a call): 20, not 200
    assert m.loops == 20


def test_interleaved_stops_when_enough_says_the_comparison_is_settled():
    fake = FakeClock(lambda i: 0.001)
    seen = []

    def enough(times):
        seen.append([len(t) for t in times])
        return len(times[0]) >= 3

    a, b = measure_interleaved([fake.fn, fake.fn], min_time=0.0, repeats=7, warmup=False,
                               clock=fake.clock, enough=enough)
    assert (a.runs, b.runs) == (3, 3)  # the calibration and two rounds, not seven
    assert seen == [[1, 1], [2, 2], [3, 3]]  # asked before each round, with both sides' times


def test_interleaved_runs_every_repeat_when_enough_never_says_so():
    fake = FakeClock(lambda i: 0.001)
    a, b = measure_interleaved([fake.fn, fake.fn], min_time=0.0, repeats=5, warmup=False,
                               clock=fake.clock, enough=lambda times: False)
    assert (a.runs, b.runs) == (5, 5)


def test_a_repeat_just_short_of_min_time_is_not_doubled():
    fake = FakeClock(lambda i: 0.0195)  # five calls last 97.5 ms of the 100 asked
    m = measure(fake.fn, min_time=0.1, repeats=3, clock=fake.clock)
    assert m.loops == 5
