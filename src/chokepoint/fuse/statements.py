"""A decorated function with loops, branches or shapes: run as Python, each array statement fused.

``@chokepoint.fuse`` traces a straight-line function into one kernel. A function around such
code (``n = u.shape[0]``, ``for _ in range(steps):``, ``if``) may not trace: its control flow
depends on values. Such a function (:func:`needs_statements`; :class:`.api.Fused` tries the
whole trace first), and one updating an array in place (:func:`writes_in_place`), is rewritten
once (:class:`Statements`): the loops, branches and scalar work
stay Python, and each statement computing an array expression, ``t = expr``, ``u[1:-1, 1:-1] =
expr``, ``u += expr`` and ``return expr``, calls the fused kernel of its expression (a basic
slice of a name lifted into an argument of its own, as a stencil's shifted neighbours),
writing into the target's memory where NumPy would (a slice assigned, an array updated in
place). A call whose values are not arrays and numbers (lists, tuples), and a statement fuse
refuses (a scalar expression, a matrix product), is evaluated by Python as written. Values are
fuse's: NumPy's, within the ulp bounds of its functions; ``np.errstate`` does not reach the
kernels (they neither warn nor raise on a division by zero, as fuse's kernels never do).
"""

from __future__ import annotations

import ast
import builtins
import copy
import dis
import inspect
import textwrap
import types
from collections.abc import Callable

import numpy as np

from .trace import FuseError

__all__ = ["Statements", "basic_index", "needs_statements", "writes_in_place"]

_NUMPY = ("np", "numpy")
_BUILTINS = set(dir(builtins))
_COMPOUND = (ast.For, ast.While, ast.If, ast.With, ast.Try)
#: values a fused statement takes; any other (a list, a tuple) sends the call to Python
_FUSABLE = (np.ndarray, np.generic, int, float)
_TABLE = "__chokepoint_statements"


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
    """``func``'s definition, or None where it has no source of its own (a wrapper, which
    ``inspect`` would answer with the source of what it wraps; a builtin; a REPL's)."""
    if hasattr(func, "__wrapped__") or not hasattr(func, "__code__"):
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, ast.FunctionDef) and node.name == func.__name__ else None


def needs_statements(func: Callable) -> bool:
    """Whether ``func``'s body has control flow or reads an array's shape: what may keep it
    from tracing whole (it is then run statement by statement)."""
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


def writes_in_place(func: Callable) -> bool:
    """Whether ``func`` updates an array in place (``x += y``, ``x[i] = y``): traced whole, that
    would rebind a name to a new value and leave the caller's array as it was, so it runs
    statement by statement from its first call."""
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    # from the bytecode, so that a function without source (a REPL's) is known too
    return any(i.opname in ("STORE_SUBSCR", "STORE_SLICE") or i.opname.startswith("INPLACE_")
               or (i.opname == "BINARY_OP" and i.argrepr.endswith("="))
               for i in dis.get_instructions(code))


def _why_not(node: ast.FunctionDef, func: Callable) -> str | None:
    """Why ``func`` cannot be rewritten (compiled again, outside its class and its enclosing
    function), or None."""
    if func.__code__.co_freevars:
        return (f"it reads names of an enclosing function ({', '.join(func.__code__.co_freevars)})"
                "; define it at module level")
    for sub in ast.walk(node):
        if isinstance(sub, ast.ClassDef):
            return "it defines a class"
        name = sub.id if isinstance(sub, ast.Name) else (
            sub.attr if isinstance(sub, ast.Attribute) else None)
        if name and name.startswith("__") and not name.endswith("__"):
            return f"it reads {name}, a name its class mangles"
        if isinstance(sub, (ast.Global, ast.Nonlocal)) and _TABLE in sub.names:
            return f"it names {_TABLE}"
    return None


def _binds(node: ast.FunctionDef, names: tuple[str, ...]) -> bool:
    """Whether the function binds any of ``names`` itself (an argument, an assignment, an
    import): then they are not NumPy's module, nor the builtins."""
    args = node.args
    bound = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                             *filter(None, (args.vararg, args.kwarg)))}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            bound.add(sub.id)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return bool(bound & set(names))


