"""State shared with the caller on the GPU engine (marked ``gpu``; skipped without a GPU): an estimator fitted
on CuPy or host rows answers from those rows after the caller changes them in place.

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_shared_state_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import reference_knn
from scipy.spatial.distance import cdist

from semiring.distances import NearestNeighbors, pairwise_distances


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "correlation"])
@pytest.mark.parametrize("where", ["host", "cupy"])
def test_changing_the_fitted_rows_in_place_does_not_reach_the_estimator(metric, where):
    import cupyx.scipy.sparse as cusp

    X = sp.csr_matrix(sp.random(50, 16, density=0.4, format="csr", random_state=3) + sp.eye(50, 16))
    original = X.toarray()
    Q = original[:6] + 0.5
    given = cusp.csr_matrix(X) if where == "cupy" else X
    nn = NearestNeighbors(n_neighbors=4, metric=metric, backend="cuda").fit(given)
    given.data *= -3.0  # the caller reuses its buffer, on the device or the host
    dist, ind = nn.kneighbors(Q)
    dist, ind = (a.get() if hasattr(a, "get") else np.asarray(a) for a in (dist, ind))
    ref = cdist(Q, original, metric)
    want, _ = reference_knn(ref, 4)
    np.testing.assert_allclose(dist, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.take_along_axis(ref, ind, axis=1), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("where", ["host", "cupy"])
def test_changing_the_fitted_rows_in_place_does_not_reach_radius_queries(where):
    import cupyx.scipy.sparse as cusp

    X = sp.csr_matrix(sp.random(50, 16, density=0.4, format="csr", random_state=3) + sp.eye(50, 16))
    original = X.toarray()
    Q = original[:6] + 0.1
    given = cusp.csr_matrix(X) if where == "cupy" else X
    nn = NearestNeighbors(radius=1.2, metric="euclidean", backend="cuda").fit(given)
    given.data *= -3.0
    dist, ind = nn.radius_neighbors(Q, sort_results=True)
    ref = cdist(Q, original)
    for i in range(Q.shape[0]):
        inside = np.flatnonzero(ref[i] <= 1.2)
        got_ind = ind[i].get() if hasattr(ind[i], "get") else np.asarray(ind[i])
        got_dist = dist[i].get() if hasattr(dist[i], "get") else np.asarray(dist[i])
        np.testing.assert_array_equal(np.sort(got_ind), inside)
        np.testing.assert_allclose(np.sort(got_dist), np.sort(ref[i, inside]), rtol=1e-9, atol=1e-12)


def test_the_fitted_matrix_changed_in_place_is_read_as_new_queries():
    """kneighbors(X) with the fitted object itself: its prepared rows while unchanged, its new values once the
    caller changed them in place (as tests/cpu/test_shared_state.py checks on the CPU)."""
    X = sp.csr_matrix(sp.random(40, 12, density=0.4, format="csr", random_state=3) + sp.eye(40, 12))
    original = X.toarray()
    nn = NearestNeighbors(n_neighbors=3, metric="euclidean", backend="cuda").fit(X)
    want, _ = reference_knn(cdist(original, original), 3)
    np.testing.assert_allclose(np.asarray(nn.kneighbors(X)[0]), want, rtol=1e-9, atol=1e-12)
    X.data *= 2.0
    want, _ = reference_knn(cdist(X.toarray(), original), 3)
    np.testing.assert_allclose(np.asarray(nn.kneighbors(X)[0]), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("where", ["host", "cupy"])
def test_one_fitted_estimator_queried_from_threads_answers_each_query(where):
    """Four threads query one fitted estimator at once (what the GPU engine derives from the index, such as the
    split layout, shared between them): each gets the answer to its own queries."""
    from concurrent.futures import ThreadPoolExecutor

    import cupyx.scipy.sparse as cusp

    X = sp.random(2000, 64, density=0.1, format="csr", random_state=5)
    Xd = X.toarray()
    nn = NearestNeighbors(n_neighbors=5, metric="cosine", backend="cuda").fit(
        cusp.csr_matrix(X) if where == "cupy" else X
    )
    queries = [sp.random(20 + 7 * s, 64, density=0.1, format="csr", random_state=30 + s) for s in range(8)]

    def ask(Q):
        dist, ind = nn.kneighbors(cusp.csr_matrix(Q) if where == "cupy" else Q)
        return tuple(a.get() if hasattr(a, "get") else np.asarray(a) for a in (dist, ind))

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(ask, queries))
    for Q, (dist, ind) in zip(queries, answers, strict=True):
        ref = cdist(Q.toarray(), Xd, "cosine")
        want, _ = reference_knn(ref, 5)
        np.testing.assert_allclose(dist, want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.take_along_axis(ref, ind, axis=1), want, rtol=1e-9, atol=1e-12)


def test_concurrent_calls_from_threads_each_get_their_own_right_answer():
    """pairwise_distances from four threads at once on the GPU engine, kernels compiled on first use among them."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    jobs = []
    for k, metric in enumerate(["canberra", "braycurtis", "cosine", "euclidean", "cityblock", "correlation"] * 2):
        X = sp.random(40 + k, 9, density=0.4, format="csr", random_state=rng) + sp.eye(40 + k, 9)
        Y = sp.random(17, 9, density=0.4, format="csr", random_state=rng) + sp.eye(17, 9)
        jobs.append((sp.csr_matrix(X), sp.csr_matrix(Y), metric))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: pairwise_distances(job[0], job[1], metric=job[2], backend="cuda"), jobs))
    for (X, Y, metric), D in zip(jobs, results, strict=True):
        np.testing.assert_allclose(D, cdist(X.toarray(), Y.toarray(), metric), rtol=1e-10, atol=1e-12)
