"""Record the NumPy operations a statement performs.

The statement's input arrays are wrapped in :class:`Traced`, which takes part in NumPy's
``__array_ufunc__`` and ``__array_function__`` protocols (and forwards operators, indexing and
methods), so every operation on them is seen, run on the real arrays, timed once and recorded,
and its result wrapped again. What the tracer cannot see inside (numexpr, numba, torch, a C
extension) converts a traced array with ``__array__``; those conversions are noted, and the work
they lead to shows up as one opaque operation (see :func:`trace`).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import itertools
import linecache
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ..measure.statements import Statement, as_statement
from ..usercode import user_file

__all__ = ["CREATIONS", "Op", "Trace", "Traced", "advanced", "flops_of", "trace", "untraced"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))

#: matrix products and factorisations: judged against the machine's GEMM ceiling
GEMM_OPS = frozenset({"matmul", "dot", "ndarray.dot", "inner", "vdot", "tensordot", "einsum",
                      "solve", "inv", "cholesky", "qr", "svd", "eigh", "eig", "det", "lstsq",
                      "slogdet", "multi_dot"})
#: ufuncs counted as one flop per element (transcendental functions are not counted: their
#: cost is many flops, and no ceiling fits them)
_ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide", "true_divide", "negative",
                         "positive", "maximum", "minimum", "fmax", "fmin", "absolute", "sqrt",
                         "square", "reciprocal", "floor_divide"})


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
    flops: int = 0
    gemm: bool = False
    filename: str = ""
    line: int = 0
    function: str = ""
    before: np.ndarray | None = field(default=None, repr=False)

    @property
    def source(self) -> str:
        """``"file:line"`` of the user's code that issued the operation ("" when unknown)."""
        return f"{self.filename}:{self.line}" if self.filename else ""

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
    lines: list = field(default_factory=list)  # LineCapture of lines holding a pattern
    escaped: dict[int, np.ndarray] = field(default_factory=dict)  # converted by __array__
    #: (file, line) -> how many times the line began (a line that runs twice in a row, as
    #: the one line of a loop's body, counts once: at least this many)
    line_runs: dict[tuple[str, int], int] = field(default_factory=dict)
    result: object = None
    #: operations run untraced once ``max_ops`` were recorded (their results plain arrays)
    untraced: int = 0

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


def _einsum_flops(subscripts: str, operands: list[np.ndarray]) -> int:
    """2 x the product of every index's extent (the naive contraction; a multiply and an add
    per term)."""
    inputs = subscripts.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for letters, a in zip(inputs, operands, strict=False):
        letters = letters.replace("...", "")
        for letter, n in zip(letters, a.shape[a.ndim - len(letters):], strict=False):
            sizes[letter] = max(sizes.get(letter, 1), n)
    return 2 * math.prod(sizes.values()) if len(operands) > 1 else math.prod(sizes.values())


def flops_of(name: str, args: tuple, result) -> int:
    """Floating-point operations of one NumPy call, as the textbooks count them: ``2 n k m``
    for an ``(n, k) x (k, m)`` product, ``2/3 n**3`` for a solve or a determinant, one per
    element for arithmetic ufuncs and reductions; 0 where no count applies."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    r = result[0] if isinstance(result, tuple) and result else result
    size = r.size if isinstance(r, np.ndarray) else 1
    base = name.split(".")[0]
    if name in ("matmul", "dot", "ndarray.dot", "inner") and len(arrays) >= 2:
        return 2 * size * (arrays[0].shape[-1] if arrays[0].ndim else 1)
    if name == "vdot" and arrays:
        return 2 * arrays[0].size
    if name == "tensordot" and len(arrays) >= 2:
        k = math.sqrt(arrays[0].size * arrays[1].size / max(size, 1))
        return int(2 * size * k)
    if name == "einsum" and args and isinstance(args[0], str):
        return _einsum_flops(args[0], arrays)
    if name == "multi_dot" and args and isinstance(args[0], (list, tuple)):
        shapes = [np.shape(a) for a in args[0]]
        rows, total = shapes[0][0] if len(shapes[0]) > 1 else 1, 0
        for inner, right in itertools.pairwise(shapes):  # left to right
            total += 2 * rows * inner[-1] * (right[-1] if len(right) > 1 else 1)
        return total
    if arrays and name in ("solve", "inv", "cholesky", "qr", "svd", "eigh", "eig", "det",
                           "slogdet", "lstsq"):
        n = arrays[0].shape[-1]
        batch = arrays[0].size // max(n * n, 1)
        per = {"solve": 2 * n**3 / 3 + 2 * n * n * (arrays[1].size // max(n, 1) if len(arrays) > 1
                                                     else 1),
               "inv": 2 * n**3, "cholesky": n**3 / 3, "qr": 4 * n**3 / 3, "svd": 4 * n**3,
               "eigh": 9 * n**3, "eig": 25 * n**3, "det": 2 * n**3 / 3,
               "slogdet": 2 * n**3 / 3, "lstsq": 4 * n**3}[name]
        return int(batch * per)
    if base in _ARITHMETIC and any(a.dtype.kind in "fc" for a in arrays):
        if name.endswith((".reduce", ".accumulate")):
            return arrays[0].size if arrays else 0
        return size
    if name in ("sum", "mean", "prod", "cumsum", "ndarray.sum", "ndarray.mean") and arrays \
            and arrays[0].dtype.kind in "fc":
        return arrays[0].size
    return 0


def _selected_bytes(target: np.ndarray, key) -> int:
    """Bytes of ``target[key]``: what an indexing reads or an assignment writes."""
    try:
        return int(np.asarray(target[key]).nbytes)
    except (IndexError, TypeError, ValueError):
        return 0


def advanced(key) -> bool:
    """Whether indexing with ``key`` is advanced (an array or a list among its parts): a copy
    or a gather, not a view."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (np.ndarray, list)) for k in keys)


