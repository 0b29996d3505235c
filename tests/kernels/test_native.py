"""The C path (kernels/native.py, _native.c): small calls of plain arrays run in C with the
Python path's values, bit for bit; what it declines goes to the Python path, which computes or
raises as before and writes nothing first."""

import contextlib
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading
import warnings

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels import adaptive, api, engine_numba, native
from chokepoint.kernels.registry import KERNELS

from . import reference as ref

FLOATS = (np.float32, np.float64)


def _compiler() -> str | None:
    """The C compiler Python was built with, where this machine has it."""
    cc = sysconfig.get_config_var("CC")
    return cc if cc and shutil.which(shlex.split(cc)[0]) else None


def _numba_only():
    if chokepoint.get_backend() != "numba":
        pytest.skip("the C path is the numba engine's")
    if native.load() is None:
        if native.disabled() or _compiler() is None:  # optional: the Python path runs all
            pytest.skip(f"no C path here: {native.status()}")
        pytest.fail(f"the C path did not load: {native.status()}")


@contextlib.contextmanager
def _python_path():
    """Every call takes the Python path (the C path declines all)."""
    module = native.load()
    was = module.set_enabled(False)
    try:
        yield
    finally:
        module.set_enabled(was)


@contextlib.contextmanager
def _c_path_only(monkeypatch):
    """Calls that reach the Python path fail: what passes ran in C."""
    def refuse(*args, **kwargs):
        raise AssertionError("took the Python path")

    with monkeypatch.context() as patch:
        for name in ("call_fast", "fast", "_unary", "_binary", "_relu_grad_general",
                     "_relu_backward_general", "_relu_with_mask_general", "_fast_mask_backward"):
            patch.setattr(api, name, refuse)
        for kernel in KERNELS:  # the generated functions hold their own references
            if kernel.resolve is not None:
                space = getattr(chokepoint, kernel.name).__globals__
                for name in ("_call_fast", "_fast", "_general"):
                    patch.setitem(space, name, refuse)
        yield


def _calls(dtype):
    """name -> call(x, g, out): every public function on its default parameters, and the
    hand-written ones' variants."""
    calls = {}
    for kernel in KERNELS:
        if kernel.resolve is None:
            continue
        func = getattr(chokepoint, kernel.name)
        if kernel.arity == 2:
            calls[kernel.name] = lambda x, g, out, f=func: f(g, x, out=out)
        else:
            calls[kernel.name] = lambda x, g, out, f=func: f(x, out=out)
    calls["leaky_relu 0.2"] = lambda x, g, out: chokepoint.leaky_relu(x, 0.2, out=out)
    calls["hardtanh -2, 0.5"] = lambda x, g, out: chokepoint.hardtanh(x, -2.0, 0.5, out=out)
    for target in (np.uint8, np.bool_, dtype):
        calls[f"relu_grad {np.dtype(target)}"] = lambda x, g, out, t=target: (
            chokepoint.relu_grad(x, out=None if out is None else np.empty(x.shape, t)))
    calls["relu_grad at_zero=1"] = lambda x, g, out: chokepoint.relu_grad(x, at_zero=1, out=(
        None if out is None else np.empty(x.shape, np.uint8)))
    calls["relu_backward at_zero=1"] = lambda x, g, out: chokepoint.relu_backward(
        g, x, at_zero=1, out=out)
    for at_zero in (0, 1):
        calls[f"relu_with_mask {at_zero}"] = lambda x, g, out, a=at_zero: (
            chokepoint.relu_with_mask(x, at_zero=a, out=out))
        calls[f"backward from the mask {at_zero}"] = lambda x, g, out, a=at_zero: (
            chokepoint.relu_backward(g, _mask_of(x, a), out=out))
    return calls


_MASKS = {}


def _mask_of(x, at_zero):
    """The mask of x, made on the Python path once (kept: the C path must not make it)."""
    key = (x.dtype.str, x.shape, at_zero, x.tobytes())
    if key not in _MASKS:
        with _python_path():
            _MASKS[key] = chokepoint.relu_with_mask(x, at_zero=at_zero)[1]
    return _MASKS[key]


def _bits(result):
    """What must be identical: the bytes, dtype and shape (a mask's bits, shape, at_zero)."""
    if isinstance(result, tuple):
        y, mask = result
        return _bits(y), mask.bits.tobytes(), mask.shape, mask.at_zero, mask.bits.flags.writeable
    return result.dtype.str, result.shape, result.tobytes()


