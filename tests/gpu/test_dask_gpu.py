"""The Dask paths on a ``LocalCUDACluster`` (one worker per GPU), against the single-GPU calls (marked ``gpu``).

Skipped without a GPU (``tests/conftest.py``) and without ``distributed``; ``dask_cuda``'s cluster where it is
installed, else ``distributed``'s (``conftest.py``).  Run on
a GPU machine with ``python -m pytest -m gpu tests/gpu/test_dask_gpu.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import assert_neighbors_up_to_ties, reference_knn
from scipy.spatial.distance import cdist
from strategies import random_graph

import semiring
from semiring import dask as dask_paths
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


@st.composite
def shard_answers(draw):
    """Shards' answers for a few rows full of ties, NaN and infinities: each shard's own best, global indices."""
    m, n = draw(st.integers(0, 5)), draw(st.integers(2, 40))
    k = draw(st.integers(1, n))
    values = draw(
        st.lists(st.sampled_from([0.0, -0.0, 1.0, 2.0, -1.0, np.nan, np.inf, -np.inf]), min_size=m * n, max_size=m * n)
    )
    D = np.array(values, dtype=draw(st.sampled_from([np.float32, np.float64]))).reshape(m, n)
    bounds = [0, *sorted(draw(st.sets(st.integers(1, n - 1), max_size=6))), n]
    largest = draw(st.booleans())
    parts = []
    for c0, c1 in itertools.pairwise(bounds):
        d, i = reference_knn(D[:, c0:c1], min(k, c1 - c0), largest=largest)
        parts.append((d.astype(D.dtype), i + c0))
    return D, k, parts, largest


@settings(max_examples=80, deadline=None)
@given(shard_answers(), st.randoms(use_true_random=False))
def test_merge_on_the_gpu_equals_one_selection_over_all(case, random):
    """The merge of a block's shard answers sorted by the GPU (a worker of the CUDA engine) gives the
    single-machine order: best first, NaN last, equal values by index, whatever order the parts arrive in."""
    D, k, parts, largest = case
    random.shuffle(parts)
    dist, ind = dask_paths.merge(parts, k, largest, backend="cuda")
    want_d, want_i = reference_knn(D, k, largest=largest)
    assert isinstance(dist, np.ndarray) and isinstance(ind, np.ndarray) and dist.dtype == D.dtype
    np.testing.assert_array_equal(ind, want_i)
    np.testing.assert_array_equal(dist, want_d.astype(D.dtype))
    host = dask_paths.merge(parts, k, largest, backend="cpu")
    np.testing.assert_array_equal(host[1], ind)


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
