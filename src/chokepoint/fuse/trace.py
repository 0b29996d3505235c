"""Trace elementwise NumPy code into a graph of scalar operations with NumPy's dtypes.

The code runs once on :class:`Node` objects instead of arrays. Python operators, ufuncs (through
``__array_ufunc__``) and ``np.where`` / ``np.clip`` (through ``__array_function__``) add nodes;
identical operations on identical operands are shared (``np.arctan2(a, b)`` written twice is
computed once). Each node's loop dtypes come from NumPy itself (``ufunc.resolve_dtypes`` with
Python scalar types for Python scalars), so type promotion is NEP 50's by construction.

Reductions over all elements or one axis (``np.sum``, ``np.mean``, ``np.max``, ``np.min``,
``np.prod``, ``np.any``, ``np.all``, ``np.linalg.norm``'s 2-norm, and the array methods of the
same names, ``keepdims`` too) add a ``"reduce"`` node of the dtype NumPy's reduction gives,
usable by later elementwise work (``np.exp(x - x.max(axis=-1, keepdims=True))``). Anything
else that is not elementwise raises :class:`FuseError` naming the operation and the line of the
user's code that issued it.
"""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass, field

import numpy as np

__all__ = ["FuseError", "Graph", "Node", "topological", "trace"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))


class FuseError(TypeError):
    """The code cannot be fused into one elementwise kernel."""


#: ufunc name -> scalar expression on the loop-dtype operands {0}, {1}, ... (numba source).
UFUNCS: dict[str, str] = {
    "add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}",
    "divide": "{0} / {1}", "negative": "-{0}", "positive": "+{0}",
    "square": "{0} * {0}", "reciprocal": "{T}(1) / {0}",
    "greater": "{0} > {1}", "greater_equal": "{0} >= {1}", "less": "{0} < {1}",
    "less_equal": "{0} <= {1}", "equal": "{0} == {1}", "not_equal": "{0} != {1}",
    "maximum": "fmaximum({0}, {1})", "minimum": "fminimum({0}, {1})",
    "fmax": "np.fmax({0}, {1})", "fmin": "np.fmin({0}, {1})",
    "absolute": "abs({0})", "sqrt": "np.sqrt({0})", "cbrt": "np.cbrt({0})",
    "exp": "exp({0})", "exp2": "np.exp2({0})", "expm1": "expm1({0})",
    "log": "log({0})", "log2": "np.log2({0})", "log10": "np.log10({0})",
    "log1p": "log1p({0})",
    "sin": "np.sin({0})", "cos": "np.cos({0})", "tan": "np.tan({0})",
    "arcsin": "arcsin({0})", "arccos": "arccos({0})", "arctan": "arctan({0})",
    "sinh": "sinh({0})", "cosh": "cosh({0})", "tanh": "tanh({0})",
    "arcsinh": "np.arcsinh({0})", "arccosh": "np.arccosh({0})", "arctanh": "np.arctanh({0})",
    "arctan2": "arctan2({0}, {1})", "hypot": "np.hypot({0}, {1})",
    "power": "np.power({0}, {1})",
    "floor": "np.floor({0})", "ceil": "np.ceil({0})", "trunc": "np.trunc({0})",
    "rint": "np.rint({0})",
    "isnan": "np.isnan({0})", "isinf": "np.isinf({0})", "isfinite": "np.isfinite({0})",
    "signbit": "np.signbit({0})", "copysign": "np.copysign({0}, {1})",
    "logical_and": "({0} != 0) & ({1} != 0)", "logical_or": "({0} != 0) | ({1} != 0)",
    "logical_xor": "({0} != 0) ^ ({1} != 0)", "logical_not": "{0} == 0",
    "bitwise_and": "{0} & {1}", "bitwise_or": "{0} | {1}", "bitwise_xor": "{0} ^ {1}",
    "invert": "~{0}",
}
#: Functions whose values may differ from NumPy's own SIMD implementations by an ulp or so
#: (tests/fuse/test_ulp.py measures it): ``exp``, ``expm1``, ``log``, ``log1p``, ``tanh``,
#: ``sinh``, ``cosh``, ``arctan``, ``arcsin``, ``arccos`` and ``arctan2`` are the kernels'
#: vectorisable ones (:mod:`chokepoint.kernels.vecmath`, bound by name in :mod:`.codegen`),
#: ``sin``, ``cos`` and ``tan`` too where every argument of the call is in their range
#: (``codegen.GUARDED``), the others the platform's libm through numba.
TRANSCENDENTAL = frozenset({
    "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
    "arctan2", "hypot", "power"})