def _inputs(dtype, shape=(5, 41)):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    flat = x.reshape(-1)
    flat[:8] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40, 20.0]
    g = rng.standard_normal(shape).astype(dtype)
    g.reshape(-1)[8] = np.nan
    return x, g


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("placement", ["fresh", "out"])
def test_small_calls_run_in_c_with_the_python_paths_values(dtype, placement, monkeypatch):
    _numba_only()
    x, g = _inputs(dtype)
    for name, call in _calls(dtype).items():
        def run(call=call):
            out = None if placement == "fresh" else np.full(x.shape, 7, dtype)
            return call(x, g, out)

        with _python_path():
            expected = _bits(run())
        run()  # the Python path's first small call gives the C path this dtype's kernel
        with _c_path_only(monkeypatch):
            assert _bits(run()) == expected, name
    with _c_path_only(monkeypatch), pytest.raises(AssertionError, match="Python path"):
        chokepoint.gelu(x[:, ::2])  # what the C path declines fails here


@pytest.mark.parametrize("dtype", FLOATS)
def test_in_place_calls_run_in_c(dtype, monkeypatch):
    _numba_only()
    x, g = _inputs(dtype)
    expected = ref.relu_backward(g, x)
    for _ in range(2):
        same = g.copy()
        assert chokepoint.relu_backward(same, x, out=same) is same
        y = x.copy()
        assert chokepoint.relu(y, out=y) is y
    with _c_path_only(monkeypatch):
        same = g.copy()
        assert chokepoint.relu_backward(same, x, out=same) is same
        assert ref.same(same, expected)
        y = x.copy()
        assert chokepoint.relu(y, out=y) is y and ref.same(y, ref.relu(x))
        y = x.copy()
        out, mask = chokepoint.relu_with_mask(y, out=y)
        assert out is y and ref.same(y, ref.relu(x)) and mask.shape == x.shape


def _declined(x):
    """Calls the C path must leave to the Python path: (what, x, out)."""
    misaligned = np.zeros(x.nbytes + 1, np.uint8)[1:].view(x.dtype)
    assert not misaligned.flags.aligned
    misaligned[...] = x.ravel()
    read_only = np.empty_like(x)
    read_only.flags.writeable = False
    big = np.zeros(engine_numba.CHECKED_MAX, x.dtype)  # the launcher's (mid-size: below)
    return [
        ("strided", x[:, ::2], None),
        ("F-ordered", np.asfortranarray(x), None),
        ("byte-swapped", x.astype(x.dtype.newbyteorder()), None),
        ("a subclass", x.view(np.ma.MaskedArray), None),
        ("misaligned", misaligned.reshape(x.shape), None),
        ("a list", x.tolist(), None),
        ("float16", x.astype(np.float16), None),
        ("at CHECKED_MAX", big, None),
        ("a read-only out", x, read_only),
        ("an out of another shape", x, np.empty(x.shape[::-1], x.dtype)),
        ("an out of another dtype", x, np.empty(x.shape, np.float16)),
        ("an F-ordered out", x, np.asfortranarray(np.empty_like(x))),
        ("an out subclass", x, np.empty_like(x).view(np.ma.MaskedArray)),
    ]


@pytest.mark.parametrize("dtype", FLOATS)
def test_what_the_c_path_declines_it_leaves_untouched(dtype):
    _numba_only()
    x, g = _inputs(dtype)
    chokepoint.relu(x)
    chokepoint.relu_backward(g, x)
    unary = api.relu.__globals__["_lane"].native
    binary = api._BACKWARD_NATIVE[0].native
    assert unary is not None and binary is not None
    for what, a, out in _declined(x):
        before = None if out is None else out.copy()
        assert unary(a, out) is None, what
        if isinstance(a, np.ndarray) and a.shape == g.shape:
            assert binary(g, a, out) is None, what
        if out is not None:
            assert np.array_equal(out, before, equal_nan=True), what
    # two inputs of different dtypes or shapes, a partial overlap of out with an input
    assert binary(g.astype(np.float16), x, None) is None
    assert binary(g[:, :-1], x[:, :-1].copy(), np.empty_like(x)) is None  # out's shape
    buffer = np.zeros(x.size + 1, dtype)
    assert unary(buffer[1:].reshape(x.shape), buffer[:-1].reshape(x.shape)) is None
    assert not buffer.any()
    # the wrong number of arguments is an error of the caller (ours), not a decline
    with pytest.raises(TypeError):
        unary(x)
    with pytest.raises(TypeError):
        unary(x, None, out=None)


