"""SciPy parity of ``pairwise_distances``: ``w=``, ``V=``, ``out=``, jensenshannon's ``base=``, ``mask=``, the
refused metrics, against ``scipy.spatial.distance`` on the densified input (CPU engine)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import NONNEGATIVE, ill_posed, oracle, tolerances
from scipy.spatial.distance import cdist, jensenshannon
from strategies import dense, sparse_pair

from semiring import distances
from semiring.distances.specs import DISTANCES

WEIGHTED = sorted(d.name for d in DISTANCES if d.columns is not None and d.columns.name == "w")


def test_the_weighted_measures():
    """w= where the weighted measure is the measure on scaled columns; the others refuse it (below)."""
    assert WEIGHTED == ["braycurtis", "chebyshev", "cityblock", "cosine", "euclidean", "minkowski", "sqeuclidean"]


def _weights(data, n: int) -> np.ndarray:
    return np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.7]), min_size=n, max_size=n)))


@pytest.mark.parametrize("name", WEIGHTED)
@settings(max_examples=12)
@given(data=st.data())
def test_w_matches_cdist(name, data):
    X, Y = data.draw(sparse_pair(dtype=np.float64))
    w = _weights(data, X.shape[1])
    params = {"p": data.draw(st.sampled_from([1.0, 1.5, 3.0]))} if name == "minkowski" else {}
    ours = distances.pairwise_distances(X, Y, metric=name, backend="cpu", w=w, **params)
    with np.errstate(all="ignore"):
        ref = cdist(dense(X), dense(Y), name, w=w, **params)
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12, equal_nan=True)


def test_w_with_p_inf_is_weighted_chebyshev():
    X = sp.random(5, 6, density=0.6, random_state=2, format="csr")
    w = np.array([0.0, 1.0, 2.0, 0.0, 0.5, 1.0])
    ours = distances.pairwise_distances(X, metric="minkowski", p=np.inf, w=w, backend="cpu")
    np.testing.assert_allclose(ours, cdist(X.toarray(), X.toarray(), "minkowski", p=np.inf, w=w), rtol=1e-12)


@pytest.mark.parametrize(
    "name, w, error, match",
    [
        ("hamming", [1.0, 1.0], TypeError, "metric 'hamming' takes no weights w.*w= is taken by braycurtis"),
        ("cityblock", [1.0], ValueError, r"w must be 1-D with one value per column \(2\) for cityblock"),
        ("cityblock", [1.0, -1.0], ValueError, "w must be finite and >= 0 for cityblock, got -1.0 at column 1"),
        ("cityblock", [1.0, np.nan], ValueError, "w must be finite and >= 0"),
        ("cityblock", ["a", "b"], TypeError, "w must be an array of real numbers"),
    ],
)
def test_bad_w_named(name, w, error, match):
    with pytest.raises(error, match=match):
        distances.pairwise_distances(np.eye(2), metric=name, w=w, backend="cpu")


def test_seuclidean_default_and_given_v(rng):
    X = sp.random(7, 5, density=0.7, random_state=3, format="csr")
    Y = sp.random(4, 5, density=0.7, random_state=4, format="csr")
    Xd, Yd = X.toarray(), Y.toarray()
    np.testing.assert_allclose(
        distances.pairwise_distances(X, Y, metric="seuclidean", backend="cpu"), cdist(Xd, Yd, "seuclidean"), rtol=1e-9
    )
    # X against itself: the variance of X's rows, as pdist (not of X stacked on itself)
    np.testing.assert_allclose(
        distances.pairwise_distances(X, metric="seuclidean", backend="cpu"),
        cdist(Xd, Xd, "seuclidean", V=Xd.var(0, ddof=1)),
        rtol=1e-9,
    )
    V = np.array([0.5, 1.0, 2.0, 3.0, 0.25])
    np.testing.assert_allclose(
        distances.pairwise_distances(X, Y, metric="seuclidean", V=V, backend="cpu"),
        cdist(Xd, Yd, "seuclidean", V=V),
        rtol=1e-9,
    )


def test_seuclidean_refuses_what_scipy_turns_into_nan():
    X = np.array([[1.0, 2.0], [1.0, 3.0]])  # column 0 is constant: SciPy's V is 0 there, every distance NaN
    with pytest.raises(ValueError, match="column 0 is constant.*pass V="):
        distances.pairwise_distances(X, metric="seuclidean", backend="cpu")
    with pytest.raises(ValueError, match="fewer than 2 rows"):
        distances.pairwise_distances(np.array([[1.0, 2.0]]), metric="seuclidean", backend="cpu")
    # a column with no stored value, found from the stored columns (fewer values than columns) or their counts
    for rows, empty in (([[1.0, 0, 0], [2.0, 0, 0]], 1), ([[1.0, 1, 0], [2.0, 0, 0], [3.0, 1, 0], [1.0, 2, 0]], 2)):
        with pytest.raises(ValueError, match=f"column {empty} is constant"):
            distances.pairwise_distances(sp.csr_matrix(rows), metric="seuclidean", backend="cpu")
    with pytest.raises(ValueError, match="V must be finite and > 0 for seuclidean, got 0.0 at column 1"):
        distances.pairwise_distances(X, metric="seuclidean", V=[1.0, 0.0], backend="cpu")


@pytest.mark.parametrize("base", [2.0, 10.0])
def test_jensenshannon_base(base):
    X = sp.random(5, 6, density=0.6, random_state=5, format="csr")
    Y = sp.random(3, 6, density=0.6, random_state=6, format="csr")
    ours = distances.pairwise_distances(X, Y, metric="jensenshannon", base=base, backend="cpu")
    ref = np.array([[jensenshannon(x, y, base=base) for y in Y.toarray()] for x in X.toarray()])
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)
    for bad in (1.0, 0.5, np.inf):  # SciPy: inf, NaN (a negative divergence's square root), 0
        with pytest.raises(ValueError, match=r"base must be > 1 \(and finite\) for jensenshannon"):
            distances.pairwise_distances(X, metric="jensenshannon", base=bad, backend="cpu")


def test_out_is_written_and_returned():
    X = sp.random(6, 5, density=0.5, random_state=7, format="csr")
    out = np.full((6, 6), -1.0)
    got = distances.pairwise_distances(X, metric="cityblock", out=out, backend="cpu")
    assert got is out
    np.testing.assert_allclose(out, cdist(X.toarray(), X.toarray(), "cityblock"))
    batched = np.empty((6, 6))
    distances.pairwise_distances(X, metric="cityblock", out=batched, working_memory=100 / 2**20, backend="cpu")
    np.testing.assert_array_equal(batched, out)  # tiles land in out too
    for bad in (np.empty((6, 5)), np.empty((6, 6), np.float32), np.empty((6, 6))[:, ::-1], [[0.0] * 6] * 6):
        with pytest.raises(ValueError, match=r"out must be a C-contiguous numpy array of shape \(6, 6\)"):
            distances.pairwise_distances(X, metric="cityblock", out=bad, backend="cpu")


# ---------------------------------------------------------------------------------------------- mask=

# every kind of expansion: terms only, a term and norms (X's norms in a free term slot), correlation's
# four norms (row by row), refinements (euclidean), boolean measures
MASKED = ["braycurtis", "cosine", "euclidean", "correlation", "jaccard", "jensenshannon", "cityblock"]


@pytest.mark.parametrize("name", MASKED)
@settings(max_examples=12)
@given(data=st.data())
def test_mask_gives_the_dense_values_at_its_pattern(name, data):
    # int32 indices: the index type is the masked kernel's skeleton's concern, int64 in tests/cpu/test_cpu_engine.py
    X, Y = data.draw(sparse_pair(nonnegative=name in NONNEGATIVE, index=np.int32))
    m, p = X.shape[0], Y.shape[0]
    pattern = np.array(data.draw(st.lists(st.booleans(), min_size=m * p, max_size=m * p)), bool).reshape(m, p)
    M = sp.csr_matrix(pattern.astype(float))
    got = distances.pairwise_distances(X, Y, metric=name, mask=M, backend="cpu")
    assert isinstance(got, sp.csr_matrix) and got.shape == (m, p)
    np.testing.assert_array_equal(got.indptr, M.indptr)
    np.testing.assert_array_equal(got.indices, M.indices)
    Xd, Yd = dense(X), dense(Y)
    ref = oracle(name, Xd, Yd)
    rows, cols = np.repeat(np.arange(m), np.diff(M.indptr)), M.indices
    keep = ~ill_posed(name, Xd, Yd)[rows, cols]
    dtype = np.float32 if X.dtype == Y.dtype == np.float32 else np.float64
    np.testing.assert_allclose(
        got.data[keep], ref[rows, cols][keep], equal_nan=True, err_msg=name, **tolerances(name, dtype)
    )


def test_mask_keeps_the_array_kind_and_refuses_bad_masks():
    X = sp.random(4, 3, density=0.6, random_state=8, format="csr")
    M = sp.csr_array(np.eye(4))
    got = distances.pairwise_distances(X, metric="euclidean", mask=M, backend="cpu")
    assert isinstance(got, sp.csr_array)
    np.testing.assert_allclose(got.data, 0.0)
    with pytest.raises(ValueError, match=r"mask has shape \(3, 3\) but the result has shape \(4, 4\)"):
        distances.pairwise_distances(X, mask=sp.eye(3), backend="cpu")
    with pytest.raises(ValueError, match="out= takes a dense host result"):
        distances.pairwise_distances(X, mask=M, out=np.empty((4, 4)), backend="cpu")


# ------------------------------------------------------------------------------------ refusals, aliases


def test_refused_metrics_say_why():
    with pytest.raises(ValueError, match="metric 'mahalanobis' is not supported: it needs the inverse covariance"):
        distances.pairwise_distances(np.eye(2), metric="mahalanobis")
    with pytest.raises(TypeError, match="metric must be the name of a measure, got the callable 'dist'"):

        def dist(x, y):
            return 0.0

        distances.pairwise_distances(np.eye(2), metric=dist)


def test_kl_divergence_is_cumls_definition():
    """½ Σ x (log x − log y), log 0 read as 0: finite where SciPy's rel_entr (our kldivergence) is inf."""
    X = np.array([[0.2, 0.8, 0.0], [1.0, 0.0, 0.0]])
    Y = np.array([[0.5, 0.0, 0.5]])
    ours = distances.pairwise_distances(X, Y, metric="kl_divergence", backend="cpu")
    want = [[0.5 * (0.2 * (np.log(0.2) - np.log(0.5)) + 0.8 * np.log(0.8))], [0.5 * (1.0 * (0.0 - np.log(0.5)))]]
    np.testing.assert_allclose(ours, want, rtol=1e-12)
    assert np.isinf(distances.pairwise_distances(X, Y, metric="kldivergence", backend="cpu")[0, 0])


