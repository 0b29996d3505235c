"""Serial or parallel from the calls' own times (no timing: a fake clock, made-up times)."""

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels import adaptive, engine_numba
from chokepoint.kernels.adaptive import (
    BUDGET,
    PERIOD,
    SAMPLE,
    SETTLE_CALLS,
    STALE,
    WARM,
    Chooser,
    Decision,
)


def choose(c: Chooser, name, n: int, default: str, others: tuple = ("serial",)) -> str:
    """The variant the chooser would run now (its choice, without deciding a call)."""
    return c._choice(name, n, (default, *others))[0]

def warm(c, name, n):
    """Each variant's first call (compilation) is not counted: make it."""
    for variant in ("parallel", "serial"):
        c.record(name, n, variant, 1.0)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_measures_both_then_runs_the_faster():
    clock = Clock()
    c = Chooser(clock)
    n = 100_000
    warm(c, "relu", n)
    assert choose(c, "relu", n, "parallel") == "parallel"  # the engine's default first
    c.record("relu", n, "parallel", 8e-3)  # a busy core: the call waited for a time slice
    assert choose(c, "relu", n, "parallel") == "serial"  # the other one, once
    c.record("relu", n, "serial", 1e-4)
    assert choose(c, "relu", n, "parallel") == "parallel"  # lost on one call: once more
    c.record("relu", n, "parallel", 8e-3)
    assert choose(c, "relu", n, "parallel") == "serial"
    c.record("relu", n, "serial", 1e-4)
    assert choose(c, "relu", n, "parallel") == "serial"
    # the parallel figure is stale: measured again, once its 3 calls (the untimed one after
    # the switch, a fresh figure's two) take at most BUDGET of the time since
    clock.now += STALE + 3 * (8e-3 - 1e-4) / BUDGET
    assert choose(c, "relu", n, "parallel") == "parallel"
    c.record("relu", n, "parallel", 5e-5)  # the core is free again: a fresh figure
    assert choose(c, "relu", n, "parallel") == "serial"  # the serial figure is stale too
    c.record("relu", n, "serial", 1e-4)
    assert choose(c, "relu", n, "parallel") == "serial"  # lost on one call: once more
    c.record("relu", n, "serial", 1e-4)
    assert choose(c, "relu", n, "parallel") == "parallel"


def test_a_costly_loser_is_measured_again_less_often():
    # serial 200 ms, parallel 100 ms a call: re-measuring serial (3 calls) every STALE seconds
    # would cost 300 ms every 50 ms; it waits until that is at most BUDGET of the time
    clock = Clock()
    c = Chooser(clock)
    n = 30_000_000
    warm(c, "gelu", n)
    for variant, seconds in (("parallel", 0.1), ("serial", 0.2), ("serial", 0.2),
                             ("parallel", 0.1)):
        assert choose(c, "gelu", n, "parallel") == variant
        c.record("gelu", n, variant, seconds)
    clock.now += 0.1 / BUDGET
    assert choose(c, "gelu", n, "parallel") == "parallel"  # not yet (one call's worth)
    clock.now += 2 * 0.1 / BUDGET + 1
    assert choose(c, "gelu", n, "parallel") == "serial"


def test_calls_longer_than_stale_settle_on_the_faster():
    # a fused chain on 1e7 float64: 46 ms parallel, 72 ms serial a call, each call longer than
    # STALE. A figure is two entries; when each entry replaced the one before as stale, the
    # serial figure never had two and serial ran after every call, for good
    clock = Clock()
    c = Chooser(clock)
    n = 10_000_000
    warm(c, "chain", n)
    seconds = {"parallel": 0.046, "serial": 0.072}
    ran = []
    for _ in range(40):
        variant, timed = c.decide("chain", n, "parallel")
        clock.now += seconds[variant]
        if timed:
            c.record("chain", n, variant, seconds[variant])
        ran.append(variant)
    assert seconds["serial"] > STALE
    assert ran[-30:] == ["parallel"] * 30, ran


