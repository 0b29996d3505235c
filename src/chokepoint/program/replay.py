"""Replaying one recorded statement on copies of what it read, and measuring its causes there.

A replay never runs the program again and never touches the user's objects: the statement's
captured values are copied (:func:`chokepoint.measure.statements.protected_copy`), and a
statement that changes its inputs has them restored before every timed call, outside the timed
region. Each probe times the statement as written against the statement with one thing
changed, the two alternating (:func:`timed_under`):

- ``fresh`` — the allocator keeps and reuses freed memory (glibc: no ``mmap`` for large blocks,
  no trimming), so the line's new arrays land on pages already touched: what fresh memory (page
  faults of new results and temporaries) costs the whole line (:mod:`.heap`: the statement as
  written runs under the allocator's thresholds as the program left them);
- ``blas`` — the BLAS library limited to one thread (threadpoolctl), for lines with a matrix
  product;
- the per-operation probes of ``explain`` (data-dependent, strided, conversions, threads...)
  on the operations of the line that hold most of its time.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import gc
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..measure import statements as _statements
from . import callees, heap
from .record import LineStat, user_file

__all__ = ["GROWERS", "Replay", "ReplayError", "grown_name",
           "is_simple_name_assign", "prepare", "run_once", "side_effect", "timed_under",
           "writes_apart"]


class ReplayError(RuntimeError):
    """A statement cannot be replayed (why is the message)."""


# -- the statement as code ----------------------------------------------------------------------


def replay_source(stat: LineStat) -> str:
    """The code a replay runs: the statement, a ``return``'s value, an ``if``/``while`` test."""
    st = stat.statement
    if not st.code:
        raise ReplayError("its source is not available")
    kind = st.kind
    if kind in ("Assign", "AugAssign", "AnnAssign", "Expr"):
        return st.code
    if kind == "Return":
        text = st.code[len("return"):].strip()
        if not text:
            raise ReplayError("a bare return")
        return text
    if kind in ("If", "While"):
        header = st.code.split("\n")[0]
        keyword = "if" if kind == "If" else "while"
        text = header[len(keyword):].rstrip().removesuffix(":").strip()
        if text:
            return text
    raise ReplayError(f"a {kind or 'statement'} is not replayed on its own")


def writes_apart(tree: ast.Module) -> bool:
    """Whether a statement is ``t[index] = value`` where ``index`` does not read ``t`` and
    ``value`` reads ``t`` only through other subscripts (``y[:, j] = a * y[:, j + 1]``): what it
    writes, it does not read, so that a second run does the same work on the same values."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return False
    node = tree.body[0]
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript) \
            or not isinstance(node.targets[0].value, ast.Name):
        return False
    name, index = node.targets[0].value.id, ast.unparse(node.targets[0].slice)
    if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.targets[0].slice)):
        return False
    parents = {child: parent for parent in ast.walk(node.value)
               for child in ast.iter_child_nodes(parent)}
    for n in ast.walk(node.value):
        if isinstance(n, ast.Name) and n.id == name:
            parent = parents.get(n)
            if not (isinstance(parent, ast.Subscript) and parent.value is n
                    and ast.unparse(parent.slice) != index):
                return False
    return True


def _same_values(a: np.ndarray, b: object) -> bool:
    return isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype and \
        bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


@dataclass
class Replay:
    """A statement ready to run on copies of its captured values."""

    statement: _statements.Statement
    pristine: dict[str, object]  # the captured values (never handed out: only copies)
    base: dict  # the frame's globals, shallow (functions, modules)
    mutates: bool
    notes: list[str] = field(default_factory=list)
    #: what is replayed is the arguments the line computes, not the line (``print(E)``)
    arguments: bool = False

    def namespace(self) -> dict:
        """A fresh namespace: copies of the captured values over the frame's globals."""
        ns = dict(self.base)
        for name, value in self.pristine.items():
            try:
                ns[name] = _statements.protected_copy(name, value)
            except TypeError:
                raise ReplayError(f"it reads {name} ({type(value).__name__}), which cannot be "
                                  "copied (a replay never touches your objects)") from None
        return ns

    def arrays(self, ns: dict) -> dict[str, np.ndarray]:
        return {k: v for k, v in ns.items() if k in self.pristine and isinstance(v, np.ndarray)
                and v.size > 0}

    def repeats_same(self, fn: Callable[[], object], ns: dict) -> bool:
        """Whether a statement that changes what it reads leaves the same values when run
        again (``y[:, j] = a * x[:, j + 1]``, ``d[:, :, k] = ...`` reading other columns): it
        may then be timed run after run, as its loop runs it, without restoring its arrays in
        between (a restore copies whole arrays, and the statement then reads from memory what
        it read from the cache in the program). ``ns`` is restored afterwards."""
        if not writes_apart(self.statement.tree):
            return False  # x[x < 0] = 0 leaves the same values and does no work the 2nd time
        restore = self.restorer(ns)
        arrays = self.arrays(ns)
        try:
            restore()
            fn()
            once = {k: v.copy() for k, v in arrays.items() if not _same_values(v, self.pristine[k])}
            fn()
            return all(_same_values(arrays[k], v) for k, v in once.items())
        except Exception:  # its second run, unrestored, failed: restored between runs it is
            return False
        finally:
            restore()

    def restorer(self, ns: dict) -> Callable[[], None]:
        """A function putting the captured values back into ``ns``'s arrays in place (for a
        statement that changes them), else a no-op."""
        if not self.mutates:
            return lambda: None
        pairs = [(ns[k], v) for k, v in self.pristine.items()
                 if isinstance(v, np.ndarray) and isinstance(ns.get(k), np.ndarray)]

        def restore() -> None:
            for target, value in pairs:
                np.copyto(target, value)
        return restore


