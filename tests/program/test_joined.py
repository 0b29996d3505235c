"""Which statement made the array a line reads, for a rewrite of the two (no timing)."""

import textwrap

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
