"""A group-by written as a loop of masks (``program/groups.py``): the syntax it recognises,
and on a program, the cause on each line that only scans with the mask."""

import ast
import textwrap

import pytest

from chokepoint.program import run_program
from chokepoint.program.groups import _comparison, _loop_targets, _statement_scan, stores

MASK = ast.Name(id="sel", ctx=ast.Load())


def _names(*names):
    return frozenset(names)


@pytest.mark.parametrize(("code", "expected"), [
    ("r = revenue[sel]", ("gather", _names("revenue"))),
    ("n[s] = sel.sum()", ("count", _names())),
    ("n[s] = np.count_nonzero(sel)", ("count", _names())),
    ("n[s] = np.sum(sel)", ("count", _names())),
    ("t[s] = revenue[sel].sum()", ("gather", _names("revenue"))),
    ("t[s] = np.mean(qty[sel])", ("gather", _names("qty"))),
    ("t += w[sel].max()", ("gather", _names("w"))),
    ("r = tbl['revenue'][sel]", ("gather", _names("tbl['revenue']"))),
    # two scans combined, or one with a number: each group's own rows after sorting
    ("y[r] = vals[sel] @ x[cols[sel]]", ("gather", _names("vals", "cols"))),
    ("m[s] = revenue[sel].sum() / sel.sum()", ("gather", _names("revenue"))),
    ("m[s] = np.dot(w[sel], qty[sel])", ("gather", _names("w", "qty"))),
    ("y = revenue[sel] * 2", ("gather", _names("revenue"))),
    ("y = 2 * 3", None),
    ("m[s] = np.median(revenue[sel])", None),  # its work stays: no cause
    ("m[s] = revenue[sel].sum() / total", None),  # a name: what it holds is not known
    ("z = sel.mean()", None),
    ("r = revenue[other]", None),
    ("out[sel] = revenue[sel]", None),  # a write through the mask: not a slice after sorting
    ("acc[sel] += w[sel]", None),
])
def test_the_lines_that_only_gather_reduce_or_count_with_the_mask(code, expected):
    assert _statement_scan(code, MASK) == expected


@pytest.mark.parametrize(("code", "expected"), [
    ("store == s", ("store", "s")),
    ("s == store", ("store", "s")),
    ("tbl['store'] == s", ("tbl['store']", "s")),
    ("store == t", None),  # not the loop's variable
    ("store < s", None),
    ("f(store) == s", None),
])
def test_a_key_compared_with_the_loops_variable(code, expected):
    node = ast.parse(code, mode="eval").body
    assert _comparison(node, _loop_targets("for i, s in enumerate(groups):")) == expected


@pytest.mark.parametrize(("code", "stored"), [
    ("store = store[::-1]", True), ("store[i] = 0", True), ("store += 1", True),
    ("for store in x: pass", True), ("sel = store == s", False), ("n = store.sum()", False),
    ("store.sort()", True), ("np.random.shuffle(store)", True), ("np.add(a, b, out=store)", True),
    ("x[store], y = 1, 2", False), ("n = np.count_nonzero(store == s)", False),
    ("a, store = 1, 2", True),
    # NumPy's functions read what they are handed, but for those that write into it
    ("y = np.interp(q, store, fp)", False), ("n = np.linalg.norm(store)", False),
    ("np.add(store, b, c)", False), ("np.add(a, b, store)", True), ("np.copyto(store, b)", True),
    ("np.add.at(store, i, 1)", True), ("np.fill_diagonal(store, 0)", True),
    ("np.cumsum(a, out=store)", True), ("f(store)", True),
    # views of it, written through later; an output by position; copy=False
    ("v = np.reshape(store, -1)", True), ("v = np.asarray(store)", True),
    ("np.dot(x, y, store)", True), ("np.clip(x, 0, 1, store)", True),
    ("np.add.reduce(x, 0, None, store)", True), ("np.nan_to_num(store, copy=False)", True),
    ("y = np.fft.rfft(store)", False), ("y = np.sort(store)", False)])
