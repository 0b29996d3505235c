"""explain's rules on made-up evidence: numbers in, findings out, no timing."""

import numpy as np
import pytest

from chokepoint.explain.findings import (
    MINOR,
    Ledger,
    OpEvidence,
    compute_rule,
    data_dependent_rule,
    derive_findings,
    memory_rule,
)
from chokepoint.explain.model import Model
from chokepoint.explain.probes import Probe
from chokepoint.measure.timer import Measurement

MS = 1e-3


def probe(name, base_ms, changed_ms, spread=0.01, detail="made up"):
    """A probe whose repeats sit within +-spread of their medians."""
    def times(ms):
        return [ms * MS * (1 + d) for d in (-spread, 0.0, spread)]

    return Probe(name, Measurement(times(base_ms), 1), Measurement(times(changed_ms), 1),
                 detail)


def op(label, ms, probes=(), nbytes=64_000_000, produces_result=False, **kw):
    return OpEvidence(label=label, seconds=ms * MS, in_bytes=nbytes // 2,
                      out_bytes=nbytes // 2, allocates=True, produces_result=produces_result,
                      probes={p.name: p for p in probes}, **kw)


def model(**kw):
    values = dict(bytes_moved=64_000_000, bytes_min=64_000_000, bytes_inputs=32_000_000,
                  result_bytes=32_000_000, result_bytes_min=32_000_000, narrow_dtype=None,
                  passes=1, temporaries=0)
    return Model(**{**values, **kw})


def kinds(found):
    return {f.kind: f.share for f in found}


def test_each_millisecond_is_attributed_once(roof):
    ops = [op("a", 10, [probe("out", 10, 6), probe("constant", 10, 4),
                        probe("cache", 1.0, 0.2)]),
           op("b", 10, [probe("cache", 1.0, 0.2)])]
    found, _ruled, _minor, main = derive_findings(ops, model(), 20 * MS, roof, rewrite=None,
                                                peak_extra=None)
    shares = kinds(found)
    # a: 4 ms of page faults, then 6 ms of the values; b: all memory-bound
    assert abs(shares["temporaries"] - 0.2) < 1e-9
    assert abs(shares["data-dependent"] - 0.3) < 1e-9
    assert abs(shares["memory-bound"] - 0.5) < 1e-9
    assert sum(shares.values()) <= 1 + 1e-9
    assert main == ["data-dependent", "memory-bound"]


def test_shares_never_exceed_the_whole_when_operations_add_up_to_more(roof):
    ops = [op("a", 30, [probe("cache", 1.0, 0.2)])]
    found, *_ = derive_findings(ops, model(), 10 * MS, roof, rewrite=None, peak_extra=None)
    assert sum(f.share for f in found) <= 1 + 1e-9


def test_an_effect_within_the_spread_is_ruled_out(roof):
    ops = [op("a", 10, [probe("constant", 10, 9.5, spread=0.1)])]
    cause = data_dependent_rule(ops, Ledger(ops), model(), roof)
    assert not cause.seconds and len(cause.ruled) == 1


def test_small_effects_are_minor_not_findings(roof):
    ops = [op("a", 100, [probe("cache", 1.0, 0.2)]),
           op("b", 0.5, [probe("out", 0.5, 0.1)])]  # confirmed, but 0.4 ms of 100.5
    found, _, minor, _ = derive_findings(ops, model(), 100 * MS, roof, rewrite=None,
                                         peak_extra=None)
    assert all(f.share >= MINOR for f in found)
    assert [f.kind for f in minor] == ["temporaries"]


def test_a_matrix_product_is_judged_against_the_gemm_ceiling(roof):
    # conftest's roofline: float32 matmul 100 GFLOP/s, 20 GB/s
    gemm = op("X.dot(W)", 500, flops=40_000_000_000, gemm=True, dtype="float32",
              nbytes=130_000_000)
    cause = compute_rule([gemm], Ledger([gemm]), model(), roof)
    assert cause.seconds == {0: 0.5}
    fact = cause.facts[0]
    assert fact["rate"] == 80e9 and fact["ceiling"] == 100e9
    found, *_ = derive_findings([gemm], model(), 0.5, roof, rewrite=None, peak_extra=None)
    assert found[0].kind == "compute-bound" and "80.0 GFLOP/s, 80% of the 100.0" in \
        found[0].evidence


def test_a_thin_product_below_the_balance_is_memory_bound(roof):
    thin = op("H.dot(w)", 5, flops=10_000_000, gemm=True, dtype="float64",
              nbytes=80_000_000)
    ledger = Ledger([thin])
    assert not compute_rule([thin], ledger, model(), roof).seconds
    assert memory_rule([thin], ledger, model(), roof).seconds == {0: 0.005}


