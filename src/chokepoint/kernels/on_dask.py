"""The kernels on dask arrays: lazy, blockwise, with chokepoint's own kernels on every block.

Each call validates its arguments with the NumPy path (on empty arrays of the same dtypes, so
errors are the same and come before anything is computed) and returns a lazy dask array.
Blocks run the public NumPy kernels, which pickle by reference: a worker imports chokepoint
once and loads the compiled kernels from numba's on-disk cache, it does not recompile per
task. Inputs whose chunks differ are aligned to the first one's chunks; equal chunks are never
rechunked. ``out=`` is refused: dask arrays are immutable.

``relu_with_mask`` returns a :class:`DaskPackedMask`: one :class:`PackedMask` per block, that
``relu_backward`` reads block by block. ``y`` and the mask come from one task per block; computed
together (``dask.compute(y, mask)``) that task runs once.
"""

from __future__ import annotations

import functools
import inspect

import dask.array as da
import numpy as np

from . import api
from .dispatch import KERNELS
from .mask import PackedMask
from .registry import BY_NAME

__all__ = ["DaskPackedMask", *KERNELS]


class DaskPackedMask:
    """The packed ReLU mask of a dask array: a dask array of per-block :class:`PackedMask`.

    Attributes
    ----------
    blocks : dask.array.Array
        Object array with one element per block of the original array.
    chunks : tuple
        The original array's chunks.
    shape : tuple of int
    at_zero : int
    """

    library = "dask"

    def __init__(self, blocks: da.Array, chunks: tuple, shape: tuple, at_zero: int):
        self.blocks = blocks
        self.chunks = chunks
        self.shape = tuple(shape)
        self.at_zero = at_zero

    @property
    def nbytes(self) -> int:
        """Bytes the packed bits take (about 1/8 per element)."""
        return sum((int(np.prod(c)) + 7) // 8 for c in _block_shapes(self.chunks))

    def unpack(self, dtype=np.uint8) -> da.Array:
        """The mask as a lazy 0/1 dask array of ``dtype``."""
        dtype = np.dtype(dtype)
        return da.map_blocks(_unpack_block, self.blocks, dtype=dtype, chunks=self.chunks,
                             dtype_out=dtype, meta=np.empty((0,) * len(self.shape), dtype))

    def __repr__(self) -> str:
        return (f"DaskPackedMask(shape={self.shape}, blocks={self.blocks.shape}, "
                f"at_zero={self.at_zero})")


def _block_shapes(chunks):
    import itertools

    return itertools.product(*chunks)


def _no_out(name: str, kwargs: dict) -> None:
    if kwargs.pop("out", None) is not None:
        raise TypeError(f"{name}: out= is not supported for dask arrays (they are immutable); "
                        "use the returned array")


def _meta(a) -> np.ndarray:
    return np.empty((0,) * a.ndim, dtype=a.dtype)


def _unary(name: str, x, *args, **kwargs) -> da.Array:
    _no_out(name, kwargs)
    func = getattr(api, name)
    dtype = func(_meta(x), *args, **kwargs).dtype  # validates like the NumPy path
    block = functools.partial(func, **kwargs)  # relu_grad's dtype= is not map_blocks' dtype=
    return x.map_blocks(block, *args, dtype=dtype, meta=np.empty((0,) * x.ndim, dtype))


def _binary(name: str, grad, x, *args, **kwargs) -> da.Array:
    _no_out(name, kwargs)
    func = getattr(api, name)
    if not isinstance(grad, da.Array) or not isinstance(x, da.Array):
        raise TypeError(f"{name}: grad and x must both be dask arrays")
    if grad.shape != x.shape:
        raise ValueError(f"{name}: grad has shape {grad.shape} but x has {x.shape}; "
                         "they must match (no broadcasting)")
    dtype = func(_meta(grad), _meta(x), *args, **kwargs).dtype
    if x.chunks != grad.chunks:
        x = x.rechunk(grad.chunks)
    return da.map_blocks(functools.partial(func, **kwargs), grad, x, *args, dtype=dtype,
                         meta=np.empty((0,) * x.ndim, dtype))


def _arguments(name: str, args: tuple, kwargs: dict) -> tuple[list, dict]:
    """The array arguments and the others (by keyword), bound to the public signature."""
    bound = inspect.signature(getattr(api, name)).bind(*args, **kwargs)
    arity = BY_NAME[name].arity
    names = list(bound.arguments)
    arrays = [bound.arguments[n] for n in names[:arity]]
    return arrays, {n: bound.arguments[n] for n in names[arity:]}


def _handler(name: str):
    def handler(*args, **kwargs):
        arrays, others = _arguments(name, args, kwargs)
        return (_unary if len(arrays) == 1 else _binary)(name, *arrays, **others)

    handler.__name__ = handler.__qualname__ = name
    handler.__doc__ = f":func:`chokepoint.{name}` on dask arrays (lazy, blockwise)."
    return handler


globals().update({name: _handler(name) for name in KERNELS
                  if name not in ("relu_backward", "relu_with_mask")})


def relu_backward(*args, **kwargs):
    """:func:`chokepoint.relu_backward` on dask arrays, from ``x`` or a :class:`DaskPackedMask`."""
    (grad, x_or_mask), kwargs = _arguments("relu_backward", args, kwargs)
    if not isinstance(x_or_mask, DaskPackedMask):
        return _binary("relu_backward", grad, x_or_mask, **kwargs)
    _no_out("relu_backward", kwargs)
    mask = x_or_mask
    at_zero = kwargs.pop("at_zero", None)
    if kwargs:
        raise TypeError(f"relu_backward: unexpected arguments {sorted(kwargs)}")
    if at_zero is not None and at_zero != mask.at_zero:
        raise ValueError(f"relu_backward: the mask recorded at_zero={mask.at_zero}; it cannot "
                         f"give at_zero={at_zero} (pass x instead)")
    if not isinstance(grad, da.Array):
        raise TypeError("relu_backward: a dask mask needs a dask grad")
    if grad.shape != mask.shape:
        raise ValueError(f"relu_backward: grad has shape {grad.shape} but the mask has "
                         f"{mask.shape}")
    dtype = api.relu_backward(_meta(grad), PackedMask(np.empty(0, np.uint8),
                                                       (0,) * grad.ndim)).dtype
    if grad.chunks != mask.chunks:
        grad = grad.rechunk(mask.chunks)
    index = tuple(range(grad.ndim))
    # block (i, j, ...) of grad meets the one PackedMask in block (i, j, ...) of mask.blocks
    return da.blockwise(_backward_block, index, grad, index, mask.blocks, index, dtype=dtype,
                        align_arrays=False, meta=np.empty((0,) * grad.ndim, dtype))


def relu_with_mask(x, *, at_zero: int = 0, out=None):
    """:func:`chokepoint.relu_with_mask` on a dask array: ``(y, DaskPackedMask)``."""
    _no_out("relu_with_mask", {"out": out})
    api.relu_with_mask(_meta(x), at_zero=at_zero)  # validates like the NumPy path
    one = tuple((1,) * n for n in x.numblocks)
    pairs = x.map_blocks(_forward_block, at_zero, dtype=object, chunks=one,
                         meta=np.empty((0,) * x.ndim, object))
    y = pairs.map_blocks(_take_y, dtype=x.dtype, chunks=x.chunks,
                         meta=np.empty((0,) * x.ndim, x.dtype))
    masks = pairs.map_blocks(_take_mask, dtype=object, chunks=one,
                             meta=np.empty((0,) * x.ndim, object))
    return y, DaskPackedMask(masks, x.chunks, x.shape, at_zero)


# block functions: module level, so that they pickle by reference

def _boxed(value, ndim: int) -> np.ndarray:
    box = np.empty((1,) * ndim, dtype=object)
    box.reshape(-1)[0] = value
    return box


def _forward_block(block: np.ndarray, at_zero: int) -> np.ndarray:
    return _boxed(api.relu_with_mask(block, at_zero=at_zero), block.ndim)


def _take_y(pair: np.ndarray) -> np.ndarray:
    return pair.reshape(-1)[0][0]


def _take_mask(pair: np.ndarray) -> np.ndarray:
    return _boxed(pair.reshape(-1)[0][1], pair.ndim)


def _backward_block(grad: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return api.relu_backward(grad, mask.reshape(-1)[0])


def _unpack_block(mask: np.ndarray, dtype_out) -> np.ndarray:
    return mask.reshape(-1)[0].unpack(dtype_out)
