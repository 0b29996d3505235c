"""The peer libraries the benchmarks race chokepoint against, where they are installed."""

from __future__ import annotations

__all__ = ["peers"]


def peers():
    """The peer libraries that are installed: ``(numexpr or None, torch or None)``."""
    try:
        import numexpr as ne
    except ImportError:
        ne = None
    try:
        import torch
    except ImportError:
        torch = None
    return ne, torch
