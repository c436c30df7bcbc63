"""A measure's cheaper form on nonnegative rows (``Distance.on_nonnegative``: braycurtis's ``Σ|x+y|`` as
``Σx + Σy``) is taken only where no row is negative, and gives SciPy's values either way."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from oracles import assert_neighbors_up_to_ties, correlation_rows, oracle, share_rows, shares_reference, tolerances
from strategies import dense, sparse_pair

from semiring import distances
from semiring.distances.specs import get_metric


def rows(seed: int, m: int, n: int = 30, sign: float = 1.0) -> sp.csr_matrix:
    A = sp.random(m, n, density=0.15, format="csr", random_state=seed) * sign
    A[1] = 0.0  # an empty row: braycurtis of two empty rows is 0/0 = NaN, as SciPy
    A.eliminate_zeros()
    return A


def test_the_form_follows_the_sign_of_every_row():
    spec = get_metric("braycurtis")
    X, Y = rows(0, 6), rows(1, 5)
    assert spec.for_rows(X, Y).terms == spec.terms[:1] and spec.for_rows(X, Y).norms == ("sum",)
    assert spec.for_rows(X, -Y) is spec and spec.for_rows(-X) is spec
    assert get_metric("cityblock").for_rows(X) is get_metric("cityblock")  # no other form: itself


@settings(max_examples=25, deadline=None)
@given(pair=sparse_pair(nonnegative=True))
def test_nonnegative_form_equals_scipy(pair):
    X, Y = pair
    got = distances.pairwise_distances(X, Y, metric="braycurtis")
    ref = oracle("braycurtis", dense(X), dense(Y))
    np.testing.assert_allclose(got, ref, **tolerances("braycurtis", got.dtype), equal_nan=True)


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_either_form_with_weights_and_against_itself(sign, dtype):
    X, Y = rows(2, 40).astype(dtype), rows(3, 25, sign=sign).astype(dtype)
    w = np.random.default_rng(4).uniform(0.0, 2.0, X.shape[1])
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for A, B in ((X, Y), (X, X)):
        got = distances.pairwise_distances(A, B, metric="braycurtis", w=w)
        ref = oracle("braycurtis", dense(A), dense(B), w=w)
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol, equal_nan=True)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_neighbors_take_the_form_of_index_and_queries(sign):
    X, Q = rows(5, 60), rows(6, 12, sign=sign)
    nn = distances.NearestNeighbors(n_neighbors=4, metric="braycurtis").fit(X)
    dist, ind = nn.kneighbors(Q)
    assert_neighbors_up_to_ties(dist, ind, oracle("braycurtis", dense(Q), dense(X)), 4)
    dist, ind = nn.kneighbors()  # the fitted rows themselves, after a query of the other sign
    assert_neighbors_up_to_ties(dist, ind, oracle("braycurtis", dense(X), dense(X)), 4, exclude_self=True)


# --------------------------------------------------------------------------- row terms


def test_row_terms_take_the_places_of_the_norms():
    """A measure's row terms (``Distance.row_terms``) replace its norms one for one; the forms without them read
    their own norms raw."""
    from semiring.distances.specs import DISTANCES

    for d in DISTANCES:
        assert not d.row_terms or len(d.row_terms) == len(d.norms), d.name
    spec = get_metric("correlation")
    assert spec.row_terms and len(spec.row_term_trees) == 2


def test_correlation_row_terms_against_numpy():
    """The CPU engine's row terms of correlation against NumPy in float64: Σx/√n and the centred sum of squares,
    0 for the zero row, NaN where it cancels (the constant row, the large mean) so their pairs are flagged."""
    from semiring.distances.specs import NORMS, expression
    from semiring.kernels.cpu import ENGINE

    spec, A = get_metric("correlation"), correlation_rows()
    n = A.shape[1]
    trees = [expression(NORMS[name], ("x",)) for name in spec.norms]
    a, v = ENGINE.row_norms(A, trees, np.float64, spec.row_term_trees)
    dense_rows = A.toarray()
    np.testing.assert_allclose(a, dense_rows.sum(axis=1) / np.sqrt(n), rtol=1e-15)
    centred = ((dense_rows - dense_rows.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    np.testing.assert_allclose(v[[0, 4]], centred[[0, 4]], rtol=1e-12)
    assert v[1] == 0.0 and np.isnan(v[2]) and np.isnan(v[3])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_correlation_of_awkward_rows_equals_scipy_and_a_row_against_itself_is_0(dtype, monkeypatch):
    """Through the public call: the rows above against themselves equal SciPy (NaN for the zero and the constant
    row, the cancelling ones recomputed exactly), and each ordinary row's distance to itself is exactly 0 on the
    sparse kernels (its product summed as its Σx² is: the covariance is the row term itself)."""
    import semiring.settings

    monkeypatch.setenv(semiring.settings.CPU_DENSE.name, "never")
    A = correlation_rows().astype(dtype)
    got = distances.pairwise_distances(A, metric="correlation", backend="cpu")
    with np.errstate(all="ignore"):
        ref = oracle("correlation", dense(A).astype(np.float64), dense(A).astype(np.float64))
    np.testing.assert_allclose(got, ref, **tolerances("correlation", got.dtype), equal_nan=True)
    assert np.isnan(got[1]).all() and np.isnan(got[2]).all()
    assert got[0, 0] == 0.0 and got[4, 4] == 0.0


# --------------------------------------------------------------------------- rows divided by their sums


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("root", [False, True])
def test_row_shares_against_numpy(dtype, root):
    """The CPU engine's rows divided by their float64 sums against NumPy on the rows in float64 (and the square
    roots): empty and zero rows give 0; a row whose sum overflows the values' type is scaled, not lost."""
    from semiring.kernels.cpu import ENGINE

    A = share_rows(dtype)
    got = ENGINE.row_shares(A.indptr, A.data, root)
    assert got.dtype == dtype and got.shape == A.data.shape
    want = shares_reference(A, root)
    # shares below the type's normal range (1e-40 beside 1e38 in a float32 row) keep fewer digits, their roots too
    tiny = np.sqrt(np.finfo(dtype).tiny) if root else np.finfo(dtype).tiny
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13, atol=tiny)
    assert np.isfinite(got).all() and (got > 0).any()