def _is_expression(node: ast.AST, local: set[str]) -> bool:
    """An array expression fuse may take: operators and NumPy's functions of names, constants
    and basic slices; no other calls, attributes, indexing or conditional evaluation (those
    stay Python), and no name the function binds that fuse would read as a builtin."""
    if not isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Compare)):
        return False
    indices = {id(n) for sub in ast.walk(node) if isinstance(sub, ast.Subscript)
               for n in ast.walk(sub.slice)}  # a basic index's own tuple and names
    for sub in ast.walk(node):
        if id(sub) in indices:
            continue
        if isinstance(sub, ast.Call):
            f = sub.func
            if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    and f.value.id in _NUMPY) or (sub.keywords and any(
                        k.arg is None for k in sub.keywords)):
                return False
        elif isinstance(sub, ast.Attribute):
            if not (isinstance(sub.value, ast.Name) and sub.value.id in _NUMPY):
                return False
        elif isinstance(sub, ast.Subscript):
            if not (isinstance(sub.value, ast.Name) and basic_index(sub.slice)):
                return False
        elif isinstance(sub, ast.Name) and sub.id in _BUILTINS and sub.id in local:
            return False  # a local `max`: fuse would read the builtin
        elif isinstance(sub, (ast.IfExp, ast.BoolOp, ast.Lambda, ast.NamedExpr, ast.Await,
                              ast.Yield, ast.Starred, ast.ListComp, ast.GeneratorExp,
                              ast.DictComp, ast.SetComp, ast.List, ast.Tuple, ast.Dict,
                              ast.Set)):
            return False
    return True


def _names_in_order(node: ast.AST) -> list[str]:
    """The names ``node`` reads, in the order Python evaluates them (source order)."""
    found: list[str] = []

    class Visit(ast.NodeVisitor):
        def visit_Name(self, n: ast.Name) -> None:
            if n.id not in found:
                found.append(n.id)

    Visit().visit(node)
    return found


