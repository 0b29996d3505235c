"""The recording run: per statement of the user's code, its hits and its own time, and the values
its first execution read.

One ``sys.settrace`` hook. The global hook sees every call and traces only frames of the user's
files (:func:`user_file`); library code (NumPy's Python functions, SciPy, the standard library)
runs untraced, and its time stays with the user's line that called it. A line's time is its own:
while a user function it called runs, the caller's clock is stopped, so the lines' times add up
to the program's (less what the hook itself costs, which is reported, not hidden).

Line events are mapped to the statement holding them (:class:`SourceMap`): a statement written
over several lines is one row, at its first line; a loop's header is its own row, whose time is
the interpreter's work of looping.

At a statement's first execution the values it names are kept (:class:`Capture`), by reference:
a copy of every array would cost as much as the program's own memory traffic. A fingerprint of
each array is taken before and after that execution; a statement that changed what it read (an
in-place update) is captured again, by copy, at its next execution, so that its replay starts
from the values it saw. A capture by reference is taken again at the statement's 2nd, 4th,
8th... execution (:func:`recaptured`), so that a line whose work grows over the run (an array
appended to in a loop) is replayed on values from its second half, not its first run. What was
kept is bounded by a memory budget; a statement over it is not captured, and the report says
so.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..kernels import native
from ..usercode import user_file

__all__ = ["PAGE_BYTES", "Capture", "Counts", "HookCosts", "LineStat", "Recorder", "SourceMap",
           "Statement", "fingerprint", "hook_status", "recaptured", "user_file"]

#: the code names of the frames a comprehension or generator expression runs in (Python 3.11)
COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})
#: arrays this small are copied when captured (cheaper than a fingerprint, and exact)
SMALL_COPY = 64 * 2**10
#: elements sampled per array for the fingerprint of a large array
SAMPLES = 64


@dataclass(frozen=True)
class Statement:
    """One statement of the user's code (a row of the report)."""

    filename: str
    line: int  # its first line
    end_line: int
    kind: str  # the AST node's class name: "Assign", "Expr", "For", ...
    names: tuple[str, ...]  # the names it reads (what a capture keeps)
    code: str  # its source, one line per line (a compound statement: its header only)
    loop: int | None = None  # the first line of the innermost loop holding it
    function: int | None = None  # the first line of the innermost function holding it

    @property
    def key(self) -> tuple[str, int]:
        return self.filename, self.line

    @property
    def is_loop(self) -> bool:
        return self.kind in ("For", "AsyncFor", "While")


_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match)
if sys.version_info >= (3, 11):
    _COMPOUND = (*_COMPOUND, ast.TryStar)


def _read_names(node: ast.AST) -> tuple[str, ...]:
    """Names a statement reads (a store into ``A[i]`` or ``A.x`` reads ``A``; an augmented
    assignment reads its target)."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        names.add(node.target.id)
    return tuple(sorted(names))


def _header(node: ast.stmt) -> ast.AST | None:
    """What a compound statement's header evaluates (a loop's iterable, a test)."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return node.iter
    if isinstance(node, (ast.While, ast.If)):
        return node.test
    return None


