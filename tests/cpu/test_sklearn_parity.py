"""scikit-learn parity of ``NearestNeighbors``: radius queries, the ε-graph, n_jobs, algorithm, leaf_size,
effective_metric_, NotFittedError, callables, checked against scikit-learn's brute force and cdist (CPU engine)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist
from strategies import dense, sparse_pair

from semiring import distances
from semiring.distances import neighbors


def ours(**kw):
    return distances.NearestNeighbors(backend="cpu", verbose=False, **kw)


@pytest.mark.parametrize("metric, radius", [("euclidean", 0.9), ("cosine", 0.4), ("minkowski", 1.2)])
def test_radius_neighbors_equal_scikit_learn_brute(metric, radius, rng):
    from sklearn.neighbors import NearestNeighbors as SkNN

    X = sp.random(80, 10, density=0.35, format="csr", random_state=rng)
    Q = sp.random(15, 10, density=0.35, format="csr", random_state=rng)
    kw = {"p": 3} if metric == "minkowski" else {}
    sk = SkNN(radius=radius, metric=metric, algorithm="brute", **kw).fit(X.toarray())
    nn = ours(radius=radius, metric=metric, **kw).fit(X)
    for query in (Q, None):
        dense_query = None if query is None else query.toarray()
        d_sk, i_sk = sk.radius_neighbors(dense_query, sort_results=True)
        d, i = nn.radius_neighbors(query, sort_results=True)
        assert d.dtype == i.dtype == object and len(d) == len(d_sk)
        assert sum(map(len, i)) > len(i)  # the radius finds neighbours: the comparison is not vacuous
        for row in range(len(i)):  # the same neighbours, best first (near-ties may round either way)
            assert i[row].dtype == np.int64
            np.testing.assert_array_equal(np.sort(i[row]), np.sort(i_sk[row]))
            np.testing.assert_allclose(d[row], d_sk[row], rtol=1e-9, atol=1e-12)
            assert (np.diff(d[row]) >= 0).all()
        unsorted = nn.radius_neighbors(query, return_distance=False)
        for row in range(len(i)):  # index order without sort_results
            np.testing.assert_array_equal(unsorted[row], np.sort(i_sk[row]))
        for mode in ("connectivity", "distance"):
            G, G_sk = nn.radius_neighbors_graph(query, mode=mode), sk.radius_neighbors_graph(dense_query, mode=mode)
            assert isinstance(G, sp.csr_matrix) and G.shape == G_sk.shape
            np.testing.assert_array_equal(G.indptr, G_sk.indptr)
            np.testing.assert_allclose(G.toarray(), G_sk.toarray(), rtol=1e-9, atol=1e-12)


@settings(max_examples=20)
@given(data=st.data(), radius=st.sampled_from([0.0, 0.5, 1.5, 4.0]), tiny=st.booleans())
def test_radius_neighbors_is_the_brute_force_threshold(data, radius, tiny):
    """Awkward inputs, float32 too; tiny working_memory: tiles across rows and columns give the same entries."""
    X, Q = data.draw(sparse_pair())
    if X.shape[0] == 0:
        return
    D = cdist(dense(Q), dense(X), "cityblock")
    nn = ours(metric="cityblock", radius=radius, working_memory=(64 / 2**20) if tiny else None).fit(X)
    dist, ind = nn.radius_neighbors(Q, sort_results=True)
    rtol = 1e-5 if X.dtype == Q.dtype == np.float32 else 1e-12
    for row in range(Q.shape[0]):
        within = np.flatnonzero(D[row] <= radius * (1 + rtol))
        sure = np.flatnonzero(D[row] <= radius * (1 - rtol))
        assert set(sure) <= set(ind[row]) <= set(within)
        np.testing.assert_allclose(dist[row], D[row, ind[row]], rtol=rtol, atol=1e-6)
        assert (np.diff(dist[row]) >= 0).all()


@pytest.mark.parametrize("working_memory", [None, 300 / 2**20, 2000 / 2**20])
def test_x_none_excludes_each_row_itself_in_every_tile(working_memory, rng):
    """Tiles across the index: a row's own entry sits in a different tile for each row batch."""
    X = np.round(rng.random((40, 3)) * 4) / 4  # exact sums: no entry on the radius by rounding
    X[5] = X[4]  # duplicates: a copy of a row is still its neighbour
    D = cdist(X, X, "cityblock")
    nn = ours(metric="cityblock", radius=0.5, working_memory=working_memory).fit(X)
    ind = nn.radius_neighbors(return_distance=False)
    for row in range(40):
        want = np.flatnonzero(D[row] <= 0.5)
        np.testing.assert_array_equal(ind[row], want[want != row])
    assert 5 in ind[4] and 4 in ind[5]


def test_radius_for_a_similarity_is_at_least(rng):
    X = rng.random((30, 5))
    Q = rng.random((4, 5))
    S = Q @ X.T
    threshold = float(np.median(S))
    dist, ind = ours(metric="inner_product", radius=threshold).fit(X).radius_neighbors(Q, sort_results=True)
    for row in range(4):
        np.testing.assert_array_equal(np.sort(ind[row]), np.flatnonzero(S[row] >= threshold))
        assert (np.diff(dist[row]) <= 0).all()  # largest first


def test_self_is_excluded_for_x_none_and_nan_is_never_within():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
    ind = ours(radius=1.0).fit(X).radius_neighbors(return_distance=False)
    assert [list(r) for r in ind] == [[1, 2], [0, 2], [0, 1], []]
    cos = ours(metric="cosine", radius=2.0).fit(X).radius_neighbors()[1]  # the zero rows' cosine is NaN
    assert [list(r) for r in cos] == [[], [], [3], [2]]


