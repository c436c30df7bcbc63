"""Graph measures on GPU workers whose results stay there (``compute=False``, ``as_frame=True``) and the
triangle counts reduced there, on a ``LocalCUDACluster`` (one worker per GPU), against the single-GPU calls and
networkx (marked ``gpu``).

Skipped without a GPU (``tests/conftest.py``) and without ``distributed``; ``dask_cuda``'s cluster where it is
installed, else ``distributed``'s (``conftest.py``).  Run on a GPU machine with
``python -m pytest -m gpu tests/gpu/test_dask_graph_gpu.py``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from strategies import random_graph, star_graph, weighted_graph

from semiring import graph

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


def blocks(A, rows):
    return da.from_array(A, chunks=(rows, -1), asarray=False)


def one_edge(n: int = 9) -> sp.csr_matrix:
    return sp.csr_matrix((np.ones(2), ([3, 7], [7, 3])), shape=(n, n))


GRAPHS = {
    "random": lambda: random_graph(3000, 20000, seed=3),  # isolated vertices, a few hubs
    "hub": lambda: star_graph(500, 2000, seed=5),
    "one edge": one_edge,
}

PER_EDGE = {
    "jaccard": graph.jaccard,
    "sorensen": graph.sorensen,
    "cosine": graph.cosine,
    "scan_similarity": graph.scan_similarity,
    "common_neighbors": graph.common_neighbors,
    "triangles per edge": lambda A, **kw: graph.triangle_count(A, "edge", **kw),
}


def assert_held_by_workers(client, result, nblocks: int) -> None:
    futures = distributed.futures_of(result)
    assert len(futures) == nblocks
    distributed.wait(futures)
    holders = client.who_has(futures)
    assert all(holders[f.key] for f in futures), "a block is held by no worker"


@pytest.mark.parametrize("case", GRAPHS)
def test_kept_per_edge_results_on_gpu_workers(client, case):
    A = GRAPHS[case]()
    dA = blocks(A, -(-A.shape[0] // 4))
    held = graph.hold(dA)
    for name, call in PER_EDGE.items():
        kept = call(held, backend="cuda", compute=False)
        assert isinstance(kept, da.Array) and kept.shape == A.shape, name
        assert_held_by_workers(client, kept, dA.numblocks[0])
        got, want = kept.compute(), call(A, backend="cuda")
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.data, want.data)  # the same computation on each worker: to the last bit
    G = nx.from_scipy_sparse_array(A)
    per_vertex = nx.triangles(G)
    assert graph.triangle_count(dA, backend="cuda") == sum(per_vertex.values()) // 3
    np.testing.assert_array_equal(
        graph.triangle_count(dA, "vertex", backend="cuda"), [per_vertex[v] for v in range(A.shape[0])]
    )


@pytest.mark.parametrize("name", ["jaccard", "cosine"])
def test_kept_weighted_and_neighbour_weighted_similarities_on_gpu_workers(client, name):
    """The masked-product similarities (weighted, and Adamic-Adar's neighbour weights) kept on the workers
    equal one GPU's to the last bit; the weighted ones within float64 rounding of SciPy's sums."""
    W = weighted_graph(400, 3000, seed=12)
    dW = blocks(W, 90)
    held = graph.hold(dW, weighted=True)
    call = getattr(graph, name)
    kept = call(held, weighted=True, backend="cuda", compute=False)
    assert_held_by_workers(client, kept, dW.numblocks[0])
    got, want = kept.compute(), call(W, weighted=True, backend="cuda")
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)
    if name == "jaccard":  # sum of the minima over the sum of the maxima of the two rows, in float64
        D = W.toarray()
        u, v = W.nonzero()
        ref = np.minimum(D[u], D[v]).sum(axis=1) / np.maximum(D[u], D[v]).sum(axis=1)
        np.testing.assert_allclose(got.tocsr()[u, v].A1, ref, rtol=1e-12)
    A = random_graph(2000, 12000, seed=4)
    dA = blocks(A, 500)
    kept = graph.adamic_adar_index(dA, backend="cuda", compute=False)
    np.testing.assert_array_equal(kept.compute().data, graph.adamic_adar_index(A, backend="cuda").data)


def test_kept_cupy_blocks_stay_on_the_gpu(client):
    import cupyx.scipy.sparse as csp

    A = random_graph(3000, 20000, seed=3)
    dA = blocks(csp.csr_matrix(A), 700)
    kept = graph.jaccard(dA, backend="cuda", compute=False)
    assert isinstance(kept._meta, csp.spmatrix)
    assert_held_by_workers(client, kept, dA.numblocks[0])
    got = kept.compute().tocsr()  # CuPy's vstack, which Dask calls to stack the blocks, gives COO
    assert isinstance(got, csp.csr_matrix)
    want = graph.jaccard(csp.csr_matrix(A), backend="cuda")
    np.testing.assert_array_equal(got.indices.get(), want.indices.get())
    np.testing.assert_array_equal(got.data.get(), want.data.get())


def test_kept_frames_on_gpu_workers(client):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")  # needs pyarrow
    A = star_graph(500, 2000, seed=5)
    dA = blocks(A, 130)
    frame = graph.jaccard(dA, as_frame=True, backend="cuda", compute=False)
    assert isinstance(frame, dd.DataFrame) and frame.npartitions == dA.numblocks[0]
    assert_held_by_workers(client, frame, dA.numblocks[0])
    want = graph.jaccard(A, as_frame=True, backend="cuda")
    pd.testing.assert_frame_equal(frame.compute(), want, check_exact=True)
    G = nx.from_scipy_sparse_array(A)
    for u, v, p in nx.jaccard_coefficient(G, list(G.edges())[:200]):
        row = want[(want["first"] == min(u, v)) & (want["second"] == max(u, v))]
        assert row["jaccard_coeff"].item() == pytest.approx(p, rel=1e-12)
