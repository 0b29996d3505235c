"""The packed 1-bit ReLU mask that :func:`chokepoint.relu_with_mask` returns."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["PackedMask"]


def _module(bits):
    """numpy, or cupy for CuPy bits (masks of CuPy arrays live on the GPU)."""
    if type(bits).__module__.split(".", 1)[0] == "cupy":
        import cupy

        return cupy
    return np


class PackedMask:
    """Where ReLU's derivative is 1, one bit per element.

    Bit ``k`` of byte ``j`` of :attr:`bits` is element ``8 * j + k`` of the array in C order
    (``np.packbits(..., bitorder="little")``). A float64 activation's mask is 64 times smaller
    than the activation itself, and :func:`chokepoint.relu_backward` reads it instead of ``x``.

    Parameters
    ----------
    bits : numpy.ndarray
        uint8 array of ``ceil(prod(shape) / 8)`` bytes.
    shape : tuple of int
        Shape of the array the mask describes.
    at_zero : {0, 1}
        The derivative's value that was recorded at ``x == 0``.
    """

    __slots__ = ("at_zero", "bits", "shape")
    #: masks go with NumPy arrays, torch tensors and (with CuPy bits) CuPy arrays
    library = "any"

    def __init__(self, bits, shape: tuple[int, ...], at_zero: int = 0):
        shape = tuple(int(d) for d in shape)
        if _module(bits) is np:
            bits = np.asarray(bits)
        expected = (math.prod(shape) + 7) // 8
        if bits.dtype != np.uint8 or bits.ndim != 1 or bits.shape[0] != expected:
            raise ValueError(
                f"bits must be a 1-D uint8 array of {expected} bytes for shape {shape}, "
                f"got {bits.dtype} with shape {bits.shape}"
            )
        if at_zero not in (0, 1):
            raise ValueError(f"at_zero must be 0 or 1, got {at_zero!r}")
        self.bits = bits if bits.flags.c_contiguous else _module(bits).ascontiguousarray(bits)
        self.shape = shape
        self.at_zero = int(at_zero)

    @property
    def size(self) -> int:
        """Number of elements described."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of memory the mask holds."""
        return self.bits.nbytes

    def unpack(self, dtype=np.uint8) -> np.ndarray:
        """The mask as a 0/1 array of ``shape``.

        Parameters
        ----------
        dtype : dtype, optional
            Result dtype; ``bool``, integers and floats are all exact.

        Returns
        -------
        numpy.ndarray
        """
        xp = _module(self.bits)
        flat = xp.unpackbits(self.bits, bitorder="little")[: self.size]
        return flat.reshape(self.shape).astype(dtype, copy=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedMask):
            return NotImplemented
        return (self.shape == other.shape and self.at_zero == other.at_zero
                and _module(self.bits) is _module(other.bits)
                and bool(_module(self.bits).array_equal(self.bits, other.bits)))

    __hash__ = None  # mutable contents

    def __repr__(self) -> str:
        return f"PackedMask(shape={self.shape}, nbytes={self.nbytes}, at_zero={self.at_zero})"