def test_a_product_far_below_both_ceilings_is_not_memory_bound(roof):
    """A thin matmul (256 x 1024 @ 1024 x 10 float32: 5 MFLOP, 1.1 MB) below the machine
    balance, taking 8 ms (OpenBLAS threads waking on a busy 2-core machine): 0.1 GB/s, 0.7% of
    the roof. Neither ceiling explains it, so no bound is claimed, and the byte counts cannot
    price an extra pass at its 0.1 GB/s (8 ms of thread wake-ups as 'extra passes')."""
    thin = op("a1 @ W2", 8, flops=5_242_880, gemm=True, dtype="float32", nbytes=1_100_000)
    ewise = op("np.maximum(z1, 0)", 0.1, [probe("cache", 1.0, 0.2)], nbytes=2_000_000)
    ledger = Ledger([thin])
    assert not compute_rule([thin], ledger, model(), roof).seconds
    assert not memory_rule([thin], ledger, model(), roof).seconds
    m = model(bytes_moved=12_000_000, bytes_inputs=2_000_000, result_bytes=0,
              result_bytes_min=0, passes=8)
    found, _, minor, main = derive_findings([thin, ewise], m, 8.1 * MS, roof, rewrite=None,
                                        peak_extra=None)
    shares = kinds(found + minor)
    assert main[0] is None
    # what the bytes could cost: 10 MB beyond one pass at the 20 GB/s the maximum reached,
    # 0.5 ms, of which it can only take the maximum's own 0.1 ms
    assert shares.get("extra-passes", 0) <= 0.1 / 8.1 + 1e-9
    assert sum(shares.values()) <= 0.1 / 8.1 + 1e-9


def test_extra_passes_and_wide_output_come_out_of_the_memory_time(roof):
    ops = [op("clip", 10, [probe("cache", 1.0, 0.2)]),
           op("ceil", 10, [probe("cache", 1.0, 0.2)], produces_result=True)]
    m = model(bytes_moved=128_000_000, passes=2, result_bytes_min=4_000_000,
              narrow_dtype=np.dtype(bool))
    found, *_ = derive_findings(ops, m, 20 * MS, roof, rewrite=None, peak_extra=None)
    shares = kinds(found)
    assert {"extra-passes", "wide-output", "memory-bound"} <= set(shares)
    assert abs(sum(shares.values()) - 1.0) < 1e-9  # all 20 ms, each once
    # 64 MB beyond one pass, 28 MB too wide, at the 6.4 GB/s the operations reached
    assert abs(shares["extra-passes"] - 0.5) < 1e-9
    assert abs(shares["wide-output"] - 28 / 128) < 1e-9


def test_words_name_the_operations_and_the_numbers(roof):
    ops = [op("G[t1] = 0", 20, [probe("sorted", 20, 2, detail="float inputs sorted")],
              source="net.py:38")]
    rewrites = [{"source": "net.py:38", "statement": "chokepoint.relu_backward(G, X, out=G)",
                 "speedup": 4.0, "replaces": "G[X <= 0] = 0"}]
    found, *_ = derive_findings(ops, model(), 20 * MS, roof, rewrite=None, peak_extra=None,
                                line_rewrites=rewrites)
    f = next(f for f in found if f.kind == "data-dependent")
    assert "G[t1] = 0: 20 ms on your data, 2 ms with sorted inputs" in f.evidence
    assert f.suggestion.startswith("chokepoint.relu_backward(G, X, out=G) at net.py:38")


def test_a_gather_in_random_order_is_advised_on_its_order_not_on_branches(roof):
    """zk[order] with a random permutation: 112 ms, 21 ms with the index array sorted. The
    time is cache misses of the reads, so 'a branch-free formulation' would send the author
    the wrong way; a boolean mask's own slowness is its branches, and keeps that advice."""
    gather = op("zk[order]", 112, [probe("sorted", 112, 21, detail="the index array sorted "
                                         "(the same number of elements selected, in order)")])
    mask = op("keys[keep]", 8, [probe("sorted", 8, 1.2, detail="the mask sorted (the same "
                                      "number of elements selected, in order)")])
    found, *_ = derive_findings([gather], model(), 112 * MS, roof, rewrite=None,
                                peak_extra=None)
    advice = next(f for f in found if f.kind == "data-dependent").suggestion
    assert advice.startswith("read in order: sort the index array") and "branch" not in advice
    found, *_ = derive_findings([mask], model(), 8 * MS, roof, rewrite=None, peak_extra=None)
    advice = next(f for f in found if f.kind == "data-dependent").suggestion
    assert advice.startswith("a branch-free formulation")
    found, *_ = derive_findings([gather, mask], model(), 120 * MS, roof, rewrite=None,
                                peak_extra=None)
    advice = next(f for f in found if f.kind == "data-dependent").suggestion
    assert advice.startswith("read in order") and "branch-free" in advice


