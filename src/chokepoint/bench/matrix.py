"""The benchmark matrix: every kernel x {float32, float64} x {1e3, 1e5, 2e6, 3e7 elements}
against each peer's best formulation (NumPy with ``out=``, numexpr with ``out=``, torch CPU).

Each cell times ours and the peers round-robin in one process
(:func:`chokepoint.measure.measure_interleaved`) and reports the ratio best peer / ours
(above 1: ours is faster). ``chokepoint bench --matrix`` and ``benchmarks/matrix.py`` run it;
it prints the table, the geometric mean, the cells below 1.0x and, for the largest size, each
kernel against its bandwidth floor (its bytes at the faster of the read and triad bandwidths,
whose kernels are timed in the cell's own alternation).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import chokepoint
from chokepoint.kernels.adaptive import settle
from chokepoint.measure.timer import measure_interleaved

__all__ = ["Cell", "cells", "main", "run"]

SIZES = (1_000, 100_000, 2_000_000, 30_000_000)
QUICK_SIZES = (1_000, 100_000, 2_000_000)
#: cells of this many elements or more are also timed against their floor, whose rate is
#: measured among the cell's own calls (the VM's bandwidth drifts by half within minutes: one
#: run's floors, measured once at its start in a fast phase, put every 3e7 cell 1.2-1.7x above
#: them; measured just before each cell, the rates of one run spread over 28-45 GB/s)
FLOOR_MIN = 10**7
#: the arrays the floor's rate is measured on (the read and the triad bandwidth)
FLOOR_BYTES = 1 << 27
#: alternations per cell, each a block of min_time per callable: the median of 7 (as %timeit's
#: 7 runs). With 5, a 3e7 cell (3 calls a block) moved by a third when a phase of the VM's
#: bandwidth, or the chooser's re-measure of the serial kernel, hit two of the five blocks
REPEATS = 7


@dataclass
class Cell:
    """One kernel, dtype and size: our time, the best peer's, and the bytes it must move."""

    kernel: str
    dtype: str
    n: int
    ours_s: float
    peer: str
    peer_s: float
    nbytes: int
    #: the floor's rate (B/s), timed among the cell's own calls (large cells only), else None
    bandwidth: float | None = None

    @property
    def ratio(self) -> float:
        return self.peer_s / self.ours_s

    @property
    def floor_ratio(self) -> float | None:
        """Our time over the floor (the cell's bytes at ``bandwidth``); None without one."""
        return self.ours_s / (self.nbytes / self.bandwidth) if self.bandwidth else None


