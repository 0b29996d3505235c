"""Running user statements: setup namespaces, compiled statements, inputs and mutation.

Shared by race and explain. A setup runs in a fresh namespace with NumPy's and Python's global
random generators seeded (so ``np.random.randn`` gives every run the same data); arrays taken
from a user's namespace (IPython's) are copied when the code names them, so nothing the user
owns is ever modified.
"""

from __future__ import annotations

import inspect
import random
import re
import sys
import textwrap
from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["SEED", "arrays_in", "bind_callable", "compile_statement", "mutated",
           "names_used", "run_setup", "same_array"]

SEED = 20190301  # the month the origin question was asked
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def arrays_in(namespace: dict, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The NumPy arrays of ``namespace`` (those among ``names`` when given)."""
    keys = namespace if names is None else [n for n in names if n in namespace]
    return {k: namespace[k] for k in keys if isinstance(namespace[k], np.ndarray)}


def names_used(statement: str) -> list[str]:
    """Names a statement may read: its code's names, and identifiers inside its string
    constants (``ne.evaluate('X >= 0')`` reads X)."""
    code = compile(statement, "<statement>", "exec")
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        for const in c.co_consts:
            if hasattr(const, "co_names"):
                stack.append(const)
            elif isinstance(const, str):
                names.update(_IDENTIFIER.findall(const))
    return sorted(names)


def compile_statement(statement: str, namespace: dict) -> Callable[[], object]:
    """A no-argument function running ``statement`` in ``namespace`` and returning its value
    (None for a statement that is not an expression), as timeit compiles its statement."""
    try:
        compile(statement, "<statement>", "eval")
        body = f"    return ({statement})"
    except SyntaxError:
        compile(statement, "<statement>", "exec")  # raises a clear SyntaxError
        body = textwrap.indent(statement, "    ") + "\n    return None"
    exec(compile(f"def __chokepoint_statement__():\n{body}\n", "<statement>", "exec"),
         namespace)
    return namespace.pop("__chokepoint_statement__")


def bind_callable(fn: Callable, namespace: dict) -> Callable[[], object]:
    """``fn`` called with the namespace's values for the parameters it names."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    kwargs = {k: namespace[k] for k in params if k in namespace}
    return lambda: fn(**kwargs)


def run_setup(setup, n: int | None = None, base: dict | None = None,
              code: Iterable[str] = ()) -> dict:
    """A fresh namespace after ``setup`` (a string, or a callable returning a dict).

    ``np`` and ``chokepoint`` are there already, and ``n`` when given. NumPy's and Python's
    global RNGs are seeded first. Arrays of ``base`` that ``setup`` or ``code`` name are copied.
    """
    random.seed(SEED)
    np.random.seed(SEED)  # noqa: NPY002 - setups use the legacy global RNG; seed it
    named = set(_IDENTIFIER.findall(" ".join([*code, setup if isinstance(setup, str) else ""])))
    namespace = {k: v.copy() if isinstance(v, np.ndarray) and k in named else v
                 for k, v in (base or {}).items()}
    namespace.setdefault("np", np)
    namespace.setdefault("chokepoint", sys.modules["chokepoint"])
    if n is not None:
        namespace["n"] = n
    if setup is None or setup == "":
        return namespace
    if callable(setup):
        made = setup(n) if n is not None else setup()
        if made is not None:
            if not isinstance(made, dict):
                raise TypeError("a callable setup must return a dict (the namespace) or None")
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
