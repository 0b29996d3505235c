"""A group-by written as a loop of masks: ``sel = key == g`` for each group ``g``.

Each iteration compares every row of ``key`` with its group and then reads the mask
(``x[sel]``, ``sel.sum()``): ``groups x rows`` work for ``rows`` of data, where sorting the rows
by their key once makes each group a slice (its rows contiguous, their count the difference of
two bounds). No single line shows it: each is near its own floor; the waste is the loop's.

:func:`attach` finds the pattern in the recorded lines (syntax: a comparison of an array with
the loop's variable, in the loop's body), and gives the mask's line and each line that only
gathers, reduces or counts with the mask a ``group-by-masks`` cause: its recorded time, the
whole of which a slice or a bounds difference replaces, less what sorting the key once (and
gathering each array the lines index, once) took here, timed on the captured values. It comes
first in the line's ledger (the scan is why the line runs at all); the line's other causes
keep what is left, in proportion. Lines that do more
with a group than gather or count it (``np.median(x[sel])``) keep their work and get no cause.
"""

from __future__ import annotations

import ast
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .record import LineStat

__all__ = ["MIN_ROWS", "MaskedGroups", "attach", "find", "first_claim", "inside", "stores"]

#: a key shorter than this is not worth sorting: its scans are a few microseconds each
MIN_ROWS = 10_000
_COUNTS = {"sum", "count_nonzero"}
#: reductions of a group's rows: over a slice, a pass over the group's own rows
_REDUCE = {"sum", "mean", "max", "min", "prod", "any", "all"}


@dataclass
class MaskedGroups:
    """One loop's group-by by masks: ``mask = key == group`` in a loop over ``group``."""

    loop: LineStat  # the loop's header
    compare: LineStat  # the line comparing the key with the group
    key: str  # the key array's name
    group: str  # the loop's variable
    mask: str | None  # the mask's name, or None where the comparison is used in place
    scans: list[LineStat] = field(default_factory=list)  # lines only gathering or counting
    gathered: set[str] = field(default_factory=set)  # names of the arrays the scans index


def _tree(code: str) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return None


def _loop_targets(header: str) -> set[str]:
    """The names a ``for`` header binds (``for i, s in enumerate(x):``: i and s)."""
    tree = _tree(header.rstrip() + "\n    pass")
    if tree is None or not tree.body or not isinstance(tree.body[0], ast.For):
        return set()
    return {n.id for n in ast.walk(tree.body[0].target) if isinstance(n, ast.Name)}


def _column(node: ast.AST) -> str | None:
    """The source of an array the pattern may name: ``x``, or a column of a table
    ``tbl["store"]`` (a name subscripted by a constant), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, (str, int)):
        return ast.unparse(node)
    return None


def _comparison(node: ast.AST, targets: set[str]) -> tuple[str, str] | None:
    """(key, group) of ``key == group`` or ``group == key``: the group a loop target, the key
    a :func:`_column` that is not one."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq)):
        return None
    for key, group in ((node.left, node.comparators[0]), (node.comparators[0], node.left)):
        if isinstance(group, ast.Name) and group.id in targets:
            column = _column(key)
            if column is not None and column not in targets:
                return column, group.id
    return None


def _gathered(node: ast.AST, dumped: str) -> str | None:
    """The name of ``x`` where ``node`` is ``x[mask]`` (``dumped``: the mask's AST), or of
    ``i`` in ``x[i[mask]]`` (a group's rows read through an index: after sorting, ``x`` is
    read at the sorted ``i``'s slice), else None."""
    if not isinstance(node, ast.Subscript):
        return None
    if ast.dump(node.slice) == dumped:
        return _column(node.value)
    if _column(node.value) is not None:
        return _gathered(node.slice, dumped)
    return None


def _numpy(f: ast.AST, names: set[str]) -> bool:
    return (isinstance(f, ast.Attribute) and f.attr in names and isinstance(f.value, ast.Name)
            and f.value.id in ("np", "numpy"))


#: NumPy's products of two of a group's gathers (``np.dot(v[sel], x[sel])``)
_PRODUCTS = {"dot", "inner", "vdot", "matmul"}