class _Statement:
    """One statement's expression: its fused kernel (made on first use), and Python's code
    for it where fuse refuses."""

    def __init__(self, expr: ast.expr, where: tuple[str, int]):
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
                    lifted[name] = node  # its lines: the file's (see Statements)
                return ast.copy_location(ast.Name(by_code[code], ast.Load()), node)

        original = copy.deepcopy(expr)
        body = Lift().visit(copy.deepcopy(expr))
        self.code = ast.unparse(body)  # what fuse compiles
        self.arguments = [n for n in _names_in_order(body) if n not in _NUMPY]
        self.lifted = lifted
        self.original = original  # Python's code, for the calls fuse does not take
        self.where = where  # (file, the statement's line in the rewritten function)
        self.fused = None
        self.refused = False  # fuse refused it once: Python's from then on
        self.python = None

    def values(self) -> ast.Dict:
        """The call's argument: ``{name: value}`` per argument, a slice evaluated as written."""
        keys, values = [], []
        for name in self.arguments:
            keys.append(ast.Constant(name))
            values.append(self.lifted.get(name) or ast.Name(name, ast.Load()))
        return ast.Dict(keys, values)

    def _python(self, values: dict):
        if self.python is None:
            lifted = {code: name for name, code in ((n, ast.unparse(c))
                                                    for n, c in self.lifted.items())}

            class Unlift(ast.NodeTransformer):  # the slices read from the call's values
                def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
                    name = lifted.get(ast.unparse(node))
                    return (ast.copy_location(ast.Name(name, ast.Load()), node) if name
                            else self.generic_visit(node))

            tree = ast.Expression(Unlift().visit(copy.deepcopy(self.original)))
            self.python = compile(ast.fix_missing_locations(tree), self.where[0], "eval")
        return eval(self.python, {"np": np, "numpy": np}, values)

    def _fused(self, values: dict, out):
        """fuse's value (into ``out`` where it has its shape and dtype), or None where fuse
        does not take these values."""
        if self.refused or not all(isinstance(v, _FUSABLE) for v in values.values()):
            return None
        from .api import fuse

        try:
            if self.fused is None:
                self.fused = fuse(self.code)
            if out is not None:
                try:  # straight into the target, where it has the result's shape and dtype
                    return self.fused(**values, out=out)
                except (TypeError, ValueError):
                    pass  # another shape (broadcast) or dtype: computed, then cast
            return self.fused(**values)
        except (FuseError, TypeError, ValueError):
            self.refused = True
            return None

    def value(self, values: dict, out=None):
        """The expression's value; computed into ``out`` when given and its shape and dtype
        allow (then ``out`` is returned)."""
        result = self._fused(values, out)
        return self._python(values) if result is None else result

    def assign(self, values: dict, base, index) -> None:
        """``base[index] = expr``: into ``base[index]`` where that is a view, else by
        ``base``'s own assignment (a fancy index, an element, a container's item)."""
        view = base[index] if isinstance(base, np.ndarray) and _basic(index) else None
        if isinstance(view, np.ndarray):
            _into(view, self.value(values, out=view), "unsafe")
        else:
            base[index] = self.value(values)

    def update(self, values: dict, current):
        """``x op= expr`` where ``current`` is x's value: into it where it is an array (its
        other references see the update, as with NumPy's operator), else the new value."""
        if not isinstance(current, np.ndarray):
            return self.value(values)
        result = self.value(values, out=current)
        if result is not current:
            if np.shape(result) != current.shape:
                raise ValueError(f"non-broadcastable output operand with shape "
                                 f"{current.shape} doesn't match the broadcast shape "
                                 f"{np.shape(result)}")
            _into(current, result, "same_kind")
        return current

    def update_item(self, values: dict, base, index) -> None:
        """``base[index] op= expr``: as Python, ``base[index] = base[index] op expr`` with the
        item updated in place where it is an array (a view then needs no store)."""
        item = base[index]
        new = self.update(values, item)
        if not (new is item and isinstance(base, np.ndarray) and _basic(index)):
            base[index] = new


def _basic(index) -> bool:
    """Whether ``index`` selects a view (integers, slices, ``...``, ``None``)."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, np.integer, slice)) or i is Ellipsis or i is None
               for i in parts) and not any(isinstance(i, bool) for i in parts)


def _into(out: np.ndarray, result, casting: str) -> np.ndarray:
    if result is not out:
        np.copyto(out, result, casting=casting)
    return out


class Statements:
    """``func`` rewritten so that each of its array statements runs fused (see the module
    notes); callable as ``func``.

    Raises
    ------
    FuseError
        Where it cannot be rewritten (no source of its own, a closure, a class inside it, a
        name its class mangles).
    """

    def __init__(self, func: Callable):
        node = _function(func)
        if node is None:
            raise FuseError(f"fuse: {func!r} has no source of its own, which running it "
                            "statement by statement needs")
        why = _why_not(node, func)
        if why is not None:
            raise FuseError(f"fuse: {func.__qualname__} cannot run statement by statement: {why}")
        self.statements: list[_Statement] = _Table()
        filename = inspect.getsourcefile(func) or "<fused>"
        offset = func.__code__.co_firstlineno - 1
        node.decorator_list = []
        ast.increment_lineno(node, offset)  # the file's lines, in tracebacks too
        if not _binds(node, _NUMPY):  # a local `np` is not NumPy: every statement is Python's
            local = {n.id for n in ast.walk(node)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            local |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            node = _Rewrite(self, filename, local).visit(node)
        outer = ast.FunctionDef(
            name="__chokepoint_outer", args=ast.arguments(
                posonlyargs=[], args=[ast.arg(_TABLE)], vararg=None,
                kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
            body=[node, ast.Return(ast.Name(node.name, ast.Load()))], decorator_list=[],
            returns=None, type_comment=None)
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


class _Table(list):
    """The statements of a rewritten function, by position; ``slice`` is the builtin."""

    slice = slice


def _table() -> ast.Name:
    """The rewritten function's name for its statements (a new node at each place: a node
    shared by two places has its line numbers shifted twice)."""
    return ast.Name(_TABLE, ast.Load())


def _load(node: ast.expr) -> ast.expr:
    """``node`` (a part of a target) as an expression that reads it, at its place."""
    copied = copy.deepcopy(node)
    for sub in ast.walk(copied):
        if hasattr(sub, "ctx"):
            sub.ctx = ast.Load()
    return copied


def _index(node: ast.expr) -> ast.expr:
    """A subscript's index as a value: its slices made by ``slice()`` (the statements' table
    holds it, so that a name ``slice`` of the user's shadows nothing)."""
    if isinstance(node, ast.Tuple):
        return ast.copy_location(ast.Tuple([_index(e) for e in node.elts], ast.Load()), node)
    if isinstance(node, ast.Slice):
        parts = [_load(p) if p is not None else ast.Constant(None)
                 for p in (node.lower, node.upper, node.step)]
        return ast.copy_location(
            ast.Call(ast.Attribute(_table(), "slice", ast.Load()), parts, []), node)
    return _load(node)


