"""Thread safety, fork safety and the on-disk compile cache of the numba engine."""

import hashlib
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels import adaptive, engine_numba
from chokepoint.kernels.ops import OPS

from . import reference as ref

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed

N = engine_numba.settings.parallel_min * 4  # large enough for the parallel kernels


def test_many_threads_call_parallel_kernels_at_once():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(N) for _ in range(8)]
    expected = [ref.relu_backward(x, x) for x in xs]
    results = [None] * len(xs)
    barrier = threading.Barrier(len(xs))

    def work(i):
        barrier.wait()
        for _ in range(5):
            results[i] = chokepoint.relu_backward(xs[i], xs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(ref.same(r, e) for r, e in zip(results, expected, strict=True))


def _child(queue):
    x = np.linspace(-1, 1, N)
    queue.put(bool(np.array_equal(chokepoint.relu_grad(x), (x > 0).astype(np.uint8))))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
def test_works_in_a_forked_child_after_parent_used_parallel_kernels():
    chokepoint.relu_grad(np.ones(N))  # the parent starts its threading layer
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    assert queue.get(timeout=5) is True


def _twice_with_one_cache(tmp_path, script: str) -> list[list[int]]:
    """The numbers ``script`` prints, run in two new processes sharing one NUMBA_CACHE_DIR."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    return [[int(v) for v in subprocess.run([sys.executable, "-c", script], env=env,
                                             capture_output=True, text=True,
                                             check=True).stdout.split()] for _ in range(2)]


def test_second_process_loads_kernels_from_the_cache(tmp_path, backend):
    if backend != "numba":
        pytest.skip("the compile cache belongs to the numba engine")
    script = (
        "import numpy as np, chokepoint\n"
        "from chokepoint.kernels import engine_numba as e\n"
        f"chokepoint.relu_grad(np.ones({N}))\n"
        "k = e._kernel('relu_grad', 'parallel')\n"
        "print(sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values()))\n"
    )
    runs = _twice_with_one_cache(tmp_path, script)
    (first_hits, first_misses), (second_hits, second_misses) = runs
    assert (first_hits, first_misses) == (0, 1), runs
    assert (second_hits, second_misses) == (1, 0), runs


def test_a_chunked_parallel_kernel_loads_from_the_cache(tmp_path, backend):
    # GELU's parallel kernel calls its serial one through an intrinsic (noinline): both must
    # come from the disk cache in a second process, not be compiled again
    if backend != "numba":
        pytest.skip("the compile cache belongs to the numba engine")
    script = (
        "import numpy as np\n"
        "from chokepoint.kernels import engine_numba as e\n"
        "x = np.ones(100, np.float32)\n"
        "k = e._kernel('gelu', 'parallel')\n"
        "k(x, np.empty_like(x))\n"
        "s = e._kernel('gelu', 'serial')\n"
        "print(sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values()),\n"
        "      sum(s.stats.cache_misses.values()))\n"
    )
    runs = _twice_with_one_cache(tmp_path, script)
    assert runs[1] == [1, 0, 0], runs


@pytest.mark.parametrize("name", sorted(n for n, streams in engine_numba._STREAMING_OPS.items()
                                        if not streams))
def test_chunked_parallel_kernels_equal_the_serial_ones(name):
    # every chunk, the last partial one included, and an array shorter than one chunk
    op = engine_numba.OPS[name]
    chunk = engine_numba.CHUNK
    for dtype in (np.float32, np.float64):
        for n in (3 * chunk + 5, chunk - 3):
            x = np.random.default_rng(n).standard_normal(n).astype(dtype) * 4
            arrays = (np.linspace(-2, 2, n, dtype=dtype), x)[2 - op.arity:]
            constants = tuple(dtype(0.75) for _ in op.params)
            expected, got = np.empty_like(x), np.full_like(x, np.nan)
            engine_numba.kernel_for(name, "serial")(*arrays, expected, *constants)
            engine_numba.kernel_for(name, "parallel")(*arrays, got, *constants)
            np.testing.assert_array_equal(got, expected, err_msg=f"{name} {dtype} {n}")
    assert "serial(" in engine_numba._source(name, "_k", "parallel")


def test_kernel_names_carry_the_code_they_inline():
    # numba's disk cache keys a kernel by its own file's time stamp and bytecode: an edit of
    # vecmath (or of the expressions) alone must give the kernels new names, not old machine code
    from chokepoint.fuse import codegen
    from chokepoint.kernels import ops, vecmath, vocabulary

    digest = hashlib.sha1(b"".join(Path(m.__file__).read_bytes()
                                   for m in (vecmath, vocabulary, ops))).hexdigest()[:12]
    assert engine_numba.DEPENDENCIES == digest
    assert engine_numba.kernel_for("gelu", "serial").py_func.__name__.endswith(digest)
    p = chokepoint.fuse("np.exp(a) + 1").plan({"a": np.dtype(np.float64)})
    name, _ = codegen.source(p, ((True,),), "serial")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_numba, "DEPENDENCIES", "another")
        assert codegen.source(p, ((True,),), "serial")[0] != name


def test_thread_count_follows_numba(backend):
    if backend != "numba":
        pytest.skip("threads belong to the numba engine")
    import numba

    x = np.random.default_rng(4).standard_normal(N)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = chokepoint.relu_backward(x, x)
    finally:
        numba.set_num_threads(before)
    assert ref.same(one, chokepoint.relu_backward(x, x))


def test_backend_from_the_environment():
    script = "import chokepoint; print(chokepoint.get_backend())"
    for value, expected in (("numpy", "numpy"), ("numba", "numba"), ("", "numba")):
        env = {**os.environ, "CHOKEPOINT_BACKEND": value}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
        assert out == expected
    bad = subprocess.run([sys.executable, "-c", script],
                         env={**os.environ, "CHOKEPOINT_BACKEND": "fortran"},
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown backend 'fortran'" in bad.stderr


def test_no_streaming_stores_into_an_output_that_is_also_an_input(launch_settings, monkeypatch):
    # in place, the lines were just read: non-temporal stores cost 1.2-3.7x there (issue 9)
    launch_settings(stream_maps=True)
    n = engine_numba.settings.stream_min_bytes // 24 + 8  # grad, x and out together: just enough
    g, x, o = np.ones(n), np.ones(n), np.empty(n)
    can = engine_numba.can_stream
    assert can("relu_backward", (g, x), o)
    assert can("relu_backward", (g, x), None, np.float64)  # a new output
    assert not can("relu_backward", (g, x), g)
    assert not can("relu_backward", (g, x), g[:])  # a view of an input is the input
    assert not can("relu_backward", (g[:-16], x[:-16]), o[:-16])  # too small to stream
    assert not can("relu_backward", (g[1:], x[1:]), o[1:])  # out not 16-byte aligned
    assert not can("gelu_backward", (g, x), o)  # no streaming variant worth running
    # the mask kernels stream in place too (grad read, and written over)
    launch_settings(stream_masks=True)
    big = np.ones(engine_numba.settings.stream_min_bytes // 16 + 8)
    assert can("mask_backward", (big, np.empty(big.size // 8, np.uint8)), big)


def test_only_select_kernels_stream(launch_settings, monkeypatch):
    # the unrolled streaming lanes stay scalar for exp & co: SiLU 175 ms vs 15.5 ms (issue 9)
    from chokepoint.kernels import engine_numba

    # whatever this machine's cached tuning chose (chokepoint tune)
    launch_settings(stream_masks=True)
    launch_settings(stream_maps=True)

    assert engine_numba._STREAMING_OPS["relu_backward"]
    assert engine_numba._STREAMING_OPS["hardtanh"]
    assert not engine_numba._STREAMING_OPS["silu"]
    assert not engine_numba._STREAMING_OPS["gelu_backward"]
    big = np.ones(engine_numba.settings.stream_min_bytes // 8)
    assert not engine_numba.can_stream("silu", (big,), np.empty_like(big))
    assert engine_numba.can_stream("mask_backward", (big, big), big)
    launch_settings(stream_masks=False)
    assert not engine_numba.can_stream("mask_backward", (big, big), big)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int64])
@pytest.mark.parametrize("mode", ["serial", "parallel", "stream"])
def test_mask_backward_variants_on_every_partial_byte(mode, dtype):
    # the vector kernel covers whole bytes, a scalar loop the last partial one (for the
    # streaming variant the serial kernel on launch's tail)
    rng = np.random.default_rng(3)
    for n in (1, 7, 8, 9, 15, 16, 17, 61, 64 + 5):
        g = (rng.standard_normal(n) * 50).astype(dtype)
        keep = rng.random(n) < 0.5
        bits = np.packbits(keep, bitorder="little")
        out = np.full(n, 99, dtype)
        if mode == "stream" and out.ctypes.data % 16:
            continue  # the streaming variant runs only on 16-byte aligned outputs
        args = (g, bits, out, dtype(0))
        engine_numba.kernel_for("mask_backward", mode)(*args)
        if mode == "stream":
            tail = engine_numba._tail("mask_backward", args, n - n % 8)
            engine_numba.kernel_for("mask_backward", "serial")(*tail)
        assert np.array_equal(out, np.where(keep, g, dtype(0))), (n, mode)


@pytest.mark.parametrize("name", ["mask_forward", "mask_forward_at_zero"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int16, np.int64])
@pytest.mark.parametrize("mode", ["serial", "parallel", "stream"])
def test_mask_forward_variants_on_every_partial_byte(mode, dtype, name):
    # each whole byte one relu8 step (the streaming one with non-temporal stores), the last
    # partial byte scalar (for the streaming variant the serial kernel on launch's tail)
    rng = np.random.default_rng(4)
    at_zero = name.endswith("at_zero")
    for n in (1, 7, 8, 9, 15, 16, 17, 61, 64 + 5, 1000 + 3):
        x = (rng.standard_normal(n) * 50).astype(dtype)
        x[::5] = 0
        if np.issubdtype(dtype, np.floating):
            x[1::7], x[2::11] = np.nan, -0.0
        y = np.full(n, 99, dtype)
        bits = np.full((n + 7) // 8, 0xAA, np.uint8)
        if mode == "stream" and y.ctypes.data % 16:
            continue  # the streaming variant runs only on 16-byte aligned outputs
        args = (x, y, bits, dtype(0))
        engine_numba.kernel_for(name, mode)(*args)
        if mode == "stream":
            tail = engine_numba._tail(name, args, n - n % 8)
            engine_numba.kernel_for(name, "serial")(*tail)
        keep = ~(x < 0) if at_zero else ~(x <= 0)  # NaN passes
        want = np.where(x < 0, dtype(0), x)  # -0.0 and NaN kept
        floats = np.issubdtype(dtype, np.floating)
        assert np.array_equal(y, want, equal_nan=floats), (n, mode)
        assert np.array_equal(np.signbit(y), np.signbit(want)), (n, mode)
        assert np.array_equal(bits, np.packbits(keep, bitorder="little")), (n, mode)
        # in place (y is x): the mask kernels stream in place too (each step loads, then
        # stores)
        both = x.copy()
        if mode == "stream" and both.ctypes.data % 16:
            continue
        bits[:] = 0xAA
        args = (both, both, bits, dtype(0))
        engine_numba.kernel_for(name, mode)(*args)
        if mode == "stream":
            engine_numba.kernel_for(name, "serial")(*engine_numba._tail(name, args, n - n % 8))
        assert np.array_equal(both, want, equal_nan=floats), (n, mode, "in place")
        assert np.array_equal(bits, np.packbits(keep, bitorder="little")), (n, mode)


def test_a_streamed_kernel_then_an_output_that_cannot_stream(launch_settings, monkeypatch):
    # the chooser repeats a decided variant for the next calls of the same kernel and size:
    # never the streaming one for a call whose out cannot stream (not 16-byte aligned here)
    launch_settings(stream_maps=True)
    n = engine_numba.settings.stream_min_bytes // 8 + 8
    x = np.linspace(-1, 1, n)
    unaligned = np.empty(n + 1, np.float32)[1:]
    assert not engine_numba.can_stream("relu_grad", (x,), unaligned)
    for _ in range(12):  # settled on streaming
        got = chokepoint.relu_grad(x, dtype=np.float32)
        assert np.array_equal(got, (x > 0).astype(np.float32))
    for _ in range(3):
        got = chokepoint.relu_grad(x, out=unaligned)
        assert np.array_equal(got, (x > 0).astype(np.float32))


_GRAD_OUTPUTS = [np.bool_, np.int8, np.uint8, np.float32, np.float64]
# each op that streams, on the dtypes it takes (integers only where the op is exact: signed
# and unsigned, narrow and wide)
_STREAMED = [(name, dtype) for name, streams in engine_numba._STREAMING_OPS.items() if streams
             for dtype in (np.float32, np.float64, np.int8, np.int64, np.uint32)
             if OPS[name].integers or np.issubdtype(dtype, np.floating)]


def _aligned(n: int, dtype, fill) -> tuple[np.ndarray, np.ndarray]:
    """(a 16-byte aligned array of n elements, the buffer it is the head of, 16 more
    elements of ``fill`` after it)."""
    size = np.dtype(dtype).itemsize
    raw = np.empty((n + 32) * size + 16, np.uint8)
    start = -raw.ctypes.data % 16
    buffer = raw[start:start + (n + 16) * size].view(dtype)
    buffer[:] = fill
    return buffer[:n], buffer


@pytest.mark.parametrize(("name", "dtype"), _STREAMED)
def test_streaming_maps_match_the_serial_kernel_on_every_partial_step(name, dtype):
    # 16 results per vector step (the op's expression on vectors: _vector_step), written with
    # non-temporal stores; the serial kernel finishes the last n % 16 (launch's tail). The
    # serial kernel is the scalar expression the oracle tests check against torch.
    op = OPS[name]
    rng = np.random.default_rng(5)
    assert engine_numba.stream_step(name) == 16
    constants = {"zero": 0, "slope": 0.25, "lo": -2, "hi": 3}
    floats = np.issubdtype(dtype, np.floating)
    grads = _GRAD_OUTPUTS if floats else [np.uint8]
    for out_dtype in grads if name.startswith("relu_grad") else [dtype]:
        for n in (1, 15, 16, 17, 31, 33, 64 + 5, 1000 + 9):
            inputs = []
            for _ in range(op.arity):
                a = (rng.standard_normal(n) * 5).astype(dtype)
                a[::5] = 0
                if floats:
                    a[1::7], a[2::11], a[3::13], a[4::17] = np.nan, -0.0, -np.inf, 3  # 3: hi
                    a[6::19], a[8::23] = -2, np.inf  # -2: lo
                inputs.append(a)
            params = tuple(dtype(constants[p]) for p in op.params)
            fill = 7 if out_dtype is not np.bool_ else True
            out, buffer = _aligned(n, out_dtype, fill)  # the variant streams aligned outputs
            want = np.full(n, fill, out_dtype)
            engine_numba.kernel_for(name, "serial")(*inputs, want, *params)
            args = (*inputs, out, *params)
            engine_numba.kernel_for(name, "stream")(*args)
            engine_numba.kernel_for(name, "serial")(*engine_numba._tail(name, args,
                                                                        n - n % 16))
            assert np.array_equal(out, want, equal_nan=floats), (n, out_dtype)
            assert np.array_equal(np.signbit(out), np.signbit(want)), (n, out_dtype)
            assert (buffer[n:] == fill).all(), (n, out_dtype)  # nothing written past n


def test_only_expressions_the_vector_step_writes_stream():
    from chokepoint.kernels.ops import Op

    ok = engine_numba._vectorisable
    assert ok(Op("a", 1, "select(v > zero, v, v * slope)"))
    assert ok(Op("b", 2, "select(logical_and(v > lo, v < hi), g, zero)"))
    assert ok(Op("c", 1, "logical_not(v <= zero)", integers=True))
    assert not ok(Op("d", 1, "v / slope"))  # division: no vector step for it
    assert not ok(Op("e", 1, "select(zero < v < one, v, zero)"))  # a chained comparison
    assert not ok(Op("f", 1, "select(v > zero, v, exp(v))"))
    assert not ok(Op("g", 1, "select(v > zero, v, v * slope)", integers=True))  # int64 in numba


def test_one_byte_outputs_stream_only_where_the_variant_writes_whole_stores(launch_settings,
                                                                           monkeypatch):
    launch_settings(stream_maps=True)
    launch_settings(stream_masks=True)
    n = engine_numba.settings.stream_min_bytes // 2 + 16
    x, out = np.zeros(n, np.int8), np.empty(n, np.int8)
    # the maps' 16 lanes make whole 16-byte stores of 1-byte results (relu_grad's uint8)
    assert engine_numba.can_stream("relu_grad", (x,), out.view(np.uint8))
    assert engine_numba.can_stream("relu", (x,), out)
    # the mask forward's 8 lanes of 1-byte elements make 8 bytes: plain stores
    assert not engine_numba.can_stream("mask_forward", (x,), out)
    assert engine_numba.stream_step("mask_backward") == 8


def test_a_call_that_can_stream_weighs_stream_parallel_and_serial(launch_settings, monkeypatch,
                                                                  backend):
    # whether non-temporal stores pay depends on the CPU and the kernel: the chooser measures
    # all three variants of a call that can stream, and its results are the same from each
    if backend != "numba":
        pytest.skip("the variants belong to the numba engine")
    launch_settings(stream_maps=True)
    monkeypatch.setattr(engine_numba, "chooser", adaptive.Chooser())
    # float32 in, 1-byte results out; the launcher's size (the C path's plans keep their
    # chooser's lists)
    n = max(engine_numba.settings.stream_min_bytes // 5, engine_numba.CHECKED_MAX) + 13
    x = np.linspace(-1, 1, n, dtype=np.float32)
    x[::9] = np.nan
    want = ~(x <= 0)
    for _ in range(14):  # three variants, each timed twice, after its untimed first call
        assert np.array_equal(chokepoint.relu_grad(x), want.view(np.uint8))
    key = engine_numba.chooser_key("relu_grad", True)
    ran = {k[2] for k in engine_numba.chooser.figures if k[0] == key}
    assert ran == {"stream", "parallel", "serial"}


#: a thread starts the first calls of kernels (loading the engine, compiling), the main thread
#: forks ``delay`` seconds later, and the child calls kernels; prints the child's exit status
_FORK_MID_COMPILE = """
import os, sys, threading, time
import numpy as np
import chokepoint
x = np.linspace(-2, 2, 100, dtype=np.float32)
first = threading.Thread(target=lambda: [chokepoint.gelu(x), chokepoint.silu(x)])
first.start()
time.sleep({delay})
pid = os.fork()
if pid == 0:
    ok = np.isfinite(chokepoint.gelu(x)).all() and np.isfinite(chokepoint.silu(x)).all()
    os._exit(0 if ok else 3)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("child", os.waitstatus_to_exitcode(status))
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    print("child hung")
first.join()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
@pytest.mark.parametrize("delay", [0.01, 0.8])  # loading the engine; compiling
def test_a_fork_while_another_thread_compiles_leaves_a_working_child(tmp_path, backend,
                                                                      delay):
    if backend != "numba":
        pytest.skip("a new process's default engine: run once")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"),  # compiled, not loaded
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", _FORK_MID_COMPILE.format(delay=delay)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "child 0", done.stdout + done.stderr[-2000:]


_FORK_DURING_BUILD = """
import os, threading, time
from chokepoint.kernels import native
started = threading.Event()
def build():  # stands for a C build: it holds the build's lock while its compiler runs
    with native.build_lock:
        started.set()
        time.sleep(0.5)
worker = threading.Thread(target=build)
worker.start()
started.wait()
begin = time.monotonic()
pid = os.fork()
if pid == 0:
    os._exit(0 if not native.build_lock.locked() else 3)  # a fresh, free lock in the child
waited = time.monotonic() - begin
print("waited", round(waited, 2), "child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
worker.join()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
def test_a_fork_waits_for_a_c_build_in_another_thread():
    # a child forked mid-build kept a copy of subprocess's exec-status pipe: the build waited
    # for it, holding the build's lock file, and the child waited for that lock
    done = subprocess.run([sys.executable, "-c", _FORK_DURING_BUILD], capture_output=True,
                          text=True, timeout=60)
    words = done.stdout.split()
    assert words[0] == "waited" and float(words[1]) >= 0.3, done.stdout + done.stderr
    assert words[2:] == ["child", "0"], done.stdout + done.stderr
