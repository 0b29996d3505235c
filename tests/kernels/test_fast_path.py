"""The kernels' fast path: the common call (contiguous native float arrays) skips the
general path's layers, and takes nothing the general path would not run the same way."""

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels import api, engine_numba

from . import reference as ref

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed


@pytest.fixture
def general_forbidden(monkeypatch):
    """Calls that reach the general path fail: what passes took the fast path."""
    def refuse(*args, **kwargs):
        raise AssertionError("took the general path")

    monkeypatch.setattr(api, "_unary", refuse)
    monkeypatch.setattr(api, "_binary", refuse)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_common_calls_take_the_fast_path_with_the_same_values(dtype, general_forbidden):
    if chokepoint.get_backend() != "numba":
        pytest.skip("the fast path is the numba engine's")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 7)).astype(dtype)
    g = rng.standard_normal((3, 7)).astype(dtype)
    assert np.array_equal(chokepoint.relu(x), np.maximum(x, 0))
    out = np.empty_like(x)
    assert chokepoint.leaky_relu(x, 0.1, out=out) is out
    assert np.array_equal(out, np.where(x > 0, x, x * dtype(0.1)))
    assert np.array_equal(chokepoint.relu_backward(g, x), np.where(x > 0, g, 0))
    gg = g.copy()
    assert chokepoint.relu_backward(gg, x, out=gg) is gg  # in place
    assert np.array_equal(gg, np.where(x > 0, g, 0))
    grad = chokepoint.relu_grad(x)
    assert grad.dtype == np.uint8 and np.array_equal(grad, x > 0)
    assert np.array_equal(chokepoint.relu_grad(x, at_zero=1, dtype=np.float32), x >= 0)
    mask = np.empty(x.shape, bool)
    assert chokepoint.relu_grad(x, out=mask) is mask and np.array_equal(mask, x > 0)


def test_other_calls_take_the_general_path(monkeypatch):
    calls = []
    general = api._unary

    def counting(*args, **kwargs):
        calls.append(args[0])
        return general(*args, **kwargs)

    monkeypatch.setattr(api, "_unary", counting)
    x = np.linspace(-1, 1, 10)
    others = [lambda: chokepoint.relu([-1.0, 2.0]),       # a list
              lambda: chokepoint.relu(x[::2]),            # strided
              lambda: chokepoint.relu(x.astype(">f8")),   # non-native byte order
              lambda: chokepoint.relu(x.astype(np.float16))]
    for call in others:
        call()
    assert len(calls) == len(others)
    chokepoint.relu(x, out=np.empty(10))
    # parallel sizes too: the engine's launcher chooses the variant
    big = np.linspace(-1, 1, 2 * engine_numba.settings.parallel_min).reshape(2, -1)
    assert np.array_equal(chokepoint.relu(big), np.maximum(big, 0))
    plain = 0 if chokepoint.get_backend() == "numba" else 2  # fast on numba only
    assert len(calls) == len(others) + plain


@pytest.mark.parametrize("bad", [
    # filled, not empty: garbage memory can hold a NaN, which no array equals
    dict(out=np.full(10, 7.0, np.float32)), dict(out=np.full(9, 7.0)), dict(negative_slope=np.nan),
    dict(negative_slope=np.array([1.0, 2.0]))])
def test_bad_calls_still_raise_and_touch_nothing(bad):
    x = np.linspace(-1, 1, 10)
    out = bad.get("out", np.full(10, 7.0))
    before = out.copy()
    kwargs = {**bad, "out": out}
    with pytest.raises((TypeError, ValueError)):
        chokepoint.leaky_relu(x, **kwargs)
    assert np.array_equal(out, before)


def test_read_only_out_and_partial_overlap_are_the_general_paths():
    x = np.linspace(-1, 1, 11)
    ro = np.empty(11)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        chokepoint.relu(x, out=ro)
    a = np.linspace(-1, 1, 12)
    expected = np.maximum(a[1:], 0)
    chokepoint.relu(a[1:], out=a[:-1])  # overlaps its input by all but one element
    assert np.array_equal(a[:-1], expected)


