"""The rewrites `chokepoint run` proposes from a line's syntax, each against the code it replaces,
alternating in one process, over sizes and dtypes the held-out programs did not have.

Each case is checked for the same values first (the rewrite's own check: equal arrays, or the
einsum's rounding bound), then both sides run in rounds that alternate; the median of each
side's rounds is printed with their ratio (above 1: the rewrite is faster).

    python benchmarks/line_rewrites.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np


def _unique_cases(rng):
    for n, values in ((40_000, 300), (400_000, 3000), (4_000_000, 30_000)):
        codes = rng.integers(0, values, n)
        yield (f"np.unique(inverse) {n:,} codes of {values:,}",
               lambda c=codes: np.unique(c, return_inverse=True),
               lambda c=codes: (lambda k: (np.flatnonzero(k), (np.cumsum(k > 0) - 1)[c]))(
                   np.bincount(c)))
    q = rng.integers(0, 4096, (512, 512)).astype(np.uint16)
    yield ("np.unique(counts) 512x512 uint16",
           lambda: np.unique(q, return_counts=True),
           lambda: (lambda k: (np.flatnonzero(k).astype(np.uint16), k[k > 0]))(
               np.bincount(q.ravel())))


def _einsum_cases(rng):
    for n, dtype in ((400, np.float64), (1000, np.float32)):
        a = (rng.random((n, n)) < 0.1).astype(dtype)
        b = rng.random((n, 2)).astype(dtype)
        d = (rng.random((n, n, 2)) - 0.5).astype(dtype)
        name = np.dtype(dtype).name
        yield (f"(A[:, :, None] * B[None]).sum(1) {n}x{n}x2 {name}",
               lambda a=a, b=b: (a[:, :, None] * b[None, :, :]).sum(axis=1),
               lambda a=a, b=b: np.einsum("ab,bc->ac", a, b, optimize=True))
        yield (f"(A[:, :, None] * D).sum(1) {n}x{n}x2 {name}",
               lambda a=a, d=d: (a[:, :, None] * d).sum(axis=1),
               lambda a=a, d=d: np.einsum("ab,abc->ac", a, d, optimize=True))


def _table_cases(rng):
    for shape, top, dtype in (((512, 512), 4096, np.uint16), ((2048, 2048), 256, np.uint8)):
        q = rng.integers(0, top, shape).astype(dtype)
        xp = np.unique(q).astype(np.float64)
        fp = np.cumsum(np.ones(len(xp))) / len(xp)
        yield (f"np.interp {shape[0]}x{shape[1]} {np.dtype(dtype).name}",
               lambda q=q, xp=xp, fp=fp: np.interp(q, xp, fp),
               lambda q=q, xp=xp, fp=fp: np.interp(
                   np.arange(int(q.max()) + 1, dtype=q.dtype), xp, fp)[q])


def _layout_cases(rng):
    # a line of slices along the last axis, against the same on arrays laid out with it first
    for shape in ((160, 160, 140), (400, 400, 32)):
        u, v = rng.random(shape), rng.random(shape)
        out = np.empty(shape)
        ut, vt = (np.ascontiguousarray(x.transpose(2, 0, 1)) for x in (u, v))
        outt = np.empty_like(ut)

        def written(u=u, v=v, out=out, k=shape[2] // 2):
            out[:, :, k] = 0.15 * u[:, :, k] + v[:, :, k] - 0.5 * v[:, :, k - 1]
            return out[:, :, k]

        def laid_out(ut=ut, vt=vt, outt=outt, k=shape[2] // 2):
            outt[k] = 0.15 * ut[k] + vt[k] - 0.5 * vt[k - 1]
            return outt[k]

        yield f"u[:, :, k] line {shape} against (K, I, J) arrays", written, laid_out


def _same(ours, theirs) -> bool:
    ours, theirs = (x if isinstance(x, tuple) else (x,) for x in (ours, theirs))
    if len(ours) != len(theirs):
        return False
    for o, t in zip(ours, theirs, strict=True):
        if o.shape != t.shape or o.dtype != t.dtype:
            return False
        if t.dtype.kind == "f" and not np.array_equal(o, t):
            # a contraction's sums run in another order, and cancel: normwise, within a
            # thousand ulp of the largest value (explain's own check is the sums' bound)
            scale = np.max(np.abs(t)) * np.finfo(t.dtype).eps
            if not np.max(np.abs(o.astype(np.float64) - t)) <= 1024 * scale:
                return False
        elif t.dtype.kind != "f" and not np.array_equal(o, t):
            return False
    return True


def _rounds(fn, rounds_s: float = 0.05) -> int:
    start = time.perf_counter()
    fn()
    one = time.perf_counter() - start
    return max(1, int(rounds_s / max(one, 1e-7)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{platform.processor() or platform.machine()}, NumPy {np.__version__}")
    cases = [*_unique_cases(rng), *_einsum_cases(rng), *_table_cases(rng), *_layout_cases(rng)]
    for name, original, rewrite in cases:
        if not _same(rewrite(), original()):
            print(f"{name:56s} values differ: not timed")
            continue
        loops = max(_rounds(original), _rounds(rewrite))
        times: dict[str, list[float]] = {"original": [], "rewrite": []}
        for _ in range(args.rounds):
            for side, fn in (("original", original), ("rewrite", rewrite)):
                start = time.perf_counter()
                for _ in range(loops):
                    fn()
                times[side].append((time.perf_counter() - start) / loops)
        before, after = (statistics.median(times[k]) for k in ("original", "rewrite"))
        print(f"{name:56s} {before * 1e3:9.3f} ms -> {after * 1e3:9.3f} ms  {before / after:6.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
