"""The recording run: statements, hits, own time, captures (no timing asserted)."""

import os
import sys
import textwrap

import numpy as np
import pytest

from chokepoint.kernels import native
from chokepoint.program import record
from chokepoint.program.record import Recorder, SourceMap, fingerprint, user_file

#: which hook the tests of this module record with (see the fixture below)
HOOK = {"compiled": True}


@pytest.fixture(autouse=True, params=["C hook", "Python hook"])
def _hook(request):
    """Every recording test runs on both hooks: the C one takes the common line event, the
    Python one every event; they must count the same."""
    if request.param == "C hook" and record._compiled is None:
        pytest.skip("the C hook is not built here (CHOKEPOINT_NATIVE=0, or no compiler)")
    HOOK["compiled"] = request.param == "C hook"
    yield
    HOOK["compiled"] = True


def _write(tmp_path, source: str, name: str = "prog.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def _record(path, include=()):
    scope = {"__name__": "__main__"}
    code = compile(path.read_text(), str(path), "exec")
    recorder = Recorder(include=include, compiled=HOOK["compiled"])
    recorder.start()
    try:
        exec(code, scope)
    finally:
        recorder.stop()
    return recorder, scope


def test_a_statement_over_several_lines_is_one_row_at_its_first_line(tmp_path):
    path = _write(tmp_path, """\
        import numpy as np
        x = np.add(1,
                   2)
        for i in range(3):
            y = (x +
                 i)
        """)
    smap = SourceMap(str(path))
    assert smap.line_to_first[3] == 2
    assert smap.line_to_first[6] == 5
    assert smap.statements[4].is_loop
    assert smap.statements[5].loop == 4
    assert smap.statements[5].names == ("i", "x")


def test_hits_count_each_execution_and_a_loop_header_its_iterations(tmp_path):
    path = _write(tmp_path, """\
        total = 0
        for i in range(5):
            total = total + i
        """)
    recorder, _ = _record(path)
    rows = {line: stat for (_, line), stat in recorder.lines.items()}
    assert rows[3].hits == 5
    assert rows[2].hits == 6  # five iterations and the exhausted range
    assert rows[1].hits == 1


def test_a_callers_line_does_not_count_the_time_of_the_lines_it_calls(tmp_path):
    path = _write(tmp_path, """\
        import time
        def slow():
            time.sleep(0.05)
        slow()
        """)
    recorder, _ = _record(path)
    rows = {line: stat for (_, line), stat in recorder.lines.items()}
    assert rows[3].ns >= 0.04e9  # the sleep: library code, counted in the line calling it
    assert rows[4].ns < 0.5 * rows[3].ns  # the call's line: its own time only


def test_the_c_hook_counts_the_page_faults_of_a_statement_over_all_its_lines(tmp_path):
    # 40 MB arrays, kept: over glibc's largest mmap threshold (32 MiB), each is mapped fresh
    # and faulted in whatever the process did before (in 4 KiB pages, or 2 MiB ones where
    # NumPy's huge-page advice is taken: 19-20, the first and last pieces in small pages, and
    # 13 seen once beside a busy core); the buffer written in place faults none. A statement
    # over two lines keeps counting on its second line, which gets no row of its own.
    path = _write(tmp_path, """\
        import numpy as np
        kept, out = [], np.zeros(5_000_000)
        for _ in range(4):
            kept.append(np.zeros(5_000_000)
                        + 2.0)
            np.multiply(out, 2.0, out=out)
        """)
    recorder, _ = _record(path)
    rows = {line: stat for (_, line), stat in recorder.lines.items()}
    if not HOOK["compiled"]:  # the Python hook counts no page fault: unknown, not zero
        assert rows[4].fault_hits == rows[4].faults == 0
        return
    assert rows[4].fault_hits == rows[4].hits - 1  # from its second run (its time known)
    assert 5 not in rows
    assert rows[4].faults / rows[4].fault_hits >= 8
    assert rows[6].fault_hits == rows[6].hits - 1
    assert rows[6].faults / rows[6].fault_hits <= 4


def test_the_first_execution_is_captured_and_an_in_place_update_recaptured_by_copy(tmp_path):
    path = _write(tmp_path, """\
        import numpy as np
        B = np.linspace(-1, 1, 100_000)
        for _ in range(2):
            B[B < 0] = 0
        """)
    recorder, scope = _record(path)
    stat = recorder.lines[(str(path), 4)]
    assert stat.mutates
    assert stat.capture.copied and stat.capture.hit == 2  # the values the second run saw
    assert stat.capture.values["B"] is not scope["B"]
    assert (stat.capture.values["B"] >= 0).all()  # after the first run's update


def test_a_line_whose_work_grows_is_captured_again_at_its_2nd_4th_8th_run(tmp_path):
    # replayed on its first run's values, a line appending to an array in a loop took 20 us
    # where its runs averaged 3 ms
    path = _write(tmp_path, """\
        import numpy as np
        paths = np.ones((1000, 1))
        for t in range(20):
            paths = np.hstack([paths, paths[:, -1:] * 2])
        """)
    recorder, _ = _record(path)
    stat = recorder.lines[(str(path), 4)]
    assert stat.hits == 20 and not stat.capture.copied
    assert stat.capture.hit == 16 and stat.capture.values["paths"].shape == (1000, 16)
    # its work grew: the first capture read 1000 x 1 float64, this one 1000 x 16
    assert stat.first_bytes == 8000 and stat.capture.input_bytes == 128_000
    assert 0 < stat.capture.run_ns <= stat.ns
    # the earlier captures' arrays are no longer held, nor counted
    assert recorder.held == sum(s.capture.nbytes for s in recorder.lines.values()
                                if s.capture is not None)
    assert [record.recaptured(n) for n in range(1, 10)] == [
        False, True, False, True, False, False, False, True, False]


def test_a_lambdas_body_on_its_statements_line_is_not_captured_in_its_place(tmp_path):
    # the lambda's frame runs the statement's line too (its 2nd hit): its names are not the
    # statement's, and a replay on them raised NameError
    path = _write(tmp_path, """\
        import numpy as np
        def initialize(W):
            img = np.fromfunction(lambda i, j:
                                  (i + W * j) % 7, (W, W))
            return img
        initialize(300)
        """)
    recorder, _ = _record(path)
    stat = recorder.lines[(str(path), 3)]
    assert stat.hits == 2 and stat.capture.hit == 1 and stat.capture.values["W"] == 300


def test_an_array_read_by_two_lines_is_counted_once_however_often_they_are_captured(
        tmp_path):
    path = _write(tmp_path, """\
        import numpy as np
        big = np.ones(1_000_000)
        for _ in range(5):
            s = big * 2.0
            t = big + 1.0
        """)
    recorder, scope = _record(path)
    rows = {line: stat for (_, line), stat in recorder.lines.items()}
    assert rows[4].capture.hit == rows[5].capture.hit == 4
    held = {id(v): v.nbytes for stat in recorder.lines.values() if stat.capture is not None
            for v in stat.capture.values.values() if isinstance(v, np.ndarray)}
    assert recorder.held == sum(held.values())
    assert scope["big"].nbytes <= recorder.held < 2 * scope["big"].nbytes


def test_a_recursive_statement_gives_its_budget_back_once(tmp_path):
    # the inner call's run of the statement took its capture again while the outer run's was
    # still open: the outer one, finished last, was released a second time (held went negative)
    path = _write(tmp_path, """\
        import numpy as np
        def f(a, d):
            if d == 0:
                a += 1.0
                return
            f(a, d - 1)
        a = np.zeros(1_000_000)
        f(a, 2)
        """)
    recorder, _ = _record(path)
    # a capture whose statement changed what it read is given back (a copy is to come)
    held = {id(v): v.nbytes for stat in recorder.lines.values()
            if stat.capture is not None and not stat.capture.released
            for v in stat.capture.values.values() if isinstance(v, np.ndarray)}
    assert recorder.held == sum(held.values()) >= 0
    assert set(recorder.held_ids) == set(held)


def test_a_capture_taken_again_beyond_the_budget_keeps_the_earlier_one(tmp_path):
    path = _write(tmp_path, """\
        import numpy as np
        a = np.ones(10_000)
        for n in (20_000, 400_000):
            a = np.concatenate([a, np.ones(n)])
        """)
    scope = {"__name__": "__main__"}
    recorder = Recorder(budget_bytes=150_000, compiled=HOOK["compiled"])
    recorder.start()
    exec(compile(path.read_text(), str(path), "exec"), scope)
    recorder.stop()
    stat = recorder.lines[(str(path), 4)]
    assert stat.capture.hit == 1 and stat.capture.values["a"].shape == (10_000,)
    assert stat.state == 1 and not stat.over_budget


def test_a_capture_beyond_the_budget_is_refused_and_says_so(tmp_path):
    path = _write(tmp_path, """\
        import numpy as np
        A = np.ones(1_000_000)
        C = A + 1
        """)
    scope = {"__name__": "__main__"}
    recorder = Recorder(budget_bytes=1000)
    recorder.start()
    exec(compile(path.read_text(), str(path), "exec"), scope)
    recorder.stop()
    stat = recorder.lines[(str(path), 3)]
    assert stat.capture is None and "budget" in stat.why_not


def test_library_code_is_not_the_users():
    assert not user_file(np.__file__)
    assert not user_file(sys.modules["json"].__file__ if "json" in sys.modules
                         else __import__("json").__file__)
    assert user_file(__file__)


def test_a_fingerprint_sees_a_large_update_and_copies_small_arrays():
    a = np.arange(1_000_000, dtype=float)
    before = fingerprint(a)
    a[a > 10] = 0
    assert not np.array_equal(before, fingerprint(a))
    small = np.arange(10.0)
    assert np.array_equal(fingerprint(small), small)


def test_statements_with_effects_besides_computing_are_not_replayed():
    import ast

    from chokepoint.program.replay import side_effect

    for code in ("print(x)", "L.append(x)", "np.save('f.npy', x)", "f.write(s)",
                 "os.remove(p)", "time.sleep(1)", "x.tofile('f')"):
        assert side_effect(ast.parse(code)) is not None, code
    for code in ("np.add(a, b, out=c)", "y = x.sum()", "self.W -= lr * g", "B[B < 0] = 0",
                 "h = np.tanh(X @ W + b)"):
        assert side_effect(ast.parse(code)) is None, code


def test_an_include_prefix_matches_whole_folders_and_the_programs_folder_is_not_added(tmp_path):
    (tmp_path / "progs").mkdir()
    (tmp_path / "progs2").mkdir()
    inside, beside = tmp_path / "progs" / "a.py", tmp_path / "progs2" / "b.py"
    assert user_file(str(inside), (str(tmp_path / "progs"),))
    assert user_file(str(beside), (str(tmp_path / "progs"),))  # the user's anyway
    assert not user_file(np.__file__, (str(tmp_path / "progs"),))
    assert user_file(np.__file__, (os.path.dirname(np.__file__),))  # asked for by name


def test_calls_that_act_on_the_world_or_on_objects_not_copied_are_refused():
    import ast
    import logging
    import time as time_module

    from chokepoint.program.replay import refused_call

    out: list = []
    rng = np.random.default_rng(0)
    values = {"sleep": time_module.sleep, "log": logging.getLogger("x"),
              "append": out.append, "draw": rng.standard_normal, "x": np.ones(3),
              "rng": rng}
    for code in ("sleep(0.01)", "log.info('%s', x.sum())", "append(x)", "v = draw(3)"):
        assert refused_call(ast.parse(code), values, {}) is not None, code
    for code in ("y = np.sqrt(x) + x.sum()", "v = rng.standard_normal(3)", "n = len(x)"):
        assert refused_call(ast.parse(code), values, {"np": np}) is None, code


def test_a_comprehension_is_one_execution_of_its_line(tmp_path):
    # the comprehension's frame runs the line's loop: 1 hit, not one per iteration, and all of
    # the loop's time on the line
    import runpy

    from chokepoint.program.record import Recorder

    path = tmp_path / "comp.py"
    path.write_text("import numpy as np\n"
                    "X = np.arange(100.0)\n"
                    "rows = [np.sum(X[i:i + 10]) for i in range(50)]\n"
                    "total = sum(x for x in rows)\n")
    recorder = Recorder()
    recorder.start()
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        recorder.stop()
    hits = {line: stat.hits for (name, line), stat in recorder.lines.items()
            if name == str(path)}
    assert hits[3] == 1 and hits[4] == 1
    assert recorder.lines[str(path), 3].ns > 0


def test_the_same_function_in_two_files_is_two_rows_each(tmp_path):
    # code objects compare by content: two files' identical function were one row
    source = "def f(x):\n    y = x + 1\n    return y\n"
    scopes = []
    for name in ("a.py", "b.py"):
        path = _write(tmp_path, source, name)
        scope = {}
        exec(compile(path.read_text(), str(path), "exec"), scope)
        scopes.append(scope)
    recorder = Recorder(include=(str(tmp_path),))
    recorder.start()
    try:
        for _ in range(3):
            scopes[0]["f"](1)
        for _ in range(5):
            scopes[1]["f"](1)
    finally:
        recorder.stop()
    hits = {(os.path.basename(f), line): s.hits for (f, line), s in recorder.lines.items()}
    assert hits[("a.py", 2)] == 3 and hits[("b.py", 2)] == 5


def test_the_c_hook_is_built_wherever_the_kernels_c_path_is():
    if native.status().startswith("on"):
        assert record._compiled is not None
        assert Recorder().compiled


def test_both_hooks_count_the_same_calls_returns_comprehensions_generators_and_errors(
        tmp_path):
    path = _write(tmp_path, """\
        import numpy as np

        def step(x, k):
            y = x * k
            return (y +
                    1)

        def gen(n):
            for i in range(n):
                yield i * 2

        x = np.arange(4.0)
        total = 0
        for k in range(30):
            x = step(x, 0.5)
            total += sum(v for v in gen(3))
            squares = [j * j for j in range(4)]
            try:
                if k % 7 == 0:
                    raise ValueError(k)
            except ValueError:
                total -= 1
            n = 3
            while n: n -= 1
            m = np.mean(x)
        """)
    counts = {}
    for compiled in (True, False):
        if compiled and record._compiled is None:
            continue
        HOOK["compiled"] = compiled
        recorder, scope = _record(path)
        assert scope["total"] == 30 * 6 - 5
        counts[compiled] = {line: (s.hits, s.events, s.library_calls, s.user_calls, s.state,
                                   s.mutates, s.capture is not None)
                            for (_, line), s in recorder.lines.items()}
        rows = {line: s for (_, line), s in recorder.lines.items()}
        assert rows[4].hits == rows[15].hits == 30 and rows[5].hits == 30
        assert rows[10].hits == 90  # the generator's body, three values a call
        assert rows[17].hits == 30  # the comprehension: one execution of its line each time
        assert rows[21].hits == 5 and rows[25].hits == 30
        assert all(s.ns >= 0 for s in rows.values())
    if len(counts) == 2:
        assert counts[True] == counts[False]


def test_a_program_that_pauses_and_restores_the_tracer_is_recorded_whole(tmp_path):
    # numpy.testing, doctest and debuggers save sys.gettrace() and put it back: the C hook
    # is then called through sys.settrace, and takes over again
    path = _write(tmp_path, """\
        import sys
        def helper():
            old = sys.gettrace()
            sys.settrace(None)
            try:
                pass
            finally:
                sys.settrace(old)
        def g(n):
            return n + 1
        helper()
        x = g(1)
        y = x + 1
        """)
    recorder, scope = _record(path)
    assert scope["y"] == 3
    rows = {line: s.hits for (_, line), s in recorder.lines.items()}
    assert rows[11] == rows[12] == rows[13] == 1 and rows[10] == 1


def test_a_recording_inside_a_recording_hands_the_thread_back_to_the_outer_one(tmp_path):
    path = _write(tmp_path, """\
        def f(n):
            s = 0
            for i in range(n):
                s += i
            return s
        """, name="lib_f.py")
    scope: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), scope)
    before = sys.gettrace()
    outer = Recorder(include=(str(tmp_path),), compiled=HOOK["compiled"])
    outer.start()
    try:
        scope["f"](3)
        inner = Recorder(include=(str(tmp_path),), compiled=HOOK["compiled"])
        inner.start()
        scope["f"](3)
        inner.stop()
        scope["f"](3)  # recorded by the outer one again
    finally:
        outer.stop()
    assert sys.gettrace() is before
    hits = {line: s.hits for (_, line), s in outer.lines.items()}
    assert hits[4] == 6  # its first and third calls (the inner recording took the second)
    assert {line: s.hits for (_, line), s in inner.lines.items()}[4] == 3


def test_a_library_frame_has_its_line_events_back_after_the_recording():
    # the C hook turns a library function's lines off while it runs; a generator resumed with
    # nothing of the user's on the stack kept them off after the recording (a tracer installed
    # afterwards saw none of its lines)
    scope = {}
    exec(compile("def gen():\n    for i in range(5):\n        yield i\n", "<lib>", "exec"),
         scope)
    g = scope["gen"]()
    recorder = Recorder(compiled=HOOK["compiled"])
    recorder.start()
    next(g), next(g), next(g)
    recorder.stop()
    lines = []

    def tracer(frame, event, arg):
        if frame.f_code is g.gi_code and event == "line":
            lines.append(frame.f_lineno)
        return tracer

    sys.settrace(tracer)
    try:
        next(g)
    finally:
        sys.settrace(None)
    assert lines
