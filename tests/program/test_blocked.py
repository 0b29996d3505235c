"""A line on blocks of its result's rows: the code it writes and the values it gives."""

import numpy as np

from chokepoint.explain.trace import trace
from chokepoint.measure.statements import Statement
from chokepoint.program.blocked import BLOCK_BYTES, blocked, largest_intermediate


def _plan(expression, **arrays):
    ns = {"np": np, **arrays}
    tr = trace(Statement.parse(expression), dict(ns), list(arrays))
    largest = largest_intermediate(tr.ops, arrays, tr.result)
    return blocked(expression, "d2", ns, arrays, tr.result, largest), tr.result, largest


def test_a_broadcast_is_evaluated_on_blocks_with_the_same_values():
    rng = np.random.default_rng(0)
    X, C = rng.random((40_000, 6)), rng.random((12, 6))
    plan, result, largest = _plan("((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)",
                                  X=X, C=C)
    assert largest == 40_000 * 12 * 6 * 8  # the broadcast's difference
    assert plan.rows == 40_000 * BLOCK_BYTES // largest
    assert np.array_equal(plan.call(), result)
    assert plan.code.splitlines() == [
        "d2 = np.empty((40000, 12))",
        f"for i in range(0, 40000, {plan.rows}):",
        f"    d2[i:i + {plan.rows}] = ((X[i:i + {plan.rows}][:, None, :] - C[None, :, :]) ** 2)"
        ".sum(axis=2)"]
    code = compile(plan.code, "<rewrite>", "exec")  # what a user pastes runs
    scope = {"np": np, "X": X, "C": C}
    exec(code, scope)
    assert np.array_equal(scope["d2"], result)


def test_no_plan_for_an_intermediate_no_larger_than_the_line():
    rng = np.random.default_rng(0)
    A = rng.random((3000, 3000))
    plan, _, largest = _plan("np.sqrt(A * A + 1.0)", A=A)
    assert largest == 0 and plan is None


def test_a_line_that_mixes_rows_gives_other_values_on_blocks():
    # the caller compares the values: a sum over the first axis is not made of rows (and
    # both of x's uses are sliced)
    x = np.random.default_rng(1).random(3000)
    plan, result, _ = _plan("(x[:, None] * x[None, :]).sum(axis=0)", x=x)
    assert plan is not None
    assert not np.array_equal(plan.call(), result)
