"""A loop over rows whose one statement computes each row alone, as one NumPy expression.

``for n in range(len(X)): out[n] = diff[n] @ prec @ diff[n]`` makes three NumPy calls per
row; the same expression over all rows at once is ``out[:] = np.einsum('ni,ni->n', diff @
prec, diff)``. :func:`vectorised_loop` writes that expression where the loop's body is one
statement ``T[n] = E``, the loop ``for n in range(...)`` (nothing else in it), and ``n`` appears
in ``E`` only as ``X[n]`` (a row of an array): each row's value depends on its own rows only.
``E`` may use arithmetic operators, ``@``, unary minus and NumPy's ufuncs
(:func:`batched`); a row read ``X[n]`` becomes ``X`` (its rows along a new first axis), the
other names stay as they are, and each operation is written for the batch: an elementwise one
with the batched operands' rows aligned to the largest item's axes (``x[:, None]``), a matrix
product as ``@`` or, between two batched operands, ``np.einsum``.

The loop must have run over every row of ``T`` and of each ``X``, at each entry (its hit
count is that many times the entries of the loop), so the rewrite assigns ``T[:]``. It is run
on the values the line was captured with, against the loop as written on copies, and proposed
only where it gives the same values (within the rounding of sums taken in another order) and
measured faster.
"""

from __future__ import annotations

import ast
import linecache
from typing import NamedTuple

import numpy as np

from .joined import timed_side_by_side
from .record import LineStat
from .replay import ReplayError, prepare

__all__ = ["Batched", "batched", "header_of", "loop_form", "vectorised_loop"]

_ELEMENTWISE = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
                ast.FloorDiv: "//", ast.Mod: "%"}
_UNARY = {ast.USub: "-", ast.UAdd: "+"}


class Batched(NamedTuple):
    """An expression over all rows: its code, the number of axes of one row's value, and
    whether it differs by row (``False``: the same for every row, written as it was)."""

    code: str
    ndim: int
    by_row: bool


def loop_form(header: str, body: str) -> tuple[str, str, ast.expr] | None:
    """``(n, T, E)`` of ``for n in range(stop):`` and ``T[n] = E``, else None."""
    try:
        loop = ast.parse(header.rstrip() + "\n    pass").body[0]
        line = ast.parse(body).body
    except SyntaxError:
        return None
    if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
            and isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name)
            and loop.iter.func.id == "range" and len(loop.iter.args) == 1
            and not loop.iter.keywords and len(line) == 1 and isinstance(line[0], ast.Assign)):
        return None
    var = loop.target.id
    (target,) = line[0].targets if len(line[0].targets) == 1 else (None,)
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
            and isinstance(target.slice, ast.Name) and target.slice.id == var):
        return None
    return var, target.value.id, line[0].value


def _atom(code: str) -> str:
    """``code`` in parentheses where an operator or a subscript would bind to a part."""
    node = ast.parse(code, mode="eval").body
    atomic = (ast.Name, ast.Call, ast.Subscript, ast.Attribute)
    if isinstance(node, atomic) or (isinstance(node, ast.Constant)
                                    and not str(node.value).startswith("-")):
        return code
    return f"({code})"


def _aligned(b: Batched, ndim: int) -> str:
    """A batched operand's code with its row's axes aligned to the right of ``ndim`` axes."""
    if not b.by_row or b.ndim >= ndim:
        return b.code
    return f"{_atom(b.code)}[:{', None' * (ndim - b.ndim)}]"


def _elementwise(parts: list[Batched], write) -> Batched:
    ndim = max(p.ndim for p in parts)
    if not any(p.by_row for p in parts):
        return Batched(write([p.code for p in parts]), ndim, False)
    return Batched(write([_aligned(p, ndim) for p in parts]), ndim, True)


