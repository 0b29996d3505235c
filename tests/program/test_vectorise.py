"""A loop over rows written as one statement over all of them (``program/vectorise.py``)."""

import ast

import numpy as np
import pytest

from chokepoint.program.vectorise import batched, loop_form

from ._programs import lines_of

RNG = np.random.default_rng(0)
NS = {"np": np, "diff": RNG.random((40, 3)), "prec": RNG.random((3, 3)), "w": RNG.random(3),
      "s": RNG.random(40), "A": RNG.random((40, 3, 3)), "c": 2.0, "k": 3}


@pytest.mark.parametrize("row", [
    "diff[n] @ prec @ diff[n]",  # a quadratic form per row: einsum
    "prec @ diff[n]", "w @ diff[n]", "diff[n] @ w", "A[n] @ diff[n]", "diff[n] @ A[n]",
    "A[n] @ A[n]", "prec @ A[n]",
    "np.exp(-s[n]) * w + c",  # a row's number against the same vector: aligned as s[:, None]
    "-s[n] ** 2 * w", "s[n] * diff[n] - 2 * w", "np.maximum(diff[n], w) / k",
    "np.hypot(diff[n], prec[0])",
])
def test_a_rows_expression_over_all_rows_gives_each_rows_value(row):
    found = batched(ast.parse(row, mode="eval").body, "n", NS)
    assert found is not None and found.by_row, row
    expected = np.array([eval(row, {**NS, "n": k}) for k in range(40)])
    assert np.allclose(eval(found.code, NS), expected, rtol=1e-12), (row, found.code)


@pytest.mark.parametrize("row", [
    "diff[n + 1] * w",  # another row than its own
    "diff[n - 1] @ prec",
    "diff[n].sum()",  # a method: not among the forms
    "np.sum(diff[n])",  # a reduction
    "f(diff[n])",
    "diff[n, 0] * w",  # an index beside the row's
    "n * w",  # the index itself
    "A[n] @ w @ w @ w @ A[n] @ A[n] @ s",  # a 0-d row times an array: no rule
])
def test_a_rows_expression_outside_the_forms_is_left_alone(row):
    assert batched(ast.parse(row, mode="eval").body, "n", {**NS, "f": abs}) is None


@pytest.mark.parametrize(("header", "body", "found"), [
    ("for i in range(len(X)):", "out[i] = X[i] * 2", ("i", "out")),
    ("for i in range(n):", "out[i] = X[i] @ W", ("i", "out")),
    ("for i in range(1, n):", "out[i] = X[i]", None),  # not from 0
    ("for i in np.arange(n):", "out[i] = X[i]", None),
    ("for i, x in enumerate(X):", "out[i] = x", None),
    ("for i in range(n):", "out[i], y = X[i], 1", None),
    ("for i in range(n):", "out[i] += X[i]", None),
    ("for i in range(n):", "out[i, 0] = X[i]", None),
    ("for i in range(n):", "out[j] = X[i]", None),
])
def test_the_loop_form(header, body, found):
    form = loop_form(header, body)
    assert (form[:2] if form is not None else None) == found


def test_a_quadratic_form_row_by_row_gets_one_einsum(tmp_path, roof):
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        rng = np.random.default_rng(0)
        X = rng.standard_normal((4000, 3))
        P = np.eye(3) + 0.1
        d = np.empty(len(X))
        for step in range(5):
            for n in range(len(X)):
                d[n] = X[n] @ P @ X[n]
        print(float(d.sum()))
        """)
    rewrite = lines["8"]["rewrite"]
    assert rewrite is not None, lines["8"]
    assert rewrite["code"] == "d[:] = np.einsum('ni,ni->n', X @ P, X)"
    assert rewrite["joins"]["loop"] and rewrite["joins"]["lines"] == [7, 8]
    assert rewrite["speedup"] > 5 and rewrite["values"] != ""


def test_a_loop_carrying_a_value_or_covering_some_rows_gets_no_vectorised_form(tmp_path, roof):
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        rng = np.random.default_rng(0)
        a = rng.random(3000)
        c = np.zeros(3000)
        for n in range(1, len(a)):
            c[n] = c[n - 1] * 0.5 + a[n]
        b = np.zeros(3000)
        for n in range(2000):
            b[n] = a[n] * 2.0 + 1.0
        """)
    for number in ("6", "9"):
        rewrite = lines[number]["rewrite"]
        assert rewrite is None or not (rewrite.get("joins") or {}).get("loop"), rewrite


def test_a_loop_reading_its_target_whole_or_through_a_view_gets_no_vectorised_form(
        tmp_path, roof):
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        a = np.random.default_rng(0).random(3000)
        c = np.ones(3000)
        for n in range(len(a)):
            c[n] = a[n] * c[0]  # row 0 written first: the later rows read it
        d = np.ones(3000)
        e = d[::-1]
        for n in range(len(a)):
            d[n] = a[n] * e[0]  # d[-1] under another name
        """)
    for number in ("5", "9"):
        rewrite = lines[number]["rewrite"]
        assert rewrite is None or not (rewrite.get("joins") or {}).get("loop"), rewrite