def test_a_cached_parameter_does_not_let_an_equal_one_of_another_type_through():
    x = np.linspace(-1, 1, 10)
    chokepoint.hardtanh(x, -1.0, 1.0)  # cached for (-1.0, 1.0)
    chokepoint.leaky_relu(x, 1.0)
    with pytest.raises(TypeError, match="real number"):
        chokepoint.hardtanh(x, np.complex128(-1), 1.0)  # == -1.0, hashes alike
    with pytest.raises(TypeError, match="real number"):
        chokepoint.leaky_relu(x, True)  # == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [13, 2 * engine_numba.settings.parallel_min + 5])
def test_mask_calls_take_the_fast_path_with_the_same_values(dtype, n, monkeypatch):
    if chokepoint.get_backend() != "numba":
        pytest.skip("the fast path is the numba engine's")
    general = []
    for name in ("_relu_with_mask_general", "_relu_backward_general"):
        original = getattr(api, name)
        monkeypatch.setattr(api, name,
                            lambda *a, _f=original, **k: general.append(1) or _f(*a, **k))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n,)).astype(dtype)
    x[::5] = 0
    g = rng.standard_normal(n).astype(dtype)
    for at_zero in (0, 1):
        y, mask = chokepoint.relu_with_mask(x, at_zero=at_zero)
        assert np.array_equal(y, np.maximum(x, 0))
        out = np.full_like(g, 7)
        assert chokepoint.relu_backward(g, mask, out=out) is out
        assert np.array_equal(out, chokepoint.relu_backward(g, x, at_zero=at_zero))
        assert np.array_equal(np.signbit(out), np.signbit(chokepoint.relu_backward(
            g, x, at_zero=at_zero)))
    assert general == []
    # what the fast path does not take still goes to the general path, and errors still raise
    with pytest.raises(ValueError, match="at_zero"):
        chokepoint.relu_backward(g, mask, at_zero=0)
    with pytest.raises(ValueError, match="shape"):
        chokepoint.relu_backward(g[:-1], mask)
    before = out.copy()
    with pytest.raises((TypeError, ValueError)):
        chokepoint.relu_backward(g, mask, out=np.empty(n, np.float16))
    assert np.array_equal(out, before)
    chokepoint.relu_with_mask(x[::2])
    assert general == [1, 1, 1, 1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_mask_calls_checked_in_the_kernel(dtype, monkeypatch):
    # below settings.parallel_min the serial kernels check shapes, sizes and overlap themselves:
    # what they refuse goes to the general path, which computes it or raises, writing nothing
    if chokepoint.get_backend() != "numba":
        pytest.skip("the fast path is the numba engine's")
    general = []
    for name in ("_relu_with_mask_general", "_relu_backward_general"):
        original = getattr(api, name)
        monkeypatch.setattr(api, name,
                            lambda *a, _f=original, _n=name, **k: general.append(_n) or _f(*a, **k))
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 7)).astype(dtype)
    x[0, ::2] = 0
    x[1, 1] = -0.0
    g = rng.standard_normal((3, 7)).astype(dtype)
    expected_y = np.maximum(x, 0)
    inplace = x.copy()
    y, mask = chokepoint.relu_with_mask(inplace, out=inplace)  # exactly in place: taken
    assert y is inplace and np.array_equal(y, expected_y) and mask.shape == (3, 7)
    assert not mask.bits.flags.writeable
    assert np.array_equal(mask.unpack(bool), x > 0)
    out = np.empty_like(g)
    assert chokepoint.relu_backward(g, mask, out=out) is out
    assert np.array_equal(out, chokepoint.relu_backward(g, x))
    same = g.copy()
    assert chokepoint.relu_backward(same, mask, out=same) is same  # in place: taken
    assert np.array_equal(same, out)
    assert general == []
    # a partial overlap: the general path, through a buffer, with the same values
    flat = np.concatenate([g.ravel(), np.zeros(1, dtype)])
    shifted = chokepoint.relu_backward(flat[:-1].reshape(3, 7), mask,
                                       out=flat[1:].reshape(3, 7))
    assert np.array_equal(shifted, out) and general == ["_relu_backward_general"]
    # wrong shapes raise and leave out as it was
    wrong = np.full((7, 3), 5, dtype)
    with pytest.raises(ValueError):
        chokepoint.relu_with_mask(x, out=wrong)
    with pytest.raises(ValueError):
        chokepoint.relu_backward(g, mask, out=wrong)
    assert (wrong == 5).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mid_size_calls_run_the_chosen_variant_without_the_launcher(launch_settings, dtype,
                                                                    monkeypatch):
    # between settings.parallel_min and CHECKED_MAX elements the public functions run the chooser's
    # variant themselves, through the checked kernels (which check shapes and overlap):
    # each variant gives the same values as the general path, and the timed calls are
    # recorded under the checked kernels' own signature (their first call compiles), or the
    # C path's
    if chokepoint.get_backend() != "numba":
        pytest.skip("the fast path is the numba engine's")
    n = engine_numba.settings.parallel_min + 13
    assert n < engine_numba.CHECKED_MAX
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n,)).astype(dtype)
    x[::7] = 0
    g = rng.standard_normal(n).astype(dtype)

    def refuse(*args, **kwargs):
        raise AssertionError("took the launcher")

    recorded = []
    chooser = engine_numba.chooser
    record = chooser.record
    launch_settings(lock_free=True)  # as after a launch under omp/tbb
    with monkeypatch.context() as patch:
        patch.setattr(engine_numba, "launch", refuse)
        patch.setattr(chooser, "record", lambda *a: recorded.append(a) or record(*a))
        chooser.expire()
        for variant in ("parallel", "serial"):
            patch.setattr(chooser, "decide", lambda *a, _v=variant: (_v, True))
            for shape in ((n,), (1, n)):
                xs, gs = x.reshape(shape), g.reshape(shape)
                out = np.full(shape, 7, dtype)
                assert chokepoint.relu(xs, out=out) is out
                assert np.array_equal(out, ref.relu(xs)) and np.array_equal(
                    np.signbit(out), np.signbit(ref.relu(xs)))
                assert np.array_equal(chokepoint.relu_backward(gs, xs),
                                      ref.relu_backward(gs, xs))
                assert np.array_equal(chokepoint.relu_grad(xs, dtype=bool), xs > 0)
                assert np.array_equal(chokepoint.leaky_relu(xs, 0.2),
                                      np.where(xs > 0, xs, xs * dtype(0.2)))
                assert np.allclose(chokepoint.gelu(xs),
                                   0.5 * xs * (1 + _erf(xs / np.sqrt(2))), rtol=1e-5,
                                   atol=1e-6)
                y, mask = chokepoint.relu_with_mask(xs)
                assert np.array_equal(y, ref.relu(xs))
                assert np.array_equal(chokepoint.relu_backward(gs, mask),
                                      ref.relu_backward(gs, xs))
        assert {(r[0], r[2]) for r in recorded} >= {("relu", "parallel"), ("relu", "serial"),
                                                    ("mask_backward", "parallel")}
        # the Python path's under the checked kernels' signature, the C path's (which decides
        # from C once it has a plan) under its own: its cfuncs are compiled before their calls
        assert all(r[4][0] in ("checked", "native") for r in recorded)
        assert any(r[4][0] == "checked" for r in recorded)
    # what the checked kernels refuse goes to the general path: a partial overlap is computed
    # through a buffer, a wrong shape raises and writes nothing
    buffer = np.concatenate([g, np.zeros(1, dtype)])
    shifted = chokepoint.relu_backward(buffer[:-1], x, out=buffer[1:])
    assert np.array_equal(shifted, ref.relu_backward(g, x))
    out = np.full(n, 7, dtype)
    with pytest.raises(ValueError, match="shape"):
        chokepoint.relu_backward(g[:-1], x[:-1].reshape(1, -1), out=out[:-1])
    with pytest.raises(ValueError, match="shape"):
        chokepoint.relu_backward(g, x[:-1], out=out)
    assert (out == 7).all()


def _erf(v):
    from math import erf

    return np.vectorize(erf)(v.astype(np.float64))
