"""A line computing the same value on every run of its loop (``program/invariant.py``)."""

import numpy as np
import pytest

from chokepoint.program.invariant import compared_runs
from chokepoint.program.record import input_sums
from chokepoint.report.program import cause_evidence, cause_suggestion

from ._programs import lines_of


def test_inputs_compare_by_their_values_and_nothing_else_is_comparable():
    a = np.arange(10.0)
    assert input_sums({"a": a, "k": 3, "np": np}) == input_sums({"a": a.copy(), "k": 3,
                                                                "np": np})
    b = a.copy()
    b[7] = -1.0  # one element of ten changed: seen (a checksum, not samples)
    assert input_sums({"a": a}) != input_sums({"a": b})
    assert input_sums({"a": a, "k": 3}) != input_sums({"a": a, "k": 4})
    # a generator's state, an object's attributes: not seen, so never the same
    rng = np.random.default_rng(0)
    assert input_sums({"rng": rng}) != input_sums({"rng": rng})
    f = lambda x: x  # noqa: E731 - a function read by a line
    assert input_sums({"f": f, "a": a})["a"] == input_sums({"f": f, "a": a})["a"]
    assert input_sums({"f": f, "a": a})["f"] != input_sums({"f": f, "a": a})["f"]


def test_inputs_over_the_limit_are_not_compared(monkeypatch):
    import chokepoint.program.record as record

    monkeypatch.setattr(record, "INVARIANT_BYTES", 40)
    assert input_sums({"a": np.zeros(10)}) is None


@pytest.mark.parametrize(("hits", "runs"), [(1, 0), (2, 1), (3, 1), (8, 3), (40, 5)])
def test_the_runs_compared_are_those_captured_again(hits, runs):
    assert compared_runs(hits) == runs




def test_a_line_computing_the_same_value_each_run_is_loop_invariant(tmp_path, roof):
    # unit vectors of the same rays for each of 40 spheres
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        rng = np.random.default_rng(0)
        rays = rng.standard_normal((100_000, 3))
        centres = rng.standard_normal((40, 3))
        hits = 0
        for k in range(40):
            dirs = rays / np.linalg.norm(rays, axis=1, keepdims=True)
            hits += int(np.count_nonzero(dirs @ centres[k] > 0.5))
        """)
    line = lines["7"]
    assert line["cause"] == "loop-invariant", line["causes"]
    cause = line["causes"][0]
    assert cause["entries"] == 1 and cause["seconds"] == pytest.approx(line["time_s"] * 39 / 40)


def test_a_fresh_buffer_a_draw_or_a_periodic_update_is_not_loop_invariant(tmp_path, roof):
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        rng = np.random.default_rng(0)
        x = rng.standard_normal(200_000)
        W = np.ones(200_000)
        for t in range(40):
            acc = np.zeros(200_000)
            acc += x
            noise = rng.standard_normal(200_000)
            if t % 20 == 19:
                W = W * 2.0
            y = W * x
        """)
    for number in ("6", "8", "11"):  # reset each run; a draw; W changes at runs 20 and 40
        assert not any(c["kind"] == "loop-invariant" for c in lines[number]["causes"]), \
            (number, lines[number]["causes"])