_WHY = {
    "matmul": "a matrix product", "vecdot": "a reduction", "matvec": "a matrix product",
    "vecmat": "a matrix product",
}
_METHOD_WHY = {"reduce": "a reduction", "accumulate": "a cumulative reduction",
               "reduceat": "a reduction", "outer": "an outer product", "at": "indexed updates"}

_FLOATING = (np.dtype(np.float32), np.dtype(np.float64))

#: reductions over all elements that fuse computes: name -> NumPy's function
REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
              "any": np.any, "all": np.all, "argmax": np.argmax, "argmin": np.argmin}
#: reductions NumPy computes from the fused values (no kernel of their own): the elementwise
#: chain is one pass into an array, then NumPy's reduction (its first-occurrence and NaN rules)
NUMPY_REDUCED = frozenset({"argmax", "argmin"})
#: NumPy's function for each reduction kind, the 2-norm of an argument too (``"norm"``: the
#: kind of a norm of an argument itself, which NumPy's BLAS dot computes; a norm of fused
#: values is the square root of their sum of squares)
NUMPY_REDUCTIONS = {**REDUCTIONS, "norm": np.linalg.norm}
_REDUCING = {**{f: name for name, f in REDUCTIONS.items()}, np.amax: "max", np.amin: "min"}


@dataclass(eq=False)
class Node:
    """One value of the traced code: an input, a scalar, or an operation's result.

    Attributes
    ----------
    op : str
        ``"input"``, ``"scalar"``, a ufunc name, ``"where"``, ``"clip"`` or ``"reduce"``
        (``value`` is ``(reduction, axis, keepdims)``, ``name`` is the argument its value is
        passed as to later stages).
    dtype : numpy.dtype or type
        The dtype, or ``int``/``float``/``bool`` for a Python (weak) scalar.
    args : tuple of Node
        Operands.
    loop : tuple of numpy.dtype
        The dtypes the operands are cast to before the operation (NumPy's loop).
    name : str
        Input name (``op == "input"``).
    value : object
        The value of a constant (``op == "scalar"``), else None.
    """

    op: str
    dtype: object
    args: tuple = ()
    loop: tuple = ()
    name: str = ""
    value: object = None
    graph: Graph | None = field(default=None, repr=False)
    shape_known: bool = True

    __array_priority__ = 1000

    @property
    def weak(self) -> bool:
        return isinstance(self.dtype, type)

    # -- NumPy protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        where = _where_from()
        if method != "__call__":
            why = _METHOD_WHY.get(method, "not elementwise")
            raise FuseError(f"np.{ufunc.__name__}.{method} ({why}) cannot be fused{where}")
        if kwargs:
            raise FuseError(f"np.{ufunc.__name__} with keyword arguments "
                            f"({', '.join(kwargs)}) cannot be fused{where}")
        return self._graph_of(inputs).ufunc(ufunc, inputs, where)

    def __array_function__(self, func, types, args, kwargs):
        where = _where_from()
        name = getattr(func, "__name__", repr(func))
        graph = self._graph_of(args)
        if func is np.where and len(args) == 3 and not kwargs:
            return graph.where(*args, where)
        if func is np.clip and not set(kwargs) - {"a_min", "a_max", "min", "max"}:
            bounds = list(args[1:])
            bounds += [kwargs.get(k) for k in ("a_min", "a_max", "min", "max")
                       if kwargs.get(k) is not None]
            if len(bounds) == 2:
                return graph.clip(args[0], *bounds, where)
        if func in _REDUCING or func is np.linalg.norm:
            kind = "norm" if func is np.linalg.norm else _REDUCING[func]
            return graph.reduce(kind, args[0], _reduction_args(kind, args[1:], kwargs, where),
                                where)
        if func is np.where:
            raise FuseError(f"np.where with {len(args)} argument(s) (it returns indices) "
                            f"cannot be fused{where}")
        raise FuseError(f"np.{name} is not elementwise and cannot be fused{where}")

    def _graph_of(self, values) -> Graph:
        return self.graph

    # -- what is not elementwise
    def __array__(self, *args, **kwargs):
        # a Python list of traced arrays (np.sum([a, b])) reaches no protocol above: NumPy
        # would make an object array of nodes and reduce it with their operators
        raise FuseError("a traced array turned into a NumPy array (a Python list of arrays, "
                        f"np.asarray, np.stack...) cannot be fused{_where_from()}")

    def __bool__(self):
        raise FuseError("a Python branch on array values (if/while/and/or/not on an array) "
                        f"cannot be fused{_where_from()}")

    def __getitem__(self, key):
        raise FuseError(f"indexing (x[{key!r}]) cannot be fused{_where_from()}")

    def __setitem__(self, key, value):
        raise FuseError(f"assignment to x[{key!r}] cannot be fused{_where_from()}")

    def __len__(self):
        raise FuseError(f"len() of an array cannot be fused{_where_from()}")

    def __iter__(self):
        raise FuseError(f"iterating over an array cannot be fused{_where_from()}")

    def __float__(self):
        raise FuseError(f"float() of an array cannot be fused{_where_from()}")

    __int__ = __index__ = __float__

    def _reduce_method(self, kind: str, *args, **kwargs):
        where = _where_from()
        return self.graph.reduce(kind, self, _reduction_args(kind, args, kwargs, where),
                                 where)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise FuseError(f"the array attribute or method .{name} cannot be fused{_where_from()}")

    def __hash__(self):
        return id(self)


