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
from oracles import NONNEGATIVE, oracle, tolerances

import semiring
from semiring import Semiring, binary_op, distances, monoid
from semiring.kernels.cuda import elementwise, launch, planner, strategies

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


def planned(sr, X, Y, settings) -> str:
    """The strategy the table chooses for the product of device matrices X and Y (of X's value type)."""
    return strategies.plan(strategies.Product(X, Y, sr, X.data.dtype, settings=settings)).strategy.name


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


@pytest.mark.parametrize("strategy", ["coo", "hash", "split"])
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
    unions = {"margins": semiring.plus_absdiff, "extrema": semiring.max_absdiff, "ranked": semiring.max_absdiff}
    sr = unions.get(strategy, semiring.plus_times)
    assert planned(sr, X, X, planner.Settings(strategy)) == strategy
    assert planned(semiring.max_absdiff, X, X, planner.Settings("hash")) == "hash"


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
    assert planned(semiring.plus_times, launch.to_device(X), launch.to_device(Y), planner.Settings()) == "ranges"
    got = semiring.pairwise(X, Y, semiring.plus_times, backend="cuda")
    np.testing.assert_allclose(got, (X @ Y.T).toarray(), rtol=1e-5, atol=1e-6)


# One-term measures of a plus-monoid product: the row-range kernel applies them as it writes (``product_expanded``).
EXPANDED = ["cosine", "correlation", "euclidean", "sqeuclidean", "inner_product", "jaccard", "russellrao", "yule"]
COPIES = [5, 17, 4000, 19_999]  # rows of Y that are also queries: euclidean 0 there, exactly (refined)


