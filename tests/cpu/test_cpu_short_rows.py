"""The three dense intersection kernels of the CPU engine (the ``rows``, ``spgemm`` and ``inverted`` entries of
``strategies``): the row kernel (each X row against ranges of Y rows, for short rows such as EDGAR's), the sparse
result's kernels written dense (for many products an entry) and the inverted kernel (Y rows against a block of X
rows indexed by column, where the sparse result does not fit), forced through ``$SEMIRING_CPU_INTERSECTION``:
each gives SciPy's ``cdist``, a dense float64 product and a float64 reference of other semirings, and all give
the same bits.

Inputs: short rows over a wide column space, explicitly stored zeros, empty rows, and copies of X's rows in Y
(euclidean's near-duplicates, recomputed exactly); the ranges are made small so that a call spans several ranges
and several blocks of X rows.
"""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist
from strategies import dense, sparse_pair

import semiring
from semiring import settings, tiling
from semiring.distances import pairwise_distances
from semiring.kernels.cpu import ENGINE
from semiring.kernels.cpu import pairwise as cpu_pairwise
from semiring.kernels.cpu import strategies as cpu_strategies

STRATEGIES = ("rows", "spgemm", "inverted")


def short_rows(rng, m: int, n: int, per_row: int, index_dtype, value_dtype) -> sp.csr_matrix:
    """Up to ``per_row`` entries a row over ``n`` columns, a third of the columns popular (shared by many rows);
    every 7th row empty, about a quarter of the stored values explicit zeros."""
    rows, cols = [], []
    for i in range(m):
        if i % 7 == 3:
            continue
        k = int(rng.integers(1, per_row + 1))
        popular = rng.integers(0, n // 3, k // 2 + 1)
        cols.append(np.unique(np.concatenate([popular, rng.integers(0, n, k)]))[:per_row])
        rows.append(np.full(cols[-1].size, i))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    data = rng.uniform(0.5, 3.0, rows.size) * rng.choice([-1.0, 1.0], rows.size)
    data[rng.random(rows.size) < 0.25] = 0.0
    A = sp.csr_matrix((data.astype(value_dtype), (rows, cols)), shape=(m, n))
    A.sort_indices()
    A.indices, A.indptr = A.indices.astype(index_dtype), A.indptr.astype(index_dtype)
    assert A.has_canonical_format and A.nnz == rows.size  # the explicit zeros stay stored
    return A


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of 16 Y rows and every result expanded in the kernel: a call spans several ranges and blocks."""
    monkeypatch.setattr(cpu_pairwise, "ROW_RANGE", 16)
    monkeypatch.setattr(cpu_strategies, "EXPANDED_MIN_ENTRIES", 0)


@pytest.mark.parametrize(
    ("metric", "index_dtype", "value_dtype"),
    [("cosine", np.int32, np.float32), ("euclidean", np.int64, np.float64)],
)
def test_both_kernels_give_cdist_and_the_same_bits(metric, index_dtype, value_dtype, small_ranges, monkeypatch):
    monkeypatch.setattr(cpu_pairwise, "ROW_INDEX_PARALLEL_ENTRIES", 0)  # the index built across threads here
    rng = np.random.default_rng(14)
    X = short_rows(rng, 40, 3000, 6, index_dtype, value_dtype)
    Y = sp.vstack([short_rows(rng, 90, 3000, 6, index_dtype, value_dtype), X[:9]], format="csr")
    Y.indices, Y.indptr = Y.indices.astype(index_dtype), Y.indptr.astype(index_dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = cdist(X.toarray().astype(np.float64), Y.toarray().astype(np.float64), metric)
    results = {}
    for strategy in STRATEGIES:
        monkeypatch.setenv(settings.CPU_INTERSECTION.name, strategy)
        results[strategy] = pairwise_distances(X, Y, metric=metric, backend="cpu")
        assert results[strategy].dtype == value_dtype
        np.testing.assert_allclose(results[strategy], ref, rtol=1e-5, atol=1e-6 * np.nanmax(ref))
    np.testing.assert_array_equal(results["rows"], results["inverted"])
    np.testing.assert_array_equal(results["rows"], results["spgemm"])
    if metric == "euclidean":  # each stored row of X[:9] against its copy: recomputed exactly, 0
        copies = [i for i in range(9) if X.indptr[i + 1] > X.indptr[i]]
        np.testing.assert_array_equal(results["rows"][copies, [90 + i for i in copies]], 0.0)


def test_both_kernels_give_the_plain_product(small_ranges, monkeypatch):
    """Without a measure: the product itself, a float64 dense oracle's, the same bits on both kernels (the row
    index built in the calling thread, Y being small)."""
    rng = np.random.default_rng(15)
    X = short_rows(rng, 33, 500, 5, np.int32, np.float64)
    Y = short_rows(rng, 70, 500, 5, np.int64, np.float64)
    results = {}
    for strategy in STRATEGIES:
        monkeypatch.setenv(settings.CPU_INTERSECTION.name, strategy)
        results[strategy] = ENGINE.pairwise(X, Y, semiring.plus_times, np.float64)
        np.testing.assert_allclose(results[strategy], X.toarray() @ Y.toarray().T, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(results["rows"], results["inverted"])
    np.testing.assert_array_equal(results["rows"], results["spgemm"])


def test_the_row_kernel_is_chosen_for_few_products_an_entry():
    """Short rows (a few products a result entry) take the row kernel; rows sharing every column (a product an
    entry per column, past ``SPGEMM_ENTRY_PRODUCTS``; X against itself, past twice that where the row kernel
    forms half of them) the sparse kernels written dense, or the inverted one where their CSR does not fit the
    scratch budget.  The row index (counted, then placed) holds Y's entries in the
    columns X holds, a slot per X column."""
    rng = np.random.default_rng(16)
    X, Y = short_rows(rng, 20, 5000, 6, np.int32, np.float64), short_rows(rng, 50, 5000, 6, np.int32, np.float64)
    index = cpu_pairwise.place_row_index(cpu_pairwise.count_row_index(X, X.indices, Y, Y.indices, 5000))
    xs, nslots, width, keyptr, prow, pval = index
    assert nslots == np.unique(X.indices).size and width == 50  # one range: ROW_RANGE rows at least
    held = np.isin(Y.indices, X.indices)  # every Y entry in a column X holds, once
    assert keyptr[-1] == held.sum() and np.array_equal(np.sort(pval), np.sort(Y.data[held]))
    assert np.array_equal(X.indices[:, None] == X.indices, xs[:, None] == xs)  # a slot per column
    assert (prow >= 0).all() and (prow < width).all()

    def chosen(A, B, expanded=False):
        product = cpu_strategies.Product(A, B, semiring.plus_times, "dense", expanded=expanded)
        return cpu_strategies.plan(product).strategy.name

    full = sp.csr_matrix(np.ones((4, cpu_pairwise.ROWS_MAX_PRODUCTS + 1)))  # past the row kernel's products an entry
    s = cpu_pairwise.SPGEMM_ENTRY_PRODUCTS
    at_most, above = sp.csr_matrix(np.ones((4, s))), sp.csr_matrix(np.ones((4, s + 1)))  # s, s + 1 an entry
    twice = sp.csr_matrix(np.ones((4, 2 * s + 1)))
    # Y a copy of X: two objects, every product formed
    assert (chosen(X, Y), chosen(at_most, at_most.copy()), chosen(above, above.copy())) == ("rows", "rows", "spgemm")
    # X against itself, one object: the row kernel forms half the products (j >= i) where it writes the product
    # unexpanded, all of them where it writes a measure's expansion
    assert (chosen(above, above), chosen(twice, twice), chosen(above, above, expanded=True)) == (
        "rows",
        "spgemm",
        "spgemm",
    )
    with tiling.scratch_budget(cpu_pairwise.SPGEMM_ENTRY_BYTES * 16 - 1):  # its CSR beside the result: no room
        assert (chosen(above, above.copy()), chosen(full, full.copy())) == ("rows", "inverted")  # the kernels' rule
    with tiling.scratch_budget(cpu_pairwise.SPGEMM_ENTRY_BYTES * 16):
        assert (chosen(above, above.copy()), chosen(full, full.copy())) == ("spgemm", "spgemm")


def test_an_unknown_intersection_strategy_is_refused(monkeypatch):
    monkeypatch.setenv(settings.CPU_INTERSECTION.name, "columns")
    with pytest.raises(
        ValueError, match="SEMIRING_CPU_INTERSECTION must be one of 'auto', 'rows', 'spgemm', 'inverted', got 'columns'"
    ):
        ENGINE.pairwise(sp.csr_matrix(np.eye(2)), sp.csr_matrix(np.eye(2)), semiring.plus_times, np.float64)


@hypothesis_settings(max_examples=25, deadline=None)
@given(pair=sparse_pair(max_rows=12), width=st.sampled_from([1, 3, 4096]))
def test_rows_against_themselves_form_each_pair_once_with_the_full_products_bits(pair, width):
    """X against itself (one object) under an op that commutes: the row kernel forms entries j >= i only and
    mirrors them (``upper``); the result is the full product's, to the bit (the same terms, exchanged, in the same
    order), and the float64 product of the dense rows.  Ranges of 1 and 3 rows: rows before, on and after the
    diagonal's range.  Empty rows and matrices, explicit zeros, negative values, one column, int32/int64."""
    X = pair[0]
    with (
        mock.patch.object(cpu_pairwise, "ROW_RANGE", width),
        mock.patch.dict(os.environ, {settings.CPU_INTERSECTION.name: "rows"}),
    ):
        assert cpu_strategies.Product(X, X, semiring.plus_times, "dense").upper == (X.shape[0] > 1)
        once = ENGINE.pairwise(X, X, semiring.plus_times, np.float64)
        full = ENGINE.pairwise(X, X.copy(), semiring.plus_times, np.float64)
    np.testing.assert_array_equal(once, full)
    np.testing.assert_allclose(once, dense(X) @ dense(X).T, rtol=1e-12, atol=1e-8)


