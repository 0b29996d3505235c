"""Races: agreement, failure isolation, mutation, cache notes, sweeps, the plot."""

import importlib
import json
import sys

import numpy as np
import pytest

from chokepoint.measure.race import (
    ULPS,
    CandidateResult,
    agreement,
    compare_values,
    default_ulps,
    race,
)
from chokepoint.measure.stats import indistinguishable, ranking

FAST = {"min_time": 0.001, "repeats": 3}


def test_agreement_after_promotion_returns_the_dtype_difference():
    ok, mismatch, dtypes = agreement(np.array([0, 1, 1], np.int8), np.array([0.0, 1.0, 1.0]))
    assert ok and mismatch is None
    assert dtypes == {"dtype": "int8", "expected": "float64"}


def test_agreement_catches_a_wrong_value_and_says_where():
    ok, mismatch, dtypes = agreement(np.array([[0, 1], [1, 0]]), np.array([[0, 1], [1, 1]]))
    assert not ok and dtypes is None
    assert mismatch == {"kind": "values", "count": 1, "total": 4, "first_index": [1, 1],
                        "value": 0, "expected": 1}
    assert type(mismatch["value"]) is int  # a Python number: JSON-ready


def test_agreement_of_shapes_scalars_and_the_incomparable():
    assert agreement(np.zeros(3), np.zeros((3, 1)))[1] == {
        "kind": "shape", "shape": [3], "expected_shape": [3, 1]}
    ok, mismatch, _ = agreement(np.float64(2.5), np.float64(1.0))
    assert not ok and mismatch["first_index"] == [] and mismatch["value"] == 2.5
    ok, mismatch, _ = agreement(np.array(["a"]), np.array([1.0]))
    assert not ok and mismatch["value"] == "a" and mismatch["expected"] == 1.0
    ok, mismatch, dtypes = agreement(np.zeros(2, dtype=[("a", "f8")]), np.zeros(2))
    assert not ok and mismatch["kind"] == "incomparable" and mismatch["error"]
    assert dtypes == {"dtype": "[('a', '<f8')]", "expected": "float64"}


def test_agreement_shape_nan_and_tolerance():
    assert agreement(np.zeros(3), np.zeros((3, 1)))[0] is False
    assert agreement(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))[0]
    assert not agreement(np.array([1.0]), np.array([1.0 + 1e-9]))[0]
    assert agreement(np.array([1.0]), np.array([1.0 + 1e-9]), rtol=1e-6)[0]


def test_race_reports_fields_and_agreement(roof):
    r = race(["np.ceil(np.clip(X, 0, 1))", "(X > 0).view('i1')", "X > 1"],
             "X = np.random.randn(200, 100)", roof=roof, **FAST)
    ref, fast, wrong = r.candidates
    assert r.reference == "np.ceil(np.clip(X, 0, 1))"
    assert ref.agrees is None and fast.agrees is True and wrong.agrees is False
    assert wrong.mismatch["kind"] == "values" and wrong.mismatch["total"] == 20000
    assert wrong.dtype_differs == {"dtype": "bool", "expected": "float64"}
    assert fast.mismatch is None and fast.dtype_differs == {"dtype": "int8",
                                                            "expected": "float64"}
    assert "differs" in wrong.note
    for c in r.candidates:
        assert c.median_s > 0 and c.runs == 3 and c.loops >= 1
        assert c.gbps > 0 and c.roof_fraction == pytest.approx(c.gbps * 1e9 / roof.bandwidth)
        assert c.cache_hot and c.copies is None and 0 < c.bytes < c.cache_bytes
        assert "cache-hot" in c.note
    assert min(c.relative for c in r.candidates) == pytest.approx(1.0)


def test_failed_candidate_does_not_stop_the_others(roof):
    r = race(["X + 1", "1 / 0", "X * 3"], "X = np.ones(10)", roof=roof, **FAST)
    assert r.candidates[1].error.startswith("ZeroDivisionError")
    assert r.candidates[1].median_s is None and r.candidates[1].agrees is None
    assert r.candidates[2].median_s > 0 and r.candidates[2].agrees is False


