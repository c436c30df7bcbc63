"""Every metric against SciPy's cdist on the densified input (or a float64 NumPy oracle)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.distance import cdist
from scipy.special import rel_entr
from strategies import dense, sparse_pair

from semiring import distances
from semiring.distances.specs import DISTANCES

NONNEGATIVE = {d.name for d in DISTANCES if d.nonnegative}


def oracle(name: str, Xd: np.ndarray, Yd: np.ndarray, **params) -> np.ndarray:
    """The reference value, computed densely in float64 by SciPy or NumPy."""
    spec = distances.get_metric(name)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if spec.prepare == "binary":
            ref = cdist(Xd != 0, Yd != 0, spec.scipy)
            if name == "dice":  # documented: two empty rows are at distance 0 (SciPy: NaN)
                both_empty = (~Xd.any(1))[:, None] & (~Yd.any(1))[None, :]
                ref[both_empty] = 0.0
            return ref
        if name == "jensenshannon":
            # SciPy's definition in float64, with its rounding below 0 clamped before the square root:
            # cdist's loop returns NaN for e.g. [1, 0] against [843.5, 0] (true value 0) and inf for an
            # all-zero row, where scipy's jensenshannon() and we return NaN (0/0 normalisation).
            P, Q = Xd / Xd.sum(1, keepdims=True), Yd / Yd.sum(1, keepdims=True)
            M = (P[:, None, :] + Q[None, :, :]) / 2
            js = rel_entr(P[:, None, :], M).sum(-1) + rel_entr(Q[None, :, :], M).sum(-1)
            return np.sqrt(np.maximum(js, 0) / 2)
        if spec.scipy:
            return cdist(Xd, Yd, spec.scipy, **params)
        if name == "kldivergence":
            return rel_entr(Xd[:, None, :], Yd[None, :, :]).sum(-1)
        if name == "inner_product":
            return Xd @ Yd.T
        if name == "hellinger":  # the stable form of sqrt(1 - Σ sqrt(p q)) for distributions p, q
            P, Q = Xd / Xd.sum(1, keepdims=True), Yd / Yd.sum(1, keepdims=True)
            return np.sqrt(0.5 * ((np.sqrt(P)[:, None, :] - np.sqrt(Q)[None, :, :]) ** 2).sum(-1))
    raise AssertionError(f"no oracle for {name}")


def tolerances(name: str, dtype) -> dict:
    # 1 - x·y/(|x||y|) near 0 cancels in SciPy itself: its own error is ~1e-16 there.
    atol = 1e-12 if name in ("cosine", "correlation") else 0.0
    return {"rtol": 1e-4 if dtype == np.float32 else 1e-9, "atol": atol}


def constant_rows(A: np.ndarray) -> np.ndarray:
    """Rows whose values are all equal: correlation is 0/0 there, and SciPy's answer is rounding noise."""
    return (A.max(1) == A.min(1)) if A.shape[1] else np.ones(A.shape[0], bool)


def check_metric(name: str, X, Y, **params) -> None:
    ours = distances.pairwise_distances(X, Y, metric=name, backend="cpu", **params)
    Xd, Yd = dense(X), dense(Y)
    ref = oracle(name, Xd, Yd, **params)
    dtype = np.float32 if X.dtype == Y.dtype == np.float32 else np.float64
    assert ours.shape == ref.shape and ours.dtype == dtype
    if name == "correlation":
        ill = constant_rows(Xd)[:, None] | constant_rows(Yd)[None, :]
        ours, ref = ours[~ill], ref[~ill]
    np.testing.assert_allclose(ours, ref, equal_nan=True, err_msg=name, **tolerances(name, dtype))


@pytest.mark.parametrize("name", [d.name for d in DISTANCES])
@given(data=st.data())
def test_metric_matches_oracle(name, data):
    X, Y = data.draw(sparse_pair(nonnegative=name in NONNEGATIVE))
    check_metric(name, X, Y)


@pytest.mark.parametrize("p", [0.5, 1.0, 1.5, 2.0, 3.0, 7.0])
@given(data=st.data())
def test_minkowski_any_p(p, data):
    X, Y = data.draw(sparse_pair(dtype=np.float64))
    check_metric("minkowski", X, Y, p=p)


def test_minkowski_odd_p_takes_absolute_value():
    X = np.array([[0.0, 1.0, -2.0]])
    Y = np.array([[1.0, -1.0, 0.0]])
    got = distances.pairwise_distances(X, Y, metric="minkowski", p=3)
    assert got[0, 0] == pytest.approx((1 + 8 + 8) ** (1 / 3), rel=1e-12)


def test_minkowski_p_inf_is_chebyshev(rng):
    X = sp.random(6, 9, density=0.4, random_state=1, format="csr")
    np.testing.assert_array_equal(
        distances.pairwise_distances(X, metric="minkowski", p=np.inf),
        distances.pairwise_distances(X, metric="chebyshev"),
    )


@pytest.mark.parametrize(
    "alias, name",
    [
        ("manhattan", "cityblock"),
        ("l1", "cityblock"),
        ("l2", "euclidean"),
        ("linf", "chebyshev"),
        ("dot", "inner_product"),
        ("EUCLIDEAN", "euclidean"),
    ],
)
def test_aliases(alias, name):
    X = sp.random(5, 7, density=0.5, random_state=3, format="csr")
    np.testing.assert_array_equal(
        distances.pairwise_distances(X, metric=alias), distances.pairwise_distances(X, metric=name)
    )