class SourceMap:
    """A file's lines mapped to the statements holding them."""

    def __init__(self, filename: str):
        self.filename = filename
        self.statements: dict[int, Statement] = {}  # first line -> statement
        self.line_to_first: dict[int, int] = {}
        lines = linecache.getlines(filename)
        try:
            tree = ast.parse("".join(lines), filename=filename)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return
        self._walk(tree.body, lines, None, None)

    def _walk(self, body: list[ast.stmt], lines: list[str], loop: int | None,
              function: int | None) -> None:
        for node in body:
            end = node.end_lineno or node.lineno
            if isinstance(node, _COMPOUND):
                inner = [n for field_ in ("body", "orelse", "finalbody", "handlers")
                         for n in getattr(node, field_, []) or [] if isinstance(n, ast.AST)]
                first_inner = min((n.lineno for n in inner), default=end + 1)
                header_end = max(node.lineno, first_inner - 1)
                header = _header(node)
                names = _read_names(header) if header is not None else ()
                code = "".join(lines[node.lineno - 1:header_end]).strip() if lines else ""
                self._add(Statement(self.filename, node.lineno, header_end,
                                    type(node).__name__, names, code, loop, function),
                          header_end)
                inner_loop = node.lineno if isinstance(
                    node, (ast.For, ast.AsyncFor, ast.While)) else loop
                inner_function = function
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner_loop = None  # a function's body is not its definer's loop
                    inner_function = None if isinstance(node, ast.ClassDef) else node.lineno
                for field_ in ("body", "orelse", "finalbody"):
                    self._walk(getattr(node, field_, []) or [], lines, inner_loop,
                               inner_function)
                for handler in getattr(node, "handlers", []) or []:
                    self._walk(handler.body, lines, inner_loop, inner_function)
                for case in getattr(node, "cases", []) or []:
                    self._walk(case.body, lines, inner_loop, inner_function)
            else:
                code = "".join(lines[node.lineno - 1:end]).strip() if lines else ""
                self._add(Statement(self.filename, node.lineno, end, type(node).__name__,
                                    _read_names(node), code, loop, function), end)

    def _add(self, statement: Statement, end: int) -> None:
        self.statements[statement.line] = statement
        for n in range(statement.line, end + 1):
            self.line_to_first[n] = statement.line


_CALIBRATION = "<chokepoint calibration>"
_CALIBRATION_LIBRARY = "<chokepoint calibration library>"
_CALIBRATION_N = 20_000
_CALIBRATION_CODE = """
import numpy as np

def numpy_calls(n):
    v = np.arange(32.0)
    s, w = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([1.0, 2.0])
    for i in range(n // 64):
        np.median(v)
        np.percentile(v, 90)
        np.std(v)
        np.linalg.solve(s, w)
        np.linalg.det(s)

def loop(n):
    x = 0
    for i in range(n):
        x += i
        x -= 1
    return x

def calling(n, library):
    for i in range(n):
        library(i)

def called(i):
    return i
"""
_LIBRARY_CODE = """
def library(i):
    return i
"""


def _timed(loop, args=(_CALIBRATION_N,)) -> int:
    start = time.perf_counter_ns()
    loop(*args)
    return time.perf_counter_ns() - start


def _peak() -> int:
    """The process's peak resident memory so far, in bytes (0 where unknown)."""
    try:
        import resource
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


