"""How a line's analysis turns measured numbers into what it reports (no timing here)."""

from types import SimpleNamespace

import pytest

from chokepoint.program.analyse import _rewrite


def _found(speedup: float) -> dict:
    return {"statement": "chokepoint.fuse('a * b + c')(a=a, b=b, c=c)", "speedup": speedup,
            "measured_s": 1e-3 / speedup, "values": "same values", "note": ""}


@pytest.mark.parametrize(("replay_s", "expected_s"), [
    (3e-3, 400 * 1e-3 * 0.5),  # replayed slower than a run in the program: the run's time
    (0.5e-3, 400 * 0.5e-3 * 0.5),  # replayed faster: the replay's
])
def test_a_rewrite_saves_its_ratio_of_the_smaller_of_replay_and_program_run(replay_s,
                                                                            expected_s):
    # a 2x rewrite of a line that took 1 ms a run in the program over 400 runs saves half of
    # each run as the program took it, not half of a replay on fresh pages that took longer
    best = _rewrite(_found(2.0), [], replay_s, SimpleNamespace(hits=400), line_s=0.4)
    assert best["saved_s"] == pytest.approx(expected_s)
    assert best["saved_s"] < 0.4  # never the whole line for a 2x rewrite


def test_a_rewrite_not_faster_is_not_proposed():
    assert _rewrite(_found(1.01), [], 1e-3, SimpleNamespace(hits=10), line_s=0.01) is None
