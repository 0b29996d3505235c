"""The registry of public kernels: each declared once, everything else generated from it.

An entry (:class:`Kernel`) names a public kernel, its arity (``f(x)`` or ``f(grad, x)``), its
parameters (PyTorch's names and defaults, and the rule that checks each one), which operation of
:data:`~.ops.OPS` runs for given parameter values, and its documentation. From :data:`KERNELS`:

* :mod:`.api` builds the public functions (real signatures, numpydoc docstrings, one validation
  path), except the three whose logic is their own (``relu_grad``, ``relu_backward``,
  ``relu_with_mask``: entries with ``resolve=None``, written out in :mod:`.api`);
* :mod:`.dispatch` takes its table of names, the torch / dask / CuPy handlers theirs;
* ``chokepoint.__all__`` and ``chokepoint.kernels.__all__`` list them;
* ``explain`` tries every kernel, with its defaults and with the numbers a statement writes as
  its parameters, and proposes the one whose values match (:mod:`chokepoint.explain.rewrite`);
  each entry's ``formulation`` is the NumPy code it replaces, which a test checks is recognised;
* :mod:`.semantics` writes the README's table of values from the kernels themselves.

Adding an activation is one :data:`~.ops.OPS` expression per pass and one entry here (see
docs/kernels.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KERNELS", "NAMES", "Kernel", "Param"]



@dataclass(frozen=True)
class Param:
    """One scalar parameter of a public kernel.

    Attributes
    ----------
    name : str
        The public name (PyTorch's).
    default : object
        The default value.
    check : str
        The rule (implemented in :mod:`.api`): ``"real"`` a finite-or-infinite non-NaN real number,
        ``"approximate"`` one of ``"none"``/``"tanh"``, ``"at_zero"`` the integer 0 or 1.
    doc : str
        The parameter's description in the docstring.
    keyword_only : bool
        Whether it comes after ``*`` in the signature.
    """

    name: str
    default: object
    check: str
    doc: str
    keyword_only: bool = False


@dataclass(frozen=True)
class Kernel:
    """One public kernel.

    Attributes
    ----------
    name : str
        Public name.
    arity : int
        1 for ``f(x, ...)``, 2 for ``f(grad, x, ...)``.
    params : tuple of Param
    resolve : callable or None
        ``resolve(values) -> (op_name, constants)``: the operation of :data:`~.ops.OPS` and the
        values of its parameters, from the checked public values (a dict by public name).
        None for kernels written out in :mod:`.api`.
    summary : str
        First line of the docstring.
    notes : str
        The docstring's extended summary (semantics at NaN, zero, thresholds).
    check : callable, optional
        ``check(name, values)`` for rules across parameters (``min_val <= max_val``).
    formulation : str
        The NumPy code it replaces, with ``X`` and ``G`` (``erf`` is SciPy's): explain
        recognises it (``tests/explain/test_rewrite.py`` checks each).
    forward : str
        For backward kernels: the forward kernel's name.
    """

    name: str
    arity: int
    params: tuple = ()
    resolve: Callable[[dict], tuple[str, dict]] | None = None
    summary: str = ""
    notes: str = ""
    check: Callable[[str, dict], None] | None = None
    formulation: str = ""
    forward: str = ""


def _bounds(func: str, values: dict) -> None:
    if values["min_val"] > values["max_val"]:
        raise ValueError(f"{func}: min_val ({values['min_val']}) must not exceed max_val "
                         f"({values['max_val']})")


_SLOPE = Param("negative_slope", 0.01, "real",
               "Slope for ``x <= 0``, cast to the computation dtype as torch does.")
_MIN = Param("min_val", -1.0, "real", "Lower bound, ``min_val <= max_val``.")
_MAX = Param("max_val", 1.0, "real", "Upper bound.")
_APPROXIMATE = Param("approximate", "none", "approximate",
                     "``\"none\"``: ``x * Phi(x)`` with the exact normal CDF (``erf``); "
                     "``\"tanh\"``: PyTorch's tanh approximation.")
_ALPHA = Param("alpha", 1.0, "real", "The value ELU approaches as ``x -> -inf`` (times -1).")
_BETA = Param("beta", 1.0, "real", "Sharpness: ``log1p(exp(beta * x)) / beta``.")
_THRESHOLD = Param("threshold", 20.0, "real",
                   "Where ``beta * x > threshold`` the result is ``x`` itself (linear region).")
_AT_ZERO = Param("at_zero", 0, "at_zero",
                 "The derivative at ``x == 0`` (either sign): 0 (torch's) or 1 (``x >= 0``).",
                 keyword_only=True)


def _gelu_op(suffix: str) -> Callable[[dict], tuple[str, dict]]:
    return lambda p: ("gelu" + ("_tanh" if p["approximate"] == "tanh" else "") + suffix, {})


KERNELS: tuple[Kernel, ...] = (
    Kernel("relu", 1, (), lambda p: ("relu", {}),
           "Rectified linear unit, ``max(x, 0)`` with torch's NaN and signed-zero behaviour.",
           "NaN propagates and ``relu(-0.0)`` is ``-0.0``. Integers keep their dtype.",
           formulation="np.maximum(X, 0)"),
    Kernel("relu_grad", 1, formulation="(X > 0)"),
    Kernel("relu_backward", 2, formulation="G * (X > 0)"),
    Kernel("relu_with_mask", 1),
    Kernel("leaky_relu", 1, (_SLOPE,), lambda p: ("leaky_relu", {"slope": p["negative_slope"]}),
           "Leaky ReLU: ``x`` where ``x > 0``, else ``negative_slope * x``.",
           formulation="np.where(X > 0, X, X * 0.01)"),
    Kernel("leaky_relu_backward", 2, (_SLOPE,),
           lambda p: ("leaky_relu_backward", {"slope": p["negative_slope"]}),
           "``grad`` where ``x > 0``, else ``grad * negative_slope``, in one pass.",
           "The derivative at 0 and at NaN is the slope.", forward="leaky_relu",
           formulation="np.where(X > 0, G, G * 0.01)"),
    Kernel("hardtanh", 1, (_MIN, _MAX),
           lambda p: ("hardtanh", {"lo": p["min_val"], "hi": p["max_val"]}),
           "Clamp ``x`` to ``[min_val, max_val]``; NaN and the sign of zero pass through.",
           check=_bounds, formulation="np.clip(X, -1, 1)"),
    Kernel("hardtanh_backward", 2, (_MIN, _MAX),
           lambda p: ("hardtanh_backward", {"lo": p["min_val"], "hi": p["max_val"]}),
           "``grad`` strictly inside ``(min_val, max_val)``, else 0.",
           "0 at both boundaries and at NaN.", check=_bounds, forward="hardtanh",
           formulation="G * ((X > -1) & (X < 1))"),
    Kernel("relu6", 1, (), lambda p: ("hardtanh", {"lo": 0.0, "hi": 6.0}),
           "``min(max(x, 0), 6)``: :func:`hardtanh` with bounds 0 and 6.",
           formulation="np.clip(X, 0, 6)"),
    Kernel("relu6_backward", 2, (), lambda p: ("hardtanh_backward", {"lo": 0.0, "hi": 6.0}),
           "``grad`` where ``0 < x < 6``, else 0: :func:`hardtanh_backward` with bounds 0 and 6.",
           forward="relu6", formulation="G * ((X > 0) & (X < 6))"),
    Kernel("gelu", 1, (_APPROXIMATE,), _gelu_op(""),
           "Gaussian error linear unit, ``x * Phi(x)``, PyTorch's ``gelu``.",
           "``0.5 * x * (1 + erf(x / sqrt(2)))``, or with ``approximate=\"tanh\"`` "
           "``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.",
           formulation="0.5 * X * (1 + erf(X / np.sqrt(2)))"),
    Kernel("gelu_backward", 2, (_APPROXIMATE,), _gelu_op("_backward"),
           "``grad * gelu'(x)`` in one fused pass, PyTorch's ``gelu_backward``.",
           "``grad * (Phi(x) + x * phi(x))`` (or the derivative of the tanh form).",
           forward="gelu", formulation="G * (0.5 * (1 + erf(X / np.sqrt(2))) "
                                       "+ X * np.exp(-0.5 * X * X) / np.sqrt(2 * np.pi))"),
    Kernel("silu", 1, (), lambda p: ("silu", {}),
           "Sigmoid linear unit (swish), ``x * sigmoid(x)``, PyTorch's ``silu``.",
           "Computed as ``x / (1 + exp(-x))``.", formulation="X / (1 + np.exp(-X))"),
    Kernel("silu_backward", 2, (), lambda p: ("silu_backward", {}),
           "``grad * silu'(x)`` in one fused pass, PyTorch's ``silu_backward``.",
           "``grad * s * (1 + x * (1 - s))`` with ``s = sigmoid(x)``.", forward="silu",
           formulation="G / (1 + np.exp(-X)) * (1 + X * (1 - 1 / (1 + np.exp(-X))))"),
    Kernel("elu", 1, (_ALPHA,), lambda p: ("elu", {"alpha": p["alpha"]}),
           "Exponential linear unit: ``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``.",
           "PyTorch's ``elu`` (scale 1): ``expm1`` for accuracy near 0; ``elu(-0.0)`` is "
           "``-0.0``.", formulation="np.where(X > 0, X, np.expm1(X))"),
    Kernel("elu_backward", 2, (_ALPHA,), lambda p: ("elu_backward", {"alpha": p["alpha"]}),
           "``grad * elu'(x)`` in one fused pass, PyTorch's ``elu_backward`` (from ``x``).",
           "``grad * alpha * exp(x)`` where ``x <= 0`` (0 included), else ``grad``; NaN at "
           "NaN ``x``, as torch's vectorised kernel.",
           forward="elu", formulation="np.where(X > 0, G, G * np.exp(X))"),
    Kernel("softplus", 1, (_BETA, _THRESHOLD),
           lambda p: ("softplus", {"beta": p["beta"], "threshold": p["threshold"]}),
           "Softplus, ``log1p(exp(beta * x)) / beta``, linear where ``beta * x > threshold``.",
           "PyTorch's ``softplus``.", formulation="np.log1p(np.exp(X))"),
    Kernel("softplus_backward", 2, (_BETA, _THRESHOLD),
           lambda p: ("softplus_backward", {"beta": p["beta"], "threshold": p["threshold"]}),
           "``grad * sigmoid(beta * x)`` in one fused pass, ``grad`` in the linear region.",
           "PyTorch's ``softplus_backward``.", forward="softplus",
           formulation="G / (1 + np.exp(-X))"),
)

#: the public kernels' names, in registry order
NAMES: tuple[str, ...] = tuple(k.name for k in KERNELS)
BY_NAME: dict[str, Kernel] = {k.name: k for k in KERNELS}
