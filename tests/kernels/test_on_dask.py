"""dask arrays: lazy, blockwise, masks per block, and on a 2-worker distributed cluster."""

import numpy as np
import pytest

import chokepoint

from . import reference as ref

da = pytest.importorskip("dask.array", reason="dask is an optional dependency")


@pytest.fixture
def arrays():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 200))
    x[::17, ::13] = 0.0
    g = rng.standard_normal((600, 200))
    return x, g, da.from_array(x, chunks=(150, 100)), da.from_array(g, chunks=(150, 100))


def test_lazy_results_match_numpy(arrays):
    x, g, dx, dg = arrays
    cases = [
        (chokepoint.relu(dx), chokepoint.relu(x)),
        (chokepoint.relu_grad(dx, at_zero=1, dtype=np.float32),
         chokepoint.relu_grad(x, at_zero=1, dtype=np.float32)),
        (chokepoint.leaky_relu(dx, 0.3), chokepoint.leaky_relu(x, 0.3)),
        (chokepoint.hardtanh(dx, -0.5, 0.5), chokepoint.hardtanh(x, -0.5, 0.5)),
        (chokepoint.relu6(dx), chokepoint.relu6(x)),
        (chokepoint.relu_backward(dg, dx), chokepoint.relu_backward(g, x)),
        (chokepoint.leaky_relu_backward(dg, dx, 0.3), chokepoint.leaky_relu_backward(g, x, 0.3)),
        (chokepoint.hardtanh_backward(dg, dx), chokepoint.hardtanh_backward(g, x)),
        (chokepoint.relu6_backward(dg, dx), chokepoint.relu6_backward(g, x)),
    ]
    for lazy, expected in cases:
        assert isinstance(lazy, da.Array)
        assert lazy.chunks == dx.chunks  # no rechunking when chunks agree
        assert ref.same(lazy.compute(), expected)


def test_mask_chunk_by_chunk(arrays):
    x, g, dx, dg = arrays
    y, mask = chokepoint.relu_with_mask(dx, at_zero=1)
    assert mask.blocks.shape == dx.numblocks and mask.shape == x.shape
    import dask

    yv, back = dask.compute(y, chokepoint.relu_backward(dg, mask))
    assert ref.same(yv, chokepoint.relu(x))
    assert ref.same(back, chokepoint.relu_backward(g, x, at_zero=1))
    assert np.array_equal(mask.unpack(bool).compute(), x >= 0)
    assert mask.nbytes == sum((150 * 100 + 7) // 8 for _ in range(8))


def test_differing_chunks_are_aligned(arrays):
    x, g, dx, dg = arrays
    result = chokepoint.relu_backward(dg, dx.rechunk((200, 50)))
    assert result.chunks == dg.chunks
    assert ref.same(result.compute(), chokepoint.relu_backward(g, x))


def test_errors(arrays):
    x, _, dx, dg = arrays
    with pytest.raises(TypeError, match="different libraries"):
        chokepoint.relu_backward(dg, x)
    with pytest.raises(TypeError, match="immutable"):
        chokepoint.relu(dx, out=dx)
    with pytest.raises(TypeError, match="dtype"):
        chokepoint.relu(dx.astype(np.complex128))
    with pytest.raises(ValueError, match="shape"):
        chokepoint.relu_backward(dg[:10], dx)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed", reason="dask.distributed is optional")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _kernel_cache_events():
    from chokepoint.kernels import engine_numba

    return {f"{name}/{mode}": (sum(k.stats.cache_hits.values()),
                               sum(k.stats.cache_misses.values()), len(k.signatures))
            for (name, mode), k in engine_numba._kernels.items()}


def test_on_a_distributed_cluster_without_recompiling(client):
    # 16 blocks large enough for the parallel kernels, so each worker runs several tasks;
    # the data is generated on the workers
    rng = da.random.default_rng(0)
    dx = rng.standard_normal((36000, 200), chunks=(2250, 200)).persist()
    dg = rng.standard_normal((36000, 200), chunks=(2250, 200)).persist()
    big_x, big_g = client.compute([dx, dg], sync=True)
    y, mask = chokepoint.relu_with_mask(dx)
    result, yv = client.compute([chokepoint.relu_backward(dg, mask), y], sync=True)
    assert ref.same(result, chokepoint.relu_backward(big_g, big_x))
    assert ref.same(yv, chokepoint.relu(big_x))
    direct = client.compute(chokepoint.relu_backward(dg, dx), sync=True)
    assert ref.same(direct, chokepoint.relu_backward(big_g, big_x))
    per_worker = client.run(_kernel_cache_events)
    assert len(per_worker) == 2
    for events in per_worker.values():
        assert events, "the worker ran no chokepoint kernel"
        for name, (hits, misses, signatures) in events.items():
            # each signature is compiled or loaded once per worker process, not per task
            assert hits + misses <= signatures, (name, hits, misses, signatures)


def test_a_fused_function_on_a_distributed_cluster(client):
    # issue 11: fused code on dask arrays runs block by block on the workers (the function
    # travels to them by pickle, its traces and kernels are rebuilt there)
    rng = da.random.default_rng(1)
    da_ = rng.standard_normal((20000, 50), chunks=(5000, 50)).persist()
    db_ = rng.standard_normal((20000, 50), chunks=(5000, 50)).persist()
    f = chokepoint.fuse("np.exp(a) * 0.5 + np.where(b > 0, b, 2 * a)")
    a, b = client.compute([da_, db_], sync=True)
    got = client.compute(f(a=da_, b=db_), sync=True)
    assert np.array_equal(got, f(a=a, b=b))  # the workers' kernels are this process's
    terms = (np.exp(a) * 0.5, np.where(b > 0, b, 2 * a))  # a sum can cancel: ulps of the terms
    tol = 4 * np.finfo(np.float64).eps * (np.abs(terms[0]) + np.abs(terms[1]))
    assert (np.abs(got - (terms[0] + terms[1])) <= tol).all()
