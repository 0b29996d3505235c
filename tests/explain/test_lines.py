"""The line patterns' syntax (:mod:`chokepoint.explain.lines`): no timing."""

import ast

import numpy as np
import pytest

from chokepoint.explain.lines import (
    LineCapture,
    _add_at,
    _check,
    _contraction,
    _einsum_spec,
    _gathered_operands,
    _iterated_arrays,
    _nested_roll,
    _patterns,
    _product,
    _quantile_calls,
    _same_arrays,
    _scalar_power,
    _small_power,
    _summed,
    _tabulated,
    _top_k,
    _unique,
)


def _node(code):
    return ast.parse(code, mode="eval").body


@pytest.mark.parametrize("code, a, k, axis", [
    ("np.argsort(D, axis=1)[:, :7]", "D", "7", "1"),
    ("np.argsort(d)[:k]", "d", "k", None),
    ("X.argsort(axis=-1)[:, :, :n + 1]", "X", "n + 1", "-1"),
    ("np.argsort(-scores, axis=1)[:, :10]", "-scores", "10", "1"),
    ("np.argsort(counts, kind='stable')[::-1][:5]", "counts", "5", None),
])
def test_the_first_k_of_a_sort_are_found(code, a, k, axis):
    found = _top_k(_node(code))
    assert found is not None
    assert (ast.unparse(found[0]), ast.unparse(found[1])) == (a, k)
    assert (ast.unparse(found[2]) if found[2] is not None else None) == axis


@pytest.mark.parametrize("code", [
    "np.argsort(D)[:, 2:7]",  # not the first k
    "np.argsort(D)[:7, :]",  # the first rows, not the first k of each
    "np.argsort(D, order='f')[:, :7]",  # a record's fields
    "np.argsort(D)[::-1][2:5]",
    "np.sort(D)[:, :7]",
    "np.argsort(D)[:, -7:]",
])
def test_other_slices_of_a_sort_are_not(code):
    assert _top_k(_node(code)) is None


@pytest.mark.parametrize("code, summed", [
    ("mask.sum()", "mask"), ("np.sum(x > 0)", "x > 0"), ("(a == b).sum()", "a == b")])
def test_sums_over_all_elements_are_found(code, summed):
    assert ast.unparse(_summed(_node(code))) == summed


@pytest.mark.parametrize("code", ["x.sum(axis=0)", "np.sum(x, 1)", "x.sum(dtype=int)",
                                  "model.step(x).sum()", "np.sum(f(x) > 0)"])
def test_sums_along_an_axis_or_of_calls_are_not(code):
    assert _summed(_node(code)) is None


def test_a_line_holds_each_of_its_patterns():
    patterns = _patterns(ast.parse("n = (a > 0).sum() * np.argsort(D)[:, :3]"))
    assert sorted(p.original for p in patterns) == ["(a > 0).sum()", "np.argsort(D)[:, :3]"]


@pytest.mark.parametrize("code, shape", [
    ("n = np.argsort(D)[:5]", (3000, 400)),  # the first rows of a 2-D sort, not k per row
    ("n = np.argsort(D)[:, :5]", (20, 30, 400)),  # axis 1 of three
    ("n = np.argsort(f())[:, :5]", (3000, 400)),  # a call: the proposal would make it twice
    ("n = [np.argsort(D)[:, :5] for _ in range(2)]", (3000, 400)),  # not hoisted out of a loop
    ("n = np.argsort(D)[:, :5] if c else None", (3000, 400)),  # nor out of a condition
    ("n = np.argsort(D)[:, :300]", (3000, 400)),  # most of the row: a sort it is
])
def test_a_sort_whose_first_k_cannot_be_partitioned_is_left_alone(code, shape):
    # each refused before anything is timed
    d = np.random.default_rng(0).random(shape)
    env = {"D": d, "np": np, "f": lambda: d, "c": True}
    patterns = [p for p in _patterns(ast.parse(code)) if p.top is not None]
    assert patterns
    capture = LineCapture("f.py", 1, code, patterns, env)
    assert all(_check(capture, p, min_time=0.001) is None for p in patterns)


def test_a_count_whose_integer_is_used_as_numpys_is_not_a_pattern():
    assert not _patterns(ast.parse("n = mask.sum().item()"))
    assert not _patterns(ast.parse("n = np.sum(mask).astype(float)"))
    assert [p.original for p in _patterns(ast.parse("n = mask.sum() + 1"))] == ["mask.sum()"]


@pytest.mark.parametrize("code, a, flags", [
    ("np.unique(codes)", "codes", ()),
    ("np.unique(df.store, return_counts=True)", "df.store", ("return_counts",)),
    ("np.unique(x, return_counts=True, return_inverse=True)", "x",
     ("return_inverse", "return_counts")),
    ("np.unique(x, return_inverse=False)", "x", ()),
])
def test_a_unique_a_count_can_make_is_found(code, a, flags):
    found = _unique(_node(code))
    assert found is not None and (ast.unparse(found[0]), found[1]) == (a, flags)


