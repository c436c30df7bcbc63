"""Each GPU strategy forced on inputs built to reach it, against SciPy ``cdist`` and a float64 reference
(marked ``gpu``; skipped without a GPU).

The inputs are built for the paths a strategy has: rows wider than the hash table (cut into parts by
column range), column spaces wider than a dense shared row, skewed row degrees with empty rows and one
heavy row, explicitly stored zeros, a single column, and masks.  Shared memory is cut to a few KiB where a
test needs tables smaller than its rows.

    python -m pytest -m gpu tests/gpu/test_strategies_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import NONNEGATIVE, oracle

import semiring
from semiring import Semiring, binary_op, distances, monoid
from semiring.kernels.cuda import launch, planner, strategies

FORCED = planner.STRATEGIES[1:]
USER = Semiring(monoid.max, binary_op("abs(x - y) / (1.0 + abs(y)) + c * x * y", c=0.25), name="user_union")
SEMIRINGS = [*semiring.BUILTIN_SEMIRINGS.values(), USER]
METRICS = ["cosine", "euclidean", "jaccard", "cityblock", "chebyshev", "canberra", "jensenshannon", "hamming"]


def skewed(m: int, n: int, seed: int, dtype=np.float64, index=np.int32, heavy: int = 0, nonnegative=False):
    """Lognormal row degrees (empty rows included), one row of ``heavy`` entries, explicit zeros."""
    rng = np.random.default_rng(seed)
    degrees = np.minimum(n, np.floor(rng.lognormal(1.0, 1.2, m)).astype(int))
    degrees[rng.random(m) < 0.15] = 0
    if heavy and m > 1:
        degrees[m // 2] = min(n, heavy)
    rows = np.repeat(np.arange(m), degrees)
    cols = np.concatenate([rng.choice(n, d, replace=False) for d in degrees]) if rows.size else np.zeros(0, int)
    values = rng.uniform(0.1, 4.0, rows.size) * (1 if nonnegative else rng.choice([-1, 1], rows.size))
    values[rng.random(rows.size) < 0.1] = 0.0  # explicitly stored zeros: still stored columns
    A = sp.csr_matrix((values, (rows, cols)), shape=(m, n))
    A.sort_indices()
    A = sp.csr_matrix((A.data.astype(dtype), A.indices.astype(index), A.indptr.astype(index)), shape=A.shape)
    assert A.nnz == rows.size  # the zeros are stored
    return A


def reference(sr, X, Y) -> np.ndarray:
    """``start ⊕ (⊕ over the columns the semantics take of x ⊗ y)`` in float64, pair by pair."""
    out = np.empty((X.shape[0], Y.shape[0]))
    ncols = X.shape[1]
    for i in range(X.shape[0]):
        xr = dict(zip(X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(), X.data[X.indptr[i] : X.indptr[i + 1]]))
        for j in range(Y.shape[0]):
            yr = dict(zip(Y.indices[Y.indptr[j] : Y.indptr[j + 1]].tolist(), Y.data[Y.indptr[j] : Y.indptr[j + 1]]))
            cols = (xr.keys() | yr.keys()) if sr.is_union else (xr.keys() & yr.keys())
            acc = sr.start(ncols)
            for c in cols:
                acc = sr.add.op(acc, sr.mult(float(xr.get(c, 0.0)), float(yr.get(c, 0.0))))
            out[i, j] = acc
    return out


@pytest.fixture
def forced(monkeypatch):
    def force(strategy: str):
        monkeypatch.setenv(planner.STRATEGY_ENV, strategy)

    return force


@pytest.fixture
def small_shared(monkeypatch):
    """Shared memory cut to 4 KiB: hash tables of at most 128 (float64/int64) slots, no dense row of 5,000."""
    monkeypatch.setattr(launch, "max_shared_bytes", lambda: 4096)


def _rtol(dtype) -> float:
    return 2e-4 if dtype == np.float32 else 1e-11


@pytest.mark.parametrize("strategy", FORCED)
@pytest.mark.parametrize("sr", SEMIRINGS, ids=lambda s: s.name)
@pytest.mark.parametrize("dtype, index", [(np.float64, np.int64), (np.float32, np.int32)], ids=["f64-i64", "f32-i32"])
def test_semirings_under_each_strategy_with_heavy_rows_and_masks(strategy, sr, dtype, index, forced, small_shared):
    """Every built-in semiring and a user-defined one, dense and masked, each strategy forced; a row of 300
    entries is cut into parts of at most 64 by the 4 KiB tables, and 5,000 columns leave no dense row."""
    X = skewed(23, 5000, 1, dtype, index, heavy=300)
    Y = skewed(37, 5000, 2, dtype, index, heavy=120)
    Y = sp.vstack([Y, X[11:12], X[X.shape[0] // 2 :][:1]], format="csr").astype(dtype)  # shared rows: equal pairs
    forced(strategy)
    want = reference(sr, X, Y)
    got = semiring.pairwise(X, Y, sr, backend="cuda")
    np.testing.assert_allclose(got, want, rtol=_rtol(dtype), atol=1e-30, err_msg=f"{sr.name} {strategy}")
    M = sp.random(X.shape[0], Y.shape[0], density=0.3, format="csr", random_state=3)
    got_m = semiring.pairwise(X, Y, sr, mask=M, backend="cuda")
    np.testing.assert_array_equal(got_m.indices, M.indices)
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    np.testing.assert_allclose(got_m.data, want[rows, M.indices], rtol=_rtol(dtype), atol=1e-30)


@pytest.mark.parametrize("strategy", ["coo", "hash"])
@pytest.mark.parametrize("metric", METRICS)
def test_metrics_on_a_single_column_and_on_empty_matrices(strategy, metric, forced):
    forced(strategy)
    X = sp.csr_matrix((np.array([2.0, 0.0, 1.5]), np.array([0, 0, 0]), np.array([0, 0, 1, 2, 3])), shape=(4, 1))
    assert X.nnz == 3  # row 2 stores a zero
    Y = sp.csr_matrix(np.array([[1.0], [0.0], [3.0]]))
    got = distances.pairwise_distances(X, Y, metric=metric, backend="cuda")
    np.testing.assert_allclose(got, oracle(metric, X.toarray(), Y.toarray()), rtol=1e-9, atol=1e-12, equal_nan=True)
    empty = sp.csr_matrix((0, 4))
    other = sp.random(3, 4, density=0.5, format="csr", random_state=0)
    assert distances.pairwise_distances(empty, other, metric=metric, backend="cuda").shape == (0, 3)


@pytest.mark.parametrize("strategy", FORCED)
@pytest.mark.parametrize("metric", METRICS)
def test_metrics_under_each_strategy_on_skewed_rows(strategy, metric, forced, small_shared):
    X = skewed(40, 5000, 4, heavy=400, nonnegative=metric in NONNEGATIVE)
    Y = skewed(50, 5000, 5, heavy=90, nonnegative=metric in NONNEGATIVE)
    forced(strategy)
    got = distances.pairwise_distances(X, Y, metric=metric, backend="cuda")
    want = oracle(metric, X.toarray(), Y.toarray())
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=f"{metric} {strategy}")


@pytest.mark.parametrize("metric", ["cosine", "cityblock", "chebyshev", "jensenshannon", "canberra"])
@pytest.mark.parametrize("strategy", ["auto", "hash", "coo"])
def test_wide_space_of_real_shared_memory(metric, strategy, forced):
    """A 300,000-column space (no dense row fits 227 KiB), skewed rows of up to 3,000 entries: against SciPy on
    the columns used (a column neither row stores adds nothing to these measures)."""
    X = skewed(60, 300_000, 6, np.float32, heavy=3000, nonnegative=True)
    Y = skewed(300, 300_000, 7, np.float32, heavy=500, nonnegative=True)
    forced(strategy)
    got = distances.pairwise_distances(X, Y, metric=metric, backend="cuda")
    used = np.union1d(X.indices, Y.indices)
    want = oracle(metric, X[:, used].toarray().astype(np.float64), Y[:, used].toarray().astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5, equal_nan=True, err_msg=f"{metric} {strategy}")


@pytest.mark.parametrize("strategy", FORCED)
def test_forced_setting_is_the_plan_where_it_applies(strategy):
    """On a 5,000-column product each setting is the plan where it applies."""
    X = launch.to_device(skewed(20, 5000, 8, heavy=300, nonnegative=True))
    sr = semiring.plus_absdiff if strategy == "margins" else semiring.plus_times
    assert planner.plan(sr, X, X, settings=planner.Settings(strategy)) == strategy
    assert planner.plan(semiring.max_absdiff, X, X, settings=planner.Settings("hash")) == "hash"


def edgar_like(m: int, n: int, seed: int) -> sp.csr_matrix:
    """Rows of 0-12 entries over a wide space, columns drawn by a power law (a few columns hold most entries)."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, n + 1) ** 1.1)
    rows = np.repeat(np.arange(m), rng.integers(0, 13, m))
    cols = np.minimum(np.searchsorted(cdf, rng.random(rows.size) * cdf[-1]), n - 1)
    A = sp.csr_matrix((rng.uniform(0.5, 2.0, rows.size).astype(np.float32), (rows, cols)), shape=(m, n))
    A.sum_duplicates()
    return A