def _index_bytes(name: str, args: tuple, result) -> tuple[int, int]:
    """Bytes read and written by ``a[key]`` or ``a[key] = value`` (advanced indexing; basic
    indexing is a view, or an assignment into one)."""
    target, key = args[0], args[1]
    keys = key if isinstance(key, tuple) else (key,)
    key_bytes = sum(k.nbytes for k in keys if isinstance(k, np.ndarray))
    masks = any(isinstance(k, np.ndarray) and k.dtype == bool for k in keys)
    if name == "setitem":
        value = args[2]
        value_bytes = value.nbytes if isinstance(value, np.ndarray) else 0
        return key_bytes + value_bytes, _selected_bytes(target, key)
    selected = result.nbytes if isinstance(result, np.ndarray) else 0
    # a mask reads every element it covers; an index array gathers the selected ones
    read = target.nbytes if masks else selected
    return key_bytes + read, selected


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
        frame = _user_frame()
        if frame is not None:  # no operation, but the line's patterns ([v * 2 for v in x])
            self.tracer._begin_line(frame)
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


#: past its ``max_ops``, a trace still records operations reading an array over this size
#: (a sort of a large array after a comprehension's thousands of scalar operations)
UNTRACED_BYTES = 8 * 1024


def _large(kind: str, args: tuple, kwargs: dict) -> bool:
    """Whether an operation reads an array over :data:`UNTRACED_BYTES`: an index reads its
    target only through an index array or a mask (``x[i]`` reads an element)."""
    if kind == "index":
        arrays = _arrays_in(args[2:])
        if len(args) > 1 and advanced(args[1]):
            arrays += [args[0], *_arrays_in(args[1])]
    else:
        arrays = _arrays_in((args, kwargs))
    return any(a.nbytes > UNTRACED_BYTES for a in arrays)


