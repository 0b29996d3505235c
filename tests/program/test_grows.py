"""An array grown by concatenation in a loop: found in the line's syntax, advised in the
report (no timing)."""

import pytest

from chokepoint.program import run_program
from chokepoint.program.replay import grown_name
from chokepoint.report.program import program_text


@pytest.mark.parametrize("code, name", [
    ("paths = np.hstack([paths, nxt[:, None]])", "paths"),
    ("x = np.concatenate((x, y))", "x"),
    ("out = numpy.append(out, v)", "out"),
    ("rows = np.vstack([rows, r.reshape(1, -1)])", "rows"),
])
def test_an_array_grown_from_itself_is_found(code, name):
    assert grown_name(code) == name


@pytest.mark.parametrize("code", [
    "y = np.hstack([x, z])",  # a new name
    "x = np.stack([x, y])",  # a new axis: not growing along one
    "x = x + 1",
    "x[0] = np.concatenate([x, y])[0]",
    "x = np.concatenate(",  # a line of a longer statement
    "x = np.vstack([x[1:], new])",  # a window of fixed size
    "x = np.concatenate([x[keep], y])",  # drops as it adds
    "x = np.hstack([np.sin(x), y])",
])
def test_other_lines_are_not_grown(code):
    assert grown_name(code) is None


def test_the_report_advises_allocating_once(tmp_path, roof):
    path = tmp_path / "prog.py"
    path.write_text("import numpy as np\n"
                    "walk = np.zeros((2000, 1))\n"
                    "for _ in range(300):\n"
                    "    walk = np.hstack([walk, walk[:, -1:] + 1.0])\n")
    report = run_program(str(path), roof=roof, budget_s=5)
    line = next(r for r in report.to_dict()["lines"] if r["source"].endswith("prog.py:4"))
    assert line["grows"] == "walk"
    assert report.lines[0]["source"].endswith("prog.py:4")  # 300 copies of up to 4.8 MB
    assert report.lines[0]["rewrite"] is None
    assert "-> walk is copied whole into a new array on each of its 300 runs, to add a part: " \
           "allocate walk once at its final size" in program_text(report, width=200)
