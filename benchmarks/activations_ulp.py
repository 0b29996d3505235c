"""How far GELU, SiLU, ELU and softplus are from torch CPU, in ulp, per kernel and dtype.

    python benchmarks/activations_ulp.py [--n 1000000]

Values: ``--n`` points evenly spaced in [-12, 12] and ``--n`` of 3 N(0, 1); the backward kernels
with a gradient of N(0, 1). Three distances from torch's result:

* ulp of torch's result (``np.spacing``) for x >= 0;
* the same for x < 0, where GELU's ``1 + erf(x / sqrt 2)`` and SiLU's derivative are
  differences of larger terms: both sides round them, and torch's float32 erf alone is about
  1e-7 off, thousands of ulp of a result near 0;
* the absolute distance in units of ``eps * (1 + |x|) * max(1, |g|)``, the scale such a
  difference has (the tests' tolerance is 16 ulp of the result plus 16 of these).

Results: benchmarks/RESULTS.md and docs/kernels.md.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import chokepoint


def cases():
    """(label, ours(g, x), torch's(g, x)) per kernel, with torch's default parameters."""
    aten = torch.ops.aten
    t = torch.from_numpy
    yield "gelu", lambda g, x: chokepoint.gelu(x), lambda g, x: aten.gelu(t(x)).numpy()
    yield ("gelu_backward", lambda g, x: chokepoint.gelu_backward(g, x),
           lambda g, x: aten.gelu_backward(t(g), t(x)).numpy())
    yield ("gelu tanh", lambda g, x: chokepoint.gelu(x, approximate="tanh"),
           lambda g, x: aten.gelu(t(x), approximate="tanh").numpy())
    yield ("gelu tanh backward", lambda g, x: chokepoint.gelu_backward(g, x, approximate="tanh"),
           lambda g, x: aten.gelu_backward(t(g), t(x), approximate="tanh").numpy())
    yield "silu", lambda g, x: chokepoint.silu(x), lambda g, x: aten.silu(t(x)).numpy()
    yield ("silu_backward", lambda g, x: chokepoint.silu_backward(g, x),
           lambda g, x: aten.silu_backward(t(g), t(x)).numpy())
    yield "elu", lambda g, x: chokepoint.elu(x), lambda g, x: aten.elu(t(x)).numpy()
    yield ("elu_backward", lambda g, x: chokepoint.elu_backward(g, x),
           lambda g, x: aten.elu_backward(t(g), 1.0, 1, 1.0, False, t(x)).numpy())
    yield ("softplus", lambda g, x: chokepoint.softplus(x),
           lambda g, x: aten.softplus(t(x), 1.0, 20.0).numpy())
    yield ("softplus_backward", lambda g, x: chokepoint.softplus_backward(g, x),
           lambda g, x: aten.softplus_backward(t(g), t(x), 1.0, 20.0).numpy())


def ulps(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """|ours - theirs| in ulp of ``theirs``; 0 where both are the same (NaN and inf too)."""
    same = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))
    wide = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    with np.errstate(invalid="ignore"):
        found = wide / np.spacing(np.abs(theirs)).astype(np.float64)
    return np.where(same, 0.0, found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"torch {torch.__version__}; {2 * args.n} points; ulp of torch's result")
    print(f"{'kernel':20s} {'dtype':8s} {'ulp x>=0':>9s} {'ulp x<0':>9s} {'eps(1+|x|)|g|':>14s}")
    for dtype in (np.float32, np.float64):
        x = np.concatenate([np.linspace(-12, 12, args.n),
                            rng.standard_normal(args.n) * 3]).astype(dtype)
        g = rng.standard_normal(2 * args.n).astype(dtype)
        for label, ours, theirs in cases():
            mine, ref = ours(g, x), theirs(g, x)
            found = ulps(mine, ref)
            scale = np.finfo(dtype).eps * (1 + np.abs(x.astype(np.float64))) * np.maximum(
                1, np.abs(g.astype(np.float64)) if "backward" in label else 1)
            both = np.isfinite(mine) & np.isfinite(ref)
            absolute = np.abs(mine[both].astype(np.float64) - ref[both]) / scale[both]
            print(f"{label:20s} {np.dtype(dtype).name:8s} {found[x >= 0].max():9.3g} "
                  f"{found[x < 0].max():9.3g} {absolute.max():14.3g}", flush=True)


if __name__ == "__main__":
    main()
