"""The command line: race's table and JSON, roofline, info, errors."""

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
    assert "backend" in capsys.readouterr().out
    assert main([]) == 2


def test_bad_arguments_exit_with_usage():
    with pytest.raises(SystemExit) as info:
        main(["race", "--sizes", "ten", "X"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["race"])  # no statements


def test_parse_sizes():
    assert parse_sizes("1e3, 20,300") == [1000, 20, 300]


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
