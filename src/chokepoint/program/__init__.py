"""Whole programs: ``chokepoint run prog.py`` and ``chokepoint.profile()`` (see docs/run.md)."""

from .api import SCHEMA, ProgramReport, analyse_program, profile, run_program

__all__ = ["SCHEMA", "ProgramReport", "analyse_program", "profile", "run_program"]