def test_n_jobs_and_ensure_all_finite():
    import numba

    X = sp.random(5, 4, density=0.5, random_state=9, format="csr")
    before = numba.get_num_threads()
    want = cdist(X.toarray(), X.toarray(), "cosine")
    for n_jobs in (1, -1, 4, None):
        np.testing.assert_allclose(distances.pairwise_distances(X, metric="cosine", n_jobs=n_jobs), want, atol=1e-12)
        assert numba.get_num_threads() == before  # restored
    for bad in (0, 1.5, "all", True):
        with pytest.raises(ValueError, match="n_jobs must be None or a nonzero integer"):
            distances.pairwise_distances(X, n_jobs=bad)
    assert distances.pairwise_distances(X, ensure_all_finite=True).shape == (5, 5)
    for value in (False, "allow-nan"):
        with pytest.raises(ValueError, match=f"ensure_all_finite={value!r} is not supported"):
            distances.pairwise_distances(X, ensure_all_finite=value)


def test_n_jobs_sets_the_threads_during_the_call(monkeypatch):
    import numba

    from semiring.distances import bound

    seen = []
    block = bound.BoundMeasure.block
    monkeypatch.setattr(bound.BoundMeasure, "block", lambda *a: seen.append(numba.get_num_threads()) or block(*a))
    distances.pairwise_distances(np.eye(3), n_jobs=1, backend="cpu")
    assert seen == [1]