def test_one_slow_call_does_not_keep_a_variant_off():
    # the first touch of a new output: one call 80x slower than the ones after it
    clock = Clock()
    c = Chooser(clock)
    n = 2_000_000
    warm(c, "relu", n)
    c.record("relu", n, "parallel", 25e-3)
    assert choose(c, "relu", n, "parallel") == "serial"
    c.record("relu", n, "serial", 0.6e-3)
    assert choose(c, "relu", n, "parallel") == "parallel"  # run again at once, not in 2 s
    c.record("relu", n, "parallel", 0.3e-3)
    assert choose(c, "relu", n, "parallel") == "serial"  # serial lost on one call too
    c.record("relu", n, "serial", 0.6e-3)
    for _ in range(3):
        assert choose(c, "relu", n, "parallel") == "parallel"
        c.record("relu", n, "parallel", 0.3e-3)


def test_size_classes_and_kernels_are_apart():
    c = Chooser(Clock())
    for name in ("relu", "relu_backward"):
        warm(c, name, 100_000)
    for _ in range(2):  # a fresh figure takes two calls
        c.record("relu", 100_000, "parallel", 1.0)
    c.record("relu", 100_000, "serial", 1e-3)
    assert choose(c, "relu", 100_000, "parallel") == "serial"
    assert choose(c, "relu", 30_000_000, "parallel") == "parallel"  # another size class
    assert choose(c, "relu_backward", 100_000, "parallel") == "parallel"


def test_the_engine_records_its_calls_and_values_do_not_change():
    # above the tuned threshold (1 << 18 on a Zen 3 VM): below it the serial kernel runs
    x = np.linspace(-1, 1, max(1 << 17, 2 * engine_numba.settings.parallel_min))
    expected = np.maximum(x, 0)
    chooser = engine_numba.chooser
    before = dict(chooser.figures)
    try:
        for _ in range(5 * SAMPLE):  # one call in SAMPLE is timed; a variant's first timed
            assert np.array_equal(chokepoint.relu(x), expected)  # call compiles: not counted
        if chokepoint.get_backend() == "numba":
            size = x.size.bit_length()
            modes = {k[2] for k in chooser.figures if k[:2] == ("relu", size)}
            assert modes == {"parallel", "serial"}  # both measured within five timed calls
    finally:
        chooser.figures.clear()
        chooser.figures.update(before)


def test_a_variants_first_call_is_not_counted():
    c = Chooser(Clock())
    c.record("relu", 100_000, "parallel", 0.4, ("d", "d"))  # compiled the kernel
    assert not c.figures
    c.record("relu", 100_000, "parallel", 1e-4, ("d", "d"))
    assert c.figures[("relu", (100_000).bit_length(), "parallel")][0] == 1e-4 / 100_000
    c.record("relu", 100_000, "parallel", 0.4, ("f", "f"))  # another dtype compiles again
    assert c.figures[("relu", (100_000).bit_length(), "parallel")][0] == 1e-4 / 100_000


def test_one_call_in_sample_chooses_and_is_timed():
    clock = Clock()
    c = Chooser(clock)
    n = 100_000
    warm(c, "relu", n)
    # without figures every call chooses (and is timed): the default
    assert [c.decide("relu", n, "parallel") for _ in range(3)] == [("parallel", True)] * 3
    c.record("relu", n, "parallel", PERIOD)  # calls this long: a decision every SAMPLE
    c.record("relu", n, "parallel", PERIOD)
    # the first call after another variant is not timed (the data sit in that one's caches)
    assert c.decide("relu", n, "parallel") == ("serial", False)
    # a variant run to be measured runs once, then the next call chooses again
    assert c.decide("relu", n, "parallel") == ("serial", True)
    c.record("relu", n, "serial", 80 * PERIOD)
    assert c.decide("relu", n, "parallel") == ("serial", True)  # lost on one call: once more
    c.record("relu", n, "serial", 80 * PERIOD)
    assert c.decide("relu", n, "parallel") == ("parallel", False)  # back: untimed again
    # settled on parallel: one call in SAMPLE chooses and is timed
    decisions = [c.decide("relu", n, "parallel") for _ in range(2 * SAMPLE)]
    assert [timed for _, timed in decisions] == ([True] + [False] * (SAMPLE - 1)) * 2
    assert {variant for variant, _ in decisions} == {"parallel"}
    # shorter calls: one decision in as many as take PERIOD (a decision costs microseconds)
    clock.now += STALE + 1
    for _ in range(4):
        variant, timed = c.decide("relu", n, "parallel")
        if timed:
            c.record("relu", n, variant, {"parallel": PERIOD / 40, "serial": PERIOD}[variant])
    timed = [c.decide("relu", n, "parallel")[1] for _ in range(200)]
    first = timed.index(True, 10)  # settled by then
    assert timed[first:first + 80] == ([True] + [False] * 39) * 2
    assert c.decide("relu", 1000, "parallel") == ("parallel", True)  # another size class
    # a call whose output cannot stream never gets a variant decided for one that can
    assert c.decide("relu", n, "stream")[0] == "stream"
    assert c.decide("relu", n, "parallel")[0] == "parallel"


