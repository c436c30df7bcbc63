"""Bad input gets a clear error naming the argument and the rule; no input is modified."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist

import semiring
from semiring import distances


def small():
    return sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))


def test_width_mismatch():
    with pytest.raises(ValueError, match="X has 3 columns but Y has 4"):
        distances.pairwise_distances(small(), sp.random(2, 4, density=0.5, format="csr"))
    with pytest.raises(ValueError, match="X has 3 columns but Y has 2"):
        semiring.pairwise(small(), np.ones((1, 2)), semiring.plus_times)


@pytest.mark.parametrize("bad, word", [(np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "infinity")])
@pytest.mark.parametrize("where", ["X", "Y"])
def test_nan_and_inf(bad, word, where):
    A = small()
    B = small()
    (A if where == "X" else B).data[0] = bad
    with pytest.raises(ValueError, match=f"{where} contains {word}"):
        distances.pairwise_distances(A, B, metric="cityblock")


def test_nan_rejected_by_semirings_inf_accepted():
    A = small()
    A.data[0] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        semiring.pairwise(A, None, semiring.plus_times)


@pytest.mark.parametrize("metric", ["kldivergence", "jensenshannon", "hellinger"])
@pytest.mark.parametrize("where", ["X", "Y"])
def test_negative_values_where_forbidden(metric, where):
    A, B = small(), small()
    (A if where == "X" else B).data[1] = -0.5
    with pytest.raises(ValueError, match=f"{where} contains negative values.*{metric}.*non-negative"):
        distances.pairwise_distances(A, B, metric=metric)


def test_unknown_metric_lists_known_ones():
    with pytest.raises(ValueError, match="unknown metric 'eucliden'; known metrics: .*braycurtis.*euclidean"):
        distances.pairwise_distances(small(), metric="eucliden")


@pytest.mark.parametrize("p", [0, -1, -0.5, np.nan])
def test_minkowski_p_must_be_positive(p):
    with pytest.raises(ValueError, match="p must be > 0"):
        distances.pairwise_distances(small(), metric="minkowski", p=p)


def test_minkowski_p_type_and_unknown_params():
    with pytest.raises(TypeError, match="p must be a real number"):
        distances.pairwise_distances(small(), metric="minkowski", p="2")
    with pytest.raises(TypeError, match="metric 'euclidean' got unexpected parameter.*'q'.*takes no parameters"):
        distances.pairwise_distances(small(), metric="euclidean", q=np.ones(3))  # w= is SciPy's weights: taken


@pytest.mark.parametrize(
    "bad", [np.array([["a", "b"]]), np.array([[1 + 2j, 0]]), np.array([[None, 1.0]], dtype=object)]
)
def test_wrong_dtypes(bad):
    with pytest.raises(TypeError, match="X has dtype .*values must be real numbers"):
        distances.pairwise_distances(bad)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.ones(3), "X must be 2-D"),
        (np.ones((2, 2, 2)), "X must be 2-D"),
        ("abc", "X must be a sparse matrix"),
        (None, "X must be a sparse matrix"),
    ],
)
def test_wrong_shapes_and_types(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        distances.pairwise_distances(bad)


def test_malformed_csr_is_refused_not_read_out_of_bounds():
    A = small()
    A.indices[0] = 7  # column 7 in a 3-column matrix
    with pytest.raises(ValueError, match=r"X: column indices must lie in \[0, 3\)"):
        distances.pairwise_distances(A)
    B = small()
    B.indptr[1] = 5
    with pytest.raises(ValueError, match="indptr"):
        semiring.pairwise(B, None, semiring.plus_times)


def test_unknown_backend():
    with pytest.raises(ValueError, match="backend must be one of"):
        distances.pairwise_distances(small(), backend="tpu")


def test_mask_checks():
    with pytest.raises(ValueError, match=r"mask has shape \(3, 3\) but the result has shape \(2, 2\)"):
        semiring.pairwise(small(), None, semiring.plus_times, mask=sp.eye(3, format="csr"))
    with pytest.raises(TypeError, match="mask must be a SciPy sparse matrix"):
        semiring.pairwise(small(), None, semiring.plus_times, mask=np.eye(2))


def unsorted_with_duplicates():
    """Row 0 stores column 2 before column 0, and column 2 twice (1 + 2 = 3 in total)."""
    data = np.array([1.0, 5.0, 2.0, 4.0])
    indices = np.array([2, 0, 2, 1], dtype=np.int32)
    indptr = np.array([0, 3, 4], dtype=np.int32)
    return sp.csr_matrix((data, indices, indptr), shape=(2, 3))


@pytest.mark.parametrize("metric", ["euclidean", "cityblock", "cosine", "jaccard", "jensenshannon"])
def test_unsorted_and_duplicate_indices_are_canonicalised_on_a_copy(metric):
    A = unsorted_with_duplicates()
    before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
    got = distances.pairwise_distances(A, metric=metric)
    dense = np.array([[5.0, 0.0, 3.0], [0.0, 4.0, 0.0]])
    np.testing.assert_allclose(
        got, cdist(dense != 0, dense != 0, metric) if metric == "jaccard" else cdist(dense, dense, metric), rtol=1e-12
    )
    for now, then in zip((A.data, A.indices, A.indptr), before):
        np.testing.assert_array_equal(now, then)


@st.composite
def scrambled_csr(draw):
    """A CSR matrix with rows out of order, each column stored at most twice in a row (a repeat: two stored values
    sum exactly, in either order), explicit zeros, empty rows, one column or many, float32/float64 values and
    int32/int64 indices."""
    m, n = draw(st.integers(0, 6)), draw(st.integers(1, 40))
    cells = st.tuples(st.integers(0, max(m - 1, 0)), st.integers(0, n - 1))
    pairs = draw(st.lists(cells, max_size=30 if m else 0, unique=True))
    pairs += draw(st.lists(st.sampled_from(pairs), max_size=5, unique=True)) if pairs else []  # repeats
    pairs = draw(st.permutations(pairs))
    rows = np.array([r for r, _ in pairs], dtype=np.int64)
    order = np.argsort(rows, kind="stable")  # each row's entries together, columns in drawn order
    cols = np.array([c for _, c in pairs], dtype=np.int64)[order]
    values = st.sampled_from([0.0, 1.0, -2.5, 3.0e-3, 7.0])
    data = np.array(draw(st.lists(values, min_size=len(pairs), max_size=len(pairs))))
    index, dtype = draw(st.sampled_from([np.int32, np.int64])), draw(st.sampled_from([np.float32, np.float64]))
    indptr = np.searchsorted(rows[order], np.arange(m + 1)).astype(index)
    return sp.csr_matrix((data.astype(dtype), cols.astype(index), indptr), shape=(m, n))


@settings(max_examples=60, deadline=None)
@given(A=scrambled_csr())
def test_rows_out_of_order_are_put_in_order_as_scipy_sorts_them(A):
    """Canonical order (rows sorted, repeats summed) equal to SciPy's own on a copy, explicit zeros kept, in the
    input's index type, the input untouched."""
    from semiring import validation

    before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
    want = A.copy()
    want.sum_duplicates()
    got = validation.check_matrix(A, "X")
    assert got.has_canonical_format and got.indices.dtype == got.indptr.dtype == A.indices.dtype
    for g, w in ((got.indptr, want.indptr), (got.indices, want.indices), (got.data, want.data)):
        np.testing.assert_array_equal(g, w)
    for now, then in zip((A.data, A.indices, A.indptr), before):
        np.testing.assert_array_equal(now, then)


