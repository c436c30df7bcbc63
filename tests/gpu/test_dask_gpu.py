"""The Dask paths on a ``LocalCUDACluster`` (one worker per GPU), against the single-GPU calls (marked ``gpu``).

Skipped without a GPU (``tests/conftest.py``) and without ``distributed``; ``dask_cuda``'s cluster where it is
installed, else ``distributed``'s (``conftest.py``).  Run on
a GPU machine with ``python -m pytest -m gpu tests/gpu/test_dask_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import assert_neighbors_up_to_ties
from scipy.spatial.distance import cdist
from strategies import random_graph

import semiring
from semiring import graph
from semiring.distances import NearestNeighbors, pairwise_distances

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


def blocks(A, rows):
    return da.from_array(A, chunks=(rows, -1), asarray=False)


def data(m, n, seed):
    X = sp.random(m, n, density=0.2, format="csr", random_state=seed)
    X.data = np.random.default_rng(seed).uniform(0.5, 2.0, X.nnz)
    return X


def test_cupy_blocks_stay_on_the_gpu(client):
    import cupy
    import cupyx.scipy.sparse as csp

    X = data(300, 40, 0)
    dX = blocks(csp.csr_matrix(X), 110)
    C = semiring.pairwise(dX, None, semiring.plus_times, backend="cuda")
    assert isinstance(C._meta, cupy.ndarray)
    got = C.compute()
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(got.get(), semiring.pairwise(X, None, semiring.plus_times, backend="cuda"), rtol=1e-12)
    D = pairwise_distances(blocks(X, 90), metric="cosine", backend="cuda").compute()
    np.testing.assert_allclose(D, pairwise_distances(X, metric="cosine", backend="cuda"), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("metric", ["cosine", "inner_product"])
def test_kneighbors_on_gpu_shards(client, metric):
    X, Q = data(900, 60, 1), data(200, 60, 2)
    nn = NearestNeighbors(n_neighbors=10, metric=metric, backend="cuda").fit(blocks(X, 250))
    one = NearestNeighbors(n_neighbors=10, metric=metric, backend="cuda").fit(X)
    largest = metric == "inner_product"
    for queries, Qd, exclude in ((None, X, True), (blocks(Q, 64), Q, False)):
        dist, ind = dask.compute(*nn.kneighbors(queries))
        want_d, _ = one.kneighbors(None if queries is None else Q)
        np.testing.assert_allclose(dist, want_d, rtol=1e-9, atol=1e-12)
        D = Qd.toarray() @ X.toarray().T if largest else cdist(Qd.toarray(), X.toarray(), metric)
        assert_neighbors_up_to_ties(dist, ind, D, 10, largest=largest, exclude_self=exclude, rtol=1e-9, atol=1e-12)


def test_radius_neighbors_on_gpu_shards(client):
    X, Q = data(900, 60, 1), data(200, 60, 2)
    nn = NearestNeighbors(radius=0.5, metric="cosine", backend="cuda").fit(blocks(X, 250))
    one = NearestNeighbors(radius=0.5, metric="cosine", backend="cuda").fit(X)
    for queries, Qd in ((None, X), (blocks(Q, 64), Q)):
        got = nn.radius_neighbors_graph(queries, mode="distance", sort_results=True)
        want = one.radius_neighbors_graph(None if queries is None else Q, mode="distance", sort_results=True)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-9, atol=1e-12)
        D = cdist(Qd.toarray(), X.toarray(), "cosine")
        if queries is None:
            np.fill_diagonal(D, np.inf)
        far_from_edge = np.abs(D - 0.5) > 1e-9  # pairs at the radius itself: rounding decides
        stored = sp.csr_matrix((np.ones(got.nnz), got.indices, got.indptr), shape=got.shape).toarray() != 0
        np.testing.assert_array_equal(stored[far_from_edge], (D <= 0.5)[far_from_edge])


def test_graph_measures_on_gpu_workers(client):
    A = random_graph(3000, 20000, seed=3)
    dA = blocks(A, 700)
    assert graph.triangle_count(dA, backend="cuda") == graph.triangle_count(A, backend="cuda")
    cn, want = graph.common_neighbors(dA, backend="cuda"), graph.common_neighbors(A, backend="cuda")
    np.testing.assert_array_equal(cn.indices, want.indices)
    np.testing.assert_array_equal(cn.data, want.data)
    J, want = graph.jaccard(dA, backend="cuda"), graph.jaccard(A, backend="cuda")
    np.testing.assert_array_equal(J.indices, want.indices)
    np.testing.assert_allclose(J.data, want.data, rtol=1e-12)
    np.testing.assert_array_equal(graph.triangle_count(dA, "vertex", backend="cuda"), graph.triangle_count(A, "vertex"))