@pytest.mark.parametrize("code", ["np.unique(x, return_index=True)", "np.unique(x, axis=0)",
                                  "np.unique(x, return_counts=flag)", "np.unique(x, y)",
                                  "set(x)"])
def test_a_unique_a_count_does_not_give_is_not(code):
    assert _unique(_node(code)) is None


@pytest.mark.parametrize("code, values", [
    ("u = np.unique(F)", "floats"),
    ("u = np.unique(N)", "negative"),
    ("u = np.unique(W)", "a range wider than the array"),
    ("u = np.unique(f())", "a call: the proposal would make it twice"),
    ("u = [np.unique(C) for _ in range(2)]", "not hoisted out of a loop"),
])
def test_a_unique_that_cannot_be_counted_is_left_alone(code, values):
    # each refused before anything is timed
    rng = np.random.default_rng(0)
    c = rng.integers(0, 50, 1000)
    env = {"np": np, "C": c, "F": c.astype(float), "N": c - 5, "W": c * 10**6,
           "f": lambda: c}
    patterns = [p for p in _patterns(ast.parse(code)) if p.unique is not None]
    assert patterns, values
    capture = LineCapture("f.py", 1, code, patterns, env)
    assert all(_check(capture, p, min_time=0.001) is None for p in patterns), values


def test_results_agree_only_with_the_same_values_shapes_and_dtypes():
    a = np.arange(4)
    assert _same_arrays((a, a), (a.copy(), a.copy())) == "same values"
    assert _same_arrays(a, a.astype(np.int32)) is None
    assert _same_arrays((a,), (a, a)) is None
    assert _same_arrays(a, a.reshape(2, 2)) is None


@pytest.mark.parametrize("code, ndims, spec", [
    ("(A[:, :, None] * B[None, :, :]).sum(axis=1)", (2, 2), "ab,bc->ac"),
    ("np.sum(A[:, :, None] * B[None], axis=-2)", (2, 2), "ab,bc->ac"),
    ("(A[:, :, None] * D).sum(axis=1)", (2, 3), "ab,abc->ac"),
    ("(x[:, None] * y).sum(axis=0)", (1, 2), "a,ab->b"),
    ("(diff * (w * m[None, :])[:, :, None]).sum(axis=1)", (3, 2), "abc,ab->ac"),
])
def test_a_broadcast_product_summed_is_a_contraction(code, ndims, spec):
    factors, axis = _contraction(_node(code))
    assert _einsum_spec(factors, list(ndims), axis) == spec


def test_a_contraction_factor_made_by_an_expression_is_einsums_operand():
    factors, _ = _contraction(_node("(diff * (w * m[None, :])[:, :, None]).sum(axis=1)"))
    assert [code for code, _ in factors] == ["diff", "w * m[None, :]"]


@pytest.mark.parametrize("code", [
    "(A * B).sum(axis=1)",  # nothing broadcast: fuse's reduction
    "(A[:, :, None] * B).sum()",  # over everything
    "(A[:, :, None] * B).sum(axis=1, keepdims=True)",
    "(A[:, :, None] + B).sum(axis=1)",
    "(A[1:, :, None] * B).sum(axis=1)",  # a slice that is not whole
    "(f(A)[:, None] * B).sum(axis=1)",
    "(A[:, :, None] * B).sum(axis=k)",
])
def test_other_sums_are_not_contractions(code):
    assert _contraction(_node(code)) is None


def test_a_contraction_with_a_result_axis_of_length_one_is_left_alone():
    factors, axis = _contraction(_node("(A[:, None, :] * B[:, None, :]).sum(axis=2)"))
    assert _einsum_spec(factors, [2, 2], axis) is None


@pytest.mark.parametrize("code, q", [("np.interp(q, xp, fp)", "q"), ("np.exp(codes)", "codes"),
                                     ("np.power(q, 2)", "q"),
                                     ("np.interp(image.flatten(), b[:-1], c)", "image.flatten()"),
                                     ("np.exp(x[0].reshape(-1, 2))", "x[0].reshape(-1, 2)")])
def test_a_numpy_function_of_an_array_or_its_view_may_be_tabulated(code, q):
    assert ast.unparse(_tabulated(_node(code))) == q


@pytest.mark.parametrize("code", ["np.interp(q + 1, xp, fp)", "np.median(q)",
                                  "np.interp(f(q).ravel(), xp, fp)", "np.exp(q.sum())",
                                  "np.exp(q.reshape(n()))", "np.interp(q, xp[f()], fp)",
                                  "np.exp(q, out=y)", "np.exp(q, y)", "rng.poisson(q)", "f(q)",
                                  "np.multiply(q, rng.random())", "np.matmul(q, w)"])
def test_other_calls_are_not_tabulated(code):
    assert _tabulated(_node(code)) is None


