"""chokepoint.fuse against NumPy: values bit for bit, dtypes (NEP 50), broadcasting, errors.

Few signatures are compiled (each costs ~0.3 s): arrays stay small, so the serial kernel runs.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import chokepoint
from chokepoint.fuse import FuseError

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed

SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, 2.0, 1e-40, 3e38]


def _same(ours, ref):
    ours, ref = np.asarray(ours), np.asarray(ref)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    if ref.dtype.kind == "f":  # bitwise, NaN any payload
        both_nan = np.isnan(ours) & np.isnan(ref)
        assert ((ours.view(f"u{ref.itemsize}") == ref.view(f"u{ref.itemsize}"))
                | both_nan).all(), (ours, ref)
    else:
        assert np.array_equal(ours, ref)


EXACT = "np.where(a > b, np.maximum(a, b) * 2, np.minimum(a, b) - b / 3) + np.clip(a, -1, 1) " \
        "+ abs(b) + np.sqrt(abs(a)) + a**2"
f_exact = chokepoint.fuse(EXACT)

floats = st.sampled_from([np.float32, np.float64])


@settings(max_examples=25, deadline=None)
@given(dtype=floats, data=st.data())
def test_exact_ops_bitwise_equal_with_broadcasting(dtype, data):
    shape_a, shape_b = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3,
                                                                  max_side=4)).input_shapes
    elems = st.one_of(st.sampled_from(SPECIALS), st.floats(-1e3, 1e3, width=32).map(float))
    a = data.draw(hnp.arrays(dtype, shape_a, elements=elems))
    b = data.draw(hnp.arrays(dtype, shape_b, elements=elems))
    a0, b0 = a.copy(), b.copy()
    with np.errstate(all="ignore"):
        ref = eval(EXACT, {"np": np, "a": a, "b": b})
    _same(f_exact(a=a, b=b), ref)
    assert np.array_equal(a, a0, equal_nan=True)
    assert np.array_equal(b, b0, equal_nan=True)


@pytest.mark.parametrize(("shape_a", "shape_b"), [((400, 1, 32), (1, 16, 32)),
                                                  ((6, 20, 1, 64), (20, 16, 64))])
def test_broadcasts_of_three_and_more_axes_large_enough_for_threads(shape_a, shape_b):
    # the parallel kernel unravels its loop index over the outer axes: numba refused the
    # first form of that code for three axes and more ("Overwrite of parallel loop index")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
    assert np.prod(np.broadcast_shapes(shape_a, shape_b)) >= 1 << 16  # threads take it
    _same(chokepoint.fuse("np.abs(a - b) * 2.0")(a=a, b=b), np.abs(a - b) * 2.0)
    np.testing.assert_allclose(chokepoint.fuse("np.abs(a - b).sum(axis=-1)")(a=a, b=b),
                               np.abs(a - b).sum(axis=-1), rtol=1e-13)


@pytest.mark.parametrize("x, y", [(np.float32(2), 3), (np.int8(5), 2.5),
                                  (np.arange(3, dtype=np.int16), 7),
                                  (np.arange(3, dtype=np.uint8), np.arange(3, dtype=np.int8)),
                                  (np.ones(2, np.float32), 1.0), (np.ones(2, np.float32), 0.1),
                                  (np.ones(2, np.int32), np.float32(0.5)),
                                  (np.array([True, False]), 1)])
def test_type_promotion_nep50(x, y):
    f = chokepoint.fuse("x * y + x")
    _same(f(x=x, y=y), x * y + x)


@pytest.mark.parametrize("s", [np.float64(0.25), np.float32(0.25), np.int16(3), np.bool_(True)])
def test_a_numpy_scalar_argument_beside_arrays_is_a_scalar_operand(s):
    # the flat path takes it (a 0-d leaf): values and dtype as NumPy's, fresh and into out=
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((80, 200)), rng.standard_normal((80, 200)).astype(np.float32)
    f = chokepoint.fuse("a * s * (1 + b - 0.5 * b ** 2)")
    expected = a * s * (1 + b - 0.5 * b ** 2)
    _same(f(a=a, s=s, b=b), expected)
    out = np.zeros((3, *expected.shape), expected.dtype)
    view = out[1]
    assert f(a=a, s=s, b=b, out=view) is view
    _same(view, expected)
    assert not out[0].any() and not out[2].any()


@pytest.mark.parametrize("n", [1000, 300_000])
def test_a_transcendental_chain_into_one_of_its_inputs_gives_what_it_gives_elsewhere(n):
    # computed into a buffer, then copied: the vectorised exp's out-of-range arguments are
    # recomputed exactly from inputs the result has not overwritten yet
    rng = np.random.default_rng(0)
    a = rng.uniform(-800, 800, n)
    b = rng.standard_normal(n)
    f = chokepoint.fuse("np.exp(a) * 0.5 + b")
    with np.errstate(over="ignore"):
        expected = f(a=a, b=b)
        assert f(a=a, b=b, out=a) is a
    _same(a, expected)
    assert np.isinf(a).any() and np.isfinite(a).any()


def test_python_scalar_overflow_is_numpys_error():
    with pytest.raises(OverflowError):
        chokepoint.fuse("x + y")(x=np.ones(3, np.int8), y=1000)


def test_int_arithmetic_wraps_and_comparisons():
    x = np.array([120, -128, 7], np.int8)
    f = chokepoint.fuse("(x + x) * 3 - x")
    _same(f(x=x), (x + x) * 3 - x)
    _same(chokepoint.fuse("(x > 3) & (x != 7)")(x=x), (x > 3) & (x != 7))
    _same(chokepoint.fuse("abs(x)")(x=x), abs(x))


def test_square_is_numpys_power_of_two():
    x = np.random.default_rng(1).normal(size=1000)
    _same(chokepoint.fuse("x**2")(x=x), x**2)


def test_decorator_keeps_signature_and_out():
    @chokepoint.fuse
    def g(a, b, scale=2.0):
        return np.where(a > 0, a * scale, b)

    params = list(inspect.signature(g).parameters)
    assert params == ["a", "b", "scale", "out"] and g.__name__ == "g"
    a, b = np.array([-1.0, 2.0, 0.0]), np.array([5.0, 6.0, 7.0])
    out = np.full(3, 9.0)
    assert g(a, b, out=out) is out
    _same(out, np.where(a > 0, a * 2.0, b))
    _same(g(a, b, 0.5), np.where(a > 0, a * 0.5, b))


def test_zero_d_and_empty_and_fortran():
    f = chokepoint.fuse("a * 2 + b")
    _same(f(a=np.float64(3), b=1.0), np.float64(3) * 2 + 1.0)
    _same(f(a=np.ones((0, 3)), b=np.ones(3)), np.ones((0, 3)) * 2 + np.ones(3))
    a = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    r = f(a=a, b=a)
    _same(r, a * 2 + a)
    assert r.flags.f_contiguous
    t = np.arange(12.0).reshape(3, 4).T  # not contiguous either way against b
    _same(f(a=t, b=np.arange(3.0)), t * 2 + np.arange(3.0))


def test_in_place_and_overlapping_out():
    a = np.arange(10.0)
    f = chokepoint.fuse("a + 1")
    f(a=a, out=a)
    _same(a, np.arange(10.0) + 1)
    a = np.arange(10.0)
    f(a=a[1:], out=a[:-1])  # partial overlap goes through a buffer
    _same(a[:-1], np.arange(1.0, 10.0) + 1)


@pytest.mark.parametrize("out, error", [
    (np.full(4, 7.0), ValueError), (np.full(3, 7.0, np.float32), TypeError),
    ([0, 0, 0], TypeError)])
def test_bad_out_is_untouched(out, error):
    # filled, not np.empty: uninitialised memory may hold NaN, which never compares equal
    before = np.array(out, copy=True)
    with pytest.raises(error):
        chokepoint.fuse("a + 1")(a=np.ones(3), out=out)
    assert np.array_equal(np.asarray(out), before)


def test_shapes_that_do_not_broadcast_give_numpys_error():
    with pytest.raises(ValueError, match="broadcast"):
        chokepoint.fuse("a + b")(a=np.ones(3), b=np.ones(4))


@pytest.mark.parametrize("code, words", [
    ("np.sum(a, 0, np.float32) + b", "np.sum with"), ("a[1:] + b", "indexing"),
    ("a @ b", "np.matmul"), ("np.add.reduce(a) + b", "reduce"), ("a // b", "np.floor_divide"),
    ("a.mean(axis=(0,)) + b", "np.mean with axis="),
    ("b if a > 0 else a", "branch")])
def test_what_cannot_be_fused_names_the_operation(code, words):
    with pytest.raises(FuseError, match=words) as info:
        chokepoint.fuse(code)(a=np.ones(3), b=np.ones(3))
    assert "<fuse>:1" in str(info.value)


def test_error_names_the_line_of_a_function():
    def h(a):
        b = a + 1
        return np.cumsum(b)

    line = inspect.getsourcelines(h)[1] + 2
    with pytest.raises(FuseError, match=rf"test_fuse.py:{line}: return np.cumsum\(b\)"):
        chokepoint.fuse(h)(np.ones(3))


def test_dask_blockwise():
    da = pytest.importorskip("dask.array")
    x = np.arange(20.0).reshape(4, 5)
    dx = da.from_array(x, chunks=(2, 5))
    r = chokepoint.fuse("np.sqrt(a) * b + 1")(a=dx, b=np.arange(5.0))
    assert isinstance(r, da.Array)
    _same(r.compute(), np.sqrt(x) * np.arange(5.0) + 1)


def test_pooled_results_are_never_shared_while_referenced(monkeypatch):
    from chokepoint.kernels import pool

    monkeypatch.setattr(pool, "MIN_BYTES", 64)
    f = chokepoint.fuse("a + 1")
    a = np.arange(100.0)
    first = f(a=a)
    view = first[10:]
    second = f(a=a * 2)  # `first` is alive: a new buffer
    assert not np.may_share_memory(first, second)
    del first
    third = f(a=a * 3)  # `view` still refers to the first buffer
    assert not np.may_share_memory(view, third) and not np.may_share_memory(second, third)
    _same(view, np.arange(10.0, 100.0) + 1)
    del view, third
    fourth = f(a=a)
    _same(fourth, a + 1)
    assert fourth.base is not None and fourth.base.nbytes == 800  # from the pool


@chokepoint.fuse
def _module_level_hypot(a, b):
    return np.sqrt(a * a + b * b)


def test_fused_functions_pickle_by_what_they_were_made_from():
    # how they reach dask.distributed's workers (tests/kernels/test_on_dask.py runs a cluster)
    import pickle

    a, b = np.arange(4.0), np.arange(4.0) + 1
    f = chokepoint.fuse("a * b + 1")
    g = pickle.loads(pickle.dumps(f))
    assert g is not f and g.code == f.code
    assert np.array_equal(g(a=a, b=b), a * b + 1)
    h = pickle.loads(pickle.dumps(_module_level_hypot))
    assert np.array_equal(h(a, b), np.sqrt(a * a + b * b))


def _within_ulps(ours, ref, ulps):
    """Within ``ulps`` of the largest finite magnitude (a sum may cancel), NaN where NumPy's."""
    assert (np.isnan(ours) == np.isnan(ref)).all()
    scale = np.spacing(np.abs(ref[np.isfinite(ref)]).max())
    far = ~(np.abs(ours - ref) <= ulps * scale) & ~np.isnan(ref)
    assert not far.any(), (ours[far], ref[far])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sin_cos_vectorised_below_their_bound_and_libm_beyond(dtype):
    from chokepoint.fuse import codegen

    f = chokepoint.fuse("np.sin(a) + np.cos(b)")
    small = np.linspace(-10, 10, 1000).astype(dtype)
    p = f.plan({"a": np.dtype(dtype), "b": np.dtype(dtype)})
    assert p.exact is not None  # a vectorised body and an exact one
    kernel = codegen.kernel(p, ((True,), (True,)), "serial")
    out = np.empty_like(small)
    assert kernel(out, small, small) == 0  # in range: the vectorised values stand
    big = small.copy()
    big[[3, 500]] = [1e300, -3e9] if dtype == np.float64 else [3e38, -1e30]
    assert kernel(out, big, small) == 2  # two arguments out of range: counted
    with np.errstate(invalid="ignore"):
        for a, b in ((small, small), (big, small), (small, big)):
            _within_ulps(f(a=a, b=b), np.sin(a) + np.cos(b), 3)
            work = a.copy()  # in place: the inputs are gone when the count comes back
            f(a=work, b=b, out=work)
            _within_ulps(work, np.sin(a) + np.cos(b), 3)
        special = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0], dtype)
        _same(chokepoint.fuse("np.sin(a)")(a=special), np.sin(special))


