"""Whole programs: ``chokepoint run prog.py`` and ``chokepoint.profile()`` (see docs/run.md).

Only the recorder loads with this package; the analysis loads after the program has run (see
:mod:`.api`).
"""

from .api import profile, run_program

__all__ = ["SCHEMA", "ProgramReport", "analyse_program", "profile", "run_program"]


def __getattr__(name: str):
    if name in ("SCHEMA", "ProgramReport", "analyse_program"):
        from . import summary

        return getattr(summary, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