@pytest.mark.parametrize("dtype", FLOATS)
def test_declined_calls_give_the_python_paths_results_and_errors(dtype):
    x, _g = _inputs(dtype)
    chokepoint.relu(x)
    for what, a, out in _declined(x):
        if isinstance(a, list):
            assert ref.same(chokepoint.relu(a), chokepoint.relu(np.asarray(a)))
            continue
        if isinstance(a, np.ma.MaskedArray):
            with pytest.raises(TypeError, match="masked array"):
                chokepoint.relu(a)
            continue
        if out is None:
            result = np.asarray(chokepoint.relu(a))
            assert ref.same(result, ref.relu(np.asarray(a)).astype(result.dtype)), what
            continue
        before = out.copy()
        try:
            result = chokepoint.relu(a, out=out)
        except (TypeError, ValueError):
            assert np.array_equal(out, before, equal_nan=True), what
        else:
            assert result is out and ref.same(np.asarray(out), ref.relu(a).astype(out.dtype))


def test_the_numpy_engine_is_never_bypassed():
    x, _g = _inputs(np.float64)
    with chokepoint.set_backend("numba"):
        chokepoint.relu(x)  # the C path has float64 relu now (where it loads)
    unary = api.relu.__globals__["_lane"].native
    if unary is None:
        pytest.skip(f"no C path: {native.status()}")
    with chokepoint.set_backend("numpy"):
        assert unary(x, None) is None
    seen = []

    def in_a_thread():
        with chokepoint.set_backend("numpy"):
            seen.append(unary(x, None))
        # the process default (numba's, unless CHOKEPOINT_BACKEND says otherwise)
        default = chokepoint.get_backend()
        seen.append((unary(x, None) is not None) == (default == "numba"))

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen[0] is None and seen[1] is True


def test_the_extension_builds_where_there_is_a_compiler():
    if native.disabled():
        pytest.skip("CHOKEPOINT_NATIVE=0")
    if _compiler() is None:
        pytest.skip(f"no C compiler ({sysconfig.get_config_var('CC')!r}) on this machine")
    assert native.load() is not None, native.status()
    assert native.status().startswith("on")


