"""The tracer records operations; the model counts their bytes."""

import numpy as np
import pytest

from chokepoint.explain.model import build_model, narrowest_dtype
from chokepoint.explain.trace import trace


def _trace(statement, **arrays):
    return trace(statement, {"np": np, **arrays}, list(arrays))


def test_chain_of_ufuncs_is_recorded_with_bytes():
    X = np.ones((100, 10))
    tr = _trace("np.ceil(np.clip(X, 0, 1))", X=X)
    assert [op.text for op in tr.ops] == ["t1 = np.clip(X, 0, 1)", "t2 = np.ceil(t1)"]
    assert all(op.allocates and op.in_bytes == X.nbytes == op.out_bytes for op in tr.ops)
    model = build_model(tr, {"X": X})
    assert model.passes == 2
    assert model.bytes_moved == 4 * X.nbytes
    assert model.temporaries == X.nbytes
    assert model.narrow_dtype == np.dtype(bool)
    assert model.bytes_min == X.nbytes + X.size


def test_a_new_array_like_another_keeps_the_dtype_asked_for():
    # a counter the next lines fill with 0..8: zeros now, but not a bool
    grid = np.ones((50, 50), np.int64)
    model = build_model(_trace("np.zeros_like(grid)", grid=grid), {"grid": grid})
    assert model.narrow_dtype == np.dtype(np.int64)


def test_views_are_free_and_methods_operators_indexing_traced():
    X = np.arange(20.0).reshape(4, 5)
    tr = _trace("(X.T[::2] >= 3).view('i1')", X=X)
    names = [op.name for op in tr.ops]
    assert names == ["ndarray.T", "getitem", "greater_equal", "ndarray.view"]
    views = [op for op in tr.ops if op.is_view]
    assert len(views) == 3 and all(op.in_bytes == op.out_bytes == 0 for op in views)
    assert tr.ops[1].text == "t2 = t1[::2]"


def test_out_argument_is_not_an_allocation():
    X, Y = np.ones(10), np.empty(10)
    tr = _trace("np.add(X, 1, out=Y)", X=X, Y=Y)
    assert not tr.ops[0].allocates


def test_untraced_code_is_one_opaque_operation():
    ne = pytest.importorskip("numexpr", reason="numexpr stands for untraced code")
    X = np.ones(1000)
    tr = trace("ne.evaluate('X >= 0')", {"ne": ne, "X": X}, ["X"])
    assert [op.name for op in tr.ops] == ["opaque"]
    assert tr.ops[0].in_bytes == X.nbytes and tr.ops[0].out_bytes == X.size


@pytest.mark.parametrize(("values", "expected"), [
    (np.array([0.0, 1.0, 1.0]), bool),
    (np.array([0, 1], np.int64), bool),
    (np.array([-3.0, 100.0]), np.int8),
    (np.array([0.5, 0.25]), np.float16),
    (np.array([0.1]), np.float64),
    (np.array([np.nan, 1.5]), np.float16),
    (np.array([70000.0]), np.int32),
    (np.array([-0.0, 1.0, 0.0]), bool),
    (np.array([0.0, 0.5, 1.0]), np.float16),
    (np.array([np.inf, 1.0]), np.float16),
    (np.array([np.nan, 0.0, 1.0]), np.float16),
])
def test_narrowest_dtype(values, expected):
    assert narrowest_dtype(values) == np.dtype(expected)


def test_flops_of_matrix_products_and_factorisations():
    from chokepoint.explain.trace import flops_of

    a, b = np.ones((4, 5)), np.ones((5, 6))
    product = a @ b
    assert flops_of("matmul", (a, b), product) == 2 * 4 * 5 * 6
    assert flops_of("ndarray.dot", (a, b), product) == 2 * 4 * 5 * 6
    assert flops_of("einsum", ("ij,jk->ik", a, b), product) == 2 * 4 * 5 * 6
    assert flops_of("tensordot", (a, b), product) == 2 * 4 * 5 * 6
    batch = np.ones((3, 4, 5))
    assert flops_of("matmul", (batch, b), batch @ b) == 3 * 2 * 4 * 5 * 6
    square = np.eye(10)
    assert flops_of("solve", (square, np.ones(10)), None) == int(2 * 10**3 / 3 + 2 * 10 * 10)
    assert flops_of("add", (a, a), a + a) == a.size
    assert flops_of("sin", (a,), np.sin(a)) == 0  # transcendental: not counted


