"""A line's strided slices (:mod:`chokepoint.program.strided`): which slices are strided, the
line rewritten on them, and its cold timing's effect (8x fewer bytes: large on any machine)."""

import numpy as np
import pytest

from chokepoint.measure.statements import Statement
from chokepoint.program.strided import is_strided, strided_line, timed_layouts

A = np.zeros((40, 30, 20))


@pytest.mark.parametrize("view, strided", [
    (A[:, :, 3], True),  # one element of each row of 20
    (A[:, 0, 4], True),
    (A[:, 3], False),  # rows of 20 adjacent elements
    (A.T, False),  # transposed: its first axis is adjacent
    (A[1:-1, 1:-1], False),
    (A[::2, 0, 0], True),
    (A[0, 0, :1], False),  # a single element
    ([1.0, 2.0], False),
])
def test_a_slice_is_strided_where_no_axis_is_adjacent(view, strided):
    assert is_strided(view) is strided


def _ns():
    rng = np.random.default_rng(0)
    return {"np": np, "u": rng.random((8, 6, 5)), "v": rng.random((8, 6, 5)), "k": 2,
            "out": np.zeros((8, 6, 5)), "w": rng.random((8, 6))}


def test_a_slice_assignment_writes_its_own_array_restored_and_its_slices_become_names():
    ns = _ns()
    before = ns["out"].copy()
    code = "out[:, :, k] = (u[:, :, k] +\n    2 * v[:, :, k - 1] + w)"
    line = strided_line(Statement.parse(code), ns)
    assert line is not None
    assert line.operands == ["out[:, :, k]", "u[:, :, k]", "v[:, :, k - 1]"]
    assert line.code == "_chokepoint_target[...] = u_0 + 2 * v_0 + w"
    # as written, the line writes the array it was given, as the program's line does
    assert np.shares_memory(line.as_written["_chokepoint_target"], ns["out"])
    for scope in (dict(line.as_written), dict(line.contiguous)):
        exec(line.code, scope)
        assert np.array_equal(scope["_chokepoint_target"],
                              ns["u"][:, :, 2] + 2 * ns["v"][:, :, 1] + ns["w"])
    line.restore()
    assert np.array_equal(ns["out"], before)
    assert all(is_strided(line.as_written[n]) for n in ("u_0", "v_0"))
    assert not any(is_strided(line.contiguous[n]) for n in ("u_0", "v_0"))


@pytest.mark.parametrize("code, operands", [
    ("x = u[:, 1, k] * 2", ["u[:, 1, k]"]),
    ("x = u[1] * 2", None),  # contiguous rows
    ("out[1] = u[:, :, k]", ["u[:, :, k]"]),  # the target is not strided
    ("out[:, :, k] = 0.5", ["out[:, :, k]"]),
    ("out[:, :, k] += 2 * u[:, :, k]", ["out[:, :, k]", "u[:, :, k]"]),
    ("print(u[:, :, k])", None),  # not an assignment
    ("x = u[:, :, f()]", None),  # not a basic slice
])
def test_only_assignments_reading_or_writing_strided_slices_are_probed(code, operands):
    ns = _ns() | {"f": lambda: 1}
    line = strided_line(Statement.parse(code), ns)
    assert (line.operands if line is not None else None) == operands


def test_strided_slices_take_longer_than_contiguous_ones_from_memory_or_not():
    # a slice of one element in 32 of three 41 MB arrays: each element its own cache line, so
    # 8x the bytes of the contiguous copies move (from memory, with the caches emptied; its
    # 3.8 MB of cache lines do not stay in most machines' caches either, run after run)
    rng = np.random.default_rng(0)
    ns = {"a": rng.random((400, 400, 32)), "b": rng.random((400, 400, 32)),
          "out": np.empty((400, 400, 32)), "k": 7}
    line = strided_line(Statement.parse("out[:, :, k] = 0.5 * a[:, :, k] + b[:, :, k]"), ns)
    for cold in (True, False):
        written, contiguous = timed_layouts(line, cold=cold)
        assert np.median(written) > 2 * np.median(contiguous), (cold, written, contiguous)


def test_a_line_that_rebinds_a_name_it_reads_runs_the_same_each_time():
    a = np.random.default_rng(0).random((300, 40))
    line = strided_line(Statement.parse("a = a[:, 3] / a[0, 3]"), {"a": a})
    assert line is not None and line.operands == ["a[:, 3]"]
    written, contiguous = timed_layouts(line, cold=False, samples=3)
    assert len(written) == len(contiguous) == 3


def test_a_recursion_over_columns_leaves_its_array_as_it_was():
    y = np.random.default_rng(0).random((500, 60))
    before = y.copy()
    line = strided_line(Statement.parse("y[:, k] = 0.5 * y[:, k - 1] + 0.25 * y[:, k]"),
                        {"y": y, "k": 9})
    timed_layouts(line, cold=False, samples=3)
    assert np.array_equal(y, before)


def test_an_augmented_assignment_into_a_strided_slice_adds_to_it_and_is_put_back():
    y = np.random.default_rng(0).random((50, 6))
    before = y.copy()
    line = strided_line(Statement.parse("y[:, k] += 0.5 * y[:, k - 1]"), {"y": y, "k": 3})
    assert line.code == "_chokepoint_target[...] += 0.5 * y_0"
    scope = dict(line.as_written)
    exec(line.code, scope, {})
    assert np.array_equal(y[:, 3], before[:, 3] + 0.5 * before[:, 2])
    line.restore()
    assert np.array_equal(y, before)
