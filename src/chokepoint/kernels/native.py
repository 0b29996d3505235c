"""The public functions' common call in C: ``_native.c``, compiled on first use.

A small call through Python spent about 1.5-2 us before its kernel ran: the public function's
type checks, the fast path (:func:`.api.call_fast`) and numba's dispatcher, which unboxes each
array into a new reference-counted structure. NumPy's whole ufunc call on 1000 elements costs
1.2-1.8 us, so on batch-sized arrays our kernels lost on overhead alone. ``_native.c`` makes
the fast path's checks in C and runs the kernel as a numba ``cfunc`` (the same generated
source as the other variants, :func:`.engine_numba.native_kernel`): the serial kernel below
``settings.parallel_min`` elements, and up to ``CHECKED_MAX`` the variant the chooser decided,
while its live :class:`~.adaptive.Decision` has calls left (and at its end asks the chooser
for the next one). What it declines (anything but plain C-contiguous native arrays of one
shape, a size class without a decision, the NumPy engine) it leaves to the Python path,
untouched. It reads no module's globals: the launcher's :class:`~.engine_numba.Settings` are
handed to it whenever they change (:func:`push`), and the fields of a ``Decision`` and a
``PackedMask`` it reads are found by name when it is configured (renamed, it fails to load).

The public function calls its :class:`Lane`'s ``Native`` first. The Python path fills the
lane: a dtype's kernels on its first small or mid-size call, a size class's decision on its
first mid-size call.

The extension is built with the C compiler Python was built with (``sysconfig``), against the
NumPy in use, into the user cache directory, once per source, Python and NumPy version (about
a second). Each build records the library's size and SHA-256 beside it (``.sha256``); a library
that does not match (truncated, damaged, or from a build that did not finish) is never loaded:
it is built again, or, where it cannot be, the Python path runs, with a warning. Without a
compiler (or with ``CHOKEPOINT_NATIVE=0``) everything runs as before, with the Python overhead;
:func:`status` says which, and ``chokepoint info`` shows it.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np

from ..cachefile import locked, write_atomic

__all__ = ["MAP1", "MAP2", "MASK_BACKWARD", "MASK_FORWARD", "STALE_BUILD_SECONDS", "STEP_TIMEOUT",
           "Lane", "build_lock", "disabled", "extension", "fingerprint", "intact", "load",
           "push", "status"]

#: a Native's kinds: its arguments (see _native.c)
MAP1, MAP2, MASK_FORWARD, MASK_BACKWARD = 0, 1, 2, 3
SOURCE = Path(__file__).with_name("_native.c")
#: seconds the compiler, and then the linker, may take
STEP_TIMEOUT = 120
#: a build directory older than this was left by a build that was killed (SIGTERM during the
#: build, before its temporary directory could be removed): removed by the next process
STALE_BUILD_SECONDS = 2 * STEP_TIMEOUT + 60
#: held while the C extension is built and loaded; held over a fork (.forks), new in the child
build_lock = threading.Lock()
#: held while a Lane fills its table (compiling cfuncs): one for all lanes, reset after a fork
#: (a child forked while another thread held it would wait for it for ever)
_lane_lock = threading.RLock()


def _after_fork_in_child() -> None:
    global build_lock, _lane_lock
    build_lock = threading.Lock()
    _lane_lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
_module: ModuleType | None = None
_why: str | None = None  # why there is no module (None: not tried yet, or loaded)
_tried = False


def _cache_path(source: Path = SOURCE) -> Path:
    import platformdirs

    key = b"\0".join([source.read_bytes(), sys.version.encode(), np.__version__.encode(),
                      sysconfig.get_platform().encode()])
    digest = hashlib.sha1(key).hexdigest()[:16]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return (Path(platformdirs.user_cache_dir("chokepoint")) / "native"
            / f"{source.stem}-{digest}{suffix}")


def _compile(target: Path, source: Path = SOURCE) -> None:
    """Compile ``source`` (``_native.c``) into ``target`` (written under another name, then
    renamed: two processes may build at once). Raises OSError or CalledProcessError."""
    cc = sysconfig.get_config_var("CC")
    ldshared = sysconfig.get_config_var("LDSHARED")
    if not cc or not ldshared or os.name == "nt":
        raise OSError("no C compiler configured for this Python")
    paths = sysconfig.get_paths()
    includes = [f"-I{paths['include']}", f"-I{paths['platinclude']}", f"-I{np.get_include()}"]
    cflags = shlex.split(sysconfig.get_config_var("CFLAGS") or "")  # as setuptools: -arch
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="build-") as tmp:
        obj = Path(tmp) / f"{source.stem}.o"
        lib = Path(tmp) / target.name
        ccshared = sysconfig.get_config_var("CCSHARED") or "-fPIC"
        log = Path(tmp) / "build.log"
        _step([*shlex.split(cc), *cflags, *shlex.split(ccshared), "-O2", "-c", *includes,
               str(source), "-o", str(obj)], log)
        _step([*shlex.split(ldshared), str(obj), "-o", str(lib)], log)
        recorded = fingerprint(lib)
        os.replace(lib, target)
    write_atomic(_record_path(target), recorded)


def _step(argv: list[str], log: Path) -> None:
    """Run one step of the build, its output into the file ``log``. Not a pipe: a child that
    another thread forked meanwhile keeps a copy of the pipe's end, and the build then waited
    for an end of file while the child waited for the build's lock."""
    with open(log, "wb") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=STEP_TIMEOUT)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, argv, stderr=log.read_bytes())