def test_three_candidates_each_measured_then_the_fastest():
    # a fused kernel that can stream: its unrolled lanes may stay scalar (sqrt), so the calls
    # compare it with the parallel loop as well as with the serial one
    clock = Clock()
    c = Chooser(clock)
    n = 10_000_000
    three = ("parallel", "serial")
    for variant in ("stream", *three):
        c.record("fuse", n, variant, 1.0)  # compilation, not counted
    for variant, seconds in (("stream", 13e-3), ("parallel", 7e-3), ("serial", 12e-3),
                             ("stream", 13e-3), ("serial", 12e-3)):
        assert choose(c, "fuse", n, "stream", three) == variant  # each loser twice
        c.record("fuse", n, variant, seconds)
    assert c.decide("fuse", n, "stream", three) == ("parallel", True)
    assert c.decide("fuse", n, "stream", three) == ("parallel", False)  # settled
    assert c.decide("fuse", n, "stream") == ("serial", True)  # without parallel: serial


def _call(c, name, n, seconds_for) -> str:
    """One call as the kernels' fast path makes it: the plan's calls timed and added to it,
    the chooser's decision at the end of each period (the timed call recorded)."""
    plan = c.decision(name, n, "parallel")
    if plan.left > 0:
        plan.left -= 1
        variant = plan.variant
        plan.seconds += seconds_for(variant)
        plan.calls += 1
        return variant
    variant, timed = c.decide(name, n, "parallel")
    if timed:
        c.record(name, n, variant, seconds_for(variant))
    return variant


def test_a_stray_call_counts_by_its_share_and_a_busy_core_by_its_own():
    clock = Clock()
    c = Chooser(clock)
    n = 100_000
    warm(c, "relu", n)
    cost = {"parallel": 8e-6, "serial": 10e-6}  # a decision every PERIOD / 8e-6 calls
    for _ in range(600):
        _call(c, "relu", n, cost.get)
    assert _call(c, "relu", n, cost.get) == "parallel"
    # an interrupt: one call 5x the usual, then the usual: parallel throughout
    runs = [_call(c, "relu", n, lambda v: 40e-6 if v == "parallel" else cost[v])]
    runs += [_call(c, "relu", n, cost.get) for _ in range(600)]
    assert set(runs) == {"parallel"}
    # a busy core: 1 parallel call in 10 waits 4 ms for a time slice; the untimed calls
    # between the decisions count too, and serial takes over at the next decision
    calls = iter(range(10**6))
    busy = {"parallel": lambda: 4e-3 if next(calls) % 10 == 9 else 8e-6,
            "serial": lambda: 10e-6}
    runs = [_call(c, "relu", n, lambda v: busy[v]()) for _ in range(300)]
    assert runs[-SAMPLE:] == ["serial"] * SAMPLE
    assert c.figures[("relu", n.bit_length(), "parallel")][0] * n > 2 * cost["serial"]


