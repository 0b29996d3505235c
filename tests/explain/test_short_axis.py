"""The short-axis probe: a reduction along rows of a few elements, moved first (no timing but
in the last test, whose effect is 8-12x on the machines measured)."""

import warnings

import numpy as np
import pytest

from chokepoint.explain import explain
from chokepoint.explain.probes import ProbeSettings, _reduced_axis, _short_axis_probe
from chokepoint.explain.trace import trace

QUICK = ProbeSettings(min_time=0.0005, repeats=3)


def _op(statement, **arrays):
    ops = [op for op in trace(statement, {"np": np, **arrays}, list(arrays)).ops
           if not op.is_view]
    return ops[-1]


@pytest.mark.parametrize("statement, axis, keyword", [
    ("x.sum(axis=1)", 1, True),
    ("x.max(1)", 1, False),
    ("np.sum(x, axis=-1)", 1, True),
    ("np.mean(x, 1)", 1, False),
    ("np.add.reduce(x)", 0, False),
    ("np.maximum.reduce(x, axis=1)", 1, True),
    ("np.linalg.norm(x, axis=1)", 1, True),
    ("x.sum(axis=(1,))", 1, True),
    ("x.argmax(axis=1)", 1, True),
])
def test_the_reduced_axis_is_read_as_numpy_reads_it(statement, axis, keyword):
    assert _reduced_axis(_op(statement, x=np.ones((300, 6)))) == (axis, keyword)


@pytest.mark.parametrize("statement", ["x.sum()", "np.sum(x, axis=(0, 1))", "x + 1",
                                       "np.linalg.norm(x)", "np.cumsum(x, axis=1)"])
def test_other_operations_have_no_reduced_axis(statement):
    assert _reduced_axis(_op(statement, x=np.ones((300, 6)))) is None


def test_a_reduction_along_a_short_axis_is_probed_with_that_axis_first():
    x = np.random.default_rng(0).random((2000, 6))
    for statement in ("x.sum(axis=1)", "np.max(x, 1)", "np.linalg.norm(x, axis=1)",
                      "x.mean(axis=1, keepdims=True)"):
        probe = _short_axis_probe(_op(statement, x=x), QUICK)
        assert probe is not None and probe.name == "short-axis", statement
        assert "axis of 6 first (6x2000" in probe.detail


@pytest.mark.parametrize("shape, statement", [
    ((2000, 64), "x.sum(axis=1)"),  # a long axis
    ((100, 6), "x.sum(axis=1)"),  # few rows
    ((6, 2000), "x.sum(axis=0)"),  # already that layout
    ((2000, 1), "x.sum(axis=1)"),  # nothing to reduce
])
def test_long_axes_few_rows_and_that_layout_are_not_probed(shape, statement):
    assert _short_axis_probe(_op(statement, x=np.ones(shape)), QUICK) is None


def test_a_maximum_along_rows_of_ten_is_strided_access():
    # NumPy sets up its inner loop per row of 10: 8-12x slower per element than along rows of
    # 400,000 (measured on Zen 4 and older x86)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        e = explain("x.max(axis=1)", "x = np.random.default_rng(0).random((400_000, 10))")
    strided = [f for f in e.findings if f.kind == "strided-access"]
    assert strided and strided[0].share > 0.3
    assert "axis of 10 first" in strided[0].evidence
    assert "short axis first" in strided[0].suggestion