def _scan(value: ast.AST, mask: ast.AST) -> tuple[str, frozenset[str]] | None:
    """What a statement's value does with the mask, when that is all it does, and the names
    of the arrays it gathers: ``"gather"`` for ``x[mask]`` or a reduction of it
    (``x[mask].sum()``, ``np.mean(x[mask])``: over a group's slice that is a pass over its own
    rows), ``"count"`` for ``mask.sum()``, ``np.sum(mask)``, ``np.count_nonzero(mask)``; and
    two such combined by an operator or a product (``v[mask] @ x[c[mask]]``,
    ``x[mask].sum() / mask.sum()``), or one with a number (``x[mask].sum() * 0.5``); else None
    (``np.median(x[mask])`` keeps its work)."""
    one = _one_scan(value, mask)
    if one is not None:
        return one[0], frozenset([one[1]] if one[1] else [])
    if isinstance(value, ast.BinOp):
        parts = [value.left, value.right]
    elif isinstance(value, ast.Call) and _numpy(value.func, _PRODUCTS) \
            and len(value.args) == 2 and not value.keywords:
        parts = list(value.args)
    else:
        return None
    scans = [_scan(p, mask) if not isinstance(p, ast.Constant) else ("number", frozenset())
             for p in parts]
    if None in scans or all(what == "number" for what, _ in scans):
        return None
    what = "gather" if any(what == "gather" for what, _ in scans) else "count"
    return what, frozenset().union(*(names for _, names in scans))


def _one_scan(value: ast.AST, mask: ast.AST) -> tuple[str, str | None] | None:
    """One gather, reduction or count of the mask (see :func:`_scan`): what, and the name."""
    dumped = ast.dump(mask)
    name = _gathered(value, dumped)
    if name is not None:
        return "gather", name
    if not isinstance(value, ast.Call) or value.keywords:
        return None
    f = value.func
    if isinstance(f, ast.Attribute) and f.attr in _REDUCE and not value.args:
        if ast.dump(f.value) == dumped and f.attr == "sum":
            return "count", None
        name = _gathered(f.value, dumped)
        return ("gather", name) if name is not None else None
    if len(value.args) == 1:
        if _numpy(f, _COUNTS) and ast.dump(value.args[0]) == dumped:
            return "count", None
        name = _gathered(value.args[0], dumped) if _numpy(f, _REDUCE) else None
        return ("gather", name) if name is not None else None
    return None


def _statement_scan(code: str, mask: ast.AST) -> tuple[str, frozenset[str]] | None:
    """(what, gathered arrays' names) where a statement assigns or returns one scan of the
    mask (see :func:`_scan`), else None."""
    tree = _tree(code)
    if tree is None or len(tree.body) != 1:
        return None
    st = tree.body[0]
    if isinstance(st, ast.Assign) and len(st.targets) == 1:
        value, targets = st.value, st.targets
    elif isinstance(st, ast.AugAssign):
        value, targets = st.value, [st.target]
    elif isinstance(st, (ast.Expr, ast.Return)) and st.value is not None:
        value, targets = st.value, []
    else:
        return None
    dumped = ast.dump(mask)
    if any(ast.dump(n) == dumped or (isinstance(n, ast.Name) and isinstance(mask, ast.Name)
                                     and n.id == mask.id)
           for t in targets for n in ast.walk(t)):
        return None  # a write through the mask (out[sel] = ...): not a slice after sorting
    return _scan(value, mask)


def find(stats: list[LineStat]) -> list[MaskedGroups]:
    """The group-bys by masks among the recorded lines."""
    by_key = {s.statement.key: s for s in stats}
    found = []
    for s in stats:
        st = s.statement
        header = by_key.get((st.filename, st.loop)) if st.loop else None
        if header is None or st.is_loop or header.statement.kind != "For":
            continue
        targets = _loop_targets(header.statement.code)
        tree = _tree(st.code) if targets else None
        if tree is None or len(tree.body) != 1:
            continue
        node = tree.body[0]
        # `mask = key == group`: the lines of the loop reading the mask are its users
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            pair = _comparison(node.value, targets)
            if pair is not None:
                mask = node.targets[0].id
                group = MaskedGroups(header, s, *pair, mask=mask, scans=[s])
                name = ast.Name(id=mask, ctx=ast.Load())
                for other in stats:
                    o = other.statement
                    if other is s or o.filename != st.filename or o.loop != st.loop \
                            or mask not in o.names:
                        continue
                    scan = _statement_scan(o.code, name)
                    if scan is not None:
                        group.scans.append(other)
                        group.gathered |= scan[1]
                found.append(group)
                continue
        # `np.count_nonzero(key == group)` and the like, the comparison used in place
        for sub in ast.walk(node):
            pair = _comparison(sub, targets)
            if pair is not None:
                scan = _statement_scan(st.code, sub)
                if scan is not None:
                    found.append(MaskedGroups(header, s, *pair, mask=None, scans=[s],
                                              gathered=set(scan[1])))
                break
    # the key must be the same array in every run of the loop (nested loops' lines too)
    return [g for g in found if not any(
        stores(o.statement.code, _base(g.key)) for o in stats
        if inside(o, g.loop.statement, by_key))]


