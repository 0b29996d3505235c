"""The one table of elementwise operations, shared by every engine.

Each operation is a scalar expression written once, in a small vocabulary that both engines
evaluate: the numba engine compiles it inside a ``prange`` loop, the NumPy engine evaluates it
on blocks of elements. The names an expression may use:

``v``
    an element of ``x`` (in the computation dtype: float32 for float16 input).
``g``
    the matching element of ``grad`` (binary operations only).
``zero``, ``slope``, ``lo``, ``hi``
    parameters, cast to the computation dtype before the call.
``select(c, a, b)``, ``logical_not(c)``, ``logical_and(c, d)``
    elementwise ``a if c else b``, ``not c``, ``c and d``.

The semantics are PyTorch CPU's (see the module docs of :mod:`chokepoint.kernels.api`).
Backward operations are selects, not products: ``relu_backward`` returns an exact 0 where the
derivative is 0 even when ``grad`` holds NaN or infinity, as ``torch.threshold_backward`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OPS", "Op"]


@dataclass(frozen=True)
class Op:
    """One elementwise operation.

    Attributes
    ----------
    name : str
        Key in :data:`OPS`; also the name of the generated numba kernel.
    arity : int
        1 for ``f(x)``, 2 for ``f(grad, x)``.
    expr : str
        The scalar expression (see the module docstring for its vocabulary).
    integers : bool
        Whether integer inputs are accepted (exact operations only).
    """

    name: str
    arity: int
    expr: str
    integers: bool = False


_TABLE = [
    # Forward passes: the result has the input's dtype and keeps the sign of zero and NaN.
    Op("relu", 1, "select(v < zero, zero, v)", integers=True),
    Op("leaky_relu", 1, "select(v > zero, v, v * slope)"),
    Op("hardtanh", 1, "select(v < lo, lo, select(v > hi, hi, v))"),
    # Derivatives as 0/1 masks. at_zero=0 is torch's x > 0 except that NaN gives 1
    # (NaN <= 0 is false); at_zero=1 is the origin question's X >= 0, again with NaN -> 1.
    Op("relu_grad", 1, "logical_not(v <= zero)", integers=True),
    Op("relu_grad_at_zero", 1, "logical_not(v < zero)", integers=True),
    # Fused backward passes: grad where the derivative is 1, else an exact 0 (or grad * slope).
    Op("relu_backward", 2, "select(v <= zero, zero, g)", integers=True),
    Op("relu_backward_at_zero", 2, "select(v < zero, zero, g)", integers=True),
    Op("leaky_relu_backward", 2, "select(v > zero, g, g * slope)"),
    # Strictly inside (lo, hi): 0 at both boundaries, and NaN blocks the gradient.
    Op("hardtanh_backward", 2, "select(logical_and(v > lo, v < hi), g, zero)"),
]

OPS: dict[str, Op] = {op.name: op for op in _TABLE}
