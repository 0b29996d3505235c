"""How a line's analysis turns measured numbers into what it reports (no timing here)."""

import ast
from types import SimpleNamespace

import numpy as np
import pytest

from chokepoint.measure.statements import Statement
from chokepoint.program.analyse import (
    _listed,
    _rewrite,
    _same_value,
    _syntax_steps,
    _work_share,
    _written_names,
    kept_share,
    one_time,
    python_lists,
    python_numbers,
    unseen_calls,
)
from chokepoint.program.summary import recoverable, uncertain


def _found(speedup: float) -> dict:
    return {"statement": "chokepoint.fuse('a * b + c')(a=a, b=b, c=c)", "speedup": speedup,
            "measured_s": 1e-3 / speedup, "values": "same values", "note": ""}


@pytest.mark.parametrize(("replay_s", "expected_s"), [
    (3e-3, 400 * 1e-3 * 0.5),  # replayed slower than a run in the program: the run's time
    (0.5e-3, 400 * 0.5e-3 * 0.5),  # replayed faster: the replay's
])
def test_a_rewrite_saves_its_ratio_of_the_smaller_of_replay_and_program_run(replay_s,
                                                                            expected_s):
    # a 2x rewrite of a line that took 1 ms a run in the program over 400 runs saves half of
    # each run as the program took it, not half of a replay on fresh pages that took longer
    best = _rewrite(_found(2.0), [], replay_s, SimpleNamespace(hits=400), line_s=0.4)
    assert best["saved_s"] == pytest.approx(expected_s)
    assert best["saved_s"] < 0.4  # never the whole line for a 2x rewrite


def test_a_compiled_rewrite_of_a_line_run_once_must_pay_for_its_first_call():
    # 13x on a line run once (240 ms) saves 221 ms, less than its 0.25 s first call: not
    # proposed, and the line says why; a loop's keeps its saving, its first call beside it
    notes = []
    once = {**_found(13.0), "first_call_s": 0.25}
    assert _rewrite(once, [], 0.24, SimpleNamespace(hits=1), line_s=0.24, notes=notes) is None
    assert "first call took" in notes[0] and "one run" in notes[0]
    many = {**_found(2.0), "first_call_s": 0.05}
    best = _rewrite(many, [], 1e-3, SimpleNamespace(hits=400), line_s=0.4, notes=[])
    assert best["saved_s"] == pytest.approx(0.2) and best["first_call_s"] == 0.05


def test_a_rewrite_not_faster_is_not_proposed():
    assert _rewrite(_found(1.01), [], 1e-3, SimpleNamespace(hits=10), line_s=0.01) is None


def _part(original_s: float, measured_s: float) -> dict:
    return {"statement": "g = 0.5 * (f + 0.044715 * (f * f * f))", "replaces": "f ** 3",
            "original_s": original_s, "measured_s": measured_s,
            "speedup": original_s / measured_s, "values": "values within 1 ulp", "note": ""}


def test_a_rewrite_of_part_of_a_line_saves_what_the_part_saves():
    # the part (1 ms of a 10 ms line) 10x faster saves 0.9 ms a run, not 90% of the line
    best = _rewrite(None, [_part(1e-3, 1e-4)], 10e-3, SimpleNamespace(hits=100), line_s=1.0)
    assert best["saved_s"] == pytest.approx(100 * 0.9e-3)
    assert best["part_speedup"] == pytest.approx(10)
    assert best["speedup"] == pytest.approx(10e-3 / 9.1e-3)


def test_a_part_timed_slower_than_the_line_saves_its_ratio_of_the_line():
    # the whole line's pattern timed alone at 42 ms (a fresh copy) where the line replayed in
    # 35 ms: 4.4x saves 35 * (1 - 9.6 / 42) a run, not 42 - 9.6
    best = _rewrite(None, [_part(42e-3, 9.6e-3)], 35e-3, SimpleNamespace(hits=12), line_s=0.42)
    assert best["saved_s"] == pytest.approx(12 * 35e-3 * (1 - 9.6 / 42))


def test_the_rewrite_saving_most_is_chosen_not_the_fastest_part():
    small = _part(1e-3, 1e-4)  # 10x on 1 ms
    large = {**_part(8e-3, 4e-3), "statement": "the other"}  # 2x on 8 ms
    best = _rewrite(None, [small, large], 10e-3, SimpleNamespace(hits=10), line_s=0.1)
    assert best["code"] == "the other" and best["saved_s"] == pytest.approx(10 * 4e-3)


