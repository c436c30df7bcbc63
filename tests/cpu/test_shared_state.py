"""State shared with the caller: an estimator answers from the rows it was fitted on, whatever the caller does
to them in place afterwards; a default computed from all rows (seuclidean's V) is computed over the whole Dask
input, not per block."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import reference_knn
from scipy.spatial.distance import cdist

from semiring.distances import NearestNeighbors, pairwise_distances


def _data(seed: int = 3):
    return sp.random(40, 12, density=0.4, format="csr", random_state=seed) + sp.eye(40, 12, format="csr")


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "correlation", "cityblock"])
@pytest.mark.parametrize("change", ["data", "indices-order"])
def test_changing_the_fitted_rows_in_place_does_not_reach_the_estimator(metric, change):
    X = sp.csr_matrix(_data())
    original = X.copy()
    Q = _data(9)[:5]
    nn = NearestNeighbors(n_neighbors=4, metric=metric, backend="cpu").fit(X)
    if change == "data":
        X.data *= -3.0  # the caller reuses its buffer
        X.data[::2] = 7.0
    else:
        X.data[:] = X.data[::-1].copy()
    dist, ind = nn.kneighbors(Q)
    ref = cdist(Q.toarray(), original.toarray(), metric)
    want_dist, _ = reference_knn(ref, 4)
    np.testing.assert_allclose(dist, want_dist, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.take_along_axis(ref, ind, axis=1), want_dist, rtol=1e-9, atol=1e-12)


def test_a_dense_fitted_array_changed_in_place_does_not_reach_the_estimator():
    X = _data().toarray()
    original = X.copy()
    nn = NearestNeighbors(n_neighbors=3, backend="cpu").fit(X)
    X += 100.0
    dist, _ = nn.kneighbors(original[:4])
    want, _ = reference_knn(cdist(original[:4], original), 3)
    np.testing.assert_allclose(dist, want, rtol=1e-9)


da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


def _blocks(A, rows: int):
    return da.from_array(A, chunks=(rows, -1), asarray=False)


def test_seuclidean_default_v_over_the_whole_dask_input():
    """SciPy's default V is each column's variance over all the rows: per block it was each block pair's."""
    X = sp.csr_matrix(_data(4).toarray() + np.arange(12) * 0.5)  # no constant column
    Y = sp.csr_matrix(_data(5)[:17].toarray() + 1.0)
    with dask.config.set(scheduler="synchronous"):
        got_xx = pairwise_distances(_blocks(X, 7), metric="seuclidean", backend="cpu").compute()
        got_xy = pairwise_distances(_blocks(X, 7), _blocks(Y, 5), metric="seuclidean", backend="cpu").compute()
    Xd, Yd = X.toarray(), Y.toarray()
    np.testing.assert_allclose(got_xx, cdist(Xd, Xd, "seuclidean", V=Xd.var(0, ddof=1)), rtol=1e-9)
    np.testing.assert_allclose(got_xy, cdist(Xd, Yd, "seuclidean", V=np.vstack([Xd, Yd]).var(0, ddof=1)), rtol=1e-9)


def test_seuclidean_given_v_is_used_as_given_under_dask():
    X = sp.csr_matrix(_data(4).toarray() + 1.0)
    V = np.linspace(0.5, 2.0, 12)
    with dask.config.set(scheduler="synchronous"):
        got = pairwise_distances(_blocks(X, 9), metric="seuclidean", V=V, backend="cpu").compute()
    np.testing.assert_allclose(got, cdist(X.toarray(), X.toarray(), "seuclidean", V=V), rtol=1e-9)


def test_a_constant_column_is_refused_over_the_whole_dask_input():
    X = _data(6).toarray() + 1.0
    X[:, 3] = 2.0
    with pytest.raises(ValueError, match="column 3 is constant"):
        pairwise_distances(_blocks(sp.csr_matrix(X), 10), metric="seuclidean", backend="cpu")


def test_seuclidean_default_v_of_a_sharded_index_is_the_whole_fitted_inputs():
    """The estimator's default V is the fitted rows' variance: all of them, not each shard's."""
    X = sp.csr_matrix(_data(4).toarray() + np.arange(12) * 0.5)
    Q = X[:6].toarray()
    with dask.config.set(scheduler="synchronous"):
        nn = NearestNeighbors(n_neighbors=3, metric="seuclidean", backend="cpu").fit(_blocks(X, 9))
        dist, _ = nn.kneighbors(da.from_array(Q, chunks=(3, -1)))
        dist = np.asarray(dist.compute() if hasattr(dist, "compute") else dist)
    Xd = X.toarray()
    want, _ = reference_knn(cdist(Q, Xd, "seuclidean", V=Xd.var(0, ddof=1)), 3)
    np.testing.assert_allclose(dist, want, rtol=1e-9)


