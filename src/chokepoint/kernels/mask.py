"""The packed 1-bit ReLU mask that :func:`chokepoint.relu_with_mask` returns."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["PackedMask", "filled_mask"]


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

    __slots__ = ("_at_zero", "_bits", "_shape")
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
        bits = bits if bits.flags.c_contiguous else _module(bits).ascontiguousarray(bits)
        if isinstance(bits, np.ndarray):
            # a read-only view: the caller's own array keeps its flags
            bits = bits.view()
            bits.flags.writeable = False
        # immutable: the kernels read prod(shape) bits, so bits and shape must stay in step
        object.__setattr__(self, "_bits", bits)
        object.__setattr__(self, "_shape", shape)
        object.__setattr__(self, "_at_zero", int(at_zero))

    def __setattr__(self, name, value):
        raise AttributeError(f"PackedMask is immutable; cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"PackedMask is immutable; cannot delete {name!r}")

    def __reduce__(self):
        return type(self), (self._bits, self._shape, self._at_zero)

    @property
    def bits(self):
        """The packed bits (read-only for NumPy bits)."""
        return self._bits

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the array the mask describes."""
        return self._shape

    @property
    def at_zero(self) -> int:
        """The derivative's value recorded at ``x == 0``: 0 or 1."""
        return self._at_zero

    def checked_bits(self, func: str = "relu_backward"):
        """:attr:`bits`, after checking they hold a bit for every element of :attr:`shape`.

        The kernels read ``prod(shape)`` bits without bounds checks; a mask whose bits are
        too short for its shape (which the constructor refuses) would read past them.
        """
        bits = self._bits
        expected = (math.prod(self._shape) + 7) // 8
        if (bits.ndim != 1 or bits.dtype != np.uint8 or bits.shape[0] != expected
                or not bits.flags.c_contiguous):
            raise ValueError(f"{func}: the mask's bits hold {bits.size} bytes (dtype "
                             f"{bits.dtype}) but its shape {self._shape} needs {expected}")
        return bits

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
        bits = self.checked_bits("PackedMask.unpack")
        flat = _module(bits).unpackbits(bits, bitorder="little")[: self.size]
        return flat.reshape(self.shape).astype(dtype, copy=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedMask):
            return NotImplemented
        return (self.shape == other.shape and self.at_zero == other.at_zero
                and _module(self.bits) is _module(other.bits)
                and bool(_module(self.bits).array_equal(self.bits, other.bits)))

    __hash__ = None  # bits may be shared with a writable array, so no stable hash

    def __repr__(self) -> str:
        return f"PackedMask(shape={self.shape}, nbytes={self.nbytes}, at_zero={self.at_zero})"


# the slots' own setters (PackedMask.__setattr__ refuses every name): for filled_mask
_SET_BITS = PackedMask._bits.__set__
_SET_SHAPE = PackedMask._shape.__set__
_SET_AT_ZERO = PackedMask._at_zero.__set__


def filled_mask(bits: np.ndarray, shape: tuple[int, ...], at_zero: int) -> PackedMask:
    """A mask over ``bits`` that a kernel has just filled: a new C-contiguous uint8 array
    of the right size that nobody else holds, ``shape`` a tuple of ints, ``at_zero`` 0 or
    1 (the fast path's ``relu_with_mask``; the checks and the view of the constructor
    cost 4 us, as much as the rest of a call on 1000 elements; the slots are set through
    their descriptors, and ``setflags``: 1.1 -> 0.6 us)."""
    bits.setflags(write=False)
    mask = object.__new__(PackedMask)
    _SET_BITS(mask, bits)
    _SET_SHAPE(mask, shape)
    _SET_AT_ZERO(mask, at_zero)
    return mask
