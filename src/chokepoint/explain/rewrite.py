"""Recognise a registered kernel's computation in a statement by its values, and propose the
kernel.

Recognition is by value, not by syntax: every kernel of the registry
(:data:`chokepoint.kernels.registry.KERNELS`) is a candidate, with its default parameters and
with the numbers written in the statement as its parameters (``np.clip(X, -2, 2)`` tries
``hardtanh(X, min_val=-2, max_val=2)``). A candidate's result is compared with the statement's on
the user's data, then both run on the same shapes filled with the values where conventions
differ (-1, -0.0, 0.0, subnormals, 1, 6, 7, infinities), so a rewrite keeps the result's values
including at zero (``ceil(clip(X, 0, 1))`` is ``relu_grad(X)``, ``X >= 0`` is
``relu_grad(X, at_zero=1)``). Kernels of transcendental functions (GELU, SiLU, ELU, softplus)
are accepted within :data:`CLOSE_ULP` of the statement's values, and say so; NaN is checked
separately and any difference is stated.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .. import kernels
from ..fuse.statements import basic_index
from ..kernels.backend import set_backend
from ..kernels.registry import KERNELS, Kernel
from ..measure.statements import Statement

__all__ = ["CLOSE_ULP", "FASTER", "Rewrite", "find_rewrite", "lift_slices", "literals",
           "max_ulp", "slice_assignment", "statement_part", "touched_bytes"]

#: a rewrite (a kernel, a fused kernel) is proposed only when it measured at least this much
#: faster than the code it replaces, timed interleaved with it after :func:`settle` calls
FASTER = 1.05
#: a kernel (or a fused kernel) may differ from the statement by this many ulp of the result's
#: largest magnitude: transcendental functions differ from NumPy's by a few ulp, arithmetic
#: and comparisons are bitwise equal
CLOSE_ULP = 4
#: numbers of the statement tried as a kernel's parameters (the first ones written)
MAX_LITERALS = 6

_SPECIALS = [-2.0, -1.0, -0.0, 0.0, 5e-324, -5e-324, 0.25, 1.0, 2.0, 6.0, 7.0, np.inf, -np.inf]


@dataclass
class Rewrite:
    """A faster statement with the same values.

    Attributes
    ----------
    statement : str
        The rewrite, as code (``chokepoint`` must be imported).
    call : callable
        Runs it on the user's inputs.
    note : str
        Differences worth knowing (at NaN and infinite inputs).
    bytes : int
        Bytes it moves: its inputs once and its result once.
    narrow : Rewrite, optional
        The same with a narrower result (``relu_grad`` as uint8).
    ulp : float
        Its largest difference from the statement's values, in ulp of the result's largest
        magnitude (0: the same values).
    """

    statement: str
    call: Callable[[], object]
    note: str
    bytes: int
    narrow: Rewrite | None = None
    ulp: float = 0.0
    differs_at: str = ""  # "NaN" or "NaN or infinite" where :attr:`note` says a difference

    @property
    def values(self) -> str:
        """How its values compare with the statement's, as the reports say it: the same on the
        user's data, and at NaN and infinite inputs too unless :attr:`note` says where they
        differ."""
        same = "same values" if self.ulp == 0 else f"values within {self.ulp:.2g} ulp"
        where = self.differs_at or ("NaN" if self.note else "")
        return f"{same} except at {where} inputs" if where else same


def max_ulp(ours: np.ndarray, theirs: np.ndarray) -> float:
    """The largest difference between two arrays in units of the last place of the largest
    magnitude of ``theirs`` (normwise: a sum that cancels to almost 0 keeps the rounding of its
    terms); 0 when equal, NaN equal to NaN; inf when they differ at an inf or are not floats."""
    if theirs.dtype.kind != "f" or ours.dtype != theirs.dtype:
        return 0.0 if ours.dtype == theirs.dtype and np.array_equal(ours, theirs) else np.inf
    with np.errstate(invalid="ignore", over="ignore"):
        same = ours == theirs
        if same.all():  # the common answer, without two more passes over full-size arrays
            return 0.0
        same |= np.isnan(ours) & np.isnan(theirs)
        if same.all():
            return 0.0
        if (~np.isfinite(ours[~same])).any() or (~np.isfinite(theirs[~same])).any():
            return float("inf")
        finite = theirs[np.isfinite(theirs)]
        scale = np.spacing(np.max(np.abs(finite)).astype(theirs.dtype))
        return float(np.max(np.abs(ours[~same] - theirs[~same])) / scale)


def _dtype_arg(dtype: np.dtype) -> str:
    return f"np.{np.dtype(dtype).name}" if np.dtype(dtype) != bool else "bool"


def literals(statement: str) -> list[float]:
    """The numbers written in ``statement`` in the order written (``-2`` as one number), at
    most :data:`MAX_LITERALS`."""
    tree = ast.parse(statement.strip(), mode="eval")
    negated = {id(node.operand) for node in ast.walk(tree)
               if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)}
    written = []
    for node in ast.walk(tree):
        if isinstance(node, ast.UnaryOp) and id(node.operand) in negated \
                and isinstance(node.operand, ast.Constant) and _number(node.operand.value):
            written.append(((node.lineno, node.col_offset), -node.operand.value))
        elif isinstance(node, ast.Constant) and _number(node.value) and id(node) not in negated:
            written.append(((node.lineno, node.col_offset), node.value))
    found: list[float] = []
    for _, value in sorted(written, key=lambda w: w[0]):
        if value not in found:
            found.append(value)
    return found[:MAX_LITERALS]


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _parameter_choices(kernel: Kernel, numbers: list[float]) -> Iterator[dict]:
    """The defaults first, then the statement's numbers as the kernel's real parameters."""
    yield {}
    choices = [[p.default, *(v for v in numbers if v != p.default)] if p.check == "real"
               else ["none", "tanh"] if p.check == "approximate" else [p.default]
               for p in kernel.params]
    for values in itertools.product(*choices):
        given = {p.name: v for p, v in zip(kernel.params, values, strict=True)
                 if v != p.default}
        if given:
            yield given


def _call_text(name: str, names: tuple[str, ...], given: dict) -> str:
    args = [*names, *(f"{k}={v!r}" for k, v in given.items())]
    return f"chokepoint.{name}({', '.join(args)})"


def _candidates(arrays: dict[str, np.ndarray], result: np.ndarray, numbers: list[float]):
    """``(code, function, input names)`` of every kernel call that could give ``result``."""
    floats = {n: a for n, a in arrays.items()
              if a.dtype.kind == "f" and a.shape == result.shape}
    unary = [(n,) for n in floats] if len(floats) == 1 else []
    binary = list(itertools.permutations(floats, 2)) if len(floats) == 2 else []
    if unary and result.dtype in kernels.GRAD_DTYPES:
        (name,), = unary
        for at_zero in (0, 1):
            dtype = "" if result.dtype == np.uint8 else f", dtype={_dtype_arg(result.dtype)}"
            zero = ", at_zero=1" if at_zero else ""
            yield (f"chokepoint.relu_grad({name}{zero}{dtype})",
                   lambda x, a=at_zero: kernels.relu_grad(x, at_zero=a, dtype=result.dtype),
                   (name,))
    for g, x in binary:
        if floats[g].dtype == floats[x].dtype == result.dtype:
            for at_zero in (0, 1):
                zero = ", at_zero=1" if at_zero else ""
                yield (f"chokepoint.relu_backward({g}, {x}{zero})",
                       lambda gv, xv, a=at_zero: kernels.relu_backward(gv, xv, at_zero=a),
                       (g, x))
    # the registry's other kernels: each with its defaults first, then with the statement's
    # numbers as parameters
    general = [k for k in KERNELS if k.resolve is not None]
    for with_numbers in (False, True):
        for kernel in general:
            for names in unary if kernel.arity == 1 else binary:
                if any(floats[n].dtype != result.dtype for n in names):
                    continue
                func = getattr(kernels, kernel.name)
                for given in _parameter_choices(kernel, numbers):
                    if bool(given) != with_numbers:
                        continue
                    yield (_call_text(kernel.name, names, given),
                           lambda *a, f=func, k=given: f(*a, **k), names)


def _specials_like(a: np.ndarray, shape=None) -> np.ndarray:
    values = np.array([*_SPECIALS, np.nan], dtype=a.dtype)
    return np.resize(values, a.shape if shape is None else shape)


def _on_specials(code, namespace, func, inputs, names):
    """Run kernel and statement on arrays of the values where conventions differ, and NaN:
    first on a short 1-D array (enough for elementwise statements), else at full shape."""
    for shape in ((len(_SPECIALS) + 1,), None):
        probes = {n: _specials_like(inputs[n], shape) for n in names}
        try:
            theirs = np.asarray(eval(code, {**namespace, **probes}))
        except Exception:
            if shape is None:
                raise
            continue
        ours = np.asarray(func(*[probes[n] for n in names]))
        if ours.shape == theirs.shape:
            return ours, theirs, probes
    return ours, theirs, probes


def find_rewrite(statement: str, namespace: dict, inputs: dict[str, np.ndarray],
                 result) -> Rewrite | None:
    """A chokepoint kernel call with the statement's values (within :data:`CLOSE_ULP`), or
    None."""
    if not isinstance(result, np.ndarray) or result.ndim == 0:
        return None
    code = compile(statement, "<explain>", "eval")
    # a cheap look first: the candidates are elementwise, so one that differs from the result
    # on evenly spaced elements differs on all of them. The NumPy engine computes the look:
    # the first numba call of a process loads its compiler, paid then only for a kernel that
    # matched
    step = max(1, result.size // 65536)
    wanted = result.reshape(-1)[::step]
    for text, func, names in _candidates(inputs, result, literals(statement)):
        args = [inputs[n] for n in names]
        try:
            with set_backend("numpy"), np.errstate(all="ignore"):
                look = np.asarray(func(*[np.ascontiguousarray(a.reshape(-1)[::step])
                                         for a in args]))
            if look.shape != wanted.shape or max_ulp(look, wanted) > CLOSE_ULP:
                continue
            with np.errstate(all="ignore"):
                value = np.asarray(func(*args))
            ulp = max_ulp(value, result) if value.shape == result.shape else np.inf
            if ulp > CLOSE_ULP:
                continue
            with np.errstate(all="ignore"):
                ours, theirs, probes = _on_specials(code, namespace, func, inputs, names)
        except Exception:  # the statement cannot run on other values: not recognised
            continue
        if ours.shape != theirs.shape:
            continue
        # where an input is NaN or infinite, conventions differ (``G * (X > 0)`` is NaN at
        # G = inf and X < 0, torch's relu_backward 0): allowed, and said
        nan_at = np.zeros(ours.shape, bool)
        odd_at = np.zeros(ours.shape, bool)
        for n in names:
            nan_at |= np.isnan(probes[n])
            odd_at |= ~np.isfinite(probes[n])
        on_specials = max_ulp(ours[~odd_at], theirs[~odd_at])
        if on_specials > CLOSE_ULP:
            continue
        with np.errstate(invalid="ignore"):
            equal = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))
        note, differs_at = "", ""
        if not equal[odd_at].all():
            first = np.flatnonzero(odd_at & ~equal)[0]
            differs_at = "NaN" if (nan_at | equal)[odd_at].all() else "NaN or infinite"
            note = (f"at {'NaN' if nan_at.reshape(-1)[first] else 'infinite'} inputs the "
                    f"statement gives {theirs.reshape(-1)[first].item()!r} where the kernel "
                    f"gives {ours.reshape(-1)[first].item()!r}; equal everywhere else")
        out_bytes = result.size * np.dtype(result.dtype).itemsize
        found = Rewrite(statement=text, call=lambda f=func, a=args: f(*a), note=note,
                        bytes=sum(a.nbytes for a in args) + out_bytes,
                        ulp=max(ulp, on_specials), differs_at=differs_at)
        if text.startswith("chokepoint.relu_grad") and result.dtype.itemsize > 1:
            narrow_text = text.split(", dtype=")[0] + ")"
            at_zero = 1 if "at_zero=1" in text else 0
            found.narrow = Rewrite(
                statement=narrow_text,
                call=lambda a=args, z=at_zero: kernels.relu_grad(*a, at_zero=z), note=note,
                bytes=sum(a.nbytes for a in args) + result.size, differs_at=differs_at)
        return found
    return None


def statement_part(statement: Statement, node: ast.AST) -> Statement | None:
    """The code of ``node`` (a part of ``statement``'s tree) as a Statement at its place."""
    import copy

    shifted = copy.copy(node)  # line numbers relative to the statement's source
    shifted.lineno -= statement.first_line - 1
    shifted.end_lineno -= statement.first_line - 1
    text = ast.get_source_segment(statement.source, shifted)
    if not text:
        return None
    # an expression over several lines is inside brackets the node does not include (tried
    # first: without them a continuation at column 0, "a\n- b", parses as two statements)
    for code in (f"({text})", text) if "\n" in text else (text,):
        try:
            return Statement.parse(code, filename=statement.filename, first_line=node.lineno)
        except (SyntaxError, ValueError):
            continue
    return None


#: augmented assignments a fused kernel writes in place: ``x += value`` is ``x + (value)``
#: into ``x``
_AUGMENTED = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def slice_assignment(statement: Statement) -> tuple[str, Statement] | None:
    """``(target, value)`` of ``name[basic index] = value`` (a stencil's
    ``u[1:-1, 1:-1] = ...``): the target's code and the value as a Statement; of ``name +=
    value`` (``-=``, ``*=``, ``/=``; ``name`` or a basic slice of it), the value is
    ``name + (value)``; else None."""
    tree = statement.tree
    node = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(node, ast.AugAssign) and type(node.op) in _AUGMENTED:
        target = node.target
        if not (isinstance(target, ast.Name) or (
                isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and basic_index(target.slice))):
            return None
        code = ast.unparse(target)
        value = statement_part(statement, node.value)
        if value is None:
            return None
        try:
            combined = Statement.parse(f"{code} {_AUGMENTED[type(node.op)]} ({value.source})",
                                       filename=statement.filename, first_line=node.lineno)
        except (SyntaxError, ValueError):
            return None
        return code, combined
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    target = node.targets[0]
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
            and basic_index(target.slice)):
        return None
    code = statement_part(statement, target)
    value = statement_part(statement, node.value)
    return (code.source, value) if code is not None and value is not None else None


