"""scikit-learn's kNN idioms against scikit-learn itself: metric="precomputed", the neighbours-graph
transformers in pipelines (DBSCAN, TSNE, Isomap), kneighbors_graph and pairwise_distances_chunked."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import cdist
from sklearn import neighbors as skn
from sklearn.metrics import pairwise_distances_chunked as sk_chunked

from semiring import distances
from semiring.distances import neighbors


@pytest.fixture
def points(rng):
    """Continuous points (no ties), three loose clusters."""
    centres = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 0.0], [0.0, 5.0, 5.0]])
    return np.concatenate([c + rng.normal(scale=0.6, size=(40, 3)) for c in centres])


def assert_same_graph(got, want, rtol=1e-6):
    """Same pattern in the same order within each row, same values."""
    got, want = sp.csr_matrix(got), sp.csr_matrix(want)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, rtol=rtol, atol=1e-9)


# --------------------------------------------------------------------------- metric="precomputed"


def precomputed_inputs(points):
    D = cdist(points, points)
    graph = skn.KNeighborsTransformer(n_neighbors=8, mode="distance").fit_transform(points)
    return {"dense": D, "graph": graph, "graph_csc": graph.tocsc()}


@pytest.mark.parametrize("kind", ["dense", "graph", "graph_csc"])
def test_precomputed_kneighbors_like_scikit_learn(points, kind):
    D = precomputed_inputs(points)[kind]
    ours = distances.NearestNeighbors(n_neighbors=5, metric="precomputed").fit(D)
    theirs = skn.NearestNeighbors(n_neighbors=5, metric="precomputed").fit(D)
    for queries in (None, D[10:30]):
        got, want = ours.kneighbors(queries), theirs.kneighbors(queries)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        assert_same_graph(
            ours.kneighbors_graph(queries, mode="distance"), theirs.kneighbors_graph(queries, mode="distance")
        )
    for queries in (None, D[10:30]):
        for sort in (False, True):
            got = ours.radius_neighbors_graph(queries, radius=0.9, mode="distance", sort_results=sort)
            want = theirs.radius_neighbors_graph(queries, radius=0.9, mode="distance", sort_results=sort)
            if not sort:  # scikit-learn keeps a graph's own row order there; ours is by index
                got, want = got.tocsr().sorted_indices(), want.tocsr().sorted_indices()
            assert_same_graph(got, want)
    assert ours.effective_metric_ == theirs.effective_metric_ == "precomputed"
    assert ours.n_samples_fit_ == theirs.n_samples_fit_


def test_precomputed_ties_by_index_and_self_excluded():
    D = np.array([[0.0, 1.0, 1.0, 1.0], [1.0, 0.0, 2.0, 0.0], [1.0, 2.0, 0.0, 3.0], [1.0, 0.0, 3.0, 0.0]])
    nn = distances.NearestNeighbors(n_neighbors=2, metric="precomputed").fit(D)
    dist, ind = nn.kneighbors()
    np.testing.assert_array_equal(ind, [[1, 2], [3, 0], [0, 1], [1, 0]])  # row 1: its duplicate 3 first
    np.testing.assert_array_equal(dist, [[1, 1], [0, 1], [1, 2], [0, 1]])


def test_precomputed_graph_rows_need_k_entries(points):
    graph = skn.KNeighborsTransformer(n_neighbors=3, mode="distance").fit_transform(points)
    nn = distances.NearestNeighbors(n_neighbors=4, metric="precomputed").fit(graph)
    nn.kneighbors(graph, n_neighbors=4)  # 4 stored entries a row, itself included
    with pytest.raises(ValueError, match="4 neighbors per sample are required, but some samples have only 3"):
        nn.kneighbors()  # its own entry does not count
    with pytest.raises(ValueError, match="5 neighbors per sample"):
        nn.kneighbors(graph, n_neighbors=5)


def test_precomputed_explicit_zero_is_a_distance():
    G = sp.csr_matrix((np.array([0.0, 2.0, 0.0, 3.0]), np.array([1, 2, 0, 2]), np.array([0, 2, 4])), shape=(2, 3))
    square = sp.vstack([G, sp.csr_matrix(np.array([[2.0, 3.0, 0.0]]))]).tocsr()
    nn = distances.NearestNeighbors(n_neighbors=1, metric="precomputed").fit(square)
    dist, ind = nn.kneighbors()
    np.testing.assert_array_equal(ind.ravel(), [1, 0, 0])
    np.testing.assert_array_equal(dist.ravel(), [0.0, 0.0, 2.0])


@pytest.mark.parametrize(
    "fit, query, match",
    [
        (np.ones((3, 4)), None, "must be square"),
        (-np.ones((3, 3)), None, "Negative values in data"),
        (np.full((2, 2), np.nan), None, "NaN"),
        (np.full((2, 2), np.inf), None, "infinity"),
        (np.zeros((3, 3)), np.zeros((2, 4)), "has 4 columns, but metric='precomputed' needs one per fitted row"),
        (np.zeros((3, 3)), -np.ones((2, 3)), "Negative values in data"),
    ],
)
def test_precomputed_rules(fit, query, match):
    with pytest.raises(ValueError, match=match):
        distances.NearestNeighbors(n_neighbors=1, metric="precomputed").fit(fit).kneighbors(query)


def test_precomputed_and_features_do_not_cross(points):
    nn = distances.NearestNeighbors(n_neighbors=2, backend="cpu").fit(points)
    with pytest.raises(ValueError, match="fit it again"):
        nn.set_params(metric="precomputed").kneighbors()
    with pytest.raises(ValueError, match="backend='cuda' cannot run metric='precomputed'"):
        distances.NearestNeighbors(metric="precomputed", backend="cuda").fit(np.zeros((2, 2)))


def test_precomputed_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(distances.NearestNeighbors(metric="precomputed"), on_fail=None)
    failed = {r["check_name"]: repr(r["exception"]) for r in results if r["status"] == "failed"}
    # the project's input rules (test_neighbors.EXPECTED_FAILED_CHECKS) are the only failures
    assert set(failed) <= {"check_complex_data", "check_dtype_object"}, failed
    assert sum(r["status"] == "passed" for r in results) > 30


# --------------------------------------------------------------------------- the transformers


@pytest.mark.parametrize("mode", ["distance", "connectivity"])
@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "cosine"])
def test_kneighbors_transformer_equals_scikit_learn(points, mode, metric):
    ours = distances.KNeighborsTransformer(n_neighbors=6, mode=mode, metric=metric, backend="cpu")
    theirs = skn.KNeighborsTransformer(n_neighbors=6, mode=mode, metric=metric)
    assert_same_graph(ours.fit_transform(points), theirs.fit_transform(points))
    assert_same_graph(ours.transform(points[:9] + 0.01), theirs.transform(points[:9] + 0.01))
    G = ours.fit_transform(points)
    assert isinstance(G, sp.csr_matrix) and G.shape == (len(points), len(points))
    assert (G.indices.reshape(len(points), -1)[:, 0] == np.arange(len(points))).all()  # the point itself first
    np.testing.assert_array_equal(ours.get_feature_names_out(), theirs.get_feature_names_out())


def test_radius_neighbors_transformer_equals_scikit_learn(points):
    for mode in ("distance", "connectivity"):
        ours = distances.RadiusNeighborsTransformer(radius=1.2, mode=mode, backend="cpu").fit_transform(points)
        theirs = skn.RadiusNeighborsTransformer(radius=1.2, mode=mode).fit_transform(points)
        if mode == "connectivity":  # scikit-learn's connectivity rows are not sorted by distance
            ours, theirs = ours.sorted_indices(), theirs.sorted_indices()
        assert_same_graph(ours, theirs)


EXPECTED_FAILED_CHECKS = {
    "check_complex_data": "complex input is refused with a TypeError (the project's input rule)",
    "check_dtype_object": "object arrays are refused with a TypeError (the project's input rule)",
}


@pytest.mark.parametrize(
    "estimator",
    [
        distances.KNeighborsTransformer(backend="cpu"),
        distances.KNeighborsTransformer(mode="connectivity", backend="cpu"),
        distances.RadiusNeighborsTransformer(radius=2.0, backend="cpu"),
    ],
    ids=repr,
)
def test_transformers_check_estimator(estimator):
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(estimator, on_fail=None, expected_failed_checks=EXPECTED_FAILED_CHECKS)
    statuses = {r["check_name"]: r["status"] for r in results}
    failed = {r["check_name"]: repr(r["exception"]) for r in results if r["status"] == "failed"}
    assert not failed
    assert {"check_transformer_general", "check_transformers_unfitted", "check_fit2d_1sample"} <= {
        name for name, s in statuses.items() if s == "passed"
    }


def test_pipeline_with_dbscan(points):
    from sklearn.cluster import DBSCAN
    from sklearn.pipeline import make_pipeline

    ours = make_pipeline(
        distances.KNeighborsTransformer(n_neighbors=10, backend="cpu"), DBSCAN(eps=0.8, metric="precomputed")
    )
    theirs = make_pipeline(skn.KNeighborsTransformer(n_neighbors=10), DBSCAN(eps=0.8, metric="precomputed"))
    labels = ours.fit_predict(points)
    np.testing.assert_array_equal(labels, theirs.fit_predict(points))
    np.testing.assert_array_equal(labels, DBSCAN(eps=0.8).fit_predict(points))  # brute DBSCAN on the features
    assert len(set(labels) - {-1}) == 3


def test_pipeline_with_isomap():
    from sklearn.datasets import make_s_curve
    from sklearn.manifold import Isomap
    from sklearn.pipeline import make_pipeline

    points = make_s_curve(150, random_state=0)[0]

    ours = make_pipeline(
        distances.KNeighborsTransformer(n_neighbors=8, backend="cpu"), Isomap(n_neighbors=8, metric="precomputed")
    )
    theirs = make_pipeline(skn.KNeighborsTransformer(n_neighbors=8), Isomap(n_neighbors=8, metric="precomputed"))
    np.testing.assert_allclose(np.abs(ours.fit_transform(points)), np.abs(theirs.fit_transform(points)), atol=1e-8)


def test_tsne_on_the_graph(points):
    from sklearn.manifold import TSNE

    perplexity = 10
    k = 3 * perplexity + 1
    ours = distances.KNeighborsTransformer(n_neighbors=k, backend="cpu").fit_transform(points)
    theirs = skn.KNeighborsTransformer(n_neighbors=k).fit_transform(points)
    assert_same_graph(ours, theirs)

    def embed(G):
        tsne = TSNE(metric="precomputed", perplexity=perplexity, init="random", random_state=0, max_iter=250)
        return tsne.fit_transform(G)

    np.testing.assert_allclose(embed(ours), embed(theirs), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- kneighbors_graph


@pytest.mark.parametrize("include_self", [False, True])
@pytest.mark.parametrize("mode", ["connectivity", "distance"])
def test_kneighbors_graph_function(points, include_self, mode):
    got = distances.kneighbors_graph(points, 4, mode=mode, include_self=include_self, backend="cpu")
    want = skn.kneighbors_graph(points, 4, mode=mode, include_self=include_self)
    assert_same_graph(got, want)
    fitted = distances.NearestNeighbors(metric="manhattan", backend="cpu").fit(points)
    got = distances.kneighbors_graph(fitted, 3, mode=mode, include_self=include_self)
    fitted = skn.NearestNeighbors(metric="manhattan").fit(points)
    want = skn.kneighbors_graph(fitted, 3, mode=mode, metric="manhattan", include_self=include_self)
    assert_same_graph(got, want)


@pytest.mark.parametrize("include_self", [False, True])
@pytest.mark.parametrize("mode", ["connectivity", "distance"])
def test_radius_neighbors_graph_function_takes_a_fitted_estimator(points, include_self, mode):
    """As scikit-learn's: the fitted model's rows and measure, asked at the function's radius."""
    fitted = distances.NearestNeighbors(metric="manhattan", radius=0.1, backend="cpu").fit(points)
    got = distances.radius_neighbors_graph(fitted, 1.5, mode=mode, include_self=include_self)
    theirs = skn.NearestNeighbors(metric="manhattan", radius=0.1).fit(points)
    want = skn.radius_neighbors_graph(theirs, 1.5, mode=mode, metric="manhattan", include_self=include_self)
    assert want.nnz > points.shape[0]  # the radius given reaches beyond each point itself
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-12)