def test_radius_neighbors_graph_function_is_scikit_learns():
    from sklearn.neighbors import radius_neighbors_graph as sk_graph

    X = sp.random(40, 6, density=0.5, format="csr", random_state=11)
    for mode in ("connectivity", "distance"):
        for include_self in (False, True):
            G = distances.radius_neighbors_graph(X, 0.8, mode=mode, include_self=include_self, backend="cpu")
            want = sk_graph(X.toarray(), 0.8, mode=mode, include_self=include_self)
            np.testing.assert_array_equal(G.indptr, want.indptr)
            np.testing.assert_allclose(G.toarray(), want.toarray(), rtol=1e-9, atol=1e-12)


def test_radius_errors_name_the_argument():
    nn = ours()
    with pytest.raises(neighbors.NotFittedError, match="not fitted yet"):
        nn.radius_neighbors(np.eye(2))
    nn.fit(np.eye(3))
    for bad in (np.nan, "1", None):
        with pytest.raises(ValueError, match="radius must be a real number"):
            ours(radius=bad).fit(np.eye(3)).radius_neighbors()
    with pytest.raises(ValueError, match="mode must be 'connectivity' or 'distance'"):
        nn.radius_neighbors_graph(mode="weights")
    with pytest.raises(ValueError, match="return_distance must be True if sort_results is True"):
        nn.radius_neighbors(return_distance=False, sort_results=True)


# ------------------------------------------------------------------------ estimator parameters


@pytest.mark.parametrize(
    "metric, p, metric_params",
    [
        ("minkowski", 1, None),
        ("minkowski", 2, None),
        ("minkowski", np.inf, None),
        ("minkowski", 3, None),
        ("minkowski", 2, {"p": 1}),
        ("minkowski", 1, {"w": np.ones(3)}),
        ("euclidean", 3, None),
        ("cosine", 2, None),
        ("cityblock", 2, {}),
    ],
)
def test_effective_metric_as_scikit_learn(metric, p, metric_params):
    from sklearn.neighbors import NearestNeighbors as SkNN

    X = np.random.default_rng(0).random((6, 3))
    sk = SkNN(metric=metric, p=p, metric_params=metric_params, algorithm="brute").fit(X)
    nn = ours(metric=metric, p=p, metric_params=metric_params).fit(X)
    assert nn.effective_metric_ == sk.effective_metric_
    assert nn.effective_metric_params_.keys() == sk.effective_metric_params_.keys()
    for key, value in sk.effective_metric_params_.items():
        np.testing.assert_array_equal(nn.effective_metric_params_[key], value)
    np.testing.assert_allclose(nn.kneighbors(X[:2], 3)[0], sk.kneighbors(X[:2], 3)[0], rtol=1e-9)


def test_algorithm_leaf_size_and_callables():
    X = np.eye(4)
    for algorithm in ("auto", "brute"):
        ours(algorithm=algorithm, leaf_size=5).fit(X)
    for tree in ("kd_tree", "ball_tree"):
        with pytest.raises(ValueError, match=f"algorithm='{tree}' is not supported: this estimator is brute force"):
            ours(algorithm=tree).fit(X)
    with pytest.raises(ValueError, match="algorithm must be 'auto' or 'brute'"):
        ours(algorithm="fast").fit(X)
    with pytest.raises(ValueError, match="leaf_size must be an integer >= 1"):
        ours(leaf_size=0).fit(X)
    with pytest.raises(TypeError, match="metric must be the name of a measure, got the callable"):
        ours(metric=lambda a, b: 0.0).fit(X)


def test_n_jobs_sets_numba_threads_for_the_call_and_restores_them(monkeypatch):
    import numba

    from semiring.distances import bound

    before = numba.get_num_threads()
    seen = []
    block = bound.BoundMeasure.block
    monkeypatch.setattr(bound.BoundMeasure, "block", lambda *a: seen.append(numba.get_num_threads()) or block(*a))
    nn = ours(n_jobs=1, n_neighbors=1, radius=0.5).fit(np.eye(3))
    nn.kneighbors()
    nn.radius_neighbors()
    assert seen == [1, 1] and numba.get_num_threads() == before
    with pytest.raises(ValueError, match="n_jobs must be None or a nonzero integer"):
        ours(n_jobs=0).fit(np.eye(3))


def test_not_fitted_error_is_scikit_learns_when_it_is_loaded():
    from sklearn.exceptions import NotFittedError

    for method in ("kneighbors", "radius_neighbors", "radius_neighbors_graph", "kneighbors_graph"):
        with pytest.raises(NotFittedError):
            getattr(ours(), method)(np.eye(2))
        with pytest.raises(neighbors.NotFittedError):
            getattr(ours(), method)(np.eye(2))


def test_importing_the_library_imports_no_scikit_learn():
    code = (
        "import sys, numpy as np\nfrom semiring import distances\n"
        "try:\n    distances.NearestNeighbors().kneighbors(np.eye(2))\n"
        "except distances.neighbors.NotFittedError as e:\n    assert isinstance(e, (ValueError, AttributeError))\n"
        "assert 'sklearn' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_changing_the_metric_after_fit_checks_the_fitted_rows():
    """Issue 12 item 12: fitted on negative data, then set_params(metric='jensenshannon'): refused, not finite."""
    X = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]])
    nn = ours(n_neighbors=1, radius=0.5).fit(X)
    nn.set_params(metric="jensenshannon")
    for call in (nn.kneighbors, nn.radius_neighbors):
        with pytest.raises(ValueError, match="the fitted X contains negative values.*'jensenshannon'"):
            call(np.abs(X))
        with pytest.raises(ValueError, match="the fitted X contains negative values"):
            call()
