"""Cures written by hand for the headlines `chokepoint run` gave on twelve programs kept aside
(seventeenth session; the programs themselves are not in the repository), and two of the
session's other measurements: a reduction along a short axis against the same with that axis
first, and fuse's call overhead with and without inspect's binding. Each pair runs in one
process, alternating, 7 rounds (5 or 3 for slow ones), medians; printed: as written, the cure,
their ratio. Cures that compute the same values are checked first.

    python benchmarks/cures_by_hand.py [01 02 ... 12 short fuse]
"""

import statistics
import sys
import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def race(name, a, b, rounds=7, check=None):
    if check:
        check()
    ta, tb = [], []
    for r in range(rounds):
        for f, t in ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta)):
            s = time.perf_counter()
            f()
            t.append(time.perf_counter() - s)
    ma, mb = statistics.median(ta), statistics.median(tb)
    print(
        f"{name:60s} as written {ma * 1e3:8.2f} ms  cure {mb * 1e3:8.2f} ms  {ma / mb:5.2f}x",
        flush=True,
    )


rng = np.random.default_rng(0)
which = sys.argv[1:]


def want(k):
    return not which or k in which


if want(
    "01"
):  # deriche's column loop: columns of a C-order (3000, 2000) array, vs rows of its transpose
    W, H = 3000, 2000
    img = rng.random((W, H))
    y2 = np.empty_like(img)
    img_t = np.ascontiguousarray(img.T)
    y2_t = np.empty_like(img_t)
    a3, a4, b1, b2 = 0.1, -0.05, 0.8, -0.2

    def cols():
        for j in range(H - 3, -1, -1):
            y2[:, j] = (
                a3 * img[:, j + 1] + a4 * img[:, j + 2] + b1 * y2[:, j + 1] + b2 * y2[:, j + 2]
            )

    def rows():
        for j in range(H - 3, -1, -1):
            y2_t[j] = a3 * img_t[j + 1] + a4 * img_t[j + 2] + b1 * y2_t[j + 1] + b2 * y2_t[j + 2]

    y2[:, -2:] = 0
    y2_t[-2:] = 0
    race("01 deriche :39 column loop vs the same on the transpose", cols, rows, rounds=5)

if want("02"):  # gramschmidt inner loop vs a matrix-vector product
    A0 = rng.random((400, 340))

    def written():
        A = A0.copy()
        n = A.shape[1]
        Q = np.zeros_like(A)
        R = np.zeros((n, n))
        for k in range(n):
            R[k, k] = np.sqrt(np.dot(A[:, k], A[:, k]))
            Q[:, k] = A[:, k] / R[k, k]
            for j in range(k + 1, n):
                R[k, j] = np.dot(Q[:, k], A[:, j])
                A[:, j] -= Q[:, k] * R[k, j]
        return Q, R

    def vec():
        A = A0.copy()
        n = A.shape[1]
        Q = np.zeros_like(A)
        R = np.zeros((n, n))
        for k in range(n):
            R[k, k] = np.sqrt(np.dot(A[:, k], A[:, k]))
            Q[:, k] = A[:, k] / R[k, k]
            R[k, k + 1 :] = Q[:, k] @ A[:, k + 1 :]
            A[:, k + 1 :] -= np.outer(Q[:, k], R[k, k + 1 :])
        return Q, R

    race(
        "02 gramschmidt :29 inner loop vs one outer product per k",
        written,
        vec,
        rounds=5,
        check=lambda: np.testing.assert_allclose(written()[1], vec()[1], rtol=1e-9, atol=1e-9),
    )

if want("03"):  # floyd's init loop vs vectorised
    N = 850

    def loop():
        path = np.fromfunction(lambda i, j: i * j % 7 + 1, (N, N), dtype=np.int32)
        for i in range(N):
            for j in range(N):
                if (i + j) % 13 == 0 or (i + j) % 7 == 0 or (i + j) % 11 == 0:
                    path[i, j] = 999
        return path

    def vec():
        path = np.fromfunction(lambda i, j: i * j % 7 + 1, (N, N), dtype=np.int32)
        s = np.add.outer(np.arange(N), np.arange(N))
        path[(s % 13 == 0) | (s % 7 == 0) | (s % 11 == 0)] = 999
        return path

    race(
        "03 floyd :11 init loop vs vectorised",
        loop,
        vec,
        rounds=3,
        check=lambda: np.testing.assert_array_equal(loop(), vec()),
    )