@pytest.mark.parametrize("function", [distances.kneighbors_graph, distances.radius_neighbors_graph])
def test_graph_functions_refuse_an_unfitted_estimator_and_a_non_boolean_include_self(points, function):
    with pytest.raises(neighbors.NotFittedError):
        function(distances.NearestNeighbors(), 2)
    with pytest.raises(TypeError, match="include_self must be True or False, got 'auto'"):
        function(points, 2, include_self="auto")


# --------------------------------------------------------------------------- pairwise_distances_chunked


@pytest.mark.parametrize("working_memory", [0, 0.001, None])
@pytest.mark.parametrize("metric", ["euclidean", "cityblock", "cosine"])
def test_chunked_like_scikit_learn(points, working_memory, metric):
    Y = points[::3]
    for y in (None, Y, sp.csr_matrix(Y)):
        got = list(distances.pairwise_distances_chunked(points, y, metric=metric, working_memory=working_memory))
        want = list(sk_chunked(points, y, metric=metric, working_memory=working_memory))
        assert [g.shape for g in got] == [w.shape for w in want]  # the same bands
        # against cdist: scikit-learn's euclidean leaves 1e-7 where a row of Y is a row of X
        exact = cdist(points, points if y is None else Y, metric)
        np.testing.assert_allclose(np.vstack(got), exact, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.vstack(want), exact, rtol=1e-6, atol=1e-6)


