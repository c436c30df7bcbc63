"""The scikit-learn and SciPy parity features on the GPU engine: radius queries, mask=, w= and the new measures
(marked ``gpu``).

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_parity_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import oracle
from scipy.spatial.distance import cdist

from semiring import distances

NEW_MEASURES = ["rogerstanimoto", "sokalsneath", "yule", "seuclidean", "kl_divergence"]


@pytest.mark.parametrize("metric, radius", [("euclidean", 0.9), ("cosine", 0.4), ("inner_product", 0.3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_radius_neighbors_match_the_cpu_engine(metric, radius, dtype):
    X = sp.random(500, 12, density=0.3, format="csr", random_state=1, dtype=dtype)
    Q = sp.random(40, 12, density=0.3, format="csr", random_state=2, dtype=dtype)
    for query in (Q, None):
        for tiny in (None, 0.05):  # tiles across rows and columns of the index
            got = distances.NearestNeighbors(metric=metric, radius=radius, backend="cuda", working_memory=tiny)
            want = distances.NearestNeighbors(metric=metric, radius=radius, backend="cpu")
            G = got.fit(X).radius_neighbors_graph(query, mode="distance")
            W = want.fit(X).radius_neighbors_graph(query, mode="distance")
            assert W.nnz > 0
            np.testing.assert_array_equal(G.indptr, W.indptr)
            np.testing.assert_array_equal(G.indices, W.indices)
            np.testing.assert_allclose(G.data, W.data, rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-6)


@pytest.mark.parametrize("metric", ["euclidean", "correlation", "braycurtis", "jensenshannon"])
def test_mask_on_the_gpu(metric):
    X = abs(sp.random(30, 8, density=0.5, format="csr", random_state=3))
    Y = abs(sp.random(20, 8, density=0.5, format="csr", random_state=4))
    M = sp.random(30, 20, density=0.2, format="csr", random_state=5)
    got = distances.pairwise_distances(X, Y, metric=metric, mask=M, backend="cuda")
    np.testing.assert_array_equal(got.indices, M.indices)
    ref = oracle(metric, X.toarray(), Y.toarray())
    np.testing.assert_allclose(got.data, ref[M.nonzero()], rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("metric", ["minkowski", "euclidean", "cosine", "chebyshev"])
def test_w_on_the_gpu(metric):
    X = sp.random(30, 8, density=0.5, format="csr", random_state=6)
    w = np.linspace(0.0, 2.0, 8)
    got = distances.pairwise_distances(X, metric=metric, w=w, backend="cuda")
    np.testing.assert_allclose(got, cdist(X.toarray(), X.toarray(), metric, w=w), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("metric", NEW_MEASURES)
def test_new_measures_on_the_gpu(metric):
    X = abs(sp.random(30, 8, density=0.6, format="csr", random_state=7))
    Y = abs(sp.random(20, 8, density=0.6, format="csr", random_state=8))
    got = distances.pairwise_distances(X, Y, metric=metric, backend="cuda")
    ref = oracle(metric, X.toarray(), Y.toarray())
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12, equal_nan=True)