@pytest.mark.parametrize("name", ["F", "N", "W", "S"])
def test_arrays_a_table_cannot_replace_are_left_alone(name):
    # floats, negative values, a range as wide as the array, too few elements: refused
    # before anything is timed
    rng = np.random.default_rng(0)
    q = rng.integers(0, 50, 4000)
    env = {"np": np, "F": q.astype(float), "N": q - 5, "W": q * 1000, "S": q[:100],
           "xp": np.arange(50.0), "fp": np.arange(50.0) ** 2}
    code = f"y = np.interp({name}, xp, fp)"
    patterns = [p for p in _patterns(ast.parse(code)) if p.table is not None]
    assert patterns
    capture = LineCapture("f.py", 1, code, patterns, env)
    assert all(_check(capture, p, min_time=0.001) is None for p in patterns)


def test_a_ufunc_of_an_integer_array_and_another_array_is_not_tabulated():
    # np.power(q, w) with w an array: a function of q and w, not of q alone (the check on the
    # user's values passed where w was all ones)
    rng = np.random.default_rng(0)
    env = {"np": np, "q": rng.integers(0, 16, (4096, 16)), "w": np.ones(16)}
    code = "y = np.power(q, w)"
    patterns = [p for p in _patterns(ast.parse(code)) if p.table is not None]
    assert patterns
    assert _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001) is None


def test_a_relu_written_as_a_maximum_keeps_its_pattern():
    assert [p.template for p in _patterns(ast.parse("y = np.maximum(x, 0)"))] == [
        "np.maximum(z, 0)"]


def test_a_contraction_whose_sum_overflows_as_written_is_not_proposed():
    # float16: the broadcast product overflows to inf where einsum's sum does not; an
    # infinite difference is never within a rounding bound
    env = {"np": np, "A": np.full((64, 2), 256.0, np.float16),
           "B": np.full((2, 64), 256.0, np.float16)}
    code = "y = (A[:, :, None] * B[None, :, :]).sum(axis=1)"
    patterns = [p for p in _patterns(ast.parse(code)) if p.contraction is not None]
    assert patterns
    assert _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001) is None


@pytest.mark.parametrize("code, x, n", [
    ("f ** 3", "f", 3), ("(a - b) ** 4", "a - b", 4), ("np.power(x, 3.0)", "x", 3),
])
def test_a_small_power_is_found(code, x, n):
    found = _small_power(_node(code))
    assert found is not None and ast.unparse(found[0]) == x and found[1] == n


@pytest.mark.parametrize("code", ["f ** 2", "f ** 0.5", "f ** n", "f ** 5", "f ** True",
                                  "np.power(f, 3, out=g)"])
def test_other_powers_are_not(code):
    # 2, 0.5 and -1 have NumPy's fast paths; a power named or beyond 4 is not multiplied out
    assert _small_power(_node(code)) is None


@pytest.mark.parametrize("code", ["A @ B", "np.dot(A, B)", "np.matmul(A, B)"])
def test_a_matrix_product_is_found(code):
    assert [ast.unparse(x) for x in _product(_node(code))] == ["A", "B"]


@pytest.mark.parametrize("env", [
    {"A": np.ones((30, 40)), "B": np.ones((40, 5))},  # floats: BLAS already
    {"A": np.full((30, 40), 2 ** 26), "B": np.full((40, 5), 2 ** 26)},  # sums past 2**53
    {"A": np.ones((2, 30, 40), int), "B": np.ones((40, 5), int)},  # a stack: not np.dot's
])
def test_a_matrix_product_float64_cannot_compute_exactly_is_left_alone(env):
    code = "C = A @ B"
    patterns = [p for p in _patterns(ast.parse(code)) if p.matmul]
    assert patterns
    assert _check(LineCapture("f.py", 1, code, patterns, {"np": np, **env}), patterns[0],
                  0.001) is None


def test_a_power_of_integers_or_of_a_scalar_is_left_alone():
    for value in (np.arange(100), 3.0, np.float64(3.0)):
        code = "y = x ** 3"
        patterns = [p for p in _patterns(ast.parse(code)) if p.power]
        assert _check(LineCapture("f.py", 1, code, patterns, {"np": np, "x": value}),
                      patterns[0], 0.001) is None


def test_a_power_of_a_name_keeps_its_table_pattern_too():
    # np.power(q, 3) of 12-bit integers is looked up; of floats it is multiplied out
    kinds = {("power" if p.power else "table" if p.table is not None else "other")
             for p in _patterns(ast.parse("y = np.power(q, 3)"))}
    assert kinds == {"power", "table"}


