"""Dispatch by the arrays' library: one table, cached per type, clear errors when mixed."""

import numpy as np
import pytest

import chokepoint
from chokepoint.kernels.dispatch import LIBRARIES, library_of


def test_library_of_common_types():
    assert library_of(np.ones(2)) == "numpy"
    assert library_of(np.float64(1.0)) is None  # a NumPy scalar is a parameter (issue 13.11)
    assert library_of([1.0, 2.0]) is None and library_of(3.0) is None
    _, mask = chokepoint.relu_with_mask(np.ones(3))
    assert library_of(mask) == "any"
    assert set(LIBRARIES) == {"dask", "torch", "cupy"}


def test_numpy_and_array_likes_stay_on_numpy():
    assert isinstance(chokepoint.relu([1.0, -1.0]), np.ndarray)


def test_mixing_libraries_is_a_type_error():
    torch = pytest.importorskip("torch", reason="needs a second array library")
    x = np.ones(3)
    with pytest.raises(TypeError, match="different libraries"):
        chokepoint.relu_backward(torch.ones(3, dtype=torch.float64), x)
    with pytest.raises(TypeError, match="different libraries"):
        chokepoint.relu(x, out=torch.empty(3, dtype=torch.float64))


@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_every_handler_implements_every_kernel(library):
    import importlib

    pytest.importorskip({"dask": "dask.array", "torch": "torch", "cupy": "numpy"}[library],
                        reason=f"{library} is optional")
    from chokepoint.kernels.dispatch import KERNELS

    module = importlib.import_module(LIBRARIES[library])
    assert set(KERNELS) <= set(module.__all__)
    assert all(callable(getattr(module, name)) for name in KERNELS)
    assert set(KERNELS) == {n for n in chokepoint.kernels.__all__
                            if callable(getattr(chokepoint, n, None))
                            and hasattr(getattr(chokepoint, n), "__wrapped_numpy__")}
