"""Running a small program under ``run_program`` for a test."""

import textwrap

from chokepoint.program import run_program


def lines_of(tmp_path, roof, source: str) -> dict[str, dict]:
    """The report's rows of ``source`` (dedented, saved as ``prog.py`` in ``tmp_path``) run
    under ``run_program``, by line number."""
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(source))
    report = run_program(str(path), roof=roof, budget_s=20)
    return {r["source"].rsplit(":", 1)[1]: r for r in report.lines}
