"""Which statement made the array a line reads (no timing)."""

from chokepoint.program.joined import assigned_name, producer_of
from chokepoint.program.record import LineStat, Statement


def _stat(line: int, code: str, *, kind: str = "Assign", loop: int | None = 4, hits: int = 3,
          filename: str = "prog.py") -> LineStat:
    stat = LineStat(Statement(filename, line, line, kind, (), code, loop))
    stat.hits = hits
    return stat


def test_the_name_of_a_plain_assignment_only():
    assert assigned_name(_stat(5, "diff = X[:, None] - C[None]")) == "diff"
    assert assigned_name(_stat(5, "a, b = X, C")) is None
    assert assigned_name(_stat(5, "A[0] = 1")) is None
    assert assigned_name(_stat(5, "x += 1", kind="AugAssign")) is None


def test_the_producer_is_the_last_assignment_above_in_the_same_loop_and_hits():
    line = _stat(8, "D = (diff ** 2).sum(axis=2)")
    made = _stat(6, "diff = X[:, None] - C[None]")
    stats = [_stat(2, "diff = 0", loop=None, hits=1), _stat(5, "diff = X - 1"), made, line,
             _stat(7, "diff = Y[:, None] - C[None]", filename="other.py"),
             _stat(9, "diff = X", hits=3)]
    assert producer_of(stats, line, "diff") is made
    assert producer_of(stats, line, "X") is None
    elsewhere = _stat(6, "diff = X[:, None] - C[None]", loop=None, hits=1)
    assert producer_of([elsewhere, line], line, "diff") is None
