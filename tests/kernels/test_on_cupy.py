"""CuPy: the CUDA source is generated from the same expression table (checked here on the
CPU); the kernels themselves run where a GPU and CuPy are available."""

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels.on_cupy import cuda_expression
from chokepoint.kernels.ops import OPS

from . import reference as ref


def test_expressions_translate_to_cuda():
    assert cuda_expression(OPS["relu"].expr) == "((v < zero) ? (zero) : (v))"
    assert cuda_expression(OPS["relu_grad"].expr) == "(!(v <= zero))"
    assert cuda_expression(OPS["hardtanh_backward"].expr) == \
        "(((v > lo) && (v < hi)) ? (g) : (zero))"
    for op in OPS.values():  # every operation has a CUDA form
        assert cuda_expression(op.expr)
    with pytest.raises(ValueError, match="CUDA"):
        cuda_expression("max(v, zero)")


def _cupy():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (no GPU on this machine)")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no GPU")
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        pytest.skip(f"no usable GPU: {exc}")
    return cupy


@pytest.mark.parametrize("dtype", ref.FLOATS)
def test_cupy_kernels_match_the_cpu(dtype):
    cupy = _cupy()
    x = np.concatenate([ref.specials(dtype),
                        np.random.default_rng(0).standard_normal(4093).astype(dtype)])
    g = np.random.default_rng(1).standard_normal(x.size).astype(dtype)
    cx, cg = cupy.asarray(x), cupy.asarray(g)
    cases = [
        (chokepoint.relu(cx), chokepoint.relu(x)),
        (chokepoint.relu_grad(cx, at_zero=1), chokepoint.relu_grad(x, at_zero=1)),
        (chokepoint.leaky_relu(cx, 0.2), chokepoint.leaky_relu(x, 0.2)),
        (chokepoint.hardtanh(cx), chokepoint.hardtanh(x)),
        (chokepoint.relu6(cx), chokepoint.relu6(x)),
        (chokepoint.relu_backward(cg, cx), chokepoint.relu_backward(g, x)),
        (chokepoint.leaky_relu_backward(cg, cx, 0.2), chokepoint.leaky_relu_backward(g, x, 0.2)),
        (chokepoint.hardtanh_backward(cg, cx), chokepoint.hardtanh_backward(g, x)),
        (chokepoint.relu6_backward(cg, cx), chokepoint.relu6_backward(g, x)),
    ]
    y, mask = chokepoint.relu_with_mask(cx)
    cases += [(y, chokepoint.relu(x)),
              (chokepoint.relu_backward(cg, mask), chokepoint.relu_backward(g, x))]
    for ours, expected in cases:
        assert isinstance(ours, cupy.ndarray)
        assert ref.same(cupy.asnumpy(ours), expected)


def test_torch_cuda_tensors_through_dlpack():
    _cupy()
    torch = pytest.importorskip("torch", reason="torch is optional")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    x = torch.randn(1000, device="cuda")
    assert torch.equal(chokepoint.relu(x), torch.relu(x))
