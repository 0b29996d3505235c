"""The roofline: measured ceilings are plausible, and cached per machine."""

import importlib
import json

import numpy as np
import pytest

from chokepoint.measure.roofline import measure_roofline, roofline

roofline_module = importlib.import_module("chokepoint.measure.roofline")


def test_measure_small_roofline_is_plausible():
    roof = measure_roofline(nbytes=8 * 2**20, min_time=0.005)
    for name in ("read_bw", "write_bw", "copy_bw", "triad_bw", "read_bw_1t"):
        assert 1e8 < getattr(roof, name) < 1e13, name
    # 5 ms repeats: a busy core's time slices took one down to 88 MFLOP/s (3 processes on 2
    # cores); plausible means not zero, not broken, not a calibration off by 1000x
    assert 1e7 < roof.flops < 1e14
    assert roof.machine["cores"] >= 1
    assert roof.floor_seconds(roof.bandwidth) == pytest.approx(1.0)
    assert roof.bandwidth == max(roof.read_bw, roof.read_bw_1t)
    assert roof.peak_bandwidth == max(roof.bandwidth, roof.copy_bw, roof.copy_bw_1t,
                                      roof.triad_bw, roof.triad_bw_1t)
    assert roof.attainable(1e-6) == pytest.approx(1e-6 * roof.bandwidth)
    assert roof.attainable(1e9) == roof.compute == max(roof.flops, roof.flops_1t)
    assert set(roof.spread) == {"read_bw", "write_bw", "copy_bw", "triad_bw"}
    assert all(0 <= v < 10 for v in roof.spread.values())
    assert set(roof.gemm) == set(roof.gemm_1t) == {"float32", "float64"}
    assert all(1e8 < v < 1e15 for v in [*roof.gemm.values(), *roof.gemm_1t.values()])
    assert roof.gemm_ceiling("float16") == max(roof.gemm["float32"], roof.gemm_1t["float32"])
    assert roof.gemm_ceiling(np.complex128) == max(roof.gemm["float64"],
                                                   roof.gemm_1t["float64"])


def test_cached_result_is_reused(cached_roof, monkeypatch):
    def fail(**kwargs):
        raise AssertionError("measured although a cache file exists")

    monkeypatch.setattr(roofline_module, "measure_roofline", fail)
    assert roofline() == cached_roof


def test_refresh_measures_and_rewrites_the_cache(cached_roof, monkeypatch):
    fresh = cached_roof.__class__(**{**cached_roof.to_dict(), "read_bw": 1.0})
    monkeypatch.setattr(roofline_module, "measure_roofline", lambda **kw: fresh)
    assert roofline(refresh=True).read_bw == 1.0
    saved = json.loads(roofline_module.cache_path().read_text())
    assert saved["read_bw"] == 1.0


def test_unreadable_cache_is_measured_again(cached_roof, monkeypatch):
    roofline_module.cache_path().write_text("{not json")
    monkeypatch.setattr(roofline_module, "measure_roofline", lambda **kw: cached_roof)
    with pytest.warns(RuntimeWarning, match="damaged"):  # said, not hidden
        assert roofline() == cached_roof


def test_measure_bandwidths_measures_only_what_is_asked():
    from chokepoint.measure.roofline import BANDWIDTHS, measure_bandwidths

    read = measure_bandwidths(8 * 2**20, 0.002, kinds=("read_bw",))
    assert set(read) == {"read_bw"} and read["read_bw"] > 1e8
    assert set(measure_bandwidths(8 * 2**20, 0.002)) == set(BANDWIDTHS)
    with pytest.raises(ValueError, match="unknown"):
        measure_bandwidths(8 * 2**20, 0.002, kinds=("flops",))