def _binary(ufunc, reflected=False):
    def method(self, other):
        if reflected:
            return ufunc(other, self)
        return ufunc(self, other)
    return method


for _name, _ufunc in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.divide), ("pow", np.power), ("matmul", np.matmul),
                      ("floordiv", np.floor_divide), ("mod", np.remainder),
                      ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                      ("lshift", np.left_shift), ("rshift", np.right_shift)]:
    setattr(Node, f"__{_name}__", _binary(_ufunc))
    setattr(Node, f"__r{_name}__", _binary(_ufunc, reflected=True))
for _name, _ufunc in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)]:
    setattr(Node, f"__{_name}__", _binary(_ufunc))
for _name in REDUCTIONS:  # x.sum(), x.max(axis=1, keepdims=True), ...
    setattr(Node, _name, lambda self, *args, _kind=_name, **kwargs:
            self._reduce_method(_kind, *args, **kwargs))
Node.__neg__ = lambda self: np.negative(self)
Node.__pos__ = lambda self: np.positive(self)
Node.__abs__ = lambda self: np.absolute(self)
Node.__invert__ = lambda self: np.invert(self)
Node.__divmod__ = lambda self, other: np.divmod(self, other)


def _reduction_args(kind: str, args: tuple, kwargs: dict, where: str) -> tuple:
    """``(axis, keepdims)`` of a reduction's call; what fuse does not reduce yet (a tuple of
    axes, a dtype, ``out=``, a norm's ``ord``...) is refused, named."""
    name = "np.linalg.norm" if kind == "norm" else f"np.{kind}"
    kwargs = {k: v for k, v in kwargs.items() if v is not np._NoValue}
    # the positional arguments fuse reads: norm(x, ord, axis, keepdims), the others' (x, axis)
    positional = ("ord", "axis", "keepdims") if kind == "norm" else ("axis",)
    for key, value in zip(positional, args, strict=False):
        if key in kwargs:
            raise TypeError(f"{name} got {key} twice{where}")
        kwargs[key] = value
    args = args[len(positional):]
    axis, keepdims = kwargs.pop("axis", None), kwargs.pop("keepdims", False)
    given = [*(repr(a) for a in args if a is not None),
             *(f"{k}={v.name or 'an array' if isinstance(v, Node) else repr(v)}"
               for k, v in kwargs.items() if v is not None)]
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
        given.append(f"axis={axis!r}")
    if given:
        raise FuseError(f"{name} with {', '.join(given)} cannot be fused (fuse reduces over "
                        f"all elements or one axis, with keepdims){where}")
    return (None if axis is None else int(axis)), bool(keepdims)


