"""Pure-NumPy engine: the same expressions as the numba engine, evaluated block by block.

Used when ``CHOKEPOINT_BACKEND=numpy``, when numba cannot be imported, and for float16 (numba
has no float16 arithmetic on the CPU). Blocks of :data:`BLOCK` elements keep every temporary
small (a few hundred KB, cache-resident), so the engine never allocates a full-size temporary.
float16 blocks are widened to float32, computed, and rounded once on the store, as torch does.
"""

from __future__ import annotations

from types import CodeType

import numpy as np

from . import vocabulary
from .ops import OPS

__all__ = ["BLOCK", "NAME", "binary", "mask_backward", "mask_forward", "unary"]

NAME = "numpy"
BLOCK = 1 << 15  # a multiple of 8, so that mask blocks start on a byte

_FUNCTIONS = vocabulary.NUMPY
_CODE: dict[str, CodeType] = {
    name: compile(op.expr, f"<chokepoint op {name}>", "eval") for name, op in OPS.items()
}


def _compute_view(block: np.ndarray) -> np.ndarray:
    return block.astype(np.float32) if block.dtype == np.float16 else block


def _evaluate(name: str, v: np.ndarray, g: np.ndarray | None, params: dict) -> np.ndarray:
    # select() evaluates both branches: an overflow in the branch not taken is no error
    with np.errstate(all="ignore"):
        return eval(_CODE[name], {"__builtins__": {}}, {**_FUNCTIONS, **params, "v": v, "g": g})


def _blocks(n: int):
    for start in range(0, n, BLOCK):
        yield start, min(start + BLOCK, n)


def unary(name: str, x: np.ndarray, out: np.ndarray, constants: tuple) -> None:
    """``out[i] = OPS[name](x[i])`` for flat contiguous ``x`` and ``out``.

    ``constants`` holds the values of ``OPS[name].params``, in the computation dtype.
    """
    params = dict(zip(OPS[name].params, constants, strict=True))
    for start, stop in _blocks(out.shape[0]):
        out[start:stop] = _evaluate(name, _compute_view(x[start:stop]), None, params)


def binary(name: str, grad: np.ndarray, x: np.ndarray, out: np.ndarray,
           constants: tuple) -> None:
    """``out[i] = OPS[name](grad[i], x[i])`` for flat contiguous arrays."""
    params = dict(zip(OPS[name].params, constants, strict=True))
    for start, stop in _blocks(out.shape[0]):
        v = _compute_view(x[start:stop])
        g = _compute_view(grad[start:stop])
        out[start:stop] = _evaluate(name, v, g, params)


def mask_forward(x: np.ndarray, y: np.ndarray, bits: np.ndarray, zero, at_zero: int) -> None:
    """``y = relu(x)`` and the packed derivative of ReLU in ``bits``, block by block."""
    passes = "relu_grad_at_zero" if at_zero else "relu_grad"
    params = {"zero": zero}
    for start, stop in _blocks(x.shape[0]):
        v = _compute_view(x[start:stop])
        mask = _evaluate(passes, v, None, params)
        y[start:stop] = _evaluate("relu", v, None, params)
        bits[start // 8:(stop + 7) // 8] = np.packbits(mask, bitorder="little")


def mask_backward(grad: np.ndarray, bits: np.ndarray, out: np.ndarray, zero) -> None:
    """``out = grad`` where the packed bit is set, else 0, block by block."""
    for start, stop in _blocks(out.shape[0]):
        passes = np.unpackbits(bits[start // 8:(stop + 7) // 8], count=stop - start,
                               bitorder="little").view(bool)
        out[start:stop] = np.where(passes, _compute_view(grad[start:stop]), zero)
