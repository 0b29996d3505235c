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
    assert ("np.ceil(np.clip(X, 0.0, 1)) is indistinguishable from np.ceil(np.clip(X, 0, 1)): "
            "ratio 1.01, the 95% interval [0.97, 1.05] includes 1") in text
    assert "(X >= 0).view('i1') is 2.9x faster than np.ceil(np.clip(X, 0, 1))" in text
    assert text.count("indistinguishable") == 2  # the table and the sentence, not the others


def test_a_wide_interval_is_too_noisy_to_rank_not_indistinguishable():
    """3.1x the reference with the interval [0.35, 4.85] (issue 34, item 4): not called
    indistinguishable; the report says the repeats cannot rank it, and how many would."""
    result = _ratio_result()
    result.candidates[1].ratio, result.candidates[1].ratio_ci = 3.1, [0.35, 4.85]
    text = race_text(result, width=400)
    assert "3.1x [0.35, 4.85] too noisy" in text
    assert ("np.ceil(np.clip(X, 0.0, 1)) against np.ceil(np.clip(X, 0, 1)): too noisy to rank "
            "with 5 repeats (ratio 3.1, the 95% interval [0.35, 4.85] includes 1); about 7 "
            "repeats would rank them (--repeats 7)") in text
    assert "indistinguishable" not in text
    result.candidates[1].ratio, result.candidates[1].ratio_ci = 1.015, [1.01, 1.019]
    assert ("indistinguishable from np.ceil(np.clip(X, 0, 1)): ratio 1.01, the 95% interval "
            "[1.01, 1.02] reaches within 2% of 1") in race_text(result, width=400)


def test_race_html_says_indistinguishable_when_the_interval_contains_one():
    from chokepoint.report.html import race_html

    page = race_html(_ratio_result())
    assert "1.01x [0.97, 1.05] indistinguishable" in page
    assert "id=\"ratios\"" in page and "is 2.9x faster than" in page


def _pipeline(findings, median_s=0.5):
    def row(name, ms, cause, source):
        return {"name": name, "in_bytes": 8_000_000, "out_bytes": 8_000_000,
                "allocates": True, "time_s": ms * 1e-3, "gbps": 1.0, "roof_fraction": 0.05,
                "source": source, "cause": cause}

    ops = [row("t9 = np.argsort(kk, kind='stable')", 132, None, "/tmp/pipeline.py:16"),
           row("t2 = table.std(axis=0)", 103, None, "/tmp/pipeline.py:11"),
           row("t11 = zk[order]", 108, "data-dependent", "/tmp/pipeline.py:18"),
           row("t1 = table.mean(axis=0)", 39, None, "/tmp/pipeline.py:10")]
    return Explanation(statement="pipeline(table, keys)", setup="", median_s=median_s,
                       iqr_s=1e-3, floor_s=2.5e-3,
                       model=SimpleNamespace(bytes_moved=754_000_000, bytes_min=80_000_000),
                       ops=ops, findings=findings, ruled_out=[], machine=MACHINE)


def test_the_time_no_finding_explains_is_said_with_its_operations():
    """A 19% finding heads the list, but no probe explained 81% of the time: the report says
    so, naming the slowest operations without a cause and the time between operations."""
    found = [Finding("data-dependent", 0.19, "zk[order]: 112 ms on your data", "read in order")]
    text = explanation_text(_pipeline(found), width=400)
    assert ("not explained (81% of the time): no probe measured a cause for "
            "t9 = np.argsort(kk, kind='stable') (pipeline.py:16, 132 ms, 26%); "
            "t2 = table.std(axis=0) (pipeline.py:11, 103 ms, 21%); "
            "t1 = table.mean(axis=0) (pipeline.py:10, 39 ms, 8%); "
            "118 ms (24%) between the operations") in text


def test_no_unexplained_line_when_the_findings_hold_the_time():
    found = [Finding("data-dependent", 0.5, "e", "s"), Finding("compute-bound", 0.45, "e", "s")]
    assert "not explained" not in explanation_text(_pipeline(found), width=400)