#: calls a replay must not make again: output, files, processes, the interpreter's state
SIDE_EFFECT_NAMES = frozenset({"print", "open", "input", "exec", "eval", "compile", "exit",
                               "quit", "breakpoint", "__import__", "help", "setattr",
                               "delattr", "globals", "locals", "vars"})
#: methods that change a container (harmless on the copies a sandboxed function reads)
CONTAINER_METHODS = frozenset({"put", "append", "extend", "insert", "pop", "update", "clear",
                               "setdefault", "add", "discard"})
SIDE_EFFECT_METHODS = frozenset({"save", "savez", "savez_compressed", "savetxt", "tofile",
                                 "write", "writelines", "write_text", "write_bytes", "flush",
                                 "close", "dump", "unlink", "remove", "rmdir", "mkdir",
                                 "makedirs", "rename", "system", "Popen", "sleep", "send",
                                 "sendall"}) | CONTAINER_METHODS
SIDE_EFFECT_MODULES = frozenset({"os", "sys", "shutil", "subprocess", "socket", "time",
                                 "pathlib", "logging", "pickle", "json", "threading",
                                 "multiprocessing", "signal", "requests", "urllib"})


#: modules whose functions compute (np.add is no set's add); their I/O is in SIDE_EFFECT_ARRAY
ARRAY_MODULES = frozenset({"np", "numpy", "scipy", "sp", "torch", "cp", "cupy", "ne",
                           "numexpr", "chokepoint", "math"})
SIDE_EFFECT_ARRAY = frozenset({"save", "savez", "savez_compressed", "savetxt", "tofile"})


