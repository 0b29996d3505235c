"""IPython magics: ``%load_ext chokepoint``, then ``%race`` and ``%explain`` (line and cell).

``%race -s SETUP STMT [STMT ...]`` takes the options of ``chokepoint race``; as a cell magic,
each non-empty line of the cell is a candidate. Statements and setup see the user's namespace
(its arrays are copied, never modified). The result is returned, so Jupyter displays it.
"""

from __future__ import annotations

import argparse
import shlex

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from .cli import add_explain_arguments, add_race_arguments, emit, run_explain, run_race

__all__ = ["ChokepointMagics", "load_ipython_extension"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")

    def exit(self, status=0, message=None):
        if message:
            raise UsageError(message)
        raise UsageError("")


def _show(result, args):
    """Print and write what the options ask for; otherwise return the result, which Jupyter
    displays (as HTML) and IPython prints."""
    if args.json or args.plot or args.html:
        emit(result, args)
        return None
    return result


@magics_class
class ChokepointMagics(Magics):
    """chokepoint's magics."""

    @line_cell_magic
    def race(self, line: str, cell: str | None = None):
        """Race candidate statements: ``%race -s SETUP STMT [STMT ...]`` (see ``--help``)."""
        parser = _Parser(prog="%race" if cell is None else "%%race",
                         description="Time candidates side by side (chokepoint race).")
        add_race_arguments(parser, statements=cell is None)
        args = parser.parse_args(shlex.split(line))
        if cell is None:
            statements = args.statements
        else:
            statements = [s for s in cell.splitlines() if s.strip() and
                          not s.lstrip().startswith("#")]
            if not statements:
                raise UsageError("%%race: the cell has no statements")
        return _show(run_race(args, statements, namespace=self.shell.user_ns), args)

    @line_cell_magic
    def explain(self, line: str, cell: str | None = None):
        """Explain where an expression's time goes: ``%explain -s SETUP EXPR``; as a cell
        magic the cell is the expression (see ``--help``)."""
        from .explain import ExplainError

        parser = _Parser(prog="%explain" if cell is None else "%%explain",
                         description="Where an expression's time goes (chokepoint explain).")
        add_explain_arguments(parser, statement=False)
        args, rest = parser.parse_known_args(shlex.split(line))
        statement = cell.strip() if cell is not None else " ".join(rest).strip()
        if not statement:
            raise UsageError("%explain: give an expression to explain")
        try:
            explanation = run_explain(args, statement, namespace=self.shell.user_ns)
        except ExplainError as exc:
            raise UsageError(str(exc)) from exc
        return _show(explanation, args)


def load_ipython_extension(ipython) -> None:
    """Register the magics (``%load_ext chokepoint``)."""
    ipython.register_magics(ChokepointMagics)