@pytest.mark.parametrize("env", [
    {"A": np.full((2, 3), 50_000, np.int32), "B": np.full((3, 2), 50_000, np.int32)},  # wraps
    {"A": np.array([[np.iinfo(np.int64).min]]), "B": np.array([[1]])},  # |min| is min
])
def test_an_integer_product_past_its_type_is_left_alone(env):
    code = "C = A @ B"
    patterns = [p for p in _patterns(ast.parse(code)) if p.matmul]
    assert _check(LineCapture("f.py", 1, code, patterns, {"np": np, **env}), patterns[0],
                  0.001) is None


def test_operands_that_call_are_not_run_again():
    # stack.pop() ** 3: the check would drain the user's list
    stack = [np.ones(10), np.ones(10)]
    code = "y = stack.pop() ** 3"
    patterns = [p for p in _patterns(ast.parse(code)) if p.power]
    assert _check(LineCapture("f.py", 1, code, patterns, {"np": np, "stack": stack}),
                  patterns[0], 0.001) is None
    assert len(stack) == 2


def test_an_integer_product_gets_its_float64_form(monkeypatch):
    # the accepting path, its timing made up: the product is proposed, same values
    from chokepoint.explain import lines
    from chokepoint.measure.timer import Measurement

    monkeypatch.setattr(lines, "measure_interleaved", lambda fns, **kw: [
        Measurement(times=[1e-2] * 3, loops=1), Measurement(times=[1e-3] * 3, loops=1)])
    rng = np.random.default_rng(0)
    env = {"np": np, "bought": (rng.random((200, 30)) < 0.2).astype(np.int64)}
    code = "co = bought.T @ bought"
    patterns = [p for p in _patterns(ast.parse(code)) if p.matmul]
    found = _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001)
    assert found["statement"] == (
        "co = (bought.T.astype(np.float64) @ bought.astype(np.float64)).astype(np.int64)")
    assert found["values"] == "same values" and found["speedup"] == pytest.approx(10)


@pytest.mark.parametrize("code, base, x", [
    ("10.0 ** (g / 20.0)", 10.0, "g / 20.0"), ("np.power(2, t)", 2.0, "t"),
    ("0.5 ** k", 0.5, "k"),
])
def test_a_number_to_an_arrays_powers_is_found(code, base, x):
    found = _scalar_power(_node(code))
    assert found is not None and found[0] == base and ast.unparse(found[1]) == x


@pytest.mark.parametrize("code", ["1 ** x", "(-2.0) ** x", "0 ** x", "c ** x", "x ** 3",
                                  "np.power(10.0, x, out=y)"])
def test_other_bases_are_not(code):
    # 1 and 0 are constants, a negative base has no logarithm, a named base is not a number
    assert _scalar_power(_node(code)) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_number_to_an_arrays_powers_gets_its_exp_form(monkeypatch, dtype):
    # the accepting path, its timing made up: exp of a product, within a few ulp, in the
    # array's own dtype (log 10 written as a Python float keeps float32 float32)
    _fake_timing(monkeypatch)
    env = {"np": np, "g": np.linspace(-40, 0, 1000).astype(dtype)}
    code = "y = s * 10.0 ** (g / 20.0)"
    patterns = [p for p in _patterns(ast.parse(code)) if p.base]
    found = _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001)
    assert found["statement"] == "y = s * np.exp(g / 20.0 * 2.302585092994046)"
    assert found["values"].startswith(("values within", "same values"))
    assert found["values"].endswith(("each element", "same values"))
    assert eval(found["statement"][4:].replace("s * ", ""), env).dtype == dtype


@pytest.mark.parametrize("e", [
    np.linspace(250.0, 300.0, 1001),  # the product's rounding: 690 ulp of 10 ** 300
    np.array([2.0, -20.0]),  # 10 ** -20: 52 ulp of its own value, 3 of the largest
    np.arange(10.0),  # exact powers of ten: a cast to int would turn 999.99... into 999
])
def test_a_power_whose_exp_form_is_not_close_is_left_alone(monkeypatch, e):
    _fake_timing(monkeypatch)
    env = {"np": np, "e": e}
    code = "y = 10.0 ** e"
    patterns = [p for p in _patterns(ast.parse(code)) if p.base]
    assert _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001) is None


@pytest.mark.parametrize("code, a, b, i", [
    ("r[src] / outdeg[src]", "r", "outdeg", "src"),
    ("x[self.idx] * w[self.idx]", "x", "w", "self.idx"),
])
def test_two_arrays_gathered_by_one_index_are_found(code, a, b, i):
    assert [ast.unparse(n) for n in _gathered_operands(_node(code))] == [a, b, i]


@pytest.mark.parametrize("code", ["r[src] / outdeg[dst]", "r[i, j] + s[i, j]", "r[f(i)] + s[f(i)]",
                                  "r[1:] + s[1:]", "r[src] < outdeg[src]"])
def test_other_pairs_are_not(code):
    assert _gathered_operands(_node(code)) is None


def test_a_product_of_two_gathers_is_a_pattern():
    assert [p.original for p in _patterns(ast.parse("y = x[idx] * w[idx]")) if p.gathered] == [
        "x[idx] * w[idx]"]