def test_only_ops_that_commute_form_each_pair_once():
    """``upper`` needs X to be Y and the op to give the same value with its operands exchanged."""
    X = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]]))

    def upper(op, Y=X):
        return cpu_strategies.Product(X, Y, semiring.Semiring(semiring.monoid.plus, op), "dense").upper

    assert upper(semiring.binary_op("y * x")) and upper(semiring.binary_op("min(x, y) * (x + y)"))
    assert not upper(semiring.binary_op("x * y * y")) and not upper(semiring.binary_op("x * (x - y)"))
    assert not upper(semiring.binary_op("x * y"), X.copy())  # equal rows, but not one object


def intersection_reference(X, Y, sr) -> np.ndarray:
    """``sr`` over the columns both rows store (explicit zeros too), in column order from ``start``, in float64,
    one pair at a time."""
    out = np.full((X.shape[0], Y.shape[0]), sr.start(X.shape[1]))
    for i in range(X.shape[0]):
        xr = dict(zip(X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(), X.data[X.indptr[i] : X.indptr[i + 1]]))
        for j in range(Y.shape[0]):
            yr = zip(Y.indices[Y.indptr[j] : Y.indptr[j + 1]].tolist(), Y.data[Y.indptr[j] : Y.indptr[j + 1]])
            for c, y in sorted(yr):
                if c in xr:
                    out[i, j] = sr.add.op(out[i, j], sr.mult(float(xr[c]), float(y)))
    return out


