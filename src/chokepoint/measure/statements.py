"""Running user statements: one parsed Statement, setup namespaces, inputs and mutation.

Shared by race, explain and the magics. A :class:`Statement` is parsed once (with :mod:`ast`, so
comments, line breaks and a trailing ``# note`` are fine) and carries its source, its mode
(``"eval"`` for one expression, ``"exec"`` otherwise), its code object, the names it reads, and
where it came from (``filename`` and ``first_line``, so locations can be ``file.py:LINE``).

A setup runs in a fresh namespace with NumPy's and Python's global random generators seeded (so
``np.random.randn`` gives every run the same data) and then restored, so the user's own random
state is untouched. Values taken from a user's namespace (IPython's) are copied when the code
names them, arrays, tensors and containers or objects holding them alike, so nothing the user
owns is ever modified.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import random
import re
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

__all__ = ["IDENTIFIER", "SEED", "Statement", "arrays_in", "as_statement", "bind_callable",
           "compile_statement", "mutated", "names_used", "preserved_rng", "protected_copy",
           "run_setup", "same_array"]

SEED = 20190301  # the month the origin question was asked
#: a Python identifier: the names that code and a setup may mention (whatever they pass to
#: a worker, or copy from a base namespace, are the base's values of those names)
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_FUNCTION_NAME = "__chokepoint_statement__"


@dataclass(frozen=True)
class Statement:
    """A user statement, parsed once.

    Build it with :meth:`parse`. ``mode`` is ``"eval"`` when the source is one expression (its
    value is the statement's value) and ``"exec"`` otherwise (the value is that of a final
    expression statement, as in an IPython cell, else None).

    Attributes
    ----------
    source : str
        The code, dedented, without surrounding blank lines.
    mode : str
        ``"eval"`` or ``"exec"``.
    code : types.CodeType
        ``source`` compiled in ``mode`` with ``filename``; its line numbers are the file's
        (``first_line`` is the number of the source's first line).
    names : tuple of str
        Names the code reads or writes, and identifiers inside its string constants
        (``ne.evaluate('X >= 0')`` reads X), sorted.
    filename : str
        Where the source came from (``"<statement>"`` for a statement typed by the user).
    first_line : int
        Line number of the source's first line in ``filename``.
    tree : ast.Module
        The parsed code (line numbers as in ``code``).
    """

    source: str
    mode: str
    code: types.CodeType = field(repr=False)
    names: tuple[str, ...] = field(repr=False)
    filename: str = "<statement>"
    first_line: int = 1
    tree: ast.Module = field(repr=False, compare=False, default=None)

    @classmethod
    def parse(cls, source: str, *, filename: str = "<statement>",
              first_line: int = 1) -> Statement:
        """Parse ``source``.

        Raises
        ------
        TypeError
            When ``source`` is not a string.
        ValueError
            When it is empty or only whitespace and comments.
        SyntaxError
            When it does not parse, or is too deeply nested for Python's compiler (a
            MemoryError or RecursionError from the parser becomes a SyntaxError saying so).
        """
        if not isinstance(source, str):
            raise TypeError(f"a statement must be a string, got {type(source).__name__}")
        lines = source.expandtabs().splitlines()
        while lines and not lines[0].strip():
            lines.pop(0)
            first_line += 1
        while lines and not lines[-1].strip():
            lines.pop()
        text = textwrap.dedent("\n".join(line.rstrip() for line in lines))
        with _nesting_guard(text):
            tree = _parsed(text, filename, first_line)
        if not tree.body:
            raise ValueError("empty statement: give code to run (it is only whitespace or "
                             "comments)")
        # compiling the tree (not the text) walks it recursively: a statement the parser took
        # can still be too deep for that (1000 unary minuses)
        with _nesting_guard(text):
            if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
                mode = "eval"
                code = compile(ast.Expression(tree.body[0].value), filename, "eval")
            else:
                mode = "exec"
                code = compile(tree, filename, "exec")
        return cls(text, mode, code, _names_in(tree), filename, first_line, tree)

    @property
    def is_expression(self) -> bool:
        """Whether the statement is one expression (``mode == "eval"``)."""
        return self.mode == "eval"

    def location(self, lineno: int | None = None) -> str:
        """``"filename:LINE"`` of line ``lineno`` (the first line by default)."""
        return f"{self.filename}:{self.first_line if lineno is None else lineno}"

    def function(self, namespace: dict) -> Callable[[], object]:
        """A no-argument function running the statement with ``namespace`` as its globals and
        returning its value, as :mod:`timeit` compiles its statement (names it assigns are the
        function's locals; the namespace is not changed)."""
        with _nesting_guard(self.source):
            # a fresh parse, not a deep copy of self.tree: copy.deepcopy recurses several
            # frames per level and fails on a 300-term sum that the compiler takes
            tree = _parsed(self.source, self.filename, self.first_line)
            code = compile(_function_module(tree, _rebound(tree, namespace)),
                           self.filename, "exec")
        scope: dict = {}
        exec(code, namespace, scope)
        return scope[_FUNCTION_NAME]

    def run(self, namespace: dict) -> object:
        """Run the statement in ``namespace`` (assignments land there); its value."""
        if self.mode == "eval":
            return eval(self.code, namespace)
        body = self.tree.body
        if isinstance(body[-1], ast.Expr):
            with _nesting_guard(self.source):
                head = compile(ast.Module(body=body[:-1], type_ignores=[]), self.filename,
                               "exec")
                tail = compile(ast.Expression(body[-1].value), self.filename, "eval")
            exec(head, namespace)
            return eval(tail, namespace)
        exec(self.code, namespace)
        return None

    def __str__(self) -> str:
        return self.source


@contextlib.contextmanager
def _nesting_guard(text: str) -> Iterator[None]:
    """A MemoryError or RecursionError of Python's parser or compiler as a SyntaxError."""
    try:
        yield
    except (MemoryError, RecursionError) as exc:
        raise SyntaxError(f"the statement is too deeply nested for Python's compiler "
                          f"({type(exc).__name__}); {len(text)} characters") from None


def _parsed(text: str, filename: str, first_line: int) -> ast.Module:
    """``text`` parsed, its line numbers counted from ``first_line`` (those of ``filename``)."""
    tree = ast.parse(text, filename=filename, mode="exec")
    if first_line != 1:
        ast.increment_lineno(tree, first_line - 1)
    return tree


def _rebound(tree: ast.Module, namespace: dict) -> list[str]:
    """Names the code assigns that the namespace already has (``x = x * 2``): in a function
    body they would be locals read before assignment."""
    stored = {node.id for node in ast.walk(tree)
              if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))}
    stored.update(node.target.id for node in ast.walk(tree)
                  if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name))
    return sorted(n for n in stored if n in namespace and n.isidentifier())


