"""Record the NumPy operations a statement performs.

The statement's input arrays are wrapped in :class:`Traced`, which takes part in NumPy's
``__array_ufunc__`` and ``__array_function__`` protocols (and forwards operators, indexing and
methods), so every operation on them is seen, run on the real arrays, timed once and recorded,
and its result wrapped again. What the tracer cannot see inside (numexpr, numba, torch, a C
extension) converts a traced array with ``__array__``; those conversions are noted, and the work
they lead to shows up as one opaque operation (see :func:`trace`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["Op", "Trace", "Traced", "trace"]


@dataclass
class Op:
    """One recorded operation.

    Attributes
    ----------
    name : str
        ``"clip"``, ``"ceil"``, ``"greater_equal"``, ``"ndarray.view"``, ...
    func : callable or None
        What ran (None for the opaque operation).
    args, kwargs
        The arguments, with traced arrays replaced by the real arrays (for probes to re-run).
    inputs : list of numpy.ndarray
        The array arguments read.
    result : object
        The real result.
    in_bytes, out_bytes : int
        Bytes of the arrays read, and of the array written (0 for a view).
    allocates : bool
        The result is a freshly allocated array (no ``out=``, not a view).
    is_view : bool
        The result shares memory with an input: free.
    seconds : float
        Time of the traced call (one call; probes measure properly).
    text : str
        The operation as code, naming the statement's inputs and the intermediates t1, t2, ...
    """

    name: str
    func: Callable | None
    args: tuple
    kwargs: dict
    inputs: list[np.ndarray]
    result: object
    in_bytes: int
    out_bytes: int
    allocates: bool
    is_view: bool
    seconds: float
    text: str = ""
    label: str = ""
    kind: str = "ufunc"

    @property
    def result_array(self) -> np.ndarray | None:
        """The result if it is an array (the first one for several)."""
        r = self.result[0] if isinstance(self.result, tuple) and self.result else self.result
        return r if isinstance(r, np.ndarray) else None


@dataclass
class Trace:
    """What a statement did."""

    ops: list[Op] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)  # id(array) -> name in the code
    escaped: dict[int, np.ndarray] = field(default_factory=dict)  # converted by __array__
    result: object = None

    def name_of(self, value) -> str:
        if isinstance(value, np.ndarray) and id(value) in self.names:
            return self.names[id(value)]
        if isinstance(value, (list, tuple)):
            inner = ", ".join(self.name_of(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner})"
        if isinstance(value, np.ndarray):
            return f"<array {value.shape} {value.dtype}>"
        if isinstance(value, (np.dtype, type)):
            return getattr(value, "__name__", str(value))
        if isinstance(value, slice):
            parts = ["" if v is None else repr(v) for v in (value.start, value.stop, value.step)]
            return ":".join(parts[:2]) + (f":{parts[2]}" if value.step is not None else "")
        if isinstance(value, np.generic):
            return repr(value.item())
        return repr(value)


def _unwrap(value):
    if isinstance(value, Traced):
        return value.array
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _arrays_in(value) -> list[np.ndarray]:
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _arrays_in(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _arrays_in(v)]
    return []


_ESCAPES = frozenset({"__array_interface__", "__array_struct__", "__dlpack__", "ctypes",
                      "data", "__buffer__"})


class Traced(NDArrayOperatorsMixin):
    """An array whose operations are recorded by a :class:`Tracer`."""

    __slots__ = ("array", "tracer")

    def __init__(self, array: np.ndarray, tracer: Tracer):
        self.array = array
        self.tracer = tracer

    # NumPy protocols
    def __array__(self, dtype=None, copy=None):
        self.tracer.trace.escaped[id(self.array)] = self.array
        return self.array if dtype is None else self.array.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        return self.tracer.call(name, getattr(ufunc, method), inputs, kwargs, kind="ufunc")

    def __array_function__(self, func, types, args, kwargs):
        return self.tracer.call(func.__name__, func, args, kwargs, kind="function")

    # the rest of the ndarray interface
    def __getitem__(self, key):
        return self.tracer.call("getitem", lambda a, k: a[k], (self, key), {}, kind="index")

    def __setitem__(self, key, value):
        def setitem(a, k, v):
            a[k] = v

        self.tracer.call("setitem", setitem, (self, key, value), {}, kind="index")

    def __len__(self):
        return len(self.array)

    def __iter__(self):
        return iter(self.array)

    def __bool__(self):
        return bool(self.array)

    def __float__(self):
        return float(self.array)

    def __int__(self):
        return int(self.array)

    def __repr__(self):
        return f"Traced({self.array!r})"

    def __getattr__(self, name):
        if name in _ESCAPES:  # a consumer reads the raw buffer: the tracer loses sight of it
            self.tracer.trace.escaped[id(self.array)] = self.array
        attribute = getattr(self.array, name)
        if callable(attribute):
            def method(*args, **kwargs):
                return self.tracer.call(f"ndarray.{name}", lambda a, *p, **k:
                                        getattr(a, name)(*p, **k), (self, *args), kwargs,
                                        kind="method")
            return method
        if isinstance(attribute, np.ndarray):  # .T, .real, .flat-like views
            return self.tracer.call(f"ndarray.{name}", lambda a: getattr(a, name), (self,), {},
                                    kind="attribute")
        return attribute


class Tracer:
    """Runs operations on real arrays, records them, and wraps their results."""

    def __init__(self):
        self.trace = Trace()
        self._count = 0

    def wrap(self, array: np.ndarray, name: str) -> Traced:
        self.trace.names[id(array)] = name
        return Traced(array, self)

    def _wrap_result(self, value):
        if isinstance(value, np.ndarray):
            return Traced(value, self)
        if isinstance(value, tuple):
            return tuple(self._wrap_result(v) for v in value)
        return value

    def call(self, name: str, func: Callable, args: tuple, kwargs: dict, *, kind: str):
        real_args, real_kwargs = _unwrap(args), _unwrap(kwargs)
        out = real_kwargs.get("out")
        outs = _arrays_in(out) if out is not None else []
        inputs = [a for a in _arrays_in(real_args) + _arrays_in(
            {k: v for k, v in real_kwargs.items() if k != "out"})]
        start = time.perf_counter()
        result = func(*real_args, **real_kwargs)
        seconds = time.perf_counter() - start
        results = _arrays_in(result)
        is_view = bool(results) and all(
            any(np.may_share_memory(r, a) for a in inputs) for r in results) and not outs
        allocates = bool(results) and not outs and not is_view
        out_bytes = 0 if is_view else sum(r.nbytes for r in results)
        if kind == "index" and name == "setitem":
            out_bytes = sum(a.nbytes for a in inputs[1:2]) if len(inputs) > 1 else 0
        op = Op(name=name, func=func, args=real_args, kwargs=real_kwargs, inputs=inputs,
                result=result, in_bytes=0 if is_view else sum(a.nbytes for a in inputs),
                out_bytes=out_bytes,
                allocates=allocates, is_view=is_view, seconds=seconds, kind=kind)
        op.text = self._render(op, results)
        self.trace.ops.append(op)
        return self._wrap_result(result)

    def _render(self, op: Op, results: list[np.ndarray]) -> str:
        t = self.trace
        for r in results:
            if id(r) not in t.names:
                self._count += 1
                t.names[id(r)] = f"t{self._count}"
        target = ", ".join(t.names[id(r)] for r in results)
        if op.kind == "method" or op.kind == "attribute":
            obj, *rest = op.args
            params = ", ".join([t.name_of(a) for a in rest]
                               + [f"{k}={t.name_of(v)}" for k, v in op.kwargs.items()])
            method = op.name.split(".", 1)[1]
            call = f"{t.name_of(obj)}.{method}" + (f"({params})" if op.kind == "method" else "")
        elif op.kind == "index":
            key = op.args[1]
            key_text = (", ".join(t.name_of(k) for k in key) if isinstance(key, tuple)
                        else t.name_of(key))
            call = f"{t.name_of(op.args[0])}[{key_text}]"
            if op.name == "setitem":
                return f"{call} = {t.name_of(op.args[2])}"
        else:
            params = ", ".join([t.name_of(a) for a in op.args]
                               + [f"{k}={t.name_of(v)}" for k, v in op.kwargs.items()])
            call = f"np.{op.name}({params})"
        op.label = call
        return f"{target} = {call}" if target else call


def trace(statement: str, namespace: dict, inputs: list[str]) -> Trace:
    """Run ``statement`` once in ``namespace`` with the arrays named in ``inputs`` traced.

    The namespace's arrays are used as they are: pass copies. When the statement's value is a
    plain array although a traced array was converted by ``__array__`` (numexpr and the like),
    the untraced work is recorded as one opaque operation, timed by the caller.
    """
    tracer = Tracer()
    scope = dict(namespace)
    for name in inputs:
        scope[name] = tracer.wrap(namespace[name], name)
    code = compile(statement, "<explain>", "eval")
    value = eval(code, scope)
    result = _unwrap(value)
    t = tracer.trace
    plain = isinstance(result, np.ndarray) and not isinstance(value, Traced)
    if plain and id(result) not in t.names:
        escaped = list(t.escaped.values())
        t.names[id(result)] = "result"
        op = Op(name="opaque", func=None, args=(), kwargs={}, inputs=escaped, result=result,
                in_bytes=sum(a.nbytes for a in escaped), out_bytes=result.nbytes,
                allocates=True, is_view=False, seconds=float("nan"), kind="opaque")
        op.text = op.label = "untraced code (numexpr, numba, a C extension...)"
        t.ops.append(op)
    t.result = result
    return t