def _matmul(a: Batched, b: Batched) -> Batched | None:
    """``a @ b`` for every row (NumPy's rules for 1-D and 2-D operands), or None."""
    if not a.by_row and not b.by_row:
        return Batched(f"{_atom(a.code)} @ {_atom(b.code)}", max(a.ndim + b.ndim - 2, 0),
                       False)
    x, y = _atom(a.code), _atom(b.code)
    if a.by_row and b.by_row:
        spec = {(1, 1): ("ni,ni->n", 0), (2, 1): ("nij,nj->ni", 1),
                (1, 2): ("ni,nij->nj", 1)}.get((a.ndim, b.ndim))
        if spec is not None:
            return Batched(f"np.einsum('{spec[0]}', {a.code}, {b.code})", spec[1], True)
        return Batched(f"{x} @ {y}", 2, True) if a.ndim == b.ndim == 2 else None
    if a.by_row:  # a row's vector or matrix times the same matrix or vector
        if a.ndim in (1, 2) and b.ndim in (1, 2):
            return Batched(f"{x} @ {y}", a.ndim + b.ndim - 2, True)
        return None
    if a.ndim == 2 and b.ndim == 1:  # the same matrix times each row's vector
        return Batched(f"{y} @ {x}.T", 1, True)
    if a.ndim == 1 and b.ndim == 1:
        return Batched(f"{y} @ {x}", 0, True)
    if a.ndim == 2 and b.ndim == 2:
        return Batched(f"{x} @ {y}", 2, True)
    return None


def batched(node: ast.expr, var: str, ns: dict) -> Batched | None:
    """``node`` (a row's expression, ``var`` the row's index) over all rows, the names'
    values in ``ns``; None where it uses anything else than the forms the module's notes
    list."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and isinstance(node.slice, ast.Name) and node.slice.id == var:
        rows = ns.get(node.value.id)
        return (Batched(node.value.id, rows.ndim - 1, True)
                if type(rows) is np.ndarray and rows.ndim >= 1 else None)
    if not any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(node)):
        return _same_each_row(node, ns)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        a, b = batched(node.left, var, ns), batched(node.right, var, ns)
        return None if a is None or b is None else _matmul(a, b)
    if isinstance(node, ast.BinOp) and type(node.op) in _ELEMENTWISE:
        a, b = batched(node.left, var, ns), batched(node.right, var, ns)
        if a is None or b is None:
            return None
        op = _ELEMENTWISE[type(node.op)]
        return _elementwise([a, b], lambda c: f"{_atom(c[0])} {op} {_atom(c[1])}")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        a = batched(node.operand, var, ns)
        return None if a is None else Batched(f"{_UNARY[type(node.op)]}{_atom(a.code)}",
                                              a.ndim, a.by_row)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and ns.get(node.func.value.id) is np
            and isinstance(getattr(np, node.func.attr, None), np.ufunc)
            and getattr(np, node.func.attr).nout == 1 and not node.keywords
            and len(node.args) == getattr(np, node.func.attr).nin):
        args = [batched(a, var, ns) for a in node.args]
        if None in args:
            return None
        func = ast.unparse(node.func)
        return _elementwise(args, lambda c: f"{func}({', '.join(c)})")
    return None


def _same_each_row(node: ast.expr, ns: dict) -> Batched | None:
    """A part that does not read the row's index: a number, or a name or plain subscript of
    an array (evaluated here for its number of axes: it reads, and calls nothing)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Batched(repr(node.value), 0, False)
    if any(isinstance(n, (ast.Call, ast.NamedExpr, ast.Lambda)) for n in ast.walk(node)):
        return None
    try:
        value = eval(compile(ast.Expression(node), "<part>", "eval"), dict(ns))
    except Exception:
        return None
    if isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_)):
        return Batched(ast.unparse(node), 0, False)
    if type(value) is np.ndarray:
        return Batched(ast.unparse(node), value.ndim, False)
    return None


def header_of(stats, line: LineStat) -> LineStat | None:
    """The header of the loop holding ``line`` directly (None outside a loop)."""
    st = line.statement
    if st.loop is None:
        return None
    return next((s for s in stats if s.statement.key == (st.filename, st.loop)), None)


def _only_statement(header: LineStat) -> bool:
    """Whether the loop at ``header`` holds one statement and no ``else``."""
    st = header.statement
    try:
        tree = ast.parse("".join(linecache.getlines(st.filename)))
    except (SyntaxError, ValueError):
        return False
    loop = next((n for n in ast.walk(tree) if isinstance(n, ast.For) and n.lineno == st.line),
                None)
    return loop is not None and len(loop.body) == 1 and not loop.orelse