def test_a_value_read_before_it_is_computed_in_the_loop_is_not_loop_invariant(tmp_path, roof):
    # the first run of line 6 reads the scale the loop was entered with (1.0): hoisting line 7
    # would change it
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        x = np.random.default_rng(0).standard_normal(300_000)
        base, scale = 2.0, np.ones(300_000)
        total = 0.0
        for t in range(40):
            total += float((x * scale).sum())
            scale = np.full(300_000, base) * np.sqrt(base)
        """)
    assert not any(c["kind"] == "loop-invariant" for c in lines["7"]["causes"]), \
        lines["7"]["causes"]


def test_a_part_of_a_line_reading_the_same_values_each_run_is_loop_invariant(tmp_path, roof):
    # a gather of the same table by the same indices on each of 20 runs, added to what
    # changes: the gather once before the loop does the same
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        rng = np.random.default_rng(0)
        w = rng.random(200_000)
        idx = rng.integers(0, 200_000, 1_000_000).astype(np.int32)
        x = np.zeros(1_000_000)
        for k in range(20):
            x = x * 0.5 + w[idx]
        for k in range(20):
            x = x * 0.5 + w[idx]
            w[k] = w[k]
        """)
    cause = next((c for c in lines["7"]["causes"] if c["kind"] == "loop-invariant"), None)
    assert cause is not None, lines["7"]["causes"]
    assert cause["name"] == "w[idx]" and cause["part"] and cause["entries"] == 1
    assert 0.2 * lines["7"]["time_s"] < cause["seconds"] < lines["7"]["time_s"]
    # w written in the loop (to the same values here: it could be at a run not compared)
    assert not any(c["kind"] == "loop-invariant" for c in lines["9"]["causes"]), \
        lines["9"]["causes"]


def test_another_modules_array_changed_by_a_function_is_not_loop_invariant(tmp_path, roof):
    # params.W is changed by update() at every run: the module is read by name, its arrays
    # are not the same from run to run
    (tmp_path / "params.py").write_text("import numpy as np\nW = np.zeros(200_000)\n")
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        import params
        rng = np.random.default_rng(0)
        idx = rng.integers(0, 200_000, 200_000)
        def update(g):
            params.W += g
        for step in range(60):
            v = rng.random(200_000)
            pred = params.W[idx] * 2.0 + v
            update(pred.mean() * 1e-3)
        """)
    assert not any(c["kind"] == "loop-invariant" for c in lines["9"]["causes"]), \
        lines["9"]["causes"]


def test_a_scalar_part_is_not_charged_for_evaluating_it_alone(tmp_path, roof):
    # w[0] and b[0] are the same each run, 55 ns each inline: timed alone through eval they
    # took 180 ns, and the claim was the whole line
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        x = np.random.default_rng(0).random(1000)
        w, b = np.ones(4), np.zeros(4)
        total = 0.0
        for k in range(200_000):
            t = x[k % 1000] * w[0] + b[0]
            total += t
        """)
    cause = next((c for c in lines["6"]["causes"] if c["kind"] == "loop-invariant"), None)
    if cause is not None:  # a saving, not the line's whole time
        assert cause["part"] and cause["seconds"] < 0.9 * lines["6"]["time_s"], cause


def test_a_table_a_function_rebuilds_the_same_at_each_call_is_computed_once(tmp_path, roof):
    # a sampler's cumulative table, built from the same density at each of 60 calls and then
    # normalised in place: both lines compute what one call would
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        GRID = np.linspace(0.0, 1.0, 300_001)
        def sample(rng, density, n):
            table = np.cumsum(density * np.gradient(GRID))
            table /= table[-1]
            return np.searchsorted(table, rng.random(n))
        rng = np.random.default_rng(0)
        density = np.exp(-GRID)
        total = 0
        for step in range(60):
            total += int(sample(rng, density, 100).sum())
        """)
    first, update = lines["4"], lines["5"]
    cause = first["causes"][0]
    assert cause["kind"] == "loop-invariant" and cause["function"], first["causes"]
    assert cause["name"] == "table" and cause["with"] == [update["source"]]
    assert cause["seconds"] == pytest.approx(first["time_s"] * 59 / 60)
    said = cause_evidence(cause)
    assert "each call of `sample`" in said and "once would do" in said, said
    assert "outside the function" in cause_suggestion(cause, first)
    assert update["causes"][0]["kind"] == "loop-invariant" and update["causes"][0]["update"]
    # the line drawing from the generator computes something new at each call
    assert not any(c["kind"] == "loop-invariant" for c in lines["6"]["causes"])


def test_a_function_called_on_two_arrays_in_turn_is_not_computing_the_same(tmp_path, roof):
    # the runs compared are the 2nd, 4th, 8th...: all on the second array; the first run is
    # the reference, on the first one
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        rng = np.random.default_rng(0)
        a, b = rng.random(300_000), rng.random(300_000)
        def spread(x):
            centred = np.sort(x) - np.median(x)
            return float(centred.std())
        total = 0.0
        for step in range(40):
            total += spread(a) + spread(b)
        """)
    assert not any(c["kind"] == "loop-invariant" for c in lines["5"]["causes"]), \
        lines["5"]["causes"]