def test_all_pairs_of_a_sharded_index_on_dask_own_scheduler():
    """X=None under a symmetric measure asks each pair of shards once (``tests/cpu/test_dask.py`` on a cluster);
    on Dask's own scheduler too, uneven blocks, a block of one row: equal to the single machine and to cdist's.
    Small integers: exact sums whatever the path, so ties are ordered by index, exactly."""
    X = sp.csr_matrix(np.round(_data(4).toarray() * 3))
    blocks = da.from_array(X, chunks=((7, 1, 9, X.shape[0] - 17), (X.shape[1],)), asarray=False)
    with dask.config.set(scheduler="synchronous"):
        dist, ind = NearestNeighbors(n_neighbors=3, metric="cityblock", backend="cpu").fit(blocks).kneighbors()
        dist, ind = dask.compute(dist, ind)
    want_d, want_i = NearestNeighbors(n_neighbors=3, metric="cityblock", backend="cpu").fit(X).kneighbors()
    np.testing.assert_array_equal(ind, want_i)
    np.testing.assert_array_equal(dist, want_d)
    ref_d, ref_i = reference_knn(cdist(X.toarray(), X.toarray(), "cityblock"), 3, exclude_self=True)
    np.testing.assert_array_equal(ind, ref_i)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-9)


def test_the_fitted_matrix_changed_in_place_is_read_as_new_queries():
    """kneighbors(X) with the fitted object itself: its prepared rows while unchanged, its new values (against
    the rows fitted) once changed in place."""
    X = sp.csr_matrix(_data())
    original = X.copy()
    nn = NearestNeighbors(n_neighbors=3, metric="euclidean", backend="cpu").fit(X)
    want, _ = reference_knn(cdist(original.toarray(), original.toarray()), 3)
    np.testing.assert_allclose(nn.kneighbors(X)[0], want, rtol=1e-9, atol=1e-12)
    X.data *= 2.0
    want, _ = reference_knn(cdist(X.toarray(), original.toarray()), 3)
    np.testing.assert_allclose(nn.kneighbors(X)[0], want, rtol=1e-9, atol=1e-12)


def test_one_fitted_estimator_queried_from_threads_answers_each_query():
    """Four threads query one fitted estimator at once (what it derives from its rows shared between them):
    each gets the answer to its own queries, k nearest and within a radius."""
    from concurrent.futures import ThreadPoolExecutor

    X = sp.csr_matrix(_data())
    Xd = X.toarray()
    nn = NearestNeighbors(n_neighbors=4, radius=1.0, metric="euclidean", backend="cpu").fit(X)
    queries = [_data(seed)[: 5 + seed].toarray() for seed in range(10, 18)]

    def ask(Q):
        return nn.kneighbors(Q), nn.radius_neighbors(Q, sort_results=True)

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(ask, queries))
    for Q, ((dist, ind), (rdist, rind)) in zip(queries, answers, strict=True):
        ref = cdist(Q, Xd)
        want, _ = reference_knn(ref, 4)
        np.testing.assert_allclose(dist, want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.take_along_axis(ref, ind, axis=1), want, rtol=1e-9, atol=1e-12)
        for i in range(Q.shape[0]):
            inside = np.flatnonzero(ref[i] <= 1.0)
            np.testing.assert_array_equal(np.sort(rind[i]), inside)
            np.testing.assert_allclose(np.sort(rdist[i]), np.sort(ref[i, inside]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csr_array])
def test_the_callers_matrices_are_never_written_to(kind):
    """Every entry point leaves the caller's matrix objects as they were, down to what SciPy caches on them as
    it is asked (``has_canonical_format``): a Dask worker sending a query block while a task on the same worker
    checked it failed ("dictionary changed size during iteration") and the call waited forever."""
    import semiring
    from semiring import graph

    rng = np.random.default_rng(3)
    X = kind(sp.random(40, 12, density=0.3, format="csr", random_state=rng))
    Q = kind(sp.random(7, 12, density=0.3, format="csr", random_state=rng))
    G = sp.random(30, 30, density=0.2, format="csr", random_state=rng)
    G = kind(((G + G.T) > 0).astype(np.float64))
    G.setdiag(0)
    G.eliminate_zeros()
    M = kind(sp.random(7, 40, density=0.2, format="csr", random_state=rng))
    for key in ("_has_canonical_format", "_has_sorted_indices"):  # as fresh from a reader: nothing cached yet
        for A in (X, Q, G, M):
            A.__dict__.pop(key, None)
    before = {name: dict(A.__dict__) for name, A in (("X", X), ("Q", Q), ("G", G), ("M", M))}
    pairwise_distances(X, metric="cosine", backend="cpu")
    pairwise_distances(Q, X, metric="cityblock", backend="cpu")
    nn = NearestNeighbors(n_neighbors=3, backend="cpu").fit(X)
    nn.kneighbors(Q)
    nn.radius_neighbors(Q, radius=1.0)
    semiring.pairwise(Q, X, semiring.plus_times, mask=M, backend="cpu")
    graph.jaccard(G, backend="cpu")
    graph.triangle_count(G, backend="cpu")
    after = {name: dict(A.__dict__) for name, A in (("X", X), ("Q", Q), ("G", G), ("M", M))}
    assert {k: set(v) for k, v in after.items()} == {k: set(v) for k, v in before.items()}