def test_a_pool_emptied_by_the_byte_counts_leaves_no_rounding_behind(roof):
    """Extra passes carved out all of the memory-bound time: what the subtraction leaves
    (4e-17 of it) is not a minor finding 'memory-bound (4.3e-15%)'."""
    ops = [op(name, ms, [probe("cache", 1, 0.2)], needed=0)  # every byte beyond one pass
           for name, ms in (("a", 10), ("b", 3), ("c", 7))]
    found, _, minor, _ = derive_findings(ops, model(bytes_moved=10_000_000_000, passes=3),
                                         20 * MS, roof, rewrite=None, peak_extra=None)
    assert [f.kind for f in found] == ["extra-passes"]
    assert not minor


def test_extra_passes_never_claim_more_than_the_operations_they_are_drawn_from(roof):
    """pipeline before the fix: 'about 3.82 s' of extra passes in a 536 ms program, the extra
    bytes of the whole statement priced at the rate of the few operations that were memory
    -bound. Here one memory-bound operation (10 ms, 64 MB) and an argsort no rule explains
    (500 ms, 640 MB); the statement moves 640 MB beyond its input and result, which at the
    6.4 GB/s of the memory-bound operation would be 100 ms. The finding may claim at most what
    that operation's extra bytes are of its 10 ms, and the seconds its sentence gives are its
    share."""
    from chokepoint.measure.timer import format_seconds

    ewise = op("np.subtract(table, mu)", 10, [probe("cache", 1.0, 0.2)], needed=16_000_000)
    sort = op("np.argsort(kk)", 500, nbytes=640_000_000, needed=640_000_000)
    m = model(bytes_moved=704_000_000, passes=2)
    found, *_ = derive_findings([ewise, sort], m, 0.51, roof, rewrite=None, peak_extra=None)
    passes = next(f for f in found if f.kind == "extra-passes")
    # 48 of its 64 MB are beyond one pass: 7.5 ms of its 10 ms
    assert abs(passes.share * 0.51 - 7.5 * MS) < 1e-9
    assert f"of which {format_seconds(7.5 * MS)} is" in passes.evidence
    assert f"took {format_seconds(10 * MS)}" in passes.evidence
    assert "about" not in passes.evidence


def test_one_cause_probed_twice_on_an_operation_is_counted_once(roof):
    """np.add(t90, t91) in the stencil: 1.34 ms -> 0.92 with constant inputs, 1.27 -> 0.91
    sorted. Both measure the values; their savings summed (0.78 ms) claimed 89% of the
    0.88 ms operation where each probe measured about 30%."""
    a = op("np.add(t90, t91)", 0.88, [probe("constant", 1.34, 0.92), probe("sorted", 1.27, 0.91)])
    cause = data_dependent_rule([a], Ledger([a]), model(), roof)
    assert len(cause.facts) == 2
    # the larger fraction (0.42 / 1.34) of the operation's own 0.88 ms
    assert abs(cause.seconds[0] - 0.88 * MS * 0.42 / 1.34) < 1e-12


def test_a_probe_claims_its_fraction_of_the_operations_measured_time(roof):
    """The probe's base ran at 20 ms where the operation measured 10: what the change saved
    (10 of 20 ms) is half the operation, 5 ms, not 10."""
    a = op("G[t1] = 0", 10, [probe("sorted", 20, 10)])
    cause = data_dependent_rule([a], Ledger([a]), model(), roof)
    assert abs(cause.seconds[0] - 5 * MS) < 1e-12