class _Rewrite(ast.NodeTransformer):
    """Each array statement as a call of its :class:`_Statement`: ``t = S[k].value(values)``,
    ``S[k].assign(values, base, index)``, ``x = S[k].update(values, x)``,
    ``S[k].update_item(values, base, index)``, ``return S[k].value(values)``."""

    def __init__(self, owner: Statements, filename: str, local: set[str]):
        self.owner = owner
        self.filename = filename
        self.local = local
        self.top = None

    def _call(self, method: str, expr: ast.expr, node: ast.stmt, *extra: ast.expr) -> ast.Call:
        statement = _Statement(expr, (self.filename, node.lineno))
        self.owner.statements.append(statement)
        k = len(self.owner.statements) - 1
        run = ast.Attribute(ast.Subscript(_table(), ast.Constant(k), ast.Load()), method,
                            ast.Load())
        return ast.copy_location(ast.Call(run, [statement.values(), *extra], []), node)

    def _target(self, target: ast.expr) -> bool:
        """A subscript target whose base and index evaluate without side effects (names,
        constants, slices), so that evaluating them after the value changes nothing."""
        return (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and basic_index(target.slice))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if self.top is not None:
            return node  # a nested function stays as written
        self.top = node
        self.generic_visit(node)
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if len(node.targets) != 1 or not _is_expression(node.value, self.local):
            return node
        target = node.targets[0]
        if isinstance(target, ast.Name):
            value = self._call("value", node.value, node)
            return ast.copy_location(ast.Assign([target], value), node)
        if self._target(target):
            call = self._call("assign", node.value, node, _load(target.value),
                              _index(target.slice))
            return ast.copy_location(ast.Expr(call), node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        target = node.target
        if not (_is_expression(node.value, self.local)
                or isinstance(node.value, (ast.Name, ast.Constant))):
            return node
        if isinstance(node.value, ast.Name) and node.value.id in _BUILTINS \
                and node.value.id in self.local:
            return node
        if self._target(target):
            load = ast.Subscript(_load(target.value), _load(target.slice), ast.Load())
            expr = ast.copy_location(ast.BinOp(load, node.op, node.value), node)
            call = self._call("update_item", expr, node, _load(target.value),
                              _index(target.slice))
            return ast.copy_location(ast.Expr(call), node)
        if not isinstance(target, ast.Name) or (target.id in _BUILTINS
                                                 and target.id in self.local):
            return node
        expr = ast.copy_location(ast.BinOp(ast.Name(target.id, ast.Load()), node.op,
                                           node.value), node)
        call = self._call("update", expr, node, ast.Name(target.id, ast.Load()))
        return ast.copy_location(ast.Assign([ast.Name(target.id, ast.Store())], call), node)

    def visit_Return(self, node: ast.Return) -> ast.AST:
        if node.value is None or not _is_expression(node.value, self.local):
            return node
        return ast.copy_location(ast.Return(self._call("value", node.value, node)), node)