def _cases(n: int, dtype, ne, torch) -> dict[str, tuple[int, Callable, dict[str, Callable]]]:
    """kernel -> (bytes it must move, ours, {peer: call}); every call writes into preallocated
    arrays except the "fresh" ones."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal(n).astype(dtype)
    G = rng.standard_normal(n).astype(dtype)
    Gi = G.copy()  # in place: overwritten by every call (the values keep their sign pattern)
    Out = np.empty_like(X)
    B = np.empty(n, bool)
    U = np.empty(n, np.uint8)
    size = X.itemsize
    _, mask = chokepoint.relu_with_mask(X)
    bool_mask = X > 0
    env = {"X": X, "G": G, "Gi": Gi, "B": bool_mask}
    t = {}
    if torch is not None:
        t = {k: torch.from_numpy(v) for k, v in
             {"X": X, "G": G, "Gi": Gi, "O": Out, "B": B, "M": bool_mask}.items()}

    def numexpr(expr, out, names="XG"):
        local = {k: env[k] for k in names}
        return lambda: ne.evaluate(expr, local_dict=local, out=out)

    def peers(numpy_calls: dict, numexpr_call=None, torch_call=None) -> dict:
        found = dict(numpy_calls)
        if ne is not None and numexpr_call is not None:
            found["numexpr"] = numexpr_call()
        if torch is not None and torch_call is not None:
            found["torch"] = torch_call()
        return found

    return {
        "relu_grad -> uint8": (n * (size + 1), lambda: chokepoint.relu_grad(X, out=U), peers(
            {"numpy greater(out=bool)": lambda: np.greater(X, 0, out=B)},
            lambda: numexpr("X > 0", B, "X"),
            lambda: (lambda: torch.gt(t["X"], 0, out=t["B"])))),
        "relu_grad -> bool": (n * (size + 1), lambda: chokepoint.relu_grad(X, out=B), peers(
            {"numpy greater(out=bool)": lambda: np.greater(X, 0, out=B)},
            lambda: numexpr("X > 0", B, "X"),
            lambda: (lambda: torch.gt(t["X"], 0, out=t["B"])))),
        "relu out=": (2 * n * size, lambda: chokepoint.relu(X, out=Out), peers(
            {"numpy maximum(out=)": lambda: np.maximum(X, 0, out=Out)},
            lambda: numexpr("where(X > 0, X, 0)", Out, "X"),
            lambda: (lambda: torch.clamp(t["X"], min=0, out=t["O"])))),
        "relu_backward out=": (3 * n * size, lambda: chokepoint.relu_backward(G, X, out=Out), peers(
            {"numpy multiply(G, X > 0, out=)": lambda: np.multiply(G, X > 0, out=Out)},
            lambda: numexpr("where(X > 0, G, 0)", Out),
            lambda: (lambda: torch.ops.aten.threshold_backward.grad_input(
                t["G"], t["X"], 0, grad_input=t["O"])))),
        "relu_backward in place": (
            3 * n * size, lambda: chokepoint.relu_backward(Gi, X, out=Gi), peers(
                {"numpy multiply(G, X > 0, out=G)": lambda: np.multiply(Gi, X > 0, out=Gi)},
                lambda: (lambda: ne.evaluate("where(X > 0, Gi, 0)",
                                             local_dict={"X": X, "Gi": Gi}, out=Gi)),
                lambda: (lambda: t["Gi"].mul_(t["X"] > 0)))),
        "relu_backward fresh": (3 * n * size, lambda: chokepoint.relu_backward(G, X), peers(
            {"numpy G * (X > 0)": lambda: G * (X > 0)},
            lambda: (lambda: ne.evaluate("where(X > 0, G, 0)", local_dict={"X": X, "G": G})),
            lambda: (lambda: torch.ops.aten.threshold_backward(t["G"], t["X"], 0)))),
        "relu_with_mask out=": (
            2 * n * size + n // 8, lambda: chokepoint.relu_with_mask(X, out=Out), peers(
                {"numpy maximum + greater(out=bool)":
                 lambda: (np.maximum(X, 0, out=Out), np.greater(X, 0, out=B))},
                None,
                lambda: (lambda: (torch.clamp(t["X"], min=0, out=t["O"]),
                                  torch.gt(t["X"], 0, out=t["B"]))))),
        "backward from the mask": (
            2 * n * size + n // 8, lambda: chokepoint.relu_backward(G, mask, out=Out), peers(
                {"numpy multiply(G, bool mask, out=)":
                 lambda: np.multiply(G, bool_mask, out=Out),
                 "chokepoint from X": lambda: chokepoint.relu_backward(G, X, out=Out)},
                lambda: numexpr("where(B, G, 0)", Out, "GB"),
                lambda: (lambda: torch.mul(t["G"], t["M"], out=t["O"])))),
        "leaky_relu out=": (2 * n * size, lambda: chokepoint.leaky_relu(X, 0.01, out=Out), peers(
            {"numpy maximum(X, 0.01 X, out=)":
             lambda: np.maximum(X, np.multiply(X, 0.01, out=Out), out=Out)},
            lambda: numexpr("where(X > 0, X, X * 0.01)", Out, "X"),
            lambda: (lambda: torch._C._nn.leaky_relu(t["X"], 0.01, out=t["O"])))),
        "hardtanh out=": (2 * n * size, lambda: chokepoint.hardtanh(X, out=Out), peers(
            {"numpy clip(out=)": lambda: np.clip(X, -1, 1, out=Out)},
            lambda: numexpr("where(X < -1, -1, where(X > 1, 1, X))", Out, "X"),
            lambda: (lambda: torch.clamp(t["X"], -1, 1, out=t["O"])))),
    }


def _time_cell(ours: Callable, peers: dict, min_time: float, repeats: int = REPEATS,
               probes: dict | None = None) -> tuple[float, str, float, float | None]:
    """(our median, the best peer's name, its median, the floor's rate in B/s or None).

    ``probes``: ``kind -> (call, bytes it moves)`` (:func:`.roofline.bandwidth_kernels`),
    timed in the same alternation as ours and the peers, so that the floor's rate is the one
    the cell ran at; the faster kind gives it."""
    names = list(peers)
    settle(ours)  # through the chooser's exploration: at 3e7 a repeat is one call
    for peer in peers.values():
        peer()  # numexpr compiles its string, torch allocates
    extra = list((probes or {}).values())
    times = measure_interleaved([ours, *peers.values(), *(call for call, _ in extra)],
                                min_time=min_time, repeats=repeats)
    medians = [m.median for m in times]
    best = min(range(len(names)), key=lambda i: medians[i + 1])
    rates = [moved / medians[1 + len(names) + k] for k, (_, moved) in enumerate(extra)]
    return medians[0], names[best], medians[best + 1], max(rates) if rates else None


def cells(sizes=SIZES, dtypes=("float32", "float64"), min_time: float = 0.02,
          progress: Callable[[str], None] | None = None, repeats: int = REPEATS,
          probes: dict | None = None) -> list[Cell]:
    """Time every cell (see the module notes). ``probes``: the bandwidth kernels timed among
    each cell of :data:`FLOOR_MIN` elements or more, for its floor (see :func:`_time_cell`)."""
    from .peers import peers

    ne, torch = peers()
    found = []
    for dtype in dtypes:
        for n in sizes:
            for kernel, (nbytes, ours, rivals) in _cases(n, np.dtype(dtype), ne, torch).items():
                ours_s, peer, peer_s, bandwidth = _time_cell(
                    ours, rivals, min_time, repeats, probes if n >= FLOOR_MIN else None)
                cell = Cell(kernel, dtype, n, ours_s, peer, peer_s, nbytes, bandwidth)
                found.append(cell)
                if progress is not None:
                    progress(f"{dtype} {n:>10} {kernel:24} {cell.ratio:5.2f}x ({peer})")
    return found


def _table(found: list[Cell]) -> str:
    sizes = sorted({c.n for c in found})
    floors = any(c.bandwidth for c in found)
    lines = []
    for dtype in sorted({c.dtype for c in found}):
        lines.append(f"\n{dtype}: best peer / chokepoint (above 1: ours faster)")
        lines.append(f"{'kernel':26}" + "".join(f"{n:>12,}" for n in sizes)
                     + ("   3e7 / floor" if floors else ""))
        for kernel in dict.fromkeys(c.kernel for c in found):
            row = {c.n: c for c in found if c.kernel == kernel and c.dtype == dtype}
            text = f"{kernel:26}" + "".join(f"{row[n].ratio:>11.2f}x" if n in row else " " * 12
                                           for n in sizes)
            big = row.get(max(sizes))
            if big is not None and big.floor_ratio is not None:
                text += f"   {big.floor_ratio:8.2f}x"
            lines.append(text)
    return "\n".join(lines)


def summary(found: list[Cell]) -> tuple[float, list[Cell]]:
    """The geometric mean of the ratios, and the cells below 1.0x."""
    geomean = math.exp(sum(math.log(c.ratio) for c in found) / len(found)) if found else 0.0
    return geomean, [c for c in found if c.ratio < 1.0]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The matrix's command-line options."""
    parser.add_argument("--quick", action="store_true",
                        help="sizes up to 2e6 only (no 3e7 cells)")
    parser.add_argument("--min-time", type=float, default=0.02,
                        help="seconds per timing repeat (default 0.02)")
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help=f"alternations per cell; the median is kept (default {REPEATS})")


