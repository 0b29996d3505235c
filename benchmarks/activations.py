"""GELU, SiLU, ELU and softplus, forward and backward: chokepoint against torch CPU and NumPy.

Ours, torch's and NumPy's calls alternate in one process (medians of ``--rounds``), all writing
into a preallocated output, on ``--n`` elements of float32 and float64. Prints each time, the
ratios (torch / ours and NumPy / ours: above 1 means we are faster) and the bandwidth floor
(inputs read once, output written once, at the faster of the read and triad bandwidths measured
at the start). NumPy's formulation is the fastest we found in plain NumPy: ufuncs with ``out=``
into the output and one preallocated scratch array (no temporaries), ``scipy.special.erf`` for
GELU (NumPy has no erf; without SciPy that column says n/a), ``np.logaddexp(x, 0)`` for softplus
(one ufunc; it gives ``x + log1p(exp(-x))`` past torch's threshold of 20 instead of ``x``).

    python benchmarks/activations.py [--n 30000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
import torch

import chokepoint
from chokepoint.kernels.adaptive import settle
from chokepoint.measure.roofline import measure_floor_bandwidth

try:
    from scipy.special import erf
except ImportError:  # the [bench] extra installs it; without it GELU has no NumPy column
    erf = None


def _once(fn, *args, **kwargs) -> float:
    t = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t


SQRT1_2 = math.sqrt(0.5)
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
TANH_K = math.sqrt(2 / math.pi)


def numpy_formulations(x: np.ndarray, g: np.ndarray, o: np.ndarray) -> dict:
    """kernel -> a NumPy call writing ``o`` (see the module notes); Python floats keep float32
    float32 (NEP 50)."""
    t = np.empty_like(x)

    def gelu():
        np.multiply(x, SQRT1_2, out=t)
        erf(t, out=t)
        np.add(t, 1, out=t)
        np.multiply(x, 0.5, out=o)
        np.multiply(o, t, out=o)

    def gelu_backward():  # g * (cdf + x * pdf)
        np.multiply(x, x, out=t)
        np.multiply(t, -0.5, out=t)
        np.exp(t, out=t)
        np.multiply(t, INV_SQRT_2PI, out=t)
        np.multiply(t, x, out=t)
        np.multiply(x, SQRT1_2, out=o)
        erf(o, out=o)
        np.add(o, 1, out=o)
        np.multiply(o, 0.5, out=o)
        np.add(o, t, out=o)
        np.multiply(o, g, out=o)

    def gelu_tanh():
        np.multiply(x, x, out=t)
        np.multiply(t, 0.044715, out=t)
        np.add(t, 1, out=t)
        np.multiply(t, x, out=t)
        np.multiply(t, TANH_K, out=t)
        np.tanh(t, out=t)
        np.add(t, 1, out=t)
        np.multiply(x, 0.5, out=o)
        np.multiply(o, t, out=o)

    def sigmoid_into_t():
        np.negative(x, out=t)
        np.exp(t, out=t)
        np.add(t, 1, out=t)
        np.reciprocal(t, out=t)

    def silu():
        sigmoid_into_t()
        np.multiply(x, t, out=o)

    def silu_backward():  # g * s * (1 + x * (1 - s))
        sigmoid_into_t()
        np.subtract(1, t, out=o)
        np.multiply(o, x, out=o)
        np.add(o, 1, out=o)
        np.multiply(o, t, out=o)
        np.multiply(o, g, out=o)

    def elu():  # max(x, 0) + expm1(min(x, 0)), alpha = 1
        np.minimum(x, 0, out=t)
        np.expm1(t, out=t)
        np.maximum(x, 0, out=o)
        np.add(o, t, out=o)

    def elu_backward():  # g * exp(min(x, 0)), alpha = 1
        np.minimum(x, 0, out=t)
        np.exp(t, out=t)
        np.multiply(g, t, out=o)

    def softplus_backward():  # g * sigmoid(x)
        sigmoid_into_t()
        np.multiply(g, t, out=o)

    found = {"gelu tanh": gelu_tanh, "silu": silu, "silu_backward": silu_backward, "elu": elu,
             "elu_backward": elu_backward,
             "softplus": lambda: np.logaddexp(x, 0, out=o),
             "softplus_backward": softplus_backward}
    if erf is not None:
        found.update(gelu=gelu, gelu_backward=gelu_backward)
    return found


def cases(x: np.ndarray, g: np.ndarray, o: np.ndarray):
    """(label, ours, torch's, NumPy's or None, bytes moved) for each kernel."""
    tx, tg, to = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(o)
    aten = torch.ops.aten
    one, two = x.nbytes * 2, x.nbytes * 3
    numpy = numpy_formulations(x, g, o)
    for label, ours, theirs, nbytes in [
        ("gelu", lambda: chokepoint.gelu(x, out=o), lambda: aten.gelu.out(tx, out=to), one),
        ("gelu_backward", lambda: chokepoint.gelu_backward(g, x, out=o),
         lambda: aten.gelu_backward.grad_input(tg, tx, grad_input=to), two),
        ("gelu tanh", lambda: chokepoint.gelu(x, approximate="tanh", out=o),
         lambda: aten.gelu.out(tx, approximate="tanh", out=to), one),
        ("silu", lambda: chokepoint.silu(x, out=o), lambda: aten.silu.out(tx, out=to), one),
        ("silu_backward", lambda: chokepoint.silu_backward(g, x, out=o),
         lambda: aten.silu_backward.grad_input(tg, tx, grad_input=to), two),
        ("elu", lambda: chokepoint.elu(x, out=o), lambda: aten.elu.out(tx, out=to), one),
        ("elu_backward", lambda: chokepoint.elu_backward(g, x, out=o),
         lambda: aten.elu_backward.grad_input(tg, 1.0, 1, 1.0, False, tx, grad_input=to), two),
        ("softplus", lambda: chokepoint.softplus(x, out=o),
         lambda: aten.softplus.out(tx, 1.0, 20.0, out=to), one),
        ("softplus_backward", lambda: chokepoint.softplus_backward(g, x, out=o),
         lambda: aten.softplus_backward.grad_input(tg, tx, 1.0, 20.0, grad_input=to), two),
    ]:
        yield label, ours, theirs, numpy.get(label), nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    bandwidth, said = measure_floor_bandwidth()
    print(f"{args.n} elements, torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{said}; medians of {args.rounds}")
    print(f"{'kernel':20s} {'dtype':8s} {'ours ms':>9s} {'torch ms':>9s} {'torch/ours':>10s} "
          f"{'numpy ms':>9s} {'numpy/ours':>10s} {'floor ms':>9s} {'ours/floor':>10s}")
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal(args.n) * 3).astype(dtype)
        g = rng.standard_normal(args.n).astype(dtype)
        o = np.empty_like(x)
        for label, ours, theirs, numpy, nbytes in cases(x, g, o):
            # compile and warm; ours through the chooser's exploration (kernels/adaptive.py),
            # or its exploratory serial calls are timed
            settle(ours)
            if numpy is not None:  # the same values, or the ratio compares different work
                expected = o.copy()
                numpy()
                tol = 1e-5 if dtype == np.float32 else 1e-12
                assert np.allclose(o, expected, rtol=tol, atol=tol, equal_nan=True), label
            calls = [ours, theirs] + ([numpy] if numpy is not None else [])
            for call in calls[1:]:
                call()
            times = [[] for _ in calls]
            for _ in range(args.rounds):
                for call, found in zip(calls, times, strict=True):
                    found.append(_once(call))
            ta, tb, *tn = (statistics.median(t) for t in times)
            floor = nbytes / bandwidth
            versus = f"{tn[0] * 1e3:9.2f} {tn[0] / ta:10.2f}" if tn else f"{'n/a':>9s} {'':10s}"
            print(f"{label:20s} {np.dtype(dtype).name:8s} {ta * 1e3:9.2f} {tb * 1e3:9.2f} "
                  f"{tb / ta:10.2f} {versus} {floor * 1e3:9.2f} {ta / floor:10.2f}", flush=True)


if __name__ == "__main__":
    main()