@pytest.mark.parametrize(("recorded", "taken", "library", "hits", "why"), [
    (100_000, 40_000, 60_000, 10, "library"),  # the hook's calls into np.median: most of it
    (100_000, 65_000, 35_000, 10, "library"),  # a third of it: the price may be half the truth
    (100_000, 80_000, 20_000, 10, ""),
    (600_000_000, 340_000_000, 0, 1_800_000, "interpreter"),  # 190 ns a run, 1.8 M runs
    (600_000_000, 340_000_000, 0, 500, ""),  # few runs: their time as recorded
    (9_000_000_000, 8_000_000_000, 0, 1_800_000, ""),  # 4.4 us a run: the work dominates
])
def test_which_recorded_times_their_replay_decides(recorded, taken, library, hits, why):
    assert uncertain(recorded, taken, library, hits) == why


@pytest.mark.parametrize(("time_s", "floor_s", "unseen", "measured_s", "expected"), [
    (0.080, 0.002, 0.0, 0.0, 0.078),  # all seen: time less floor
    (0.080, 0.002, 0.97, 0.0016, 0.0016),  # a generator's 78 ms: only what was measured
    (0.080, 0.002, 0.97, 0.060, 0.060),  # its fresh memory measured: that much
    (0.080, 0.002, 0.5, 0.0, 0.038),  # half unseen
    (0.080, 0.002, 0.0, 0.200, 0.078),  # never past time less floor
])
def test_time_in_work_the_tracer_did_not_see_is_not_recoverable(time_s, floor_s, unseen,
                                                                measured_s, expected):
    assert recoverable(time_s, floor_s, unseen, measured_s) == pytest.approx(expected)


def test_the_numpy_scalars_a_line_reads_are_found_as_python_numbers():
    ns = {"x": np.float64(1.5), "n": np.int64(3), "ok": np.bool_(True), "a": np.ones(3),
          "f": 2.0, "unused": np.float64(1.0), "s": np.str_("x"), "h": np.float32(0.5),
          "y": np.float64(2.0)}
    # y only assigned, h a float32 (Python's floats are 64-bit): not these
    found = python_numbers(ns, ast.parse("y = x * n * h if ok else a * f + len(s)"))
    assert found == {"x": 1.5, "n": 3, "ok": True}
    assert all(type(v) in (float, int, bool) for v in found.values())


def test_a_scalar_that_changes_the_result_dtype_is_not_the_same_value():
    img = np.arange(4, dtype=np.int8)
    assert not _same_value(np.int64(3) * img, 3 * img)  # int64 against int8
    assert _same_value(np.float64(0.5) * 3.0, 0.5 * 3.0)


def test_a_line_run_once_keeps_its_work():
    assert _work_share(1e-3, [3e-3], hits=1) == 1.0  # its one run is the run replayed
    assert _work_share(1e-3, [3e-3], hits=80) == pytest.approx(1 / 3)
    assert _work_share(1e-3, [1.2e-3], hits=80) == 1.0  # within SLOWER_IN_RUN


def test_a_part_rewrite_that_hardly_changes_the_line_is_not_proposed():
    # the cube 1.3x faster, 1% of the line: the line 1.003x
    part = _part(1e-6, 0.77e-6)
    assert _rewrite(None, [part], 100e-6, SimpleNamespace(hits=10), line_s=1e-3) is None


def test_arrays_read_one_element_at_a_time_are_found_as_lists():
    g, w, v = np.arange(6.0).reshape(2, 3), np.ones((2, 3)), np.arange(4)
    ns = {"g": g, "w": w, "v": v, "i": 1, "j": 2, "big": np.zeros(3)}
    found = python_lists(ns, ast.parse("t = g[i, j] * w[i, j] + v[i + 1] + big[1:].sum()"))
    assert found == {"g": 2, "v": 1, "w": 2}  # their axes
    # a name also used whole, sliced, indexed by fewer indices than axes, by an index array,
    # a mask, a slice object, None or a call, or written: not it
    ns.update(idx=np.array([0, 1]), m=np.array([True, False]), sl=slice(0, 2), no=None)
    for code in ("t = g[i, j] + g.sum()", "t = g[i]", "g[i, j] = 1", "t = g[i, 0:2]",
                 "t = g[idx(i), j]", "t = g[idx, j]", "t = g[m, j]", "t = g[sl, j]",
                 "t = g[i, no]", "t = g[i, ...]"):
        assert "g" not in python_lists(ns, ast.parse(code)), code
    # narrower dtypes compute otherwise in Python (uint8 wraps), booleans under ~ too
    ns.update(u=np.arange(4, dtype=np.uint8), b=np.ones(4, bool))
    assert python_lists(ns, ast.parse("t = u[i] - u[j]")) == {}
    assert python_lists(ns, ast.parse("t = ~b[i]")) == {}
    assert python_lists(ns, ast.parse("t = b[i] and b[j]")) == {"b": 1}


