"""gelu, silu, elu, softplus and their backward passes against PyTorch CPU (the oracle).

Special values (NaN, +-inf, +-0.0, the softplus threshold, ELU at 0) must equal torch exactly
(NaN's sign aside); random values agree within TOL_ULP units in the last place of the result
plus TOL_ULP * eps * (1 + |x|) * |grad| absolute: where the result is a small difference of
larger terms (GELU's tail, SiLU's derivative near its zero at x = -1.278) neither torch nor we
can be accurate in ulps of the result, and torch's float32 erf is itself ~12 ulp off at x = 5.
The bound is the one /work/coord/vecmath.md documents for the vocabulary functions.
"""

import numpy as np
import pytest

import chokepoint

#: no test here times anything: `make test` runs them in two processes (pytest -n 2)
pytestmark = pytest.mark.untimed

torch = pytest.importorskip("torch", reason="torch is the oracle for the activations")
F = torch.nn.functional
A = torch.ops.aten

TOL_ULP = 16
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, 5.0, -5.0, 10.0,
           10.000001, 9.999999, 20.0, 30.0, -30.0, 100.0, -100.0, 1e4, -1e4]

# name -> (ours(g, x), torch(g, x)); g is None for forward passes
CASES = {
    "gelu": (lambda g, x: chokepoint.gelu(x), lambda g, x: F.gelu(x)),
    "gelu_tanh": (lambda g, x: chokepoint.gelu(x, approximate="tanh"),
                  lambda g, x: F.gelu(x, approximate="tanh")),
    "silu": (lambda g, x: chokepoint.silu(x), lambda g, x: F.silu(x)),
    "elu": (lambda g, x: chokepoint.elu(x, 1.5), lambda g, x: F.elu(x, 1.5)),
    "softplus": (lambda g, x: chokepoint.softplus(x, 2.0, 20.0),
                 lambda g, x: F.softplus(x, 2.0, 20.0)),
    "gelu_backward": (lambda g, x: chokepoint.gelu_backward(g, x),
                      lambda g, x: A.gelu_backward(g, x)),
    "gelu_tanh_backward": (lambda g, x: chokepoint.gelu_backward(g, x, "tanh"),
                           lambda g, x: A.gelu_backward(g, x, approximate="tanh")),
    "silu_backward": (lambda g, x: chokepoint.silu_backward(g, x),
                      lambda g, x: A.silu_backward(g, x)),
    "elu_backward": (lambda g, x: chokepoint.elu_backward(g, x, alpha=1.5),
                     lambda g, x: A.elu_backward(g, 1.5, 1, 1, False, x)),
    "softplus_backward": (lambda g, x: chokepoint.softplus_backward(g, x, 2.0, 20.0),
                          lambda g, x: A.softplus_backward(g, x, 2.0, 20.0)),
}
# torch's float32 vectorised erf gives NaN at +inf (gelu(inf) = nan in float32, inf in float64);
# we return the limit, as torch's float64 does (docs/kernels.md)
DEVIATIONS = {("gelu", "float32", np.inf), ("gelu", "float16", np.inf)}
# torch's vector loop and its scalar loop (the tail, short arrays) can differ at NaN
# (elu_backward: NaN against grad; hardtanh_backward: 0 against grad): which one an element gets
# depends on the array's length and the CPU's vector width. We follow the vector loop, so the
# special values are compared tiled to a multiple of 64 elements: no element falls in a tail
TILES = 64
# the sign of a zero GELU (x = -0.0, or x far below 0): torch's float32 kernel gives -0.0 with
# AVX-512 and +0.0 with AVX2 (torch.backends.cpu.get_cpu_capability()); float64 gives -0.0, as
# x * Phi(x) does, and so do we: either sign of that zero is accepted from torch in float32
ZERO_SIGN = {("gelu", "float32"), ("gelu", "float16")}


def _torch(name, g, x):
    def tensor(a):
        return None if a is None else torch.from_numpy(a.copy())

    return CASES[name][1](tensor(g), tensor(x)).numpy()


def _ours(name, g, x):
    return CASES[name][0](g, x)


