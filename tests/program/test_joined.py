"""Which statement made the array a line reads, for a rewrite of the two (no timing)."""

import ast
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from chokepoint.program.joined import assigned_name, producer_of
from chokepoint.program.record import LineStat, SourceMap

PROGRAM = """\
import numpy as np

def differences(P, Q):
    diff = P[:, None, :] - Q[None, :, :]
    return diff

def distances(diff):
    D = np.sqrt((diff ** 2).sum(axis=2))
    return D

for it in range(3):
    diff = X[:, None, :] - C[None, :, :]
    D = np.sqrt((diff ** 2).sum(axis=2))
    if it == 2:
        diff = diff[:, :, :4]
    E = (diff ** 2).sum(axis=2)
    C = C + 0.5
    F = np.sqrt((diff ** 2).sum(axis=2))
"""


@pytest.fixture
def stats(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(PROGRAM))
    smap = SourceMap(str(path))
    found = {}
    for line, statement in smap.statements.items():
        stat = LineStat(statement)
        stat.hits = 3 if statement.loop == 11 else 1
        found[line] = stat
    return found


def test_the_name_of_a_plain_assignment_only(stats):
    assert assigned_name(stats[12]) == "diff"
    assert assigned_name(stats[11]) is None  # a loop header
    assert assigned_name(stats[14]) is None  # an if


def test_the_producer_is_the_statement_just_before_in_the_same_block(stats):
    assert producer_of(stats.values(), stats[13], "diff") is stats[12]
    assert producer_of(stats.values(), stats[13], "X") is None
    # another function's assignment of the same name
    assert producer_of(stats.values(), stats[8], "diff") is None
    # a statement between them may change it (an if that reassigns it)
    assert producer_of(stats.values(), stats[16], "diff") is None
    # the one just before assigns another name
    assert producer_of(stats.values(), stats[18], "diff") is None


SORTS = """\
import numpy as np

def best(scores):
    order = np.argsort(scores, axis=0)
    top = order[-1]
    return top

for it in range(3):
    ranked = np.sort(x)
    low, high = ranked[0], ranked[-1]
    idx = x.argsort()
    print(idx[:3])
"""


def test_a_sort_call_and_its_axis():
    from chokepoint.explain.lines import sort_call

    def parse(code):
        return ast.parse(code, mode="eval").body

    sort = sort_call(parse("np.argsort(s, axis=0)"))
    assert sort.kind == "argsort" and ast.unparse(sort.a) == "s"
    assert ast.unparse(sort.axis) == "0" and not sort.stable
    sort = sort_call(parse("np.sort(x[1:], kind='stable')"))
    assert sort.kind == "sort" and ast.unparse(sort.a) == "x[1:]" and sort.axis is None
    assert sort.stable
    sort = sort_call(parse("x.argsort(1)"))
    assert sort.kind == "argsort" and ast.unparse(sort.axis) == "1"
    assert sort_call(parse("x.sort()")) is None  # in place: returns None
    assert sort_call(parse("np.sort(r, order='f')")) is None  # a record's fields
    assert sort_call(parse("np.argmax(s)")) is None


def test_a_sorted_name_read_only_for_its_first_or_last_entry():
    from chokepoint.program.joined import extreme_uses

    tree = ast.parse(SORTS)
    best = tree.body[1]
    uses = extreme_uses(best, "order", (4, 4), ndim=2, axis=0)
    assert [(ast.unparse(u), end) for u, end in uses] == [("order[-1]", -1)]
    # the last entry along axis 0 is not the extreme of a sort along axis 1
    assert extreme_uses(best, "order", (4, 4), ndim=2, axis=1) is None
    uses = extreme_uses(tree, "ranked", (9, 9), ndim=1, axis=0)
    assert sorted(end for _, end in uses) == [-1, 0]
    assert extreme_uses(tree, "idx", (11, 11), ndim=1, axis=0) is None  # its first three
    two_d = ast.parse("s = np.sort(a, axis=1)\nm = s[:, -1] + s[..., 0]")
    uses = extreme_uses(two_d, "s", (1, 1), ndim=2, axis=1)
    assert sorted(end for _, end in uses) == [-1, 0]
    assert extreme_uses(ast.parse("s = np.sort(a)\nf(s)"), "s", (1, 1), 1, 0) is None