def test_an_operation_explained_in_part_is_listed_with_what_is_left():
    """X * s: 12 ms, of which page faults (temporaries) explain 3.4 ms; its other 8.6 ms are
    unexplained although the row's main cause is 'temporaries'."""
    found = [Finding("temporaries", 0.18, "e", "s")]
    e = _pipeline(found, median_s=0.4)
    e.op_unexplained = [0.132, 0.103, 0.0, 0.039]
    e.ops[2]["cause"] = "temporaries"
    e.op_unexplained[2] = 0.0866
    text = explanation_text(e, width=400)
    assert ("t11 = zk[order] (pipeline.py:18, 86.6 ms of 108 ms, 22%)" in text), text


def test_a_line_with_a_measured_rewrite_is_said_under_the_findings_and_in_its_row():
    """The rewrite of mlp's np.where line (32x faster) was printed only at the bottom of the
    report, after the ruled-out list; the lines table gave the line's cause alone."""
    line = {"source": "/tmp/net.py:47", "code": "dz1 = np.where(z1 > 0, da1, 0)",
            "time_s": 1.1e-3, "share": 0.11, "bytes": 2_400_000, "flops": 0, "gbps": 2.2,
            "gflops": 0.0, "ceiling_fraction": 0.04, "cause": "compute-bound",
            "rewrite": {"statement": "chokepoint.relu_backward(da1, z1)", "speedup": 32.1,
                        "replaces": "np.where(z1 > 0, da1, 0)", "saved_s": 1.07e-3,
                        "share": 0.107}}
    rewrite = {"source": "/tmp/net.py:47", "code": line["code"],
               "replaces": "np.where(z1 > 0, da1, 0)",
               "statement": "chokepoint.relu_backward(da1, z1)", "original_s": 1.1e-3,
               "measured_s": 34e-6, "speedup": 32.1, "note": "", "saved_s": 1.07e-3,
               "share": 0.107}
    op = {"name": "t21 = np.where(t20, da1, 0)", "in_bytes": 1_310_000, "out_bytes": 1_050_000,
          "allocates": True, "time_s": 1.1e-3, "gbps": 2.2, "roof_fraction": 0.1,
          "source": "/tmp/net.py:47", "cause": "compute-bound"}
    e = Explanation(statement="train_step(X)", setup="", median_s=10e-3, iqr_s=1e-4,
                    floor_s=6e-3, model=SimpleNamespace(bytes_moved=46e6, bytes_min=5e6),
                    ops=[op], findings=[Finding("compute-bound", 0.81, "e", "fewer flops")],
                    ruled_out=[RuledOut("temporaries", "r")], machine=MACHINE, lines=[line],
                    line_rewrites=[rewrite])
    text = explanation_text(e, width=400)
    said = ("net.py:47: dz1 = np.where(z1 > 0, da1, 0)  ->  chokepoint.relu_backward(da1, z1): "
            "measured 34 us against 1.1 ms, 32.1x faster, same values, saves about 1.07 ms "
            "here (11% of the time)")
    assert said in text
    assert text.index(said) < text.index("ruled out")
    assert "compute-bound; rewrite 32x faster, saves 1.07 ms" in text


def test_a_loop_is_given_the_floor_of_one_pass_per_step():
    """Ten stencil steps: the floor reads the grid once and writes it once (16.8 MB, 853 us),
    which no program doing the ten steps reaches; one pass per step (184 MB) is the floor the
    author reaches by fusing each step, and the report gives it beside the other."""
    from chokepoint.report.text import floor_text

    model = SimpleNamespace(bytes_moved=1_771_500_000, bytes_min=16_800_000,
                            bytes_inputs=8_400_000, result_bytes=8_400_000)
    e = Explanation(statement="diffuse(u)", setup="", median_s=74e-3, iqr_s=1e-3,
                    floor_s=853e-6, model=model, ops=[], findings=[], ruled_out=[],
                    machine=MACHINE, floor={"memory_s": 533e-6, "compute_s": 853e-6,
                                            "flops": 73_100_000, "bound": "compute",
                                            "one_pass_bytes": 184_200_000,
                                            "one_pass_s": 5.86e-3})
    text = floor_text(e)
    assert "86.8x above it; one pass per step (the same steps fused" in text
    assert "moves 184.2 MB: 5.86 ms, 12.6x above it" in text
    e.floor["one_pass_bytes"] = 16_800_000  # an expression: nothing to add
    assert "one pass per step" not in floor_text(e)


