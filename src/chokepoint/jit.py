"""numba's compilation as chokepoint uses it (the kernels, fuse's, the roofline's bandwidth
kernels; so it is in neither kernels nor measure): cached on disk where it can be, never failing
because of the cache.

numba's ``cache=True`` turns three faults of the machine into errors of every call:

* A read-only install with an unwritable home (a read-only container) has no directory numba
  can cache in; numba then refuses to compile at all ("cannot cache function ...: no locator
  available"). Here the kernels are compiled in each process instead, with a warning once.
* A damaged cache file (truncated ``.nbi`` or ``.nbc``) raised ``UnpicklingError`` or
  ``EOFError`` on every call. Here the function's cache files are removed and the kernel is
  compiled again and saved, with a warning once.
* A cache that cannot be written (a full disk) leaves the kernel compiled, uncached, with a
  warning once.
"""

from __future__ import annotations

import contextlib
import glob
import warnings
from collections.abc import Callable
from pathlib import Path

import numba
from numba.core import sigutils
from numba.core.ccallback import CFunc

__all__ = ["cfunc", "njit"]

#: the faults already warned about in this process (one warning each)
_said: set[str] = set()


def njit(func: Callable, **options) -> Callable:
    """``numba.njit(cache=True, **options)(func)``, without the cache's faults.

    Parameters
    ----------
    func : callable
        The Python function.
    **options
        numba's options (``parallel``, ``nogil``, ``error_model``...), but not ``cache``.

    Returns
    -------
    callable
        numba's dispatcher, compiled on its first call (loaded from the disk cache when a sound
        one is there).
    """
    dispatcher = numba.njit(**options)(func)
    _cache(dispatcher)
    return dispatcher


def cfunc(signature, func: Callable, **options) -> CFunc:
    """``numba.cfunc(signature, cache=True, **options)(func)``, without the cache's faults.

    Parameters
    ----------
    signature : numba signature or str
        The C callback's signature.
    func : callable
        The Python function.
    **options
        numba's options (``error_model``...), but not ``cache``.

    Returns
    -------
    numba.core.ccallback.CFunc
        The compiled callback (loaded from the disk cache when a sound one is there).
    """
    # numba.cfunc's own steps, with the cache guarded between its creation and the compile
    compiled = CFunc(func, sigutils.normalize_signature(signature), locals={}, options=options)
    _cache(compiled)
    compiled.compile()
    return compiled


def _cache(compiled) -> None:
    """Turn on the disk cache of a dispatcher or cfunc not yet compiled, where one can be."""
    try:
        compiled.enable_caching()
    except RuntimeError as exc:  # no writable directory: numba would refuse to compile
        if "no locator available" not in str(exc):
            raise
        _warn_once("uncached", "chokepoint: numba finds no writable directory to cache its "
                   f"kernels in ({exc}); they are compiled in each process (set NUMBA_CACHE_DIR "
                   "to a writable directory to keep them)")
        return
    # numba's own private attributes (_cache here, _impl below): it has no public hook on its
    # cache's load and save, and a third-party library's internals are not chokepoint's names
    cache = compiled._cache
    cache.load_overload = _guarded_load(cache, cache.load_overload)
    cache.save_overload = _guarded_save(cache, cache.save_overload)


def _guarded_load(cache, load: Callable) -> Callable:
    """``cache.load_overload`` that answers None (compile) where the cache files are damaged,
    after removing them: numba would read the damaged index again to save the new kernel."""

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except Exception as exc:  # the disk cache is an optimisation: compile instead
            folder = Path(cache.cache_path)
            _remove_files(folder, cache._impl.filename_base)
            _warn_once("damaged", "chokepoint: a damaged numba cache file in "
                       f"{folder} ({type(exc).__name__}: {exc}) was removed; the kernel is "
                       "compiled again")
            return None

    return load_overload


def _guarded_save(cache, save: Callable) -> Callable:
    """``cache.save_overload`` that leaves the kernel uncached where it cannot be written, and
    saves under a lock on the function's index: numba reads its index, picks the first free
    data file and writes both, so that two processes saving two signatures of one kernel at
    once could leave one signature's entry naming the other's machine code."""

    def save_overload(sig, data) -> None:
        try:
            lock = Path(cache.cache_path) / f"{cache._impl.filename_base}.lock"
            with _locked(lock):
                save(sig, data)
        except Exception as exc:  # a full disk, a folder made read-only: the kernel runs
            _warn_once("unsaved", "chokepoint: numba could not cache a kernel "
                       f"({type(exc).__name__}: {exc}); it is compiled again in each process")

    return save_overload


@contextlib.contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path`` (created where missing) across processes; no lock
    where the platform has no ``fcntl`` (Windows)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_files(folder: Path, base: str) -> None:
    """Remove a function's numba cache files in ``folder``: its index and its data files."""
    for path in [folder / f"{base}.nbi", *folder.glob(f"{glob.escape(base)}.*.nbc")]:
        with contextlib.suppress(OSError):  # removed by another process meanwhile
            path.unlink(missing_ok=True)


def _warn_once(fault: str, message: str) -> None:
    """Warn ``message`` (a RuntimeWarning) the first time ``fault`` happens in this process."""
    if fault not in _said:
        _said.add(fault)
        warnings.warn(message, RuntimeWarning, stacklevel=4)