def side_effect(tree: ast.AST, *, sandbox: bool = False) -> str | None:
    """What a statement does besides computing (a call that prints, writes a file, sleeps,
    changes a container: not the last in a ``sandbox``, where containers are copies), or None:
    such a statement is not replayed."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal, ast.Delete, ast.Yield, ast.YieldFrom,
                             ast.Await, ast.Import, ast.ImportFrom)):
            return type(node).__name__.lower()
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in SIDE_EFFECT_NAMES:
            return f"{func.id}()"
        if isinstance(func, ast.Attribute):
            base = func.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in SIDE_EFFECT_MODULES:
                return f"{base.id}.{func.attr}()"
            if isinstance(base, ast.Name) and base.id in ARRAY_MODULES:
                if func.attr in SIDE_EFFECT_ARRAY:
                    return f"{base.id}.{func.attr}()"
                continue  # np.add is no set's add
            if func.attr in SIDE_EFFECT_METHODS and not (
                    sandbox and func.attr in CONTAINER_METHODS):
                return f".{func.attr}()"
    return None


#: calls whose arguments are what a line computes, the call itself only storing or showing it
_STORING = frozenset({"append", "extend", "insert", "add", "put", "write", "writerow", "info",
                      "debug", "warning", "error", "critical", "log"})


def _arguments(statement: _statements.Statement,
               users: Callable[[ast.expr], bool] = lambda func: False
               ) -> _statements.Statement | None:
    """``L.append(E)``, ``print(E)``, and a call of the user's own function (``users`` says
    which callee is one: ``P = softmax(E)``, whose lines are measured on their own): the
    arguments alone, as one expression (None when the statement is no such call; the caller
    judges the arguments' own effects)."""
    body = statement.tree.body
    node = body[0] if len(body) == 1 else None
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
            isinstance(node.targets[0], ast.Name):
        call = node.value
        storing = False
    elif isinstance(node, ast.Expr):
        call = node.value
        storing = isinstance(call, ast.Call) and (
            (isinstance(call.func, ast.Attribute) and call.func.attr in _STORING)
            or (isinstance(call.func, ast.Name) and call.func.id == "print"))
    else:
        return None
    if not isinstance(call, ast.Call) or not (storing or users(call.func)):
        return None
    values = [*call.args, *(k.value for k in call.keywords if storing or k.arg is not None)]
    if (storing and call.keywords) or not values or any(
            isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        return None
    text = "(" + ", ".join(ast.unparse(a) for a in values) + ",)"
    try:
        return _statements.Statement.parse(text, filename=statement.filename,
                                           first_line=statement.first_line)
    except (SyntaxError, ValueError):
        return None


#: modules whose functions act on the world (files, processes, logs, the clock)
EFFECT_MODULES = SIDE_EFFECT_MODULES | frozenset({"csv", "io", "sqlite3", "shelve",
                                                  "tempfile", "glob", "webbrowser", "tkinter"})
#: methods that write or show what was computed, whatever their object
OUTPUT_METHODS = SIDE_EFFECT_METHODS | frozenset({
    "savefig", "show", "to_csv", "to_parquet", "to_json", "to_pickle", "to_excel", "to_hdf",
    "to_sql", "writerow", "writerows", "info", "debug", "warning", "error", "critical",
    "exception", "log"})
_MISSING = object()


def _resolve(node: ast.expr, values: dict, global_ns: dict):
    """The object a call's function expression names (``_MISSING`` when it cannot be told
    without running code: a call's result, a subscript)."""
    if isinstance(node, ast.Name):
        for scope in (values, global_ns, vars(builtins)):
            if node.id in scope:
                return scope[node.id]
        return _MISSING
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, values, global_ns)
        if base is _MISSING:
            return _MISSING
        try:
            return getattr(base, node.attr)
        except Exception:
            return _MISSING
    return _MISSING


def _module_root(value) -> str:
    module = getattr(value, "__module__", None)
    owner = getattr(value, "__self__", None)
    if not isinstance(module, str) and owner is not None:
        module = type(owner).__module__
    return (module or "").split(".")[0]


def refused_call(tree: ast.AST, values: dict, global_ns: dict,
                 include: tuple[str, ...] = (), *, sandbox: bool = False) -> str | None:
    """Why a statement's calls must not run again, judged on what they call (None: every call
    computes). Refused: the user's own functions (their lines are measured), functions of
    modules that act on the world (``sleep`` imported from time, logging), methods that write
    or show (``fig.savefig``, ``log.info``), and bound methods stored in a variable (their
    object is not copied with the statement's values). In a ``sandbox`` (a function's body,
    :mod:`.callees`: the user's functions it calls sandboxed, its globals and arguments
    copies) the first and containers' own methods (``L.append``) are not refused."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        value = _resolve(node.func, values, global_ns)
        if value is _MISSING:
            continue
        name = getattr(value, "__name__", type(value).__name__)
        function = value.__func__ if isinstance(value, types.MethodType) else value
        code = function.__code__ if isinstance(function, types.FunctionType) else None
        if code is not None and user_file(code.co_filename, include):
            if sandbox:
                continue
            return f"it calls your function {name}() (whose own lines are measured)"
        root = _module_root(value)
        if root in EFFECT_MODULES:
            return f"it calls {root}.{name}(), which acts outside the program's arrays"
        owner = getattr(value, "__self__", None)
        if sandbox and name in CONTAINER_METHODS and isinstance(owner, (list, dict, set)) \
                and isinstance(node.func, ast.Attribute):  # L.append(x), not push(x)
            continue
        if name in OUTPUT_METHODS and root not in ARRAY_MODULES:
            return f"it calls .{name}(), which writes or shows what was computed"
        stored = isinstance(node.func, ast.Name)
        if stored and owner is not None and not isinstance(owner, types.ModuleType) \
                and not isinstance(owner, np.random.RandomState):
            return (f"it calls {name}, a method of an object kept in a variable (the object "
                    "is not copied with the line's values)")
    return None


def prepare(stat: LineStat, include: tuple[str, ...] = ()) -> Replay:
    """The replay of a recorded statement, or ReplayError saying why there is none."""
    capture = stat.capture
    if capture is None:
        raise ReplayError(stat.why_not or "its values were not captured")
    source = replay_source(stat)
    st = stat.statement
    try:
        statement = _statements.Statement.parse(source, filename=st.filename,
                                                first_line=st.line)
    except (SyntaxError, ValueError) as exc:
        raise ReplayError(f"it does not parse on its own ({exc})") from None
    notes = []
    own_calls: dict[str, types.FunctionType] | None = None
    refused = side_effect(statement.tree)
    if refused is not None:
        refused = f"it has effects besides computing ({refused}): run once only"
    else:
        refused = refused_call(statement.tree, capture.values, capture.globals, include)
    if refused is not None:
        # print(E), L.append(E), log.info(fmt, E), P = softmax(E): what it computes is E,
        # replayed alone (the user's function's own lines are measured on their own)
        def users(func: ast.expr) -> bool:
            value = _resolve(func, capture.values, capture.globals)
            code = getattr(value, "__code__", None)
            return code is not None and user_file(code.co_filename, include)

        computed = _arguments(statement, users)
        if computed is None or side_effect(computed.tree) is not None or refused_call(
                computed.tree, capture.values, capture.globals, include) is not None:
            computed = None
            if side_effect(statement.tree) is None:
                own_calls = _callees(statement, capture, include)  # g = (f(X[i] @ w) - y) * x
        if computed is not None:
            called = users(statement.tree.body[0].value.func)
            statement = computed
            notes.append("replayed without the call of your function it makes (whose own "
                         "lines are measured): the arguments it computes, timed alone"
                         if called else "replayed without the call that stores or shows its "
                         "value: the arguments it computes, timed alone")
        elif own_calls is None:
            raise ReplayError(refused)
        else:
            refused = None
            notes.append(f"replayed with {_named(own_calls)} returning what each call "
                         "returned (whose own lines are measured): the line's own work, "
                         "timed alone")
    changed = capture.changed_since()
    if changed:
        notes.append(f"replayed on the values at the end of the run: the program changed "
                     f"{', '.join(changed)} after the run of this line whose values were kept"
                     + (f" (its run {capture.hit})" if capture.hit > 1 else " (its first)"))
    # the captured values are read, never written: every namespace gets copies of them
    replay = Replay(statement, dict(capture.values), capture.globals, stat.mutates, notes,
                    arguments=refused is not None)
    if own_calls:
        replay.pristine.update(_recorded(replay, own_calls))
    return replay


def _named(functions: dict) -> str:
    return ", ".join(f"your function {name}()" for name in functions)


def _callees(statement: _statements.Statement, capture,
             include: tuple[str, ...]) -> dict[str, types.FunctionType] | None:
    """Sandboxed copies (:func:`.callees.sandboxed`) of the user's functions ``statement``
    calls by name, when each can stand in by what it returns and nothing else the statement
    calls is refused (:func:`refused_call`: another of the user's functions, a method of
    theirs), else None."""
    try:
        found = callees.called_functions(
            statement.tree, lambda node: _resolve(node, capture.values, capture.globals),
            include)
        if not found:
            return None
        made: dict = {}
        copies = {name: callees.sandboxed(fn, include, made) for name, fn in found.items()}
    except callees.CalleeError:
        return None
    # the rest of the line judged as any line is, the functions standing in as a builtin
    others = {**capture.values, **dict.fromkeys(found, abs)}
    if refused_call(statement.tree, others, capture.globals, include) is not None:
        return None
    return copies


def _recorded(replay: Replay, copies: dict[str, Callable]) -> dict[str, Callable]:
    """Stand-ins for the user's functions: the statement run once in a namespace of the
    replay's (copies) with their sandboxed ``copies``, what each call returned recorded.
    ReplayError when it raises."""
    recorders = {name: callees.recording(fn) for name, fn in copies.items()}
    ns = replay.namespace()
    ns.update({name: recorder for name, (recorder, _) in recorders.items()})
    try:
        with np.errstate(all="ignore"), _statements.preserved_rng():
            replay.statement.function(ns)()
    except callees.CalleeError as exc:
        raise ReplayError(str(exc)) from None
    except (Exception, SystemExit) as exc:
        raise ReplayError(f"it raised {type(exc).__name__} when replayed alone: {exc}") from None
    try:
        return {name: callees.returning(name, results)
                for name, (_, results) in recorders.items()}
    except callees.CalleeError as exc:
        raise ReplayError(str(exc)) from None


def run_once(replay: Replay) -> tuple[dict, object]:
    """Run the statement once on copies: its namespace afterwards and its value; whether it
    changed its inputs is set on ``replay``. ReplayError when it raises."""
    ns = replay.namespace()
    try:
        with np.errstate(all="ignore"), _statements.preserved_rng():
            value = replay.statement.function(ns)()
    except (Exception, SystemExit) as exc:
        raise ReplayError(f"it raised {type(exc).__name__} when replayed alone: {exc}") from None
    if not replay.mutates:
        replay.mutates = bool(_statements.mutated(replay.arrays(replay.pristine), ns))
    return ns, value


# -- timing -------------------------------------------------------------------------------------


def _calibrate(fn: Callable[[], object], restore: Callable[[], None], mutates: bool,
               target_s: float) -> tuple[int, float]:
    """Calls per sample (to last ``target_s``; one for a statement that changes its inputs)
    and the seconds of one call."""
    restore()
    start = time.perf_counter()
    fn()
    one = time.perf_counter() - start
    if mutates:
        return 1, one
    return max(1, min(10_000, int(target_s / max(one, 1e-7)))), one


def timed_under(fn: Callable[[], object],
                settings: list[Callable[[], contextlib.AbstractContextManager]], *,
                restore: Callable[[], None] = lambda: None, mutates: bool = False,
                samples: int = 7, target_s: float = 0.004,
                faults: list[list[float]] | None = None,
                variant_fns: list[Callable[[], object] | None] | None = None
                ) -> list[list[float]]:
    """Seconds per call of ``fn`` under each setting (a context manager factory entered
    around its calls: the allocator, the BLAS threads), ``samples`` each, the settings
    alternating (forward, then backward, ...), each sample the mean of enough calls to last
    ``target_s``. A statement that changes its inputs is timed one call per sample, restored
    before each call outside the timed region. The first setting is usually
    ``contextlib.nullcontext``: the statement as written. ``faults``, when given, receives
    each setting's page faults per call, a sample each (read around a sample's calls).
    ``variant_fns``: per setting, what runs under it instead of ``fn`` (None: ``fn``)."""
    calls = [f if f is not None else fn for f in (variant_fns or [None] * len(settings))]
    for setting, call in zip(settings[1:], calls[1:], strict=True):
        restore()  # a warm-up under each change (the statement as written was warmed by its
        with setting():  # traced run, and calibrates below)
            call()
    loops, one = _calibrate(fn, restore, mutates, target_s)
    if loops == 1:  # slow calls: fewer samples (a 100 ms product is steady within 3)
        samples = min(samples, 5 if one < 0.03 else 3 if one < 0.25 else 2)
    times: list[list[float]] = [[] for _ in settings]
    if faults is not None:
        faults[:] = [[] for _ in settings]
    order = list(range(len(settings)))
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for i in range(samples):
            for k in (order if i % 2 == 0 else order[::-1]):
                with settings[k]():
                    call = calls[k]
                    if getattr(settings[k], "set_up_each_time", False):
                        # its first call sets it up (the allocator's heap grows), untimed
                        restore()
                        call()
                    total = 0.0
                    faulted = heap.faults() if faults is not None else 0
                    for _ in range(loops):
                        restore()
                        start = time.perf_counter()
                        call()
                        total += time.perf_counter() - start
                    if faults is not None:
                        faults[k].append((heap.faults() - faulted) / loops)
                times[k].append(total / loops)
    finally:
        if gc_was:
            gc.enable()
    return times


def is_simple_name_assign(tree: ast.Module) -> str | None:
    """The target of ``name = expression`` (None otherwise)."""
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assign):
        node = tree.body[0]
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
    return None


#: NumPy functions that return a new array holding their arguments end to end
GROWERS = frozenset({"concatenate", "hstack", "vstack", "dstack", "column_stack", "row_stack",
                     "append"})


def grown_name(code: str) -> str | None:
    """``x`` of ``x = np.concatenate([x, y])`` (``np.hstack``, ``np.append``... of ``x``): an
    array grown by copying all of it into a new one (None otherwise)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    name = is_simple_name_assign(tree)
    if name is None:
        return None
    call = tree.body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr in GROWERS and isinstance(call.func.value, ast.Name)
            and call.func.value.id in ("np", "numpy")):
        return None
    # x itself, whole, among the parts: x = np.vstack([x[1:], new]) is a window of fixed
    # size, x = np.concatenate([x[keep], y]) drops as it adds
    first = call.args[0] if call.args else None
    parts = first.elts if isinstance(first, (ast.List, ast.Tuple)) else \
        call.args[:1] if call.func.attr == "append" else []
    return name if any(isinstance(p, ast.Name) and p.id == name for p in parts) else None