def test_no_input_is_modified():
    # One value type for the three (float32, which no path converts): float32 against float64 rows compiled
    # every measure's kernels for two more pairs of types (21 compiles, most of this file's cold run).
    rng = np.random.default_rng(0)
    X = sp.random(6, 8, density=0.4, format="csr", random_state=1, dtype=np.float32)
    Y = sp.random(5, 8, density=0.4, format="coo", random_state=2, dtype=np.float32)
    D = rng.random((4, 8), dtype=np.float32)
    snapshots = [
        (X.data.copy(), X.indices.copy(), X.indptr.copy()),
        (Y.data.copy(), Y.row.copy(), Y.col.copy()),
        D.copy(),
    ]
    for metric in distances.METRICS:
        distances.pairwise_distances(X, Y, metric=metric)
        distances.pairwise_distances(D, X, metric=metric)
    semiring.pairwise(X, Y, semiring.plus_absdiff, mask=sp.random(6, 5, density=0.5, format="csr", random_state=3))
    np.testing.assert_array_equal(X.data, snapshots[0][0])
    np.testing.assert_array_equal(X.indices, snapshots[0][1])
    np.testing.assert_array_equal(Y.data, snapshots[1][0])
    np.testing.assert_array_equal(Y.col, snapshots[1][2])
    np.testing.assert_array_equal(D, snapshots[2])


def test_cuda_backend_explains_why_it_cannot_run():
    if "cuda" in semiring.available_backends():
        pytest.skip("a usable GPU engine is present")
    with pytest.raises(RuntimeError, match="backend='cuda' cannot run"):
        distances.pairwise_distances(small(), backend="cuda")