def vectorised_loop(line: LineStat, header: LineStat, min_time: float,
                    include: tuple[str, ...] = ()) -> dict | None:
    """The loop at ``header`` (its one statement ``line``) as one statement over all rows
    (see the module's notes), checked on the captured values and timed against the loop,
    side by side: a dict as :func:`.joined.joined_distances` gives, its times per row (what
    a run of ``line`` took and would take), ``joins["loop"]`` True; else None."""
    form = loop_form(header.statement.code, line.statement.code)
    entries = header.hits - line.hits
    if form is None or entries < 1 or not _only_statement(header):
        return None
    var, target, expr = form
    try:
        replay = prepare(line, include)
    except ReplayError:
        return None
    ns = replay.namespace()
    out = ns.get(target)
    rows = line.hits // entries
    if type(out) is not np.ndarray or out.ndim < 1 or len(out) != rows \
            or line.hits != rows * entries:
        return None  # not every row of the target at each entry of the loop
    found = batched(expr, var, ns)
    row_reads = _row_reads(expr, var)
    reads = set(row_reads)
    whole = sum(isinstance(n, ast.Name) and n.id == target for n in ast.walk(expr))
    if whole > row_reads.count(target):
        return None  # the target read whole: each row's run sees the rows written before
    arrays = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)
              and type(ns.get(n.id)) is np.ndarray and ns[n.id] is not out}
    aliases = line.capture.aliases if line.capture is not None else frozenset()
    if found is None or not found.by_row or any(len(ns[x]) != rows for x in reads) \
            or any(np.may_share_memory(ns[x], out) or frozenset((x, target)) in aliases
                   for x in arrays):
        return None  # an array it reads is the target's memory under another name
    code = f"{target}[:] = {found.code}"
    loop = compile(f"for {var} in range({rows}):\n    {line.statement.code}\n",
                   "<the loop>", "exec")
    rewrite = compile(code, "<the loop vectorised>", "exec")
    theirs_ns, ours_ns = {**ns, target: out.copy()}, {**ns, target: out.copy()}
    try:
        with np.errstate(all="ignore"):
            exec(loop, theirs_ns)
            exec(rewrite, ours_ns)
    except Exception:
        return None
    values = _agreement(ours_ns[target], theirs_ns[target])
    if values is None:
        return None
    before, after = timed_side_by_side(loop, rewrite, {**ns, target: out.copy()},
                                       {**ns, target: out.copy()}, min_time)
    return {"statement": code, "speedup": before.median / after.median,
            "measured_s": after.median / rows, "lines_s": before.median / rows,
            "values": values, "note": "",
            "joins": {"lines": [header.statement.line, line.statement.line], "name": target,
                      "lines_s": before.median, "loop": True, "rows": rows}}


def _row_reads(expr: ast.expr, var: str) -> list[str]:
    """The names ``expr`` reads a row of (``X[n]``), once per read."""
    return [n.value.id for n in ast.walk(expr) if isinstance(n, ast.Subscript)
            and isinstance(n.slice, ast.Name) and n.slice.id == var
            and isinstance(n.value, ast.Name)]


def _agreement(ours: np.ndarray, theirs: np.ndarray) -> str | None:
    """How the rewrite's result agrees with the loop's: "same values", within the rounding
    of sums taken in another order (floats), or None."""
    if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
        return None
    if np.array_equal(ours, theirs, equal_nan=ours.dtype.kind in "fc"):
        return "same values"
    if ours.dtype.kind not in "fc":
        return None
    finite = np.isfinite(theirs)
    odd_equal = (ours[~finite] == theirs[~finite]) | (np.isnan(ours[~finite])
                                                     & np.isnan(theirs[~finite]))
    if not odd_equal.all() or not finite.any():
        return None
    scale = float(np.max(np.abs(theirs[finite])))
    rtol = 1e-4 if ours.dtype in (np.float32, np.complex64) else 1e-10
    if np.allclose(ours[finite], theirs[finite], rtol=rtol, atol=rtol * scale):
        return "values within the rounding of sums taken in another order"
    return None
