"""CuPy: the CUDA source is generated from the same expression table (checked here on the
CPU); the kernels themselves run where a GPU and CuPy are available."""

import shutil
import subprocess

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels import vocabulary
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


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler to check the source")
def test_cuda_source_compiles_as_cpp_for_float_and_double(tmp_path):
    # without a GPU, the generated expressions and the preamble's device functions are compiled
    # by the host's C++ compiler (CUDA's math functions have the same names and overloads as
    # <cmath>'s), for both computation types: a misspelled function or a missing overload fails
    functions = []
    for op in OPS.values():
        params = "".join(f", C {p}" for p in op.params)
        functions.append(f"template <typename C> C f_{op.name}(C v, C g{params}) "
                         f"{{ (void)g; return (C)({cuda_expression(op.expr)}); }}")
        functions += [f"template {t} f_{op.name}<{t}>({', '.join([t] * (2 + len(op.params)))});"
                      for t in ("float", "double")]
    source = tmp_path / "kernels.cpp"
    source.write_text("#include <cmath>\nusing namespace std;\n#define __device__\n"
                      + vocabulary.CUDA_PREAMBLE + "\n".join(functions) + "\n")
    result = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", str(source)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


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