class Tracer:
    """Runs operations on real arrays, records them, and wraps their results."""

    def __init__(self, max_ops: int | None = None):
        self.trace = Trace()
        self.max_ops = max_ops
        self._count = 0
        self._line: tuple[str, int] | None = None
        self._seen_lines: set[tuple[str, int]] = set()

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
        if self.max_ops is not None and len(self.trace.ops) >= self.max_ops \
                and not _large(kind, real_args, real_kwargs):
            self.trace.untraced += 1  # recording each costs 20-100 us: run it, plain
            return func(*real_args, **real_kwargs)
        out = real_kwargs.get("out")
        outs = _arrays_in(out) if out is not None else []
        inputs = [a for a in _arrays_in(real_args) + _arrays_in(
            {k: v for k, v in real_kwargs.items() if k != "out"})]
        frame = _user_frame()
        if frame is not None:
            self._begin_line(frame)
        index_bytes = None
        before = None
        if kind == "index" and advanced(real_args[1]):
            if name == "setitem":
                index_bytes = _index_bytes(name, real_args, None)
                target = real_args[0]
                if target.dtype.kind == "f":
                    before = target.copy()  # for a rewrite of the line to be checked against
        start = time.perf_counter()
        result = func(*real_args, **real_kwargs)
        seconds = time.perf_counter() - start
        results = _arrays_in(result)
        is_view = bool(results) and all(
            any(np.may_share_memory(r, a) for a in inputs) for r in results) and not outs
        allocates = bool(results) and not outs and not is_view
        in_bytes = 0 if is_view else sum(a.nbytes for a in inputs)
        out_bytes = 0 if is_view else sum(r.nbytes for r in results)
        if kind == "index":
            if name == "getitem" and not is_view and advanced(real_args[1]):
                index_bytes = _index_bytes(name, real_args, result)
            if name == "setitem":
                index_bytes = index_bytes or (
                    (real_args[2].nbytes if isinstance(real_args[2], np.ndarray) else 0),
                    _selected_bytes(real_args[0], real_args[1]))
            if index_bytes is not None:
                in_bytes, out_bytes = index_bytes
            elif name == "getitem" and not results:  # one element: a[i, j]
                in_bytes, out_bytes = real_args[0].itemsize, 0
        op = Op(name=name, func=func, args=real_args, kwargs=real_kwargs, inputs=inputs,
                result=result, in_bytes=in_bytes, out_bytes=out_bytes,
                allocates=allocates, is_view=is_view, seconds=seconds, kind=kind,
                flops=flops_of(name, real_args, result), gemm=name in GEMM_OPS, before=before)
        if frame is not None:
            op.filename, op.line = frame.f_code.co_filename, frame.f_lineno
            op.function = frame.f_code.co_name
            self._learn_names(frame)
        op.text = self._render(op, results)
        self.trace.ops.append(op)
        return self._wrap_result(result)

    def _begin_line(self, frame) -> None:
        """At the first operation of a line of the user's code (first time only): keep its
        variables for the line rewrites (see :mod:`chokepoint.explain.lines`)."""
        key = (frame.f_code.co_filename, frame.f_lineno)
        if key == self._line:
            return
        self._line = key
        runs = self.trace.line_runs
        runs[key] = runs.get(key, 0) + 1
        if key in self._seen_lines:
            return
        self._seen_lines.add(key)
        from .lines import capture

        found = capture(key[0], key[1], frame.f_globals, frame.f_locals, _unwrap)
        if found is not None:
            self.trace.lines.append(found)

    def _learn_names(self, frame) -> None:
        """Name arrays as the user's code names them (its local variables), so that labels
        read as written: ``dhidden[t23] = 0``, not ``t21[t23] = 0``."""
        for name, value in frame.f_locals.items():
            if isinstance(value, Traced) and not name.startswith("_"):
                self.trace.names[id(value.array)] = name

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
                op.label = f"{call} = {t.name_of(op.args[2])}"
                return op.label
        else:
            params = ", ".join([t.name_of(a) for a in op.args]
                               + [f"{k}={t.name_of(v)}" for k, v in op.kwargs.items()])
            call = f"np.{op.name}({params})"
        op.label = call
        return f"{target} = {call}" if target else call