if want("04"):  # vadv :67 on [:, :, k] slices (k last) vs the same arrays with k first
    ni, nj, nk = 160, 160, 140
    arrs = {n: rng.random((ni, nj, nk)) for n in ("u_pos", "utens", "utens_stage", "dcol")}
    t = {n: np.ascontiguousarray(np.moveaxis(a, 2, 0)) for n, a in arrs.items()}
    dtr, corr = 0.3, rng.random((ni, nj))

    def last():
        for k in range(1, nk - 1):
            arrs["dcol"][:, :, k] = (
                dtr * arrs["u_pos"][:, :, k]
                + arrs["utens"][:, :, k]
                + arrs["utens_stage"][:, :, k]
                + corr
            )

    def first():
        for k in range(1, nk - 1):
            t["dcol"][k] = dtr * t["u_pos"][k] + t["utens"][k] + t["utens_stage"][k] + corr

    race("04 vadv :67 over k (last axis) vs k-first layout", last, first)

if want("05"):  # logreg cross-entropy line: as written vs fused
    import chokepoint

    p = rng.random(128)
    y = (rng.random(128) > 0.5).astype(float)
    eps = 1e-12
    f = chokepoint.fuse("-np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))")

    def written():
        for _ in range(200):
            -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))

    def fused():
        for _ in range(200):
            f(y=y, p=p, eps=eps)

    race("05 logreg :20 cross-entropy on a batch of 128, x200: written vs fused", written, fused)

if want("06"):  # np.gradient vs central differences by hand (same values)
    u = rng.random((300, 300))
    DX = 0.1

    def grad():
        for _ in range(50):
            np.gradient(u, DX)

    def hand():
        for _ in range(50):
            gx = np.empty_like(u)
            gy = np.empty_like(u)
            gx[1:-1] = (u[2:] - u[:-2]) / (2 * DX)
            gx[0] = (u[1] - u[0]) / DX
            gx[-1] = (u[-1] - u[-2]) / DX
            gy[:, 1:-1] = (u[:, 2:] - u[:, :-2]) / (2 * DX)
            gy[:, 0] = (u[:, 1] - u[:, 0]) / DX
            gy[:, -1] = (u[:, -1] - u[:, -2]) / DX

    race("06 wave :28 np.gradient vs slices by hand, x50", grad, hand)

if want("07"):
    store = rng.integers(0, 250, 1_500_000)
    masks = [store == s for s in range(20)]
    race(
        "07 sales :48 mask.sum() vs np.count_nonzero, x20",
        lambda: [m.sum() for m in masks],
        lambda: [np.count_nonzero(m) for m in masks],
    )

if want("08"):  # particles: per-particle distances, rows of 2, vs the short axis first
    pos = rng.random((600, 2)) * 10
    pos_t = np.ascontiguousarray(pos.T)

    def rows():
        for i in range(600):
            np.sqrt(np.sum((pos - pos[i]) ** 2, axis=1))

    def first():
        for i in range(600):
            np.sqrt(np.sum((pos_t - pos_t[:, i : i + 1]) ** 2, axis=0))

    def allpairs():
        return np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=2))

    race("08 particles :57 loop, (n, 2) rows vs (2, n) short axis first", rows, first)
    race("08 particles :57 loop vs all pairs at once", rows, allpairs)

if want("09"):
    n_paths, n_steps = 20000, 120
    z = rng.standard_normal((n_steps, n_paths))

    def grow():
        paths = np.full((n_paths, 1), 100.0)
        for t in range(n_steps):
            paths = np.hstack([paths, (paths[:, -1] * np.exp(0.001 + 0.02 * z[t]))[:, None]])
        return paths

    def prealloc():
        paths = np.empty((n_paths, n_steps + 1))
        paths[:, 0] = 100.0
        for t in range(n_steps):
            paths[:, t + 1] = paths[:, t] * np.exp(0.001 + 0.02 * z[t])
        return paths

    race(
        "09 asian :23 hstack growth vs preallocated",
        grow,
        prealloc,
        rounds=5,
        check=lambda: np.testing.assert_array_equal(grow(), prealloc()),
    )

