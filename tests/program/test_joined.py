"""Which statement made the array a line reads, for a rewrite of the two (no timing)."""

import ast
import textwrap
from types import SimpleNamespace

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

    kind, a, axis = sort_call(parse("np.argsort(s, axis=0)"))
    assert kind == "argsort" and ast.unparse(a) == "s" and ast.unparse(axis) == "0"
    kind, a, axis = sort_call(parse("np.sort(x[1:])"))
    assert kind == "sort" and ast.unparse(a) == "x[1:]" and axis is None
    kind, a, axis = sort_call(parse("x.argsort(1)"))
    assert kind == "argsort" and ast.unparse(axis) == "1"
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


def test_a_next_line_that_changes_what_the_sort_reads_is_not_joined(tmp_path):
    from chokepoint.program.joined import _changes_what_it_reads

    def stat(code):
        return SimpleNamespace(statement=SimpleNamespace(code=code))

    made = ast.parse("np.argsort(scores[rows], axis=0)", mode="eval").body
    assert not _changes_what_it_reads(stat("back[t] = order[-1]"), made)
    assert _changes_what_it_reads(stat("scores = scores[order[-1]]"), made)
    assert _changes_what_it_reads(stat("scores[0] += order[-1]"), made)
    assert _changes_what_it_reads(stat("rows.shape = order[-1].shape"), made)
