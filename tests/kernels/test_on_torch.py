"""Torch tensors: zero-copy in and out, a tensor back, chokepoint's semantics."""

import numpy as np
import pytest

import chokepoint

from . import reference as ref

torch = pytest.importorskip("torch", reason="torch is an optional dependency")


def test_tensor_in_tensor_out_sharing_memory():
    x = torch.linspace(-2, 2, 101, dtype=torch.float64)
    y = chokepoint.relu(x)
    assert isinstance(y, torch.Tensor) and torch.equal(y, torch.relu(x))
    out = torch.empty_like(x)
    assert chokepoint.relu(x, out=out) is out and torch.equal(out, torch.relu(x))
    g = torch.ones_like(x)
    chokepoint.relu_backward(g, x, out=g)  # in place through the shared memory
    assert torch.equal(g, (x > 0).to(torch.float64))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_every_kernel_matches_torch(dtype):
    x = torch.from_numpy(ref.specials(np.float64)).to(dtype)
    g = torch.full_like(x, 0.5)
    aten = torch.ops.aten
    numbers = ~torch.isnan(x)
    pairs = [
        (chokepoint.relu(x), torch.relu(x)),
        (chokepoint.leaky_relu(x, 0.2), torch.nn.functional.leaky_relu(x, 0.2)),
        (chokepoint.hardtanh(x), torch.nn.functional.hardtanh(x)),
        (chokepoint.relu6(x), torch.nn.functional.relu6(x)),
        (chokepoint.relu_backward(g, x)[numbers], aten.threshold_backward(g, x, 0)[numbers]),
        (chokepoint.leaky_relu_backward(g, x, 0.2)[numbers],
         aten.leaky_relu_backward(g, x, 0.2, False)[numbers]),
        (chokepoint.hardtanh_backward(g, x)[numbers],
         aten.hardtanh_backward(g, x, -1.0, 1.0)[numbers]),
        (chokepoint.relu6_backward(g, x)[numbers], aten.hardtanh_backward(g, x, 0.0, 6.0)[numbers]),
    ]
    for ours, theirs in pairs:
        assert isinstance(ours, torch.Tensor)
        assert ref.same(ours.numpy(), theirs.numpy())


def test_mask_and_grad_dtypes():
    x = torch.randn(1000, dtype=torch.float32)
    y, mask = chokepoint.relu_with_mask(x)
    assert torch.equal(y, torch.relu(x))
    assert torch.equal(chokepoint.relu_backward(torch.ones_like(x), mask), (x > 0).float())
    assert chokepoint.relu_grad(x, dtype=torch.float16).dtype == torch.float16


def test_requires_grad_and_bfloat16_are_refused():
    with pytest.raises(TypeError, match="detach"):
        chokepoint.relu(torch.ones(3, requires_grad=True))
    with pytest.raises(TypeError, match="bfloat16"):
        chokepoint.relu(torch.ones(3, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="shape"):
        chokepoint.relu_backward(torch.ones(3), torch.ones(4))