@settings(max_examples=25, deadline=None)
@given(dtype=floats, data=st.data())
def test_slices_of_larger_arrays_and_out_slices_bitwise_equal(dtype, data):
    # a stencil's operands: views whose rows are apart in memory (unit inner step or not),
    # a broadcast row and column, into a fresh result or a slice of another array
    ndim = data.draw(st.integers(2, 3))
    shape = tuple(data.draw(st.lists(st.integers(2, 6), min_size=ndim, max_size=ndim)))
    big = tuple(s + 3 for s in shape)

    big = (*big[:-1], 2 * big[-1])  # room for an inner step of 2

    def view(base):
        start = [data.draw(st.integers(0, 3), label="start") for _ in shape]
        step = data.draw(st.sampled_from([1, 1, 2]), label="inner step")
        index = [slice(s, s + n) for s, n in zip(start, shape, strict=True)]
        index[-1] = slice(start[-1], start[-1] + step * shape[-1], step)
        return base[tuple(index)]

    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    base = rng.normal(size=big).astype(dtype)
    a = view(base)
    b = view(rng.normal(size=big).astype(dtype))[(0,) * (ndim - 1)]  # a row, broadcast
    a0 = a.copy()
    with np.errstate(all="ignore"):
        ref = eval(EXACT, {"np": np, "a": a, "b": b})
    _same(f_exact(a=a, b=b), ref)
    target = np.full(big, 7.0, dtype)
    out = target[tuple(slice(1, 1 + n) for n in shape)]
    assert f_exact(a=a, b=b, out=out) is out
    _same(out, ref)
    outside = np.ones(big, bool)
    outside[tuple(slice(1, 1 + n) for n in shape)] = False
    assert (target[outside] == 7.0).all()  # nothing written outside the slice
    assert np.array_equal(a, a0, equal_nan=True)