def _function_module(tree: ast.Module, rebound: list[str] = ()) -> ast.Module:
    """A module defining a function whose body is ``tree``'s, returning the value of a final
    expression (else None). ``tree``'s nodes are reused, not copied: pass a tree of its own.
    Names in ``rebound`` are parameters that default to the namespace's values, so the body
    starts from them as a cell would."""
    body = list(tree.body)
    last = body[-1]
    if isinstance(last, ast.Expr):
        body[-1] = ast.copy_location(ast.Return(last.value), last)
    else:
        body.append(ast.copy_location(ast.Return(ast.Constant(None)), last))
    fdef = ast.FunctionDef(name=_FUNCTION_NAME, args=ast.arguments(
        posonlyargs=[], args=[], kwonlyargs=[ast.arg(arg=n) for n in rebound],
        kw_defaults=[ast.Name(id=n, ctx=ast.Load()) for n in rebound], defaults=[]),
        body=body, decorator_list=[], returns=None,
        **({"type_params": []} if sys.version_info >= (3, 12) else {}))
    ast.copy_location(fdef, tree.body[0])
    return ast.fix_missing_locations(ast.Module(body=[fdef], type_ignores=[]))


def _names_in(tree: ast.AST) -> tuple[str, ...]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.update(IDENTIFIER.findall(node.value))
    return tuple(sorted(names))


def as_statement(statement: str | Statement) -> Statement:
    """``statement`` parsed, unless it is a Statement already."""
    return statement if isinstance(statement, Statement) else Statement.parse(statement)


