"""A decorated function with loops, branches or shapes: run as Python, each array statement fused.

``@chokepoint.fuse`` traces a straight-line function into one kernel. A function around such
code (``n = u.shape[0]``, ``for _ in range(steps):``, ``if``) cannot be traced that way: its
control flow depends on values. Such a function is rewritten once (:class:`Statements`): the
loops, branches and scalar work stay Python, and each statement computing an array expression,
``t = expr``, ``u[1:-1, 1:-1] = expr``, ``u += expr`` and ``return expr``, calls the fused kernel
of its expression (``chokepoint.fuse`` of the expression, a basic slice of a name lifted into an
argument of its own, as a stencil's shifted neighbours), writing into the target's memory where
NumPy would (a slice assigned, an array updated in place). A statement fuse refuses for the
values it gets (a scalar expression, a call of another library) is evaluated by Python, as
written, from then on. Values are fuse's: NumPy's, within the ulp bounds of its functions.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
from collections.abc import Callable

import numpy as np

from .trace import FuseError

__all__ = ["Statements", "basic_index", "needs_statements"]

_NUMPY = ("np", "numpy")
_KNOWN = set(_NUMPY) | set(dir(builtins))
_COMPOUND = (ast.For, ast.While, ast.If, ast.With, ast.Try)


def basic_index(node: ast.AST) -> bool:
    """Whether a subscript's index is slices and integers written as constants or names (a
    view of the array: ``u[2:, 1:-1]``, ``u[1:n - 1, k]``), not an array."""
    if isinstance(node, ast.Tuple):
        return all(basic_index(e) for e in node.elts)
    if isinstance(node, ast.Slice):
        return all(part is None or basic_index(part)
                   for part in (node.lower, node.upper, node.step))
    return all(isinstance(n, (ast.Constant, ast.Name, ast.UnaryOp, ast.BinOp, ast.operator,
                              ast.unaryop, ast.Load))
               for n in ast.walk(node))


def _function(func: Callable) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):  # no source (a lambda in a REPL, a builtin)
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, ast.FunctionDef) else None


def needs_statements(func: Callable) -> bool:
    """Whether ``func``'s body has control flow or reads an array's shape: then it is run
    statement by statement (a straight-line function is traced whole, into one kernel)."""
    node = _function(func)
    if node is None:
        return False
    for sub in ast.walk(node):
        if sub is not node and isinstance(sub, (*_COMPOUND, ast.FunctionDef, ast.Lambda)):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in ("shape", "ndim", "size"):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                and sub.func.id in ("len", "range"):
            return True
    return False


def _is_expression(node: ast.AST) -> bool:
    """An array expression fuse may take: operators and NumPy's functions of names, constants
    and basic slices; no other calls, attributes or indexing (those stay Python)."""
    if not isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Compare, ast.IfExp)):
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    and f.value.id in _NUMPY):
                return False
        elif isinstance(sub, ast.Attribute):
            if not (isinstance(sub.value, ast.Name) and sub.value.id in _NUMPY):
                return False
        elif isinstance(sub, ast.Subscript):
            if not (isinstance(sub.value, ast.Name) and basic_index(sub.slice)):
                return False
        elif isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.Starred,
                              ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
            return False
    return True


class _Statement:
    """One statement's expression: its fused kernel (made on first use), and Python's code
    for it where fuse refuses."""

    def __init__(self, expr: ast.expr, where: str):
        lifted: dict[str, ast.expr] = {}  # argument -> the slice it stands for
        taken = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
        by_code: dict[str, str] = {}

        class Lift(ast.NodeTransformer):
            def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
                code = ast.unparse(node)
                if code not in by_code:
                    k = 0
                    while f"{node.value.id}_{k}" in taken:
                        k += 1
                    name = by_code[code] = f"{node.value.id}_{k}"
                    taken.add(name)
                    lifted[name] = node
                return ast.Name(by_code[code], ast.Load())

        body = Lift().visit(ast.parse(ast.unparse(expr), mode="eval").body)
        self.code = ast.unparse(body)  # what fuse compiles
        self.arguments = sorted({n.id for n in ast.walk(body) if isinstance(n, ast.Name)}
                                - _KNOWN)
        self.lifted = lifted
        self.where = where
        self.fused = None
        self.python = None  # Python's code for the expression, once fuse refused it

    def values(self) -> ast.Dict:
        """The call's argument: ``{name: value}`` per argument, a slice evaluated as written."""
        keys, values = [], []
        for name in self.arguments:
            keys.append(ast.Constant(name))
            values.append(self.lifted.get(name) or ast.Name(name, ast.Load()))
        return ast.Dict(keys, values)

    def run(self, values: dict, out=None, casting: str = "unsafe", base=None, index=None):
        """The expression's value, written where NumPy would write it: into ``out`` where that
        is an array (an in-place operator on a name), or into ``base[index]`` (a subscript
        assigned, or updated by an operator). ``casting``: an assignment's ``"unsafe"``, an
        operator's ``"same_kind"``, as NumPy's. fuse's kernel, or Python's where fuse refuses
        these values."""
        if index is not None:
            view = base[index] if isinstance(base, np.ndarray) and _basic(index) else None
            if not isinstance(view, np.ndarray):  # an element, a fancy index, not an array
                result = self.run(values)  # NumPy's (or the container's) own assignment
                if casting == "same_kind" and isinstance(base, np.ndarray):
                    _check_cast(np.asarray(result).dtype, base.dtype)
                base[index] = result
                return None
            out = view
        if not isinstance(out, np.ndarray):
            out = None
        if self.python is None:
            from .api import fuse

            try:
                if self.fused is None:
                    self.fused = fuse(self.code)
                if out is not None:
                    try:  # straight into the target, where it has the result's shape and dtype
                        return self.fused(**values, out=out)
                    except (TypeError, ValueError):
                        pass  # another shape (broadcast) or dtype: computed, then cast
                result = self.fused(**values)
            except (FuseError, TypeError, ValueError):
                self.python = compile(ast.parse(self.code, mode="eval"), self.where, "eval")
            else:
                return result if out is None else _into(out, result, casting)
        result = eval(self.python, {"np": np, "numpy": np}, values)
        return result if out is None else _into(out, result, casting)