#: bytes a minor page fault maps (4 KiB pages; a huge page's fault maps more, and the growth
#: it stands for then outnumbers the faults: nothing is priced, rather than too much)
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _resident() -> int:
    """The process's resident memory now, in bytes (0 where unknown: /proc/self/statm is
    Linux's)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


def fingerprint(value: np.ndarray) -> np.ndarray:
    """A cheap summary of an array's values: a copy when small, else SAMPLES elements spread
    over it (enough to see an update of a sizeable part of it)."""
    if value.nbytes <= SMALL_COPY or value.size <= SAMPLES:
        return value.copy()
    index = np.linspace(0, value.size - 1, SAMPLES).astype(np.intp)
    return np.asarray(value.flat[index]).copy()


#: a statement in a loop whose captured arrays hold at most this many bytes has its inputs
#: checksummed at its first run and compared at each capture again (its 2nd, 4th, 8th...
#: runs: :func:`input_sums`; 4 ms a pass over 16 MB)
INVARIANT_BYTES = 16 * 2**20
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), np.generic)
#: modules whose attributes a program reads but does not change (functions, constants)
CONSTANT_MODULES = frozenset({"numpy", "math", "cmath", "numpy.linalg", "numpy.fft"})


def input_sums(values: dict[str, object]) -> dict[str, object] | None:
    """What a statement read, in a form two runs can be compared by, name by name: each
    array's shape, dtype and CRC-32 of its bytes, each number or string as itself, a module by
    name where it is NumPy's or ``math`` (:data:`CONSTANT_MODULES`; another module's arrays
    can change, ``params.W += g``); anything else (an object, a function, a generator, such a
    module: their state is not seen) a new object, never equal to another run's. None where
    the arrays hold more than :data:`INVARIANT_BYTES`."""
    sums: dict[str, object] = {}
    total = 0
    for name, value in values.items():
        if isinstance(value, np.ndarray) and value.dtype.kind not in "OV":
            total += value.nbytes
            if total > INVARIANT_BYTES:
                return None
            sums[name] = (value.shape, value.dtype.str, _crc(value))
        elif isinstance(value, _IMMUTABLE):
            sums[name] = value
        elif isinstance(value, type(np)) and value.__name__ in CONSTANT_MODULES:
            sums[name] = value.__name__
        else:
            sums[name] = object()
    return sums


#: bytes of a strided array copied at a time to be checksummed (a copy of all of it grew the
#: process's peak before the line's first run: an allocation the line did not make)
CRC_CHUNK = 2**20


def _crc(value: np.ndarray) -> int:
    """CRC-32 of an array's bytes in C order, copied at most :data:`CRC_CHUNK` at a time."""
    if value.flags.c_contiguous:
        return zlib.crc32(value.reshape(-1).view(np.uint8))
    if value.ndim == 0:
        return zlib.crc32(np.ascontiguousarray(value).view(np.uint8))
    step = max(1, CRC_CHUNK // max(1, value[:1].nbytes))
    crc = 0
    for start in range(0, len(value), step):
        crc = zlib.crc32(np.ascontiguousarray(value[start:start + step]).view(np.uint8), crc)
    return crc


def _equal_sums(a: object, b: object) -> bool:
    """Whether two of :func:`input_sums`' entries are equal (a NaN never is)."""
    try:
        return bool(a == b)
    except Exception:  # an entry whose comparison is not a truth value
        return False


def recaptured(hits: int) -> bool:
    """Whether a statement captured by reference is captured again at its ``hits``-th
    execution: its 2nd, 4th, 8th... (the C hook asks the Python hook at the same counts)."""
    return hits > 1 and not hits & (hits - 1)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    try:
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    except TypeError:
        return bool(np.array_equal(a, b))


@dataclass
class Capture:
    """The values a statement read at one of its executions.

    ``values`` holds the names it reads from its frame (locals first, then globals); arrays are
    held by reference (``copied`` False) or as copies. ``prints`` are the arrays' fingerprints
    when captured, to tell whether they changed afterwards.
    """

    values: dict[str, object]
    globals: dict
    copied: bool
    nbytes: int
    prints: dict[str, np.ndarray] = field(default_factory=dict)
    #: pairs of names whose arrays shared memory when captured
    aliases: frozenset = frozenset()
    hit: int = 1  # which execution of the statement
    code: object = field(default=None, repr=False)  # the code object of the frame it ran in
    start_ns: int = 0  # the statement's own time before that execution
    run_ns: int = 0  # that execution's own time (the hook's cost in it included)
    input_bytes: int = 0  # the bytes of the arrays it read then
    released: bool = field(default=False, repr=False)  # its budget given back

    def changed_since(self) -> list[str]:
        """Names of arrays whose values differ from their fingerprint now."""
        if self.copied:
            return []
        return [name for name, fp in self.prints.items()
                if not _same(fingerprint(self.values[name]), fp)]


_why_python = ""  # why the Python hooks take every event (empty: the C hook is built)


def _linetrace():
    """The compiled line hook (``_linetrace.c``), or None where it cannot be built or
    ``CHOKEPOINT_NATIVE=0``: then the Python hook takes every event."""
    global _why_python
    if native.disabled():
        _why_python = "CHOKEPOINT_NATIVE=0"
        return None
    try:
        return native.extension(Path(__file__).with_name("_linetrace.c"),
                                "chokepoint.program._linetrace")
    except Exception as exc:  # an optimisation: whatever failed, the Python hook runs
        _why_python = f"not built: {type(exc).__name__}: {str(exc)[:200]}"
        return None


def hook_status() -> str:
    """One line: which hook records ``chokepoint run`` (``chokepoint info`` shows it)."""
    if _compiled is not None:
        return "C for the common events (program/_linetrace.c), Python for the rest"
    return f"Python for every event ({_why_python}): loops record about 3x slower"


class _Counts:
    """A statement's counters (the Python stand-in for ``_linetrace.Counts``)."""

    __slots__ = ("events", "fault_hits", "faults", "hits", "library_calls", "library_lines", "ns",
                 "rss_grown", "state", "user_calls")

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self.ns = self.events = self.hits = self.state = self.library_calls = 0
        self.user_calls = self.library_lines = self.faults = self.fault_hits = 0
        self.rss_grown = 0
        return self


_compiled = _linetrace()
#: the base of LineStat: its counters, in C fields where the C hook adds to them
Counts = _compiled.Counts if _compiled is not None else _Counts


@dataclass
class LineStat(Counts):
    """What the recording measured of one statement.

    Its counters (from :data:`Counts`): ``hits``; ``ns``, its own time in nanoseconds;
    ``events``, calls of the hook that landed in its time (their cost is taken out);
    ``state``, 0: capture wanted; 1: captured; 2: copy at next hit; 3: not captured;
    ``library_calls``, library Python functions it called (each a call of the hook);
    ``user_calls``, the user's functions it called; ``library_lines``, lines those library
    functions ran (counted by the C hook only: the Python hook is not called for them);
    ``faults``, the minor page faults of its ``fault_hits`` runs whose faults were counted
    (the C hook only, on statements whose runs averaged ``_linetrace.FAULT_LINE_NS``), and
    ``rss_grown``, the bytes those runs grew the most resident memory the hook had seen by
    (the pages of memory the program keeps, touched once whatever the code).
    """

    statement: Statement
    capture: Capture | None = None
    why_not: str = ""  # why it was not captured
    over_budget: bool = False  # not captured: the capture budget was spent
    mutates: bool = False  # its first execution changed what it read
    first_ns: int = 0  # its first execution's own time
    first_bytes: int = -1  # the bytes of the arrays its first capture read (-1: none)
    peak_growth: int = 0  # bytes the process's peak memory grew by during its first execution
    #: bytes its first execution left resident (the memory the program keeps, touched once
    #: whatever the code computing it)
    first_kept: int = 0
    #: its own time where the hook's price in it is uncertain (0 otherwise): as recorded,
    #: where the hook's calls into its library functions were a third of it or more (a price
    #: calibrated on other functions, on a machine whose speed drifts); with the price taken
    #: out, where its runs were short and many (the traced interpreter is slower on every
    #: instruction, which the price per event misses: a 189 ns condition recorded at 340 ns
    #: a run). Its replay then times it, at most this (:func:`.analyse.analyse_line`)
    recorded_ns: int = 0
    #: why: "library" or "interpreter" (see recorded_ns)
    recorded_why: str = ""
    #: its first run's :func:`input_sums` (a statement in a loop; None: not comparable)
    input_sums: dict | None = None
    #: of its runs captured again (2nd, 4th, 8th...), how many had their inputs compared with
    #: its first run's, name by name
    compared: int = 0
    #: the names whose value differed from the first run's at one of them
    varying: set = field(default_factory=set)


class HookCosts(NamedTuple):
    """Nanoseconds the hook adds to a statement's own time: per event of the hook in it, per
    call of a library's Python function it makes (the call of the hook), per line such a
    function runs (a line event, and the interpreter's tracing of that line), per call of the
    user's function (beyond its events: what its call and its return cost the calling line
    outside the clock reads), per run whose page faults were counted (two reads of the
    count)."""

    event: float
    library_call: float
    library_line: float
    user_call: float
    fault_window: float = 0.0

    def library_ns(self, stat: LineStat) -> float:
        """What the hook's calls into library functions cost ``stat`` (nanoseconds)."""
        return stat.library_calls * self.library_call + stat.library_lines * self.library_line

    def taken_out(self, stat: LineStat) -> int:
        """``stat``'s own time less what the hook cost in it (nanoseconds, at least 0)."""
        return max(0, int(stat.ns - stat.events * self.event
                          - stat.library_calls * self.library_call
                          - stat.library_lines * self.library_line
                          - stat.user_calls * self.user_call
                          - stat.fault_hits * self.fault_window))


class Recorder:
    """Runs code under the line hook. ``start()``/``stop()`` around the code; ``lines`` after.

    Parameters
    ----------
    include : tuple of str
        More path prefixes of the user's code.
    budget_bytes : int
        The most bytes of arrays the captures may hold.
    compiled : bool
        Take the common events in C (``_linetrace.c``) where it was built; False: every event
        in Python (the same counts, at about four times the cost per event).
    """

    def __init__(self, include: tuple[str, ...] = (), budget_bytes: int = 2 * 2**30,
                 compiled: bool = True):
        self.include = tuple(os.path.realpath(p) for p in include)
        self.budget_bytes = budget_bytes
        self.held = 0  # bytes of the arrays the captures hold, each array once
        self.held_ids: dict[int, int] = {}  # id of an array held -> how many captures hold it
        self.lines: dict[tuple[str, int], LineStat] = {}
        self._maps: dict[str, SourceMap] = {}
        #: id(code) -> (code, whether it is the user's): by identity, as _code_lines (equal
        #: code objects of two files, a library's and the user's, are two entries)
        self._user: dict[int, tuple[object, bool]] = {}
        self._stack: list[list] = []  # entries made by _entry
        #: id(code) -> (code, its line -> LineStat, whether it is a comprehension's)
        self._code_lines: dict[int, tuple[object, dict[int, LineStat], bool]] = {}
        self._previous = None
        self.wall_ns = 0
        self._t0 = 0
        #: the allocator's thresholds when the code ended (:func:`.heap.program_allocator`,
        #: read by whoever stopped the recording), None where unknown
        self.allocator = None
        self.compiled = compiled and _compiled is not None
        # C: the trace function (install()), handing calls to _global and a traced frame's
        # other events to _local; Python: what _global returns for a user frame
        self._hook = (_compiled.Hook(self._stack, self._local, self._global, self._user,
                                     self._code_lines) if self.compiled else self._local)

    # -- the hooks ------------------------------------------------------------------------------

    def _is_user(self, code) -> bool:
        found = self._user.get(id(code))
        if found is None or found[0] is not code:
            # a bool: the C hook counts a call of code mapped to False itself
            found = self._mark(code, user_file(code.co_filename, self.include)
                               or code.co_filename == _CALIBRATION)
        return found[1]

    def _mark(self, code, user: bool) -> tuple[object, bool]:
        found = self._user[id(code)] = (code, bool(user))
        return found

    def hook_cost_ns(self) -> HookCosts:
        """Nanoseconds the hook adds to the lines' own time (see :class:`HookCosts`), each
        measured on a loop of trivial lines."""
        scope: dict = {}
        exec(compile(_CALIBRATION_CODE, _CALIBRATION, "exec"), scope)
        exec(compile(_LIBRARY_CODE, _CALIBRATION_LIBRARY, "exec"), scope)
        # the loop of trivial lines runs in 1-3 ms: five rounds, where one in six read 1.4x
        event = self._calibrate(scope["loop"], None, "events", rounds=5)
        if self.compiled:
            # the C hook turns a library function's line events off while it runs (after its
            # first call): its call, its return and the tracing of its instructions, priced
            # per call on NumPy's own Python functions, large (np.median) and small (those
            # np.linalg.solve calls); the few lines of first calls as events
            call, line = self._calibrate(scope["numpy_calls"], None, "library_calls",
                                         event), event
        else:
            call, line = self._calibrate(scope["calling"], scope["library"], "library_calls",
                                         event), 0.0
        return HookCosts(event=event, library_call=call, library_line=line,
                         user_call=self._calibrate(scope["calling"], scope["called"],
                                                   "user_calls", event),
                         fault_window=2 * _compiled.fault_read_ns() if self.compiled else 0.0)

    def _calibrate(self, loop, callee, counter: str, per_event: float = 0.0,
                   rounds: int = 3) -> float:
        """The hook's cost per count of ``counter`` (``"events"``, ``"library_calls"``,
        ``"library_lines"``, ``"user_calls"``) on ``loop`` (calling ``callee``, a library's
        function or the user's), beyond ``per_event`` per event."""
        args = (_CALIBRATION_N,) if callee is None else (_CALIBRATION_N, callee)
        # plain and traced runs alternate: plain runs all made first, in a process still cold
        # (a fresh clone's first test), priced the hook's library calls at 0.65x
        plains, traced = [], []
        for _ in range(rounds):
            plains.append(_timed(loop, args))
            probe = Recorder(compiled=self.compiled)
            probe._mark(loop.__code__, True)
            if callee is not None:
                probe._mark(callee.__code__, counter == "user_calls")
            probe.start()
            loop(*args)
            probe.stop()
            stats = probe.lines.values()
            traced.append((sum(s.ns for s in stats), sum(s.events for s in stats),
                           max(sum(getattr(s, counter) for s in stats), 1)))
        plain = min(plains)
        return min(max(0.0, (ns - plain - per_event * events) / count)
                   for ns, events, count in traced)

    def _entry(self, frame) -> list:
        """A stack entry for a user frame: [frame, LineStat | None, raw line, t0, pending
        capture, (ns, peak) at a first execution's start, its code's line -> LineStat cache,
        whether it is a comprehension's frame]."""
        code = frame.f_code
        # by identity: code objects compare by content, and two files' same function (same
        # lines) are one key otherwise; the code is kept alive with its cache
        found = self._code_lines.get(id(code))
        if found is None or found[0] is not code:
            found = self._code_lines[id(code)] = (code, {}, code.co_name in COMPREHENSIONS)
        return [frame, None, -1, 0, None, None, found[1], found[2]]

    def _stat_at(self, filename: str, lineno: int) -> LineStat:
        """The statement holding line ``lineno`` of ``filename`` (made on its first event)."""
        smap = self._maps.get(filename)
        if smap is None:
            smap = self._maps[filename] = SourceMap(filename)
        first = smap.line_to_first.get(lineno, lineno)
        key = (filename, first)
        stat = self.lines.get(key)
        if stat is None:
            statement = smap.statements.get(first) or Statement(
                filename, first, first, "", (), linecache.getline(filename, first).strip())
            stat = self.lines[key] = LineStat(statement)
        return stat

    def _global(self, frame, event, arg, now=None):
        # ``now``: the C hook's clock at the event (the cost of calling into Python is then the
        # hook's, not the line's); the Python hook reads its own
        if event != "call":
            return None
        if not self._is_user(frame.f_code):
            # a library's Python function (NumPy's wrappers): the hook's call costs the line
            # running; counted, to be taken out
            stack = self._stack
            if stack and stack[-1][1] is not None:
                stack[-1][1].library_calls += 1
            return None
        if now is None:
            now = time.perf_counter_ns()
        stack = self._stack
        if stack:
            top = stack[-1]
            if top[1] is not None:
                top[1].ns += now - top[3]
                top[1].events += 1
                top[1].user_calls += 1
        entry = self._entry(frame)
        stack.append(entry)
        if self.compiled:
            # what sys.settrace does with the hook returned below: where code restores the C
            # hook from sys.gettrace(), sys.settrace calls it for this frame's events
            frame.f_trace = self._hook
        entry[3] = time.perf_counter_ns()
        return self._hook

    def _local(self, frame, event, arg, now=None, _clock=time.perf_counter_ns):
        # the hot path of the recording (one call per line executed): kept to local lookups
        if now is None:
            now = _clock()
        stack = self._stack
        if not stack:
            return self._hook
        top = stack[-1]
        if top[0] is not frame:
            return self._hook  # a frame resumed out of order (a generator closed late)
        stat = top[1]
        if stat is not None:
            stat.ns += now - top[3]
        if event == "line":
            if stat is not None:
                stat.events += 1  # this call of the hook began in the previous line's time
            lineno = frame.f_lineno
            new = top[6].get(lineno)
            if new is None:
                new = top[6][lineno] = self._stat_at(frame.f_code.co_filename, lineno)
            if new is not stat or lineno == top[2]:
                if top[4] is not None or top[5] is not None:
                    self._finish(top)
                top[1] = new
                # a comprehension's frame runs its statement's loop: its lines are time of the
                # statement, which began once in the enclosing frame (counted as a hit there,
                # each iteration a hit, its bytes counted 20,000 times)
                if not top[7]:
                    new.hits += 1
                    if new.hits == 1:
                        top[5] = (new.ns, _peak(), _resident())
                    if new.state == 0 or new.state == 2 or (
                            new.state == 1 and recaptured(new.hits)):
                        top[4] = self._capture(frame, new)
            top[2] = lineno
        elif event == "return":
            if stat is not None:
                stat.events += 1
            self._finish(top)
            stack.pop()
            if stack:
                stack[-1][3] = _clock()
            return self._hook
        top[3] = _clock()
        return self._hook

    # -- captures -------------------------------------------------------------------------------

    def _capture(self, frame, stat: LineStat) -> Capture | None:
        if stat.state == 1:  # captured before: again by reference, where it fits
            if stat.capture is None or stat.capture.copied or stat.capture.code is not \
                    frame.f_code:  # a lambda's body on its statement's line: other names
                return None
            return self._take(frame, stat, again=stat.capture)
        return self._take(frame, stat)

    def _take(self, frame, stat: LineStat, again: Capture | None = None) -> Capture | None:
        """The values ``stat`` reads now, kept; ``again``: the capture they replace (kept
        instead where the new one does not fit the budget)."""
        names = stat.statement.names
        if stat.statement.is_loop or stat.statement.kind in ("FunctionDef", "AsyncFunctionDef",
                                                              "ClassDef", "Import", "ImportFrom"):
            stat.state = 3
            stat.why_not = "not replayable: a loop header, a definition or an import"
            return None
        copy = stat.state == 2
        if again is not None:  # what it holds is counted anew below
            self._release(again)
        local_ns = frame.f_locals
        global_ns = frame.f_globals
        values: dict[str, object] = {}
        new_bytes = 0
        counted: set[int] = set()
        originals: list[tuple[str, np.ndarray]] = []
        for name in names:
            if name in local_ns:
                value = local_ns[name]
            elif name in global_ns:
                value = global_ns[name]
            else:
                continue  # a builtin, or a name bound later
            if isinstance(value, np.ndarray):
                originals.append((name, value))
                if copy or value.nbytes <= SMALL_COPY:
                    value = value.copy()
                    new_bytes += value.nbytes
                elif id(value) not in self.held_ids and id(value) not in counted:
                    new_bytes += value.nbytes
                counted.add(id(value))
            values[name] = value
        self._compare_inputs(stat, values)
        if again is not None and self.held + new_bytes > self.budget_bytes:
            self._hold(again)  # the earlier capture stays
            return None
        if self.held + new_bytes > self.budget_bytes:
            stat.state = 3
            stat.over_budget = True
            stat.why_not = (f"over the capture budget ({new_bytes / 2**20:.0f} MiB more than the "
                            f"{self.budget_bytes / 2**20:.0f} MiB left to it)")
            return None
        # which of them were one memory under two names (a copy held loses it)
        aliases = frozenset(frozenset((a, b)) for k, (a, x) in enumerate(originals)
                            for b, y in originals[k + 1:] if np.may_share_memory(x, y))
        capture = Capture(values=values, globals=global_ns, copied=copy, nbytes=new_bytes,
                          aliases=aliases,
                          hit=stat.hits, code=frame.f_code, start_ns=stat.ns,
                          input_bytes=sum(v.nbytes for v in values.values()
                                          if isinstance(v, np.ndarray)))
        if stat.first_bytes < 0:
            stat.first_bytes = capture.input_bytes
        self._hold(capture)
        if not copy:
            capture.prints = {n: fingerprint(v) for n, v in values.items()
                              if isinstance(v, np.ndarray)}
        stat.capture = capture
        stat.state = 1
        return capture

    @staticmethod
    def _compare_inputs(stat: LineStat, values: dict) -> None:
        """At the first run of a statement in a loop or a function, its inputs' sums; at each
        run captured again, which of them differ (the same inputs, the same value:
        loop-invariant, the whole statement or a part reading only the same ones). A name
        known to differ is not summed again; once every name has, nothing is. The first run,
        not the second, is the reference even where it costs a function called once its sums:
        calls alternating between two arrays show at the second."""
        st = stat.statement
        if (st.loop is None and st.function is None) or (stat.hits > 1
                                                         and stat.input_sums is None):
            return
        try:  # in the program's own run: nothing here may raise into it
            if stat.hits == 1:
                stat.input_sums = input_sums(values)
                return
            first, varying = stat.input_sums, stat.varying
            now = input_sums({n: v for n, v in values.items() if n not in varying})
            if now is None:  # more bytes than the first run's: not compared again
                stat.input_sums = None
                return
            varying |= {n for n in first.keys() - varying
                        if n not in now or not _equal_sums(first[n], now[n])}
            varying |= now.keys() - first.keys()
            stat.compared += 1
            if varying >= first.keys():  # nothing left that could be the same
                stat.input_sums = None
        except Exception:  # an array NumPy cannot lay out contiguously, a comparison failing
            stat.input_sums = None

    def _finish(self, top: list) -> None:
        """At the end of a statement's execution: its first execution's time and memory; did
        it change what its capture holds?"""
        if top[5] is not None:
            ns, peak, resident = top[5]
            top[5] = None
            if top[1] is not None:
                top[1].first_ns = top[1].ns - ns
                top[1].peak_growth = _peak() - peak
                top[1].first_kept = max(0, _resident() - resident) if resident else 0
        capture = top[4]
        if capture is None:
            return
        top[4] = None
        stat = top[1]
        if stat is not None:
            capture.run_ns = stat.ns - capture.start_ns
        # replaced while it ran (a recursive call's run of the same statement took it again):
        # already released, and no longer what the statement replays
        if stat is None or capture.copied or stat.capture is not capture:
            return
        if capture.changed_since():
            stat.mutates = True
            stat.state = 2  # capture again, by copy, at the next execution
            self._release(capture)

    def _hold(self, capture: Capture) -> None:
        """The arrays ``capture`` holds, counted: each array's bytes once, however many
        captures hold it."""
        for v in capture.values.values():
            if isinstance(v, np.ndarray):
                holders = self.held_ids.get(id(v), 0)
                if not holders:
                    self.held += v.nbytes
                self.held_ids[id(v)] = holders + 1

    def _release(self, capture: Capture) -> None:
        """The arrays ``capture`` held, given back (their bytes, where no other capture holds
        them); once."""
        if capture.released:
            return
        capture.released = True
        for v in capture.values.values():
            if isinstance(v, np.ndarray):
                holders = self.held_ids.get(id(v), 0) - 1
                if holders > 0:
                    self.held_ids[id(v)] = holders
                else:
                    self.held_ids.pop(id(v), None)
                    self.held -= v.nbytes

    # -- running --------------------------------------------------------------------------------

    def start(self) -> None:
        self._previous = sys.gettrace()
        self._t0 = time.perf_counter_ns()
        # only this thread: the lines' clocks are one stack (threads the program starts run
        # untraced, and their time stays with the line that waits for them)
        if self.compiled:
            self._hook.install()
        else:
            sys.settrace(self._global)

    def adopt(self, frame) -> None:
        """Trace an already running frame from its next line (a ``with profile():`` block)."""
        if not self._is_user(frame.f_code):
            return
        entry = self._entry(frame)
        entry[3] = time.perf_counter_ns()
        self._stack.append(entry)
        frame.f_trace = self._hook

    def stop(self) -> None:
        if self._t0 == 0 or self.wall_ns:
            return  # not started, or stopped already
        if self.compiled:
            self._hook.uninstall()
        if _compiled is not None and isinstance(self._previous, _compiled.Hook):
            self._previous.install()  # an outer recording's C hook (a nested profile())
        else:
            sys.settrace(self._previous)
        now = time.perf_counter_ns()
        while self._stack:  # frames left running (stop() called inside a traced function)
            top = self._stack.pop()
            if top[1] is not None:
                top[1].ns += now - top[3]
            self._finish(top)
        self.wall_ns = now - self._t0