def _record_path(library: Path) -> Path:
    """Where the size and hash of the built ``library`` are recorded: beside it."""
    return library.with_name(library.name + ".sha256")


def fingerprint(library: Path) -> str:
    """The size and SHA-256 of ``library``, as recorded after its build.

    Parameters
    ----------
    library : Path
        A file.

    Returns
    -------
    str
        ``"<size> <sha256 hex>"``.
    """
    data = library.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


def intact(library: Path) -> bool:
    """Whether ``library`` is the file its build recorded, byte for byte.

    A truncated extension passes ``dlopen`` and then kills the process with SIGBUS when a page
    past its end is touched, so a library is loaded only when its record matches.

    Parameters
    ----------
    library : Path
        The built extension.

    Returns
    -------
    bool
        False where it, or its record, is missing, unreadable or different.
    """
    try:
        return _record_path(library).read_text() == fingerprint(library)
    except OSError:
        return False


def _ensure_built(library: Path, source: Path = SOURCE) -> None:
    """Build ``library`` unless an intact one is there; one process builds at a time.

    Raises what :func:`_compile` raises, after a warning where a damaged library stays.
    """
    if intact(library):
        return
    # two builds at once could leave one's library beside the other's record
    with locked(library.parent / "build.lock", wait=STALE_BUILD_SECONDS):
        if intact(library):  # built by the process that held the lock
            return
        damaged = library.exists()
        try:
            _compile(library, source)
        except Exception as exc:
            if damaged:
                warnings.warn(f"chokepoint: the cached C extension {library} is damaged and "
                              f"could not be built again ({type(exc).__name__}: {exc}); every "
                              "call takes the Python path", RuntimeWarning, stacklevel=4)
            raise


def _remove_stale_builds(folder: Path) -> None:
    """Remove the build directories that killed builds left in ``folder``: ``build-*`` (and
    ``tmp*``, the name they had before) older than :data:`STALE_BUILD_SECONDS`."""
    try:
        entries = [e for e in folder.iterdir() if e.name.startswith(("build-", "tmp"))]
    except OSError:
        return  # no cache directory yet, or not readable
    for entry in entries:
        try:
            stale = entry.is_dir() and time.time() - entry.stat().st_mtime > STALE_BUILD_SECONDS
        except OSError:
            continue  # removed meanwhile by another process
        if stale:
            shutil.rmtree(entry, ignore_errors=True)


def _import(path: Path, name: str = "chokepoint.kernels._native") -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def disabled() -> bool:
    """Whether ``CHOKEPOINT_NATIVE=0`` (or ``off``, ``no``, ``false``) turns the C path off."""
    return os.environ.get("CHOKEPOINT_NATIVE", "1").strip().lower() in ("0", "off", "no",
                                                                         "false")


