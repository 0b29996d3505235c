"""A line that calls the user's own functions, replayed as its own work.

The callee's lines are measured on their own (they are rows of the report), so a replay of
``g = (sigmoid(X[i] @ w) - y[i]) * X[i]`` must not time ``sigmoid`` again. The callee runs once,
on copies: a *sandboxed* copy of the function, whose globals are copies of those it reads
(:func:`~chokepoint.measure.statements.protected_copy`; the user functions among them
sandboxed alike), so that neither its arrays nor its random generators change. What each call
returned then stands in for the call in every replay (:func:`returning`): the line's own work
(``X[i] @ w``, the subtraction, the product, the calls themselves) is what is timed.

Only calls by name (``sigmoid(z)``, not ``self.forward(x)``) of functions whose code has no
effect besides computing (:func:`~.replay.side_effect`, :func:`~.replay.refused_call`) and
reaches nothing of the user's through what it shares (:func:`_shared`: another module, a class
of the user's, a bound method) stand in; their arguments are copied for the one run, and what
they return is copied. A line that passes the function as a value (``map(f, xs)``) is not
replayed.
"""

from __future__ import annotations

import ast
import builtins
import dis
import functools
import inspect
import itertools
import textwrap
import types
from collections.abc import Callable

import numpy as np

from ..measure.statements import protected_copy
from ..usercode import user_file

__all__ = ["MAX_RESULTS", "SAFE_MODULES", "SANDBOX_BYTES", "CalleeError", "called_functions",
           "recording", "returning", "sandboxed"]


#: the most bytes of arrays a sandbox copies from a function's globals
SANDBOX_BYTES = 256 * 2**20


class CalleeError(ValueError):
    """A user's function cannot stand in by its results (why is the message)."""


def _users(value: object, include: tuple[str, ...]) -> types.FunctionType | None:
    fn = value if isinstance(value, types.FunctionType) else None
    return fn if fn is not None and user_file(fn.__code__.co_filename, include) else None


def called_functions(tree: ast.AST, resolve: Callable[[ast.expr], object],
                     include: tuple[str, ...] = ()) -> dict[str, types.FunctionType]:
    """The user's functions ``tree`` calls by name (``resolve`` says what a name is), each
    only ever called there: the name read as anything else (``map(f, xs)``) raises
    CalleeError."""
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found: dict[str, types.FunctionType] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name):
            continue
        fn = _users(resolve(node), include)
        if fn is None:
            continue
        if id(node) not in calls:
            raise CalleeError(f"it passes your function {node.id}() as a value")
        found[node.id] = fn
    return found


def _effects(fn: types.FunctionType, include: tuple[str, ...]) -> str | None:
    """What ``fn``'s code does besides computing, as a predicate (None: nothing), judged as a
    line's own syntax and calls are, but changing a container (a copy, in a sandbox)."""
    from .replay import refused_call, side_effect  # replay imports this module

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return "has no source to read"
    body = tree.body[0].body if tree.body and isinstance(
        tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else tree.body
    module = ast.Module(body=body, type_ignores=[])
    what = side_effect(module, sandbox=True)
    if what is not None:
        return f"has effects besides computing ({what})"
    why = refused_call(module, {}, fn.__globals__, include, sandbox=True)
    return None if why is None else why.removeprefix("it ")


#: the modules a sandboxed function may read: their functions compute (NumPy's files are
#: judged by the line's own rules, ``np.save``); any other module's objects are the user's
SAFE_MODULES = frozenset({"numpy", "math", "builtins"})


def _globals_read(code: types.CodeType) -> set[str]:
    """The global names ``code`` (and the code nested in it) loads or stores."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _globals_read(const)
    return names


def _array_bytes(value: object) -> int:
    """The bytes of the arrays ``value`` holds: itself, or one level into a container or an
    object's attributes (what a sandbox's copy of it costs, roughly)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    items = (value.values() if isinstance(value, dict) else value
             if isinstance(value, (list, tuple, set, frozenset))
             else vars(value).values() if hasattr(value, "__dict__")
             and not isinstance(value, (types.ModuleType, type)) else ())
    return sum(v.nbytes for v in items if isinstance(v, np.ndarray))


def _shared(value: object) -> str | None:
    """Why a global's value can be neither shared with a sandbox nor copied into it (None:
    it can): a module other than NumPy's or ``math`` (its objects are the user's), a class of
    the user's (its attributes), a method bound to an object (``push = stack.append``)."""
    if isinstance(value, types.ModuleType):
        root = value.__name__.split(".")[0]
        return None if root in SAFE_MODULES else f"the module {value.__name__}"
    if isinstance(value, type):
        root = (value.__module__ or "").split(".")[0]
        return None if root in SAFE_MODULES else f"the class {value.__name__}"
    owner = getattr(value, "__self__", None)
    if isinstance(value, (types.MethodType, functools.partial)) or (
            isinstance(value, types.BuiltinMethodType) and owner is not None
            and not isinstance(owner, types.ModuleType)):
        return "a method or partial kept in a global (its object is not copied)"
    return None