def test_candidates_get_fresh_inputs_and_mutation_is_noted(roof):
    r = race(["X.sort()", "X.copy()"], "X = np.arange(10.0)[::-1].copy()", reference=1,
             roof=roof, **FAST)
    assert r.candidates[0].mutates == ["X"] and r.candidates[0].writes == []
    assert r.candidates[1].mutates == []  # got its own X
    assert "mutates its inputs (X)" in r.candidates[0].note


def test_a_statement_changing_its_inputs_is_timed_on_them_as_set_up(roof):
    # After its first call B[B < 0] = 0 finds no negatives left: timed again and again on what
    # it left (as %timeit does) it looked 1.3x faster than np.maximum; on the data it was given
    # it is about 9x slower (a random boolean mask's branchy store against one pass)
    r = race(["B[B < 0] = 0", "np.maximum(B, 0, out=B)"],
             "B = np.random.default_rng(0).standard_normal((2000, 2000))",
             roof=roof, min_time=0.05, repeats=5)
    masked, maximum = r.candidates
    assert masked.mutates == ["B"] and maximum.writes == ["B"] and maximum.mutates == []
    # a statement with no value is compared by what it leaves in the arrays it changed
    assert maximum.agrees is True and maximum.not_compared is None
    assert maximum.median_s * 3 < masked.median_s, (masked.times, maximum.times)
    assert "put back before every call" in masked.note


def test_a_reference_with_no_value_leaves_the_others_not_compared(roof):
    r = race(["pass", "X + 1", "X.sort()"], "X = np.arange(4.0)[::-1].copy()", roof=roof,
             **FAST)
    _, valued, sorts = r.candidates
    assert valued.not_compared == "reference-no-value" and valued.agrees is None
    assert sorts.not_compared == "reference-no-value"  # it leaves X sorted: a value
    assert "the reference returns no value" in valued.note


def test_out_buffer_is_output_not_mutation(roof):
    r = race(["np.add(X, 1, out=Y)", "X + 1"], "X = np.ones(100); Y = np.empty(100)",
             roof=roof, **FAST)
    assert r.candidates[0].writes == ["Y"] and r.candidates[0].mutates == []
    assert r.candidates[1].writes == []
    assert "writes its result into Y" in r.candidates[0].note
    assert r.candidates[1].agrees is True


def test_user_namespace_is_never_mutated(roof):
    user = {"A": np.arange(5.0)}
    race(["A.fill(7)"], namespace=user, roof=roof, **FAST)
    assert np.array_equal(user["A"], np.arange(5.0))


def _user_functions() -> dict:
    """A user's namespace whose functions change its globals (as in IPython)."""
    user = {"np": np}
    exec("CALLS = []\n"
         "G = np.zeros(100)\n"
         "def count():\n    CALLS.append(1)\n    return len(CALLS)\n"
         "def accumulate(X):\n    np.add(G, X, out=G)\n    return G.sum()\n", user)
    return user


def test_the_globals_of_the_users_functions_are_put_back(roof):
    # %race count() appended 6181 times to the user's list; accumulate left G at 21080
    user = _user_functions()
    r = race(["count()", "accumulate(np.ones(100))"], namespace=user, roof=roof, **FAST)
    assert user["CALLS"] == [] and not user["G"].any()
    counted, summed = r.candidates
    assert counted.changes_globals == ["count()'s global CALLS"]
    assert summed.changes_globals == ["accumulate()'s global G"]
    assert "count()'s global CALLS): put back before every later run" in counted.note
    # timed on the state as it was: every call appends to an empty list, adds to zeros
    assert counted.error is None and summed.error is None


def test_a_candidate_that_fails_on_its_second_run_says_so(roof):
    user = {"L": [np.ones(3)]}
    r = race(["L.pop() * 2", "np.ones(3) * 2"], namespace=user, roof=roof, **FAST)
    assert r.candidates[0].error == "raised IndexError on its 2nd run: pop from empty list"
    assert r.candidates[1].error is None
    assert len(user["L"]) == 1


def test_non_deterministic_setup_is_not_compared(roof):
    r = race(["X + 0", "X * 1"], "X = np.random.default_rng().standard_normal(5)",
             roof=roof, **FAST)
    assert r.candidates[1].agrees is None
    assert r.candidates[1].not_compared == "other-inputs"
    assert r.candidates[1].differing_inputs == ["X"]
    assert "deterministic" in r.candidates[1].note