def load() -> ModuleType | None:
    """The compiled ``_native`` module, built on the first call (about a second), configured to
    see which engine is in use; None where it cannot be built or loaded (see :func:`status`):
    then every call takes the Python path."""
    global _module, _why, _tried
    if _tried:
        return _module
    with build_lock:
        if _tried:
            return _module
        try:
            if disabled():
                _why = "off (CHOKEPOINT_NATIVE=0)"
            else:
                _module = _built()
                from . import engine_numba

                # the settings, under their lock once the module is published: a change made
                # while it was built reaches it too
                engine_numba.configure()
        except Exception as exc:  # an optimisation: whatever failed, the Python path runs
            detail = getattr(exc, "stderr", b"") or b""
            if isinstance(detail, bytes):
                detail = detail.decode(errors="replace")
            _why = f"not built: {exc}" + (f"\n{detail.strip()[-400:]}" if detail else "")
        finally:
            _tried = True
    return _module


def _build(source: Path, name: str) -> ModuleType:
    """``source`` built (once, cached) and imported as ``name``; the caller holds
    :data:`build_lock`."""
    path = _cache_path(source)
    _remove_stale_builds(path.parent)
    _ensure_built(path, source)
    return _import(path, name)


def _built() -> ModuleType:
    module = _build(SOURCE, "chokepoint.kernels._native")
    from . import adaptive, backend, engine_numba
    from .mask import PackedMask

    module.configure(backend.scoped_engine, vars(backend), "default_engine", engine_numba,
                     PackedMask, adaptive.Decision)
    module.set_period_max(adaptive.PERIOD_MAX)
    return module


def push(settings) -> None:
    """Hand the launcher's :class:`~.engine_numba.Settings` to the C path, where it is loaded
    (:func:`.engine_numba.configure` calls this whenever they change)."""
    if _module is not None:
        _push(_module, settings)


def _push(module: ModuleType, settings) -> None:
    # a threshold past the C path's integers means never: its largest
    module.set_launch(min(settings.parallel_min, sys.maxsize), settings.stream_min_bytes,
                      settings.stream_maps, settings.lock_free)


def extension(source: Path, name: str) -> ModuleType:
    """Another C extension of the package (its source beside its module), built and cached as
    ``_native.c`` is (see the module's docstring) and imported as ``name``.

    Raises
    ------
    OSError, subprocess.CalledProcessError
        Where it cannot be built (no compiler, a read-only cache); ImportError where it cannot
        be loaded. Callers fall back to Python.
    """
    with build_lock:
        return _build(source, name)


def status() -> str:
    """One line: whether the public functions' common calls run in C, and if not, why."""
    if load() is not None:
        return "on (the common small call runs in C)"
    return _why or "off"