def test_chunked_reduce_func_gets_each_bands_start(points):
    def reduce(D, start):
        assert D.shape[1] == len(points)
        return [np.flatnonzero(d < 1.0) for d in D], np.full(D.shape[0], start)

    got = list(distances.pairwise_distances_chunked(points, reduce_func=reduce, working_memory=0.002))
    want = list(sk_chunked(points, reduce_func=reduce, working_memory=0.002))
    assert len(got) == len(want) > 1
    for (gn, gs), (wn, ws) in zip(got, want):
        np.testing.assert_array_equal(gs, ws)
        for a, b in zip(gn, wn):
            np.testing.assert_array_equal(a, b)


def test_chunked_with_parameters_and_precomputed(points):
    got = np.vstack(list(distances.pairwise_distances_chunked(points, metric="minkowski", p=3, working_memory=0.001)))
    np.testing.assert_allclose(got, cdist(points, points, "minkowski", p=3), rtol=1e-9)
    D = cdist(points, points)
    bands = list(distances.pairwise_distances_chunked(D, metric="precomputed", working_memory=0.001))
    assert len(bands) > 1
    np.testing.assert_array_equal(np.vstack(bands), D)


@pytest.mark.parametrize(
    "reduce, error, match",
    [
        (lambda D, s: 3, TypeError, "reduce_func returned 3. Expected sequence"),
        (lambda D, s: D[:-1], ValueError, "Expected same length as input"),
        (lambda D, s: (D, D[:1]), ValueError, "Expected same length as input"),
    ],
)
def test_chunked_reduce_func_checked(points, reduce, error, match):
    with pytest.raises(error, match=match):
        next(distances.pairwise_distances_chunked(points, reduce_func=reduce))


def test_chunked_rules(points):
    with pytest.raises(ValueError, match="working_memory must be a finite number of MiB >= 0"):
        next(distances.pairwise_distances_chunked(points, working_memory=-1))
    with pytest.raises(TypeError, match="reduce_func must be a callable"):
        next(distances.pairwise_distances_chunked(points, reduce_func=3))
    assert next(distances.pairwise_distances_chunked(points, reduce_func=lambda D, s: None)) is None
