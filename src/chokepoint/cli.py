"""``chokepoint`` on the command line (also ``python -m chokepoint``).

Thin: parse the arguments, call the API, print.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import math
import os
import re
import sys

__all__ = ["add_explain_arguments", "add_race_arguments", "candidate", "demo_candidates", "emit",
           "json_text", "main", "non_negative_float", "output_path", "parse_sizes",
           "positive_float", "positive_int", "run_explain", "run_race"]


class _Parser(argparse.ArgumentParser):
    """argparse, saying a mistake where it is made: an unknown option or a mistyped subcommand
    gets the close matches (``did you mean --repeats?``) and the usage of the (sub)command it
    was given to, exit status 2. Long options must be written whole (``allow_abbrev=False``),
    so that a typo is never taken for another option; an unknown option is refused by the
    subcommand itself, never left over for the top level (whose usage says nothing of it) or
    taken as a statement."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        """As argparse, but arguments no option or positional takes are an error here."""
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unrecognized(extras))
        return namespace, extras

    def _unrecognized(self, extras: list[str]) -> str:
        options = [w for w in extras if w.startswith("--") or re.fullmatch(r"-[A-Za-z]", w)]
        said = f"unrecognized arguments: {' '.join(extras)}"
        for word in options:
            close = difflib.get_close_matches(word.split("=", 1)[0],
                                              list(self._option_string_actions), n=2)
            if close:
                said += f"; did you mean {' or '.join(close)} for {word}?"
        return said

    def error(self, message: str):
        """Print the usage and ``message`` with close matches of a mistyped choice; exit 2."""
        choice = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
        if choice:
            close = difflib.get_close_matches(choice[1], re.findall(r"'(.*?)'", choice[2]),
                                              n=2)
            if close:
                message += f"; did you mean {' or '.join(close)}?"
        super().error(message)


def positive_float(text: str) -> float:
    """An option's value as a finite number above zero (``--min-time``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """An option's value as a finite number at or above zero (``--rtol``, ``--atol``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An option's value as an integer above zero (``--repeats``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def output_path(text: str) -> str:
    """A file option's value (``--html FILE``) made absolute when it is parsed, before the
    user's code runs: code that changes directory (``os.chdir``) does not move the file."""
    return os.path.abspath(text)


def json_text(data: object, indent: int = 2) -> str:
    """``data`` as strict JSON, for everything the command prints or writes as JSON: NaN and
    infinities as null (``Infinity`` is not JSON), NumPy scalars as Python's."""
    from .report.program import json_ready

    return json.dumps(json_ready(data), indent=indent, allow_nan=False)


def candidate(text: str) -> str:
    """A candidate statement: refused when empty or only whitespace (it would time a no-op)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"a candidate must not be empty or only whitespace, "
                                         f"got {text!r}")
    return text


def parse_sizes(text: str) -> list[int]:
    """``"1e3,1e4,100000"`` -> ``[1000, 10000, 100000]``; refused unless every size is a
    positive whole number (as :func:`~chokepoint.race` requires)."""
    try:
        sizes = [float(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"sizes must be numbers separated by commas: {text!r}") \
            from exc
    if not sizes or not all(size.is_integer() and size >= 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive whole numbers: {text!r}")
    return [int(size) for size in sizes]


def add_race_arguments(parser: argparse.ArgumentParser, *, statements: bool = True) -> None:
    """The race options, shared by ``chokepoint race`` and the ``%race`` magic."""
    parser.add_argument("-s", "--setup", default="", help="setup code run before each candidate")
    if statements:
        parser.add_argument("statements", nargs="+", metavar="STMT", type=candidate,
                            help="candidates")
    parser.add_argument("--reference", type=int, default=0,
                        help="index of the candidate the others must agree with (default 0)")
    parser.add_argument("--sizes", type=parse_sizes,
                        help="sweep sizes, e.g. 1e3,1e4,1e5 (setup sees n)")
    parser.add_argument("--min-time", type=positive_float, default=0.2,
                        help="seconds per timing repeat (default 0.2)")
    parser.add_argument("--repeats", type=positive_int, default=5,
                        help="timing repeats (default 5)")
    parser.add_argument("--rtol", type=non_negative_float,
                        help="relative tolerance for agreement")
    parser.add_argument("--atol", type=non_negative_float,
                        help="absolute tolerance for agreement")
    parser.add_argument("--rotate", action="store_true",
                        help="cycle through copies of the inputs when they fit in the cache")
    parser.add_argument("--processes", type=positive_int, metavar="N",
                        help="set up and time each candidate in N fresh worker processes "
                             "(round-robin, repeats merged), as pyperf does")
    parser.add_argument("--json", action="store_true", help="print the result as JSON only")
    parser.add_argument("--plot", metavar="FILE", type=output_path,
                        help="write the main plot (.png or .svg)")
    parser.add_argument("--html", metavar="FILE", type=output_path,
                        help="write a self-contained HTML report")


class _Progress:
    """A transient progress line on stderr (shown only on a terminal)."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import Progress

        self._progress = Progress(console=Console(stderr=True), transient=True)
        self._task = self._progress.add_task("racing", total=total)
        self._started = False

    def __call__(self, description: str) -> None:
        if not self._started:
            self._progress.start()
            self._started = True
        else:
            self._progress.advance(self._task)
        from .report.text import escape_markup

        self._progress.update(self._task, description=escape_markup(description[:60]))

    def close(self) -> None:
        if self._started:
            self._progress.stop()


def run_race(args: argparse.Namespace, statements, namespace: dict | None = None):
    """Run a race from parsed options; returns the RaceResult."""
    from .measure.race import race

    processes = getattr(args, "processes", None)
    per_size = len(statements) * processes if processes else len(statements) + 1
    total = per_size * max(1, len(args.sizes or []))  # in-process: + the round-robin timing
    progress = _Progress(total)
    try:
        return race(statements, args.setup, reference=args.reference, sizes=args.sizes,
                    rtol=args.rtol, atol=args.atol, min_time=args.min_time,
                    repeats=args.repeats, rotate=args.rotate, namespace=namespace,
                    progress=progress, processes=processes)
    finally:
        progress.close()


def _write(result, what: str, path: str) -> None:
    """Write ``result``'s plot (``what == "plot"``) or HTML report to ``path``."""
    if what == "plot":
        result.plot(path)
        return
    from pathlib import Path

    Path(path).write_text(result.to_html(), encoding="utf-8")


def emit(result, args: argparse.Namespace) -> int:
    """Print the result as JSON (``--json``) or as its text report, then write the files the
    options ask for (``--plot``, ``--html``). Serves races and explanations alike.

    Returns
    -------
    int
        0, or 1 when a file could not be written (said on stderr; the result is printed
        already, so nothing measured is lost).
    """
    if args.json:
        print(json_text(result.to_dict()), flush=True)
    else:
        print(str(result), end="", flush=True)
    status = 0
    for what in ("plot", "html"):
        path = getattr(args, what, None)
        if not path:
            continue
        try:
            _write(result, what, path)
        except (OSError, ValueError, ImportError) as exc:
            print(f"chokepoint: cannot write --{what} {path}: {exc}", file=sys.stderr)
            status = 1
            continue
        if not args.json:
            print(f"{what} written to {path}")
    return status


def _user_output(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """Where the user's code prints while it runs: stderr with ``--json`` (stdout then holds
    the JSON only), else stdout."""
    return contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()


def _race(args: argparse.Namespace) -> int:
    count = len(args.statements)
    if not 0 <= args.reference < count:
        print(f"chokepoint race: --reference {args.reference} does not index a candidate: "
              f"there are {count} (0..{count - 1})", file=sys.stderr)
        return 2
    with _user_output(args):
        result = run_race(args, args.statements)
    status = emit(result, args)
    if result.interrupted and "Ctrl-C" in result.interrupted:
        return 130
    if not any(c.error is None for c in result.candidates):
        return 1  # nothing ran: the table says why
    return status


def _setup_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from the setup code (compiled as ``<setup>``), not chokepoint."""
    if isinstance(exc, SyntaxError) and exc.filename == "<setup>":
        return True
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<setup>":
            return True
        tb = tb.tb_next
    return False


def add_explain_arguments(parser: argparse.ArgumentParser, *, statement: bool = True) -> None:
    """The explain options, shared by ``chokepoint explain`` and the ``%explain`` magic."""
    parser.add_argument("-s", "--setup", default="", help="setup code that makes the inputs")
    if statement:
        parser.add_argument("statement", metavar="STMT", nargs="?",
                            help="the code to explain: an expression, statements separated by "
                                 "';' or newlines, or a call of your functions")
        parser.add_argument("-f", "--file", metavar="FILE",
                            help="explain the code in FILE (a cell or a script fragment) "
                                 "instead of STMT; its lines are reported as FILE:LINE")
    parser.add_argument("--min-time", type=positive_float, default=0.1,
                        help="seconds per timing repeat of the statement (default 0.1)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON only")
    parser.add_argument("--plot", metavar="FILE", type=output_path,
                        help="write the operations' roofline chart (.png or .svg)")
    parser.add_argument("--html", metavar="FILE", type=output_path,
                        help="write a self-contained HTML report")


def run_explain(args: argparse.Namespace, statement, namespace: dict | None = None):
    """Explain from parsed options, with a status line on stderr; returns the Explanation.
    ``statement`` is a string or a :class:`~chokepoint.measure.statements.Statement`."""
    from rich.console import Console

    from .explain import explain
    from .report.text import escape_markup

    first = str(statement).strip().splitlines()[0] if str(statement).strip() else ""
    with Console(stderr=True).status(f"explaining {escape_markup(first[:50])} "
                                     "(runs it several times)"):
        return explain(statement, args.setup, namespace=namespace, min_time=args.min_time)


def _explain(args: argparse.Namespace) -> int:
    import warnings

    from .explain import ExplainError
    from .measure.statements import Statement

    if (args.statement is None) == (args.file is None):
        print("chokepoint explain: give the code to explain, either as STMT or with -f FILE "
              "(not both)", file=sys.stderr)
        return 2
    statement = args.statement
    if args.file is not None:
        try:
            with open(args.file, encoding="utf-8") as handle:
                statement = Statement.parse(handle.read(), filename=args.file)
        except OSError as exc:
            print(f"chokepoint explain: cannot read {args.file}: {exc.strerror}",
                  file=sys.stderr)
            return 2
        except (SyntaxError, ValueError) as exc:
            print(f"chokepoint explain: {args.file} does not parse: {exc}", file=sys.stderr)
            return 2
    try:
        with warnings.catch_warnings(), _user_output(args):
            warnings.simplefilter("ignore", RuntimeWarning)  # they are in the report
            explanation = run_explain(args, statement)
    except ExplainError as exc:
        print(f"chokepoint explain: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not _setup_error(exc):
            raise
        print(f"chokepoint explain: the setup raised {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    return emit(explanation, args)


DEMO_SETUP = """\
import chokepoint
X = np.random.randn(3072, {cols})        # CIFAR-10 sized: 3072 features x {cols} samples
B = np.empty(X.shape, bool)
O = np.empty(X.shape, np.uint8)
"""


def demo_candidates() -> list[str]:
    """The origin question's candidates, and chokepoint's."""
    statements = ["np.ceil(np.clip(X, 0, 1))", "(X >= 0).view('i1')"]
    try:
        import numexpr  # noqa: F401

        statements.append("ne.evaluate('X >= 0').view('i1')")
    except ImportError:
        pass
    statements += ["np.greater(X, 0, out=B).view('i1')", "np.maximum(np.sign(X), 0)",
                   "chokepoint.relu_grad(X)", "chokepoint.relu_grad(X, out=O)"]
    return statements


def _demo(args: argparse.Namespace) -> int:
    cols = 1000 if args.quick else 10000
    setup = DEMO_SETUP.format(cols=cols)
    statements = demo_candidates()
    if any(s.startswith("ne.") for s in statements):
        setup = "import numexpr as ne\n" + setup
    print("The origin question on this machine: the ReLU derivative of X = randn(3072, "
          f"{cols}), the question's ways, NumPy's and chokepoint's. Where is the "
          "bottleneck?\n", flush=True)
    race_args = argparse.Namespace(setup=setup, reference=0, sizes=None, rtol=None, atol=None,
                                   min_time=args.min_time, repeats=5, rotate=False,
                                   json=False, plot=args.plot, html=args.html)
    result = run_race(race_args, statements)
    emit(result, race_args)
    if result.load is not None and result.load.busy:
        print("\nThis ranking is not to be trusted: it was measured while other processes "
              f"used {result.load.others:.1f} of the machine's {result.load.cpus} cores. Run "
              "`chokepoint demo` again when the machine is quiet.", flush=True)
    origin = result.candidates[0] if result.candidates else None
    if origin is None or origin.median_s is None:
        return 1
    fastest = result.fastest()
    print(f"\nWhy is {origin.statement} {origin.median_s / fastest.median_s:.0f}x slower than "
          f"{fastest.statement}? Measured here, not recited:\n", flush=True)
    explain_args = argparse.Namespace(setup=setup, min_time=0.1, json=False,
                                      html=args.explain_html, plot=None)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        emit(run_explain(explain_args, origin.statement), explain_args)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from . import bench

    return bench.run(args)


def _roofline(args: argparse.Namespace) -> int:
    from .measure.roofline import cache_path, roofline

    if args.refresh or not cache_path().exists():
        print("measuring this machine's roofline (about 10 s, cached afterwards)...",
              file=sys.stderr, flush=True)
    roof = roofline(refresh=args.refresh)
    if args.json:
        print(json_text(roof.to_dict()))
        return 0
    m = roof.machine
    print(f"{m['cpu']}, {m['cores']} cores, {m['threads']} numba threads "
          f"(measured {roof.measured_at} in {roof.seconds:.1f} s; cache {cache_path()})")
    print(f"{'':10}{'all threads':>14}{'1 thread':>14}")
    for name in ("read", "write", "copy", "triad"):
        spread = roof.spread.get(f"{name}_bw")
        print(f"{name + ' B/s':10}{getattr(roof, name + '_bw') / 1e9:>9.1f} GB/s  "
              f"{getattr(roof, name + '_bw_1t') / 1e9:>9.1f} GB/s"
              + (f"  (run-to-run spread {100 * spread:.0f}%)" if spread is not None else ""))
    print(f"{'float64':10}{roof.flops / 1e9:>7.1f} GFLOP/s{roof.flops_1t / 1e9:>7.1f} GFLOP/s"
          "  elementwise multiply-add")
    for name in sorted(roof.gemm):
        print(f"{name:10}{roof.gemm[name] / 1e9:>7.1f} GFLOP/s"
              f"{roof.gemm_1t.get(name, float('nan')) / 1e9:>7.1f} GFLOP/s  matmul (NumPy's BLAS)")
    return 0


def _info(args: argparse.Namespace) -> int:
    import numpy as np

    from . import __version__, get_backend

    info = {"chokepoint": __version__, "backend": get_backend(), "numpy": np.__version__}
    try:
        import numba

        info.update(numba=numba.__version__, threads=numba.get_num_threads(),
                    threading_layer_config=numba.config.THREADING_LAYER)
    except ImportError:
        info["numba"] = None
    from .kernels import tuning
    from .measure.machine import last_level_cache_bytes

    tuned = tuning.current()
    info["tuning"] = (f"measured {tuned.measured_at} ({tuning.cache_path()})"
                      if tuned.measured_at else "defaults (run `chokepoint tune` to measure)")
    info.update(parallel_min=tuned.parallel_min, stream_maps=tuned.stream_maps,
                stream_masks=tuned.stream_masks,
                stream_from=f"calls whose arrays take {last_level_cache_bytes() >> 20} MiB "
                            "or more (the last-level cache), measured against plain stores")
    from .kernels import native

    info["c_path"] = native.status()  # builds it on first use (about a second)
    from .program.record import hook_status

    info["run_line_hook"] = hook_status()
    from .kernels import pool

    info["result_pool"] = (f"results from {pool.MIN_BYTES >> 20} MiB reuse free buffers, up to "
                           f"{pool.MAX_BYTES >> 20} MiB (CHOKEPOINT_POOL_BYTES)"
                           if pool.MAX_BYTES else "off (CHOKEPOINT_POOL_BYTES=0)")
    for key, value in info.items():
        print(f"{key:24}{value}")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from .kernels import engine_numba, tuning

    print("measuring the kernel variants on this machine (a few seconds)...", file=sys.stderr,
          flush=True)
    tuned = tuning.tune(engine_numba)
    if args.json:
        print(json_text(tuned.to_dict()))
        return 0
    ev = tuned.evidence
    never = tuned.parallel_min >= 1 << 62
    print(f"parallel from {'never' if never else f'{tuned.parallel_min} elements'} "
          f"(the serial kernel below; relu float64, measured at sizes "
          f"{', '.join(ev['parallel_min'])})")
    for key, label in (("stream_maps", "select kernels (relu_backward float32, 32 MB)"),
                       ("stream_masks", "mask kernels (mask backward float32, 32 MB)")):
        t = ev[key]
        print(f"non-temporal stores for {label}: {'yes' if getattr(tuned, key) else 'no'} "
              f"(parallel {t['parallel_s'] * 1e3:.2f} ms, streaming {t['stream_s'] * 1e3:.2f} ms)")
    print(f"cached in {tuning.cache_path()} ({ev['seconds']:.1f} s)")
    from .kernels import native

    print(f"the C path for small calls: {native.status()}")
    load, cores = ev.get("load_average"), os.cpu_count() or 1
    if load is not None and load > 0.5 * cores:
        print(f"note: the machine was busy (load average {load:.1f} on {cores} cores); the "
              "choices reflect that: run `chokepoint tune` again when it is idle",
              file=sys.stderr)
    return 0


def _run_program(args: argparse.Namespace) -> int:
    """``chokepoint run``: the program's exit status (1 when a report file could not be
    written after a program that succeeded, 2 for bad arguments)."""
    from .program import run_program

    if args.module is not None and not args.module:
        print("chokepoint run: -m needs a module name", file=sys.stderr)
        return 2
    if args.module:
        target, rest = args.module[0], args.module[1:]
    elif args.program:
        target, rest = args.program[0], args.program[1:]
    else:
        print("chokepoint run: give a program (prog.py [args ...]) or -m MODULE",
              file=sys.stderr)
        return 2
    if not args.module and not os.path.isfile(target):
        print(f"chokepoint run: no such file: {target}", file=sys.stderr)
        return 2
    # absolute already (output_path), whatever directory the program moves to
    outputs = {what: path for what in ("json", "html") if (path := getattr(args, what))}
    report = run_program(target, rest, module=bool(args.module), include=tuple(args.include),
                         budget_s=args.budget,
                         progress=lambda text: print(f"chokepoint: {text}", file=sys.stderr))
    print(report.text(), file=sys.stderr)
    status = report.exit_status
    for what, path in outputs.items():
        try:
            with open(path, "w", encoding="utf-8") as f:
                if what == "json":
                    f.write(json_text(report.to_dict(), indent=1))
                else:
                    f.write(report.to_html())
        except (OSError, ValueError) as exc:
            print(f"chokepoint: cannot write --{what} {path}: {exc}", file=sys.stderr)
            status = status or 1
            continue
        print(f"chokepoint: {what} written to {path}", file=sys.stderr)
    return status


def _parser() -> argparse.ArgumentParser:
    from . import __version__, bench

    parser = _Parser(
        prog="chokepoint",
        description="Fast ReLU-family kernels for NumPy, and where array code spends its time.")
    parser.add_argument("--version", action="version", version=f"chokepoint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="the origin question, measured on this machine")
    demo.add_argument("--quick", action="store_true", help="a 10x smaller X")
    demo.add_argument("--min-time", type=positive_float, default=0.2,
                      help="seconds per timing repeat (default 0.2)")
    demo.add_argument("--plot", metavar="FILE", type=output_path,
                      help="write the race plot (.png or .svg)")
    demo.add_argument("--html", metavar="FILE", type=output_path,
                      help="write the race's HTML report")
    demo.add_argument("--explain-html", metavar="FILE", type=output_path,
                      help="write the explanation's HTML report")
    demo.set_defaults(run=_demo)
    race_cmd = commands.add_parser("race", help="time candidate statements side by side")
    add_race_arguments(race_cmd)
    race_cmd.set_defaults(run=_race)
    tune_cmd = commands.add_parser("tune", help="measure the kernel variants for this machine "
                                                "and cache the choices")
    tune_cmd.add_argument("--json", action="store_true", help="print the choices as JSON")
    tune_cmd.set_defaults(run=_tune)
    explain_cmd = commands.add_parser("explain", help="where an expression's time goes")
    add_explain_arguments(explain_cmd)
    explain_cmd.set_defaults(run=_explain)
    bench_cmd = commands.add_parser("bench", help="the kernels against NumPy, numexpr, torch "
                                    "and the bandwidth floor")
    bench.add_arguments(bench_cmd)
    bench_cmd.set_defaults(run=_bench)
    roof = commands.add_parser("roofline", help="this machine's bandwidth and compute ceilings")
    roof.add_argument("--refresh", action="store_true", help="measure again, ignore the cache")
    roof.add_argument("--json", action="store_true", help="print JSON only")
    roof.set_defaults(run=_roofline)
    run_cmd = commands.add_parser(
        "run", help="run a program once and say where its time goes, line by line",
        usage="chokepoint run [options] (prog.py | -m MODULE) [args ...]")
    # -m takes the module and everything after it: the module's own options are its own
    run_cmd.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE",
                         help="run a module as `python -m MODULE [args ...]` does")
    run_cmd.add_argument("--json", metavar="FILE", type=output_path,
                         help="write the JSON report to FILE")
    run_cmd.add_argument("--html", metavar="FILE", type=output_path,
                         help="write the HTML report to FILE")
    run_cmd.add_argument("--budget", type=positive_float, default=30.0, metavar="SECONDS",
                         help="seconds of probing after the run, at most (default 30)")
    run_cmd.add_argument("--include", action="append", default=[], metavar="PATH",
                         help="count code under PATH as yours too (repeatable)")
    run_cmd.add_argument("program", nargs=argparse.REMAINDER,
                         help="the program and its arguments")
    run_cmd.set_defaults(run=_run_program)
    info = commands.add_parser("info", help="versions, engine and threads")
    info.set_defaults(run=_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``chokepoint`` command.

    Parameters
    ----------
    argv : list of str, optional
        Arguments; defaults to ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
