"""The %race magic in a real IPython shell (IPython's test utilities)."""

import numpy as np
import pytest

pytest.importorskip("IPython", reason="the magics need IPython")

from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython


@pytest.fixture(scope="module")
def ip():
    shell = start_ipython()
    shell.run_line_magic("load_ext", "chokepoint")
    return shell


def test_line_magic_uses_user_namespace(ip, cached_roof):
    ip.user_ns["A"] = np.arange(-5.0, 5.0)
    result = ip.run_line_magic("race", '-s "X = A * 2" "np.maximum(X, 0)" "X * (X > 0)" '
                               "--min-time 0.001 --repeats 3")
    assert [c.agrees for c in result.candidates] == [None, True]
    assert np.array_equal(ip.user_ns["A"], np.arange(-5.0, 5.0))
    assert "np.maximum(X, 0)" in result.table()


def test_cell_magic_each_line_a_candidate(ip, cached_roof):
    ip.user_ns["A"] = np.ones(100)
    result = ip.run_cell_magic("race", "--min-time 0.001 --repeats 3",
                               "A + 1\n# a comment\n\nA * 2\n")
    assert [c.statement for c in result.candidates] == ["A + 1", "A * 2"]
    assert result.candidates[1].agrees is True


def test_magic_usage_error(ip):
    with pytest.raises(UsageError):
        ip.run_line_magic("race", "--no-such-option")


def test_unquoted_candidates_are_refused_with_how_to_quote_them(ip):
    ip.user_ns["A"] = np.ones(10)
    with pytest.raises(UsageError, match="quote each one"):
        ip.run_line_magic("race", "np.maximum(A, 0) np.clip(A, 0, None)")


def test_explain_line_and_cell_magic(ip, cached_roof):
    ip.user_ns["A"] = np.linspace(-1, 1, 4_000_000)  # big enough for the kernel to win
    e = ip.run_line_magic("explain", "--min-time 0.01 np.ceil(np.clip(A, 0, 1))")
    assert e.statement == "np.ceil(np.clip(A, 0, 1))"
    assert e.rewrite["statement"] == "chokepoint.relu_grad(A, dtype=np.float64)"
    cell = ip.run_cell_magic("explain", "--min-time 0.01", "A * 2\n")
    assert cell.statement == "A * 2"
    program = ip.run_cell_magic("explain", "--min-time 0.01", "B = A * 2\nB[A <= 0] = 0\n")
    assert [line["source"] for line in program.lines] == ["<cell>:1", "<cell>:2"]
    assert [line["code"] for line in program.lines] == ["B = A * 2", "B[A <= 0] = 0"]
    with pytest.raises(UsageError, match="raised"):
        ip.run_line_magic("explain", "undefined_name + 1")


def test_magics_write_the_files_they_are_asked_for(ip, cached_roof, tmp_path, capsys):
    ip.user_ns["A"] = np.ones(1000)
    page = tmp_path / "race.html"
    assert ip.run_line_magic("race", f'"A + 1" "A * 2" --min-time 0.001 --html {page}') is None
    assert page.read_text().startswith("<!DOCTYPE html>")
    chart = tmp_path / "explain.svg"
    assert ip.run_line_magic("explain", f"--min-time 0.01 --plot {chart} A * 2") is None
    assert b"<svg" in chart.read_bytes()[:500]
    assert "written to" in capsys.readouterr().out


def test_line_magics_take_one_statement_as_written(ip, cached_roof):
    # issue 13.7a: shlex ate the quotes, `(A >= 0).view('i1')` became `... .view(i1)`
    ip.user_ns["A"] = np.linspace(-1, 1, 1000)
    e = ip.run_line_magic("explain", "--min-time 0.01 (A >= 0).view('i1')")
    assert e.statement == "(A >= 0).view('i1')"
    r = ip.run_line_magic("race", "-s 'X = A' --min-time 0.001 --repeats 3 (X >= 0).view('i1')")
    assert [(c.statement, c.error) for c in r.candidates] == [("(X >= 0).view('i1')", None)]
    # options may follow the statement; one statement is one candidate, not one per word
    r = ip.run_line_magic("race", "np.where(A > 0, 'a b', A) --min-time 0.001 --repeats 3")
    assert [(c.statement, c.error) for c in r.candidates] == [("np.where(A > 0, 'a b', A)",
                                                               None)]
    # several statements are still shell words, quoted or not
    r = ip.run_line_magic("race", "--min-time 0.001 --repeats 3 A +A")
    assert [c.statement for c in r.candidates] == ["A", "+A"]
    with pytest.raises(UsageError):
        ip.run_line_magic("explain", "A --no-such-option")


def test_line_splitting_rules():
    from chokepoint.cli import add_explain_arguments, add_race_arguments
    from chokepoint.magic import _as_written, _Parser

    race, explain = _Parser(prog="%race"), _Parser(prog="%explain")
    add_race_arguments(race)
    add_explain_arguments(explain, statement=False)
    assert _as_written("--setup='X = A' --min 0.01 X[::2] --json", race, several=True) == (
        ["--setup=X = A", "--min", "0.01", "--json"], "X[::2]")
    assert _as_written("-sX=1 -- -X", explain, several=False) == (["-sX=1"], "-X")
    for line in ['"X + 1"', '"X + 1" "X * 2"', "A + 1 A * 2", "X = 1; X + 1", "--json", "-s",
                 "X --min-time", "(X >= 0).view('i1"]:
        assert _as_written(line, race, several=True) is None, line
    assert _as_written("X +X", race, several=True) is None  # two candidates, as before
    assert _as_written("X -X", race, several=True) == ([], "X -X")  # -X is no candidate
    assert _as_written("X -X", explain, several=False) == ([], "X -X")