def inside(stat: LineStat, loop, by_key: dict) -> bool:
    """Whether ``stat`` runs in the body of the loop ``loop`` (a Statement), at any depth."""
    st, seen = stat.statement, set()
    while st.loop and (st.filename, st.loop) not in seen:
        if st.filename == loop.filename and st.loop == loop.line:
            return True
        seen.add((st.filename, st.loop))
        header = by_key.get((st.filename, st.loop))
        if header is None:
            return False
        st = header.statement
    return False


def _base(column: str) -> str:
    node = ast.parse(column, mode="eval").body
    return node.id if isinstance(node, ast.Name) else node.value.id


def stores(code: str, name: str) -> bool:
    """Whether a statement may change ``name``: binds it or writes into it (``key = ...``,
    ``key[i] = ...``), or hands it to a call (``key.sort()``, ``np.random.shuffle(key)``,
    ``out=key``)."""
    tree = _tree(code)
    if tree is None:
        return False

    def written(t: ast.AST) -> bool:
        if isinstance(t, (ast.Tuple, ast.List)):
            return any(written(e) for e in t.elts)
        while isinstance(t, (ast.Subscript, ast.Attribute, ast.Starred)):
            t = t.value
        return isinstance(t, ast.Name) and t.id == name

    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For))
                   else [])
        if any(written(t) for t in targets):
            return True
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id == name and f.attr not in _READERS - {"sort"}:
                return True  # a method of the key that may change it (sort, fill, put...)
            if any(isinstance(a, ast.Name) and a.id == name
                   for a in (*node.args, *(k.value for k in node.keywords))) \
                    and not _reads_only(f) and not _numpy_reads(node, name):
                return True
    return False


#: NumPy's functions that return a new array (never a view of an argument) and take no
#: output argument, so that an array handed to them is only read
_NUMPY_COPIES = frozenset({
    "interp", "searchsorted", "digitize", "histogram", "histogram2d", "histogramdd",
    "bincount", "unique", "sort", "argsort", "lexsort", "count_nonzero", "nonzero",
    "flatnonzero", "argwhere", "diff", "ediff1d", "gradient", "convolve", "correlate",
    "polyval", "polyfit", "tile", "repeat", "kron", "copy", "array_equal", "allclose",
    "isclose", "isin", "in1d", "intersect1d", "union1d", "setdiff1d", "cov", "corrcoef",
    "norm", "det", "slogdet", "inv", "pinv", "solve", "lstsq", "eig", "eigh", "eigvals",
    "eigvalsh", "svd", "qr", "cholesky", "matrix_rank", "fft", "ifft", "rfft", "irfft",
    "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftshift",
    "ifftshift"})


def _numpy_reads(call: ast.Call, name: str) -> bool:
    """Whether ``call`` only reads ``name``: a function of :data:`_NUMPY_COPIES` (in ``np``,
    ``np.linalg`` or ``np.fft``), or a ufunc with ``name`` among its inputs (``np.add(a, b,
    a)`` writes ``a``) and not its ``out=``."""
    chain, f = [], call.func
    while isinstance(f, ast.Attribute):
        chain.append(f.attr)
        f = f.value
    if not (chain and isinstance(f, ast.Name) and f.id in ("np", "numpy")) or len(chain) > 2 \
            or (len(chain) == 2 and chain[1] not in ("linalg", "fft")):
        return False
    if any(k.arg is None or k.arg in ("out", "copy", "overwrite_input") for k in call.keywords):
        return False  # out=, copy=False, or **kwargs that may hold either
    func = np
    for attr in reversed(chain):
        func = getattr(func, attr, None)
    if isinstance(func, np.ufunc):
        return not any(isinstance(a, ast.Name) and a.id == name
                       for a in call.args[func.nin:])
    return func is not None and chain[0] in _NUMPY_COPIES


#: calls that only read their arguments (the pattern's own scans, NumPy's reductions)
_READERS = {"sum", "count_nonzero", "mean", "max", "min", "prod", "any", "all", "median",
            "unique", "bincount", "argsort", "sort", "searchsorted", "len", "print"}


def _reads_only(f: ast.AST) -> bool:
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in _READERS


def _value(stats: list[LineStat], column: str) -> object:
    """The value of a :func:`_column` as one of ``stats`` captured it (None where none did)."""
    node = ast.parse(column, mode="eval").body
    name = _base(column)
    for s in stats:
        if s.capture is None or name not in s.capture.values:
            continue
        value = s.capture.values[name]
        if isinstance(node, ast.Name):
            return value
        if isinstance(value, dict):  # a table's column, read from the mapping without code
            return value.get(node.slice.value)
    return None


