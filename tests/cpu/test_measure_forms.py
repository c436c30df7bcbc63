"""A measure's cheaper form on nonnegative rows (``Distance.on_nonnegative``: braycurtis's ``Σ|x+y|`` as
``Σx + Σy``) is taken only where no row is negative, and gives SciPy's values either way."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from oracles import assert_neighbors_up_to_ties, oracle, tolerances
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