def test_y_none_is_x_against_itself():
    X = sp.random(6, 5, density=0.5, random_state=4, format="csr")
    np.testing.assert_allclose(distances.pairwise_distances(X), cdist(X.toarray(), X.toarray()), rtol=1e-12)


@pytest.mark.parametrize("name", ["euclidean", "sqeuclidean"])
def test_near_duplicates_are_not_lost_to_cancellation(name):
    # d^2 = 1e-12 next to norms of 1: the expanded form alone leaves only rounding noise here.
    X = np.array([[1.0, 0.0, 1e-6, 3.0]])
    Y = np.array([[1.0, 0.0, 0.0, 3.0], [1.0, 0.0, 1e-6, 3.0]])
    np.testing.assert_allclose(distances.pairwise_distances(X, Y, metric=name), cdist(X, Y, name), rtol=1e-12, atol=0)


def test_hellinger_near_duplicates_exact():
    X = np.array([[1.0, 2.0, 3.0]])
    Y = np.array([[1.0, 2.0, 3.0 + 1e-7]])
    got = distances.pairwise_distances(X, Y, metric="hellinger")
    np.testing.assert_allclose(got, oracle("hellinger", X, Y), rtol=1e-9)


@pytest.mark.parametrize("name", [d.name for d in DISTANCES])
def test_huge_sparse_dimension(name):
    """2**40 columns, a few nonzeros: same answer as the same data on 8 columns (n-free metrics)."""
    small = sp.csr_matrix(np.array([[1.0, 0, 2, 0, 0, 3, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0], [0.5, 1, 0, 0, 4, 0, 0, 2]]))
    spread = np.array([0, 7, 1 << 20, 1 << 30, (1 << 40) - 9, 12345, 99, (1 << 40) - 1], dtype=np.int64)
    order = np.argsort(spread)  # keep columns sorted after spreading
    small = small[:, order]
    big = small.tocoo()
    big = sp.csr_matrix((big.data, (big.row, np.sort(spread)[big.col])), shape=(3, 1 << 40))
    got = distances.pairwise_distances(big, metric=name)
    if name in ("hamming", "russellrao", "correlation"):
        n = 1 << 40
        c = small.toarray()
        if name == "hamming":
            want = (c[:, None, :] != c[None, :, :]).sum(-1) / n
        elif name == "russellrao":
            want = (n - (c != 0).astype(float) @ (c != 0).T.astype(float)) / n
        else:
            s, q = c.sum(1), (c * c).sum(1)
            cov = c @ c.T - np.outer(s, s) / n
            var = q - s * s / n
            with np.errstate(all="ignore"):
                want = np.clip(1 - cov / np.sqrt(np.outer(var, var)), 0, 2)
        np.testing.assert_allclose(got, want, rtol=1e-9, equal_nan=True)
    else:
        want = distances.pairwise_distances(small, metric=name)
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


def test_empty_matrices_and_zero_columns():
    empty = sp.csr_matrix((0, 4))
    X = sp.random(3, 4, density=0.5, random_state=0, format="csr")
    assert distances.pairwise_distances(empty, X).shape == (0, 3)
    assert distances.pairwise_distances(X, empty).shape == (3, 0)
    no_cols = sp.csr_matrix((3, 0))
    np.testing.assert_array_equal(distances.pairwise_distances(no_cols, metric="euclidean"), np.zeros((3, 3)))
    np.testing.assert_array_equal(distances.pairwise_distances(no_cols, metric="cityblock"), np.zeros((3, 3)))


@pytest.mark.parametrize(
    "convert",
    [
        lambda A: A,
        lambda A: A.tocsc(),
        lambda A: A.tocoo(),
        lambda A: sp.csr_array(A),
        lambda A: sp.coo_array(A),
        lambda A: A.toarray(),
        lambda A: A.toarray().tolist(),
        lambda A: A.astype(np.int64),
        lambda A: A != 0,
    ],
    ids=["csr", "csc", "coo", "csr_array", "coo_array", "ndarray", "list", "int64 values", "bool values"],
)
def test_input_forms(convert):
    A = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 0], [3, 4, 0]]))
    got = distances.pairwise_distances(convert(A), metric="cityblock")
    ref_input = np.asarray(convert(A).toarray() if sp.issparse(convert(A)) else convert(A), dtype=float)
    np.testing.assert_allclose(got, cdist(ref_input, ref_input, "cityblock"))


@pytest.mark.parametrize("name", ["euclidean", "cosine", "braycurtis", "jensenshannon", "hellinger", "minkowski"])
@given(data=st.data(), rows_per_batch=st.integers(1, 3))
def test_batches_give_the_one_pass_result(name, data, rows_per_batch):
    X, Y = data.draw(sparse_pair(nonnegative=name in NONNEGATIVE, dtype=np.float64))
    whole = distances.pairwise_distances(X, Y, metric=name)
    spec = distances.get_metric(name)
    per_row = max(1, Y.shape[0]) * (8 * len(spec.terms) + 8)
    batched = distances.pairwise_distances(X, Y, metric=name, working_memory=rows_per_batch * per_row / 2**20)
    np.testing.assert_array_equal(batched, whole)


def test_working_memory_must_be_positive():
    with pytest.raises(ValueError, match="working_memory must be > 0"):
        distances.pairwise_distances(np.eye(2), working_memory=0)