def test_auto_runs_the_row_ranges_on_short_rows_over_a_wide_space():
    """64 × 20,000 rows over 200,000 columns: the inverted kernel's products pay (5.7 M weighted against 7.1 M
    streamed entries) and two ranges walk them 1.1 times an output entry, so ``auto`` runs the row ranges;
    the product against SciPy's."""
    X, Y = edgar_like(64, 200_000, 2), edgar_like(20_000, 200_000, 1)
    assert planner.plan(semiring.plus_times, launch.to_device(X), launch.to_device(Y), settings=planner.Settings()) == (
        "ranges"
    )
    got = semiring.pairwise(X, Y, semiring.plus_times, backend="cuda")
    np.testing.assert_allclose(got, (X @ Y.T).toarray(), rtol=1e-5, atol=1e-6)


def test_coo_holds_rows_dense_where_they_fit_else_hashed(small_shared):
    assert strategies.layout("coo", semiring.plus_times, "float64", 5000) == ("hash", "coo")  # 4 KiB
    assert strategies.layout("coo", semiring.plus_times, "float64", 400) == ("dense", "coo")
    assert strategies.layout("hash", semiring.plus_times, "float64", 400) == ("hash", "rows")


def test_hash_layout_cuts_heavy_rows_and_holds_short_ones_together():
    import cupy

    ap = cupy.asarray(np.concatenate([[0], np.cumsum([5] * 100 + [40_000])]).astype(np.int32))
    slots, rows = strategies.hash_layout(ap, "float32", "int32")
    assert slots >= 16 and slots & (slots - 1) == 0 and rows >= 1
    assert rows * slots * 8 <= launch.max_shared_bytes() // strategies.HASH_BLOCKS_PER_SM
    row, k0, k1, n = strategies._parts(ap, slots // 2)
    sizes = (k1 - k0).get()
    assert n == row.size > 101 and sizes.max() <= slots // 2  # the 40,000-entry row is cut, at most half full
    assert (np.bincount(row.get(), weights=sizes) == np.diff(ap.get())).all()  # every entry in exactly one part


@pytest.mark.parametrize("metric", ["cityblock", "canberra", "jensenshannon", "hamming"])
@pytest.mark.parametrize("dtype, index", [(np.float64, np.int64), (np.float32, np.int32)], ids=["f64-i64", "f32-i32"])
def test_margin_split_cross_with_margins_once_per_entry(metric, dtype, index, small_shared):
    """The hash kernel's margin-split form (``f(x, 0)``, ``f(0, y)`` evaluated once per stored entry) gives
    the cross op's intersection product, heavy rows cut into parts included."""
    from semiring.distances.specs import get_metric

    union = get_metric(metric).terms[0]
    split = union.margin_split(True)
    X = skewed(23, 5000, 11, dtype, index, heavy=300, nonnegative=True)
    Y = skewed(31, 5000, 12, dtype, index, heavy=100, nonnegative=True)
    got = strategies.product(
        launch.to_device(X),
        launch.to_device(Y),
        split.cross,
        dtype,
        settings=planner.Settings("hash"),
        split_of=(union, split),
    )
    np.testing.assert_allclose(
        got.get(), reference(split.cross, X, Y), rtol=_rtol(dtype) * 10, atol=1e-3 if dtype == np.float32 else 1e-9
    )
