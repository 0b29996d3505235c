"""A line calling the user's own functions, replayed with what they returned standing in."""

import ast

import numpy as np
import pytest

from chokepoint.program.callees import CalleeError, called_functions, returning, sandboxed

_CALLS = np.zeros(1)
_RNG = np.random.default_rng(1)
_SEEN: list = []


def _helper(x):
    _CALLS[0] += 1
    return x * 2


def _bump(x):
    _CALLS[0] += 1
    _SEEN.append(x)
    return _RNG.standard_normal() + _helper(x)


def _shows(x):
    print(x)
    return x


def _plain(x):
    return x + 1


def _resolver(values):
    return lambda node: values.get(node.id) if isinstance(node, ast.Name) else None


def test_the_users_functions_a_line_calls_by_name_are_found():
    tree = ast.parse("g = (_plain(X[i] @ w) - y[i]) * np.exp(X[i])")
    found = called_functions(tree, _resolver({"_plain": _plain, "np": np, "X": 1}))
    assert found == {"_plain": _plain}  # np.exp is NumPy's, X is no function


def test_a_users_function_passed_as_a_value_cannot_stand_in():
    tree = ast.parse("v = list(map(_plain, xs))")
    with pytest.raises(CalleeError, match="as a value"):
        called_functions(tree, _resolver({"_plain": _plain, "xs": [1]}))


def test_a_sandboxed_function_changes_none_of_the_users_globals():
    # its global arrays, lists and generator are copies; the user function it calls too
    calls, seen, state = _CALLS.copy(), list(_SEEN), _RNG.bit_generator.state
    copy = sandboxed(_bump)
    value = copy(1.5)
    assert value == pytest.approx(np.random.default_rng(1).standard_normal() + 3.0)
    copy(2.5)
    assert (_CALLS == calls).all() and _SEEN == seen
    assert _RNG.bit_generator.state == state


@pytest.mark.parametrize(("fn", "why"), [(_shows, "print"), (None, "")])
def test_a_function_with_effects_or_no_source_cannot_stand_in(fn, why):
    if fn is not _shows:  # a lambda of this file: its source is the whole statement here
        def outer():
            k = 2

            def inner(x):
                return x * k
            return inner
        fn, why = outer(), "variables of the function around it"
    with pytest.raises(CalleeError, match=why):
        sandboxed(fn)


def test_a_stand_in_returns_the_recorded_results_in_turn_as_read_only_copies():
    a, b = np.ones(3), np.zeros(3)
    f = returning("f", [a, (b, 2), 7.0])
    first, (second, two), seven, again = f(1), f(2), f(3), f(4)
    assert (first == a).all() and (second == b).all() and (two, seven) == (2, 7.0)
    assert again is first and first is not a  # the same copy each cycle, never the user's
    assert f.__name__ == "f"
    with pytest.raises(ValueError):
        first[0] = 2.0  # a line writing into what the function returned is not replayed
    with pytest.raises(ValueError):
        second[0] = 2.0
    a[0] = 5.0  # the user's arrays stay theirs, writable


def _squares(n):
    yield from (i * i for i in range(n))


def test_a_generator_or_an_iterator_returned_cannot_stand_in():
    with pytest.raises(CalleeError, match="yield"):  # a generator: the 1st replay spends it
        sandboxed(_squares)
    with pytest.raises(CalleeError, match="iterator"):
        returning("f", [iter([1, 2])])


_BIG = np.zeros(1)


def _reads_big(x):
    return x + _BIG.sum()


def test_a_sandbox_copies_no_more_than_its_budget_of_global_arrays(monkeypatch):
    import chokepoint.program.callees as callees

    monkeypatch.setattr(callees, "SANDBOX_BYTES", 4)
    with pytest.raises(CalleeError, match="MiB of global arrays"):
        sandboxed(_reads_big)


class _Cfg:
    calls = 0


_push = _SEEN.append
_draw = np.random.RandomState(0).normal


def _bumps_class(x):
    _Cfg.calls += 1
    return x


def _reads_module(x):
    return ast.literal_eval(str(x))


def _pushes(x):
    _push(x)
    return x


def _draws(x):
    return x + _draw()


@pytest.mark.parametrize(("fn", "why"), [
    (_bumps_class, "the class _Cfg"),  # its attributes are the user's
    (_reads_module, "the module ast"),  # another module's objects are the user's
    (_pushes, "append"),  # stack.append kept in a global
    (_draws, "a method or partial"),  # the user's own RandomState
])
def test_a_function_reaching_the_users_objects_through_a_shared_global_cannot_stand_in(fn, why):
    with pytest.raises(CalleeError, match=why):
        sandboxed(fn)