def test_a_line_lumped_in_with_matrix_products_keeps_its_measured_rewrite(roof):
    """mlp: compute-bound (81%) holds two matrix products and np.where(z1 > 0, da1, 0) (1.1 ms
    of ~10), whose rewrite chokepoint.relu_backward was measured 32x faster. The finding's
    advice was the products' alone; the one change measured to save time must be in it."""
    gemm = op("np.matmul(X, W1)", 8, flops=1_074_000_000, gemm=True, dtype="float32",
              nbytes=6_300_000, source="net.py:35")
    where = op("np.where(t20, da1, 0)", 1.1, [probe("cache", 1.0, 0.7)], nbytes=2_400_000,
               source="net.py:47")
    rewrites = [{"source": "net.py:47", "statement": "chokepoint.relu_backward(da1, z1)",
                 "speedup": 32.0, "replaces": "np.where(z1 > 0, da1, 0)",
                 "saved_s": 1.07 * MS, "share": 0.107}]
    found, *_ = derive_findings([gemm, where], model(), 10 * MS, roof, rewrite=None,
                                peak_extra=None, line_rewrites=rewrites)
    compute = next(f for f in found if f.kind == "compute-bound")
    assert compute.suggestion.startswith("fewer flops")
    assert ("chokepoint.relu_backward(da1, z1) at net.py:47 (measured 32.0x faster than "
            "np.where(z1 > 0, da1, 0), same values, saves about 1.07 ms here (11% of the "
            "time))") in compute.suggestion


def test_a_rewrite_saves_what_it_saved_per_call_times_the_calls_within_its_line():
    from types import SimpleNamespace

    from chokepoint.explain.api import _rewrite_savings

    rows = [{"source": "net.py:47", "time_s": 1.1 * MS}, {"source": "net.py:35", "time_s": 8 * MS},
            {"source": "loop.py:3", "time_s": 2 * MS}]
    tr = SimpleNamespace(line_runs={("net.py", 47): 1, ("loop.py", 3): 10})
    once = {"source": "net.py:47", "original_s": 1.1 * MS, "measured_s": 0.034 * MS}
    # a loop: 0.15 ms saved per call, ten calls, but the line took 2 ms in all
    loop = {"source": "loop.py:3", "original_s": 0.2 * MS, "measured_s": 0.05 * MS}
    _rewrite_savings(tr, rows, [once, loop], 10 * MS)
    assert abs(once["saved_s"] - 1.066 * MS) < 1e-12 and once["runs"] == 1
    assert abs(loop["saved_s"] - 1.5 * MS) < 1e-12 and loop["runs"] == 10
    assert abs(loop["share"] - 1.5 / 11.1) < 1e-12  # of the operations' 11.1 ms
    loop.update(original_s=1 * MS)  # 0.95 ms a call, ten calls: no more than the line's 2 ms
    _rewrite_savings(tr, rows, [loop], 10 * MS)
    assert loop["saved_s"] == 2 * MS


def test_a_value_probe_that_shows_an_effect_is_timed_again(monkeypatch):
    # a chance difference in one pair of timings (the demo once called np.clip data-dependent
    # at 8%) must stand out of two pairs taken together; a real one does
    from types import SimpleNamespace

    from chokepoint.explain import probes

    def timed(ms):
        return Measurement([ms * MS * (1 + d) for d in (-0.01, 0.0, 0.01, -0.005, 0.005)], 1)

    fake_op = SimpleNamespace(func=lambda *a, **k: None, args=(), kwargs={})
    for second, expected in (((24.0, 24.0), False), ((28.0, 24.0), True)):
        pairs = iter([(timed(28.0), timed(24.0)), tuple(timed(ms) for ms in second)])
        monkeypatch.setattr(probes, "_pair", lambda *a, _p=pairs: next(_p))
        p = probes._compared("constant", fake_op, (), {}, None, probes.ProbeSettings(), "made up")
        assert p.base.runs == 10 and p.significant() is expected
    # other probes are timed once
    pairs = iter([(timed(28.0), timed(24.0))])
    monkeypatch.setattr(probes, "_pair", lambda *a: next(pairs))
    p = probes._compared("contiguous", fake_op, (), {}, None, probes.ProbeSettings(), "made up")
    assert p.base.runs == 5 and p.significant()


def test_a_split_that_gained_nothing_on_a_busy_machine_says_so(roof):
    from dataclasses import replace

    from chokepoint.explain.findings import single_threaded_rule
    from chokepoint.measure.load import Load

    busy = replace(probe("threads", 10, 9.9), load=Load(2.0, 2, 1.9, 0.95, 0.0))
    ops = [op("np.arctan2(X, Y)", 10, [busy])]
    _, ruled, *_ = derive_findings(ops, model(), 10 * MS, roof, rewrite=None,
                                       peak_extra=None)
    said = [r.evidence for r in ruled if r.kind == "single-threaded"]
    assert said and "other processes used 0.95 of the 2 cores" in said[0]
    cause = single_threaded_rule(ops, Ledger(ops), model(), roof)
    assert cause.ruled[0]["busy"] == {"others": 0.95, "cpus": 2}
    quiet = [op("np.arctan2(X, Y)", 10, [probe("threads", 10, 9.9)])]
    _, ruled, *_ = derive_findings(quiet, model(), 10 * MS, roof, rewrite=None, peak_extra=None)
    assert all("other processes" not in r.evidence for r in ruled)