def run(args: argparse.Namespace) -> int:
    """Run the matrix with parsed options and print it."""
    import sys

    from chokepoint.measure.machine import machine_info
    from chokepoint.measure.roofline import bandwidth_kernels, measure_floor_bandwidth

    repeats = getattr(args, "repeats", REPEATS)  # chokepoint bench --matrix has no --repeats
    if repeats < 1:
        raise SystemExit(f"--repeats must be at least 1, got {repeats}")
    sizes = QUICK_SIZES if args.quick else SIZES
    floors = max(sizes) >= FLOOR_MIN
    machine = machine_info()
    # the bandwidth now, for the header; a kernel with several streams can beat a single read
    # stream: the faster of read and triad (each large cell measures its own, see cells)
    _, said = measure_floor_bandwidth(FLOOR_BYTES, 0.05)
    print(f"{machine['cpu']}, {machine['cores']} cores; backend {chokepoint.get_backend()}; "
          f"{said}" + ("; each 3e7 cell's floor is measured among its own calls" if floors
                       else ""), flush=True)
    found = cells(sizes, min_time=args.min_time, repeats=repeats,
                  progress=lambda line: print(line, file=sys.stderr, flush=True),
                  probes=bandwidth_kernels(FLOOR_BYTES, ("read_bw", "triad_bw"))
                  if floors else None)
    print(_table(found))
    rates = [c.bandwidth for c in found if c.bandwidth]
    if rates:
        print(f"\nthe floors' rates, each the faster of read and triad timed among the cell's "
              f"own calls: {min(rates) / 1e9:.1f}-{max(rates) / 1e9:.1f} GB/s")
    geomean, slower = summary(found)
    print(f"\ngeometric mean of best peer / ours: {geomean:.2f}x over {len(found)} cells")
    print(f"cells below 1.0x: {len(slower)}")
    for c in slower:
        print(f"  {c.dtype} {c.n:>10,} {c.kernel:24} {c.ratio:.2f}x: ours "
              f"{c.ours_s * 1e6:.1f} us, {c.peer} {c.peer_s * 1e6:.1f} us")
    return 0


def main(argv=None) -> int:
    """``python benchmarks/matrix.py [--quick] [--min-time S] [--repeats N]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