def _user_frame():
    """The innermost frame of the user's code (outside chokepoint and NumPy)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_PACKAGE_DIR) or name.startswith(_NUMPY_DIR)
                or name.startswith("<__array_function__")):
            return frame
        frame = frame.f_back
    return None


#: NumPy functions that make an array from no array: wrapped while a statement is traced, so
#: that the arrays the user's code makes (a grid from ``np.linspace``, ``np.zeros``) are traced
#: too, not only the statement's inputs
CREATIONS = ("zeros", "ones", "empty", "full", "linspace", "logspace", "geomspace", "arange",
             "eye", "identity", "array", "copy", "zeros_like", "ones_like", "empty_like",
             "full_like")


def _holds_traced(args: tuple, kwargs: dict) -> bool:
    return any(isinstance(v, Traced) for v in (*args, *kwargs.values()))


def _called_name(frame, statement: Statement) -> str | None:
    """The name of the function ``frame`` is calling, from the source of the call it is at
    (``np.zeros(3)``: ``"zeros"``), or None where that source is not known. The statement's
    own code was compiled from its source (dedented: its columns are that source's)."""
    try:
        line, end, start_col, end_col = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (AttributeError, IndexError, ValueError):  # Python < 3.11: no positions
        return None
    if None in (line, end, start_col, end_col):
        return None
    filename = frame.f_code.co_filename
    if filename == statement.filename:
        lines = statement.source.splitlines(keepends=True)
        line, end = line - statement.first_line + 1, end - statement.first_line + 1
    else:
        lines = linecache.getlines(filename)
    if line < 1 or end > len(lines):
        return None
    text = [x.encode() for x in lines[line - 1:end]]  # the columns count UTF-8 bytes
    text[-1] = text[-1][:end_col]
    text[0] = text[0][start_col:]
    try:
        call = ast.parse(b"".join(text).decode().strip(), mode="eval").body
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None
    func = getattr(call, "func", None)
    return (func.attr if isinstance(func, ast.Attribute)
            else func.id if isinstance(func, ast.Name) else None)


@contextlib.contextmanager
def _creations_traced(tracer: Tracer, statement: Statement) -> Iterator[None]:
    """NumPy's :data:`CREATIONS` return traced arrays when the user's code calls them (code
    outside NumPy, site-packages and chokepoint: a library calling ``np.zeros`` gets its plain
    array), for the duration of the block. A call given a traced array goes through the
    array-function protocol as before. A compiled library called from the user's line calls
    them with that line as its caller (it has no frame of its own): the call's source names
    what the line calls (``rng.standard_normal(...)``, whose ``np.empty`` given a traced
    array crashed the process), and only a creation called by name is traced."""
    originals = {name: getattr(np, name) for name in CREATIONS}

    def traced(name: str, original: Callable) -> Callable:
        @functools.wraps(original)
        def make(*args, **kwargs):
            frame = sys._getframe(1)
            if (_holds_traced(args, kwargs) or not user_file(frame.f_code.co_filename,
                                                             pseudo=True)
                    or _called_name(frame, statement) not in (None, name)):
                return original(*args, **kwargs)
            return tracer.call(name, original, args, kwargs, kind="function")
        return make

    try:
        for name, original in originals.items():
            setattr(np, name, traced(name, original))
        yield
    finally:
        for name, original in originals.items():
            setattr(np, name, original)


def trace(statement: str | Statement, namespace: dict, inputs: list[str],
          max_ops: int | None = None) -> Trace:
    """Run ``statement`` once in ``namespace`` with the arrays named in ``inputs`` traced.

    ``statement`` may be an expression, statements or a whole cell, and may call the user's
    functions: whatever it does to the traced arrays, at any depth, is recorded with the file
    and line of the user's code that did it. The namespace's arrays are used as they are: pass
    copies. When the statement's value is a plain array although a traced array was converted
    by ``__array__`` (numexpr and the like), the untraced work is recorded as one opaque
    operation, timed by the caller. With ``max_ops``, operations after that many run plain,
    but those reading an array over :data:`UNTRACED_BYTES` (:attr:`Trace.untraced` counts
    those met on traced arrays: a comprehension's thousands).
    """
    statement = as_statement(statement)
    tracer = Tracer(max_ops)
    scope = dict(namespace)
    for name in inputs:
        scope[name] = tracer.wrap(namespace[name], name)
    with _creations_traced(tracer, statement):
        value = statement.function(scope)()
    result = _unwrap(value)
    t = tracer.trace
    plain = isinstance(result, np.ndarray) and not isinstance(value, Traced)
    if plain and id(result) not in t.names and not t.untraced:
        t.names[id(result)] = "result"
        t.ops.append(_opaque(list(t.escaped.values()), result,
                             "untraced code (numexpr, numba, a C extension...)"))
    t.result = result
    return t


def _opaque(read: list[np.ndarray], result: np.ndarray | None, label: str) -> Op:
    """Work the tracer did not see, as one operation reading ``read`` and making ``result``;
    its time is the caller's to fill in."""
    op = Op(name="opaque", func=None, args=(), kwargs={}, inputs=read, result=result,
            in_bytes=sum(a.nbytes for a in read),
            out_bytes=result.nbytes if result is not None else 0,
            allocates=result is not None, is_view=False, seconds=float("nan"), kind="opaque")
    op.text = op.label = label
    return op


def untraced(statement: str | Statement, namespace: dict, inputs: list[str]) -> Trace:
    """Run ``statement`` once in ``namespace``, nothing traced: its value, and its work as one
    opaque operation (reading the arrays named in ``inputs``). For code that refuses the
    tracer's arrays (a numba function typing its argument)."""
    statement = as_statement(statement)
    value = statement.function(dict(namespace))()
    t = Trace()
    read = [namespace[n] for n in inputs if isinstance(namespace.get(n), np.ndarray)]
    result = value if isinstance(value, np.ndarray) else None
    t.ops.append(_opaque(read, result, "untraced code (the tracer's arrays were refused)"))
    if result is not None:
        t.names[id(result)] = "result"
    t.result = value
    return t