def sandboxed(fn: types.FunctionType, include: tuple[str, ...] = (),
              _made: dict | None = None) -> types.FunctionType:
    """A copy of the user's function ``fn`` that changes nothing of the user's: its globals
    are copies of those it reads (the user's functions among them sandboxed alike, sharing
    one copy of their module's globals; NumPy's and ``math``'s modules, classes and functions
    shared), its defaults copied.

    Raises
    ------
    CalleeError
        Where it (or a user function it calls) has effects besides computing, closes over
        variables, reads another module, a class of the user's or a bound method, or more
        than :data:`SANDBOX_BYTES` of arrays, or a global that cannot be copied.
    """
    # id(function) -> its copy; id(globals) -> their copy; "bytes": the arrays copied so far
    made = {} if _made is None else _made
    if id(fn) in made:
        return made[id(fn)]
    why = _effects(fn, include)
    if why is not None:
        raise CalleeError(f"your function {fn.__name__}() {why}")
    if fn.__closure__:
        raise CalleeError(f"your function {fn.__name__}() reads variables of the function "
                          "around it")
    owner = fn.__globals__
    ns = made.setdefault(id(owner), {"__builtins__": owner.get("__builtins__", builtins),
                                     "__name__": owner.get("__name__")})
    try:
        copy = types.FunctionType(fn.__code__, ns, fn.__name__,
                                  protected_copy("defaults", fn.__defaults__), None)
        copy.__kwdefaults__ = protected_copy("defaults", fn.__kwdefaults__)
        made[id(fn)] = copy
        for name in sorted(_globals_read(fn.__code__)):
            if name in ns or name not in owner:
                continue  # copied already, or a builtin
            value = owner[name]
            inner = _users(value, include)
            if inner is not None:
                ns[name] = sandboxed(inner, include, made)
                continue
            refused = _shared(value)
            if refused is not None:
                raise CalleeError(f"your function {fn.__name__}() reads {name}, {refused}")
            made["bytes"] = made.get("bytes", 0) + _array_bytes(value)
            if made["bytes"] > SANDBOX_BYTES:
                raise CalleeError(f"your function {fn.__name__}() reads more than "
                                  f"{SANDBOX_BYTES >> 20} MiB of global arrays, which a "
                                  "sandbox would copy")
            ns[name] = protected_copy(name, value)
    except TypeError as exc:  # protected_copy's message says what could not be copied
        raise CalleeError(f"your function {fn.__name__}() reads a global that cannot be "
                          f"copied ({exc})") from None
    return copy


#: results a stand-in keeps at most (a comprehension calling the function per element)
MAX_RESULTS = 1_000_000


def recording(fn: Callable) -> tuple[Callable, list]:
    """``fn`` called on copies of its arguments (what the line hands it may be the user's own
    objects, ``f(helpers.cache)``), and the list it appends each call's result to.

    Raises
    ------
    CalleeError
        Past :data:`MAX_RESULTS` calls.
    """
    results: list = []

    def recorded(*args, **kwargs):
        if len(results) >= MAX_RESULTS:
            raise CalleeError(f"your function {fn.__name__}() is called more than "
                              f"{MAX_RESULTS} times by one run of the line")
        value = fn(*(protected_copy("argument", a) for a in args),
                   **{k: protected_copy(k, v) for k, v in kwargs.items()})
        results.append(value)
        return value

    return recorded, results


def _owned(value: object) -> object:
    """``value`` with its arrays (itself, or in a tuple or list) copied and read-only."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.flags.writeable = False
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(_owned(v) for v in value)
    return value


def returning(name: str, results: list) -> Callable:
    """A stand-in for the user's function ``name``: each call returns the next of
    ``results``, in a cycle (a replay calls it in the order the recording did). Arrays
    (alone, or in a tuple or list) are returned as read-only copies: a line writing into one
    fails, and is not replayed, rather than change what later replays are handed.

    Raises
    ------
    CalleeError
        Where a result is an iterator (the first replay would spend it).
    """
    if any(hasattr(value, "__next__") for value in results):
        raise CalleeError(f"your function {name}() returned an iterator, which the first "
                          "replay would spend")
    following = itertools.cycle([_owned(value) for value in results]).__next__

    def returned(*args, **kwargs):
        return following()

    returned.__name__ = returned.__qualname__ = name
    return returned
