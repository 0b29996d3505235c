"""A race's candidates and their setup, shared by the race in this process (:mod:`.race`) and
by a worker process (:mod:`.workers`): :func:`prepare` sets a candidate up, runs it once and
records what it does to its inputs; :func:`make_copies` makes the rotated candidates' copies.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from .statements import arrays_in, bind_callable, compile_statement, mutated, names_used, run_setup
from .userstate import Restored, UserState, user_state

__all__ = ["Candidate", "CandidateResult", "is_container", "make_copies", "prepare"]

_MAX_COPIES = 64


def _names_used(candidate: Candidate, namespace: dict) -> list[str]:
    return list(namespace) if candidate.statement is None else names_used(candidate.statement)


def _compile(candidate: Candidate, namespace: dict) -> Callable[[], object]:
    """A no-argument callable running the candidate in ``namespace``, returning its value."""
    if candidate.function is not None:
        return bind_callable(candidate.function, namespace)
    return compile_statement(candidate.statement, namespace)


def _fingerprint(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """A cheap digest of each input: shape, dtype and about 4096 sampled elements."""
    prints = {}
    for name, a in arrays.items():
        flat = a.reshape(-1)
        step = max(1, flat.size // 4096)
        h = hashlib.blake2b(f"{a.shape}{a.dtype}".encode(), digest_size=12)
        h.update(np.ascontiguousarray(flat[::step]).tobytes())
        prints[name] = h.hexdigest()
    return prints


@dataclass(frozen=True)
class Candidate:
    """One implementation in a race.

    Attributes
    ----------
    label : str
        How results name it (the statement itself by default).
    statement : str or None
        Code run in the setup's namespace; an expression's value is the result.
    function : callable or None
        Called with the setup's namespace as keyword arguments it accepts, or with none.
    """

    label: str
    statement: str | None = None
    function: Callable | None = None

    @classmethod
    def from_spec(cls, spec) -> Candidate:
        """A candidate from a string, a callable, a ``(label, code)`` pair or a Candidate."""
        if isinstance(spec, Candidate):
            return spec
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
            label, code = spec
            made = cls.from_spec(code)
            return cls(label, made.statement, made.function)
        if isinstance(spec, str):
            return cls(spec.strip(), statement=spec.strip())
        if callable(spec):
            return cls(getattr(spec, "__qualname__", repr(spec)), function=spec)
        raise TypeError(f"a candidate must be a statement, a callable or (label, either); "
                        f"got {type(spec).__name__}")


@dataclass
class CandidateResult:
    """One candidate's result: the fields of the race JSON (see docs/interfaces.md).

    What the race found out about a candidate besides its times is kept as fields, never as
    sentences; :attr:`note` (and the reports) put them into words with
    :func:`chokepoint.report.words.race_note`.

    Attributes
    ----------
    statement : str
        The candidate's label.
    median_s, iqr_s, min_s : float or None
        Seconds per call over its repeats; None when it was not timed.
    runs, loops : int
        Timing repeats kept, and calls per repeat.
    relative : float or None
        Its median over the fastest candidate's.
    ratio, ratio_ci : float, [float, float] or None
        Its median over the reference's, with the 95% bootstrap interval.
    repeats_needed : int or None
        Set when the candidate is noisy (IQR over 10% of the median): about how many repeats
        would pin its median within 5%.
    gbps, roof_fraction : float or None
        ``bytes`` over the median, in GB/s and as a fraction of the roof's read bandwidth.
    agrees : bool or None
        Whether its value agrees with the reference's; None for the reference, a failed
        candidate or one not compared (see ``not_compared``).
    error : str or None
        ``"Type: message"`` of what it raised; it was then not timed.
    writes : list of str
        The inputs its result lives in (``out=`` buffers): its output, not inputs it mutates.
    mutates : list of str
        The inputs it changes (not those in ``writes``). They are put back as setup made them
        before every timed call, outside the timed region, so that every call sees the same
        data (not rotated; ``cache_hot`` when they fit in the cache).
    changes_globals : list of str
        Globals of the user's functions that its first run changed (``"count()'s global L"``),
        found by :func:`~chokepoint.measure.userstate.user_state`: put back before every timed
        call, untimed, and when the race is done, so that the user's data is left as it was.
    copies : int or None
        The copies of its inputs the timed loop rotated among (``rotate=True``); None when
        not rotated.
    cache_hot : bool
        Its working set (``bytes``) fits in the last-level cache (``cache_bytes``) and was not
        rotated: it was timed from the cache.
    bytes : int or None
        Its inputs read once (those in ``writes`` left out) plus its result written once: what
        ``gbps`` counts, and its working set.
    cache_bytes : int or None
        The last-level cache size its working set was compared with.
    mismatch : dict or None
        How its value disagrees with the reference's, with a ``kind``: ``"values"`` with
        ``count`` of ``total`` elements differing, the ``first_index`` (a list; empty for a
        scalar), its ``value`` there and the reference's ``expected`` (numbers as numbers,
        anything else as text); ``"shape"`` with ``shape`` and ``expected_shape``;
        ``"incomparable"`` with the ``error`` comparing raised; ``"no-value"`` when it
        returns None and the reference does not; ``"structure"`` when its tuple, list or
        dict has another length or keys than the reference's (``structure`` and
        ``expected_structure``, e.g. ``"tuple of 2"``). A tuple, list or dict is compared
        item by item: its mismatch has the ``path`` of the item (``"[1]"``, ``"['grad']"``),
        and ``count`` and ``total`` are over all items.
    dtype_differs : dict or None
        ``{"dtype": its value's dtype, "expected": the reference's}`` when they differ (the
        values are compared after promotion, so it may still agree); with the ``path`` of
        the first item whose dtypes differ for a tuple, list or dict.
    not_compared : str or None
        Why it was not compared with the reference: ``"reference-failed"``,
        ``"reference-no-value"`` (the reference returns None and changes none of its
        inputs), or ``"other-inputs"`` (its setup gave inputs other than the reference's,
        named in ``differing_inputs``: the setup is not deterministic). A statement with no
        value that changes its inputs is compared by what it leaves in them.
    differing_inputs : list of str
        With ``not_compared == "other-inputs"``: the inputs that differ.
    interrupted : bool
        Ctrl-C ended the race before its timing was complete: it has ``runs`` of
        ``runs_planned`` repeats (0: not timed), or, with processes, was timed in ``workers``
        of ``workers_planned`` processes.
    runs_planned : int or None
        The repeats asked for.
    workers, workers_planned : int or None
        The worker processes it was timed in, and the race's ``processes``; None in-process.
    stale_roof : dict or None
        Set when it was not cache-hot yet ran above 100% of the cached roofline's read
        bandwidth: ``fraction`` of it (None when the ceiling was re-measured at an earlier
        size of a sweep), the cached ``bandwidth`` (bytes/s) and when it was ``measured_at``,
        the ceiling ``rechecked`` now (None when that failed, with its ``error``). Its
        ``roof_fraction`` is against the higher of the two.
    tolerance : dict or None
        Set when its floating-point values are not bit for bit the reference's and were
        compared with a tolerance (see :func:`.race.race`'s ``rtol``): ``ulps`` (None when
        ``rtol`` or ``atol`` was given), ``rtol``, ``atol`` (the absolute tolerance it amounts to),
        ``scale`` (the reference's largest finite magnitude, None with ``rtol``/``atol``) and
        the ``max_difference`` found. Exact dtypes (integers, booleans) compare exactly.
    """

    statement: str
    median_s: float | None = None
    iqr_s: float | None = None
    min_s: float | None = None
    runs: int = 0
    loops: int = 0
    relative: float | None = None
    ratio: float | None = None
    ratio_ci: list[float] | None = None
    repeats_needed: int | None = None
    gbps: float | None = None
    roof_fraction: float | None = None
    agrees: bool | None = None
    error: str | None = None
    writes: list[str] = field(default_factory=list)
    mutates: list[str] = field(default_factory=list)
    changes_globals: list[str] = field(default_factory=list)
    copies: int | None = None
    cache_hot: bool = False
    bytes: int | None = None
    cache_bytes: int | None = None
    mismatch: dict | None = None
    dtype_differs: dict[str, str] | None = None
    not_compared: str | None = None
    differing_inputs: list[str] = field(default_factory=list)
    interrupted: bool = False
    runs_planned: int | None = None
    workers: int | None = None
    workers_planned: int | None = None
    stale_roof: dict | None = None
    tolerance: dict | None = None
    inputs: dict[str, str] = field(default_factory=dict, repr=False)
    read_elements: int = field(default=0, repr=False)
    elements: int = field(default=0, repr=False)
    times: list[float] = field(default_factory=list, repr=False)

    @property
    def note(self) -> str:
        """The fields above in words, as the reports print them (docs/interfaces.md's ``note``)."""
        from ..report.words import race_note

        return race_note(self)

    def to_dict(self) -> dict:
        """The docs/interfaces.md fields, ``note`` composed from the structured fields that
        follow."""
        data = asdict(self)
        for private in ("inputs", "elements", "read_elements", "times"):
            data.pop(private)
        head = list(data)[:list(data).index("error") + 1]
        return {**{k: data.pop(k) for k in head}, "note": self.note, **data}


def is_container(x) -> bool:
    """Whether ``x`` is compared item by item: a tuple (``(loss, grad)``), a list or a dict."""
    return isinstance(x, tuple | list | dict)


def prepare(candidate: Candidate, setup, n, base, *, rotate, cache_bytes,
            states: list[UserState] | None = None,
            ) -> tuple[CandidateResult, object, Callable[[], object]]:
    """Set the candidate up, run it once (its value, and the warm-up call) and record what it
    does to its inputs and to the globals of the user's functions it calls (their state is
    appended to ``states`` before it runs: the caller puts it back when the race is done);
    returns its result so far, its value and the callable to time."""
    result = CandidateResult(candidate.label)
    code = [candidate.statement] if candidate.statement else []
    namespace = run_setup(setup, n, base, code)
    used = _names_used(candidate, namespace)
    inputs = arrays_in(namespace, used)
    result.inputs = _fingerprint(inputs)
    pristine = {k: v.copy() for k, v in inputs.items()}
    fn = _compile(candidate, namespace)
    state = user_state([candidate.function, *(namespace[k] for k in used if k in namespace)])
    if states is not None:
        states.append(state)
    value = fn()  # the value checked for agreement, and the warm-up call
    result.changes_globals = state.changed()
    state.restore()
    outputs = _arrays_of(value)
    # an array the result lives in (an out= buffer) is the output, not an input
    written = {k for k, a in inputs.items()
               if any(np.may_share_memory(out, a) for out in outputs)}
    result.writes = sorted(written)
    result.mutates = [k for k in mutated(pristine, namespace) if k not in written]
    if value is None and result.mutates:
        value = _left(namespace, result.mutates)
    out_bytes = sum(int(out.nbytes) for out in outputs)
    result.elements = sum(int(out.size) for out in outputs)
    result.bytes = sum(a.nbytes for k, a in inputs.items() if k not in written) + out_bytes
    result.read_elements = sum(a.size for k, a in inputs.items() if k not in written)
    result.cache_bytes = cache_bytes
    working_set = result.bytes
    timed = fn
    if result.mutates or result.changes_globals:
        # timed on its inputs (and the globals it changes) as they were, put back before every
        # call (untimed): its first call may leave later ones nothing to do (B[B < 0] = 0
        # finds no negatives left), or a list of the user's growing
        restores = [state.restore]
        if result.mutates:
            restores.append(_inputs_restore(namespace, {k: inputs[k] for k in result.mutates},
                                            {k: pristine[k] for k in result.mutates}))
        timed = Restored(fn, *restores)
        result.cache_hot = working_set < cache_bytes
    elif working_set < cache_bytes:
        copies = min(_MAX_COPIES, math.ceil(2 * cache_bytes / max(working_set, 1)))
        if rotate and copies * working_set >= cache_bytes:
            # the other copies are made by make_copies, round-robin over candidates
            fns = [fn]
            timed = _Rotation(fns, copies, lambda: _compile(candidate,
                                                            run_setup(setup, n, base, code)))
            result.copies = copies
        else:
            result.cache_hot = True
    return result, value, timed


def _arrays_of(value) -> list[np.ndarray]:
    """The arrays a value is made of (its items' for a tuple, list or dict; a scalar as a 0-d
    array; none for None or what is no array): what its bytes and elements count."""
    if value is None:
        return []
    if is_container(value):
        items = value.values() if isinstance(value, dict) else value
        return [a for item in items for a in _arrays_of(item)]
    if isinstance(value, np.ndarray):
        return [value]
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        return []
    return [] if a.dtype == object else [a]


def _left(namespace: dict, names: list[str]):
    """What a statement with no value leaves in the arrays it changed (a copy), compared as its
    value: ``B[B < 0] = 0`` against ``np.maximum(B, 0, out=B)``. One array, or a dict of them."""
    left = {k: np.array(namespace[k], copy=True) for k in names
            if isinstance(namespace.get(k), np.ndarray)}
    if not left:
        return None
    return next(iter(left.values())) if len(left) == 1 else left


def _inputs_restore(namespace: dict, arrays: dict[str, np.ndarray],
                    pristine: dict[str, np.ndarray]) -> Callable[[], None]:
    """What puts a candidate's changed inputs back (called before each call, outside the timed
    region: :func:`~chokepoint.measure.timer.measure`): each changed name to its array as
    setup made it, values included."""
    def restore() -> None:
        for name, a in arrays.items():
            namespace[name] = a  # a statement may have rebound the name
            if a.flags.writeable:
                np.copyto(a, pristine[name])

    return restore


class _Rotation:
    """The timed callable of a rotated candidate: each call runs the next copy's."""

    def __init__(self, fns: list, copies: int, make: Callable[[], Callable]):
        self.fns, self.copies, self.make, self.state = fns, copies, make, 0

    def __call__(self):
        self.state = (self.state + 1) % self.copies
        return self.fns[self.state]()


def make_copies(timed: list) -> list[BaseException | None]:
    """Set up the copies of the rotated candidates among ``timed`` one copy of each in turn
    (A1 B1 A2 B2 ..., not A1 A2 ... B1 B2 ...), so that they come from the allocator alike:
    one candidate's copies made after another's lie elsewhere in memory, and identical
    candidates then differed by up to 10% here. Returns, per candidate, what making its
    copies raised (None when nothing did); a KeyboardInterrupt propagates."""
    errors: list[BaseException | None] = [None] * len(timed)
    rotations = [(i, t) for i, t in enumerate(timed) if isinstance(t, _Rotation)]
    while True:
        pending = [(i, t) for i, t in rotations
                   if errors[i] is None and len(t.fns) < t.copies]
        if not pending:
            return errors
        for i, t in pending:
            try:
                t.fns.append(t.make())
            except (Exception, SystemExit) as exc:
                errors[i] = exc