def test_a_stencil_step_reads_its_slices_in_place(monkeypatch):
    # large enough for the parallel kernel; the slices go to the row kernel as they are
    from chokepoint.fuse import api

    rows = []
    launch = api._launch_rows
    monkeypatch.setattr(api, "_launch_rows", lambda *a: rows.append(1) or launch(*a))
    copies = []
    contiguous = np.ascontiguousarray
    monkeypatch.setattr(api.np, "ascontiguousarray", lambda a: copies.append(1) or contiguous(a))
    u = np.random.default_rng(2).random((700, 600))
    v = np.zeros_like(u)
    step = chokepoint.fuse("0.25 * (n + s + e + w)")
    sides = {"n": u[:-2, 1:-1], "s": u[2:, 1:-1], "e": u[1:-1, 2:], "w": u[1:-1, :-2]}
    for _ in range(3):  # serial and parallel, as the chooser tries them
        assert step(**sides, out=v[1:-1, 1:-1]) is not None
        _same(v[1:-1, 1:-1], 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]))
    assert not v[0].any() and not v[-1].any() and not v[:, 0].any() and not v[:, -1].any()
    assert rows and not copies


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("shape", [(1,), (128,), (64, 10)])
def test_a_small_call_gives_what_the_general_path_gives(dtype, shape):
    # below the parallel size, a call of C-contiguous arrays of one shape goes straight to
    # the serial kernel (looked up once per signature), into out= too; a strided view of the
    # same values takes the general path
    @chokepoint.fuse
    def f(x, y):
        return np.where(x > y, np.sin(x) * y, x - y / 3) + 2

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 1e6).astype(dtype)  # sin of large arguments: exact path
    y = (rng.standard_normal(shape) * 10).astype(dtype)
    x0, y0 = x.copy(), y.copy()
    strided = np.repeat(x, 2, axis=-1)[..., ::2]
    assert not strided.flags.c_contiguous or x.size == 1
    general = f(strided, y)
    _same(f(x, y), general)
    _same(f(x=x, y=y), general)
    out = np.full_like(general, 7)
    assert f(x, y, out=out) is out
    _same(out, general)
    assert np.array_equal(x, x0) and np.array_equal(y, y0)
    if general.dtype == x.dtype:  # in place: the exact kernel only (the general path's rule)
        assert f(x, y, out=x) is x
        np.testing.assert_allclose(x, general, rtol=1e-6)