def _where_from() -> str:
    """``" (at FILE:LINE: code)"`` for the innermost frame outside fuse and NumPy."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not (filename.startswith(_HERE) or filename.startswith(_NUMPY)):
            break
        frame = frame.f_back
    if frame is None:
        return ""
    name = frame.f_code.co_filename
    line = frame.f_lineno
    text = linecache.getline(name, line).strip() if not name.startswith("<") else ""
    if name.startswith("<fuse") and frame.f_globals.get("__fuse_source__"):
        text = frame.f_globals["__fuse_source__"].splitlines()[line - 1].strip()
    return f" (at {name}:{line}: {text})" if text else f" (at {name}:{line})"


def _sample(node_or_value):
    """What NumPy should see for dtype resolution: a Python type for weak scalars."""
    if isinstance(node_or_value, Node):
        return node_or_value.dtype
    if isinstance(node_or_value, bool):  # NumPy treats a Python bool as np.bool_
        return np.dtype(bool)
    if isinstance(node_or_value, (int, float)) and not isinstance(node_or_value, np.generic):
        return type(node_or_value)
    if isinstance(node_or_value, complex) or np.iscomplexobj(node_or_value):
        raise FuseError("complex values are not supported by fuse")
    return np.asarray(node_or_value).dtype


def _dummy(sample):
    if isinstance(sample, type):
        return sample(1)
    return np.ones(1, sample)


class Graph:
    """The nodes of one trace, shared by identity of (operation, operands)."""

    def __init__(self):
        self.nodes: list[Node] = []
        self._seen: dict[tuple, Node] = {}
        self.inputs: list[Node] = []

    def add(self, op, dtype, args=(), loop=(), **extra) -> Node:
        key = (op, tuple(id(a) for a in args), tuple(loop), extra.get("name"),
               _const_key(extra.get("value")))
        if op != "input" and key in self._seen:
            return self._seen[key]
        node = Node(op, dtype, tuple(args), tuple(loop), graph=self, **extra)
        self._seen[key] = node
        self.nodes.append(node)
        if op == "input":
            self.inputs.append(node)
        return node

    def operand(self, value, where: str) -> Node:
        if isinstance(value, Node):
            return value
        if isinstance(value, (list, tuple)):
            raise FuseError(f"a Python {type(value).__name__} operand cannot be fused{where} "
                            "(pass it as an array input)")
        sample = _sample(value)
        if isinstance(value, np.ndarray) and value.ndim > 0:
            raise FuseError(f"an array captured from outside the inputs ({value.shape}) cannot "
                            f"be fused{where}; pass it as an input")
        if not isinstance(sample, type):
            value = np.asarray(value)[()]
        return self.add("scalar", sample, value=value)

    def ufunc(self, ufunc, inputs, where: str) -> Node:
        name = ufunc.__name__
        if name == "true_divide":
            name = "divide"
        if name not in UFUNCS:
            why = _WHY.get(name, "not supported by fuse")
            raise FuseError(f"np.{name} ({why}) cannot be fused{where}")
        operands = [self.operand(v, where) for v in inputs]
        if name == "power" and operands[1].op == "scalar" and operands[1].value == 2:
            # NumPy computes x**2 as square(x) too (bitwise equal: tests check it)
            return self.ufunc(np.square, operands[:1], where)
        samples = [o.dtype for o in operands]
        if all(o.weak for o in operands):  # Python arithmetic on Python scalars stays weak
            value = ufunc(*[_dummy(s) for s in samples])
            kind = type(value.item()) if isinstance(value, np.generic) else type(value)
            loop = [np.dtype(np.float64 if s is float else np.int64 if s is int else bool)
                    for s in samples]
            return self.add(name, kind, operands, loop)
        try:
            loop = ufunc.resolve_dtypes((*samples, None))
        except Exception as exc:  # NumPy's own words
            raise type(exc)(f"{exc}{where}") from None
        for d in loop:
            _check_dtype(d, where)
        return self.add(name, loop[-1], operands, loop[:-1])

    def where(self, cond, x, y, where: str) -> Node:
        c, a, b = (self.operand(v, where) for v in (cond, x, y))
        out = np.result_type(*[_dummy(s) if isinstance(s, type) else s
                               for s in (a.dtype, b.dtype)])
        if a.weak and b.weak:
            out = np.dtype(np.float64 if float in (a.dtype, b.dtype) else np.int64)
        _check_dtype(out, where)
        return self.add("where", out, (c, a, b), (np.dtype(bool), out, out))

    def reduce(self, kind: str, x, how: tuple, where: str) -> Node:
        """A reduction of ``x`` (``kind``: a :data:`REDUCTIONS` name or ``"norm"``) over all
        its elements or one axis (``how``: ``(axis, keepdims)``), of the dtype NumPy's
        reduction gives. Its node's ``value`` is ``(kind, axis, keepdims)``."""
        x = self.operand(x, where)
        if x.weak or x.op == "scalar" or (x.op == "reduce" and x.value[1] is None):
            raise FuseError(f"a reduction of a scalar cannot be fused{where}")
        if x.op == "reduce":  # a plan reduces its own elementwise values, once
            raise FuseError(f"a reduction of a reduction ({x.value[0]} along axis "
                            f"{x.value[1]}) cannot be fused: reduce in NumPy what fuse "
                            f"returns{where}")
        if kind == "norm" and not (x.op == "input" and np.dtype(x.dtype).kind == "f"):
            # NumPy: sqrt of the sum of squares, in floating point
            if np.dtype(x.dtype).kind != "f":
                x = self.ufunc(np.multiply, (x, 1.0), where)
            return self.ufunc(np.sqrt, (self.reduce("sum", self.ufunc(np.square, (x,), where),
                                                    how, where),), where)
        dtype = NUMPY_REDUCTIONS[kind](np.ones(2, x.dtype)).dtype
        _check_dtype(dtype, where)
        key = ("reduce", id(x), kind, *how)
        if key not in self._seen:  # x.max() written twice is computed once
            count = sum(n.op == "reduce" for n in self.nodes)
            # a name no argument can have: the call's values hold both
            node = Node("reduce", dtype, (x,), (np.dtype(x.dtype),), name=f"<reduced {count}>",
                        value=(kind, *how), graph=self)
            self.nodes.append(node)
            self._seen[key] = node
        return self._seen[key]

    def clip(self, x, lo, hi, where: str) -> Node:
        operands = [self.operand(v, where) for v in (x, lo, hi)]
        clip = np._core.umath.clip
        try:
            loop = clip.resolve_dtypes((*[o.dtype for o in operands], None))
        except Exception as exc:
            raise type(exc)(f"{exc}{where}") from None
        _check_dtype(loop[-1], where)
        op = "clip_scalar" if all(o.op == "scalar" or o.weak for o in operands[1:]) else "clip"
        return self.add(op, loop[-1], operands, loop[:-1])