def test_a_line_indexes_its_lists_one_axis_at_a_time():
    st = Statement.parse("ok = grid[a, b] and not seen[a, b] and other[a, b]")
    assert _listed(st, {"grid": [], "seen": []}).source == (
        "ok = grid[a][b] and (not seen[a][b]) and other[a, b]")


def test_the_arrays_a_lines_function_writes_are_found(tmp_path):
    path = tmp_path / "bfs.py"
    path.write_text("def other(q):\n    q[0] = 1\n\ndef bfs(grid, seen, a, b):\n"
                    "    if grid[a, b] and not seen[a, b]:\n        seen[a, b] = True\n")
    st = Statement.parse("grid[a, b] and not seen[a, b]", filename=str(path), first_line=5)
    assert _written_names(st) == {"seen"}  # not other()'s q
    unknown = Statement.parse("grid[a, b]", filename="<nowhere>", first_line=1)
    assert _written_names(unknown) == {"grid", "a", "b"}


@pytest.mark.parametrize(("code", "unseen"), [
    ("a += rng.standard_normal(n) * 0.05", True),  # a generator's method
    ("a = np.random.rand(n)", True),  # the legacy generator, bound to its instance
    ("np.add.at(out, i, v)", False),  # traced
    ("s = np.sum(a) + len(a)", False),  # NumPy's and a builtin
    ("s = a.std()", False),  # an array's method
    ("y = helper(a)", False),  # the user's own function: its lines are its own rows
    ("y = math.exp(x)", True),  # another library's
    ("y = make()(a)", False),  # not readable without running something
    ("m = Model(3)", False),  # the user's class, constructed
    ("m = Model.build(3)", False),  # the user's classmethod
    ("m = Model.make(3)", False),  # the user's staticmethod
    ("y = bound(a)", False),  # a partial of the user's function
    ("y = Fraction(1, 3)", True),  # another library's class
])
def test_a_line_calls_work_the_tracer_cannot_see(code, unseen):
    import functools
    import math
    from fractions import Fraction
    ns = {"np": np, "rng": np.random.default_rng(0), "math": math, "a": np.ones(3),
          "out": np.zeros(3), "i": np.arange(3), "v": np.ones(3), "n": 3, "x": 1.0,
          "helper": _user_function(), "make": lambda: None, "Model": _Model,
          "bound": functools.partial(_user_function(), ), "Fraction": Fraction}
    assert unseen_calls(ast.parse(code), ns) is unseen


class _Model:
    def __init__(self, n):
        self.n = n

    @classmethod
    def build(cls, n):
        return cls(n)

    @staticmethod
    def make(n):
        return _Model(n)


def _user_function():
    def helper(a):
        return a
    return helper


@pytest.mark.parametrize(("kept", "new", "share"), [
    (20 << 20, 0, 1.0),  # the first write to an array made before: all kept
    (32 << 20, 224 << 20, 32 / 224),  # a result kept, its temporaries freed
    (0, 128 << 20, 0.0),  # a temporary only
    (0, 0, 0.0),
])
def test_the_share_of_first_touches_on_memory_kept(kept, new, share):
    assert kept_share(kept, new) == pytest.approx(share)


@pytest.mark.parametrize(("first_s", "line_s", "hits", "run_s", "expected_s"), [
    (9.5e-3, 9.5e-3, 1, 14e-6, 9.5e-3 - 14e-6),  # default_rng(0)'s first call: all but a run
    (2e-3, 2e-3, 1, 1.9e-3, 0.0),  # within FIRST_USE_RATIO of its replay: no one-time cost
    (5e-3, 5e-3 + 99 * 1e-3, 100, 1e-3, 4e-3),  # a loop's first run: beyond the others' 1 ms
    # the others ran at 2 ms in the program (replayed at 1 ms): the first is 1 ms beyond them
    (3e-3, 3e-3 + 99 * 2e-3, 100, 1e-3, 1e-3),
    (3e-3, 3e-3 + 99 * 2.5e-3, 100, 1e-3, 0.0),  # 1.2x the others: not one-time
    (5e-3, 100 * 1e-3, 100, 1e-3, 0.0),  # a line timed by its replays: none beyond them
])
def test_a_first_run_beyond_the_others_is_paid_once(first_s, line_s, hits, run_s, expected_s):
    assert one_time(first_s, line_s, hits, run_s, spread_s=1e-6) == pytest.approx(expected_s)


