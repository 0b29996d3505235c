"""A replay's statements that change what they read (no timing but in the last test)."""

import numpy as np
import pytest

from chokepoint.measure.statements import Statement
from chokepoint.program import run_program
from chokepoint.program.replay import Replay


def _replay(code, **values):
    st = Statement.parse(code)
    return Replay(statement=st, pristine=values, base={"np": np}, mutates=True), st


@pytest.mark.parametrize("code, same", [
    ("y[:, j] = 2 * x[:, j + 1] + y[:, j + 1]", True),  # reads other columns than it writes
    ("y[:, :, 1] = x[:, :, 1] * 3", True),
    ("y[:, j] += x[:, j]", False),  # an update
    ("y[:, j] = y[:, j] * 0.5", False),
    ("y[:] = np.roll(y, 1)", False),
    ("y[y < 3] = 0", False),  # the same values again, but no work the second time
    ("y[:, j] = np.abs(y[:, j])", False),
])
def test_a_statement_that_repeats_the_same_values_is_found(code, same):
    shape = (3, 4) if code.startswith("y[:, j]") else (2, 3, 4)
    x = np.arange(np.prod(shape), dtype=float).reshape(shape)
    y = x[::-1].copy() + 1
    replay, st = _replay(code, x=x, y=y, j=1)
    ns = replay.namespace()
    assert replay.repeats_same(st.function(ns), ns) is same
    assert np.array_equal(ns["y"], y)  # restored afterwards
    assert np.array_equal(y, x[::-1] + 1)  # the captured values are never touched


def test_a_column_loop_is_strided_access(tmp_path, roof):
    # columns of a tall C-order array: each element its own cache line (4.5x slower than the
    # same loop on the transpose, by hand, on an AMD EPYC); y computed, not zeros_like, so that
    # the loop's first writes are not also the first use of y's pages
    path = tmp_path / "prog.py"
    path.write_text("import numpy as np\n"
                    "img = np.random.default_rng(0).random((20000, 200))\n"
                    "y = img * 0.0\n"
                    "for j in range(img.shape[1] - 3, -1, -1):\n"
                    "    y[:, j] = 0.1 * img[:, j + 1] - 0.2 * img[:, j + 2] + 0.8 * y[:, j + 1]\n")
    report = run_program(str(path), roof=roof, budget_s=20)
    line = next(r for r in report.to_dict()["lines"] if r["source"].endswith("prog.py:5"))
    assert line["cause"] == "strided-access", line["causes"]


@pytest.mark.parametrize("code, apart", [
    ("y[:, j] = 2 * x[:, j + 1] + y[:, j + 1]", True),
    ("d[:, :, k] = u[:, :, k] * c", True),
    ("y[y < 0] = 0", False),
    ("y[:, j] = y[:, j] + 1", False),
    ("y[:, j] = y.sum(axis=1)", False),
    ("y[:] = x", True),
    ("y += x", False),
    ("y.sort()", False),
    ("z = y[:, 1]", False),
])
def test_a_statement_writes_apart_from_what_it_reads(code, apart):
    from chokepoint.program.replay import writes_apart
    assert writes_apart(Statement.parse(code).tree) is apart