def test_a_line_that_only_normalises_a_loop_invariant_value_goes_with_it(tmp_path, roof):
    # before, "w /= w.sum()" writing into w made line 6 changed in the loop: not hoistable
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        grid = np.linspace(0.0, 5.0, 400_000)
        data = np.random.default_rng(0).random((40, 400_000))
        acc = 0.0
        for k in range(40):
            w = np.exp(-grid * grid)
            w /= w.sum()
            acc += float(w @ data[k])
        """)
    cause = lines["6"]["causes"][0]
    assert cause["kind"] == "loop-invariant" and not cause["function"], lines["6"]["causes"]
    assert cause["with"] == [lines["7"]["source"]] and cause["entries"] == 1
    assert lines["7"]["causes"][0]["update"]
    assert not any(c["kind"] == "loop-invariant" for c in lines["8"]["causes"])


def test_what_goes_with_a_loop_invariant_line_or_a_functions_line_is_never_changed(
        tmp_path, roof):
    (tmp_path / "table.npy").write_bytes(b"")
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        grid = np.linspace(0.0, 5.0, 300_000)
        acc = 0.0
        for k in range(40):
            w = np.exp(-grid * grid)
            acc += float(w[k])  # reads w before the update below
            w /= w.sum()
        def f(k):
            p = np.ones(300_000)
            cdf = np.cumsum(p)
            p[0] = k  # changes what the update reads
            cdf /= p.sum()
            return cdf[-1]
        def window(n):
            w = np.cos(np.linspace(0.0, 3.0, n))
            return w  # handed to the caller, who changes it
        def load(path):
            return np.load(path).sum()  # the file is written again between calls
        for k in range(40):
            acc += f(k)
            win = window(300_000)
            win *= k
            np.save("table.npy", np.full(100_000, float(k % 3)))
            acc += load("table.npy")
        """)
    # the whole line computed once: never (a part of line 5, -grid * grid, is the same each run)
    for number in ("5", "7", "10", "12", "15", "18"):
        assert not any(c["kind"] == "loop-invariant" and not c["part"]
                       for c in lines[number]["causes"]), (number, lines[number]["causes"])


def test_a_strided_inputs_checksum_copies_a_chunk_at_a_time():
    # a copy of all of a strided input grew the process's peak before a line's first run:
    # an allocation the line did not make
    import tracemalloc

    a = np.random.default_rng(0).random((1000, 2000))[:, ::2]  # 8 MB, strided
    tracemalloc.start()
    try:
        sums = input_sums({"a": a})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20, peak
    assert sums == input_sums({"a": np.ascontiguousarray(a)})


def test_a_table_a_function_returns_to_callers_that_only_read_it_is_computed_once(
        tmp_path, roof):
    # a DCT's basis rebuilt for each 8 x 8 block; its callers only multiply by it
    lines = lines_of(tmp_path, roof, """\
        import numpy as np
        def basis(n):
            k, i = np.arange(n)[:, None], np.arange(n)[None, :]
            C = np.sqrt(2.0 / n) * np.cos(np.pi * (2 * i + 1) * k / (2 * n))
            C[0, :] = np.sqrt(1.0 / n)
            return C
        def forward(block):
            C = basis(block.shape[0])
            return C @ block @ C.T
        image = np.random.default_rng(0).random((256, 256))
        total = 0.0
        for r in range(0, 256, 8):
            for c in range(0, 256, 8):
                total += float(forward(image[r:r + 8, c:c + 8])[0, 0])
        """)
    cause = lines["4"]["causes"][0]
    assert cause["kind"] == "loop-invariant" and cause["function"], lines["4"]["causes"]
    assert cause["with"] == [lines["5"]["source"]]