def _best(fn: Callable[[], object]) -> float:
    """Seconds ``fn`` takes: the best of three runs, or one run where that took 20 ms or more
    (a sort of 1e8 keys is seconds; the run's probing budget is not spent on it)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
        if best >= 0.02:
            break
    return best


def measure(group: MaskedGroups) -> dict | None:
    """What the cure costs, timed on the captured key (and each gathered array), and what the
    scans took in the program; None where the key was not captured or is small, or the loop's
    variable is not one value (``for pred in predictions``: an array each)."""
    key = _value(group.scans, group.key)
    if not isinstance(key, np.ndarray) or key.ndim != 1 or key.size < MIN_ROWS:
        return None
    value = _value([group.compare], group.group)
    if value is None or np.ndim(value) != 0 or isinstance(value, (str, bytes)):
        return None
    integers = key.dtype.kind in "iu" and int(key.min()) >= 0
    # small non-negative integers sort by radix (NumPy's stable sort of 16-bit keys), in a
    # tenth of the time of a merge sort of the int64 keys
    narrow = integers and key.dtype.itemsize > 2 and int(key.max()) < 2**16
    sortable = (lambda: key.astype(np.uint16)) if narrow else (lambda: key)
    order = np.argsort(sortable(), kind="stable")
    sort_s = _best(lambda: key[np.argsort(sortable(), kind="stable")])
    gather_s = 0.0
    for name in sorted(group.gathered):
        array = _value(group.scans, name)
        if isinstance(array, np.ndarray) and array.shape[:1] == key.shape:
            gather_s += _best(lambda array=array: array[order])
    # the loop may run many times (a function called for each day): a sort each time
    runs = max(1, group.loop.hits - group.compare.hits)
    scanned_s = sum(s.ns for s in group.scans) / 1e9
    return {"key": group.key, "group": group.group, "mask": group.mask, "rows": key.size,
            "groups": group.compare.hits, "loops": runs, "scanned_s": scanned_s,
            "sort_s": sort_s * runs, "gather_s": gather_s * runs, "lines": len(group.scans),
            "narrow": narrow, "integers": integers,
            "saved_s": scanned_s - (sort_s + gather_s) * runs}


def attach(rows: dict[int, dict], stats: list[LineStat], display: Callable[[LineStat], str],
           min_seconds: float, deadline: float = float("inf")) -> None:
    """Give each scan of each group-by by masks (``rows``: the report's rows by ``id`` of
    their LineStat) a ``group-by-masks`` cause of its recorded time, the cure's cost taken
    from the comparison's line first, where what it saves in all is at least ``min_seconds``;
    nothing is measured after ``deadline``. The cause comes first in the line's ledger (the
    scan is why the line runs at all); the line's other causes keep what is left, in
    proportion; its recoverable time is at least the cause's (the floor is that of the scan
    as written, which sorting removes)."""
    for group in find(stats):
        if time.perf_counter() > deadline:
            return
        try:
            numbers = measure(group)
        except Exception:  # a key NumPy cannot sort (objects of mixed types): no cause
            continue
        if numbers is None or numbers["saved_s"] < min_seconds:
            continue
        numbers["sources"] = [display(s) for s in group.scans]
        cure = numbers["sort_s"] + numbers["gather_s"]  # taken from the first lines' time
        for s in sorted(group.scans, key=lambda s: s is not group.compare):
            row = rows.get(id(s))
            if row is None:
                continue
            line_s = row["time_s"]
            seconds, cure = max(0.0, line_s - cure), max(0.0, cure - line_s)
            if seconds <= 0:
                continue
            first_claim(row, {"kind": "group-by-masks", "seconds": seconds, "hits": s.hits,
                              **numbers})


def first_claim(row: dict, cause: dict) -> None:
    """Give a report's ``row`` a cause measured on its whole loop (the reason the line runs at
    all) first in its ledger: its other causes scaled to what is left of the line's time, in
    proportion; its recoverable time at least the cause's. The cause says so
    (``first: True``): what it holds is recoverable whatever the work's floor."""
    cause = {**cause, "first": True}
    line_s, seconds = row["time_s"], cause["seconds"]
    others = [dict(c) for c in row["causes"]]
    taken = sum(c["seconds"] for c in others)
    if taken > line_s - seconds:
        others = [{**c, "seconds": c["seconds"] * (line_s - seconds) / taken}
                  for c in others if line_s > seconds]
    row["causes"] = sorted([cause, *others], key=lambda c: c["seconds"], reverse=True)
    row["recoverable_s"] = max(row["recoverable_s"], seconds)