def test_callables_and_labels(roof):
    def doubled(X):
        return X * 2

    r = race([("twice", "X + X"), doubled], "X = np.arange(4.0)", roof=roof, **FAST)
    assert [c.statement for c in r.candidates] == ["twice", "test_callables_and_labels."
                                                   "<locals>.doubled"]
    assert r.candidates[1].agrees is True


def test_rotation_among_copies(roof):
    r = race(["X + 1"], "X = np.ones(400_000)", rotate=True, roof=roof, **FAST)
    assert r.candidates[0].copies > 1 and not r.candidates[0].cache_hot
    assert "rotated among" in r.candidates[0].note
    tiny = race(["X + 1"], "X = np.ones(10)", rotate=True, roof=roof, **FAST)
    # 64 copies still fit: said, not hidden
    assert tiny.candidates[0].cache_hot and tiny.candidates[0].copies is None


def test_size_sweep_and_plot(roof, tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    r = race(["X + 1", "np.sort(X)"], "X = np.random.randn(n)", sizes=[10, 1000, 10000],
             roof=roof, **FAST)
    assert r.sizes == [10, 1000, 10000]
    assert all(len(v) == 3 and all(t > 0 for t in v) for v in r.sweep.values())
    data = r.to_dict()
    assert data["sizes"] == [10, 1000, 10000] and set(data["sweep"]) == {"X + 1", "np.sort(X)"}
    for suffix in (".png", ".svg"):
        path = r.plot(tmp_path / f"race{suffix}")
        assert path.stat().st_size > 1000
    assert (tmp_path / "race.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "race.svg").read_bytes()[:500]
    with pytest.raises(ValueError, match=r"png or \.svg"):
        r.plot(tmp_path / "race.jpg")


@pytest.mark.parametrize("bad", [[-5], [0], [3.7], [True], [10, "100"], [float("nan")]])
def test_sizes_must_be_positive_integers_before_anything_runs(roof, bad):
    # issue 32.15: -5, 3.7 and True were swept
    ran = []
    with pytest.raises(ValueError, match="sizes must be positive integers"):
        race([lambda: ran.append(1)], lambda n: ran.append(n) or {}, sizes=bad, roof=roof,
             **FAST)
    assert ran == []


def test_whole_sizes_of_any_number_type_are_swept(roof):
    r = race(["X + 1"], "X = np.ones(n)", sizes=[np.int64(10), 1e2], roof=roof, **FAST)
    assert r.sizes == [10, 100] and all(type(n) is int for n in r.sizes)


def test_a_failure_at_a_smaller_size_is_kept_and_said(roof):
    # issue 32.15: a failure at an earlier size was only a None hole in the sweep
    r = race(["X + 1", "X[20]"], "X = np.ones(n)", sizes=[10, 100], roof=roof, **FAST)
    assert r.sweep["X[20]"][0] is None and r.sweep["X[20]"][1] > 0
    assert r.sweep_errors["X + 1"] == [None, None]
    first, last = r.sweep_errors["X[20]"]
    assert first.startswith("IndexError: index 20 is out of bounds") and last is None
    assert json.loads(json.dumps(r.to_dict()))["sweep_errors"] == r.sweep_errors
    assert f"X[20] failed at n=10: {first}" in r.table()


def test_identical_candidates_keep_their_own_sweep_bar_and_reference_mark(roof):
    # issue 32.15: two "X + 1" merged into one sweep of 4 values, both marked reference
    r = race(["X + 1", "X + 1", ("X + 1", "X * 1")], "X = np.ones(n)", sizes=[10, 100],
             roof=roof, **FAST)
    assert [c.statement for c in r.candidates] == ["X + 1", "X + 1 #2", "X + 1 #3"]
    assert r.reference == "X + 1"
    assert all(len(medians) == 2 for medians in r.sweep.values()) and len(r.sweep) == 3
    assert r.table().count("[reference]") == 1


def test_candidates_alike_in_their_first_48_characters_get_a_bar_each(roof):
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    import matplotlib.pyplot as plt

    from chokepoint.report.plots import race_figure

    head = "X" + " + 0 * X" * 6  # 55 characters
    r = race(["X + 1", head + " + 1", head + " + 2"], "X = np.ones(100)", roof=roof, **FAST)
    ax = race_figure(r).axes[0]
    bars = [p for p in ax.patches if p.get_height() > 0 and p.get_width() > 0]
    assert len({b.get_y() for b in bars}) == 3  # not two bars on one row
    assert [bool(b.get_hatch()) for b in bars] == [True, False, False]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(set(labels)) == 3 and labels[0] == "X + 1\n(reference)"
    plt.close("all")


def test_keyboard_interrupt_returns_results_so_far(roof):
    def interrupt():
        raise KeyboardInterrupt

    # Ctrl-C while the candidates are set up: those set up so far, checked, not timed
    r = race(["X + 1", interrupt, "X + 2"], "X = np.ones(3)", roof=roof, **FAST)
    assert r.interrupted and "Ctrl-C" in r.interrupted
    assert len(r.candidates) == 1 and r.candidates[0].median_s is None
    assert r.candidates[0].interrupted and r.candidates[0].runs == 0
    assert "not timed: interrupted" in r.candidates[0].note


def test_keyboard_interrupt_while_timed_keeps_the_repeats_so_far(roof):
    calls = [0]

    def interrupt_later():
        calls[0] += 1
        if calls[0] > 3:  # after the value, the calibration and a repeat
            raise KeyboardInterrupt

    r = race(["X + 1", interrupt_later, "X + 2"], "X = np.ones(3)", roof=roof,
             min_time=0.0, repeats=5)
    assert r.interrupted and "Ctrl-C" in r.interrupted
    assert len(r.candidates) == 3
    assert all(c.median_s > 0 and 1 <= c.runs < 5 for c in r.candidates)
    assert all(c.interrupted and c.runs_planned == 5 for c in r.candidates)
    assert "interrupted after" in r.candidates[0].note


def test_candidates_are_timed_round_robin(roof):
    order = []

    def make(name):
        def fn():
            order.append(name)
        fn.__qualname__ = name
        return fn

    r = race([make("A"), make("B"), make("C")], roof=roof, min_time=0.0, repeats=4)
    assert all(c.runs == 4 and c.loops == 1 for c in r.candidates)
    # one call each to get the value, one each to calibrate (a repeat dropped: it is not
    # interleaved), then C B A, A B C, ...: each follows each other one alike
    forward, backward = ["A", "B", "C"], ["C", "B", "A"]
    assert order == forward * 2 + (backward + forward) * 2


def test_a_candidate_failing_while_timed_fails_alone(roof):
    calls = [0]

    def fails_later():
        calls[0] += 1
        if calls[0] > 2:
            raise ValueError("only twice")

    r = race(["X + 1", fails_later, "X + 2"], "X = np.ones(3)", roof=roof, **FAST)
    assert r.interrupted is None
    ok, failed, other = r.candidates
    assert failed.error == "raised ValueError on its 3rd run: only twice"
    assert failed.median_s is None
    assert ok.runs == other.runs == 3 and ok.median_s > 0 and other.agrees is False


def test_json_schema_of_design(roof):
    r = race(["X + 1", "X + 1.0"], "X = np.ones(3)", roof=roof, **FAST)
    data = json.loads(json.dumps(r.to_dict()))
    # docs/interfaces.md's fields keep their names; the second round adds mode and the ratios
    # and what else the machine did during the race (issue 34, item 5)
    assert set(data) == {"reference", "candidates", "machine", "mode", "load"}
    assert data["mode"] == "in-process"
    if sys.platform.startswith("linux"):
        assert set(data["load"]) == {"seconds", "cpus", "own", "others", "steal", "busy"}
    assert set(data["candidates"][0]) == {
        "statement", "median_s", "iqr_s", "min_s", "runs", "loops", "relative", "gbps",
        "roof_fraction", "agrees", "error", "note", "ratio", "ratio_ci", "repeats_needed",
        # what notes said in words, as fields (issue 12.7)
        "writes", "mutates", "copies", "cache_hot", "bytes", "cache_bytes", "mismatch",
        "dtype_differs", "not_compared", "differing_inputs", "interrupted", "runs_planned",
        "workers", "workers_planned", "stale_roof",
        # globals of the user's functions it changed, put back (issue 32, item 1)
        "changes_globals",
        # the tolerance floats were compared with (issue 34, item 3)
        "tolerance"}
    ref, other = data["candidates"]
    assert ref["ratio"] is None and ref["ratio_ci"] is None
    low, high = other["ratio_ci"]
    assert low <= other["ratio"] <= high


def test_json_has_the_structured_fields_and_the_note_in_words(roof):
    r = race(["X + 1", "np.add(X, 1, out=Y)", "X + 1 + (X > 2)"],
             "X = np.arange(5.0); Y = np.empty(5)", roof=roof, **FAST)
    ref, into, wrong = json.loads(json.dumps(r.to_dict()))["candidates"]
    assert into["writes"] == ["Y"] and into["mutates"] == [] and into["agrees"] is True
    assert "writes its result into Y" in into["note"]
    assert wrong["mismatch"] == {"kind": "values", "count": 2, "total": 5,
                                 "first_index": [3], "value": 5.0, "expected": 4.0}
    assert wrong["note"].startswith("differs at 2 of 5 elements, first at index (3,) "
                                    "(5.0 vs 4.0)")
    assert ref["mismatch"] is None and ref["cache_hot"] is True and ref["runs_planned"] == 3


def test_bad_arguments(roof):
    with pytest.raises(ValueError, match="at least one"):
        race([], roof=roof)
    with pytest.raises(ValueError, match="reference"):
        race(["1"], reference=3, roof=roof)
    with pytest.raises(TypeError, match="candidate"):
        race([42], roof=roof)


def test_a_candidate_too_deep_to_compile_fails_alone(roof):
    # issue 13.5: a MemoryError or RecursionError compiling one candidate stopped the race
    r = race(["X", "-" * 100000 + "X", "-" * 1000 + "X", "X + 1"], "X = np.ones(10)",
             roof=roof, **FAST)
    assert r.interrupted is None
    assert [c.error is None for c in r.candidates] == [True, False, False, True]
    assert all("too deeply nested" in c.error for c in r.candidates[1:3])
    assert r.candidates[3].median_s > 0


@pytest.mark.parametrize("code", ["raise SystemExit(3)", "import sys; sys.exit()",
                                  "raise MemoryError", "raise RecursionError('deep')"])
def test_a_candidate_raising_exit_or_memory_error_fails_alone(roof, code):
    # issue 13.5: SystemExit escaped race (results lost); a MemoryError stopped it
    def deep(X):
        return deep(X)

    r = race(["X", code, deep, "X + 1"], "X = np.ones(10)", roof=roof, **FAST)
    assert r.interrupted is None
    assert [c.error is None for c in r.candidates] == [True, False, False, True]
    assert r.candidates[1].error.split(":")[0] in {
        "SystemExit", "MemoryError", "RecursionError"}
    assert r.candidates[2].error.startswith("RecursionError")
    assert r.candidates[3].median_s > 0 and r.candidates[3].agrees is False


def test_identical_candidates_are_indistinguishable(roof):
    # Rotation gives each candidate 40 independently allocated copies of X: two arrays alike
    # in every value can still differ in speed by where they lie in memory (here the first
    # candidate's X ran up to 10% faster than identical later ones), and that is a property
    # of the arrays, not of the code. In a process whose heap earlier work had fragmented
    # (this suite's explain and fuse tests), rotated identical candidates still measured
    # 1.06-1.45x apart, race after race: each candidate is set up in fresh worker processes
    # (processes=2), as a user wanting the fairest comparison would. With the placement
    # averaged out, identical code is identical within 2% (stats.SAME_WITHIN: even so, one
    # full-suite run measured 1.006-1.012x with intervals [1.001, 1.019] three times).
    # A 95% interval misses the truth in about one race in twenty by construction, and more
    # often on a shared machine whose load comes in bursts (CI once measured 1.29x, [1.08,
    # 1.37], for identical code): a race that ranks the two is run again, up to five times. A
    # correct interval misranks all five well under once in a thousand suites; one that is too
    # narrow misranks nearly always, as the made-up repeats of test_stats show. Reaching 1 +- 2%
    # honestly is either "indistinguishable" or, with wide repeats, "too noisy" (issue 34.4).
    seen = []
    for _ in range(5):
        r = race(["X.copy()", "X.copy()"], "X = np.random.randn(100_000)", rotate=True,
                 roof=roof, min_time=0.01, repeats=10, processes=2)
        ref, same = r.candidates
        assert same.copies > 1
        assert ref.ratio is None and ref.ratio_ci is None
        seen.append((same.ratio, same.ratio_ci))
        if indistinguishable(same.ratio_ci):
            break
    assert ranking(same.ratio_ci) in ("indistinguishable", "too noisy"), seen
    assert ranking(same.ratio_ci) in r.table()


def test_the_origin_question_is_far_from_one(roof):
    r = race(["np.ceil(np.clip(X, 0, 1))", "(X >= 0).view('i1')"],
             "X = np.random.randn(3072, 1000)", roof=roof, min_time=0.01, repeats=10)
    fast = r.candidates[1]
    assert fast.agrees is True
    low, high = fast.ratio_ci
    assert low <= fast.ratio <= high < 0.8, (fast.ratio, fast.ratio_ci)
    assert "faster than np.ceil(np.clip(X, 0, 1))" in r.table()


def test_failed_candidates_and_a_failed_reference_have_no_ratio(roof):
    r = race(["X + 1", "1 / 0", "X * 3"], "X = np.ones(10)", roof=roof, **FAST)
    assert r.candidates[1].ratio is None and r.candidates[1].ratio_ci is None
    assert r.candidates[2].ratio > 0
    r = race(["1 / 0", "X * 3"], "X = np.ones(10)", roof=roof, **FAST)
    assert all(c.ratio is None and c.ratio_ci is None for c in r.candidates)


def test_a_noisy_candidate_is_told_how_many_repeats_it_needs():
    from chokepoint.measure.race import CandidateResult, _ratios, _store
    from chokepoint.measure.timer import Measurement

    quiet, noisy = CandidateResult("quiet"), CandidateResult("noisy")
    # the first repeat is the calibration's and is dropped
    _store(quiet, Measurement(times=[9.0, 1.0, 1.01, 0.99, 1.0, 1.0], loops=1))
    _store(noisy, Measurement(times=[9.0, 1.0, 1.3, 0.8, 1.1, 0.9], loops=1))
    _ratios([quiet, noisy], 0)
    assert quiet.runs == noisy.runs == 5
    assert quiet.repeats_needed is None and "noisy" not in quiet.note
    assert noisy.iqr_s == pytest.approx(0.2)
    assert noisy.repeats_needed == 54  # IQR 20% of the median: (36.4 * 0.2) ** 2
    assert "IQR is 20% of the median" in noisy.note and "--repeats 54" in noisy.note


def test_plot_without_sizes_is_a_bar_chart_with_the_reference_marked(roof, tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    from chokepoint.report.plots import race_figure

    r = race(["X + 1", "X * 2", "1 / 0"], "X = np.ones(1000)", roof=roof, **FAST)
    fig = race_figure(r)
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_height() > 0 and p.get_width() > 0]
    assert len(bars) == 2  # the failed candidate has no bar
    assert [bool(b.get_hatch()) for b in bars] == [True, False]  # the reference hatched
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["X + 1\n(reference)", "X * 2"]
    whiskers = next(c for c in ax.containers if hasattr(c, "has_xerr"))
    segments = whiskers.lines[2][0].get_segments()
    assert whiskers.has_xerr and len(segments) == 2
    for bar, segment, c in zip(bars, segments, r.candidates, strict=False):
        # whiskers from the first to the third quartile of the repeats, in the bar's units
        q1, q3 = np.percentile(c.times, [25, 75])
        (x0, _), (x1, _) = segment
        assert x0 / bar.get_width() == pytest.approx(q1 / c.median_s)
        assert x1 / bar.get_width() == pytest.approx(q3 / c.median_s)
    import matplotlib.pyplot as plt

    plt.close(fig)
    path = r.plot(tmp_path / "bars.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _stale_roof():
    import dataclasses

    from tests.conftest import small_roof

    # a cached roofline whose bandwidth is far too low: 0.1 GB/s read
    return dataclasses.replace(small_roof(), read_bw=1e8, read_bw_1t=1e8)


STREAMING = "X = np.ones(2**23)"  # 64 MiB in, 64 MiB out: past any last-level cache here


def test_a_stale_roofline_is_noticed_and_its_ceiling_measured_again():
    stale = _stale_roof()
    r = race(["X + 1"], STREAMING, roof=stale, **FAST)
    c = r.candidates[0]
    assert not c.cache_hot and "cache-hot" not in c.note
    assert c.stale_roof["fraction"] > 1 and c.stale_roof["bandwidth"] == 1e8
    assert c.stale_roof["rechecked"] > 1e9 and c.stale_roof["error"] is None
    assert "the roofline no longer holds" in c.note and "0.1 GB/s" in c.note
    assert "re-measured now" in c.note
    assert r.machine["roofline_stale"] is True
    assert r.machine["read_bw_cached"] == 1e8
    assert r.machine["read_bw"] == r.machine["read_bw_rechecked"] > 1e9
    assert c.roof_fraction == pytest.approx(c.gbps * 1e9 / r.machine["read_bw"])


def test_a_stale_roofline_that_cannot_be_measured_is_said_to_be_stale(monkeypatch):
    roofline_module = importlib.import_module("chokepoint.measure.roofline")

    def broken(*args, **kwargs):
        raise MemoryError("no room for the arrays")

    monkeypatch.setattr(roofline_module, "measure_bandwidths", broken)
    r = race(["X + 1"], STREAMING, roof=_stale_roof(), **FAST)
    c = r.candidates[0]
    assert c.stale_roof["rechecked"] is None and "MemoryError" in c.stale_roof["error"]
    assert "the roofline is stale" in c.note and "MemoryError" in c.note
    assert c.roof_fraction > 1 and r.machine["read_bw"] == 1e8  # placed as before


def test_the_ceiling_is_measured_once_per_race_and_only_for_streaming_candidates(monkeypatch):
    roofline_module = importlib.import_module("chokepoint.measure.roofline")

    calls = []

    def fake(nbytes, min_time, kinds=roofline_module.BANDWIDTHS):
        calls.append((nbytes, min_time, kinds))
        return {"read_bw": 5e7}  # lower still: the roofline was not what was wrong

    monkeypatch.setattr(roofline_module, "measure_bandwidths", fake)
    r = race(["X + 1", "X * 2"], "X = np.ones(n)", sizes=[2**22, 2**23], roof=_stale_roof(),
             **FAST)
    assert len(calls) == 1 and calls[0][2] == ("read_bw",) and calls[0][1] <= 0.05
    assert all("no higher: the roofline is not what is wrong" in c.note for c in r.candidates)
    calls.clear()
    hot = race(["X + 1"], "X = np.ones(1000)", roof=_stale_roof(), **FAST)
    assert calls == [] and hot.candidates[0].cache_hot
    assert hot.candidates[0].stale_roof is None


def test_agreement_compares_tuples_lists_and_dicts_item_by_item():
    grad = np.arange(4.0)
    assert agreement((np.float64(1.5), grad), (1.5, grad.copy())) == (True, None, None)
    assert agreement({"loss": 1.0, "grad": [grad]}, {"loss": 1.0, "grad": (grad,)})[0]
    ok, mismatch, dtypes = agreement((1.5, grad + np.array([0, 0, 1, 1])), (1.5, grad))
    assert not ok and dtypes is None
    assert mismatch == {"kind": "values", "count": 2, "total": 5, "first_index": [2],
                        "value": 3.0, "expected": 2.0, "path": "[1]"}
    ok, mismatch, dtypes = agreement({"loss": np.float32(2.0)}, {"loss": 2.0})
    assert ok and dtypes == {"dtype": "float32", "expected": "float64", "path": "['loss']"}
    ok, mismatch, _ = agreement((1.0, grad), (1.0, grad, 2))
    assert not ok and mismatch == {"kind": "structure", "path": "", "structure": "tuple of 2",
                                   "expected_structure": "tuple of 3"}
    ok, mismatch, _ = agreement((1.0, grad[:2]), (1.0, grad))
    assert not ok and mismatch["kind"] == "shape" and mismatch["path"] == "[1]"


def test_race_of_functions_returning_a_tuple(roof):
    """xent(...) returning (loss, grad): both run, are compared item by item, and their
    bytes count both items."""
    setup = "X = np.linspace(-1, 1, 1000)"
    r = race(["(float(X.sum()), X * 2)", "(float(X.sum()), X + X)", "(X.sum(), X * 3)"],
             setup, roof=roof, **FAST)
    ref, same, wrong = r.candidates
    assert ref.error is None and same.error is None and wrong.error is None
    assert same.agrees is True and wrong.agrees is False
    assert wrong.mismatch["path"] == "[1]" and wrong.mismatch["total"] == 1001
    assert "first at [1], index (0,)" in wrong.note
    assert ref.bytes == 8000 + 8 + 8000


def test_floats_agree_within_ulps_of_the_reference_scale_integers_exactly():
    x = np.linspace(-3, 3, 101)
    ref = np.exp(x)
    eps = np.finfo(np.float64).eps
    close = ref + 2 * eps * ref.max()  # a vectorised exp's rounding, within a few ulp
    assert not agreement(close, ref)[0]  # exact unless told otherwise
    ok, mismatch, _, tol = compare_values(close, ref, ulps=4)
    assert ok and mismatch is None
    assert tol == {"ulps": 4, "rtol": 0.0, "atol": pytest.approx(4 * eps * ref.max()),
                   "scale": ref.max(), "max_difference": pytest.approx(2 * eps * ref.max())}
    ok, mismatch, _, tol = compare_values(ref + 1e-9, ref, ulps=4)
    assert not ok and mismatch["count"] == 101 and tol["max_difference"] > tol["atol"]
    assert compare_values(ref, ref.copy(), ulps=4) == (True, None, None, None)
    assert not agreement(np.array([3]), np.array([4]), ulps=1e9)[0]  # integers: exact
    assert not agreement(np.array([True]), np.array([False]), ulps=1e9)[0]
    ok, _, _, tol = compare_values(close, ref, rtol=1e-12, ulps=4)  # rtol/atol override ulps
    assert ok and tol["ulps"] is None and tol["rtol"] == 1e-12 and tol["scale"] is None


def test_default_ulps_grow_with_what_each_result_element_sums():
    def made(reads, elements):
        return CandidateResult("X", read_elements=reads, elements=elements)

    assert default_ulps(made(1, 1), made(1, 1)) == ULPS  # one element, elementwise
    assert default_ulps(made(10**6, 1), made(10**6, 1)) == pytest.approx(4 * 1000)  # a sum
    assert default_ulps(made(2 * 10**4, 10**4), made(2 * 10**4, 10**4)) == pytest.approx(
        4 * (2 * 10**4) ** 0.25)  # a 100x100 matrix product: its inner dimension


def test_race_agreement_allows_rounding_and_states_the_tolerance(roof):
    r = race(["np.sum(X)", "np.cumsum(X)[-1]", "np.einsum('i->', X)", "np.sum(X) + 1e-6"],
             "X = np.random.randn(100_000)", roof=roof, **FAST)
    _, naive, einsum, wrong = r.candidates
    assert naive.agrees is True and einsum.agrees is True and wrong.agrees is False
    assert naive.tolerance["ulps"] == pytest.approx(4 * 100_000 ** 0.5)
    assert 0 < naive.tolerance["max_difference"] <= naive.tolerance["atol"]
    assert "agrees within 1.26e+03 ulp of the reference's largest magnitude" in naive.note
    assert "beyond 1.26e+03 ulp" in wrong.note
    exact = race(["np.sum(X)", "np.cumsum(X)[-1]"], "X = np.random.randn(100_000)",
                 rtol=0, atol=0, roof=roof, **FAST)
    assert exact.candidates[1].agrees is False
    assert "beyond rtol 0, atol 0" in exact.candidates[1].note