def test_a_probe_of_the_first_rows_reads_in_the_whole_operations_units():
    from chokepoint.explain.api import _scaled

    out = _scaled(probe("out", 10, 4), share=0.25)
    assert out.base.median == 40 * MS and out.changed.median == 16 * MS  # ratio kept
    assert "first 25% of rows, times scaled" in out.detail
    cache = _scaled(probe("cache", 1.0, 0.2), share=0.25)  # per element already
    assert cache.base.median == 1.0 * MS and "first 25% of rows" in cache.detail


@pytest.mark.parametrize(("base", "changed", "clear"), [
    ([10.0, 10.2, 10.1], [7.0, 7.1, 7.2], True),  # apart, 30% faster: a finding
    ([10.0, 10.2, 10.1], [10.1, 10.0, 10.3], True),  # overlapping, 1% apart: no effect
    ([10.0, 10.2, 10.1], [8.6, 8.7, 8.8], False),  # apart but 14%: near the 10% bar
    ([10.0, 12.0, 10.1], [9.4, 11.9, 9.5], False),  # overlapping, 6% apart: more repeats
    ([10.0, 10.2], [7.0, 7.1], False),  # two repeats never settle it
    # apart, 2x, but one slow run (fresh pages a VM had handed back to its host) makes the
    # base's spread wider than the gap: on three, the full rule would call it noise
    ([66.7, 252.4, 66.6], [34.1, 34.3, 34.1], False),
])
def test_three_repeats_settle_only_a_clear_comparison(base, changed, clear):
    from chokepoint.explain.probes import clear_after_three, significant
    assert clear_after_three([base, changed]) is clear
    if clear:  # stopping early never changes the verdict the full rule gives on them
        assert significant(base, changed) == (np.median(changed) < 0.8 * np.median(base))


def test_extra_passes_of_compute_bound_operations_cost_their_bytes_at_the_roof(roof):
    # sin and cos at 3.2 GB/s (no probe finds memory their limit): fused into one pass they
    # take as long. The 64 MB beyond one pass cost at most 64 MB at the 20 GB/s roof
    ops = [op("np.sin(a)", 10, [probe("cache", 1.0, 1.0)]),
           op("np.cos(t1)", 10, [probe("cache", 1.0, 1.0)], produces_result=True)]
    m = model(bytes_moved=128_000_000, passes=2)
    found, _, minor, _ = derive_findings(ops, m, 20 * MS, roof, rewrite=None,
                                        peak_extra=None)
    passes = [f for f in [*found, *minor] if f.kind == "extra-passes"]
    assert passes, [f.kind for f in found]
    assert passes[0].share * 20 * MS <= 64e6 / roof.bandwidth + 1e-12  # 3.2 ms, not 10 ms
    assert kinds(found).get("compute-bound", 0) > 0.8


def test_a_probe_into_out_claims_its_share_of_the_time_without_fresh_memory(roof):
    # np.ceil as traced: 8.6 ms, 4.8 of them page faults (the out probe); the threads probe,
    # both sides into out=, saved 1.58 of 3.37 ms: 47% of the 3.6 ms without the faults, not
    # of the 8.6 ms (4.1 ms, which left the memory-bound time and its wide output nothing)
    from dataclasses import replace

    threads = replace(probe("threads", 3.37, 1.79), into_out=True)
    ops = [op("np.ceil(t1)", 8.6, [probe("out", 8.35, 3.51), threads,
                                   probe("cache", 1.0, 0.2)], produces_result=True)]
    found, *_ = derive_findings(ops, model(), 8.6 * MS, roof, rewrite=None, peak_extra=None)
    shares = kinds(found)
    without_faults = 8.6 * 3.51 / 8.35
    assert shares["single-threaded"] * 8.6 == pytest.approx(without_faults * 1.58 / 3.37)
    assert shares["memory-bound"] > 0.15
    assert sum(shares.values()) == pytest.approx(1.0)


def test_the_cache_probe_compares_best_times():
    # the cache-sized part ran into a busy moment in two of its three repeats: its median is
    # 2.6x its best, and the medians' ratio (1.4) would call a memory-bound add compute-bound
    from chokepoint.explain.findings import cache_speedup

    base = Measurement([1.0 * MS, 1.02 * MS, 1.05 * MS], 1)
    small = Measurement([0.27 * MS, 0.70 * MS, 0.75 * MS], 1)
    assert cache_speedup(Probe("cache", base, small, "made up")) == pytest.approx(1 / 0.27)
