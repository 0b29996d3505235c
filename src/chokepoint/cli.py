"""``chokepoint`` on the command line (also ``python -m chokepoint``).

Thin: parse the arguments, call the API, print.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from . import bench

    print("The origin question, on this machine: how fast is the ReLU derivative, and where is "
          "the floor?\n")
    return bench.run(args)


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
        print(json.dumps(roof.to_dict(), indent=2))
        return 0
    m = roof.machine
    print(f"{m['cpu']}, {m['cores']} cores, {m['threads']} numba threads "
          f"(measured {roof.measured_at} in {roof.seconds:.1f} s; cache {cache_path()})")
    print(f"{'':10}{'all threads':>14}{'1 thread':>12}")
    for name in ("read", "write", "copy", "triad"):
        print(f"{name + ' B/s':10}{getattr(roof, name + '_bw') / 1e9:>10.1f} GB/s"
              f"{getattr(roof, name + '_bw_1t') / 1e9:>7.1f} GB/s")
    print(f"{'float64':10}{roof.flops / 1e9:>7.1f} GFLOP/s{roof.flops_1t / 1e9:>5.1f} GFLOP/s")
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
    for key, value in info.items():
        print(f"{key:24}{value}")
    return 0


def _parser() -> argparse.ArgumentParser:
    from . import __version__, bench

    parser = argparse.ArgumentParser(
        prog="chokepoint",
        description="Fast ReLU-family kernels for NumPy, and where array code spends its time.")
    parser.add_argument("--version", action="version", version=f"chokepoint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="the origin question, measured on this machine")
    bench.add_arguments(demo)
    demo.set_defaults(run=_demo)
    bench_cmd = commands.add_parser("bench", help="the kernels against NumPy, numexpr, torch "
                                    "and the bandwidth floor")
    bench.add_arguments(bench_cmd)
    bench_cmd.set_defaults(run=_bench)
    roof = commands.add_parser("roofline", help="this machine's bandwidth and compute ceilings")
    roof.add_argument("--refresh", action="store_true", help="measure again, ignore the cache")
    roof.add_argument("--json", action="store_true", help="print JSON only")
    roof.set_defaults(run=_roofline)
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
