"""The engine's variant choices: the decision rules on made-up timings, the cache, and the
engine using what was chosen (no timing in the assertions)."""

import json

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels import engine_numba, tuning


def test_parallel_from_the_size_where_it_wins_for_good():
    times = {4096: (1.0, 2.0), 8192: (2.0, 1.0), 16384: (4.0, 5.0), 32768: (8.0, 4.0),
             65536: (16.0, 8.0)}
    assert tuning.choose_parallel_min(times, threads=2) == 32768  # 16384 lost again


def test_each_variant_keeps_its_fastest_pass(monkeypatch):
    # one pass slowed parallel at 65536 (interference); the other two passes saw it win
    rounds = iter([{4096: (1.0, 2.0), 65536: (16.0, 40.0)}, {4096: (1.0, 2.0), 65536: (17.0, 8.0)},
                   {4096: (1.2, 2.0), 65536: (16.5, 9.0)}])
    calls = []

    def fake_pair(a, b, min_time):
        calls.append(None)
        n = [4096, 65536][(len(calls) - 1) % 2]
        if n == 4096:
            fake_pair.current = next(rounds)
        return fake_pair.current[n]

    monkeypatch.setattr(tuning, "_SIZES", (4096, 65536))
    monkeypatch.setattr(tuning, "_pair", fake_pair)
    chosen, evidence = tuning._parallel_min(engine_numba, 0.001)
    assert len(calls) == 2 * tuning.PASSES  # every size once a pass
    assert evidence["65536"] == {"serial_s": 16.0, "parallel_s": 8.0}
    assert chosen == 65536


def test_no_winner_keeps_the_default_unless_there_is_one_thread():
    losing = {4096: (1.0, 2.0), 8192: (2.0, 3.0)}
    assert tuning.choose_parallel_min(losing, threads=2) == tuning.DEFAULT.parallel_min
    assert tuning.choose_parallel_min(losing, threads=1) >= 1 << 62


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    path = tmp_path / "tuning.json"
    monkeypatch.setattr(tuning, "cache_path", lambda: path)
    tuning.forget()
    yield path
    path.unlink(missing_ok=True)  # a damaged file is not read (and said) again
    tuning.forget()
    engine_numba.apply_tuning(tuning.current())


def test_defaults_before_tuning_and_the_cache_after(isolated_cache, monkeypatch):
    assert tuning.current() == tuning.DEFAULT
    # made-up timings: streaming the masks wins, streaming the maps does not
    fake = iter([(1.0, 1.0)] * len(tuning._SIZES) * tuning.PASSES
                + [(1.0, 1.0)] * tuning.PASSES + [(4.0, 1.0)] * tuning.PASSES)
    monkeypatch.setattr(tuning, "_pair", lambda a, b, min_time: next(fake))
    tuned = tuning.tune(engine_numba)
    assert (tuned.stream_maps, tuned.stream_masks) == (False, True)
    assert tuned.parallel_min == tuning.DEFAULT.parallel_min  # no size won
    saved = json.loads(isolated_cache.read_text())
    assert saved["stream_masks"] is True and saved["measured_at"]
    tuning.forget()
    assert tuning.current() == tuned  # read back from the cache


def test_the_engine_follows_the_choices(isolated_cache):
    x = np.linspace(-1, 1, 1000)
    expected = np.maximum(x, 0)
    try:
        engine_numba.apply_tuning(tuning.Tuning(parallel_min=16, stream_maps=False,
                                                stream_masks=False))
        assert engine_numba.settings.parallel_min == 16
        big = np.ones(engine_numba.settings.stream_min_bytes // 8)
        assert not engine_numba.streams("relu")
        assert not engine_numba.can_stream("relu", (big,), np.empty_like(big))
        assert not engine_numba.can_stream("mask_backward", (big,), big)
        assert np.array_equal(chokepoint.relu(x), expected)  # parallel at 1000 elements now
        engine_numba.apply_tuning(tuning.Tuning(stream_maps=True, stream_masks=True))
        assert engine_numba.streams("relu")
        assert engine_numba.can_stream("relu", (big,), np.empty_like(big))
        assert engine_numba.can_stream("mask_backward", (big,), big)
    finally:
        engine_numba.apply_tuning(tuning.current())


def test_a_corrupt_cache_means_the_defaults(isolated_cache):
    isolated_cache.write_text("{not json")
    with pytest.warns(RuntimeWarning, match="tuning cache .* damaged"):  # said, not hidden
        assert tuning.current() == tuning.DEFAULT