def _fake_timing(monkeypatch):
    from chokepoint.explain import lines
    from chokepoint.measure.timer import Measurement

    monkeypatch.setattr(lines, "measure_interleaved", lambda fns, **kw: [
        Measurement(times=[2e-3] * 3, loops=1), Measurement(times=[1e-3] * 3, loops=1)])


def test_a_gathered_operand_that_is_an_expression_keeps_its_brackets(monkeypatch):
    _fake_timing(monkeypatch)
    rng = np.random.default_rng(0)
    env = {"np": np, "a": rng.random(10), "b": rng.random(10), "c": np.zeros(10),
           "i": rng.integers(0, 10, 100)}
    code = "y = a[i] - (b - c)[i]"
    patterns = [p for p in _patterns(ast.parse(code)) if p.gathered]
    found = _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001)
    assert found["statement"] == "y = (a - (b - c))[i]"


def test_a_gather_whose_operation_fails_elsewhere_is_left_alone(monkeypatch):
    # a node without edges has outdeg 0: dividing every node would divide by zero there
    _fake_timing(monkeypatch)
    env = {"np": np, "r": np.ones(4), "outdeg": np.array([1.0, 2.0, 0.0, 4.0]),
           "src": np.array([0, 1, 3, 3, 1, 0])}
    code = "contrib = r[src] / outdeg[src]"
    patterns = [p for p in _patterns(ast.parse(code)) if p.gathered]
    assert _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001) is None


def test_an_operation_before_its_gather_is_proposed(monkeypatch):
    from chokepoint.explain import lines
    from chokepoint.measure.timer import Measurement

    monkeypatch.setattr(lines, "measure_interleaved", lambda fns, **kw: [
        Measurement(times=[2e-3] * 3, loops=1), Measurement(times=[1e-3] * 3, loops=1)])
    rng = np.random.default_rng(0)
    env = {"np": np, "r": rng.random(100), "outdeg": rng.random(100) + 1,
           "src": rng.integers(0, 100, 1000)}
    code = "contrib = r[src] / outdeg[src]"
    patterns = [p for p in _patterns(ast.parse(code)) if p.gathered]
    found = _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001)
    assert found["statement"] == "contrib = (r / outdeg)[src]"
    assert found["values"] == "same values"
    # a boolean mask or arrays of two shapes: not this rewrite
    for other in ({"src": rng.random(100) < 0.5}, {"outdeg": rng.random(50)}):
        assert _check(LineCapture("f.py", 1, code, patterns, {**env, **other}), patterns[0],
                      0.001) is None


@pytest.mark.parametrize("code, found", [
    ("np.add.at(out, dst, messages)", ["out", "dst", "messages"]),
    ("np.add.at(deg, e[:, 1], w * 2)", ["deg", "e[:, 1]", "w * 2"]),
    ("np.add.at(V, items.ravel(), -lr * gV.reshape(-1, k))",
     ["V", "items.ravel()", "-lr * gV.reshape(-1, k)"]),  # views and copies only
    ("np.add.at(out, idx(), v)", None),  # a call: evaluated again by the check
    ("np.add.at(out, i, v.reshape(n()))", None),
    ("np.add.at(self.out, i, v)", None),  # not a name: the rewrite's target must be one
    ("np.multiply.at(out, i, v)", None),
    ("np.add.reduceat(v, i)", None),
])
def test_a_scatter_add_is_found(code, found):
    added = _add_at(_node(code))
    assert (None if added is None else [ast.unparse(n) for n in added]) == found


def _scatter(env, code="np.add.at(out, dst, v)"):
    patterns = [p for p in _patterns(ast.parse(code)) if p.scatter]
    assert patterns
    return _check(LineCapture("f.py", 1, code, patterns, {"np": np, **env}), patterns[0], 0.001)


@pytest.mark.parametrize("shape", [(50,), (50, 4), (50, 2, 3)])
def test_a_scatter_add_gets_its_bincount_form_and_leaves_the_array_alone(monkeypatch, shape):
    _fake_timing(monkeypatch)
    rng = np.random.default_rng(0)
    out = rng.standard_normal(shape)
    dst = rng.integers(0, shape[0], 400)
    v = rng.standard_normal((400, *shape[1:]))
    kept = out.copy()
    found = _scatter({"out": out, "dst": dst, "v": v})
    assert found is not None and found["statement"].startswith("np.add(out, np.bincount(")
    assert found["statement"].endswith(", out=out)")  # no "out +=": out stays a global
    assert found["values"].startswith(("same values", "values within the rounding"))
    assert np.array_equal(out, kept)  # the check ran on copies
    expected = out.copy()
    np.add.at(expected, dst, v)
    exec(found["statement"], {"np": np, "out": out, "dst": dst, "v": v})
    assert np.allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_a_scatter_add_of_an_expression_keeps_its_parentheses(monkeypatch):
    # -lr * g.reshape(-1, 4): its ravel() applies to the whole product
    _fake_timing(monkeypatch)
    rng = np.random.default_rng(0)
    env = {"V": rng.standard_normal((50, 4)), "items": rng.integers(0, 50, (100, 2)),
           "g": rng.standard_normal((100, 2, 4)), "lr": 0.1}
    code = "np.add.at(V, items.ravel(), -lr * g.reshape(-1, 4))"
    kept = env["V"].copy()
    found = _scatter(env, code)
    assert found is not None and "weights=(-lr * g.reshape(-1, 4)).ravel()" in found["statement"]
    expected = kept.copy()
    np.add.at(expected, env["items"].ravel(), -0.1 * env["g"].reshape(-1, 4))
    exec(found["statement"], {"np": np, **env})
    assert np.allclose(env["V"], expected, rtol=1e-12, atol=1e-12)