@pytest.mark.parametrize("incumbent", ["parallel", "serial"])
def test_the_calls_after_a_switch_are_not_counted(incumbent):
    # after a switch a variant's first calls run cold (threads waking, half the data in the
    # other core's cache): here its first 3 calls take 3x its steady time. Counted, they kept
    # whichever variant ran; not counted, the faster one wins from either side
    clock = Clock()
    c = Chooser(clock)
    n = 100_000
    warm(c, "relu", n)
    steady = {"parallel": 8e-6, "serial": 12e-6}
    history = []

    def cost(variant):
        run = 0
        for past in reversed(history):
            if past != variant:
                break
            run += 1
        return steady[variant] * (3 if run < 3 else 1)

    def call():
        history.append(_call(c, "relu", n, cost))

    # the incumbent's figure first (the other one's, too, from a call long ago)
    c.record("relu", n, "serial" if incumbent == "parallel" else "parallel", 1.0)
    for _ in range(50):
        c.record("relu", n, incumbent, steady[incumbent])
    c.decision("relu", n, "parallel").variant = incumbent
    for _ in range(3):
        clock.now += STALE + 1  # each variant stale in turn: explored from the other side
        for _ in range(400):
            call()
    assert history[-100:] == ["parallel"] * 100


def test_a_stale_loser_with_short_calls_is_measured_over_sample_calls():
    # a parallel kernel re-measured after serial calls runs its first calls cold (threads
    # waking, data in the other core's cache): short calls are re-measured over SAMPLE calls
    clock = Clock()
    c = Chooser(clock)
    n = 100_000
    warm(c, "relu", n)
    cost = {"parallel": 8e-6, "serial": 12e-6}
    calls = 3 * round(PERIOD / cost["parallel"])  # three periods
    for _ in range(calls):
        _call(c, "relu", n, cost.get)
    clock.now += STALE + 1
    runs = "".join(_call(c, "relu", n, cost.get)[0] for _ in range(calls))  # p and s
    # the switch's first WARM calls (not counted, see the next test), then SAMPLE calls
    assert "s" * (WARM + SAMPLE) in runs and "s" * (WARM + SAMPLE + 3) not in runs
    assert runs.endswith("p" * 50)
    # long calls: one call at a time (the untimed first, then two timed: a fresh figure
    # keeps the faster of two), which costs less
    n = 30_000_000
    warm(c, "gelu", n)
    long = {"parallel": 0.1, "serial": 0.12}
    for _ in range(40):
        _call(c, "gelu", n, long.get)
    clock.now += 100
    runs = "".join(_call(c, "gelu", n, long.get)[0] for _ in range(40))
    assert "ssss" not in runs and "s" in runs


@pytest.mark.parametrize(("others", "fastest"), [
    (("serial",), 0), (("serial",), 1),
    (("parallel", "serial"), 0), (("parallel", "serial"), 1), (("parallel", "serial"), 2)])
@pytest.mark.parametrize("scale", [1e-3, 1e-6])  # calls of milliseconds, of microseconds
def test_settle_covers_the_exploration(others, fastest, scale):
    # after SETTLE_CALLS calls (what settle makes before a benchmark or explain times a
    # kernel), every call runs the fastest variant, whichever it is
    candidates = ("stream", *others)
    clock = Clock()
    c = Chooser(clock)
    n = 1 << 20
    cost = {v: (1 if i == fastest else 2 + i) * scale for i, v in enumerate(candidates)}
    ran = []
    for _ in range(SETTLE_CALLS + 3 * SAMPLE):
        variant, timed = c.decide("k", n, "stream", others)
        if timed:
            c.record("k", n, variant, cost[variant])
        clock.now += cost[variant]
        ran.append(variant)
    assert set(ran[SETTLE_CALLS:]) == {candidates[fastest]}
    assert len(set(ran[:SETTLE_CALLS])) == len(candidates)  # it did explore