def lift_slices(source: str, namespace: dict) -> tuple[str, dict[str, str]]:
    """``source`` (an expression) with each basic slice of a name an argument of its own, as
    :func:`chokepoint.fuse` takes a stencil's shifted neighbours: ``(u_0 + u_1) / 2`` and
    ``{"u_0": "u[2:, 1:-1]", "u_1": "u[:-2, 1:-1]"}``; an element (``w[i]``, a NumPy scalar)
    alike. The same slice written twice is one argument; one that is neither an array view nor
    a NumPy scalar in ``namespace`` stays as written."""
    tree = ast.parse(source.strip(), mode="eval")
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | set(namespace)
    lifted: dict[str, str] = {}  # the slice's code -> its argument

    class Lift(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            if not (isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load)
                    and basic_index(node.slice)):
                return self.generic_visit(node)
            code = ast.unparse(node)
            if code not in lifted:
                try:
                    value = eval(compile(ast.Expression(node), "<slice>", "eval"),
                                 dict(namespace))
                except Exception:  # not evaluable here: left as written
                    return node
                if not ((isinstance(value, np.ndarray) and value.ndim > 0)
                        or isinstance(value, np.generic)):
                    return node
                k = 0
                while f"{node.value.id}_{k}" in taken:
                    k += 1
                taken.add(f"{node.value.id}_{k}")
                lifted[code] = f"{node.value.id}_{k}"
            return ast.copy_location(ast.Name(lifted[code], ast.Load()), node)

    body = ast.fix_missing_locations(Lift().visit(tree))
    return ast.unparse(body), {name: code for code, name in lifted.items()}


def touched_bytes(arrays) -> int:
    """Bytes of memory that ``arrays`` lie in, each byte once: a stencil's four shifted slices
    of one grid are about one grid, not four (their byte ranges, merged)."""
    from .probes import byte_bounds

    spans = sorted(byte_bounds(a) for a in arrays if a.size)
    total, end = 0, None
    for low, high in spans:
        if end is None or low > end:
            total += high - low
            end = high
        elif high > end:
            total += high - end
            end = high
    return total
