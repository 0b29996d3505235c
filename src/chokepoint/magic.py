"""IPython magics: ``%load_ext chokepoint``, then ``%race`` and ``%explain`` (line and cell).

``%race -s SETUP STMT [STMT ...]`` takes the options of ``chokepoint race``; ``%explain -s SETUP
STMT`` those of ``chokepoint explain``. Statements and setup see the user's namespace (its arrays
are copied, never modified). The result is returned, so Jupyter displays it.

How a line is read: when what follows the options (``-s SETUP``, ``--json``, ``--min-time T``,
...; they may also come after it) is one Python statement, it is taken as written, quotes and
all: ``%explain (A >= 0).view('i1')`` and ``%race -s "X = A" (X >= 0).view('i1')`` need no
outer quotes. Otherwise the line is split as a shell would (``%race "X + 1" "X * 2"``: one
candidate per word, as today).

As a cell magic, ``%%race``'s candidates come from the cell: with no blank line in it, each
non-empty line (comments aside) is a candidate; with blank lines, each block of lines between
them is one candidate, which may span several lines::

    %%race -s "X = A.copy()"
    Y = np.empty_like(X)
    np.maximum(X, 0, out=Y)

    chokepoint.relu(X)
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import linecache
import re
import shlex
import sys
import textwrap

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


def _word(line: str, i: int) -> tuple[str, int] | None:
    """The shell word starting at ``line[i]`` (as ``shlex.split`` reads it) and the index after
    it; None when a quote is not closed."""
    out, n = [], len(line)
    while i < n and not line[i].isspace():
        c = line[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            out.append(line[i + 1])
            i += 2
        elif c == "'":
            j = line.find("'", i + 1)
            if j < 0:
                return None
            out.append(line[i + 1:j])
            i = j + 1
        elif c == '"':
            i += 1
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\':
                    i += 1
                out.append(line[i])
                i += 1
            if i >= n:
                return None
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out), i


def _skip_space(line: str, i: int) -> int:
    while i < len(line) and line[i].isspace():
        i += 1
    return i


def _option(word: str, parser: argparse.ArgumentParser) -> tuple[bool, bool] | None:
    """For an option word of ``parser``: (whether the option takes a value, whether the word
    holds it already: ``--min-time=1``, ``-sX=1``); None for anything else."""
    table = parser._option_string_actions
    if not word.startswith("-") or word == "-":
        return None
    name, attached = word, False
    if word.startswith("--"):
        name, attached = word.split("=", 1)[0], "=" in word
        if name not in table:  # argparse takes unique prefixes of long options
            matches = [o for o in table if o.startswith("--") and o.startswith(name)]
            if len(matches) != 1:
                return None
            name = matches[0]
    elif word not in table:
        name, attached = word[:2], True
        if name not in table:
            return None
    takes_value = table[name].nargs != 0
    if attached and not takes_value:
        return None
    return takes_value, attached


def _leading_options(line: str, parser) -> tuple[list[str], int] | None:
    """The option words at the start of ``line`` and where the rest starts; None when they
    cannot be read (an unclosed quote, an option missing its value)."""
    words: list[str] = []
    i = _skip_space(line, 0)
    while i < len(line):
        read = _word(line, i)
        if read is None:
            return None
        word, end = read
        if word == "--":  # the end of the options
            return words, _skip_space(line, end)
        option = _option(word, parser)
        if option is None:
            return words, i
        words.append(word)
        i = _skip_space(line, end)
        if option == (True, False):
            read = _word(line, i) if i < len(line) else None
            if read is None:
                return None
            words.append(read[0])
            i = _skip_space(line, read[1])
    return words, i


def _split_line(line: str, parser) -> tuple[list[str], str] | None:
    """``line`` as (option words, the rest as written), the options read from its start and,
    long ones (``--json``), from its end; None when the options cannot be read."""
    lead = _leading_options(line, parser)
    if lead is None:
        return None
    options, start = lead
    rest = line[start:].rstrip()
    i = 0
    while i < len(rest):
        read = _word(rest, i)
        if read is None:
            break
        word, end = read
        if i > 0 and word.startswith("--") and _option(word, parser) is not None:
            tail = _leading_options(rest[i:], parser)
            if tail is not None and i + tail[1] >= len(rest):
                return options + tail[0], rest[:i].strip()
        i = _skip_space(rest, end)
    return options, rest.strip()


def _one_statement(source: str) -> bool:
    """Whether ``source`` is one Python statement (and not just a string literal, which is a
    quoted statement for the shell-like reading)."""
    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    if len(body) != 1:
        return False
    node = body[0]
    return not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant | ast.JoinedStr)
                and isinstance(getattr(node.value, "value", ""), str))


def _as_written(line: str, parser, *, several: bool) -> tuple[list[str], str] | None:
    """(option words, statement) when ``line`` holds options and one statement, as written;
    None to read it as a shell would. With ``several`` (race's candidates), a line whose shell
    words are each a statement (``X +X``) is several candidates, as before."""
    split = _split_line(line, parser)
    if split is None or not _one_statement(split[1]):
        return None
    options, statement = split
    try:
        words = shlex.split(statement)
    except ValueError:
        words = []
    if any(re.match(r"--[A-Za-z]", w) for w in words):
        return None  # an unknown option (--no-such), not Python's double minus: argparse says
    if several and len(words) > 1 and all(_one_statement(w) and not w.startswith("-")
                                          for w in words):
        return None  # `A +A`: two candidates, as before (`A -A` is one: -A is no candidate)
    return options, statement


def _check_quoted(words: list[str]) -> None:
    """Refuse shell words that are not each Python: candidates written unquoted
    (``%race np.maximum(A, 0) np.clip(A, 0, None)``) split at their spaces into pieces such
    as ``np.maximum(A,``, and some pieces (``A,``) would run."""
    for word in words:
        try:
            compile(word, "<candidate>", "exec")
        except (SyntaxError, ValueError):
            raise UsageError(
                f"%race: {word!r} is not Python: several candidates are split as a shell "
                "splits words, so quote each one, e.g. %race \"np.maximum(A, 0)\" "
                "\"np.clip(A, 0, None)\"") from None


def _cell_candidates(cell: str) -> list[str]:
    """``%%race``'s candidates: blocks separated by blank lines, else one per line."""
    lines = cell.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()

    def code(line: str) -> bool:
        return bool(line.strip()) and not line.lstrip().startswith("#")

    if all(line.strip() for line in lines):  # no blank line: one candidate per line
        return [line for line in lines if code(line)]
    blocks, block = [], []
    for line in [*lines, ""]:
        if line.strip():
            block.append(line)
            continue
        while block and not code(block[-1]):  # comments around a block are not its code
            block.pop()
        while block and not code(block[0]):
            block.pop(0)
        if block:
            blocks.append(textwrap.dedent("\n".join(block)))
        block = []
    return blocks


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
        """Race candidate statements: ``%race -s SETUP STMT [STMT ...]`` (see ``--help``).

        One statement after the options is taken as written (no outer quotes needed); several
        are shell words (quote each). In ``%%race`` each line of the cell is a candidate, or,
        when the cell has blank lines, each block of lines between them.
        """
        parser = _Parser(prog="%race" if cell is None else "%%race",
                         description="Time candidates side by side (chokepoint race).")
        add_race_arguments(parser, statements=cell is None)
        if cell is None:
            written = _as_written(line, parser, several=True)
            if written is not None:
                options, statement = written
                args = parser.parse_args([*options, "--", statement])
            else:
                args = parser.parse_args(shlex.split(line))
                _check_quoted(args.statements)
            statements = args.statements
        else:
            args = parser.parse_args(shlex.split(line))
            statements = _cell_candidates(cell)
            if not statements:
                raise UsageError("%%race: the cell has no statements")
        return _show(run_race(args, statements, namespace=self.shell.user_ns), args)

    @line_cell_magic
    def explain(self, line: str, cell: str | None = None):
        """Explain where the time of code goes: ``%explain -s SETUP EXPR``; as a cell magic
        the whole cell is explained, line by line (its lines are reported as ``<cell>:N``;
        see ``--help``). A statement after the options is taken as written:
        ``%explain (A >= 0).view('i1')`` needs no outer quotes."""
        from .explain import ExplainError
        from .measure.statements import Statement

        parser = _Parser(prog="%explain" if cell is None else "%%explain",
                         description="Where an expression's time goes (chokepoint explain).")
        add_explain_arguments(parser, statement=False)
        if cell is not None:
            parser.add_argument("--once", action="store_true",
                                help="run the cell once in your namespace, as `chokepoint run` "
                                     "runs a program: its lines ranked by recoverable time, "
                                     "the slowest replayed on copies and their causes measured")
            parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                                help="with --once: seconds of probing after the run, at most")
        written = _as_written(line, parser, several=False) if cell is None else None
        if written is not None:  # options and one statement: the statement as written
            args = parser.parse_args(written[0])
            statement = written[1]
        else:
            args, rest = parser.parse_known_args(shlex.split(line))
            statement = cell.strip() if cell is not None else " ".join(rest).strip()
        if not statement:
            raise UsageError("%explain: give code to explain")
        if cell is not None and args.once:
            return self._explain_once(cell, args)
        try:
            if cell is not None:
                statement = Statement.parse(cell, filename="<cell>")
            explanation = run_explain(args, statement, namespace=self.shell.user_ns)
        except (SyntaxError, ValueError) as exc:
            raise UsageError(f"%%explain: the cell does not parse: {exc}") from exc
        except ExplainError as exc:
            raise UsageError(str(exc)) from exc
        return _show(explanation, args)


    def _explain_once(self, cell: str, args):
        """``%%explain --once``: the cell runs once in the user's namespace under
        :class:`chokepoint.profile` (what it raises is raised after the report); the
        ProgramReport is returned, or written as ``--json``/``--html`` ask."""
        from .program import profile
        from .report.program import json_ready

        if args.plot:
            raise UsageError("%%explain --once: --plot is explain's chart; use --html")
        try:
            code = compile(cell, name := f"<cell-once-{next(_ONCE)}>", "exec")
        except SyntaxError as exc:
            raise UsageError(f"%%explain: the cell does not parse: {exc}") from exc
        # the recorder and the replays read the cell's lines by file name
        linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
        ns = self.shell.user_ns
        if args.setup:
            exec(compile(args.setup, "<setup>", "exec"), ns)
        options = {} if args.budget is None else {"budget_s": args.budget}
        watched = profile(quiet=True, name="%%explain --once", **options)
        try:
            with watched:
                exec(code, ns)
        finally:
            report = watched.report
            if report is not None and report.error is not None:
                print(report.text(), file=sys.stderr)  # the report, then what the cell raised
        if args.html:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(report.to_html())
        if args.json:
            print(json.dumps(json_ready(report.to_dict()), indent=1, allow_nan=False))
        return None if args.json or args.html else report


_ONCE = itertools.count(1)


def load_ipython_extension(ipython) -> None:
    """Register the magics (``%load_ext chokepoint``)."""
    ipython.register_magics(ChokepointMagics)
