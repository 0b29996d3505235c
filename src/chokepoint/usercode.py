"""Which code is the user's: files outside the standard library, site-packages and chokepoint.

``chokepoint run`` records the lines of the user's files; explain traces the arrays the user's
code makes. Both ask :func:`user_file`.
"""

from __future__ import annotations

import os
import site
import sysconfig

__all__ = ["user_file"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _library_dirs() -> tuple[str, ...]:
    dirs = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    if getattr(site, "ENABLE_USER_SITE", False) and site.getusersitepackages():
        dirs.add(site.getusersitepackages())
    dirs.add(_PACKAGE_DIR)
    return tuple(sorted(os.path.realpath(d) + os.sep for d in dirs if d))


_LIBRARY_DIRS = _library_dirs()


def user_file(filename: str, include: tuple[str, ...] = (), *,
              pseudo: bool = False) -> bool:
    """Whether code from ``filename`` is the user's: a real file outside the standard library,
    site-packages and chokepoint, or under one of ``include`` (absolute prefixes). Code without
    a file (``<string>``, ``<explain>``) is the user's only with ``pseudo``, or from IPython."""
    if not filename or filename.startswith("<"):
        return pseudo or filename.startswith("<ipython-input") or filename.startswith("<cell")
    path = os.path.realpath(filename)
    if any(path == p or path.startswith(p.rstrip(os.sep) + os.sep) for p in include):
        return True  # asked for by name: even inside site-packages
    return not any(path.startswith(d) for d in _LIBRARY_DIRS)
