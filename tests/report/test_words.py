"""A race candidate's note in words, from made-up structured fields: nothing is timed."""

import json

import pytest

from chokepoint.measure.race import CandidateResult
from chokepoint.report.words import race_note


def made(**fields) -> CandidateResult:
    return CandidateResult("X + 1", **fields)


def test_nothing_to_say_is_an_empty_note():
    assert race_note(made()) == ""
    assert made().note == ""


@pytest.mark.parametrize(("fields", "words"), [
    ({"writes": ["Y", "Z"]}, "writes its result into Y, Z"),
    ({"mutates": ["X"]},
     "mutates its inputs (X): timed on them as set up, put back before every call (untimed)"),
    ({"not_compared": "reference-no-value"},
     "not compared: the reference returns no value and changes none of its inputs"),
    ({"copies": 40}, "rotated among 40 copies of the inputs"),
    ({"cache_hot": True, "bytes": 3 * 2**19, "cache_bytes": 32 * 2**20},
     "cache-hot: working set 1.50 MiB fits in the 32 MiB cache"),
    ({"mismatch": {"kind": "values", "count": 3, "total": 12, "first_index": [1, 2],
                   "value": 0.5, "expected": 1.0}},
     "differs at 3 of 12 elements, first at index (1, 2) (0.5 vs 1.0)"),
    ({"mismatch": {"kind": "values", "count": 1, "total": 1, "first_index": [],
                   "value": 2, "expected": 3}},
     "differs at 1 of 1 elements, the scalar differs (2 vs 3)"),
    ({"mismatch": {"kind": "values", "count": 1, "total": 2, "first_index": [0],
                   "value": "(1+2j)", "expected": "0j"}},
     "differs at 1 of 2 elements, first at index (0,) ((1+2j) vs 0j)"),
    ({"mismatch": {"kind": "shape", "shape": [3], "expected_shape": [3, 1]}},
     "shape (3,) differs from the reference's (3, 1)"),
    ({"mismatch": {"kind": "incomparable", "error": "no common dtype"}},
     "cannot compare with the reference: no common dtype"),
    ({"mismatch": {"kind": "no-value"}}, "returns no value"),
    ({"tolerance": {"ulps": 4.0, "rtol": 0.0, "atol": 1.3e-13, "scale": 148.4,
                    "max_difference": 2.8e-14}},
     "agrees within 4 ulp of the reference's largest magnitude 148 (atol 1.3e-13), not bit "
     "for bit: largest difference 2.8e-14"),
    ({"mismatch": {"kind": "values", "count": 1, "total": 1, "first_index": [], "value": 2.0,
                   "expected": 1.0},
      "tolerance": {"ulps": None, "rtol": 1e-06, "atol": 0.0, "scale": None,
                    "max_difference": 1.0}},
     "differs at 1 of 1 elements, the scalar differs (2.0 vs 1.0); beyond rtol 1e-06, atol 0: "
     "largest difference 1"),
    ({"mismatch": {"kind": "values", "count": 2, "total": 5, "first_index": [2],
                   "value": 3.0, "expected": 2.0, "path": "[1]"}},
     "differs at 2 of 5 elements, first at [1], index (2,) (3.0 vs 2.0)"),
    ({"mismatch": {"kind": "values", "count": 1, "total": 5, "first_index": [],
                   "value": 3.0, "expected": 2.0, "path": "['loss']"}},
     "differs at 1 of 5 elements, first at ['loss'] (3.0 vs 2.0)"),
    ({"mismatch": {"kind": "structure", "path": "", "structure": "tuple of 2",
                   "expected_structure": "tuple of 3"}},
     "returns tuple of 2 where the reference has tuple of 3"),
    ({"mismatch": {"kind": "shape", "shape": [2], "expected_shape": [4], "path": "[1]"}},
     "shape (2,) at [1] differs from the reference's (4,)"),
    ({"dtype_differs": {"dtype": "float32", "expected": "float64", "path": "['loss']"}},
     "dtype float32 at ['loss'] vs reference float64"),
    ({"dtype_differs": {"dtype": "int8", "expected": "float64"}},
     "dtype int8 vs reference float64"),
    ({"not_compared": "reference-failed"}, "reference failed: not compared"),
    ({"not_compared": "other-inputs", "differing_inputs": ["X", "Y"]},
     "not compared: setup gave it other inputs (X, Y) than the reference; make the setup "
     "deterministic (seed its generator)"),
    ({"interrupted": True, "runs_planned": 5}, "not timed: interrupted"),
    ({"interrupted": True, "runs": 2, "runs_planned": 5}, "interrupted after 2 of 5 repeats"),
    ({"workers": 1, "workers_planned": 2}, "timed in 1 worker process"),
    ({"workers": 1, "workers_planned": 3, "interrupted": True, "runs": 2, "runs_planned": 6},
     "timed in 1 worker process; interrupted after 1 of 3 processes"),
    ({"workers": 2, "workers_planned": 2}, "timed in 2 worker processes"),
])
def test_each_field_in_words(fields, words):
    assert race_note(made(**fields)) == words


