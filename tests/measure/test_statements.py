"""Running statements: names, compiled statements, seeded setups, copies of user arrays."""

import numpy as np
import pytest

from chokepoint.measure.statements import (
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
