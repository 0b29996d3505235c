"""``chokepoint run`` twice on each program of a folder kept out of the repository: the
headline, its causes and rewrite, and the wall times, for a table checked against lines timed
by hand.

    python benchmarks/heldout_run.py FOLDER [--out DIR]

Each program runs once plainly (its own time), then twice under ``chokepoint run --json``, one
after the other (a fresh process each). Prints per program and run: the headline line, its
time and recoverable time in ms, its causes (kind:ms), its rewrite (speed-up and saving), the
program's wall time as recorded and the tool's whole wall time. Time nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - start


def _summary(report: dict, tool_s: float) -> str:
    head = report.get("headline") or {}
    line = next((r for r in report["lines"] if r["source"] == head.get("source")), {})
    causes = ",".join(f"{c['kind']}:{c['seconds'] * 1e3:.0f}" for c in line.get("causes", []))
    rewrite = line.get("rewrite")
    said = (f"{rewrite['speedup']:.1f}x saves {rewrite['saved_s'] * 1e3:.0f} ms" if rewrite
            else "-")
    return (f"{(head.get('source') or '-').rsplit('/', 1)[-1]} "
            f"time {line.get('time_s', 0) * 1e3:.0f} ms, recoverable "
            f"{line.get('recoverable_s', 0) * 1e3:.0f} ms [{causes}] rewrite {said}; "
            f"program {report['wall_s']:.2f} s, tool {tool_s:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="where the JSON reports go")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="heldout-"))
    out.mkdir(parents=True, exist_ok=True)
    for program in sorted(args.folder.glob("*.py")):
        plain = _timed([sys.executable, program.name], args.folder)
        print(f"{program.stem}: {plain:.2f} s plain", flush=True)
        for run in (1, 2):
            path = out / f"{program.stem}.{run}.json"
            tool = _timed([sys.executable, "-m", "chokepoint", "run", "--json", str(path),
                           program.name], args.folder)
            try:
                print(f"    {_summary(json.loads(path.read_text()), tool)}", flush=True)
            except (OSError, ValueError, KeyError) as exc:
                print(f"    no report ({exc!r})", flush=True)
    print(f"reports: {out}")


if __name__ == "__main__":
    main()
