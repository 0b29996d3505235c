"""The one table of elementwise operations, shared by every engine.

Each operation is a scalar expression written once, in a small vocabulary that every engine
evaluates: the numba engine compiles it inside a ``prange`` loop, the NumPy engine evaluates it
on blocks of elements, :mod:`.on_cupy` translates it to C. The names an expression may use:

``v``
    an element of ``x`` (in the computation dtype: float32 for float16 input).
``g``
    the matching element of ``grad`` (binary operations only).
any other name that is not a function
    a constant: an operation's parameter (``zero``, ``slope``, ``lo``, ``hi``, ``alpha``,
    ``beta``, ``threshold``) or a fixed number from :attr:`Op.fixed`. Every constant is cast to
    the computation dtype before the call, so a float32 kernel computes in float32 (a literal
    ``1.0`` would be a float64 and promote it). :attr:`Op.params` lists them in the order the
    engines receive them.
``select(c, a, b)``, ``logical_not(c)``, ``logical_and(c, d)``
    elementwise ``a if c else b``, ``not c``, ``c and d``.
``exp``, ``expm1``, ``log1p``, ``erf``, ``tanh``, ``sinh``, ``cosh``, ``ndtr``, ``npdf``
    the elementary functions (:data:`FUNCTIONS`; ``ndtr`` and ``npdf`` are the standard normal
    CDF and density); each engine binds them to its own implementation (see :mod:`.vocabulary`).

The semantics are PyTorch CPU's (see docs/kernels.md). Backward operations of the ReLU family
are selects, not products: ``relu_backward`` returns an exact 0 where the derivative is 0 even
when ``grad`` holds NaN or infinity, as ``torch.threshold_backward`` does.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

__all__ = ["FUNCTIONS", "OPS", "Op"]

#: every function an expression may call
FUNCTIONS = ("select", "logical_not", "logical_and", "exp", "expm1", "log1p", "erf", "tanh",
             "sinh", "cosh", "ndtr", "npdf")


def _constant_names(expr: str) -> tuple[str, ...]:
    """The constants of ``expr``: free names other than v, g and functions, in first-use order."""
    names: list[str] = []
    for node in ast.walk(ast.parse(expr, mode="eval")):
        if isinstance(node, ast.Name) and node.id not in ("v", "g", *FUNCTIONS) \
                and node.id not in names:
            names.append(node.id)
    return tuple(sorted(names))


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
    fixed : dict
        Named numbers the expression uses (cast to the computation dtype like parameters).
    params : tuple of str
        Every constant of ``expr`` (parameters and fixed numbers), sorted: the order in which
        the engines receive their values. Derived from ``expr``.
    """

    name: str
    arity: int
    expr: str
    integers: bool = False
    fixed: dict = field(default_factory=dict)
    params: tuple = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _constant_names(self.expr))

    def constants(self, values: dict) -> tuple:
        """The values of :attr:`params` in order, from ``values`` and :attr:`fixed`."""
        merged = {"zero": 0.0, "one": 1.0, **self.fixed, **values}
        return tuple(merged[p] for p in self.params)


# torch's constants (aten/src/ATen/native/cpu/Activation.cpp)
_GELU_TANH_BETA = math.sqrt(2.0) * 2.0 / math.sqrt(math.pi) * 0.5  # M_SQRT2 * M_2_SQRTPI * 0.5
_GELU_KAPPA = 0.044715
_GELU_TANH = {"half": 0.5, "kbeta": _GELU_TANH_BETA, "kappa": _GELU_KAPPA,
              "three_kappa": 3.0 * _GELU_KAPPA}

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
    # GELU, exact: x * Phi(x); backward grad * (Phi(x) + x * phi(x)) (torch's GeluKernelImpl:
    # Phi(x) = 0.5 * (1 + erf(x * M_SQRT1_2)), phi(x) = exp(-0.5 * x * x) * kBeta).
    Op("gelu", 1, "v * ndtr(v)"),
    Op("gelu_backward", 2, "g * (ndtr(v) + v * npdf(v))"),
    # GELU, tanh approximation (torch's approximate="tanh").
    Op("gelu_tanh", 1, "half * v * (one + tanh(kbeta * (v + kappa * (v * v * v))))",
       fixed=_GELU_TANH),
    Op("gelu_tanh_backward", 2,
       "g * (half * (one + tanh(kbeta * (v + kappa * (v * v * v))))"
       " + half * v * (one - tanh(kbeta * (v + kappa * (v * v * v)))"
       " * tanh(kbeta * (v + kappa * (v * v * v)))) * kbeta * (one + three_kappa * (v * v)))",
       fixed=_GELU_TANH),
    # SiLU: x * sigmoid(x) = x / (1 + exp(-x)); backward grad * s * (1 + x * (1 - s)).
    Op("silu", 1, "v / (one + exp(-v))"),
    Op("silu_backward", 2,
       "g * (one / (one + exp(-v))) * (one + v * (one - one / (one + exp(-v))))"),
    # ELU (scale = input_scale = 1): x if x > 0 else alpha * expm1(x); torch's vectorised
    # kernel tests x > 0, so NaN takes the expm1 branch (NaN either way) and -0.0 gives -0.0.
    Op("elu", 1, "select(v > zero, v, expm1(v) * alpha)"),
    # elu'(NaN) = 1, as torch's float32 kernels and its scalar loop (its float64 vector loop
    # gives NaN: an inconsistency we do not copy).
    # NaN x gives NaN (as torch's vectorised kernel; its scalar tail loop gives grad)
    Op("elu_backward", 2, "select(v > zero, g, g * alpha * exp(v))"),
    # softplus: x where beta * x > threshold, else log1p(exp(beta * x)) / beta.
    Op("softplus", 1, "select(v * beta > threshold, v, log1p(exp(v * beta)) / beta)"),
    Op("softplus_backward", 2,
       "select(v * beta > threshold, g, g * exp(v * beta) / (exp(v * beta) + one))"),
]

OPS: dict[str, Op] = {op.name: op for op in _TABLE}