def test_a_scatter_adds_flat_positions_do_not_wrap_in_a_narrow_index_type(monkeypatch):
    # uint8 rows times 16 columns wraps at 256: the positions are computed in intp
    _fake_timing(monkeypatch)
    out, dst = np.zeros((300, 16)), np.array([3, 9], np.uint8)
    found = _scatter({"out": out, "dst": dst, "v": np.ones((2, 16))})
    later = np.array([20, 250], np.uint8)
    exec(found["statement"], {"np": np, "out": out, "dst": later, "v": np.ones((2, 16))})
    assert out[[20, 250]].sum() == 32 and out.sum() == 32


@pytest.mark.parametrize(("code", "shape", "index_of", "value"), [
    # a pivot table: one index array per axis, flattened by np.ravel_multi_index
    ("np.add.at(out, (s, p), v)", (6, 9), lambda s, p: (s, p), "array"),
    ("np.add.at(out, (s, p), v)", (6, 9, 2), lambda s, p: (s, p), "array"),  # rows of 2
    ("np.add.at(out, idx, v)", (6, 9), lambda s, p: (s, p), "array"),  # a tuple by name
    ("np.add.at(out, (s,), v)", (6,), lambda s, p: (s,), "array"),
    ("np.add.at(out, s, 1)", (6,), lambda s, p: s, 1),  # a histogram: counted, no weights
    ("np.add.at(out, (s, p), 0.5)", (6, 9), lambda s, p: (s, p), 0.5),
])
def test_a_scatter_add_at_index_arrays_per_axis_or_of_one_number_gets_bincount(
        monkeypatch, code, shape, index_of, value):
    _fake_timing(monkeypatch)
    rng = np.random.default_rng(1)
    out = rng.standard_normal(shape)
    s, p = rng.integers(0, shape[0], 500), rng.integers(0, 9, 500)
    index = index_of(s, p)
    n = len(index) if type(index) is tuple else 1
    v = rng.standard_normal((500, *shape[n:])) if value == "array" else value
    env = {"out": out, "s": s, "p": p, "idx": index, "v": v}
    kept = out.copy()
    found = _scatter(env, code)
    assert found is not None, code
    assert np.array_equal(out, kept)  # the check ran on copies
    expected = out.copy()
    np.add.at(expected, index, v)
    exec(found["statement"], {"np": np, **env})
    assert np.allclose(out, expected, rtol=1e-12, atol=1e-12), found["statement"]


def test_a_histogram_of_integers_by_scatter_add_is_counted_exactly(monkeypatch):
    _fake_timing(monkeypatch)
    counts = np.zeros(7, np.int32)
    labels = np.random.default_rng(2).integers(0, 7, 1000)
    found = _scatter({"counts": counts, "labels": labels}, "np.add.at(counts, labels, 1)")
    assert found is not None and found["values"] == "same values"
    exec(found["statement"], {"np": np, "counts": counts, "labels": labels})
    assert counts.dtype == np.int32 and np.array_equal(counts, np.bincount(labels))
    # an integer array and a fraction, or an index tuple longer than the array's axes: no
    assert _scatter({"counts": counts, "labels": labels}, "np.add.at(counts, labels, 0.5)") \
        is None
    assert _scatter({"out": np.zeros(7), "s": labels, "p": labels},
                    "np.add.at(out, (s, p), 1.0)") is None
    # a number by name may be another, or infinite, at the next run (inf times a count of 0
    # is NaN where np.add.at adds nothing); a float16 count saturates; unsigned counts: no
    assert _scatter({"out": np.zeros(7), "labels": labels, "w": 1.0},
                    "np.add.at(out, labels, w)") is None
    assert _scatter({"out": np.zeros(7, np.float16), "labels": labels},
                    "np.add.at(out, labels, 1)") is None
    assert _scatter({"out": np.zeros(7, np.uint32), "labels": labels},
                    "np.add.at(out, labels, 1)") is None
    # a starred tuple: its rewrite's code did not compile, and the check raised
    found = _scatter({"out": np.zeros(7), "idx": (labels,)}, "np.add.at(out, (*idx,), 1)")
    assert found is None or "bincount" in found["statement"]