def test_the_statement_after_in_the_same_block_that_ran_as_often(stats):
    from chokepoint.program.joined import consumer_of

    assert consumer_of(stats.values(), stats[12]) is stats[13]
    assert consumer_of(stats.values(), stats[4]) is stats[5]
    assert consumer_of(stats.values(), stats[18]) is None  # the last of its block
    stats[14].hits = 1  # an if that ran once, not 3 times
    assert consumer_of(stats.values(), stats[13]) is None


def test_the_extreme_keeps_the_axis_as_written():
    from chokepoint.explain.lines import extreme_code, sort_call

    def code(text, end, ndim):
        return extreme_code(sort_call(ast.parse(text, mode="eval").body), end, ndim)

    assert code("np.argsort(D, axis=-1)", -1, 2) == "np.argmax(D, axis=-1)"
    assert code("np.sort(D)", 0, 3) == "np.min(D, axis=-1)"  # the default, written out
    assert code("np.argsort(d)", 0, 1) == "np.argmin(d)"
    assert code("d.argsort(0)", -1, 1) == "np.argmax(d, axis=0)"


def test_equal_values_of_a_stable_sort_and_nan_are_not_passed_over():
    from chokepoint.explain.lines import extreme_agreement, sort_call

    def sort(text):
        return sort_call(ast.parse(text, mode="eval").body)

    a = np.array([3.0, 7.0, 1.0, 7.0])
    # the last of the largest after a stable sort, the first by argmax: the same value
    assert extreme_agreement(sort("np.argsort(a)"), -1, a, 0, np.argmax(a),
                             np.argsort(a, kind="stable")[-1])[0] == \
        "the same values at the indices"
    assert extreme_agreement(sort("np.argsort(a, kind='stable')"), -1, a, 0, np.argmax(a),
                             np.argsort(a, kind="stable")[-1]) is None
    values, note = extreme_agreement(sort("np.sort(a)"), 0, a, 0, np.min(a), np.sort(a)[0])
    assert values == "same values" and "NaN" in note
    b = np.array([3.0, np.nan, 1.0])
    assert extreme_agreement(sort("np.sort(b)"), 0, b, 0, np.min(b), np.sort(b)[0]) is None


def test_a_next_line_that_changes_what_the_sort_reads_is_not_joined(tmp_path):
    from chokepoint.program.joined import _changes_what_it_reads

    def stat(code):
        return SimpleNamespace(statement=SimpleNamespace(code=code))

    made = ast.parse("np.argsort(scores[rows], axis=0)", mode="eval").body
    assert not _changes_what_it_reads(stat("back[t] = order[-1]"), made)
    assert _changes_what_it_reads(stat("scores = scores[order[-1]]"), made)
    assert _changes_what_it_reads(stat("scores[0] += order[-1]"), made)
    assert _changes_what_it_reads(stat("rows.shape = order[-1].shape"), made)
    assert _changes_what_it_reads(stat("best = (scores.sort(axis=0), order[-1])[1]"), made)
    assert _changes_what_it_reads(stat("best = np.add(order[-1], 1, out=rows)"), made)


def test_a_sorted_name_declared_global_is_read_elsewhere():
    from chokepoint.program.joined import _declared_outside

    tree = ast.parse("def step(s):\n    global order\n    order = np.argsort(s)\n"
                     "    return order[-1]\n")
    assert _declared_outside(tree.body[0], "order")
    assert not _declared_outside(tree.body[0], "best")
