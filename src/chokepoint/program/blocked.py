"""A line evaluated on blocks of its result's rows: what its large intermediates cost.

Broadcasting can make an intermediate array far larger than what a line reads and writes:
``((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)`` on 120,000 x 6 points and 12 centres
makes two 69 MB arrays to produce an 11.5 MB result. Each is written to memory and read back.
Evaluated on blocks of rows, the same expression makes intermediates that stay in the cache, and
gives the same values: each row of the result is computed from the same rows of the inputs by
the same operations. :func:`blocked` builds that evaluation, and the code a user would write for
it, when a line's largest intermediate is much larger than its inputs and result.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["BLOCK_BYTES", "LARGE_RATIO", "Blocked", "blocked", "largest_intermediate"]

#: the largest intermediate of one block: about a core's L2 cache
BLOCK_BYTES = 1 << 20
#: an intermediate at least this many times the line's inputs and result together is large
LARGE_RATIO = 2
#: and at least this many bytes (smaller ones stay in the last-level cache as written)
LARGE_MIN_BYTES = 8 << 20


@dataclass
class Blocked:
    """An expression evaluated ``rows`` rows of its result at a time.

    Attributes
    ----------
    code : str
        What a user writes for it (``name = np.empty(...)`` and a ``for`` loop).
    call : callable
        Evaluates it on the namespace it was built for; returns the result.
    rows : int
        Rows of the result per block.
    """

    code: str
    call: Callable[[], np.ndarray]
    rows: int


def largest_intermediate(ops, inputs: dict[str, np.ndarray], result) -> int:
    """Bytes of the largest array a line's operations make when it is large (see
    :data:`LARGE_RATIO`, :data:`LARGE_MIN_BYTES`) against its inputs and result; else 0."""
    if not isinstance(result, np.ndarray) or result.ndim == 0:
        return 0
    made = [op.out_bytes for op in ops if op.allocates and not op.is_view]
    largest = max(made, default=0)
    own = sum(a.nbytes for a in inputs.values()) + result.nbytes
    return largest if largest >= max(LARGE_RATIO * own, LARGE_MIN_BYTES) else 0


class _Rows(ast.NodeTransformer):
    """``name`` -> ``name[i:i + rows]`` for the names of the row-sliced inputs."""

    def __init__(self, names: set[str], index: str, rows: int):
        self.names, self.index, self.rows = names, index, rows

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.names or not isinstance(node.ctx, ast.Load):
            return node
        upper = ast.BinOp(ast.Name(self.index, ast.Load()), ast.Add(), ast.Constant(self.rows))
        block = ast.Slice(ast.Name(self.index, ast.Load()), upper)
        return ast.copy_location(ast.Subscript(node, block, ast.Load()), node)


def _index_name(taken: set[str]) -> str:
    name = "i"
    while name in taken:
        name = "_" + name
    return name


def blocked(expression: str, target: str | None, namespace: dict,
            inputs: dict[str, np.ndarray], result: np.ndarray,
            largest: int) -> Blocked | None:
    """``expression`` evaluated on blocks of rows of ``result``, or None where no input has
    the result's rows or one block would be the whole.

    The inputs whose first axis has the result's length are sliced; the others are used whole.
    The caller checks the values: an expression that mixes rows (a transpose, a reduction over
    the first axis) gives other values on blocks, and is not proposed.
    """
    n = result.shape[0]
    sliced = {name for name, a in inputs.items()
              if isinstance(a, np.ndarray) and a.ndim >= 1 and a.shape[0] == n}
    if not sliced or largest <= 0:
        return None
    rows = max(1, int(n * BLOCK_BYTES // largest))
    if rows >= n:
        return None
    index = _index_name(set(namespace) | set(inputs))
    tree = ast.parse(expression.strip(), mode="eval")
    body = ast.fix_missing_locations(_Rows(sliced, index, rows).visit(tree))
    block_code = compile(body, "<blocked>", "eval")
    name = target or "out"
    dtype = "" if result.dtype == np.float64 else f", dtype=np.{result.dtype.name}"
    code = (f"{name} = np.empty({tuple(result.shape)}{dtype})\n"
            f"for {index} in range(0, {n}, {rows}):\n"
            f"    {name}[{index}:{index} + {rows}] = {ast.unparse(body)}")

    def call() -> np.ndarray:
        out = np.empty(result.shape, result.dtype)
        scope = dict(namespace)
        for start in range(0, n, rows):
            scope[index] = start
            out[start:start + rows] = eval(block_code, scope)
        return out

    return Blocked(code=code, call=call, rows=rows)