def test_a_small_call_into_out_writes_where_numpy_would_or_leaves_it_to_the_general_path():
    f = chokepoint.fuse("a * b + 1")
    a = np.arange(1.0, 9.0)
    b = a[::-1].copy()
    expected = a * b + 1
    # a partial overlap: the general path computes it through a buffer
    buffer = np.concatenate([a, [0.0]])
    f(a=buffer[:-1], b=b, out=buffer[1:])
    _same(buffer[1:], expected)
    out = np.full(8, 7.0)
    with pytest.raises(TypeError, match="dtype"):
        f(a=a, b=b, out=np.full(8, 7.0, np.float32))  # the general path's error
    readonly = out.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        f(a=a, b=b, out=readonly)
    with pytest.raises(ValueError, match="shape"):
        f(a=a, b=b, out=out[:4])
    assert (out == 7.0).all()
    assert f(a=a, b=b, out=out) is out
    _same(out, expected)


def test_a_small_call_keeps_the_signature_and_the_general_paths_cases():
    f = chokepoint.fuse("a * b + 1")
    a = np.arange(6.0)
    with pytest.raises(TypeError, match="positional"):
        f(a, a)  # an expression's arguments are named
    _same(f(a=a, b=a[::-1].copy()), a * a[::-1] + 1)
    _same(f(a=a[::2], b=a[1::2]), a[::2] * a[1::2] + 1)  # strided views
    _same(f(a=a.reshape(2, 3), b=a[:3]), a.reshape(2, 3) * a[:3] + 1)  # broadcast
    _same(f(a=a, b=2.0), a * 2.0 + 1)  # a Python scalar
    assert f(a=a, b=a).flags.owndata  # a new array each call
    assert f(a=a, b=a) is not f(a=a, b=a)