def test_matmul_is_recorded_with_its_flops_and_judged_as_a_matrix_product():
    A, B = np.ones((30, 40)), np.ones((40, 50))
    tr = _trace("A @ B + 1", A=A, B=B)
    assert [op.name for op in tr.ops] == ["matmul", "add"]
    assert tr.ops[0].flops == 2 * 30 * 40 * 50 and tr.ops[0].gemm
    assert tr.ops[1].flops == 30 * 50 and not tr.ops[1].gemm


def _user_step(X, G):
    hidden = np.maximum(0, X)  # line A
    G[hidden <= 0] = 0  # line B
    return G


def test_operations_carry_the_users_file_line_and_names():
    import inspect

    rng = np.random.default_rng(0)
    X, G = rng.standard_normal(100), rng.standard_normal(100)
    tr = trace("_user_step(X, G)", {"np": np, "_user_step": _user_step, "X": X, "G": G},
               ["X", "G"])
    _lines, first = inspect.getsourcelines(_user_step)
    by_text = {op.text: op for op in tr.ops}
    assert set(by_text) == {"t1 = np.maximum(0, X)", "t2 = np.less_equal(hidden, 0)",
                            "G[t2] = 0"}
    assert by_text["t1 = np.maximum(0, X)"].line == first + 1
    assert by_text["G[t2] = 0"].line == first + 2
    assert all(op.filename == __file__ and op.function == "_user_step" for op in tr.ops)
    assert by_text["G[t2] = 0"].source == f"{__file__}:{first + 2}"


def test_statements_and_cells_are_traced_with_their_lines():
    from chokepoint.measure.statements import Statement

    X = np.random.default_rng(0).standard_normal(50)
    cell = Statement.parse("Y = X * 2.0\nY[X < 0] = 0\n", filename="<cell>")
    tr = trace(cell, {"np": np, "X": X}, ["X"])
    assert [(op.text, op.source) for op in tr.ops] == [
        ("t1 = np.multiply(X, 2.0)", "<cell>:1"), ("t2 = np.less(X, 0)", "<cell>:2"),
        ("Y[t2] = 0", "<cell>:2")]


def test_mask_indexing_bytes_are_modelled():
    X = np.random.default_rng(0).standard_normal(1000)
    mask = X > 0
    selected = int(mask.sum())
    tr = _trace("X[M]", X=X, M=mask)
    read = tr.ops[0]
    assert (read.in_bytes, read.out_bytes) == (mask.nbytes + X.nbytes, 8 * selected)
    tr = _trace("np.put(X, [0], 0) or X.__setitem__(M, 0.0)", X=X.copy(), M=mask)
    assign = next(op for op in tr.ops if op.name == "setitem")
    assert (assign.in_bytes, assign.out_bytes) == (mask.nbytes, 8 * selected)
    assert assign.before is not None  # the target as it was, for the line's rewrite


@pytest.mark.parametrize("statement", ["np.sort(X)", "np.argsort(X, kind='stable')",
                                       "np.partition(X, 10)", "np.fft.fft(X)",
                                       "np.take(X, P)", "np.roll(X, 3)"])
def test_whole_array_operations_get_no_elementwise_probes(statement):
    """A sort keeps its input's shape but is not elementwise: on a cache-sized part it is a
    shorter sort, on sorted or constant values an easier one. Those probes would measure
    another computation (np.sort of random data 10x faster "with constant inputs" read as
    data-dependent, argsort's compute time carved out as a wide output), so none applies."""
    from chokepoint.explain.probes import ProbeSettings, probe_op

    rng = np.random.default_rng(0)
    X, P = rng.standard_normal(2**18), rng.permutation(2**18)
    tr = _trace(statement, X=X, P=P) if "P" in statement else _trace(statement, X=X)
    op = next(op for op in tr.ops if not op.is_view)
    settings = ProbeSettings(min_time=1e-4, repeats=3)
    _, probes = probe_op(op, settings)
    names = {p.name for p in probes}
    assert not names & {"cache", "constant", "sorted", "subnormal", "tiny", "threads"}, names