if want("10"):
    D = rng.random((256, 6000))
    k = 7

    def srt():
        return np.argsort(D, axis=1)[:, :k]

    def part():
        idx = np.argpartition(D, k - 1, axis=1)[:, :k]
        return np.take_along_axis(idx, np.argsort(np.take_along_axis(D, idx, 1), axis=1), 1)

    race(
        "10 knn :24 argsort[:, :k] vs argpartition + sort of k",
        srt,
        part,
        check=lambda: np.testing.assert_array_equal(srt(), part()),
    )
    A = rng.random((256, 16)).astype(np.float32)
    B = rng.random((6000, 16)).astype(np.float32)

    def bc():
        diff = A[:, None, :] - B[None, :, :]
        return np.sqrt((diff**2).sum(axis=-1))

    def gemm():
        return np.sqrt(np.maximum((A * A).sum(1)[:, None] - 2 * (A @ B.T) + (B * B).sum(1), 0))

    race("10 knn :16-17 broadcast distances vs matrix product", bc, gemm)

if want("11"):  # convolution loop: shifted slices of padded (strided views) vs contiguous copies
    img = rng.random((1200, 1600))
    kern = rng.random((5, 5))
    padded = np.pad(img, 2, mode="reflect")
    h, w = img.shape
    copies = {
        (i, j): np.ascontiguousarray(padded[i : i + h, j : j + w])
        for i in range(5)
        for j in range(5)
    }

    def written():
        out = np.zeros_like(img)
        for i in range(5):
            for j in range(5):
                out += kern[i, j] * padded[i : i + h, j : j + w]

    def contiguous():
        out = np.zeros_like(img)
        for i in range(5):
            for j in range(5):
                out += kern[i, j] * copies[i, j]

    def no_temp():
        out = np.zeros_like(img)
        tmp = np.empty_like(img)
        for i in range(5):
            for j in range(5):
                np.multiply(kern[i, j], padded[i : i + h, j : j + w], out=tmp)
                out += tmp

    race("11 image :43 slices vs contiguous copies of them", written, contiguous)
    race("11 image :43 as written vs a reused temporary", written, no_temp)

if want("12"):
    x = rng.random(30000).astype(np.float32)
    half = 12

    def loop():
        for i in range(half, 3000 - half):
            np.median(x[i - half : i + half + 1])

    def vec():
        np.median(sliding_window_view(x[:3000], 2 * half + 1), axis=1)

    race("12 signal :43 np.median per window (2976) vs one call on all windows", loop, vec)

if want("short"):  # a reduction along rows of d against the same values with d first
    for n, d in ((1_440_000, 6), (400_000, 10), (600, 2)):
        t = rng.random((n, d))
        tt = np.ascontiguousarray(t.T)
        race(
            f"short axis: sum of ({n}, {d}) along axis 1 vs ({d}, {n}) along 0",
            lambda t=t: t.sum(axis=1),
            lambda tt=tt: tt.sum(axis=0),
        )
        race(
            f"short axis: max of ({n}, {d}) along axis 1 vs ({d}, {n}) along 0",
            lambda t=t: t.max(axis=1),
            lambda tt=tt: tt.max(axis=0),
        )

if want("fuse"):  # fuse's call on 128 elements: every argument by keyword (no binding) or not
    import chokepoint

    a = rng.random(128)
    fast = chokepoint.fuse("a * b + c")
    bound = chokepoint.fuse("a * b + c")
    bound._keywords = None  # the general path: inspect.Signature.bind
    race(
        "fuse call overhead, 5000 calls: inspect's binding vs keywords",
        lambda: [bound(a=a, b=a, c=a) for _ in range(5000)],
        lambda: [fast(a=a, b=a, c=a) for _ in range(5000)],
        rounds=10,
    )
