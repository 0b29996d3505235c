"""The benchmark matrix's logic (chokepoint.bench.matrix), without judging any time."""

import argparse
import importlib

import numpy as np
import pytest

from chokepoint.bench import matrix


def _cell(kernel, n, ours, peer, dtype="float32"):
    return matrix.Cell(kernel, dtype, n, ours, "torch", peer, nbytes=8 * n)


def test_summary_is_the_geometric_mean_and_the_cells_below_one():
    found = [_cell("relu out=", 1000, 1.0, 4.0), _cell("relu out=", 10**7, 2.0, 1.0)]
    geomean, slower = matrix.summary(found)
    assert geomean == pytest.approx(np.sqrt(4.0 * 0.5))
    assert slower == [found[1]]
    assert matrix.summary([]) == (0.0, [])


def test_the_table_has_a_column_per_size_and_the_largest_against_its_floor():
    big = _cell("relu out=", 10**7, 0.02, 0.04)
    big.bandwidth = 8e9  # 8e7 bytes at 8 GB/s: a floor of 0.01 s
    found = [_cell("relu out=", 1000, 1.0, 2.0), big]
    assert big.floor_ratio == pytest.approx(2.0) and found[0].floor_ratio is None
    text = matrix._table(found)
    row = next(line for line in text.splitlines() if line.startswith("relu out="))
    assert row.split()[2:] == ["2.00x", "2.00x", "2.00x"]
    assert "floor" not in matrix._table(found[:1])


def test_every_kernel_has_a_cell_with_a_named_peer(monkeypatch):
    monkeypatch.setattr(matrix, "FLOOR_MIN", 1000)  # the floor timed among each cell's calls
    probed = []
    probes = {"read_bw": (lambda: probed.append(1), 10**6),
              "triad_bw": (lambda: probed.append(3), 3)}
    found = matrix.cells(sizes=(1000,), dtypes=("float64",), min_time=1e-3, repeats=1,
                         probes=probes)
    kernels = [c.kernel for c in found]
    assert len(kernels) == len(set(kernels)) == 10
    assert set(probed) == {1, 3}
    for c in found:  # the faster kind: a million bytes a call (the other, 3 bytes)
        assert c.bandwidth > 1e9 and c.floor_ratio > 0
    for c in found:
        assert c.ours_s > 0 and c.peer_s > 0 and c.peer and c.nbytes > 1000


def test_run_takes_the_options_of_chokepoint_bench_too(monkeypatch, capsys):
    seen = {}

    def fake_cells(sizes, min_time, repeats, progress, probes):
        seen.update(sizes=sizes, repeats=repeats, probes=probes)
        return [_cell("relu out=", 1000, 1.0, 0.5)]

    monkeypatch.setattr(matrix, "cells", fake_cells)
    roofline = importlib.import_module("chokepoint.measure.roofline")
    monkeypatch.setattr(roofline, "measure_floor_bandwidth",
                        lambda *args: (1e10, "(made up)"))
    assert matrix.run(argparse.Namespace(quick=True, min_time=0.02)) == 0  # no repeats
    assert seen == {"sizes": matrix.QUICK_SIZES, "repeats": matrix.REPEATS, "probes": None}
    assert "cells below 1.0x: 1" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="at least 1"):
        matrix.run(argparse.Namespace(quick=True, min_time=0.02, repeats=0))