def test_clauses_join_in_order_and_note_is_the_same_words():
    c = made(mismatch={"kind": "values", "count": 1, "total": 4, "first_index": [3],
                       "value": 1, "expected": 0},
             dtype_differs={"dtype": "bool", "expected": "float64"}, writes=["Y"],
             copies=8, workers=2, workers_planned=2)
    assert race_note(c) == ("differs at 1 of 4 elements, first at index (3,) (1 vs 0); dtype "
                            "bool vs reference float64; writes its result into Y; rotated "
                            "among 8 copies of the inputs; timed in 2 worker processes")
    assert c.note == race_note(c)


def test_noisy_candidate_says_how_many_repeats_it_needs():
    needs = made(median_s=1.0, iqr_s=0.2, runs=5, repeats_needed=54)
    assert race_note(needs) == ("noisy: IQR is 20% of the median; about 54 repeats would pin "
                                "the median within ±5% (--repeats 54)")
    enough = made(median_s=1.0, iqr_s=0.12, runs=30, repeats_needed=20)
    assert race_note(enough) == ("noisy: IQR is 12% of the median, though its 30 repeats pin "
                                 "the median within ±5%")


ROOF = {"bandwidth": 1e8, "measured_at": "2026-12-02T00:00:00"}


def test_a_stale_roof_re_measured_higher():
    c = made(roof_fraction=0.8, stale_roof={**ROOF, "fraction": 25.0, "rechecked": 2.0e9,
                                            "error": None})
    assert race_note(c) == (
        "ran at 2500% of the roofline's read bandwidth (0.1 GB/s, measured "
        "2026-12-02T00:00:00) streaming from memory, so the roofline no longer holds; "
        "re-measured now: 2.0 GB/s, which the % roof uses (chokepoint roofline --refresh "
        "updates the cache)")
    still = made(roof_fraction=1.3, stale_roof={**ROOF, "fraction": None, "rechecked": 2.0e9,
                                                "error": None})
    assert race_note(still) == ("at 130% of the re-measured roof: part of its data comes "
                                "from a cache, or it moves fewer bytes than counted")


def test_a_stale_roof_not_higher_or_not_re_measured():
    lower = made(roof_fraction=3.0, stale_roof={**ROOF, "measured_at": None, "fraction": 3.0,
                                                "rechecked": 5e7, "error": None})
    assert race_note(lower).endswith("(0.1 GB/s, cached) streaming from memory, so the "
                                     "roofline no longer holds; re-measured now: 0.1 GB/s, "
                                     "no higher: the roofline is not what is wrong")
    failed = made(roof_fraction=3.0, stale_roof={**ROOF, "fraction": 3.0, "rechecked": None,
                                                 "error": "MemoryError: no room"})
    assert race_note(failed).endswith("re-measuring it failed (MemoryError: no room): the "
                                      "roofline is stale, run chokepoint roofline --refresh")


def test_to_dict_keeps_design_fields_first_and_adds_the_structured_ones():
    c = made(median_s=1e-3, agrees=False, writes=["Y"],
             mismatch={"kind": "values", "count": 1, "total": 2, "first_index": [1],
                       "value": 1.0, "expected": 2.0})
    data = json.loads(json.dumps(c.to_dict()))
    assert list(data)[:list(data).index("note")] == [
        "statement", "median_s", "iqr_s", "min_s", "runs", "loops", "relative", "ratio",
        "ratio_ci", "repeats_needed", "gbps", "roof_fraction", "agrees", "error"]
    assert data["note"] == ("differs at 1 of 2 elements, first at index (1,) (1.0 vs 2.0); "
                            "writes its result into Y")
    assert data["writes"] == ["Y"] and data["mismatch"]["first_index"] == [1]
    assert not {"inputs", "elements", "times"} & set(data)