def test_a_scatter_add_into_nan_keeps_its_nan(monkeypatch):
    _fake_timing(monkeypatch)
    out = np.zeros(5)
    out[2] = np.nan
    assert _scatter({"out": out, "dst": np.array([1, 2, 2]), "v": np.ones(3)}) is not None


@pytest.mark.parametrize("code", ["y = x * 2 if ok else np.roll(x, 1, 0, 5)",
                                  "y = 10000000000000000000000000000000000000000" + "0" * 300
                                  + " ** x"])
def test_syntax_the_patterns_did_not_foresee_gives_no_pattern_and_no_error(code):
    _patterns(ast.parse(code))


@pytest.mark.parametrize("env", [
    {"out": np.zeros(10, int), "dst": np.arange(10), "v": np.ones(10, int)},  # integers
    {"out": np.zeros(10), "dst": np.array([-1, 2]), "v": np.ones(2)},  # a negative index
    {"out": np.zeros(10), "dst": np.array([3, 12]), "v": np.ones(2)},  # past the end
    {"out": np.zeros((10, 2)), "dst": np.array([3, 4]), "v": np.ones(2)},  # v broadcast
    {"out": np.zeros(10), "dst": np.array([[3, 4]]), "v": np.ones((1, 2))},  # 2-D index
])
def test_scatter_adds_bincount_cannot_compute_are_left_alone(monkeypatch, env):
    _fake_timing(monkeypatch)
    assert _scatter(env) is None


def test_a_scatter_add_whose_value_is_used_is_left_alone(monkeypatch):
    _fake_timing(monkeypatch)
    env = {"out": np.zeros(10), "dst": np.arange(10), "v": np.ones(10)}
    assert _scatter(env, "r = np.add.at(out, dst, v)") is None


@pytest.mark.parametrize("code, found", [
    ("np.roll(np.roll(g, dy, axis=0), dx, axis=1)", ["g", "dy", "dx", "0", "1"]),
    ("np.roll(np.roll(g, 1, 0), -1, 1)", ["g", "1", "-1", "0", "1"]),
    ("np.roll(np.roll(g, shift=s, axis=0), axis=1, shift=t)", ["g", "s", "t", "0", "1"]),
    ("np.roll(np.roll(g, 1), 1, axis=1)", None),  # a flat roll: not an axis's
    ("np.roll(np.roll(g, f(), axis=0), 1, axis=1)", None),  # a call, run again by the check
    ("np.roll(g, 1, axis=0)", None),
])
def test_two_nested_rolls_are_found(code, found):
    rolled = _nested_roll(_node(code))
    assert (None if rolled is None else [ast.unparse(n) for n in (rolled[0], *rolled[1],
                                                                    *rolled[2])]) == found


def test_two_nested_rolls_get_one_roll_with_the_same_values(monkeypatch):
    _fake_timing(monkeypatch)
    grid = (np.random.default_rng(0).random((30, 40)) < 0.3).astype(int)
    code = "n += np.roll(np.roll(grid, dy, axis=0), dx, axis=1)"
    patterns = [p for p in _patterns(ast.parse(code)) if p.rolls is not None]
    env = {"np": np, "grid": grid, "dy": -1, "dx": 1, "n": np.zeros((30, 40), int)}
    found = _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001)
    assert found["statement"] == "n += np.roll(grid, (dy, dx), axis=(0, 1))"
    assert found["values"] == "same values"


@pytest.mark.parametrize("code, count", [
    ("r = np.percentile(f, 99) - np.percentile(f, 1)", 2),
    ("lo, hi = np.quantile(x, 0.25, axis=0), np.quantile(x, 0.75, axis=0)", 2),
    ("r = np.percentile(f, 99) - np.percentile(g, 1)", None),  # two arrays
    ("r = np.quantile(x, 0.25, axis=0) - np.quantile(x, 0.75, axis=1)", None),  # two axes
    ("r = np.percentile(f, q) - np.percentile(f, 1)", None),  # q named: may be a list
    ("r = np.percentile(f(), 9) - np.percentile(f(), 1)", None),  # a call: run again
    ("r = np.percentile(f, 99)", None),
])
def test_order_statistics_of_one_array_are_found(code, count):
    calls = _quantile_calls(ast.parse(code))
    assert (None if calls is None else len(calls)) == count


@pytest.mark.parametrize("code, statement", [
    ("r = np.percentile(f, 99) - np.percentile(f, 1)",
     "q = np.percentile(f, [99, 1])\nr = q[0] - q[1]"),
    ("lo, hi = np.quantile(f, 0.25), np.quantile(f, 0.75)",
     "q = np.quantile(f, [0.25, 0.75])\nlo, hi = (q[0], q[1])"),
])
def test_order_statistics_are_taken_in_one_call_with_the_same_values(monkeypatch, code,
                                                                     statement):
    _fake_timing(monkeypatch)
    env = {"np": np, "f": np.random.default_rng(0).random(1001)}
    patterns = [p for p in _patterns(ast.parse(code)) if p.quantiles]
    found = _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001)
    assert found["statement"] == statement and found["values"] == "same values"


