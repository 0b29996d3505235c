"""Running statements: names, compiled statements, seeded setups, copies of user arrays."""

import numpy as np
import pytest

from chokepoint.measure.statements import (
    Statement,
    compile_statement,
    mutated,
    names_used,
    run_setup,
    same_array,
)


def test_names_used_include_string_constants():
    assert {"ne", "evaluate", "X", "view"} <= set(names_used("ne.evaluate('X >= 0').view('i1')"))
    assert "Y" in names_used("[y for y in Y]")


def test_compile_statement_value_or_none():
    ns = {"a": 2}
    assert compile_statement("a * 3", ns)() == 6
    assert compile_statement("b = a + 1", ns)() is None
    with pytest.raises(SyntaxError):
        compile_statement("a +", ns)


def test_setup_is_seeded_and_fresh():
    first = run_setup("X = np.random.randn(5)")
    second = run_setup("X = np.random.randn(5)")
    assert np.array_equal(first["X"], second["X"]) and first["X"] is not second["X"]
    assert run_setup("", n=7)["n"] == 7
    assert run_setup(lambda n: {"X": np.arange(n)}, n=3)["X"].tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match="dict"):
        run_setup(lambda: 42)


def test_user_arrays_named_by_the_code_are_copied_others_shared():
    user = {"A": np.ones(3), "B": np.ones(3)}
    ns = run_setup("", base=user, code=["A.fill(0)"])
    assert ns["A"] is not user["A"] and ns["B"] is user["B"]


def test_mutation_and_same_array():
    before = {"X": np.array([1.0, np.nan])}
    assert mutated(before, {"X": np.array([1.0, np.nan])}) == []
    assert mutated(before, {"X": np.array([2.0, np.nan])}) == ["X"]
    assert mutated(before, {}) == ["X"]
    assert not same_array(np.ones(2), np.ones(3))


# --------------------------------------------------------------------------- Statement

def test_statement_with_a_trailing_comment_runs():
    s = Statement.parse("np.copy(X)  # note")
    assert s.mode == "eval" and s.is_expression
    X = np.arange(3.0)
    ns = {"np": np, "X": X}
    out = s.function(ns)()
    assert np.array_equal(out, X) and out is not X
    assert np.array_equal(s.run(ns), X)
    assert compile_statement("np.copy(X)  # note", ns)().tolist() == [0.0, 1.0, 2.0]


def test_statement_modes_names_and_values():
    s = Statement.parse("ne.evaluate('X >= 0').view('i1')")
    assert {"ne", "X", "view", "evaluate"} <= set(s.names)
    t = Statement.parse("b = a + 1")
    assert t.mode == "exec" and t.function({"a": 1})() is None
    ns = {"a": 1}
    t.run(ns)
    assert ns["b"] == 2


def test_multi_line_statement_keeps_file_lines():
    s = Statement.parse("\n\n    y = a + 1\n    y * 2  # last\n", filename="cell.py",
                        first_line=10)
    assert s.source == "y = a + 1\ny * 2  # last" and s.mode == "exec"
    assert s.first_line == 12 and s.location() == "cell.py:12" and s.location(13) == "cell.py:13"
    fn = s.function({"a": 1})
    assert fn() == 4
    assert {line for _, _, line in fn.__code__.co_lines() if line} == {12, 13}
    assert s.run({"a": 1}) == 4


@pytest.mark.parametrize("empty", ["", "   ", "\n  # only a comment\n"])
def test_empty_statement_refused(empty):
    with pytest.raises(ValueError, match="empty statement"):
        Statement.parse(empty)


def test_too_deep_statement_is_a_syntax_error_not_memory_error():
    with pytest.raises(SyntaxError, match="too deeply nested"):
        Statement.parse("-" * 100000 + "X")


def test_setup_leaves_the_users_random_state_alone():
    # issue 13.2: a race or explain inside IPython must not reseed the user's generators
    import random

    np.random.seed(5)  # noqa: NPY002 - the legacy global RNG is what must stay untouched
    random.seed(5)
    np_before, py_before = np.random.get_state()[1].copy(), random.getstate()  # noqa: NPY002
    ns = run_setup("X = np.random.randn(3); r = random.random()", code=["X"],
                   base={"random": random})
    assert ns["X"].shape == (3,)
    assert np.array_equal(np.random.get_state()[1], np_before)  # noqa: NPY002
    assert random.getstate() == py_before


def test_race_never_changes_arrays_reached_through_containers_or_attributes():
    # issue 13.1: D['X'] and b.arr are the user's arrays; the statement writes into them
    import types

    import chokepoint

    A = np.linspace(-1, 1, 64)
    D = {"X": A}
    b = types.SimpleNamespace(arr=A.copy())
    before, before_b = A.copy(), b.arr.copy()
    r = chokepoint.race(["np.maximum(D['X'], 0, out=D['X'])", "np.maximum(b.arr, 0, out=b.arr)"],
                        namespace={"D": D, "b": b}, min_time=0.001, repeats=1)
    assert all(c.error is None for c in r.candidates)
    assert np.array_equal(A, before) and D["X"] is A
    assert np.array_equal(b.arr, before_b)


@pytest.mark.parametrize("source", ["-" * 1000 + "X", "X" + ".T" * 1000, "X" + "+X" * 1000])
def test_too_deep_for_the_ast_compiler_is_a_syntax_error(source):
    # these parse, but compiling their tree recursed past the limit (a RecursionError)
    with pytest.raises(SyntaxError, match="too deeply nested"):
        Statement.parse(source).function({"X": 1})


def test_a_300_term_sum_runs_as_timeit_runs_it():
    # issue 32.14: copy.deepcopy of its tree recursed past the limit; timeit runs it
    statement = Statement.parse("+".join(["X"] * 300))
    assert statement.function({"X": 1})() == 300
    assert statement.run({"X": 2}) == 600


def test_a_statement_rebinding_a_name_it_reads_starts_from_the_namespaces_value():
    import numpy as np

    from chokepoint.measure.statements import Statement

    ns = {"x": np.ones(3)}
    fn = Statement.parse("x = x * 2\nx").function(ns)
    assert fn().tolist() == [2.0, 2.0, 2.0]
    assert fn().tolist() == [2.0, 2.0, 2.0]  # each call starts from the namespace's x
    assert ns["x"].tolist() == [1.0, 1.0, 1.0]
