"""fuse's reductions against NumPy: values (sums within the documented bound of the exact sum,
the rest equal), dtypes and scalar types, NaN and signed zeros, empty arrays, reductions read by
later elementwise work, operands the reduction kernel does not take, and what is refused."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chokepoint
from chokepoint.fuse import FuseError
from chokepoint.kernels import engine_numba

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed

# sizes around the kernel's leaves (128), buffers (2048) and tasks; the last one is above
# engine_numba.settings.parallel_min, so the parallel kernel runs
SIZES = [1, 7, 8, 9, 130, 2049, 70_001]
assert SIZES[-1] > engine_numba.settings.parallel_min

FUSED = {kind: chokepoint.fuse(f"np.{kind}(a * 1)") for kind in
         ("sum", "mean", "max", "min", "prod", "any", "all")}


def _values(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == bool:
        return rng.random(n) < 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, n).astype(dtype)
    return rng.standard_normal(n).astype(dtype)


def sum_bound(x: np.ndarray) -> float:
    """docs/fuse.md's bound on a fused sum's error: (40 + log2 n) ulp of 1 times sum |x|."""
    eps = float(np.finfo(x.dtype if x.dtype.kind == "f" else np.float64).eps)
    return (40 + math.log2(max(x.size, 2))) * eps * float(np.sum(np.abs(x.astype(np.float64))))


@pytest.mark.parametrize("kind", sorted(FUSED))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, bool])
def test_each_reduction_is_numpys(kind, dtype):
    if dtype is bool and kind in ("prod", "mean"):
        pytest.skip("a * 1 of bools is int64: the int32 case covers it")
    for n in SIZES if dtype is np.float64 else SIZES[:-1]:
        a = _values(n, dtype)
        if kind == "prod" and np.dtype(dtype).kind == "f":
            a = (1 + a / 1000).astype(dtype)  # a product of normals underflows to 0
        ours, ref = FUSED[kind](a=a), getattr(np, kind)(a * 1)
        assert type(ours) is type(ref), (kind, dtype, n)
        exact = kind in ("max", "min", "any", "all") or np.dtype(ref.dtype).kind in "biu"
        if exact:
            assert ours == ref, (kind, dtype, n)
        elif kind in ("sum", "mean"):  # the mean: the sum's bound over n, and its division
            exact_sum = math.fsum(a.astype(np.float64))
            scale = 1 if kind == "sum" else n
            assert abs(float(ours) - exact_sum / scale) <= (
                sum_bound(a) / scale + float(np.finfo(ref.dtype).eps) * abs(float(ref)))
        else:  # the product of numbers near 1: as close as NumPy's own
            assert ours == pytest.approx(ref, rel=50 * float(np.finfo(ref.dtype).eps))


def test_a_sum_of_a_product_stays_within_its_bound_where_it_cancels():
    rng = np.random.default_rng(3)
    f = chokepoint.fuse("np.sum(a * b)")
    for dtype in (np.float32, np.float64):
        a, b = (rng.standard_normal(100_003).astype(dtype) for _ in range(2))
        exact = math.fsum(a.astype(np.float64) * b.astype(np.float64))  # exact products
        assert abs(float(f(a=a, b=b)) - exact) <= sum_bound(a * b)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5000), seed=st.integers(0, 2**32 - 1),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_sums_of_any_length(n, seed, dtype):
    a = _values(n, dtype, seed)
    ours = FUSED["sum"](a=a)
    assert ours.dtype == dtype
    assert abs(float(ours) - math.fsum(a.astype(np.float64))) <= sum_bound(a)


def test_nan_infinity_and_signed_zero_as_numpy():
    a = np.zeros(3000)
    a[1234] = np.nan
    for kind in ("sum", "max", "min", "prod", "mean"):
        assert np.isnan(FUSED[kind](a=a)), kind
    a[1234] = np.inf
    assert FUSED["max"](a=a) == np.inf and FUSED["sum"](a=a) == np.inf
    a[:] = -0.0
    for kind in ("sum", "prod", "mean"):
        ours, ref = FUSED[kind](a=a), getattr(np, kind)(a * 1)
        assert ours == 0 and np.signbit(ours) == np.signbit(ref), kind
    assert not FUSED["any"](a=a) and not FUSED["all"](a=a)


def test_an_empty_array_gives_numpys_value_warning_or_error():
    empty = np.empty(0)
    assert FUSED["sum"](a=empty) == 0.0 and FUSED["prod"](a=empty) == 1.0
    assert not FUSED["any"](a=empty) and FUSED["all"](a=empty)
    with pytest.raises(ValueError, match="zero-size array"):
        FUSED["max"](a=empty)
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert np.isnan(FUSED["mean"](a=empty))


def test_norm_of_a_vector():
    f = chokepoint.fuse("np.linalg.norm(a)")
    for a in (_values(5000, np.float32), _values(5000, np.float64), _values(5000, np.int32)):
        ours, ref = f(a=a), np.linalg.norm(a)
        assert type(ours) is type(ref)
        assert ours == pytest.approx(ref, rel=20 * float(np.finfo(ref.dtype).eps))


def test_a_norm_of_fused_values():
    f = chokepoint.fuse("np.linalg.norm(a - b)")
    for dtype in (np.float32, np.float64):
        a, b = _values(5000, dtype), _values(5000, dtype)[::-1].copy()
        ours, ref = f(a=a, b=b), np.linalg.norm(a - b)
        assert type(ours) is type(ref)
        assert ours == pytest.approx(ref, rel=20 * float(np.finfo(ref.dtype).eps))


@pytest.mark.parametrize("code", ["np.linalg.norm(a)", "np.sum(a)", "a.max()", "np.mean(a)",
                                  "np.linalg.norm(a, axis=-1, keepdims=True)", "a.min(axis=0)"])
def test_a_reduction_of_an_argument_itself_is_numpys_call(code):
    # nothing to fuse: NumPy's own reduction (a norm: BLAS's dot), its value bit for bit
    f = chokepoint.fuse(code)
    for a in (_values(6000, np.float32).reshape(20, 300), _values(6000, np.float64)):
        ours, ref = f(a=a), eval(code, {"np": np, "a": a})
        assert type(ours) is type(ref)
        np.testing.assert_array_equal(ours, ref)
        assert not f.plan({"a": a.dtype}).compiled  # no kernel was compiled for it


def test_short_rows_of_an_argument_are_reduced_by_the_kernel():
    # NumPy's reduction along rows of 10 pays per row: the kernel's is 2-3x faster there
    f = chokepoint.fuse("a.max(axis=-1, keepdims=True)")
    a = _values(6000, np.float32).reshape(600, 10)
    np.testing.assert_array_equal(f(a=a), a.max(axis=-1, keepdims=True))
    assert f.plan({"a": a.dtype}).compiled
    # a norm of an argument is NumPy's, short rows too (the kernel has no norm of its own)
    np.testing.assert_array_equal(chokepoint.fuse("np.linalg.norm(a, axis=-1)")(a=a),
                                  np.linalg.norm(a, axis=-1))


def test_a_reduction_read_by_later_elementwise_work():
    @chokepoint.fuse
    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    @chokepoint.fuse
    def standardise(x):
        centred = x - np.mean(x)
        return centred / np.sqrt(np.mean(centred * centred))

    for dtype in (np.float32, np.float64):
        x = _values(70_001, dtype) * 10
        before = x.copy()
        ours, ref = softmax(x), np.exp(x - x.max()) / np.exp(x - x.max()).sum()
        assert ours.dtype == dtype and ours.shape == x.shape
        np.testing.assert_allclose(ours, ref, rtol=50 * np.finfo(dtype).eps, atol=0)
        ref = (x - x.mean()) / np.sqrt(np.mean((x - x.mean()) ** 2))
        np.testing.assert_allclose(standardise(x), ref, rtol=1e-4 if dtype == np.float32
                                   else 1e-12, atol=1e-5 if dtype == np.float32 else 1e-12)
        assert np.array_equal(x, before)


def test_operands_the_reduction_kernel_does_not_take():
    f = chokepoint.fuse("np.sum(a * b)")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((300, 400)), rng.standard_normal(400)
    for x, y in ((a, b), (a[::2, 1:-1], b[1:-1]), (a.T, a[:, 0]), (np.asfortranarray(a), b)):
        ours = f(a=x, b=y)
        assert abs(ours - math.fsum((x * y).ravel())) <= sum_bound(x * y)


def test_arguments_out_of_the_vectorised_range_are_summed_exactly():
    # sin is vectorised below a bound; one argument beyond it sends the call to libm's sin
    a = np.linspace(-3, 3, 5000)
    a[17] = 1e30
    ours, ref = chokepoint.fuse("np.sum(np.sin(a))")(a=a), np.sum(np.sin(a))
    assert abs(ours - ref) <= sum_bound(np.sin(a))


@pytest.mark.parametrize("code, words", [
    ("np.sum(a, axis=(0, 1))", "axis=(0, 1)"), ("a.max(out=a)", "out="),
    ("np.sum(a, dtype=np.float32)", "dtype="), ("np.linalg.norm(a, ord=1)", "ord=1"),
    ("np.linalg.norm(a, 2)", "ord=2"), ("np.sum(a.sum())", "scalar"),
    ("np.cumsum(a)", "np.cumsum")])
def test_what_is_not_reduced_is_refused_with_its_name(code, words):
    with pytest.raises(FuseError, match=words.replace("(", r"\(").replace(")", r"\)")):
        chokepoint.fuse(code)(a=np.ones((3, 4)))


ROWS = {code: chokepoint.fuse(code) for code in (
    "np.sum(a * 2, axis=-1)", "a.max(axis=1, keepdims=True)", "np.min(a, -1)",
    "np.mean(a, axis=-1, keepdims=True)", "np.any(a > 1, axis=-1)", "np.prod(a, axis=0)",
    "np.sum(a, keepdims=True)", "np.all(a < 3, 1)")}


@pytest.mark.parametrize("code", sorted(ROWS))
def test_reductions_along_an_axis_are_numpys(code):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((40, 3000))
    for a in (x, x.astype(np.float32), x[:, :2047], x[:, 1:], x.reshape(8, 5, 3000),
              x[:0], x[:, :1], x[0], (x * 10).astype(np.int32)):
        if a.ndim == 1 and "1" in code.split("a")[-1] and "-1" not in code:
            continue  # axis 1 of a vector: NumPy's AxisError, tested below
        ours, ref = ROWS[code](a=a), eval(code, {"np": np, "a": a})
        assert np.shape(ours) == np.shape(ref) and np.asarray(ours).dtype == np.asarray(
            ref).dtype, (code, a.shape)
        eps = float(np.finfo(np.asarray(ref).dtype).eps) if np.asarray(
            ref).dtype.kind == "f" else 0
        # a sum's bound (docs/fuse.md) on the row with the largest magnitudes; a mean's over n
        magnitudes = np.abs(a.astype(np.float64)) * (2 if "a * 2" in code else 1)
        scale = float(magnitudes.sum(axis=-1).max()) if a.size else 0.0
        if "mean" in code:
            scale /= max(a.shape[-1], 1)
        np.testing.assert_allclose(ours, ref, rtol=64 * eps, atol=64 * eps * scale,
                                   err_msg=code)


def test_norms_of_rows_and_columns():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((300, 700))
    for code in ("np.linalg.norm(a, axis=1)", "np.linalg.norm(a, axis=0)",
                 "np.linalg.norm(a, None, -1, True)", "np.linalg.norm(a, keepdims=True)"):
        for a in (x, x.astype(np.float32)):
            ours, ref = chokepoint.fuse(code)(a=a), eval(code, {"np": np, "a": a})
            assert ours.shape == ref.shape and ours.dtype == ref.dtype, code
            eps = float(np.finfo(ref.dtype).eps)
            np.testing.assert_allclose(ours, ref, rtol=64 * eps, err_msg=code)


def test_a_row_softmax_and_layer_normalisation():
    @chokepoint.fuse
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    @chokepoint.fuse
    def layer_norm(x, gain):
        centred = x - x.mean(axis=-1, keepdims=True)
        return centred / np.sqrt(np.mean(centred**2, axis=-1, keepdims=True) + 1e-5) * gain

    rng = np.random.default_rng(11)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal((300, 1000)) * 5).astype(dtype)
        gain = rng.standard_normal(1000).astype(dtype)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        centred = x - x.mean(axis=-1, keepdims=True)
        expected = {
            "softmax": (softmax(x), e / e.sum(axis=-1, keepdims=True)),
            "layer norm": (layer_norm(x, gain), centred / np.sqrt(
                np.mean(centred**2, axis=-1, keepdims=True) + 1e-5) * gain)}
        for name, (ours, ref) in expected.items():
            assert ours.dtype == dtype and ours.shape == x.shape, name
            tol = 1e-4 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol, err_msg=name)


def test_an_axis_out_of_range_is_numpys_error():
    with pytest.raises(np.exceptions.AxisError):
        ROWS["np.all(a < 3, 1)"](a=np.ones(5))


def test_a_list_of_traced_arrays_is_refused_not_added():
    # NumPy made an object array of the nodes and reduced it with their operators: a + a
    with pytest.raises(FuseError, match="Python list of arrays"):
        chokepoint.fuse("np.sum([a, a])")(a=np.arange(5.0))


def test_an_argument_cannot_stand_for_a_reduction():
    def g(x, _reduced0=0.0):
        return x.sum() + _reduced0

    assert chokepoint.fuse(g)(np.arange(4.0)) == 6.0


def test_a_nan_maximum_or_minimum_is_a_positive_nan():
    a = np.arange(3000.0)
    a[5] = np.nan
    for kind in ("max", "min"):
        assert np.isnan(FUSED[kind](a=a)) and not np.signbit(FUSED[kind](a=a))


def test_out_is_refused_for_a_scalar_result():
    with pytest.raises(TypeError, match="out= is for an array result"):
        FUSED["sum"](a=np.ones(3), out=np.empty(()))


def test_reductions_of_dask_arrays_are_refused():
    da = pytest.importorskip("dask.array")
    with pytest.raises(FuseError, match="dask"):
        FUSED["sum"](a=da.ones(10, chunks=5))


def test_a_reduction_written_twice_is_computed_once():
    from chokepoint.fuse.trace import trace

    graph, _ = trace(lambda a: (a - a.max()) / a.max(), {"a": np.dtype(np.float64)})
    assert sum(n.op == "reduce" for n in graph.nodes) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert chokepoint.fuse("(a - a.max()) / a.max()")(a=np.arange(4.0))[0] == -1.0


@pytest.mark.parametrize("code", [
    "np.argmax(a * b + 1)", "(a - b).argmin()", "np.argmin(x * 2, axis=1)",
    "np.argmax(x + 1, axis=0, keepdims=True)", "x.argmax(1)", "np.argmax(x * x, axis=-1)",
    "np.argmin(np.abs(x - 0.5), axis=1, keepdims=True)", "a * 0 + np.argmax(b)"])
def test_argmax_and_argmin_are_numpys(code):
    # the chain fused into one array, then NumPy's argmax: its first occurrence of ties and
    # of NaN
    rng = np.random.default_rng(3)
    values = {"a": rng.random(5000), "b": rng.random(5000), "x": rng.random((300, 41))}
    values["a"][[7, 4000]] = np.nan  # the first NaN wins
    values["b"][[100, 200]] = 2.0  # a tie: the first wins
    f = chokepoint.fuse(code)
    got = f(**{n: values[n] for n in f.arguments})
    want = eval(code, {"np": np, **values})
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


def test_argmax_of_integers_and_of_nothing():
    i = np.arange(12, dtype=np.int32).reshape(3, 4) % 5
    assert chokepoint.fuse("np.argmax(i * 2, axis=1)")(i=i).tolist() == [3, 0, 1]
    with pytest.raises(ValueError, match="empty"):
        chokepoint.fuse("np.argmax(a + 1)")(a=np.zeros(0))
    with pytest.raises(FuseError, match="out=b"):
        chokepoint.fuse("np.argmax(a, out=b)")(a=np.ones(3), b=np.ones(3))


@pytest.mark.parametrize("code", [
    "np.argmax(x + y, axis=1).max()", "np.sum(x + y, axis=1).max()",
    "np.max(np.sum(x * 2, axis=0))", "x.min(axis=1, keepdims=True).sum()"])
def test_a_reduction_of_a_reduction_is_refused(code):
    # its plan reduced the inner reduction's operand instead (a review: 1.996 for NumPy's 42.9)
    x, y = np.ones((4, 5)), np.ones((4, 5))
    with pytest.raises(FuseError, match="a reduction of a reduction"):
        chokepoint.fuse(code)(x=x, y=y) if "y" in code else chokepoint.fuse(code)(x=x)