def _basic(index) -> bool:
    """Whether ``index`` selects a view (integers, slices, ``...``, ``None``)."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, np.integer, slice)) or i is Ellipsis or i is None
               for i in parts) and not any(isinstance(i, bool) for i in parts)


def _check_cast(source: np.dtype, target: np.dtype) -> None:
    if not np.can_cast(source, target, casting="same_kind"):
        raise TypeError(f"Cannot cast the result from {source} to {target} with casting rule "
                        "'same_kind' (an in-place operator)")


def _into(out: np.ndarray, result, casting: str) -> np.ndarray:
    np.copyto(out, result, casting=casting)
    return out


class Statements:
    """``func`` rewritten so that each of its array statements runs fused (see the module
    notes); callable as ``func``."""

    def __init__(self, func: Callable):
        node = _function(func)
        if node is None:
            raise FuseError(f"fuse: the source of {func!r} is not available, and its loops or "
                            "shapes need it")
        if func.__code__.co_freevars:
            raise FuseError(f"fuse: {func.__qualname__} reads names of an enclosing function "
                            f"({', '.join(func.__code__.co_freevars)}); a function with loops "
                            "or shapes is fused from module level only")
        self.statements: list[_Statement] = _Table()
        filename = inspect.getsourcefile(func) or "<fused>"
        node.decorator_list = []
        body = _Rewrite(self, filename).visit(node)
        outer = ast.FunctionDef(
            name="__chokepoint_outer", args=ast.arguments(
                posonlyargs=[], args=[ast.arg("__chokepoint_statements")], vararg=None,
                kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
            body=[body, ast.Return(ast.Name(node.name, ast.Load()))], decorator_list=[],
            returns=None, type_comment=None)
        ast.increment_lineno(body, func.__code__.co_firstlineno - 1)  # the file's lines
        module = ast.fix_missing_locations(ast.Module([outer], type_ignores=[]))
        scratch: dict = {}
        exec(compile(module, filename, "exec"), scratch)
        made = scratch["__chokepoint_outer"](self.statements)
        # the user's module as its globals (read as they change), its defaults and names
        self.func = types.FunctionType(made.__code__, func.__globals__, func.__name__,
                                       func.__defaults__, made.__closure__)
        self.func.__kwdefaults__ = func.__kwdefaults__

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)


class _Rewrite(ast.NodeTransformer):
    """Each array statement as a call of its :class:`_Statement`: ``t = S[k].run(values)``,
    ``S[k].run(values, out=target)`` for a basic slice assigned or an array updated in
    place."""

    def __init__(self, owner: Statements, filename: str):
        self.owner = owner
        self.filename = filename

    def _call(self, expr: ast.expr, node: ast.stmt, out: ast.expr | None = None,
              casting: str = "unsafe", target: ast.Subscript | None = None) -> ast.Call:
        """``S[k].run(values, ...)``: into ``out``, or into ``target`` (a subscript) as its
        base and its index (slices made with ``slice()``), decided when it runs."""
        statement = _Statement(expr, f"{self.filename}:{node.lineno}")
        self.owner.statements.append(statement)
        k = len(self.owner.statements) - 1
        run = ast.Attribute(ast.Subscript(_table(), ast.Constant(k), ast.Load()), "run",
                            ast.Load())
        keywords = [ast.keyword("casting", ast.Constant(casting))]
        if out is not None:
            keywords.append(ast.keyword("out", out))
        if target is not None:
            keywords += [ast.keyword("base", _load(target.value)),
                         ast.keyword("index", _index(target.slice))]
        return ast.Call(run, [statement.values()], keywords)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if node is not getattr(self, "_top", node):
            return node  # a nested function stays as written
        self._top = node
        self.generic_visit(node)
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if len(node.targets) != 1 or not _is_expression(node.value):
            return node
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return ast.copy_location(ast.Assign([target], self._call(node.value, node)), node)
        if isinstance(target, ast.Subscript):
            return ast.copy_location(ast.Expr(self._call(node.value, node, target=target)),
                                     node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        target = node.target
        if not (_is_expression(node.value) or isinstance(node.value, (ast.Name, ast.Constant))):
            return node
        if isinstance(target, ast.Subscript):  # into the subscript, as NumPy's operator
            if not (isinstance(target.value, ast.Name) and basic_index(target.slice)):
                return node
            expr = ast.BinOp(ast.Subscript(target.value, target.slice, ast.Load()), node.op,
                             node.value)
            return ast.copy_location(ast.Expr(self._call(expr, node, target=target,
                                                         casting="same_kind")), node)
        if not isinstance(target, ast.Name):
            return node
        load = ast.Name(target.id, ast.Load())
        expr = ast.BinOp(load, node.op, node.value)
        # a name: in place where it holds an array (its other references see it, as with
        # NumPy's operator), rebound to the result where it holds a scalar
        call = self._call(expr, node, load, casting="same_kind")
        return ast.copy_location(ast.Assign([ast.Name(target.id, ast.Store())], call), node)

    def visit_Return(self, node: ast.Return) -> ast.AST:
        if node.value is None or not _is_expression(node.value):
            return node
        return ast.copy_location(ast.Return(self._call(node.value, node)), node)


def _load(node: ast.expr) -> ast.expr:
    """``node`` (a part of a target) as an expression that reads it."""
    return ast.parse(ast.unparse(node), mode="eval").body


def _table() -> ast.Name:
    """The rewritten function's name for its statements (a new node at each place: a node
    shared by two places has its line numbers shifted twice)."""
    return ast.Name("__chokepoint_statements", ast.Load())


def _index(node: ast.expr) -> ast.expr:
    """A subscript's index as a value: its slices made by ``slice()`` (the statements' table
    holds it, so that a name ``slice`` of the user's shadows nothing)."""
    if isinstance(node, ast.Tuple):
        return ast.Tuple([_index(e) for e in node.elts], ast.Load())
    if isinstance(node, ast.Slice):
        parts = [_load(p) if p is not None else ast.Constant(None)
                 for p in (node.lower, node.upper, node.step)]
        return ast.Call(ast.Attribute(_table(), "slice", ast.Load()), parts, [])
    return _load(node)


class _Table(list):
    """The statements of a rewritten function, by position; ``slice`` is the builtin."""

    slice = slice