@hypothesis_settings(max_examples=30, deadline=None)
@given(pair=sparse_pair(max_rows=9, dtype=np.float64, index=np.int32), name=st.sampled_from(["plus_times", "min_plus"]))
def test_every_kernel_gives_the_reference_of_intersection_semirings(pair, name):
    """Each dense intersection kernel forced, on awkward rows (empty ones, explicit zeros, one column; the types
    are the tests' above): a float64 reference pair by pair, and the same bits on all three (``min_plus``: a
    start of inf, where no column is shared)."""
    X, Y = pair[0], pair[1]
    sr = getattr(semiring, name)
    ref = intersection_reference(X, Y, sr)
    results = {}
    for strategy in STRATEGIES:
        with mock.patch.dict(os.environ, {settings.CPU_INTERSECTION.name: strategy}):
            results[strategy] = ENGINE.pairwise(X, Y, sr, np.float64)
        np.testing.assert_allclose(results[strategy], ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(results["rows"], results["spgemm"])
    np.testing.assert_array_equal(results["rows"], results["inverted"])


@hypothesis_settings(max_examples=40, deadline=None)
@given(pair=sparse_pair(max_rows=9))
def test_the_products_a_choice_counts_are_the_shared_columns_of_every_pair(pair):
    """The products the dense strategies' choice counts (``Product.shared_products``): every pair's shared stored
    columns (explicit zeros too), summed: the product of the two patterns, whichever side is longer."""
    X, Y = pair[0], pair[1]
    pattern = [sp.csr_matrix((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape) for A in (X, Y)]
    want = int((pattern[0] @ pattern[1].T).sum())
    assert cpu_strategies.Product(X, Y, semiring.plus_times, "dense").shared_products == want
    assert cpu_strategies.Product(Y, X, semiring.plus_times, "dense").shared_products == want
