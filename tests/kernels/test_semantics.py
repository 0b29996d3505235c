"""The README's semantics table is what the kernels compute, and what torch computes."""

import os

import numpy as np
import pytest

from chokepoint.kernels import semantics

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_the_readme_holds_the_current_table():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    assert semantics.table() in text, (
        "the README's semantics table is stale: run python -m chokepoint.kernels.semantics "
        "README.md")


def test_the_table_is_torchs():
    # the inputs tiled to 64 times their count: torch's vector loop computes every one of them
    # (its scalar tail loop differs at NaN for hardtanh and elu; we follow the vector loop)
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = torch.tensor(semantics.INPUTS * 64, dtype=torch.float64)

    def derivative(f):
        xr = x.clone().requires_grad_()
        f(xr).backward(torch.ones_like(x))
        return xr.grad

    theirs = {
        "relu(x)": F.relu(x), "relu6(x)": F.relu6(x), "silu(x)": F.silu(x),
        "gelu(x, approximate='none')": F.gelu(x), "elu(x, alpha=1.0)": F.elu(x),
        "softplus(x, beta=1.0, threshold=20.0)": F.softplus(x),
        "hardtanh(x, min_val=-1.0, max_val=1.0)": F.hardtanh(x),
        "leaky_relu(x, negative_slope=0.01)": F.leaky_relu(x, 0.01),
        "silu'(x)  [silu_backward(1, x)]": derivative(F.silu),
        "gelu'(x)  [gelu_backward(1, x, approximate='none')]": derivative(F.gelu),
        "softplus'(x)  [softplus_backward(1, x, beta=1.0, threshold=20.0)]":
            derivative(F.softplus),
        "relu'(x)  [relu_backward(1, x)]": derivative(F.relu),
        "leaky_relu'(x)  [leaky_relu_backward(1, x, negative_slope=0.01)]":
            derivative(lambda t: F.leaky_relu(t, 0.01)),
        "hardtanh'(x)  [hardtanh_backward(1, x, min_val=-1.0, max_val=1.0)]":
            derivative(F.hardtanh),
        "relu6'(x)  [relu6_backward(1, x)]": derivative(F.relu6),
        "elu'(x)  [elu_backward(1, x, alpha=1.0)]": derivative(F.elu),
    }
    rows = dict(semantics.rows())
    for label, values in theirs.items():
        expected = [semantics._text(float(v))
                    for v in values.detach().numpy()[:len(semantics.INPUTS)]]
        ours = rows[label]
        for a, b, at in zip(ours, expected, semantics.INPUTS, strict=True):
            if a == b:
                continue
            assert np.isclose(float(a), float(b), rtol=1e-5), f"{label} at {at}: {a} vs {b}"