def test_elementwise_functions_keep_their_probes():
    from chokepoint.explain.probes import ProbeSettings, probe_op

    X = np.random.default_rng(0).standard_normal(2**18)
    for statement in ("np.where(X > 0, X, 0)", "np.clip(X, -1, 1)", "np.cumsum(X)"):
        tr = _trace(statement, X=X)
        op = tr.ops[-1]
        _, probes = probe_op(op, ProbeSettings(min_time=1e-4, repeats=3))
        assert {"cache", "constant"} <= {p.name for p in probes}, statement


def _diffuse(u, steps=3, alpha=0.1):
    u = u.copy()
    for _ in range(steps):
        lap = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
               - 4 * u[1:-1, 1:-1])
        u[1:-1, 1:-1] += alpha * lap
    return u


def test_one_pass_of_a_stencil_loop_is_one_read_and_one_write_of_the_grid_per_step():
    """Three steps of a 5-point stencil: u is read through five shifted slices and rewritten
    each step, with six temporaries in between. One pass per step reads u once and writes its
    interior once (the temporaries stay in registers, the slice's assignment to itself too);
    one pass over the program's input and result (the old count) cannot be reached by any
    program that does these steps, and priced every step's own traffic as extra."""
    u = np.random.default_rng(0).random((64, 64))
    tr = trace("_diffuse(u)", {"np": np, "_diffuse": _diffuse, "u": u}, ["u"])
    model = build_model(tr, {"u": u})
    interior = 62 * 62 * 8
    # the copy reads u and writes it; then per step: u read once, its interior written once
    assert model.bytes_one_pass == 2 * u.nbytes + 3 * (u.nbytes + interior)
    assert model.bytes_inputs + model.result_bytes < model.bytes_one_pass < model.bytes_moved
    assert len(model.op_needed) == len(tr.ops)
    temporaries = [n for op, n in zip(tr.ops, model.op_needed, strict=True)
                   if not op.is_view and op.name in ("add", "subtract", "multiply")
                   and op.kwargs.get("out") is None and n]
    assert len(temporaries) == 3  # the first sum of each step reads u: the rest is extra


def test_one_pass_of_an_expression_is_its_inputs_and_result():
    X = np.random.default_rng(0).standard_normal(1000)
    tr = _trace("np.ceil(np.clip(X, 0, 1))", X=X)
    model = build_model(tr, {"X": X})
    assert model.bytes_one_pass == model.bytes_inputs + model.result_bytes == 2 * X.nbytes


def test_a_value_read_after_a_matrix_product_is_written_once():
    """z is read element by element, but after a matrix product: a fused loop ends at the
    product, so z must reach memory, and its later read counts."""
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((32, 16)), rng.standard_normal((16, 16))
    tr = _trace("z = X + 1.0\na = z @ W\nr = np.where(z > 0, a, 0)", X=X, W=W)
    needed = dict(zip((op.text for op in tr.ops), build_model(tr, {"X": X, "W": W}).op_needed,
                      strict=True))
    assert needed["t1 = np.add(X, 1.0)"] == X.nbytes + X.nbytes  # X read, z written
    assert needed["t3 = np.greater(z, 0)"] == X.nbytes  # z read again after the product


def test_indexing_one_element_or_a_row_reads_what_it_selects_not_the_whole_array():
    import numpy as np

    from chokepoint.explain.model import build_model
    from chokepoint.explain.trace import trace

    a = np.ones((1000, 1000))
    tr = trace("a[3, 4] + a[5].sum()", {"a": a, "np": np}, ["a"])
    model = build_model(tr, {"a": a})
    assert model.bytes_inputs <= 8 + 8000  # one element and one row, not 8 MB
    scalar = next(op for op in tr.ops if op.name == "getitem" and not op.is_view)
    assert scalar.in_bytes == 8


