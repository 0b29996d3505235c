"""Values against the float64 NumPy reference: property tests over shapes, strides and dtypes."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import chokepoint
from chokepoint.kernels import adaptive, engine_numba, native

from . import reference as ref

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed

SLOPE = 0.01

UNARY = {
    "relu": (chokepoint.relu, ref.relu),
    "leaky_relu": (lambda x: chokepoint.leaky_relu(x, SLOPE), lambda x: ref.leaky_relu(x, SLOPE)),
    "hardtanh": (lambda x: chokepoint.hardtanh(x, -0.5, 2.0),
                 lambda x: ref.hardtanh(x, -0.5, 2.0)),
    "relu6": (chokepoint.relu6, lambda x: ref.hardtanh(x, 0.0, 6.0)),
    "relu_grad": (lambda x: chokepoint.relu_grad(x, dtype=np.float64),
                  lambda x: ref.relu_grad(x).astype(np.float64)),
    "relu_grad_at_zero": (lambda x: chokepoint.relu_grad(x, at_zero=1),
                          lambda x: ref.relu_grad(x, 1).astype(np.uint8)),
}
BINARY = {
    "relu_backward": (chokepoint.relu_backward, ref.relu_backward),
    "relu_backward_at_zero": (lambda g, x: chokepoint.relu_backward(g, x, at_zero=1),
                              lambda g, x: ref.relu_backward(g, x, 1)),
    "leaky_relu_backward": (lambda g, x: chokepoint.leaky_relu_backward(g, x, SLOPE),
                            lambda g, x: ref.leaky_relu_backward(g, x, SLOPE)),
    "hardtanh_backward": (lambda g, x: chokepoint.hardtanh_backward(g, x, -0.5, 2.0),
                          lambda g, x: ref.hardtanh_backward(g, x, -0.5, 2.0)),
    "relu6_backward": (chokepoint.relu6_backward,
                       lambda g, x: ref.hardtanh_backward(g, x, 0.0, 6.0)),
    "relu_backward_mask": (lambda g, x: chokepoint.relu_backward(
        g, chokepoint.relu_with_mask(x)[1]),
                           ref.relu_backward),
}

float_dtypes = st.sampled_from(ref.FLOATS)
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=12)


@st.composite
def strided(draw, dtype, shape):
    """An array of ``shape`` that is C-ordered, transposed, sliced or reversed."""
    base = draw(hnp.arrays(dtype, shape, elements={"allow_subnormal": True}))
    layout = draw(st.sampled_from(["C", "F", "sliced", "reversed"]))
    if layout == "F":
        return np.array(base, order="F")
    if layout == "sliced" and base.ndim:
        wide = np.empty((*base.shape[:-1], base.shape[-1] * 2), base.dtype)
        wide[..., ::2] = base
        return wide[..., ::2]
    if layout == "reversed" and base.ndim:
        return base[..., ::-1].copy()[..., ::-1]
    return base


@pytest.mark.parametrize("name", UNARY)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=float_dtypes, shape=shapes)
def test_unary_matches_reference(name, data, dtype, shape):
    ours, expected = UNARY[name]
    x = data.draw(strided(dtype, shape))
    before = x.copy()
    assert ref.same(ours(x), expected(x))
    assert ref.same(x, before), "the input was modified"


@pytest.mark.parametrize("name", BINARY)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=float_dtypes, shape=shapes)
def test_binary_matches_reference(name, data, dtype, shape):
    ours, expected = BINARY[name]
    x = data.draw(strided(dtype, shape))
    g = data.draw(strided(dtype, shape))
    assert ref.same(ours(g, x), expected(g, x))


@pytest.mark.parametrize("streaming", [False, True], ids=["cached-stores", "streaming"])
@pytest.mark.parametrize("dtype", ref.FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY) + sorted(BINARY))
def test_parallel_path_on_large_arrays(launch_settings, name, dtype, streaming, monkeypatch):
    """Sizes past parallel_min take numba's prange kernels (with non-temporal stores where the
    arrays are large: stream_min_bytes 0 here); the tail is not a multiple of 8 or 16."""
    launch_settings(stream_min_bytes=0 if streaming else 1 << 62)
    rng = np.random.default_rng(1)
    n = engine_numba.settings.parallel_min * 3 + 5
    x = (rng.standard_normal(n) * 4).astype(dtype)
    x[:: 1000] = ref.specials(dtype)[np.arange(len(x[::1000])) % len(ref.specials(dtype))]
    # a map's first call with a new chooser runs its streaming variant (the first candidate),
    # through the launcher (the C path off: its plans are the old chooser's)
    ran = []
    spy = (streaming and chokepoint.get_backend() == "numba" and dtype != np.float16
           and name != "relu_backward_mask" and engine_numba.settings.stream_maps)
    if spy:
        kernel = engine_numba._kernel
        monkeypatch.setattr(engine_numba, "_kernel",
                            lambda op, mode: ran.append(mode) or kernel(op, mode))
        monkeypatch.setattr(engine_numba, "chooser", adaptive.Chooser())
    with _python_path() if spy else contextlib.nullcontext():
        if name in UNARY:
            ours, expected = UNARY[name]
            assert ref.same(ours(x), expected(x))
        else:
            ours, expected = BINARY[name]
            g = rng.standard_normal(n).astype(dtype)
            g[7::997] = np.nan
            assert ref.same(ours(g, x), expected(g, x))
    assert ("stream" in ran) == spy


@contextlib.contextmanager
def _python_path():
    """Every call takes the Python path (the C path, where built, declines all)."""
    module = native.load()
    was = module.set_enabled(False) if module is not None else None
    try:
        yield
    finally:
        if module is not None:
            module.set_enabled(was)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint16])
def test_integer_inputs_keep_their_dtype(dtype):
    x = np.array([-3, -1, 0, 1, 2, 100], dtype=np.int64)
    x = x[x >= 0] if np.dtype(dtype).kind == "u" else x
    x = x.astype(dtype)
    assert ref.same(chokepoint.relu(x), np.maximum(x, 0).astype(dtype))
    assert ref.same(chokepoint.relu_grad(x), (x > 0).astype(np.uint8))
    g = np.arange(x.size, dtype=dtype)
    assert ref.same(chokepoint.relu_backward(g, x), np.where(x > 0, g, 0).astype(dtype))
    y, mask = chokepoint.relu_with_mask(x)
    assert ref.same(y, np.maximum(x, 0).astype(dtype))
    assert ref.same(chokepoint.relu_backward(g, mask), np.where(x > 0, g, 0).astype(dtype))


@pytest.mark.parametrize("dtype", chokepoint.GRAD_DTYPES)
def test_relu_grad_dtypes(dtype):
    x = ref.specials(np.float64)
    for at_zero in (0, 1):
        result = chokepoint.relu_grad(x, dtype=dtype, at_zero=at_zero)
        assert ref.same(result, ref.relu_grad(x, at_zero).astype(dtype))


def test_zero_dimensional_and_empty():
    assert ref.same(chokepoint.relu(np.float32(-2.0)), np.array(0.0, np.float32))
    assert chokepoint.relu(np.array(-0.0)).shape == ()
    empty = np.empty((0, 3), np.float64)
    assert chokepoint.relu(empty).shape == (0, 3)
    y, mask = chokepoint.relu_with_mask(empty)
    assert y.shape == (0, 3) and mask.nbytes == 0
    assert chokepoint.relu_backward(empty, mask).shape == (0, 3)


def test_python_lists_and_scalars_are_accepted():
    assert ref.same(chokepoint.relu([-1.0, 2.0]), np.array([0.0, 2.0]))
    assert ref.same(chokepoint.relu_grad(3.0), np.array(1, np.uint8))


def test_new_result_follows_fortran_layout():
    x = np.asfortranarray(np.arange(12.0).reshape(3, 4) - 6)
    assert chokepoint.relu(x).flags.f_contiguous
    assert ref.same(chokepoint.relu(x), ref.relu(x))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_kernels_on_the_streaming_path(launch_settings, dtype, monkeypatch):
    launch_settings(stream_min_bytes=0)
    rng = np.random.default_rng(3)
    n = engine_numba.settings.parallel_min * 2 + 3
    x = rng.integers(-50, 50, n).astype(dtype)
    g = rng.integers(-50, 50, n).astype(dtype)
    assert ref.same(chokepoint.relu(x), np.maximum(x, 0).astype(dtype))
    assert ref.same(chokepoint.relu_backward(g, x), np.where(x > 0, g, 0).astype(dtype))
    y, mask = chokepoint.relu_with_mask(x)
    assert ref.same(y, np.maximum(x, 0).astype(dtype))
    assert ref.same(chokepoint.relu_backward(g, mask), np.where(x > 0, g, 0).astype(dtype))