def test_order_statistics_in_a_comprehension_are_left_alone(monkeypatch):
    _fake_timing(monkeypatch)
    code = "r = [np.percentile(f, 99) - np.percentile(f, 1) for _ in range(2)]"
    env = {"np": np, "f": np.random.default_rng(0).random(101)}
    patterns = [p for p in _patterns(ast.parse(code)) if p.quantiles]
    assert _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001) is None


@pytest.mark.parametrize("code, found", [
    ("c = np.array([code_of[x] for x in labels])", ["labels"]),
    ("d = {k: i for i, k in enumerate(cats)}", ["cats"]),
    ("t = {(a, b): c for a, b, c in zip(xs, ys, cs)}", ["xs", "ys", "cs"]),
    ("s = sum(x * x for x in v[1:])", ["v[1:]"]),
    ("c = [f(x) for x in make()]", []),  # a call: evaluated again by the check
    ("c = [x for x in range(10)]", []),
])
def test_the_arrays_a_comprehension_iterates_are_found(code, found):
    assert [ast.unparse(n) for n in _iterated_arrays(ast.parse(code))] == found


def _tolist(code, env):
    patterns = [p for p in _patterns(ast.parse(code)) if p.iterated]
    return _check(LineCapture("f.py", 1, code, patterns, {"np": np, **env}), patterns[0],
                  0.001)


@pytest.mark.parametrize("code, env, statement", [
    ("c = np.array([code_of[x] for x in labels])",
     {"labels": np.array(["a", "b", "a"]), "code_of": {"a": 0, "b": 1}},
     "c = np.array([code_of[x] for x in labels.tolist()])"),
    ("d = {k: i for i, k in enumerate(cats)}", {"cats": np.array(["x", "y"])},
     "d = {k: i for i, k in enumerate(cats.tolist())}"),
    ("s = sum(x * x for x in v)", {"v": np.linspace(0, 1, 11)},
     "s = sum((x * x for x in v.tolist()))"),
])
def test_a_comprehension_over_an_array_iterates_its_list(monkeypatch, code, env, statement):
    _fake_timing(monkeypatch)
    found = _tolist(code, env)
    assert found["statement"] == statement and found["values"] == "same values"


@pytest.mark.parametrize("env", [
    {"v": np.linspace(0, 1, 11, dtype=np.float32)},  # float32 products round otherwise
    {"v": np.arange(10, dtype=np.int8) * 20},  # int8 wraps where Python's ints do not
    {"v": np.ones((3, 2))},  # rows: lists, not arrays
])
def test_a_comprehension_python_computes_otherwise_is_left_alone(monkeypatch, env):
    _fake_timing(monkeypatch)
    assert _tolist("s = [x * x for x in v]", env) is None


@pytest.mark.parametrize("code", [
    "H = X.T @ np.diag(w) @ X",  # a weighted Gram matrix: rows of X.T scaled
    "Y = np.diag(w) @ X",  # rows scaled
    "y = np.diag(w) @ x",  # a vector
    "Z = X @ np.diag(s)",  # columns scaled
])
def test_a_product_with_a_diagonal_matrix_is_a_scaling(monkeypatch, code):
    _fake_timing(monkeypatch)
    rng = np.random.default_rng(3)
    env = {"np": np, "X": rng.random((40, 6)), "w": rng.random(40), "s": rng.random(6),
           "x": rng.random(40)}
    patterns = [p for p in _patterns(ast.parse(code)) if p.diagonal]
    assert len(patterns) == 1, code
    found = _check(LineCapture("f.py", 1, code, patterns, env), patterns[0], 0.001)
    assert found is not None and "np.diag" not in found["statement"], code
    expected, ours = dict(env), dict(env)
    exec(code, expected)
    exec(found["statement"], ours)
    name = code.split(" =")[0]
    assert np.allclose(ours[name], expected[name], rtol=1e-13), found["statement"]


def test_a_diagonal_of_a_matrix_or_of_integers_is_left_alone(monkeypatch):
    _fake_timing(monkeypatch)
    rng = np.random.default_rng(3)
    for code, env in (("Y = np.diag(A) @ A", {"A": rng.random((5, 5))}),  # np.diag(A): a vector
                      ("Y = np.diag(k) @ A", {"k": np.arange(5), "A": rng.random((5, 5))})):
        patterns = [p for p in _patterns(ast.parse(code)) if p.diagonal]
        assert _check(LineCapture("f.py", 1, code, patterns, {"np": np, **env}), patterns[0],
                      0.001) is None