def test_a_large_elementwise_operation_is_probed_on_its_first_rows():
    from chokepoint.explain.probes import subset

    X = np.random.default_rng(0).standard_normal((1000, 50))
    Y = np.ones((1000, 50))
    add, = _trace("np.multiply(X, Y) + 1.0", X=X, Y=Y).ops[:1]
    # the working set is X, Y and the result: a tenth of it is 100 rows
    part, share = subset(add, limit=3 * X.nbytes // 10)
    assert share == pytest.approx(0.1) and part.result_array.shape == (100, 50)
    assert part.args[0].base is X and part.args[1].base is Y
    assert part.in_bytes == round(add.in_bytes * 0.1) and part.seconds == add.seconds * 0.1
    assert np.array_equal(part.func(*part.args, **part.kwargs), part.result_array)
    assert subset(add, limit=3 * X.nbytes // 2) == (add, 1.0)  # not twice the limit: whole
    # a fresh result of at least a fifth of the rows' bytes
    assert subset(add, limit=3 * X.nbytes // 10, fresh=X.nbytes // 5)[1] == pytest.approx(0.2)
    inplace = np.multiply(X, Y)
    square, = _trace("np.multiply(Z, Z, out=Z)", Z=inplace).ops
    # in place, the working set is the result alone: a tenth of it is 100 rows
    assert subset(square, limit=X.nbytes // 10)[1] == pytest.approx(0.1)
    total, = _trace("X.sum()", X=X).ops
    assert subset(total, limit=100) == (total, 1.0)  # not elementwise: whole


def test_arrays_the_users_code_makes_are_traced_too(tmp_path, monkeypatch):
    # a function that makes its own arrays (a mandelbrot's grid): its operations are seen
    (tmp_path / "grid.py").write_text(
        "import numpy as np\n"
        "def f(n):\n"
        "    x = np.linspace(0.0, 1.0, n)\n"
        "    z = np.zeros_like(x)\n"
        "    return np.sqrt(x * x + z + 1.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from grid import f

    linspace = np.linspace
    tr = trace("f(1000)", {"f": f}, [])
    names = [op.name for op in tr.ops]
    assert names[0] == "linspace" and "zeros_like" in names and names[-1] == "sqrt"
    assert all(op.kind != "opaque" for op in tr.ops)
    assert np.array_equal(tr.result, f(1000))
    assert np.linspace is linspace  # put back: NumPy's own function again


def test_arrays_a_library_makes_stay_plain():
    import os

    from chokepoint.explain.trace import CREATIONS, Traced, Tracer, _creations_traced
    from chokepoint.measure.statements import Statement

    # code in NumPy's (or any library's) files gets NumPy's own arrays during a trace
    library = compile("np.zeros(3)", os.path.join(os.path.dirname(np.__file__), "fake.py"),
                      "eval")
    mine = compile("np.zeros(3)", "<statement>", "eval")
    tracer = Tracer()
    before = [getattr(np, name) for name in CREATIONS]
    with _creations_traced(tracer, Statement.parse("np.zeros(3)")):
        assert not isinstance(eval(library, {"np": np}), Traced)
        assert isinstance(eval(mine, {"np": np}), Traced)
    assert [op.name for op in tracer.trace.ops] == ["zeros"]
    assert [getattr(np, name) for name in CREATIONS] == before


def test_an_array_made_from_no_array_keeps_the_dtype_asked_for():
    # np.ones(n) holds only ones, which fit in bool: not a "wide output", the user's choice
    tr = trace("np.ones(1000)", {"np": np}, [])
    assert [op.name for op in tr.ops] == ["ones"]
    assert build_model(tr, {}).narrow_dtype == np.dtype(np.float64)
    # made from an input, the values still count
    X = np.arange(1000.0)
    assert build_model(_trace("X > 500", X=X), {"X": X}).narrow_dtype == np.dtype(bool)


def test_one_pass_of_a_masked_update_reads_each_array_once():
    """``z[alive] = z[alive] ** 2 + c[alive]`` is one loop under the mask: z, c and the mask
    read once, the selected elements of z written once (a Mandelbrot step). Its gathers as
    passes of their own priced its floor at the line's whole time."""
    rng = np.random.default_rng(0)
    n = 10_000
    z, c = rng.standard_normal(n) + 0j, rng.standard_normal(n) + 1j
    alive = rng.random(n) < 0.7
    tr = _trace("z[alive] = z[alive] ** 2 + c[alive]", z=z, c=c, alive=alive)
    model = build_model(tr, {"z": z, "c": c, "alive": alive})
    selected = int(alive.sum()) * z.itemsize
    assert model.bytes_one_pass == z.nbytes + c.nbytes + alive.nbytes + selected
    assert model.bytes_one_pass < model.bytes_moved / 2