def test_a_rewrite_that_differs_at_nan_inputs_does_not_say_same_values():
    # relu_grad gives 1 at NaN where np.ceil(np.clip(X, 0, 1)) gives NaN: the values are
    # checked equal on the user's data, and the NaN difference is said, not "same values"
    from chokepoint.explain.rewrite import Rewrite
    from chokepoint.report.words import line_rewrite

    differs = Rewrite("chokepoint.relu_grad(X)", lambda: None,
                      "at NaN inputs the statement gives nan where the kernel gives 1.0", 0)
    assert differs.values == "same values except at NaN inputs"
    assert Rewrite("chokepoint.relu(X)", lambda: None, "", 0).values == "same values"
    said = line_rewrite({"source": "/tmp/net.py:3", "statement": "chokepoint.relu_grad(X)",
                         "speedup": 8.0, "replaces": "np.ceil(np.clip(X, 0, 1))",
                         "values": differs.values})
    assert "8.0x faster than np.ceil(np.clip(X, 0, 1)), same values except at NaN inputs" in said


#: what a terminal or a bidi algorithm acts on: clear screen, window title, right-to-left override
UNSEEN = ["X\x1b[2J + 1", "X\x1b]0;owned\x07 + 2", "X + len('\u202e') + 3", "X\r + 4"]


def test_control_and_bidi_characters_in_user_code_are_shown_escaped():
    # issue 32.16: raw ESC sequences reached the terminal, U+202E reversed the report's text
    ok = [CandidateResult(statement=s, median_s=1e-6, iqr_s=1e-7, min_s=1e-6, runs=3, loops=10,
                          relative=1.0) for s in UNSEEN]
    failed = CandidateResult(statement="\u2066X", error="NameError: name '\u2066X' \x1b[31m")
    result = RaceResult(reference=UNSEEN[0], candidates=[*ok, failed], machine=MACHINE)
    text = race_text(result, width=400)
    assert all(ch not in text for ch in "\x1b\x07\r\u202e\u2066")
    for shown in ("X\\x1b[2J + 1", "X\\x1b]0;owned\\x07 + 2", "len('\\u202e')", "X\\r + 4",
                  "\\u2066X", "NameError: name '\\u2066X' \\x1b[31m"):
        assert shown in text
    e = Explanation(statement="X\x1b[2J + 1", setup="", median_s=1e-3, iqr_s=1e-5, floor_s=5e-4,
                    model=SimpleNamespace(bytes_moved=16000, bytes_min=8000), ops=[],
                    findings=[], ruled_out=[], machine=MACHINE, rewrite=None,
                    warnings=["the statement mutates its inputs (\u202eX)"], lines=[])
    text = explanation_text(e, width=200)
    assert "\x1b" not in text and "\u202e" not in text
    assert "X\\x1b[2J + 1" in text and "(\\u202eX)" in text


def test_reports_follow_the_terminal_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    text = race_text(_race_result())
    assert max(len(line) for line in text.splitlines()) <= 80
    monkeypatch.setenv("COLUMNS", "200")
    assert max(len(line) for line in race_text(_race_result()).splitlines()) > 80


def test_a_busy_machine_is_said_under_the_table_and_in_html():
    from chokepoint.measure.load import Load
    from chokepoint.report.html import race_html

    result = _race_result()
    assert "Busy machine" not in race_text(result, width=400)
    result.load = Load(seconds=3.0, cpus=2, own=1.0, others=0.97, steal=0.0)
    assert "Busy machine: the machine was busy during the race: other processes used 0.97" \
        in race_text(result, width=400)
    assert 'id="busy"' in race_html(result, full=False)


def test_a_rate_above_the_memory_roof_is_said_to_come_from_a_cache():
    from chokepoint.report.words import _fact

    fact = {"op": "np.zeros_like(C)", "bytes": 5.1e6, "seconds": 50e-6, "rate": 5.1e6 / 50e-6,
            "roof": 26.3e9}
    said = _fact("memory-bound", fact, None)
    assert "above the 26.3 GB/s memory roof: its data was in a cache" in said
    assert "% of the" not in said
    assert "50% of the 26.3 GB/s roof" in _fact("memory-bound", {**fact, "rate": 13.15e9}, None)