def test_a_first_run_within_the_spread_or_held_by_kept_memory_is_no_one_time_cost():
    assert one_time(1e-3, 1e-3, 1, 0.2e-3, spread_s=1e-3) == 0.0  # the replays' own spread
    # 8 ms of which 7.5 touched memory the program keeps: the rest beyond a run
    assert one_time(8e-3, 8e-3, 1, 0.1e-3, 0.0, kept_s=7.5e-3) == pytest.approx(0.4e-3)


def test_first_touches_of_memory_kept_are_not_recoverable():
    # 8 ms, 7.5 of them touching 80 MB the program keeps: 0.5 ms left, or what was measured
    assert recoverable(8e-3, 0.0, 0.0, 0.0, kept_s=7.5e-3) == pytest.approx(0.5e-3)
    assert recoverable(8e-3, 0.0, 0.0, 2e-3, kept_s=7.5e-3) == pytest.approx(2e-3)


@pytest.mark.parametrize(("code", "steps"), [
    ("y = a * b + c", 2),
    # once per element of what the comprehension iterates: x has 10, w 4
    ("s = sum(x[i] * w[i] for i in range(len(w)))", 3 + 4 * 3),  # sum, range, len; 4 x 3
    ("t = [v * 2.0 for v in x]", 10),
    ("t = [v * 2.0 for v in x if v > 0]", 10 + 10),
    ("t = [a + b for a, b in zip(x, w)]", 1 + 4),
    ("t = {k: v for k, v in enumerate(w)}", 1),
    ("t = [v for v in range(0, n, 2)]", 1),  # 3 elements, no step in each
    ("t = [v + 1 for v in range(0, n, 2)]", 1 + 3),
    ("t = [r.sum() for r in f(x)]", 1 + 2),  # f(x) unknown without running it: once
    ("t = [v + 1 for v in range(n, 0, 0)]", 1 + 1),  # a step of 0: not known
])
def test_a_comprehensions_steps_count_once_per_element(code, steps):
    ns = {"x": np.arange(10.0), "w": [1, 2, 3, 4], "n": 6}
    assert _syntax_steps(ast.parse(code), ns) == steps


@pytest.mark.parametrize(("cold", "expected_s"), [
    # both from memory, slower than the program's run (11 us, its loop's neighbours cached):
    # their ratio, applied to that run
    (True, 0.11 * (1 - 38 / 77)),
    # timed warm, as the program ran it: the run less the contiguous layout's time
    (False, 0.11 * (11 - 38) / 11),
])
def test_a_strided_line_saves_what_its_layouts_measured_of_the_programs_run(
        monkeypatch, cold, expected_s):
    import chokepoint.program.analyse as analyse

    monkeypatch.setattr(analyse, "strided_line",
                        lambda st, ns: SimpleNamespace(operands=["X[:, j]"], strided_bytes=48000))
    monkeypatch.setattr(analyse, "timed_layouts",
                        lambda line, cold: ([77e-6, 76e-6, 78e-6] * 2, [38e-6, 37e-6, 39e-6] * 2))
    causes: list = []
    ruled: list = []
    found = analyse._strided_cause(None, {}, 11e-6, 7e-6, 10_000, 0.11, causes, ruled, [],
                                   analyse._Ledger(0.11), cold=cold)
    if expected_s > 0:
        assert found and causes[0].seconds == pytest.approx(expected_s)
    else:  # the contiguous layout took longer than the program's run: nothing it saves
        assert not found and ruled[0]["kind"] == "strided-access"


def test_work_without_a_model_of_its_floor():
    from chokepoint.program.analyse import unmodelled

    for name in ("sort", "ndarray.argsort", "rfft", "cumsum", "ndarray.cumsum", "interp",
                 "add.accumulate", "multiply.accumulate", "histogram"):
        assert unmodelled(name), name
    for name in ("add", "ndarray.sum", "add.reduce", "matmul", "exp"):
        assert not unmodelled(name), name