def test_without_the_c_path_every_call_takes_the_python_path():
    code = ("import numpy as np, chokepoint\n"
            "from chokepoint.kernels import native, api\n"
            "x = np.linspace(-1, 1, 9)\n"
            "for _ in range(2):\n"
            "    assert np.array_equal(chokepoint.relu(x), np.maximum(x, 0))\n"
            "assert api.relu.__globals__['_lane'].native is None\n"
            "print(native.status())\n")
    env = {**os.environ, "CHOKEPOINT_NATIVE": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "CHOKEPOINT_NATIVE=0" in done.stdout


def _set(decision: adaptive.Decision, variant: str, left: int) -> None:
    """A decision of ``variant`` for the next ``left`` calls, none counted yet."""
    decision.variant, decision.left, decision.seconds, decision.calls = variant, left, 0.0, 0


@pytest.fixture
def no_period_max(monkeypatch):
    """Periods that no call's time ends early (PERIOD_MAX, in C and in Python): on a slow or
    busy machine five calls could take 10 ms."""
    module = native.load()
    if module is None:
        yield
        return
    was = module.set_period_max(1e6)
    monkeypatch.setattr(adaptive, "PERIOD_MAX", 1e6)
    try:
        yield
    finally:
        module.set_period_max(was)


@pytest.mark.parametrize("dtype", FLOATS)
def test_mid_size_calls_run_the_decided_variant_in_c_and_count_in_the_plan(
        launch_settings, dtype, monkeypatch, no_period_max):
    # between parallel_min and CHECKED_MAX the C path runs the variant of the chooser's live
    # decision while it has calls left (as api.call_fast), adds each call's time to it, and
    # at its end asks the chooser for the next decision
    _numba_only()
    n = engine_numba.settings.parallel_min + 13
    x, g = _inputs(dtype, (n,))
    launch_settings(lock_free=True)  # as after a launch under omp/tbb
    engine_numba.chooser.expire()
    for _ in range(3):  # the Python path decides, and gives the C path the plan
        chokepoint.relu_backward(g, x)
    plan = engine_numba.chooser.decision("relu_backward", n, "parallel")
    expected = ref.relu_backward(g, x)
    chooser = engine_numba.chooser
    calls = []

    def decide(*args):
        calls.append(("decide", *args))
        return type(chooser).decide(chooser, *args)

    def record(*args):
        calls.append(("record", *args[:3]))
        return type(chooser).record(chooser, *args)

    for variant in ("parallel", "serial"):
        _set(plan, variant, 5)
        with _c_path_only(monkeypatch):
            for left in range(4, -1, -1):
                assert ref.same(chokepoint.relu_backward(g, x), expected)
                assert plan.left == left
        assert plan.calls == 5 and plan.seconds > 0
        # no call left: the C path asks the chooser, as the Python path would, and runs the
        # variant it decided (the call not counted in the new period; timed if it says so)
        monkeypatch.setattr(chooser, "decide", decide)
        monkeypatch.setattr(chooser, "record", record)
        calls.clear()
        with _c_path_only(monkeypatch):
            assert ref.same(chokepoint.relu_backward(g, x), expected)
        assert calls[0] == ("decide", "relu_backward", n, "parallel", ("serial",))
        assert (plan.seconds, plan.calls) == (0.0, 0) and plan.variant in ("parallel", "serial")
        assert len(calls) == 1 or calls[1][:3] == ("record", "relu_backward", n)
        monkeypatch.delattr(chooser, "decide")
        monkeypatch.delattr(chooser, "record")

    def broken(*args):
        raise RuntimeError("no decision")

    _set(plan, "parallel", 0)
    monkeypatch.setattr(chooser, "decide", broken)  # a failed decision: the Python path's
    out = np.full_like(g, 7.0)
    with _c_path_only(monkeypatch), pytest.raises(AssertionError, match="Python path"):
        chokepoint.relu_backward(g, x, out=out)
    assert (out == 7.0).all()

    def interrupted(*args):
        raise KeyboardInterrupt

    _set(plan, "parallel", 0)
    monkeypatch.setattr(chooser, "decide", interrupted)  # not an Exception: it propagates
    with _c_path_only(monkeypatch), pytest.raises(KeyboardInterrupt):
        chokepoint.relu_backward(g, x, out=out)
    assert (out == 7.0).all()
    monkeypatch.delattr(chooser, "decide")
    # a lane whose table has no plan for the size class (nor a parallel kernel) declines
    lane = native.Lane(native.MAP2)
    lane.add("relu_backward", x.dtype, x.dtype, (0.0,))
    assert lane.native(g, x, None) is None
    _set(plan, "parallel", 5)
    launch_settings(lock_free=False)  # a layer that needs the lock
    with _c_path_only(monkeypatch), pytest.raises(AssertionError, match="Python path"):
        chokepoint.relu_backward(g, x)
    assert plan.left == 5


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_period_whose_calls_took_period_max_ends_early(launch_settings, path, monkeypatch):
    # a period is counted in calls from the figure; calls that became much slower (a parallel
    # kernel waiting for a busy core) end it once they have taken PERIOD_MAX seconds, in the C
    # path and in the Python fast path alike: the next call decides
    _numba_only()
    n = engine_numba.settings.parallel_min + 13
    x, g = _inputs(np.float64, (n,))
    launch_settings(lock_free=True)
    engine_numba.chooser.expire()
    for _ in range(3):
        chokepoint.relu_backward(g, x)
    plan = engine_numba.chooser.decision("relu_backward", n, "parallel")
    module = native.load()
    if path == "c":
        was = module.set_period_max(1e-9)  # every call takes longer than this
        try:
            _set(plan, "parallel", 5)
            with _c_path_only(monkeypatch):
                chokepoint.relu_backward(g, x)
        finally:
            module.set_period_max(was)
    else:
        monkeypatch.setattr(adaptive, "PERIOD_MAX", 1e-9)
        was = module.set_enabled(False)  # the Python path takes every call
        try:
            _set(plan, "parallel", 5)
            chokepoint.relu_backward(g, x)
        finally:
            module.set_enabled(was)
    assert plan.left == 0 and plan.calls == 1  # counted, and the period over
    _set(plan, "parallel", 5)
    was = module.set_period_max(1e6)
    try:
        with _c_path_only(monkeypatch):  # below the limit the period runs on
            chokepoint.relu_backward(g, x)
    finally:
        module.set_period_max(was)
    assert plan.left == 4


@pytest.mark.parametrize("dtype", FLOATS)
def test_mid_size_calls_that_can_stream_have_their_own_plan_in_c(launch_settings, dtype,
                                                                  monkeypatch, no_period_max):
    # a map whose arrays outgrow the last-level cache (settings.stream_min_bytes, lowered here) may
    # stream below CHECKED_MAX too: the C path runs the decision of the calls that can
    # (streaming, parallel or serial), the streaming cfunc finishing the last n % 16 serially,
    # and in place or into an unaligned out the other plan's variant
    _numba_only()
    launch_settings(stream_maps=True)
    launch_settings(stream_min_bytes=1)
    launch_settings(lock_free=True)  # as after a launch under omp/tbb
    engine_numba.chooser.expire()
    n = engine_numba.settings.parallel_min + 13
    x, g = _inputs(dtype, (n + 2,))
    out = np.empty(n + 2, dtype)
    for _ in range(3):  # the Python path decides, and gives the C path both plans
        chokepoint.relu_backward(g[:n], x[:n], out=out[:n])
        inplace = g[:n].copy()
        chokepoint.relu_backward(inplace, x[:n], out=inplace)
    streaming = engine_numba.chooser.decision(engine_numba.chooser_key("relu_backward", True), n,
                                          *engine_numba.candidates(True))
    plain = engine_numba.chooser.decision("relu_backward", n, *engine_numba.candidates(False))
    expected = ref.relu_backward(g[:n], x[:n])
    _set(streaming, "stream", 4)
    _set(plain, "parallel", 9)
    with _c_path_only(monkeypatch):
        out[:] = 7
        chokepoint.relu_backward(g[:n], x[:n], out=out[:n])
        assert ref.same(out[:n], expected) and out[n] == 7  # nothing past n written
        assert ref.same(chokepoint.relu_backward(g[:n], x[:n]), expected)  # a new output
        assert (streaming.left, streaming.calls) == (2, 2) and plain.left == 9
        inplace = g[:n].copy()
        assert ref.same(chokepoint.relu_backward(inplace, x[:n], out=inplace), expected)
        # not 16-byte aligned: the plain plan
        shifted = out[1:n + 1]
        assert ref.same(chokepoint.relu_backward(g[1:n + 1], x[1:n + 1], out=shifted),
                        ref.relu_backward(g[1:n + 1], x[1:n + 1]))
        assert plain.left == 7 and streaming.left == 2
        # a tuning that turns streaming off (read each call): the plain plan
        launch_settings(stream_maps=False)
        assert ref.same(chokepoint.relu_backward(g[:n], x[:n], out=out[:n]), expected)
        assert plain.left == 6 and streaming.left == 2


@pytest.mark.parametrize("call", ["relu_grad fresh", "relu out=", "leaky_relu out="])
def test_single_input_maps_stream_in_c(launch_settings, call, monkeypatch, no_period_max):
    # the streaming cfunc of a one-input map (relu_grad's fresh uint8 among them)
    _numba_only()
    launch_settings(stream_maps=True)
    launch_settings(stream_min_bytes=0)
    launch_settings(lock_free=True)
    engine_numba.chooser.expire()
    n = engine_numba.settings.parallel_min + 29
    x, _ = _inputs(np.float32, (n,))
    out = np.empty(n, np.float32)
    name, run, expected = {
        "relu_grad fresh": ("relu_grad", lambda: chokepoint.relu_grad(x),
                            (~(x <= 0)).view(np.uint8)),
        "relu out=": ("relu", lambda: chokepoint.relu(x, out=out), ref.relu(x)),
        "leaky_relu out=": ("leaky_relu", lambda: chokepoint.leaky_relu(x, 0.25, out=out),
                            np.where(x > 0, x, x * np.float32(0.25))),
    }[call]
    for _ in range(3):  # the Python path gives the C path the streaming decision
        run()
    plan = engine_numba.chooser.decision(engine_numba.chooser_key(name, True), n,
                                     *engine_numba.candidates(True))
    _set(plan, "stream", 3)
    with _c_path_only(monkeypatch):
        for left in (2, 1, 0):
            assert ref.same(run(), expected)
            assert plan.left == left


def test_c_and_python_agree_on_which_calls_stream(launch_settings, monkeypatch, no_period_max):
    # at the byte threshold and one byte past it: both paths take the same plan (a
    # disagreement would have the C path decline every such call)
    _numba_only()
    launch_settings(stream_maps=True)
    launch_settings(lock_free=True)
    engine_numba.chooser.expire()
    n = engine_numba.settings.parallel_min + 3
    x, g = _inputs(np.float64, (n,))
    out = np.empty(n)
    expected = ref.relu_backward(g, x)
    for threshold, streams in ((24 * n, True), (24 * n + 1, False), (np.int64(0), True),
                               (-5, True), (1 << 80, False)):
        launch_settings(stream_min_bytes=threshold)
        assert engine_numba.can_stream("relu_backward", (g, x), out) == streams
        for _ in range(3):  # the Python path gives the C path this decision
            chokepoint.relu_backward(g, x, out=out)
        plan = engine_numba.chooser.decision(engine_numba.chooser_key("relu_backward", streams),
                                         n, *engine_numba.candidates(streams))
        _set(plan, "parallel", 2)
        with _c_path_only(monkeypatch):
            assert ref.same(chokepoint.relu_backward(g, x, out=out), expected)
        assert plan.left == 1, threshold


def test_a_streaming_kernel_that_does_not_compile_leaves_the_others(launch_settings,
                                                                     monkeypatch, no_period_max):
    _numba_only()
    made = engine_numba.native_kernel

    def no_stream(name, dtype, out_dtype, mode="serial"):
        if mode == "stream":
            raise RuntimeError("no streaming here")
        return made(name, dtype, out_dtype, mode)

    monkeypatch.setattr(engine_numba, "native_kernel", no_stream)
    launch_settings(stream_maps=True)
    launch_settings(stream_min_bytes=0)
    launch_settings(lock_free=True)
    lane = native.Lane(native.MAP1)
    f32 = np.dtype(np.float32)
    n = engine_numba.settings.parallel_min + 5
    size = n.bit_length()
    streaming = engine_numba.chooser.decision(("relu", "stream"), n, *engine_numba.candidates(True))
    with pytest.warns(RuntimeWarning, match="stream variant runs.*no streaming here"):
        lane.add_plan("relu", f32, f32, (0.0,), size, streaming, True)
    plain = engine_numba.chooser.decision("relu", n, *engine_numba.candidates(False))
    lane.add_plan("relu", f32, f32, (0.0,), size, plain)
    _set(plain, "parallel", 2)
    x = np.linspace(-1, 1, n, dtype=np.float32)
    # a call that could stream runs in C by the plain plan
    assert ref.same(lane.native(x, np.empty_like(x)), ref.relu(x))
    assert plain.left == 1


def test_a_kernel_that_does_not_compile_leaves_its_calls_to_the_python_path(monkeypatch):
    _numba_only()

    def broken(*args, **kwargs):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(engine_numba, "native_kernel", broken)
    lane = native.Lane(native.MAP1)
    f32 = np.dtype(np.float32)
    with pytest.warns(RuntimeWarning, match="stays on the Python path.*no such kernel"):
        lane.add("relu", f32, f32, (0.0,))
    assert lane.native is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lane.add("relu", f32, f32, (0.0,))  # tried once: no second warning
        lane.add_plan("relu", f32, f32, (0.0,), 17, adaptive.Decision())
    assert lane.native is None


@pytest.mark.parametrize("parallel_min", [1 << 22, 1 << 62])
def test_a_tuned_parallel_threshold_above_the_mid_size_range(launch_settings, parallel_min,
                                                             monkeypatch):
    # the tuning may put parallel_min past CHECKED_MAX (1 << 62: one thread): the C path is
    # handed it and runs the serial kernel below it, as the Python path does
    _numba_only()
    launch_settings(parallel_min=parallel_min)
    lane = native.Lane(native.MAP1)  # a new table, made under that tuning
    f64 = np.dtype(np.float64)
    lane.add("relu", f64, f64, (0.0,))
    assert lane.native is not None
    for n in (10, engine_numba.CHECKED_MAX + 5):
        x = np.linspace(-1, 1, n)
        assert ref.same(lane.native(x, None), ref.relu(x))
    big = np.linspace(-1, 1, engine_numba.CHECKED_MAX + 5)
    chokepoint.relu(np.linspace(-1, 1, 7))  # the Python path gives relu's table float64
    with _c_path_only(monkeypatch):  # the public function too, past CHECKED_MAX
        assert ref.same(chokepoint.relu(big), ref.relu(big))


def test_configure_fails_on_a_renamed_field_instead_of_misreading_it(monkeypatch):
    # the C path reads a Decision's and a PackedMask's slots, and the backend's default engine,
    # by name: what it cannot find stops configure, and leaves the old configuration
    _numba_only()
    module = native.load()
    if module is None:
        pytest.skip("no C compiler")
    from chokepoint.kernels import backend
    from chokepoint.kernels.mask import PackedMask

    class Renamed:
        __slots__ = ("calls", "left", "secs", "variant")

    args = (backend.scoped_engine, vars(backend), "default_engine", engine_numba, PackedMask)
    with pytest.raises(AttributeError, match="seconds"):
        module.configure(*args, Renamed)
    with pytest.raises(KeyError, match="no_such_engine"):
        module.configure(*args[:2], "no_such_engine", *args[3:], adaptive.Decision)
    x, g = _inputs(np.float32, (100,))
    chokepoint.relu_backward(g, x)  # the Python path gives the lane float32
    with _c_path_only(monkeypatch):  # the old configuration still runs the call in C
        assert ref.same(chokepoint.relu_backward(g, x), ref.relu_backward(g, x))


def test_the_settings_are_handed_to_the_c_path(launch_settings, monkeypatch):
    # one immutable value; configure replaces it and the C path follows at once; a value
    # that neither could take changes nothing
    _numba_only()
    with pytest.raises(dataclasses.FrozenInstanceError):
        engine_numba.settings.parallel_min = 1
    was = engine_numba.settings
    for bad, error in (({"parallel_min": 1e5}, TypeError), ({"parallel_min": -1}, ValueError),
                       ({"stream_min_bytes": None}, TypeError)):
        with pytest.raises(error):
            launch_settings(**bad)
        assert engine_numba.settings is was
    launch_settings(parallel_min=1 << 70)  # past any size: never parallel, in C too
    y = np.linspace(-1, 1, engine_numba.CHECKED_MAX + 5)
    chokepoint.relu(np.linspace(-1, 1, 7))
    with _c_path_only(monkeypatch):
        assert ref.same(chokepoint.relu(y), ref.relu(y))
    launch_settings(parallel_min=was.parallel_min)
    x = np.linspace(-1, 1, 1000)
    chokepoint.relu(x)  # the Python path gives relu's table float64
    with _c_path_only(monkeypatch):
        assert ref.same(chokepoint.relu(x), ref.relu(x))  # serial in C below parallel_min
    launch_settings(parallel_min=0, lock_free=False)  # mid-size now, needing the launch lock
    with _c_path_only(monkeypatch), pytest.raises(AssertionError, match="Python path"):
        chokepoint.relu(x)
    with engine_numba.configured(parallel_min=1 << 20) as inside:
        assert inside is engine_numba.settings and inside.parallel_min == 1 << 20
        with _c_path_only(monkeypatch):
            assert ref.same(chokepoint.relu(x), ref.relu(x))
        engine_numba.configure(lock_free=True)  # learnt inside the block (a first launch)
    # only the fields the block changed are restored
    assert engine_numba.settings.parallel_min == 0 and engine_numba.settings.lock_free


def test_a_failed_load_is_said_once_and_leaves_the_python_path(monkeypatch):
    def broken():
        raise AttributeError("no slots here")

    monkeypatch.setattr(native, "_built", broken)
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setattr(native, "disabled", lambda: False)
    assert native.load() is None
    assert native.status().startswith("not built: no slots here")
    monkeypatch.setattr(native, "_built", lambda: pytest.fail("tried again"))
    assert native.load() is None
    lane = native.Lane(native.MAP1)
    f64 = np.dtype(np.float64)
    lane.add("relu", f64, f64, (0.0,))
    assert lane.native is None


def test_only_number_dtypes_go_in_a_table():
    _numba_only()
    table = native.load().Native(native.MAP1, 100)
    kernel = engine_numba.native_kernel("relu", np.dtype(np.float64), np.dtype(np.float64))
    for dtype in ("U1", "V8", "M8[s]", ">f8"):
        with pytest.raises(ValueError, match="dtype"):
            table.add(np.dtype(dtype), np.dtype(np.float64), kernel, None, (0.0,), True)