def _const_key(value):
    if value is None:
        return None
    return (type(value), repr(value), np.signbit(value) if np.isreal(value) else None)


def _check_dtype(dtype, where: str) -> None:
    dtype = np.dtype(dtype)
    if dtype.kind in "biu" or dtype in _FLOATING:
        return
    raise FuseError(f"dtype {dtype} is not supported by fuse (bool, integers, float32 and "
                    f"float64 are){where}")


def topological(result: Node, stages: bool = False) -> list[Node]:
    """Every node of ``result``'s graph, each after its operands (without recursion: a long
    chain of operations would exceed Python's recursion limit). With ``stages``, a reduction
    other than ``result`` is a leaf: its operands belong to the stage that computes it."""
    order: list[Node] = []
    seen: set[int] = set()
    stack = [(result, False)]
    while stack:
        node, done = stack.pop()
        if done:
            if id(node) not in seen:
                seen.add(id(node))
                order.append(node)
            continue
        if id(node) not in seen:
            stack.append((node, True))
            if not (stages and node.op == "reduce" and node is not result):
                stack.extend((a, False) for a in reversed(node.args))
    return order


def trace(func, kinds: dict[str, object]) -> tuple[Graph, Node]:
    """Run ``func`` on nodes of the given dtypes (or Python scalar types) and return its graph.

    Parameters
    ----------
    func : callable
        Called with one keyword per input.
    kinds : dict
        Input name -> numpy dtype (arrays, NumPy scalars) or ``int``/``float``/``bool``.
    """
    graph = Graph()
    args = {}
    for name, kind in kinds.items():
        if not isinstance(kind, type):
            _check_dtype(kind, f" (input {name!r})")
        args[name] = graph.add("input", kind, name=name)
    result = func(**args)
    if not isinstance(result, Node):
        raise FuseError(f"the fused code must return one array expression of its inputs, got "
                        f"{type(result).__name__}")
    if result.weak:
        raise FuseError("the fused code returns a Python scalar, not an array expression")
    return graph, result