class Lane:
    """One public function's C path (or one parameter value's): a ``Native`` table that the
    Python path fills, per input and output dtype, on the first small call it takes.

    ``native`` is None until then (and stays None without the compiled module); the public
    function calls it first: it returns the result, or None where the Python path must take
    the call.

    Parameters
    ----------
    kind : int
        :data:`MAP1`, :data:`MAP2`, :data:`MASK_FORWARD` or :data:`MASK_BACKWARD`.
    fresh : numpy.dtype, optional
        The dtype of a new output (when ``out`` is None); None: the input's.
    at_zero : int, optional
        :data:`MASK_FORWARD`: the masks' ``at_zero``.
    """

    __slots__ = ("added", "at_zero", "fresh", "kind", "native", "planned", "variants")

    def __init__(self, kind: int, fresh: np.dtype | None = None, at_zero: int = 0) -> None:
        self.kind = kind
        self.fresh = fresh
        self.at_zero = at_zero
        self.native = None
        self.added: set[tuple] = set()  # the (input, output) dtypes tried
        #: the (input, output, size class, streaming) plans given
        self.planned: set[tuple] = set()
        #: (input, output) -> variant ("parallel", "stream") -> whether its kernel is in
        self.variants: dict[tuple, dict[str, bool]] = {}

    def add(self, op: str, dtype: np.dtype, out_dtype: np.dtype, constants: tuple) -> None:
        """Run op's serial kernel here on small calls of ``dtype`` inputs into ``out_dtype``
        (once; a cfunc compiled, or loaded from numba's cache, on the first call)."""
        with _lane_lock:
            self._add(op, dtype, out_dtype, constants)

    def _add(self, op, dtype, out_dtype, constants, wanted: tuple = ()) -> bool:
        """Put op's serial kernel for these dtypes in the table, and the variants in
        ``wanted`` (``"parallel"``, ``"stream"``: only mid-size calls need them, so small ones
        do not compile them); whether the table has them all. Hold ``_lane_lock``."""
        key = (dtype, out_dtype)
        made = self.variants.setdefault(key, {})
        missing = tuple(v for v in wanted if v not in made)
        if key in self.added and not missing:
            return self.native is not None and all(made[v] for v in wanted)
        self.added.add(key)
        module = load()
        if module is None:
            return False
        from . import engine_numba as engine

        try:
            serial = engine.native_kernel(op, dtype, out_dtype)
        except Exception as exc:  # the Python path still runs the calls: say why, once
            _warn(op, dtype, exc)
            made.update(parallel=False, stream=False)  # not tried again, for any variant
            return False
        variants = {}
        for variant in missing:  # one that does not compile leaves the others
            try:
                variants[variant] = engine.native_kernel(op, dtype, out_dtype, mode=variant)
            except Exception as exc:
                _warn(op, dtype, exc, variant)
            made[variant] = variant in variants
        # the op can stream (the C path reads the tuning's flag each call): the calls that
        # can wait for their kernel (True), which the Python path's call gives; False where
        # it did not compile (they take the parallel kernel's plan in C)
        stream = variants.get("stream") or (engine.has_stream_variant(op)
                                            and made.get("stream", True))
        try:
            native = self.native
            if native is None:
                native = module.Native(self.kind, engine.CHECKED_MAX - 1, self.at_zero)
            fresh = out_dtype == (dtype if self.fresh is None else self.fresh)
            native.add(dtype, out_dtype, serial, variants.get("parallel"),
                       [float(c) for c in constants], fresh, stream)
        except Exception as exc:
            _warn(op, dtype, exc)
            made.update(parallel=False, stream=False)
            return False
        self.native = native  # published once it has its kernels
        return all(made[v] for v in wanted)

    def add_plan(self, op: str, dtype: np.dtype, out_dtype: np.dtype, constants: tuple,
                 size: int, decision, stream: bool = False) -> None:
        """Run the mid-size calls of size class ``size`` here, by the chooser's live
        ``decision`` (an :class:`~.adaptive.Decision`), while it has calls left; with
        ``stream``, the calls that can stream (:func:`.engine_numba.can_stream`), whose
        decision weighs the streaming kernel too."""
        with _lane_lock:
            key = (dtype, out_dtype, size, stream)
            wanted = ("parallel", "stream") if stream else ("parallel",)
            if key not in self.planned and self._add(op, dtype, out_dtype, constants, wanted):
                decide, record = _chooser_calls(op, ("native", dtype.char, out_dtype.char),
                                                stream)
                self.native.add_plan(dtype, out_dtype, size, decision, decide, record, stream)
            self.planned.add(key)


def _warn(op: str, dtype: np.dtype, exc: Exception, variant: str = "serial") -> None:
    """Say once that a kernel of the C path did not compile (its calls take the Python
    path)."""
    warnings.warn(f"chokepoint: {op} on {dtype} stays on the Python path"
                  f"{'' if variant == 'serial' else f' where its {variant} variant runs'}: "
                  f"its C path kernel did not compile ({type(exc).__name__}: {exc})",
                  RuntimeWarning, stacklevel=4)


def _chooser_calls(op: str, signature: tuple, stream: bool = False):
    """The C path's calls into the chooser at the end of a period, as api.call_fast makes
    them: ``decide(n) -> (variant, timed)`` and ``record(n, variant, seconds)``. Deciding in
    C spares the Python path around the call, which after a call that streamed megabytes
    runs cold: 40-60 us of the 190-640 us a deciding call took on 2e6 elements. With
    ``stream``, the decisions of the calls that can stream (three candidates, as
    :func:`.engine_numba.launch` weighs them)."""
    from . import engine_numba

    # its own signature: the cfuncs are compiled (or loaded) before their first call, and the
    # Python path's first calls, which may compile its kernels, stay uncounted
    key = engine_numba.chooser_key(op, stream)
    engine_numba.chooser.compiled(key, ("serial", "parallel", "stream"), signature)
    default, others = engine_numba.candidates(stream)

    def decide(n: int) -> tuple[str, bool]:
        return engine_numba.chooser.decide(key, n, default, others)

    def record(n: int, variant: str, seconds: float) -> None:
        engine_numba.chooser.record(key, n, variant, seconds, signature)

    return decide, record
