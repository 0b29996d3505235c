"""The command line: race's table and JSON, roofline, info, errors."""

import argparse
import json
import os
import subprocess
import sys

import pytest

from chokepoint.cli import main, parse_sizes


def test_race_json_is_the_only_stdout(cached_roof):
    env = {**os.environ, "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]}
    proc = subprocess.run(
        [sys.executable, "-m", "chokepoint", "race", "-s", "X = np.random.randn(1000)",
         "np.maximum(X, 0)", "X * (X > 0)", "X > 9", "--json", "--min-time", "0.001",
         "--repeats", "3"], capture_output=True, text=True, env=env, timeout=120, check=True)
    data = json.loads(proc.stdout)
    assert data["reference"] == "np.maximum(X, 0)"
    assert [c["agrees"] for c in data["candidates"]] == [None, True, False]
    assert data["machine"]["read_bw"] == cached_roof.read_bw
    assert data["mode"] == "in-process"
    assert data["candidates"][0]["ratio"] is None and data["candidates"][0]["ratio_ci"] is None
    assert all(len(c["ratio_ci"]) == 2 and c["ratio"] > 0 for c in data["candidates"][1:])


def test_race_table_and_plot(cached_roof, capsys, tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    plot = tmp_path / "sweep.png"
    assert main(["race", "-s", "X = np.ones(n)", "X + 1", "X * 2", "--sizes", "10,1e3",
                 "--min-time", "0.001", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "X + 1" in out and "relative" in out and "sizes swept" in out
    assert plot.stat().st_size > 1000


def test_roofline_command(cached_roof, capsys):
    assert main(["roofline"]) == 0
    assert "20.0 GB/s" in capsys.readouterr().out
    assert main(["roofline", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["read_bw"] == cached_roof.read_bw


def test_info_and_help(capsys):
    assert main(["info"]) == 0
    shown = capsys.readouterr().out
    assert "backend" in shown and "result_pool" in shown and "c_path" in shown
    assert "run_line_hook" in shown
    assert "stream_from" in shown  # where the kernels may stream (the last-level cache)
    assert main([]) == 2


def test_bad_arguments_exit_with_usage():
    with pytest.raises(SystemExit) as info:
        main(["race", "--sizes", "ten", "X"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["race"])  # no statements


def test_parse_sizes():
    assert parse_sizes("1e3, 20,300") == [1000, 20, 300]


@pytest.mark.parametrize("text", ["0", "-5", "3.7", "10,inf", "nan"])
def test_sizes_that_are_not_positive_whole_numbers_are_refused(text):
    # issue 32.15: 3.7 was swept as 3, and 0 passed on to the race
    with pytest.raises(argparse.ArgumentTypeError, match="positive whole numbers"):
        parse_sizes(text)


def test_explain_json_and_text(cached_roof, capsys):
    assert main(["explain", "-s", "X = np.random.randn(10000)", "np.ceil(np.clip(X, 0, 1))",
                 "--json", "--min-time", "0.01"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["statement"] == "np.ceil(np.clip(X, 0, 1))"
    assert data["bytes_moved"] == 4 * 8 * 10000
    assert main(["explain", "-s", "X = np.ones(10)", "X + 1", "--min-time", "0.01"]) == 0
    assert "operations" in capsys.readouterr().out
    assert main(["explain", "1 / 0"]) == 1
    assert "ZeroDivisionError" in capsys.readouterr().err


def test_statements_with_brackets_print_as_written(cached_roof, capsys):
    assert main(["race", "-s", "X = np.ones(3); mask = X > 0", "X[mask]", "len('[/x]') + X",
                 "--min-time", "0.001", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert "X[mask]" in out and "len('[/x]') + X" in out


def test_progress_line_shows_statements_as_written():
    from rich.progress import TextColumn

    from chokepoint.cli import _Progress

    progress = _Progress(total=2)
    try:
        progress("len('[/x]') + X[mask]")
        task = progress._progress.tasks[0]
        assert TextColumn("{task.description}").render(task).plain == "len('[/x]') + X[mask]"
    finally:
        progress.close()


def test_json_stdout_holds_only_the_json_when_statements_print(cached_roof, capsys):
    assert main(["race", "--json", "-s", "X = np.ones(9); print('setup says hi')",
                 "print('stmt says hi') or X", "X", "--min-time", "0.001",
                 "--repeats", "3"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert [c["statement"] for c in data["candidates"]] == ["print('stmt says hi') or X", "X"]
    assert "stmt says hi" in captured.err and "setup says hi" in captured.err
    assert main(["explain", "--json", "-s", "X = np.ones(9); print('setup says hi')",
                 "print('stmt says hi') or X + 1", "--min-time", "0.01"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["statement"] == "print('stmt says hi') or X + 1"
    assert "stmt says hi" in captured.err


@pytest.mark.parametrize("argv, message", [
    (["race", "X", "--min-time", "-1"], "--min-time: must be a positive number, got '-1'"),
    (["race", "X", "--min-time", "0"], "--min-time: must be a positive number"),
    (["race", "X", "--min-time", "nan"], "--min-time: must be a positive number"),
    (["race", "X", "--repeats", "0"], "--repeats: must be a positive integer, got '0'"),
    (["race", "X", "--repeats", "2.5"], "--repeats: must be a positive integer"),
    (["race", "X", "--rtol=-1e-3"], "--rtol: must be a non-negative number"),
    (["explain", "X", "--min-time", "-5"], "--min-time: must be a positive number"),
    (["demo", "--min-time", "-5"], "--min-time: must be a positive number"),
    (["race", "X", ""], "a candidate must not be empty or only whitespace"),
    (["race", "  \t", "X"], "a candidate must not be empty or only whitespace"),
])
def test_bad_option_values_are_refused_with_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("reference", ["5", "2", "-1"])
def test_reference_out_of_range_is_a_message_not_a_traceback(reference, capsys):
    assert main(["race", "-s", "X = np.ones(3)", "X", "X + 1", "--reference", reference]) == 2
    err = capsys.readouterr().err
    assert f"--reference {reference} does not index a candidate: there are 2 (0..1)" in err


def test_a_race_where_every_candidate_fails_exits_non_zero(cached_roof, capsys):
    assert main(["race", "1 / 0", "undefined_name", "--min-time", "0.001"]) == 1
    out = capsys.readouterr().out
    assert "ZeroDivisionError" in out and "NameError" in out
    assert main(["race", "--json", "-s", "1 / 0", "X", "--min-time", "0.001"]) == 1
    assert "ZeroDivisionError" in json.loads(capsys.readouterr().out)["candidates"][0]["error"]


@pytest.mark.parametrize("setup, error", [("X = 1 / 0", "ZeroDivisionError: division by zero"),
                                          ("X = (", "SyntaxError")])
def test_an_explain_setup_error_is_a_message_not_a_traceback(setup, error, capsys):
    assert main(["explain", "-s", setup, "X + 1", "--min-time", "0.01"]) == 1
    err = capsys.readouterr().err
    assert "chokepoint explain: the setup raised " + error in err
    assert "Traceback" not in err


def test_a_bad_output_path_keeps_the_results_and_says_why(cached_roof, capsys, tmp_path):
    missing = tmp_path / "no such dir"
    fast = ["-s", "X = np.ones(3)", "X + 1", "--min-time", "0.001", "--repeats", "3"]
    assert main(["race", *fast, "--html", str(missing / "r.html"),
                 "--plot", str(tmp_path / "r.txt")]) == 1
    captured = capsys.readouterr()
    assert "X + 1" in captured.out and "relative" in captured.out
    assert f"chokepoint: cannot write --html {missing / 'r.html'}: " in captured.err
    assert "cannot write --plot" in captured.err and ".png or .svg" in captured.err
    assert main(["race", "--json", *fast, "--html", str(missing / "r.html")]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["candidates"][0]["statement"] == "X + 1"
    assert "cannot write --html" in captured.err
    assert main(["explain", "-s", "X = np.ones(10)", "X + 1", "--min-time", "0.01",
                 "--html", str(missing / "e.html")]) == 1
    captured = capsys.readouterr()
    assert "operations" in captured.out and "cannot write --html" in captured.err


def test_json_is_strict_json_with_null_for_nan_and_infinities(capsys):
    # issue 32.16: --json wrote Infinity and NaN, which JSON parsers refuse
    import numpy as np

    from chokepoint.cli import emit

    class Result:
        def to_dict(self):
            return {"ratio": float("inf"), "spread": [float("nan"), np.float64(-np.inf)],
                    "runs": np.int64(3), "median_s": 1e-6}

    assert emit(Result(), argparse.Namespace(json=True, plot=None, html=None)) == 0

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    data = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert data == {"ratio": None, "spread": [None, None], "runs": 3, "median_s": 1e-6}


def test_output_files_go_where_they_were_asked_when_the_code_changes_directory(
        cached_roof, capsys, tmp_path, monkeypatch):
    # issue 32.16: --html r.html after code that os.chdir()s was written into that directory
    moved = tmp_path / "moved"
    moved.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["race", "-s", f"import os; os.chdir({str(moved)!r}); X = np.ones(3)", "X + 1",
                 "--min-time", "0.001", "--repeats", "3", "--html", "r.html"]) == 0
    assert (tmp_path / "r.html").exists() and not (moved / "r.html").exists()
    assert f"html written to {tmp_path / 'r.html'}" in capsys.readouterr().out


def test_race_processes_option(cached_roof, capsys):
    assert main(["race", "--json", "-s", "X = np.arange(10.0)", "X + 1", "X + 1.0",
                 "--processes", "2", "--min-time", "0.001", "--repeats", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "processes"
    assert [c["agrees"] for c in data["candidates"]] == [None, True]
    assert all(c["runs"] == 2 for c in data["candidates"])


@pytest.mark.parametrize(("argv", "usage", "hint"), [
    (["race", "--repat", "3", "X"], "usage: chokepoint race", "did you mean --repeats"),
    (["explain", "--mintime", "1", "X"], "usage: chokepoint explain",
     "did you mean --min-time for --mintime?"),
    (["rac", "X"], "usage: chokepoint [-h]", "did you mean race?"),
    (["run", "--bugdet", "3", "prog.py"], "usage: chokepoint run", "did you mean --budget"),
])
def test_a_mistyped_option_or_subcommand_gets_did_you_mean_and_its_own_usage(argv, usage, hint,
                                                                            capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert usage in err and hint in err


def test_run_passes_the_programs_own_options_to_it():
    """Options after the program's name are the program's, even ones chokepoint run has."""
    from chokepoint.cli import _parser

    args = _parser().parse_args(["run", "prog.py", "--anything", "--json", "x", "-m", "y"])
    assert args.program == ["prog.py", "--anything", "--json", "x", "-m", "y"]
    assert args.json is None and args.module is None


def test_the_demo_says_when_its_ranking_is_not_to_be_trusted(monkeypatch, capsys):
    # issue 34.5: on a busy machine the demo ranked relu_grad behind (X >= 0).view('i1')
    from chokepoint import cli
    from chokepoint.measure.load import Load
    from chokepoint.measure.race import CandidateResult, RaceResult

    def race_on_a_busy_machine(args, statements, **kw):
        failed = [CandidateResult(statement=s, error="E: not run here") for s in statements]
        return RaceResult(reference=statements[0], candidates=failed, machine={},
                          load=Load(seconds=5.0, cpus=2, own=1.0, others=1.0, steal=0.0))

    monkeypatch.setattr(cli, "run_race", race_on_a_busy_machine)
    monkeypatch.setattr(cli, "emit", lambda result, args: 0)
    main(["demo", "--quick"])
    said = capsys.readouterr().out
    assert "This ranking is not to be trusted" in said and "1.0 of the machine's 2" in said


def test_code_that_fails_on_its_second_run_is_a_message_not_a_traceback(cached_roof, capsys,
                                                                          tmp_path):
    # works once, then fails: a raw traceback through chokepoint before
    assert main(["explain", "-s", "L = [np.ones(3)]", "L.pop() * 2", "--min-time",
                 "0.01"]) == 1
    assert "the statement raised IndexError on its 2nd run" in capsys.readouterr().err
    data = tmp_path / "in.txt"
    data.write_text("x")
    program = tmp_path / "deletes.py"
    program.write_text(f"import os\nimport numpy as np\ntext = open({str(data)!r}).read()\n"
                       f"os.remove({str(data)!r})\nX = np.ones(10) * len(text)\n")
    assert main(["explain", "-f", str(program), "--min-time", "0.01"]) == 1
    assert "raised FileNotFoundError on its 2nd run" in capsys.readouterr().err