def spy_expanded(monkeypatch) -> list:
    """What ``strategies.product_expanded`` returns at each call, collected."""
    seen, real = [], strategies.product_expanded
    monkeypatch.setattr(strategies, "product_expanded", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    return seen


def spy_plans(monkeypatch) -> list:
    """The strategy of each dense product planned (``strategies.plan``; masked products left out), collected."""
    seen, real = [], strategies.plan

    def spy(product):
        chosen = real(product)
        if product.mask is None:
            seen.append(chosen.strategy.name)
        return chosen

    monkeypatch.setattr(strategies, "plan", spy)
    return seen


@pytest.mark.parametrize("metric", EXPANDED)
def test_row_ranges_write_the_measure_under_auto(metric, monkeypatch):
    """EDGAR-shaped rows (``auto`` runs the row ranges): the measure applied as the kernel writes each entry,
    against SciPy on a sample of Y's rows and against the inverted kernel with the expansion apart on all;
    copies of Y's rows among the queries are flagged by euclidean's refinement and come out exactly 0."""
    import cupyx.scipy.sparse as csp

    Y = edgar_like(20_000, 200_000, 1)
    Q = sp.vstack([edgar_like(60, 200_000, 2), Y[COPIES]]).tocsr()
    seen = spy_plans(monkeypatch)
    got = distances.pairwise_distances(csp.csr_matrix(Q), csp.csr_matrix(Y), metric=metric).get()
    assert seen and set(seen) == {"ranges"}  # every block written by the row ranges, which expand as they write
    monkeypatch.setenv(planner.STRATEGY_ENV, "inverted")
    apart = distances.pairwise_distances(csp.csr_matrix(Q), csp.csr_matrix(Y), metric=metric).get()
    assert seen[-1] == "inverted"  # the inverted kernel: expanded apart
    np.testing.assert_allclose(got, apart, rtol=1e-5, atol=1e-6)
    sample = np.unique(np.concatenate([COPIES, np.random.default_rng(0).choice(Y.shape[0], 100, replace=False)]))
    want = oracle(metric, Q.toarray().astype(np.float64), Y[sample].toarray().astype(np.float64))
    np.testing.assert_allclose(got[:, sample], want, **tolerances(metric, np.float32))
    if metric in ("euclidean", "sqeuclidean"):
        assert (got[np.arange(60, 64), COPIES] == 0).all()


def test_row_ranges_list_every_flagged_entry_when_more_than_their_room(monkeypatch):
    """Room for one flagged entry: the product runs again with room for all, none lost."""
    import cupyx.scipy.sparse as csp

    monkeypatch.setattr(elementwise, "FLAG_ROOM_MIN", 1)
    monkeypatch.setattr(elementwise, "FLAG_ROOM_SHARE", 2**62)
    Y = edgar_like(20_000, 200_000, 1)
    Q = sp.vstack([edgar_like(60, 200_000, 2), Y[COPIES]]).tocsr()
    seen = spy_expanded(monkeypatch)
    got = distances.pairwise_distances(csp.csr_matrix(Q), csp.csr_matrix(Y), metric="euclidean").get()
    flagged = {(int(i), int(j)) for done in seen for i, j in zip(done[1].rows.get(), done[1].cols.get())}
    assert {(60 + k, j) for k, j in enumerate(COPIES)} <= flagged and len(seen) == 1
    assert (got[np.arange(60, 64), COPIES] == 0).all()


@pytest.mark.parametrize("metric", ["sqeuclidean", "correlation"])
def test_row_ranges_write_the_measure_after_the_last_slab(metric, monkeypatch):
    """Y's postings in slabs of 40 entries (the scratch budget set directly): the earlier slabs write sums, the
    last adds its own and expands; the same as one slab, and as SciPy."""
    from semiring.distances.bound import BoundMeasure
    from semiring.distances.specs import get_metric
    from semiring.interfaces import SCRATCH_BUDGET
    from semiring.kernels.cuda import ENGINE

    Y = edgar_like(700, 3000, 5)
    X = sp.vstack([edgar_like(35, 3000, 4), Y[:5]]).tocsr()  # copies of Y's rows: flagged
    monkeypatch.setenv(planner.STRATEGY_ENV, "ranges")
    monkeypatch.setattr(planner, "RANGE_SHARED_BYTES", 128 * 4)  # ranges of 128 rows: several a row
    bound = BoundMeasure(ENGINE, get_metric(metric), {}, np.float32)
    Xr, Yr = bound.prepare(X), bound.prepare(Y)
    seen, outs = spy_plans(monkeypatch), []
    for budget in (None, 40 * 8):
        token = SCRATCH_BUDGET.set(budget)
        try:
            outs.append(bound.block(Xr, Yr).get())
        finally:
            SCRATCH_BUDGET.reset(token)
    assert seen == ["ranges", "ranges"]  # each block planned once, written by the row ranges
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
    want = oracle(metric, X.toarray().astype(np.float64), Y.toarray().astype(np.float64))
    # a copy's float32 correlation with itself is 1 - (1 ± an ulp): up to 1.2e-7 where SciPy has 2e-16
    np.testing.assert_allclose(outs[0], want, **{**tolerances(metric, np.float32), "atol": 2e-7})


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


def zipf_rows(m: int, n: int, seed: int, dtype=np.float32, index=np.int32, mean_degree: int = 30):
    """Rows over Zipf-popular columns (text-like): the first columns stored in most rows, the tail in few;
    some rows empty, some values explicitly zero."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n + 1)
    weights /= weights.sum()
    degrees = np.minimum(n, rng.poisson(mean_degree, m))
    degrees[rng.random(m) < 0.05] = 0
    rows = np.repeat(np.arange(m), degrees)
    cols = np.concatenate([rng.choice(n, d, replace=False, p=weights) for d in degrees]) if rows.size else []
    values = rng.uniform(0.05, 3.0, rows.size)
    values[rng.random(rows.size) < 0.05] = 0.0
    A = sp.csr_matrix((values, (rows, np.asarray(cols, int))), shape=(m, n))
    A.sort_indices()
    return sp.csr_matrix((A.data.astype(dtype), A.indices.astype(index), A.indptr.astype(index)), shape=A.shape)


@pytest.mark.parametrize("dtype, index", [(np.float64, np.int64), (np.float32, np.int32)], ids=["f64-i64", "f32-i32"])
def test_split_heavy_columns_dense_and_light_scattered_match_float64(dtype, index, forced):
    """The split strategy on rows with heavy columns (the first few stored in most rows): the dense product
    over them plus the light columns' scatter-adds equals the float64 product; through the driver (one call's
    cache shared by its tiles) and for a direct call."""
    X = zipf_rows(300, 2000, 1, dtype, index)
    Y = zipf_rows(500, 2000, 2, dtype, index)
    from semiring.kernels.cuda import ENGINE

    _, count = planner.heavy_columns(ENGINE.to_device(Y), np.dtype(dtype).itemsize, None)
    assert 0 < count < Y.shape[1]  # both parts run
    want = (X.astype(np.float64) @ Y.astype(np.float64).T).toarray()
    forced("split")
    for working_memory in (None, 0.05):  # 0.05 MiB: several tiles, and fewer heavy columns fit the budget
        got = semiring.pairwise(X, Y, semiring.plus_times, backend="cuda", working_memory=working_memory)
        np.testing.assert_allclose(got, want, rtol=_rtol(dtype), atol=1e-5 if dtype == np.float32 else 1e-12)
    got = semiring.pairwise(X, Y, semiring.plus_pair, backend="cuda")  # forced split: not a product, runs rowvec
    px, py = (sp.csr_matrix((np.ones(A.nnz), A.indices, A.indptr), A.shape) for A in (X, Y))  # zeros stored too
    np.testing.assert_array_equal(got, (px @ py.T).toarray())


@pytest.mark.parametrize("metric", ["cosine", "euclidean", "inner_product", "correlation"])
def test_split_knn_and_distances_match_scipy(metric, forced):
    """kNN and distances of the expanded measures on heavy-column rows under the split strategy, against SciPy's
    cdist in float64 (neighbours compared by distance, ties allowed)."""
    from scipy.spatial.distance import cdist

    X = zipf_rows(400, 3000, 3, np.float64, np.int32)
    forced("split")
    D = distances.pairwise_distances(X, metric=metric, backend="cuda")
    if metric == "inner_product":
        want = (X @ X.T).toarray()
    else:
        want = cdist(X.toarray(), X.toarray(), metric)
    np.testing.assert_allclose(D, want, rtol=1e-9, atol=1e-9, equal_nan=True)
    if metric == "inner_product":
        return
    nn = distances.NearestNeighbors(n_neighbors=5, metric=metric, backend="cuda").fit(X)
    dist, ind = nn.kneighbors()
    want_self = np.where(np.isnan(want), np.inf, want)  # NaN pairs (a zero row) rank last, as ours
    np.fill_diagonal(want_self, np.inf)
    kth = np.sort(want_self, axis=1)[:, :5]
    finite = np.isfinite(kth)
    np.testing.assert_allclose(dist[finite], kth[finite], rtol=1e-9, atol=1e-9)
    picked = np.take_along_axis(want_self, ind, axis=1)
    np.testing.assert_allclose(picked[finite], dist[finite], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype, index", [(np.float64, np.int64), (np.float32, np.int32)], ids=["f64-i64", "f32-i32"])
def test_split_layout_held_by_the_fitted_index_across_queries(dtype, index, forced):
    """A fitted index keeps the split layout of its rows for later queries (``semiring.interfaces.DerivedCache``):
    batches of queries, another working memory and X=None each give the float64 product's top-k (values of
    the returned neighbours, and the k-th best, ties allowed); after each call the index holds the layouts of
    that call's tiles only (one tile: one layout; 0.05 MiB: several; back to one)."""
    Y = zipf_rows(600, 2000, 5, dtype, index)
    Q = zipf_rows(90, 2000, 6, dtype, index)
    forced("split")
    nn = distances.NearestNeighbors(n_neighbors=4, metric="inner_product", backend="cuda").fit(Y)
    Y64 = Y.astype(np.float64)
    for queries, working_memory, tiles in ((Q[:40], None, 1), (Q[40:], None, 1), (Q, 0.05, 2), (None, None, 1)):
        nn.set_params(working_memory=working_memory)
        dist, ind = nn.kneighbors(queries)
        want = ((Y64 if queries is None else queries.astype(np.float64)) @ Y64.T).toarray()
        if queries is None:
            np.fill_diagonal(want, -np.inf)  # a row is not its own neighbour
        kth = -np.sort(-want, axis=1)[:, :4]
        np.testing.assert_allclose(dist, kth, rtol=_rtol(dtype), atol=1e-4 if dtype == np.float32 else 1e-10)
        picked = np.take_along_axis(want, ind, axis=1)
        np.testing.assert_allclose(picked, dist, rtol=_rtol(dtype), atol=1e-4 if dtype == np.float32 else 1e-10)
        layouts = [key for key in nn._index.derived if key[0][0] == "split"]  # keys (("split", type), ...)
        assert len(layouts) == 1 if tiles == 1 else len(layouts) >= tiles, (working_memory, layouts)


def test_auto_takes_split_on_text_like_rows():
    """On nytimes-shaped rows (Zipf columns, hundreds of rows) the planner's cost model picks the split."""
    from semiring.kernels.cuda import ENGINE

    A = ENGINE.to_device(zipf_rows(2000, 20_000, 4, np.float32, np.int32, mean_degree=100))
    assert planned(semiring.plus_times, A, A, planner.Settings()) == "split"