def test_a_key_bound_or_written_in_the_loop(code, stored):
    assert stores(code, "store") == stored


def test_an_array_per_run_or_a_key_changed_in_the_loop_is_no_group_by(tmp_path, roof):
    # `hit = truth == pred` for each model's predictions compares arrays, not a key with a
    # group; a key rebound in the loop is not one sort's
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent("""\
        import numpy as np
        rng = np.random.default_rng(0)
        truth = rng.integers(0, 2, 200_000)
        predictions = [rng.integers(0, 2, 200_000) for _ in range(30)]
        hits = [0] * 30
        for k, pred in enumerate(predictions):
            hit = truth == pred
            hits[k] = hit.sum()
        key = rng.integers(0, 50, 200_000)
        counts = np.zeros(50)
        for g in range(50):
            key = key[::-1]
            sel = key == g
            counts[g] = sel.sum()
        """))
    report = run_program(str(path), roof=roof, budget_s=30)
    assert not [c for r in report.lines for c in r["causes"] if c["kind"] == "group-by-masks"]


def test_a_group_by_as_a_loop_of_masks_is_found_and_costed(tmp_path, roof):
    # 100 groups over 300,000 rows: each iteration compares and gathers all the rows (about
    # 100x the work of the group's own rows); sorting the key once costs a few of them
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent("""\
        import numpy as np
        rng = np.random.default_rng(0)
        store = rng.integers(0, 100, 300_000)
        revenue = rng.random(300_000)
        totals = np.zeros(100)
        medians = np.zeros(100)
        counts = np.zeros(100, dtype=np.int64)
        for s in range(100):
            sel = store == s
            totals[s] = revenue[sel].sum()
            medians[s] = np.median(revenue[store == s][:10])
            counts[s] = sel.sum()
        """))
    report = run_program(str(path), roof=roof, budget_s=30)
    lines = {r["source"].rsplit(":", 1)[1]: r for r in report.lines}
    found = {n: [c for c in lines[n]["causes"] if c["kind"] == "group-by-masks"]
             for n in ("9", "10", "11", "12")}
    assert found["10"] and found["12"], {n: lines[n]["causes"] for n in found}
    assert not found["11"]  # a median (and a slice of the gather): its work stays
    cause = found["10"][0]
    assert (cause["key"], cause["group"], cause["mask"]) == ("store", "s", "sel")
    assert (cause["rows"], cause["groups"], cause["lines"]) == (300_000, 100, 3)
    assert cause["sort_s"] < cause["scanned_s"] and cause["loops"] == 1
    assert lines["10"]["cause"] == "group-by-masks"
    for n in found:  # the line's time handed out once; what sorting removes is recoverable
        row = lines[n]
        assert sum(c["seconds"] for c in row["causes"]) <= row["time_s"] * (1 + 1e-9)
        assert row["recoverable_s"] >= sum(c["seconds"] for c in found[n]) * (1 - 1e-9)


def test_a_sparse_product_by_rows_of_masks_is_a_group_by(tmp_path, roof):
    # a COO matrix-vector product row by row: each row's two masks compare every triplet
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent("""\
        import numpy as np
        rng = np.random.default_rng(0)
        n, nnz = 600, 30_000
        rows, cols, vals = rng.integers(0, n, nnz), rng.integers(0, n, nnz), rng.random(nnz)
        x = rng.random(n)
        y = np.zeros(n)
        for r in range(n):
            y[r] = vals[rows == r] @ x[cols[rows == r]]
        """))
    report = run_program(str(path), roof=roof, budget_s=20)
    line = next(r for r in report.lines if r["source"].endswith(":8"))
    assert line["cause"] == "group-by-masks", line["causes"]
    assert line["recoverable_s"] > 0.5 * line["time_s"]