def test_cell_magic_blank_lines_separate_multi_line_candidates(ip, cached_roof):
    # issue 13.7b: each line of a multi-line candidate became a candidate of its own
    ip.user_ns["A"] = np.linspace(-1, 1, 1000)
    cell = ("Y = np.empty_like(A)\n"
            "np.maximum(A, 0, out=Y)\n"
            "\n"
            "# the fused kernel\n"
            "chokepoint.relu(A)\n")
    result = ip.run_cell_magic("race", "--min-time 0.001 --repeats 3", cell)
    assert [c.statement for c in result.candidates] == [
        "Y = np.empty_like(A)\nnp.maximum(A, 0, out=Y)", "chokepoint.relu(A)"]
    assert result.candidates[1].agrees is True


def test_race_magic_with_processes(ip, cached_roof):
    # the workers are fresh interpreters: nothing of the shell's __main__ is re-run there
    ip.user_ns["A"] = np.arange(-5.0, 5.0)
    result = ip.run_line_magic("race", '-s "X = A * 2" "np.maximum(X, 0)" "X * (X > 0)" '
                               "--processes 2 --min-time 0.001 --repeats 2")
    assert result.mode == "processes"
    assert [c.agrees for c in result.candidates] == [None, True]
    assert all(c.workers == 2 for c in result.candidates)
    assert all("timed in 2 worker processes" in c.note for c in result.candidates)
    cell = ip.run_cell_magic("race", "--processes 1 --min-time 0.001 --repeats 2",
                             "A + 1\nA * 2\n")
    assert cell.mode == "processes" and cell.candidates[1].agrees is False


def test_race_with_processes_from_a_real_ipython_process(cached_roof, tmp_path):
    # pyperf fails inside IPython (its issue #145): its workers re-run the caller's __main__
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "race.ipy"
    script.write_text(
        "%load_ext chokepoint\n"
        "import numpy as np\n"
        "A = np.random.randn(1000, 1000)\n"
        "r = %race -s \"X = A.copy()\" \"np.ceil(np.clip(X, 0, 1))\" \"(X >= 0).view('i1')\" "
        "--processes 2 --min-time 0.005 --repeats 2\n"
        "import json; print('RESULT', json.dumps(r.to_dict()))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, "-m", "IPython", "--no-banner", "--quick",
                           str(script)], capture_output=True, text=True, env=env,
                          timeout=180, check=True)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    data = json.loads(line[len("RESULT "):])
    assert data["mode"] == "processes"
    assert [c["agrees"] for c in data["candidates"]] == [None, True]
    assert data["candidates"][1]["ratio"] < 1


def test_magics_leave_the_globals_of_the_users_functions_as_they_were(ip, cached_roof):
    # the user's functions keep the user's namespace as their globals: every run of bump()
    # added 1 to A (2605 runs left A[0] == 2605.0), count() appended to the user's list
    ip.run_cell("import numpy as np\nA = np.ones(10_000)\n"
                "def bump():\n    A[:] += 1\n    return A.sum()\n"
                "CALLS = []\n"
                "def count():\n    CALLS.append(1)\n    return len(CALLS)\n")
    with pytest.warns(RuntimeWarning, match="bump\\(\\)'s global A"):
        e = ip.run_line_magic("explain", "--min-time 0.01 bump()")
    assert any("put back" in w for w in e.warnings)
    assert np.array_equal(ip.user_ns["A"], np.ones(10_000))
    result = ip.run_line_magic("race", '"count()" "len(CALLS)" --min-time 0.001 --repeats 3')
    assert ip.user_ns["CALLS"] == []
    assert "count()'s global CALLS" in result.candidates[0].note


def test_explain_once_runs_the_cell_once_in_the_users_namespace(ip, cached_roof):
    ip.user_ns["runs"] = []
    ip.user_ns["np"] = np
    cell = ("runs.append(1)\n"
            "X = np.random.default_rng(0).random(2_000_000)\n"
            "for _ in range(3):\n"
            "    Y = np.sqrt(X * X + 1.0)\n"
            "small = Y[:3].sum()\n")
    report = ip.run_cell_magic("explain", "--once --budget 10", cell)
    assert ip.user_ns["runs"] == [1]  # once, as a cell runs
    assert ip.user_ns["Y"].shape == (2_000_000,) and "small" in ip.user_ns
    top = report.lines[0]
    assert top["source"].endswith(":4") and top["code"] == "Y = np.sqrt(X * X + 1.0)"
    assert top["hits"] == 3 and top["analysed"]
    assert "headline" in report.text() and "<table" in report._repr_html_()


def test_explain_once_reports_then_raises_what_the_cell_raised(ip, cached_roof, capsys):
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("explain", "--once --budget 1", "x = 1\ny = x / 0\n")
    assert "ZeroDivisionError" in capsys.readouterr().err
