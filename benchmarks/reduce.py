"""Fused reductions: chokepoint.fuse against NumPy and numexpr, in one process.

    flock /tmp/chokepoint-bench.lock .venv/bin/python benchmarks/reduce.py [--sizes 100000
        10000000] [--rounds 7] [--row 1000] [--only TEXT]

Issue 33's item 3: a chain that ends in a reduction, or a reduction read by later elementwise
work (over all elements, or along the last axis of rows of 1000), as one fused call against
NumPy as written (a full temporary per operation and a second
pass for the reduction) and numexpr where it can say it (``sum``/``prod``/``min``/``max`` as
the outermost operation, one thread in numexpr 2.x's reductions) and torch CPU (its own
``softmax``, ``layer_norm`` and ``vector_norm``; all its threads). Both dtypes, a cache-sized
and a DRAM-sized vector; issue 33's softmax case is ``--sizes 16777216 --row 4096`` (a (4096,
4096) array). Timed with ``measure_interleaved`` (rounds alternating the candidates'
order, about 0.1 s each a round); printed: each one's median and NumPy's time over it (above
1.0x: faster than NumPy). Values are checked against NumPy's first (within 1e-2
relative in float32, 1e-10 in float64: summation orders differ): fuse's must be; numexpr's
float32 sums (one element at a time into a float32) are marked "value off" where they miss.
"""

from __future__ import annotations

import argparse
import sys

import numexpr
import numpy as np

try:
    import torch
except ImportError:  # torch is a test dependency; without it its column is left out
    torch = None

import chokepoint
from chokepoint.measure.timer import measure_interleaved


@chokepoint.fuse
def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def _np_softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


@chokepoint.fuse
def row_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_row_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@chokepoint.fuse
def layer_norm(x, gain):
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt(np.mean(centred**2, axis=-1, keepdims=True) + 1e-5) * gain


def _np_layer_norm(x, gain):
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt(np.mean(centred**2, axis=-1, keepdims=True) + 1e-5) * gain


def _torch(cases: dict, a, b, rows, gain) -> None:
    """torch CPU's own calls beside each case it has (on tensors sharing the arrays' memory)."""
    ta, tb, trows, tgain = (torch.from_numpy(v) for v in (a, b, rows, gain))
    F = torch.nn.functional
    calls = {
        "np.sum(a * b)": lambda: torch.sum(ta * tb),
        "np.sum((a - b) ** 2)": lambda: torch.sum((ta - tb) ** 2),
        "np.linalg.norm(a)": lambda: torch.linalg.vector_norm(ta),
        "np.max(np.abs(a))": lambda: torch.max(torch.abs(ta)),
        "np.mean(np.sqrt(np.abs(a)))": lambda: torch.mean(torch.sqrt(torch.abs(ta))),
        "row softmax": lambda: torch.softmax(trows, dim=-1),
        "layer norm": lambda: F.layer_norm(trows, (trows.shape[-1],), weight=tgain, eps=1e-5),
    }
    for name, case in cases.items():
        for key, call in calls.items():
            if name.startswith(key):
                case["torch"] = lambda call=call: call().numpy()


def _cases(n: int, dtype: str, row: int = 1000) -> dict[str, dict]:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    dot, dist, norm, peak, mean, arg = (chokepoint.fuse(e) for e in (
        "np.sum(a * b)", "np.sum((a - b) ** 2)", "np.linalg.norm(a)", "np.max(np.abs(a))",
        "np.mean(np.sqrt(np.abs(a)))", "np.argmin(np.abs(a - 0.5 * b))"))
    local = {"a": a, "b": b}
    rows = a.reshape(-1, row)  # rows of 1000, as a layer of a network's activations
    gain = b[:row]
    cases = {
        "np.sum(a * b)": {"numpy": lambda: np.sum(a * b), "fuse": lambda: dot(a=a, b=b),
                          "numexpr": lambda: numexpr.evaluate("sum(a * b)", local_dict=local)},
        "np.sum((a - b) ** 2)": {
            "numpy": lambda: np.sum((a - b) ** 2), "fuse": lambda: dist(a=a, b=b),
            "numexpr": lambda: numexpr.evaluate("sum((a - b) ** 2)", local_dict=local)},
        "np.linalg.norm(a)": {"numpy": lambda: np.linalg.norm(a), "fuse": lambda: norm(a=a)},
        "np.max(np.abs(a))": {
            "numpy": lambda: np.max(np.abs(a)), "fuse": lambda: peak(a=a),
            "numexpr": lambda: numexpr.evaluate("max(abs(a))", local_dict=local)},
        "np.mean(np.sqrt(np.abs(a)))": {"numpy": lambda: np.mean(np.sqrt(np.abs(a))),
                                        "fuse": lambda: mean(a=a)},
        "np.argmin(np.abs(a - 0.5 * b))": {"numpy": lambda: np.argmin(np.abs(a - 0.5 * b)),
                                           "fuse": lambda: arg(a=a, b=b)},
        "softmax (exp(x - x.max()) / sum)": {"numpy": lambda: _np_softmax(a),
                                              "fuse": lambda: softmax(a)},
        f"row softmax (axis=-1, rows of {row})": {"numpy": lambda: _np_row_softmax(rows),
                                                   "fuse": lambda: row_softmax(rows)},
        f"layer norm (axis=-1, rows of {row})": {"numpy": lambda: _np_layer_norm(rows, gain),
                                                  "fuse": lambda: layer_norm(rows, gain)},
    }
    if torch is not None:
        _torch(cases, a, b, rows, gain)
    return cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 10_000_000])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--row", type=int, default=1000, help="row length of the row cases")
    parser.add_argument("--only", default="", help="cases whose name contains this text")
    args = parser.parse_args(argv)
    for n in args.sizes:
        for dtype in args.dtypes:
            for name, case in _cases(n, dtype, args.row).items():
                if args.only not in name:
                    continue
                results = {label: np.asarray(fn()) for label, fn in case.items()}
                rtol = 1e-2 if dtype == "float32" else 1e-10  # numexpr sums one by one
                differs = {label for label, r in results.items()
                           if not np.allclose(r, results["numpy"], rtol=rtol, atol=rtol * 1e-3)}
                if "fuse" in differs:
                    raise SystemExit(f"{name}: fuse differs from NumPy")
                for fn in case.values():  # compile, choose variants, touch the pages
                    for _ in range(10):
                        fn()
                measured = dict(zip(case, measure_interleaved(
                    list(case.values()), min_time=0.1, repeats=args.rounds), strict=True))
                base = measured["numpy"].median
                cells = ", ".join(f"{label} {m.median * 1e3:.3f} ms ({base / m.median:.2f}x)"
                                  + (" (value off)" if label in differs else "")
                                  for label, m in measured.items())
                print(f"{name} ({n:.0e} {dtype}): {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