def test_the_plan_is_the_live_decision():
    # the fast path keeps the Decision that decision() returns and runs its calls itself:
    # decide() must update that same object, and expire() must end it (after a fork)
    clock = Clock()
    c = Chooser(clock)
    n = 100_000
    warm(c, "relu", n)
    plan = c.decision("relu", n, "parallel")
    assert (plan.variant, plan.left, plan.seconds, plan.calls) == (None, 0, 0.0, 0)
    cost = {"parallel": PERIOD, "serial": 3 * PERIOD}  # calls long enough for SAMPLE
    for _ in range(4):  # parallel twice, serial twice: both measured
        variant, timed = c.decide("relu", n, "parallel")
        if timed:
            c.record("relu", n, variant, cost[variant])
    while plan.left == 0:
        variant, timed = c.decide("relu", n, "parallel")
        if timed:
            c.record("relu", n, variant, cost[variant])
    assert (plan.variant, plan.left) == ("parallel", SAMPLE - 1)
    assert c.decision("relu", n, "parallel") is plan
    assert c.decide("relu", n, "parallel") == ("parallel", False) and plan.left == SAMPLE - 2
    assert c.decision("relu", 2 * n, "parallel") is not plan  # another size class
    c.expire()
    assert (plan.variant, plan.left) == ("parallel", 0)
    assert c.decide("relu", n, "parallel") == ("parallel", True)  # chosen and timed again


def test_kernels_compiled_before_their_first_call_count_it():
    # record skips the first call of each signature (it compiled the kernel); the C path's
    # cfuncs are compiled before theirs, under a signature of their own
    c = Chooser(Clock())
    n = 1 << 20
    c.record("relu", n, "serial", 1e-3, ("checked", "f", "f"))
    assert not c.figures  # the first call of a signature: not counted
    c.compiled("relu", ("serial", "parallel"), ("native", "f", "f"))
    c.record("relu", n, "parallel", 2e-3, ("native", "f", "f"))
    assert c.figures[("relu", n.bit_length(), "parallel")][2] == 1


def test_a_decision_counts_its_calls_and_ends_once_they_took_period_max():
    d = Decision()
    assert (d.variant, d.left, d.seconds, d.calls) == (None, 0, 0.0, 0)
    d.variant, d.left = "parallel", 5
    d.count(adaptive.PERIOD_MAX / 4)
    assert (d.left, d.calls) == (5, 1) and d.seconds == adaptive.PERIOD_MAX / 4
    d.count(adaptive.PERIOD_MAX)  # far slower than planned: the next call decides
    assert (d.left, d.calls) == (0, 2)
    with pytest.raises(AttributeError):
        d.varaint = "serial"  # slots: a misspelt field is an error, not a new attribute


def test_timing_records_a_timed_call_and_counts_the_others():
    c = Chooser()
    recorded = []
    c.record = lambda *args: recorded.append(args)
    n = 100_000
    with c.timing("relu", n, "parallel", ("serial",), ("d", "d")) as first:
        pass
    assert first == "parallel" and recorded[0][:3] == ("relu", n, "parallel")
    assert recorded[0][4] == ("d", "d")
    d = c.decision("relu", n, "parallel", ("serial",))
    d.variant, d.left = "serial", 3
    with c.timing("relu", n, "parallel", ("serial",)) as variant:
        pass
    assert variant == "serial" and (d.left, d.calls) == (2, 1) and len(recorded) == 1
    with pytest.raises(ValueError), c.timing("relu", n, "parallel", ("serial",)):
        raise ValueError("the kernel failed")
    assert (d.left, d.calls) == (1, 1)  # decided, but a failed call is not counted
    with c.timing("relu", n, "parallel", ("serial",), count=False):  # fuse's calls
        pass
    assert (d.left, d.calls) == (0, 1) and len(recorded) == 1  # run, not counted


def test_fuse_counts_none_of_its_untimed_calls(monkeypatch):
    # fuse's calls decide and run through the kernels' launcher uncounted (fuse/api._COUNTED:
    # counted, each call longer than PERIOD_MAX decided, and a fused rewrite measured slower
    # beside a busy core)
    seen = []
    chosen = engine_numba.chosen

    def spy(*args, **kwargs):
        seen.append(args[4] if len(args) > 4 else kwargs.get("count", True))
        return chosen(*args, **kwargs)

    monkeypatch.setattr(engine_numba, "chosen", spy)
    a = np.linspace(0.0, 1.0, 2 * engine_numba.settings.parallel_min)
    f = chokepoint.fuse("a * 2.0 + 1.0")
    np.testing.assert_array_equal(f(a=a), a * 2.0 + 1.0)
    g = chokepoint.fuse("np.sum(a * 2.0)")
    np.testing.assert_allclose(g(a=a), np.sum(a * 2.0))
    assert seen and not any(seen)