def arrays_in(namespace: dict, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The NumPy arrays of ``namespace`` (those among ``names`` when given)."""
    keys = namespace if names is None else [n for n in names if n in namespace]
    return {k: namespace[k] for k in keys if isinstance(namespace[k], np.ndarray)}


def names_used(statement: str | Statement) -> list[str]:
    """Names a statement may read (:attr:`Statement.names`)."""
    return list(as_statement(statement).names)


def compile_statement(statement: str | Statement, namespace: dict) -> Callable[[], object]:
    """A no-argument function running ``statement`` in ``namespace`` and returning its value
    (:meth:`Statement.function`)."""
    return as_statement(statement).function(namespace)


def bind_callable(fn: Callable, namespace: dict) -> Callable[[], object]:
    """``fn`` called with the namespace's values for the parameters it names."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    kwargs = {k: namespace[k] for k in params if k in namespace}
    return lambda: fn(**kwargs)


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Restore Python's and NumPy's global random states on exit (the user's, in IPython)."""
    py_state = random.getstate()
    np_state = np.random.get_state()  # noqa: NPY002 - the legacy global RNG is what we protect
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)  # noqa: NPY002


_SHARED_TYPES = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                 types.MethodType, type, int, float, complex, str, bytes, bool, type(None))


def protected_copy(name: str, value):
    """A copy of a user's value that a statement may change without changing the original.

    Arrays are copied, torch tensors cloned, and containers or objects (which may hold arrays,
    ``D['X']``, ``b.arr``) deep-copied. Modules, functions, classes and immutable scalars are
    shared.

    Raises
    ------
    TypeError
        When the value cannot be copied; the user's object is not touched.
    """
    if isinstance(value, _SHARED_TYPES):
        return value
    if isinstance(value, np.ndarray):
        return value.copy()
    try:
        return copy.deepcopy(value)
    except Exception as exc:
        raise TypeError(
            f"cannot copy your variable {name!r} ({type(value).__name__}: {exc}); chokepoint "
            "copies everything a statement can reach so that your data is never modified. "
            "Make it in the setup (-s) instead") from None


def run_setup(setup, n: int | None = None, base: dict | None = None,
              code: Iterable[str | Statement] = ()) -> dict:
    """A fresh namespace after ``setup`` (a string, or a callable returning a dict).

    ``np`` and ``chokepoint`` are there already, and ``n`` when given. NumPy's and Python's
    global RNGs are seeded for the setup and restored afterwards. Values of ``base`` that
    ``setup`` or ``code`` name are copied (:func:`protected_copy`).
    """
    texts = [c.source if isinstance(c, Statement) else c for c in code]
    named = set(IDENTIFIER.findall(" ".join([*texts, setup if isinstance(setup, str) else ""])))
    namespace = {k: protected_copy(k, v) if k in named else v
                 for k, v in (base or {}).items()}
    namespace.setdefault("np", np)
    namespace.setdefault("chokepoint", sys.modules["chokepoint"])
    if n is not None:
        namespace["n"] = n
    if setup is None or setup == "":
        return namespace
    with preserved_rng():
        random.seed(SEED)
        np.random.seed(SEED)  # noqa: NPY002 - setups use the legacy global RNG; seed it
        if callable(setup):
            made = setup(n) if n is not None else setup()
            if made is not None:
                if not isinstance(made, dict):
                    raise TypeError("a callable setup must return a dict (the namespace) or "
                                    "None")
                namespace.update(made)
            return namespace
        exec(compile(setup, "<setup>", "exec"), namespace)
    return namespace


def same_array(a, b: np.ndarray) -> bool:
    """``a`` has ``b``'s shape and values (NaN equal to NaN)."""
    if a is None or np.asarray(a).shape != b.shape:
        return False
    # the plain comparison first: one pass, no NaN masks (most arrays have no NaN)
    return bool(np.array_equal(a, b)
                or (b.dtype.kind in "fc" and np.array_equal(a, b, equal_nan=True)))


def mutated(before: dict[str, np.ndarray], namespace: dict) -> list[str]:
    """Names whose arrays in ``namespace`` differ from ``before``."""
    return [k for k, v in before.items() if not same_array(namespace.get(k), v)]
