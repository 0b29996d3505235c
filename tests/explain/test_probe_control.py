"""A value probe's confirmation exchanges the two sides' memory: an effect that follows the
memory (pages that read slower) and not the values is not reported. No timing: the operation
returns a made-up time for what it was given, and the probe's timer reports that."""

import numpy as np
import pytest

from chokepoint.explain import probes
from chokepoint.explain.probes import ProbeSettings, same_layout
from chokepoint.explain.trace import Op
from chokepoint.measure.timer import Measurement


@pytest.fixture
def timed_by_result(monkeypatch):
    """`_pair` with each side's "time" the value its call returns, five repeats a side."""
    def pair(base_fn, changed_fn, settings, *, early=True):
        return tuple(Measurement(times=[float(fn())] * 5, loops=1)
                     for fn in (base_fn, changed_fn))
    monkeypatch.setattr(probes, "_pair", pair)


def confirmed(make_time):
    """The constant probe of an operation whose made-up time ``make_time(a, base)`` gives for
    its operand ``a`` (``base``: the probe's copy of the traced values), and the arrays put back
    as they were."""
    x = np.arange(8.0)
    base = same_layout(x, x)  # the probe's copy of the traced values
    stand_in = same_layout(x, 7.0)  # and its constant stand-in
    op = Op("f", lambda a: make_time(a, base), (x,), {}, [x], x + 0, 64, 64, True, False, 1e-3)
    probe = probes._compared("constant", op, (stand_in,), {}, None, ProbeSettings(), "made up",
                             base=((base,), {}))
    assert (base == x).all() and (stand_in == 7.0).all()  # the exchange was undone
    assert len(probe.base.times) == 10  # significant the first time: timed again
    return probe


def test_an_effect_of_the_memory_is_not_an_effect_of_the_values(timed_by_result):
    assert not confirmed(lambda a, base: 2.0 if a is base else 1.0).significant()


def test_an_effect_of_the_values_stays(timed_by_result):
    probe = confirmed(lambda a, base: 1.0 if (a == 7.0).all() else 2.0)
    assert probe.significant() and probe.saved == pytest.approx(1.0)


def test_operand_pairs_pair_each_differing_array_once():
    a, b, c = np.zeros(3), np.ones(3), np.full(3, 2.0)
    pairs = probes._operand_pairs(((a, a, [c]), {"w": a}), ((b, b, [c]), {"w": b}))
    assert len(pairs) == 1 and pairs[0][0] is a and pairs[0][1] is b
