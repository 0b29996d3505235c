"""Race candidate implementations: timing, agreement with a reference, size sweeps, the roof.

Each candidate is a statement (a string run in the setup's namespace, as :mod:`timeit` does) or a
callable. Every candidate gets a fresh setup, so one cannot change another's inputs; a candidate
that mutates its inputs is detected (its inputs are compared with a copy taken after setup),
named in its ``mutates`` and timed on its inputs put back before every call, the copy untimed:
``B[B < 0] = 0`` finds no negatives left after its first call, and timing the later calls (as
``%timeit`` and pyperf do) would rank it 9x faster than it is on the data it was given.

Timing is interleaved (:func:`chokepoint.measure.timer.measure_interleaved`): every candidate is
set up, checked and warmed first; then each one's loops per repeat are calibrated on its own and
the repeats alternate, A B C A B C ..., so that a machine drifting during the race (memory
bandwidth, clock speed, a neighbour's load) hits all candidates alike instead of whichever ran at
the wrong moment. The price: every candidate's inputs are alive at once while they are timed.
The calibration's repeat is dropped (it is not interleaved).

Each candidate's ``ratio`` is its median over the reference's, with a 95% bootstrap interval
``ratio_ci`` (:mod:`chokepoint.measure.stats`); an interval reaching within 2% of 1
(``stats.SAME_WITHIN``) and lying within 10% of it (``stats.RANKABLE``) means the two are
indistinguishable on this evidence; a wider one that the repeats are too noisy to rank. By
construction about one race in twenty of identical candidates still gives an interval that
misses 1, and two arrays alike in every value can
differ by a few percent in speed through where they lie in memory; ``rotate=True`` averages
that out where it applies. In a process whose heap earlier work has fragmented, it may not:
after the explain and fuse test suites had run in the process, rotated identical ``X.copy()``
candidates on 1e5 float64 measured 1.06-1.45x apart race after race, and 0.96-1.04x with
``processes=2`` (each set up in fresh workers). A candidate whose IQR exceeds 10% of its
median is noisy: its ``repeats_needed`` are the repeats that would pin its median within 5%.

Cache honesty: calling a statement again and again on the same inputs measures the cache when
its working set fits there. With ``rotate=True`` the timed loop cycles through independent
copies of the inputs (setup run again for each copy), enough to exceed the last-level cache;
without it a result whose working set fits in that cache is ``cache_hot``.

What the race finds out about a candidate (its ``out=`` buffers, the inputs it mutates, its
copies, how it disagrees, why it was not compared, ...) is kept as fields of its
:class:`CandidateResult`; the words are :func:`chokepoint.report.words.race_note`'s.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .candidates import Candidate, CandidateResult, is_container, make_copies, prepare
from .load import Load, watch
from .machine import last_level_cache_bytes
from .roofline import ARRAY_BYTES, Roofline, roofline
from .statements import IDENTIFIER
from .stats import NOISY_IQR, bootstrap_ratio, repeats_needed
from .timer import Measurement, measure_interleaved
from .userstate import UserState

__all__ = ["ULPS", "Candidate", "CandidateResult", "RaceResult", "agreement", "compare_values",
           "default_ulps", "last_level_cache_bytes", "race"]


@dataclass
class RaceResult:
    """A race's outcome.

    Attributes
    ----------
    reference : str
        Label of the reference candidate.
    candidates : list of CandidateResult
        At the largest size when sizes were swept.
    machine : dict
        CPU, cores, threads and the roofline's ceilings.
    sizes : list of int or None
        The sizes swept.
    sweep : dict
        Label -> median seconds per size (None where it failed).
    sweep_errors : dict
        Label -> its error at each size (``"Type: message"``, None where it ran); a
        candidate failing at a smaller size only is said, not hidden behind the table's last
        size.
    setup : str
        The setup, for reports.
    mode : str
        ``"in-process"``: every candidate timed in this process (docs/interfaces.md's ``mode``).
    load : Load or None
        What else the machine did during the race (:mod:`chokepoint.measure.load`): other
        processes' and steal's cores, ``busy`` when they took a quarter of a core or more;
        None where it cannot be measured (not Linux).
    interrupted : str or None
        Why the race ended early (Ctrl-C), if it did. A candidate that raises (any
        exception, MemoryError, RecursionError and SystemExit included) fails on its own,
        with its ``error``; the others still run.
    """

    reference: str
    candidates: list[CandidateResult]
    machine: dict
    sizes: list[int] | None = None
    sweep: dict[str, list[float | None]] = field(default_factory=dict)
    sweep_errors: dict[str, list[str | None]] = field(default_factory=dict)
    setup: str = ""
    interrupted: str | None = None
    mode: str = "in-process"
    load: Load | None = None

    def to_dict(self) -> dict:
        """JSON-ready: the docs/interfaces.md schema, plus ``sizes``, ``sweep`` and ``sweep_errors``
        when sizes were swept."""
        data = {"reference": self.reference,
                "candidates": [c.to_dict() for c in self.candidates],
                "machine": self.machine, "mode": self.mode}
        if self.sizes:
            data["sizes"] = list(self.sizes)
            data["sweep"] = self.sweep
            data["sweep_errors"] = self.sweep_errors
        if self.interrupted:
            data["interrupted"] = self.interrupted
        data["load"] = self.load.to_dict() if self.load else None
        return data

    def fastest(self) -> CandidateResult | None:
        """The fastest candidate that ran."""
        ran = [c for c in self.candidates if c.median_s is not None]
        return min(ran, key=lambda c: c.median_s) if ran else None

    def plot(self, path: str | Path) -> Path:
        """Write the main plot (PNG or SVG by extension); see :mod:`chokepoint.report.plots`."""
        from ..report.plots import race_plot

        return race_plot(self, path)

    def to_html(self) -> str:
        """A self-contained HTML report (see :mod:`chokepoint.report.html`)."""
        from ..report.html import race_html

        return race_html(self)

    def _repr_html_(self) -> str:  # Jupyter
        from ..report.html import race_html

        return race_html(self, full=False)

    def table(self) -> str:
        """The results as a text table."""
        from ..report.text import race_text

        return race_text(self)

    def __str__(self) -> str:
        return self.table()

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython
        printer.text(self.table())


# ------------------------------------------------------------------------------ agreement

def _scalar(x) -> object:
    """An element for JSON: a number as a Python number, anything else as its text."""
    x = x.item() if isinstance(x, np.generic) else x
    return x if isinstance(x, bool | int | float) else str(x)


def _structure(x) -> str:
    """What a value is, as a structural mismatch names it: ``tuple of 2``, ``dict with keys
    ['a', 'b']``, or its type's name."""
    if isinstance(x, dict):
        return f"{type(x).__name__} with keys {sorted(map(str, x))}"
    if is_container(x):
        return f"{type(x).__name__} of {len(x)}"
    return type(x).__name__


def _same_structure(a, b) -> bool:
    """Same kind of container (a tuple and a list are both sequences) and the same length or
    keys; two leaves always are."""
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
    if is_container(a) or is_container(b):
        return is_container(a) and is_container(b) and len(a) == len(b)
    return True


def _leaf_pairs(result, reference, path: str = "") -> list | dict:
    """The ``(path, result leaf, reference leaf)`` of two values walked together (``path``
    like ``[1]`` or ``['loss']``), or the ``"structure"`` mismatch where they part."""
    if not _same_structure(result, reference):
        return {"kind": "structure", "path": path, "structure": _structure(result),
                "expected_structure": _structure(reference)}
    if not is_container(reference):
        return [(path, result, reference)]
    keys = list(reference) if isinstance(reference, dict) else range(len(reference))
    pairs = []
    for key in keys:
        found = _leaf_pairs(result[key], reference[key], f"{path}[{key!r}]")
        if isinstance(found, dict):
            return found
        pairs.extend(found)
    return pairs


def agreement(result, reference, *, rtol: float | None = None, atol: float | None = None,
              ulps: float | None = None) -> tuple[bool, dict | None, dict[str, str] | None]:
    """Whether ``result`` agrees with ``reference``, how it differs, and its dtype difference.

    Values are compared after NumPy promotion (a 0/1 int8 result agrees with a 0/1 float64 one;
    the dtype difference is returned apart), NaN equal to NaN. With ``rtol`` or ``atol`` floats
    compare with that tolerance; else, with ``ulps``, floats agree within that many ulp (of the
    coarser of the two dtypes) of the reference's largest finite magnitude; else exactly.
    Integers and booleans compare exactly unless ``rtol`` or ``atol`` is given. Tuples, lists
    and dicts (a function returning ``(loss, grad)``) are compared item by item: the same
    length or keys, then each item as an array.

    Returns
    -------
    agrees : bool
    mismatch : dict or None
        None when it agrees; else as :attr:`CandidateResult.mismatch`: a disagreement of values
        names the count of differing elements and the first differing index. For tuples,
        lists and dicts, the ``path`` of the item it is about (``"[1]"``, ``"['grad']"``;
        ``""`` for the value itself) and, for values, the count over all items.
    dtype_differs : dict or None
        ``{"dtype": ..., "expected": ...}`` when the dtypes differ (of the first item whose
        do, with its ``path``, for tuples, lists and dicts).
    """
    return compare_values(result, reference, rtol=rtol, atol=atol, ulps=ulps)[:3]


def compare_values(result, reference, *, rtol: float | None = None, atol: float | None = None,
                   ulps: float | None = None) -> tuple:
    """:func:`agreement`, and the tolerance it took: ``(agrees, mismatch, dtype_differs,
    tolerance)``, ``tolerance`` as :attr:`CandidateResult.tolerance` (None when the values are
    equal as they are, or were compared exactly)."""
    tol = {"rtol": rtol, "atol": atol, "ulps": ulps}
    if not (is_container(result) or is_container(reference)):
        return _array_agreement(result, reference, **tol)
    pairs = _leaf_pairs(result, reference)
    if isinstance(pairs, dict):
        return False, pairs, None, None
    total = sum(int(np.size(b)) for _, _, b in pairs)
    found = [(path, *_array_agreement(a, b, **tol)) for path, a, b in pairs]
    return (*_merged([f[:4] for f in found], total),
            _merged_tolerance([f[4] for f in found]))


def _merged(found: list, total: int) -> tuple[bool, dict | None, dict | None]:
    """One agreement from the ``(path, agrees, mismatch, dtype_differs)`` of each item: the
    first item's mismatch that is not of values, else the differing elements counted over all
    items (``total`` elements), the first differing item's index; the first item's dtype
    difference."""
    dtypes = next(({**d, "path": path} for path, _, _, d in found if d), None)
    wrong = [(path, m) for path, ok, m, _ in found if not ok]
    if not wrong:
        return True, None, dtypes
    other = [(path, m) for path, m in wrong if m["kind"] != "values"]
    path, first = (other or wrong)[0]
    if other:
        return False, {**first, "path": path}, dtypes
    count = sum(m["count"] for _, m in wrong)
    return False, {**first, "count": count, "total": total, "path": path}, dtypes


def _merged_tolerance(found: list[dict | None]) -> dict | None:
    """The tolerance of the items that took one: the largest ``atol``, ``scale`` and
    ``max_difference`` among them."""
    found = [t for t in found if t]
    if not found:
        return None
    return {**found[0], **{k: max(t[k] for t in found if t[k] is not None)
                           for k in ("atol", "scale", "max_difference")
                           if any(t[k] is not None for t in found)}}


def _largest(x: np.ndarray) -> float:
    """The largest finite magnitude in ``x`` (0 when none is finite)."""
    x = np.abs(x)
    finite = x[np.isfinite(x)]
    return float(finite.max()) if finite.size else 0.0


def _eps(*dtypes: np.dtype) -> float:
    """The ulp at 1 of the coarsest inexact dtype among ``dtypes``."""
    return max(float(np.finfo(d).eps) for d in dtypes if d.kind in "fc")


def _leaf_tolerance(a, b, a2, b2, *, rtol, atol, ulps) -> dict:
    """The tolerance two inexact arrays (``a2``, ``b2``: promoted) are compared with."""
    with np.errstate(invalid="ignore", over="ignore"):
        tol = {"ulps": None, "rtol": rtol or 0.0, "atol": atol or 0.0, "scale": None,
               "max_difference": _largest(a2 - b2)}
    if rtol is None and atol is None:
        scale = _largest(b2)
        tol.update(ulps=ulps, scale=scale, atol=ulps * _eps(a.dtype, b.dtype) * scale)
    return tol


def _array_agreement(result, reference, *, rtol: float | None, atol: float | None,
                     ulps: float | None) -> tuple:
    """:func:`compare_values` of two arrays (or scalars)."""
    a, b = np.asarray(result), np.asarray(reference)
    if a.shape != b.shape:
        return False, {"kind": "shape", "shape": list(a.shape),
                       "expected_shape": list(b.shape)}, None, None
    dtypes = {"dtype": str(a.dtype), "expected": str(b.dtype)} if a.dtype != b.dtype else None
    tol = None
    try:
        # equal without NaN: one comparison, NumPy casting inside its loop. The promoted
        # copies and the NaN masks below cost 0.6 s on 30M elements (explain's rewrite check)
        if a.dtype != object and b.dtype != object and np.array_equal(a, b):
            return True, None, dtypes, None
        common = np.result_type(a, b)
        a2, b2 = a.astype(common, copy=False), b.astype(common, copy=False)
        given = rtol is not None or atol is not None
        if given and common.kind not in "fc":
            common = np.dtype(np.float64)
            a2, b2 = a2.astype(common), b2.astype(common)
        if common.kind in "fc" and np.array_equal(a2, b2, equal_nan=True):
            return True, None, dtypes, None
        if common.kind not in "fc" and np.array_equal(a2, b2):  # one pass
            return True, None, dtypes, None
        if common.kind in "fc" and (given or ulps is not None):
            tol = _leaf_tolerance(a, b, a2, b2, rtol=rtol, atol=atol, ulps=ulps)
            equal = np.isclose(a2, b2, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True)
        elif common.kind in "fc":
            equal = (a2 == b2) | (np.isnan(a2) & np.isnan(b2))
        else:
            equal = a2 == b2
    except (TypeError, ValueError) as exc:
        return False, {"kind": "incomparable", "error": str(exc)}, dtypes, None
    return (*_equal_elements(np.asarray(equal), a, b), dtypes, tol)


def _equal_elements(equal: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[bool, dict | None]:
    """Whether every element is equal, and the ``"values"`` mismatch when not."""
    if equal.all():
        return True, None
    bad = int(equal.size - np.count_nonzero(equal))
    first = tuple(int(i) for i in np.argwhere(~equal)[0]) if equal.ndim else ()
    return False, {"kind": "values", "count": bad, "total": int(equal.size),
                   "first_index": list(first), "value": _scalar(a[first]),
                   "expected": _scalar(b[first])}


# -------------------------------------------------------------------------------- running

def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _timed_error(exc: BaseException, *, attributed: bool) -> str:
    """A candidate's error while timed: on which of its runs, where the timer counted them
    (its first run, in :func:`prepare`, worked: ``L.pop()``, ``input()``)."""
    from ..report.words import later_run

    if attributed and hasattr(exc, "calls"):
        return later_run(exc, 1 + exc.calls)
    return f"{_error(exc)} (while timed)"


def _store(result: CandidateResult, m) -> None:
    # the first repeat is the calibration's, timed while the others waited (not interleaved)
    # and the one a first-call outlier lands in: dropped when there are others
    _set_times(result, m.times[1:] if m.runs > 1 else m.times, m.loops)


def _set_times(result: CandidateResult, times: list[float], loops: int) -> None:
    m = Measurement(times=list(times), loops=loops)
    result.median_s, result.iqr_s, result.min_s = m.median, m.iqr, m.min
    result.runs, result.loops = m.runs, m.loops
    result.times = list(m.times)


def _time_interleaved(results: list[CandidateResult], fns: list, *, min_time,
                      repeats) -> str | None:
    """Time the candidates that are ready (``fns[i]`` not None) round-robin and store their
    measurements. A candidate raising while timed fails alone (the others are timed again
    without it); Ctrl-C keeps the repeats measured so far. Returns why the race was
    interrupted, or None."""
    alive = [i for i, fn in enumerate(fns) if fn is not None]
    while alive:
        try:
            measured = measure_interleaved([fns[i] for i in alive], min_time=min_time,
                                           repeats=repeats + 1, warmup=False)
        except KeyboardInterrupt as exc:
            partial = getattr(exc, "interleaved_partial", None) or [None] * len(alive)
            for i, m in zip(alive, partial, strict=True):
                if m is not None:
                    _store(results[i], m)
                results[i].interrupted = m is None or m.runs <= repeats
            return "interrupted (Ctrl-C)"
        except (Exception, SystemExit) as exc:
            failed = getattr(exc, "interleaved_index", None)
            if failed is None:  # not ours to attribute: every candidate still timed fails
                failed_all = list(alive)
            else:
                failed_all = [alive[failed]]
            for i in failed_all:
                results[i].error = _timed_error(exc, attributed=failed is not None)
                results[i].cache_hot = False
            alive = [i for i in alive if i not in failed_all]
            continue
        for i, m in zip(alive, measured, strict=True):
            _store(results[i], m)
        return None
    return None


def race(
    candidates: Sequence,
    setup: str | Callable | None = None,
    *,
    reference: int = 0,
    sizes: Sequence[int] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    min_time: float = 0.2,
    repeats: int = 5,
    rotate: bool = False,
    namespace: dict | None = None,
    roof: Roofline | None = None,
    progress: Callable[[str], None] | None = None,
    processes: int | None = None,
) -> RaceResult:
    """Time candidates side by side, check that they agree, and place them under the roof.

    Parameters
    ----------
    candidates : sequence
        Statements (strings), callables, ``(label, statement_or_callable)`` pairs or
        :class:`Candidate` objects.
    setup : str or callable, optional
        Code run before each candidate in a fresh namespace (``np`` is there already; ``n`` is
        the size when sizes are swept), or a callable returning that namespace as a dict
        (called with ``n`` when sizes are swept).
    reference : int
        Index of the candidate the others must agree with.
    sizes : sequence of int, optional
        Sweep these sizes (positive integers), as perfplot does; the result's ``sweep`` has
        the medians and its ``sweep_errors`` what failed at each size.
    rtol, atol : float, optional
        Tolerances for the agreement check of floats. When neither is given, floats agree
        within :func:`default_ulps` ulp of the reference's largest magnitude (rounding:
        another summation order, a vectorised ``exp``); integers and booleans always compare
        exactly (after promotion) unless one is given.
    min_time : float
        Seconds per timing repeat.
    repeats : int
        Timing repeats.
    rotate : bool
        Cycle through independent copies of the inputs when they fit in the cache.
    namespace : dict, optional
        Names visible to setup and statements (IPython's user namespace, for the magics); it is
        copied, never modified.
    roof : Roofline, optional
        The roofline to place results under; measured or loaded from the cache when omitted.
    progress : callable, optional
        Called with a short description before each candidate is set up, and before the
        round-robin timing of each size.
    processes : int, optional
        Run each candidate's setup and timing in this many fresh worker processes, one at a
        time, round-robin over processes (pyperf's model; see
        :mod:`chokepoint.measure.workers`); the repeats are shared among them and merged.
        The result's ``mode`` is then ``"processes"``. Callables and the variables the code
        names must pickle (callables by reference: defined in a module).

    Returns
    -------
    RaceResult

    Raises
    ------
    ValueError
        When there is no candidate, ``reference`` indexes none, or ``processes`` or a size is
        not a positive integer; before anything runs.

    Candidates with the same label (the same statement twice, or a label given twice) are
    told apart by a suffix, ``" #2"``, so that each keeps its own results, sweep and bar.
    """
    specs = _distinct_labels([Candidate.from_spec(c) for c in candidates])
    swept = _checked_sizes(sizes)
    if not specs:
        raise ValueError("race needs at least one candidate")
    if not 0 <= reference < len(specs):
        raise ValueError(f"reference must index a candidate (0..{len(specs) - 1})")
    if processes is not None and (isinstance(processes, bool) or int(processes) != processes
                                  or processes < 1):
        raise ValueError(f"processes must be a positive integer, got {processes!r}")
    roof = roofline() if roof is None else roof
    roof_check: dict = {"cached": roof}
    cache_bytes = last_level_cache_bytes()
    sweep: dict[str, list[float | None]] = {c.label: [] for c in specs}
    sweep_errors: dict[str, list[str | None]] = {c.label: [] for c in specs}
    results: list[CandidateResult] = []
    interrupted = None
    with watch() as watched:
        results, interrupted = _sizes(
            specs, setup, swept or [None], namespace, (sweep, sweep_errors),
            processes=processes, rotate=rotate, cache_bytes=cache_bytes, min_time=min_time,
            repeats=repeats, progress=progress, reference=reference, rtol=rtol, atol=atol,
            roof=roof, roof_check=roof_check)
    roof = roof_check.get("used", roof)
    return RaceResult(
        reference=specs[reference].label, candidates=results,
        machine=_machine(roof, roof_check),
        sizes=swept or None,
        sweep=sweep if swept else {},
        sweep_errors=sweep_errors if swept else {},
        setup=setup if isinstance(setup, str) else getattr(setup, "__qualname__", ""),
        interrupted=interrupted,
        mode="in-process" if processes is None else "processes",
        load=watched.load,
    )


def _distinct_labels(specs: list[Candidate]) -> list[Candidate]:
    """``specs`` with a label met again suffixed ``" #2"``, ``" #3"``, ...: results, sweeps,
    plots and the reference mark go by label."""
    seen: set[str] = set()
    distinct = []
    for spec in specs:
        label, k = spec.label, 1
        while label in seen:
            k += 1
            label = f"{spec.label} #{k}"
        seen.add(label)
        distinct.append(spec if label == spec.label else dataclasses.replace(spec, label=label))
    return distinct


def _checked_sizes(sizes: Sequence[int] | None) -> list[int]:
    """``sizes`` as a list of ints (empty for none).

    Raises
    ------
    ValueError
        When a size is not a positive whole number (``-5``, ``0``, ``3.7``, ``True``).
    """
    checked = []
    for size in sizes if sizes is not None else ():
        whole = (isinstance(size, numbers.Integral) or (
            isinstance(size, numbers.Real) and float(size).is_integer()))
        if isinstance(size, (bool, np.bool_)) or not whole or size < 1:
            raise ValueError(f"sizes must be positive integers, got {size!r}")
        checked.append(int(size))
    return checked


def _sizes(specs, setup, size_list, namespace, sweeps, *, processes, rotate, cache_bytes,
           min_time, repeats, progress, reference, rtol, atol, roof, roof_check):
    """Race at each size in turn (each candidate's median and error at that size into the
    ``sweeps`` pair of dicts, by label); returns the last size's results and why the race
    was interrupted (or None). The roof it placed them under is left in
    ``roof_check["used"]``."""
    sweep, sweep_errors = sweeps
    results: list[CandidateResult] = []
    interrupted = None
    for n in size_list:
        if processes is None:
            results, values, interrupted = _size_in_process(
                specs, setup, n, namespace, rotate=rotate, cache_bytes=cache_bytes,
                min_time=min_time, repeats=repeats, progress=progress)
        else:
            results, values, interrupted = _size_in_processes(
                specs, setup, n, namespace, processes=processes, rotate=rotate,
                cache_bytes=cache_bytes, min_time=min_time, repeats=repeats,
                progress=progress)
        for res in results:
            sweep[res.statement].append(res.median_s)
            sweep_errors[res.statement].append(res.error)
        _compare(results, values, specs, reference, rtol, atol)
        _place(results, roof)
        roof = _check_roof(results, roof, cache_bytes, roof_check)
        _ratios(results, reference)
        if interrupted:
            break
    roof_check["used"] = roof
    return results, interrupted


def _size_in_process(specs, setup, n, namespace, *, rotate, cache_bytes, min_time, repeats,
                     progress):
    """Every candidate set up here, then timed round-robin; returns the results, the values
    and why the race was interrupted (or None). The globals of the user's functions that the
    candidates called are put back as they were when done."""
    states: list[UserState] = []
    try:
        return _set_up_and_timed(specs, setup, n, namespace, rotate=rotate,
                                 cache_bytes=cache_bytes, min_time=min_time, repeats=repeats,
                                 progress=progress, states=states)
    finally:
        for state in reversed(states):
            state.restore(everything=True)


def _set_up_and_timed(specs, setup, n, namespace, *, rotate, cache_bytes, min_time, repeats,
                      progress, states: list[UserState]):
    """:func:`_size_in_process`, each candidate's user state appended to ``states``."""
    results: list[CandidateResult] = []
    values: list = []
    fns: list = []
    interrupted = None
    for candidate in specs:
        if progress is not None:
            progress(candidate.label if n is None else f"{candidate.label}  (n={n})")
        try:
            res, value, timed = prepare(candidate, setup, n, namespace, rotate=rotate,
                                        cache_bytes=cache_bytes, states=states)
        except KeyboardInterrupt:
            interrupted = "interrupted (Ctrl-C)"
            break
        except (Exception, SystemExit) as exc:
            # one candidate's failure is its own: a MemoryError or RecursionError (of its
            # code or its compilation) or a sys.exit() in it leaves the others to run
            res, value, timed = CandidateResult(candidate.label, error=_error(exc)), None, None
        res.runs_planned = repeats
        results.append(res)
        values.append(value)
        fns.append(timed)
    if not interrupted:
        try:
            for i, exc in enumerate(make_copies(fns)):
                if exc is not None:
                    results[i].error, values[i], fns[i] = _error(exc), None, None
        except KeyboardInterrupt:
            interrupted = "interrupted (Ctrl-C)"
    if interrupted:
        for res in results:
            res.interrupted = res.error is None
        return results, values, interrupted
    if progress is not None and len(fns) > 1:
        progress("timing round-robin" + ("" if n is None else f"  (n={n})"))
    interrupted = _time_interleaved(results, fns, min_time=min_time, repeats=repeats)
    return results, values, interrupted


def _size_in_processes(specs, setup, n, namespace, *, processes, rotate, cache_bytes,
                       min_time, repeats, progress):
    """Each candidate set up and timed in ``processes`` fresh worker processes, round-robin
    over processes (see :mod:`chokepoint.measure.workers`); the repeats of a candidate's
    workers are merged. Returns as :func:`_size_in_process`."""
    from .workers import WorkerError, run_in_worker, sendable_namespace

    per_worker = max(1, math.ceil(repeats / processes))
    results: list[CandidateResult | None] = [None] * len(specs)
    values: list = [None] * len(specs)
    times: list[list[float]] = [[] for _ in specs]
    loops: list[int] = [0] * len(specs)
    workers = [0] * len(specs)
    failed: set[int] = set()
    interrupted = None
    for k in range(processes):
        for i, candidate in enumerate(specs):
            if i in failed:
                continue
            if progress is not None:
                where = "" if n is None else f", n={n}"
                progress(f"{candidate.label}  (process {k + 1}/{processes}{where})")
            try:
                code = [candidate.statement] if candidate.statement else []
                named = set(IDENTIFIER.findall(" ".join(
                    [*code, setup if isinstance(setup, str) else ""])))
                answer = run_in_worker({
                    "candidate": candidate, "setup": setup, "n": n,
                    "base": sendable_namespace(namespace, named), "rotate": rotate,
                    "cache_bytes": cache_bytes, "min_time": min_time, "repeats": per_worker,
                    "want_value": k == 0})
            except KeyboardInterrupt:
                interrupted = "interrupted (Ctrl-C)"
                break
            except (TypeError, WorkerError, OSError) as exc:
                answer = {"error": str(exc)}
            if "error" in answer:
                failed.add(i)
                if results[i] is None:
                    results[i] = CandidateResult(candidate.label)
                results[i].error = answer["error"] + (f" (in process {k + 1})" if k else "")
                continue
            if results[i] is None:
                results[i], values[i] = answer["result"], answer["value"]
            times[i].extend(answer["times"])
            loops[i] = max(loops[i], answer["loops"])
            workers[i] += 1
        if interrupted:
            break
    # a candidate no process reached before Ctrl-C is left out, as in-process races do (only
    # a tail of them can be)
    ran = [i for i, r in enumerate(results) if r is not None]
    for i in ran:
        r = results[i]
        if r.error is not None:
            r.cache_hot = False
            continue
        _set_times(r, times[i], loops[i])
        r.runs_planned = per_worker * processes
        r.workers, r.workers_planned = workers[i], processes
        r.interrupted = bool(interrupted) and workers[i] < processes
    return [results[i] for i in ran], [values[i] for i in ran], interrupted


def _compare(results, values, specs, reference, rtol, atol) -> None:
    if reference >= len(results):
        return
    ref = results[reference]
    if ref.error is not None:
        for res in results:
            if res is not ref and res.error is None:
                res.not_compared = "reference-failed"
        return
    for i, (res, value) in enumerate(zip(results, values, strict=True)):
        if i == reference or res.error is not None:
            continue
        shared = res.inputs.keys() & ref.inputs.keys()
        differing = sorted(k for k in shared if res.inputs[k] != ref.inputs[k])
        if differing:
            res.not_compared, res.differing_inputs = "other-inputs", differing
            continue
        if value is None and values[reference] is not None:
            res.agrees, res.mismatch = False, {"kind": "no-value"}
            continue
        if values[reference] is None and value is not None:
            res.not_compared = "reference-no-value"
            continue
        ulps = None if rtol is not None or atol is not None else default_ulps(res, ref)
        res.agrees, res.mismatch, res.dtype_differs, res.tolerance = compare_values(
            value, values[reference], rtol=rtol, atol=atol, ulps=ulps)


#: floats agree by default within this many ulp times sqrt(k) of the reference's scale
ULPS = 4


def default_ulps(result: CandidateResult, reference: CandidateResult) -> float:
    """The tolerance, in ulp of the reference's largest magnitude, that a candidate's floats
    agree within when no ``rtol``/``atol`` is given: ``ULPS * sqrt(k)``, ``k`` the elements
    each result element may sum over (rounding that another summation order changes grows as
    its square root): the inputs' elements over the result's, and at least their square root
    (a matrix product's inner dimension); 4 ulp for an elementwise operation on one element."""
    reads = max(result.read_elements, reference.read_elements, 1)
    k = max(reads / max(reference.elements, 1), math.sqrt(reads), 1.0)
    return ULPS * math.sqrt(k)


def _place(results, roof: Roofline) -> None:
    ran = [r for r in results if r.median_s is not None]
    if not ran:
        return
    fastest = min(r.median_s for r in ran)
    for r in ran:
        r.relative = r.median_s / fastest
        if r.bytes:
            r.gbps = r.bytes / r.median_s / 1e9
            r.roof_fraction = r.bytes / r.median_s / roof.bandwidth


def _ratios(results: list[CandidateResult], reference: int) -> None:
    """Each candidate's ratio to the reference with its bootstrap interval, and the repeats a
    candidate too noisy for its repeats would need (see :mod:`chokepoint.measure.stats`)."""
    ref = results[reference] if reference < len(results) else None
    for i, r in enumerate(results):
        if not r.times:
            continue
        if i != reference and ref is not None and ref.times:
            r.ratio, low, high = bootstrap_ratio(r.times, ref.times)
            r.ratio_ci = [low, high]
        if r.median_s and r.iqr_s is not None and r.iqr_s > NOISY_IQR * r.median_s:
            r.repeats_needed = repeats_needed(r.median_s, r.iqr_s)


#: seconds per repeat of the quick re-measurement of a ceiling a race finds exceeded
RECHECK_MIN_TIME = 0.02


def _recheck_bytes(cache_bytes: int) -> int:
    """Array size for re-measuring the read ceiling: far above the cache, and quick."""
    return min(ARRAY_BYTES, max(4 * cache_bytes, 64 * 2**20))


def _check_roof(results, roof: Roofline, cache_bytes: int, state: dict) -> Roofline:
    """A candidate that is not cache-hot cannot outrun the memory it streams from: one above
    100% of the roof means the cached roofline no longer holds (the machine's bandwidth
    drifted since it was measured). Re-measure that ceiling quickly, once per race
    (``measure_bandwidths``, read only), place every candidate under the higher of the two,
    and record it in the ``stale_roof`` of the candidates that were above it. Returns the roof
    to use."""
    over = [r for r in results if r.roof_fraction is not None and r.roof_fraction > 1.0
            and not r.cache_hot]
    if not over:
        return roof
    cached = state["cached"]
    check = {"fraction": None, "bandwidth": cached.bandwidth, "measured_at": cached.measured_at}
    if roof is not cached:  # re-measured at an earlier size already: over that one
        for r in over:
            r.stale_roof = {**check, "rechecked": state["fresh"], "error": None}
        return roof
    if "fresh" not in state:
        try:
            # the module (chokepoint.measure.roofline is also the name of a function)
            module = importlib.import_module(Roofline.__module__)
            state["fresh"] = module.measure_bandwidths(
                _recheck_bytes(cache_bytes), RECHECK_MIN_TIME, kinds=("read_bw",))["read_bw"]
        except (Exception, SystemExit) as exc:  # the race's results stand without it
            state["fresh"] = None
            state["error"] = _error(exc)
    fresh = state["fresh"]
    for r in over:
        r.stale_roof = {**check, "fraction": r.roof_fraction, "rechecked": fresh,
                        "error": state.get("error")}
    if fresh is None or fresh <= roof.bandwidth:
        return roof
    roof = dataclasses.replace(roof, read_bw=fresh)
    _place(results, roof)
    return roof


def _machine(roof: Roofline, state: dict) -> dict:
    """The race's ``machine``: the roof's summary, and what a stale roofline's check found."""
    machine = roof.summary()
    if "fresh" in state:
        machine["roofline_stale"] = True
        machine["read_bw_cached"] = state["cached"].read_bw
        machine["read_bw_rechecked"] = state["fresh"]
    return machine