def _check_close(name, ours, ref, g, x):
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    o, r = ours.astype(np.float64), ref.astype(np.float64)
    nan = np.isnan(r)
    assert np.array_equal(np.isnan(o), nan), f"{name}: NaN at different places"
    eps = np.finfo(ref.dtype).eps
    scale = 1.0 if g is None else np.abs(g.astype(np.float64))
    with np.errstate(invalid="ignore"):  # the spacing of inf and NaN is NaN: no tolerance
        tol = TOL_ULP * (np.spacing(np.abs(r).astype(ref.dtype)).astype(np.float64)
                         + eps * (1 + np.abs(x.astype(np.float64))) * scale)
        bad = ~nan & ~(o == r) & ~(np.abs(o - r) <= tol)
    assert not bad.any(), (f"{name}: {bad.sum()} values off, e.g. x={x[bad][:3]} ours="
                           f"{ours[bad][:3]} torch={ref[bad][:3]}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values_equal_torch(name, dtype):
    x = np.tile(np.array(SPECIAL, dtype), TILES)
    g = None if "backward" not in name else np.full_like(x, 0.75)
    ours, ref = _ours(name, g, x), _torch(name, g, x)
    keep = np.tile([not any(n == name and d == np.dtype(dtype).name and
                            (w == v or (np.isnan(w) and np.isnan(v))) for n, d, w in DEVIATIONS)
                    for v in SPECIAL], TILES)
    same = (ours == ref) | (np.isnan(ours) & np.isnan(ref))
    signs = np.isnan(ref) | (np.signbit(ours) == np.signbit(ref))
    if (name, np.dtype(dtype).name) in ZERO_SIGN:
        signs |= (ours == 0) & (ref == 0)
    # exact except where both sides round differently inside the range (checked below)
    finite_inside = np.isfinite(ref) & (ref != 0) & np.isfinite(x.astype(np.float64))
    assert (same | ~keep | finite_inside).all(), (x[~same], ours[~same], ref[~same])
    assert (signs | ~keep).all(), x[~signs]
    _check_close(name, ours[keep], ref[keep], None if g is None else g[keep], x[keep])


def test_documented_deviation_gelu_inf_float32():
    assert chokepoint.gelu(np.array([np.inf], np.float32))[0] == np.inf
    assert F.gelu(torch.tensor([np.inf], dtype=torch.float64))[0] == np.inf


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_random_values_within_tolerance(name, dtype):
    rng = np.random.default_rng(14)
    x = np.concatenate([rng.standard_normal(3000) * 3, rng.uniform(-40, 40, 1000)]).astype(dtype)
    g = None if "backward" not in name else rng.standard_normal(x.size).astype(dtype)
    _check_close(name, _ours(name, g, x), _torch(name, g, x), g, x)


def test_float16_is_computed_in_float32_and_rounded_once():
    x = np.linspace(-6, 6, 513).astype(np.float16)
    for name in ("gelu", "silu", "elu", "softplus"):
        via32 = _ours(name, None, x.astype(np.float32)).astype(np.float16)
        assert np.array_equal(_ours(name, None, x), via32, equal_nan=True), name


def test_softplus_threshold_region_and_elu_at_zero():
    x = np.array([10.0, np.nextafter(10.0, 0), np.nextafter(10.0, 20)])
    # beta * x > threshold is linear (x itself); at exactly the threshold it is not
    y = chokepoint.softplus(x, beta=2.0, threshold=20.0)
    assert y[2] == x[2] and y[0] != x[0] and y[1] != x[1]
    assert np.array_equal(y, _torch("softplus", None, x))
    z = np.array([0.0, -0.0])
    assert np.array_equal(np.signbit(chokepoint.elu(z)), [False, True])
    gz = np.ones(2)
    assert np.array_equal(chokepoint.elu_backward(gz, z, alpha=2.0),
                          A.elu_backward(torch.ones(2, dtype=torch.float64), 2.0, 1, 1, False,
                                         torch.from_numpy(z)).numpy())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [7, 100_000])  # the serial and the parallel kernels
def test_softplus_beta_zero_is_ieee_as_torch(dtype, n):
    # log1p(exp(0)) / 0: inf, and NaN where beta * x is NaN; the kernels raised
    # ZeroDivisionError under numba's default error model
    x = np.resize(np.array([-1.0, 0.0, 1.0, np.nan, np.inf, -np.inf], dtype), n)
    g = np.ones_like(x)
    assert np.array_equal(chokepoint.softplus(x, beta=0.0),
                          F.softplus(torch.from_numpy(x), beta=0.0).numpy(), equal_nan=True)
    assert np.array_equal(chokepoint.softplus_backward(g, x, beta=0.0),
                          A.softplus_backward(torch.from_numpy(g), torch.from_numpy(x), 0.0,
                                              20.0).numpy(), equal_nan=True)


def test_strides_out_and_in_place():
    rng = np.random.default_rng(1)
    base = rng.standard_normal((6, 9))
    x = base[::2, ::-3]  # neither C nor F contiguous
    g = rng.standard_normal(x.shape)
    assert np.array_equal(chokepoint.gelu(x), chokepoint.gelu(np.ascontiguousarray(x)))
    out = np.empty_like(x)
    assert chokepoint.silu_backward(g, x, out=out) is out
    assert np.array_equal(out, chokepoint.silu_backward(g.copy(), x.copy()))
    y = x.copy()
    expected = chokepoint.softplus(y)
    assert chokepoint.softplus(y, out=y) is y and np.array_equal(y, expected)
    with pytest.raises(TypeError, match="dtype"):
        chokepoint.elu(np.arange(3))  # integers are refused, as torch does


def test_signatures_are_torch_names():
    import inspect

    assert str(inspect.signature(chokepoint.gelu)) == "(x, approximate='none', *, out=None)"
    assert str(inspect.signature(chokepoint.softplus_backward)) == \
        "(grad, x, beta=1.0, threshold=20.0, *, out=None)"
    assert str(inspect.signature(chokepoint.elu)) == "(x, alpha=1.0, *, out=None)"
    assert "Parameters\n----------" in chokepoint.silu.__doc__
    with pytest.raises(ValueError, match="approximate"):
        chokepoint.gelu(np.ones(2), approximate="fast")


def test_torch_tensors_and_dask():
    da = pytest.importorskip("dask.array", reason="dask is optional")
    x = np.linspace(-4, 4, 37)
    t = torch.from_numpy(x.copy())
    assert torch.equal(chokepoint.gelu(t, "tanh"), torch.from_numpy(chokepoint.gelu(x, "tanh")))
    out = torch.empty_like(t)
    assert chokepoint.elu_backward(t, t, 0.5, out=out) is out
    d = da.from_array(x, chunks=10)
    assert np.array_equal(chokepoint.softplus(d, 2.0).compute(), chokepoint.softplus(x, 2.0))
    assert np.array_equal(chokepoint.silu_backward(d, d).compute(), chokepoint.silu_backward(x, x))
