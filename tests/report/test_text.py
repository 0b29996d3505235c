"""Text reports: user strings are printed as written, never parsed as rich markup."""

from types import SimpleNamespace

from chokepoint.explain.api import Explanation
from chokepoint.explain.findings import Finding, RuledOut
from chokepoint.measure.race import CandidateResult, RaceResult
from chokepoint.report.text import explanation_text, race_text

#: strings that rich would take for markup: a style tag, a closing tag, an escape
HOSTILE = ["X[mask]", "len('[/x]') + X", "X[bold]", "[red]X", "X\\[i]"]
MACHINE = {"cpu": "test cpu", "cores": 2, "threads": 2, "read_bw": 20e9}


def _race_result(interrupted=None) -> RaceResult:
    ok = [CandidateResult(statement=s, median_s=1e-6, iqr_s=1e-7, min_s=1e-6, runs=3,
                          loops=10, relative=1.0, agrees=False,
                          mismatch={"kind": "incomparable", "error": f"note {s}"})
          for s in HOSTILE]
    failed = CandidateResult(statement="X[[/b]]", error="IndexError: [/b] bad [index]")
    return RaceResult(reference=HOSTILE[0], candidates=[*ok, failed], machine=MACHINE,
                      interrupted=interrupted)


def test_race_text_prints_statements_notes_and_errors_as_written():
    text = race_text(_race_result(), width=400)
    for s in HOSTILE:
        assert s in text
        assert f"note {s}" in text
    assert "X[mask]  [reference]" in text
    assert "X[[/b]]" in text and "IndexError: [/b] bad [index]" in text


def test_race_text_keeps_the_interrupted_line():
    text = race_text(_race_result(interrupted="stopped: MemoryError [/x]"), width=400)
    assert "[stopped: MemoryError [/x]: results so far]" in text
    assert "[interrupted (Ctrl-C): results so far]" in race_text(
        _race_result(interrupted="interrupted (Ctrl-C)"), width=400)


def test_explanation_text_prints_user_strings_as_written():
    statement = "np.maximum(X[mask], 0) + len('[/x]')"
    op = {"name": "X[mask]", "in_bytes": 8000, "out_bytes": 8000, "allocates": True,
          "time_s": 1e-6, "gbps": 8.0, "roof_fraction": 0.4}
    e = Explanation(
        statement=statement, setup="", median_s=2e-6, iqr_s=1e-7, floor_s=1e-6,
        model=SimpleNamespace(bytes_moved=16000, bytes_min=8000), ops=[op],
        findings=[Finding(kind="temporaries", share=0.5, evidence="X[mask] allocates [/x]",
                          suggestion="write into out=[bold]B")],
        ruled_out=[RuledOut(kind="layout", evidence="strides of X[::2] [i]")],
        machine=MACHINE,
        rewrite={"statement": "np.maximum(X[mask], 0, out=B[red])", "predicted_s": 1e-6,
                 "measured_s": 1e-6, "speedup": 2.0, "note": "reuses [b]B"},
        warnings=["X[mask] copies [/x]"])
    text = explanation_text(e, width=400)
    for expected in [statement, "X[mask]", "X[mask] allocates [/x]", "write into out=[bold]B",
                     "strides of X[::2] [i]", "np.maximum(X[mask], 0, out=B[red])",
                     "reuses [b]B", "note: X[mask] copies [/x]"]:
        assert expected in text, expected


def _ratio_result() -> RaceResult:
    ref = CandidateResult(statement="np.ceil(np.clip(X, 0, 1))", median_s=4e-3, iqr_s=1e-4,
                          min_s=3.9e-3, runs=5, loops=1, relative=2.9)
    same = CandidateResult(statement="np.ceil(np.clip(X, 0.0, 1))", median_s=4.04e-3,
                           iqr_s=1e-4, min_s=3.9e-3, runs=5, loops=1, relative=2.93,
                           ratio=1.01, ratio_ci=[0.97, 1.05])
    fast = CandidateResult(statement="(X >= 0).view('i1')", median_s=1.38e-3, iqr_s=1e-5,
                           min_s=1.3e-3, runs=5, loops=10, relative=1.0, ratio=0.345,
                           ratio_ci=[0.33, 0.36])
    return RaceResult(reference=ref.statement, candidates=[ref, same, fast], machine=MACHINE)


def test_race_text_says_indistinguishable_when_the_interval_contains_one():
    text = race_text(_ratio_result(), width=400)
    assert "1.01x [0.97, 1.05] indistinguishable" in text
    assert "0.345x [0.33, 0.36]" in text
    assert ("np.ceil(np.clip(X, 0.0, 1)) is indistinguishable from np.ceil(np.clip(X, 0, 1)) "
            "(ratio 1.01, 95% interval [0.97, 1.05], within 2% of 1)") in text
    assert "(X >= 0).view('i1') is 2.9x faster than np.ceil(np.clip(X, 0, 1))" in text
    assert text.count("indistinguishable") == 2  # the table and the sentence, not the others


def test_race_html_says_indistinguishable_when_the_interval_contains_one():
    from chokepoint.report.html import race_html

    page = race_html(_ratio_result())
    assert "1.01x [0.97, 1.05] indistinguishable" in page
    assert "id=\"ratios\"" in page and "is 2.9x faster than" in page
