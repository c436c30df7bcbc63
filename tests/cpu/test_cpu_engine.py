"""The CPU engine, tested directly: it implements ``semiring.interfaces``'s interfaces, and its
entry-based kernels (masked product, selection, scatter) agree with dense NumPy float64 oracles.

Inputs are small random sparse matrices with explicitly stored zeros and empty
rows, int32 and int64 indices, float32 and float64 values.  Numba compiles a
kernel once per semiring and argument types, so the tests reuse three semirings.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from strategies import sparse_pair

import semiring
from semiring import expr as _expr
from semiring.interfaces import EXPANSION_VARIABLES, TOPK_EMPTY, Entries, GraphEngine, PairwiseEngine, missing_methods
from semiring.kernels.cpu import ENGINE, GRAPH_ENGINE, CpuEngine, CpuGraphEngine

INDEX_DTYPES = (np.int32, np.int64)
VALUE_DTYPES = (np.float32, np.float64)


def random_csr(rng, m: int, n: int, density: float, index_dtype, value_dtype) -> sp.csr_matrix:
    """Canonical CSR with explicit zeros (about a quarter of the stored entries) and empty rows (0 and every 5th)."""
    stored = rng.random((m, n)) < density
    stored[::5] = False
    rows, cols = np.nonzero(stored)
    data = rng.uniform(-2, 2, rows.size)
    data[rng.random(rows.size) < 0.25] = 0.0
    A = sp.csr_matrix((data.astype(value_dtype), (rows, cols)), shape=(m, n))
    A.sort_indices()
    A.indices, A.indptr = A.indices.astype(index_dtype), A.indptr.astype(index_dtype)
    assert A.has_canonical_format and A.nnz == rows.size  # coo → csr keeps the explicit zeros
    return A


def dense(A) -> np.ndarray:
    return A.toarray().astype(np.float64)


def pattern(A) -> np.ndarray:
    """1 at every stored entry, explicit zeros included."""
    return sp.csr_matrix((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape).toarray()


# The oracles: what C[i, j] is, from dense float64 copies.  plus_pair counts stored
# columns in common, so an explicit zero counts there and nowhere else.
ORACLES = {
    "plus_times": lambda X, Y: dense(X) @ dense(Y).T,
    "plus_absdiff": lambda X, Y: np.abs(dense(X)[:, None, :] - dense(Y)[None, :, :]).sum(-1),
    "plus_pair": lambda X, Y: pattern(X) @ pattern(Y).T,
}


def rtol(dtype) -> float:
    return 1e-5 if dtype == np.float32 else 1e-12


# --------------------------------------------------------------------------- the interfaces


def test_engines_implement_the_interfaces():
    assert isinstance(ENGINE, PairwiseEngine) and isinstance(ENGINE, CpuEngine)
    assert isinstance(GRAPH_ENGINE, GraphEngine) and isinstance(GRAPH_ENGINE, CpuGraphEngine)
    assert missing_methods(ENGINE, PairwiseEngine) == []
    assert missing_methods(GRAPH_ENGINE, GraphEngine) == []
    assert ENGINE.name == GRAPH_ENGINE.name == "cpu"
    assert ENGINE.device_results is False and GRAPH_ENGINE.xp is np
    assert ENGINE.unavailable_reason() is None and ENGINE.memory_limit_bytes() is None
    assert ENGINE.accumulate_dtype(np.float32) == np.float64


def _protocol_methods(interface) -> list[str]:
    return [n for n, v in vars(interface).items() if not n.startswith("_") and inspect.isfunction(v)]


@pytest.mark.parametrize(("engine", "interface"), [(ENGINE, PairwiseEngine), (GRAPH_ENGINE, GraphEngine)])
def test_method_signatures_match_the_interface(engine, interface):
    names = _protocol_methods(interface)
    assert names, interface
    for name in names:
        want = [p for p in inspect.signature(getattr(interface, name)).parameters if p != "self"]
        have = list(inspect.signature(getattr(engine, name)).parameters)
        assert have == want, f"{type(engine).__name__}.{name}{have} is not {interface.__name__}.{name}{want}"


# --------------------------------------------------------------------------- masked products at Entries


def test_entries_from_csr_are_in_csr_order_in_the_index_type():
    rng = np.random.default_rng(1)
    for index_dtype in INDEX_DTYPES:
        M = random_csr(rng, 9, 7, 0.4, index_dtype, np.float64)
        e = ENGINE.entries_from_csr(M)
        coo = M.tocoo()
        np.testing.assert_array_equal(e.rows, coo.row)
        np.testing.assert_array_equal(e.cols, coo.col)
        assert e.rows.dtype == e.cols.dtype == index_dtype


# Each semiring with each index type and each value type, and each index type with each value type (pairs, not
# every triple: the types are the kernels' skeleton's concern, the same for every semiring, and each triple is one
# more compile of three kernels).
@pytest.mark.parametrize(
    ("name", "index_dtype", "value_dtype"),
    [
        ("plus_times", np.int32, np.float32),
        ("plus_times", np.int64, np.float64),
        ("plus_absdiff", np.int32, np.float64),
        ("plus_absdiff", np.int64, np.float32),
    ],
)
def test_masked_product_matches_the_dense_oracle(name, index_dtype, value_dtype):
    rng = np.random.default_rng(7)
    sr = semiring.BUILTIN_SEMIRINGS[name]
    X = random_csr(rng, 13, 11, 0.35, index_dtype, value_dtype)
    Y = random_csr(rng, 10, 11, 0.35, index_dtype, value_dtype)
    M = random_csr(rng, 13, 10, 0.5, index_dtype, np.float64)
    want = ORACLES[name](X, Y)
    Xd, Yd = ENGINE.to_device(X), ENGINE.to_device(Y)

    entries = ENGINE.entries_from_csr(M)
    got = ENGINE.pairwise(Xd, Yd, sr, np.float64, mask=entries)
    assert got.shape == (M.nnz,) and got.dtype == np.float64
    np.testing.assert_allclose(got, want[entries.rows, entries.cols], rtol=rtol(value_dtype), atol=1e-6)

    # Any order: the values follow the entries, not the rows.
    order = rng.permutation(M.nnz)
    shuffled = Entries(entries.rows[order], entries.cols[order])
    np.testing.assert_array_equal(ENGINE.pairwise(Xd, Yd, sr, np.float64, mask=shuffled), got[order])

    # The dense product agrees with the masked one where both are computed.
    full = ENGINE.pairwise(Xd, Yd, sr, value_dtype)
    assert full.dtype == value_dtype
    np.testing.assert_allclose(full, want, rtol=rtol(value_dtype), atol=1e-5)


def test_masked_product_counts_explicit_zeros_and_handles_empty_masks():
    rng = np.random.default_rng(3)
    sr = semiring.plus_pair
    X = random_csr(rng, 12, 9, 0.5, np.int32, np.float64)
    assert (X.data == 0).any()
    entries = ENGINE.entries_from_csr(random_csr(rng, 12, 12, 0.6, np.int32, np.float64))
    got = ENGINE.pairwise(X, X, sr, np.float64, mask=entries)
    np.testing.assert_array_equal(got, ORACLES["plus_pair"](X, X)[entries.rows, entries.cols])

    empty = Entries(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert ENGINE.pairwise(X, X, sr, np.float32, mask=empty).shape == (0,)


def test_graph_masked_product_is_the_pairwise_one_at_P():
    """The graph engine's masked product at a CSR pattern: common neighbours counted by plus_pair."""
    rng = np.random.default_rng(5)
    upper = np.triu(rng.random((10, 10)) < 0.4, 1)
    G = sp.csr_matrix((upper | upper.T).astype(np.float64))
    G.indices, G.indptr = G.indices.astype(np.int32), G.indptr.astype(np.int32)
    P = random_csr(rng, 10, 10, 0.5, np.int32, np.float64)
    got = GRAPH_ENGINE.masked_product(G, P, semiring.plus_pair)
    A = G.toarray()
    coo = P.tocoo()
    np.testing.assert_array_equal(got, (A @ A)[coo.row, coo.col])


def test_row_slices_keep_the_index_type_and_one_index_type_reaches_the_kernels(monkeypatch):
    """A row slice is canonical CSR in its matrix's index type, sharing its values (SciPy's slicing narrows int64
    indices to int32); an int32 block against int64 rows reaches the kernels as int64 on both sides, so each
    kernel is compiled for one index type per call, not for a third, mixed pair."""
    from semiring.kernels.cpu import strategies as cpu_strategies

    rng = np.random.default_rng(37)
    for index_dtype in INDEX_DTYPES:
        A = random_csr(rng, 12, 9, 0.4, index_dtype, np.float64)
        for r0, r1 in [(0, 12), (3, 8), (5, 5), (11, 12)]:
            S = ENGINE.row_slice(A, r0, r1)
            assert isinstance(S, sp.csr_matrix) and S.shape == (r1 - r0, 9) and S.has_canonical_format
            assert S.indices.dtype == S.indptr.dtype == index_dtype
            assert S.indptr[0] == 0 and S.indptr[-1] == S.indices.size == S.data.size
            assert S.nnz == 0 or np.shares_memory(S.data, A.data)
            np.testing.assert_array_equal(S.toarray(), A.toarray()[r0:r1])
            sp.csr_matrix(S, copy=True).check_format(full_check=True)

    reached = []
    product = cpu_strategies.Product
    monkeypatch.setattr(cpu_strategies, "Product", lambda X, Y, *rest: reached.append((X, Y)) or product(X, Y, *rest))
    X = random_csr(rng, 7, 9, 0.4, np.int64, np.float64)[2:6]  # SciPy's slice: int32
    Y = random_csr(rng, 8, 9, 0.4, np.int64, np.float64)
    assert X.indices.dtype == np.int32
    got = ENGINE.pairwise(X, Y, semiring.plus_times, np.float64)
    np.testing.assert_allclose(got, ORACLES["plus_times"](X, Y), rtol=1e-12, atol=1e-12)
    ((Xk, Yk),) = reached
    assert {a.dtype for a in (Xk.indptr, Xk.indices, Yk.indptr, Yk.indices)} == {np.dtype(np.int64)}
    assert Yk.indices is Y.indices and np.shares_memory(Xk.data, X.data)  # only the int32 side's indices copied


# --------------------------------------------------------------------------- select and scatter

PARAMS = ("t",)
SELECT_TREE, _ = _expr.parse("c0 + c1 - nx0 - ny1 > t * n", EXPANSION_VARIABLES + PARAMS)


def select_oracle(c0, nx0, ny1, t, n):
    return c0 - nx0[:, None] - ny1[None, :] > t * n  # c1 is not given: it reads as 0


@pytest.mark.parametrize("shape", [(9, 7), (1, 5), (0, 4), (6, 0)])
def test_select_finds_the_oracles_entries_and_scatter_writes_them(shape):
    rng = np.random.default_rng(11)
    m, p = shape
    c0 = rng.normal(size=shape)
    nx = [rng.normal(size=m), rng.normal(size=m)]
    ny = [rng.normal(size=p), rng.normal(size=p)]
    params, ncols = np.array([0.05]), 4
    entries = ENGINE.select(SELECT_TREE, PARAMS, params, [c0], nx, ny, ncols, shape)
    assert isinstance(entries, Entries)
    assert entries.rows.dtype == entries.cols.dtype == np.int64
    want_rows, want_cols = np.nonzero(select_oracle(c0, nx[0], ny[1], params[0], ncols))  # row by row, as select
    np.testing.assert_array_equal(entries.rows, want_rows)
    np.testing.assert_array_equal(entries.cols, want_cols)

    out = np.zeros(shape)
    ENGINE.scatter(out, entries, c0[entries.rows, entries.cols])
    np.testing.assert_array_equal(out, np.where(select_oracle(c0, nx[0], ny[1], params[0], ncols), c0, 0.0))


def test_selected_entries_feed_the_masked_product():
    """A selection is a mask: the product at the selected entries, scattered, is the dense product there."""
    rng = np.random.default_rng(13)
    X = random_csr(rng, 8, 6, 0.5, np.int64, np.float64)
    Y = random_csr(rng, 7, 6, 0.5, np.int64, np.float64)
    c0 = ENGINE.pairwise(X, Y, semiring.plus_times, np.float64)
    nx, ny = [np.zeros(8)] * 2, [np.zeros(7)] * 2
    entries = ENGINE.select(SELECT_TREE, PARAMS, np.array([0.0]), [c0], nx, ny, 6, c0.shape)
    assert 0 < entries.rows.size < c0.size
    out = np.full(c0.shape, np.nan)
    ENGINE.scatter(out, entries, ENGINE.pairwise(X, Y, semiring.plus_times, np.float64, mask=entries))
    np.testing.assert_allclose(out, np.where(c0 > 0, c0, np.nan), rtol=1e-12)


# --------------------------------------------------------------------------- top-k


def test_topk_empty_slots_are_nan_and_topk_empty():
    selection = ENGINE.topk_init(2, 4, np.float64)
    ENGINE.topk_push(np.array([[3.0, 1.0], [np.nan, 2.0]]), 10, -1, False, selection)
    values, indices = ENGINE.topk_finish(selection, False, np.float64)
    np.testing.assert_array_equal(indices, [[11, 10, TOPK_EMPTY, TOPK_EMPTY], [11, 10, TOPK_EMPTY, TOPK_EMPTY]])
    np.testing.assert_array_equal(values, [[1.0, 3.0, np.nan, np.nan], [2.0, np.nan, np.nan, np.nan]])
    assert ENGINE.topk_extra_bytes(4) == 0


# --------------------------------------------------------------------------- union strategies


@pytest.mark.parametrize("strategy", ["margins-spgemm", "margins", "merge", "scatter"])
def test_each_union_strategy_matches_scipy(strategy, monkeypatch):
    """Forced through $SEMIRING_CPU_UNION, each path gives SciPy's cityblock (stored zeros, empty rows, float32
    rows against float64 ones, int32 indices; int64 ones in the next test's draws and, for merge and scatter, in
    test_union_kernels_and_the_masked_product_agree_to_the_last_bit)."""
    from scipy.spatial.distance import cdist

    from semiring.kernels.cpu import strategies as cpu_strategies

    monkeypatch.setenv(semiring.settings.CPU_UNION.name, strategy)
    rng = np.random.default_rng(17)
    X = random_csr(rng, 11, 9, 0.4, np.int32, np.float32)
    Y = random_csr(rng, 8, 9, 0.4, np.int32, np.float64)
    assert cpu_strategies.plan(cpu_strategies.Product(X, Y, semiring.plus_absdiff, "dense")).strategy.name == strategy
    got = ENGINE.pairwise(X, Y, semiring.plus_absdiff, np.float64)
    np.testing.assert_allclose(got, cdist(dense(X), dense(Y), "cityblock"), rtol=1e-6)


@pytest.mark.parametrize("strategy", ["margins-spgemm", "margins", "merge", "scatter"])
@settings(max_examples=30, deadline=None)
@given(pair=sparse_pair(max_rows=6, max_cols=7))
def test_each_union_strategy_matches_cdist_on_awkward_inputs(strategy, pair):
    """Empty rows and matrices, stored zeros, one column, int32/int64 indices, float32/float64: each forced path
    is SciPy's cityblock on the densified input."""
    from scipy.spatial.distance import cdist

    X, Y = pair
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(semiring.settings.CPU_UNION.name, strategy)
        got = ENGINE.pairwise(X, Y, semiring.plus_absdiff, np.float64)
    assert got.shape == (X.shape[0], Y.shape[0])
    if got.size:
        np.testing.assert_allclose(got, cdist(dense(X), dense(Y), "cityblock"), rtol=1e-12, atol=1e-12)


NEG_CHEBYSHEV = semiring.Semiring(semiring.monoid.min, semiring.binary_op("-abs(x - y)"))  # a min-monoid union


@settings(max_examples=25, deadline=None)
@given(pair=sparse_pair(max_rows=6, max_cols=9))
def test_extremum_matches_cdist_on_awkward_inputs(pair):
    """The max- and min-monoid union kernel, forced: chebyshev (max |x − y|) and its negation under min are SciPy's
    chebyshev on the densified input (empty rows and matrices, stored zeros, one column, int32/int64 indices,
    float32/float64), to the last bit: an extreme is exact whatever order its terms come in."""
    from scipy.spatial.distance import cdist

    from semiring.kernels.cpu import strategies as cpu_strategies

    X, Y = pair
    want = cdist(dense(X), dense(Y), "chebyshev") if X.shape[1] else np.zeros((X.shape[0], Y.shape[0]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(semiring.settings.CPU_UNION.name, "extremum")
        for sr, sign in ((semiring.max_absdiff, 1.0), (NEG_CHEBYSHEV, -1.0)):
            product = cpu_strategies.Product(X, Y, sr, "dense")
            if X.shape[0] and Y.shape[0] and (X.nnz or Y.nnz):
                assert cpu_strategies.plan(product).strategy.name == "extremum"
            got = ENGINE.pairwise(X, Y, sr, np.float64)
            if X.shape[1] and X.shape[0] and Y.shape[0]:
                np.testing.assert_array_equal(np.maximum(sign * got, 0.0), want)  # max over no column: its start


def test_extremum_past_the_64_marked_columns():
    """Rows of 100 stored values: a Y row holding X's 64 largest columns (equal values) but not the rest, one
    holding all of them, one holding none, one holding only the 65th: each chebyshev distance is SciPy's."""
    from scipy.spatial.distance import cdist

    n = 150
    x = np.zeros(n)
    x[:100] = np.arange(100, 0, -1, dtype=np.float64)  # column c holds 100 - c: the largest first
    rows = [x.copy(), x.copy(), np.zeros(n), np.zeros(n)]
    rows[0][64:100] = 0.0  # X's 64 largest columns, equal: the best X-only value is column 64's (36)
    rows[2][120] = 5.0  # none of X's, one of its own
    rows[3][64] = 36.0  # only the 65th, equal
    X, Y = sp.csr_matrix(x[None, :]), sp.csr_matrix(np.array(rows))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(semiring.settings.CPU_UNION.name, "extremum")
        got = ENGINE.pairwise(X, Y, semiring.max_absdiff, np.float64)
    np.testing.assert_array_equal(got, cdist(dense(X), dense(Y), "chebyshev"))
    np.testing.assert_array_equal(got, [[36.0, 0.0, 100.0, 100.0]])


def test_extremum_leaves_non_finite_values_to_the_merge():
    """NaN or ±inf stored: the extremum kernel would take the terms in another order than the merge, and NaN is
    not ordered, so it does not run even forced; the product is the merge kernel's, to the last bit."""
    from semiring.kernels.cpu import strategies as cpu_strategies

    rng = np.random.default_rng(5)
    X = random_csr(rng, 6, 12, 0.5, np.int32, np.float64)
    Y = random_csr(rng, 5, 12, 0.5, np.int32, np.float64)
    Y.data[0], Y.data[3] = np.nan, np.inf
    results = {}
    with pytest.MonkeyPatch.context() as mp:
        for strategy in ("extremum", "merge"):
            mp.setenv(semiring.settings.CPU_UNION.name, strategy)
            assert cpu_strategies.plan(cpu_strategies.Product(X, Y, semiring.max_absdiff, "dense")).strategy.name != (
                "extremum"
            )
            results[strategy] = ENGINE.pairwise(X, Y, semiring.max_absdiff, np.float64)
    np.testing.assert_array_equal(results["extremum"], results["merge"])


def test_margins_recompute_cancelling_and_non_finite_entries_by_merging(monkeypatch):
    """Where Σ|x−y| cancels against the margins Σ|x| + Σ|y| (near-identical rows), or a value is not finite,
    the margins path merges the pair instead: those entries are the merge kernel's to the last bit (an identical
    row is exactly 0), and inf/NaN land where SciPy puts them.  The margins from the sparse kernels' cross term
    (``margins-spgemm``) give the margins kernel's bits everywhere (the same sums in the same order)."""
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(23)
    X = random_csr(rng, 12, 30, 0.5, np.int32, np.float64)
    X.data = rng.normal(size=X.nnz) * 10.0 ** rng.integers(-6, 6, X.nnz)
    near = X.copy()
    near.data = near.data * (1 + 1e-9 * rng.normal(size=near.nnz))  # each row almost its X row
    Y = sp.vstack([near, random_csr(rng, 5, 30, 0.5, np.int32, np.float64)], format="csr")
    Y.data[Y.indptr[13]] = np.inf  # row 13: an infinite value; row 14: a NaN
    Y.data[Y.indptr[14]] = np.nan
    results = {}
    for strategy in ("margins-spgemm", "margins", "merge"):
        monkeypatch.setenv(semiring.settings.CPU_UNION.name, strategy)
        results[strategy] = ENGINE.pairwise(X, Y, semiring.plus_absdiff, np.float64)
    margins, merged = results["margins"], results["merge"]
    np.testing.assert_array_equal(results["margins-spgemm"], margins)
    ref = cdist(dense(X), dense(Y), "cityblock")
    cancelling = np.abs(ref) <= 0.125 * (np.abs(dense(X)).sum(1)[:, None] + np.abs(dense(Y)).sum(1)[None, :])
    assert cancelling[np.arange(12), np.arange(12)][np.diff(X.indptr) > 0].all()  # the near rows do cancel
    np.testing.assert_array_equal(margins[cancelling], merged[cancelling])
    np.testing.assert_array_equal(margins[:, 13:15], merged[:, 13:15])
    np.testing.assert_array_equal(np.isnan(margins), np.isnan(ref))
    np.testing.assert_allclose(margins, ref, rtol=1e-12)
    np.testing.assert_array_equal(ENGINE.pairwise(X, X, semiring.plus_absdiff, np.float64).diagonal(), 0.0)


def test_union_strategy_follows_row_length_and_the_scratch_budget():
    """Margins where the split holds (cityblock's plus; the cross term from the sparse kernels where products are
    many an entry and their CSR fits the budget); the extremum kernel for a max monoid (chebyshev's); else
    (sqeuclidean's (x − y)² on signed values) merge on long rows, scatter on short ones with as many workers as
    the scratch budget holds, merge where none fits."""
    from semiring.interfaces import SCRATCH_BUDGET
    from semiring.kernels.cpu import strategies as cpu_strategies

    def plan(A, sr, budget=None):
        token = SCRATCH_BUDGET.set(budget)
        try:
            return cpu_strategies.plan(cpu_strategies.Product(A, A, sr, "dense"))
        finally:
            SCRATCH_BUDGET.reset(token)

    short = sp.random(40, 2000, density=0.01, format="csr", random_state=1)
    long = sp.random(40, 2000, density=0.5, format="csr", random_state=1)
    short.data -= 0.5  # signed: (x − y)²'s margin split does not hold
    long.data -= 0.5
    assert plan(long, semiring.plus_sqdiff).strategy.name == "merge"
    # many products an entry (500): the cross term from the sparse kernels, where its CSR fits; few: the kernel's
    assert plan(long, semiring.plus_absdiff).strategy.name == "margins-spgemm"
    assert plan(long, semiring.plus_absdiff, 20 * 40 * 40 - 1).strategy.name == "margins"
    assert plan(short, semiring.plus_absdiff).strategy.name == "margins"
    assert (
        plan(long, semiring.max_absdiff).strategy.name
        == plan(short, semiring.max_absdiff).strategy.name
        == ("extremum")
    )
    chosen = plan(short, semiring.plus_sqdiff)
    assert chosen.strategy.name == "scatter" and chosen.product.scatter_workers >= 1
    per_worker = cpu_strategies.UNION_SCRATCH_BYTES_PER_COLUMN * 2000
    assert plan(short, semiring.plus_sqdiff, per_worker).product.scatter_workers == 1  # one worker's scratch fits
    assert plan(short, semiring.plus_sqdiff, per_worker - 1).strategy.name == "merge"  # none fits: no scratch


def test_settings_choose_in_the_tables_order(monkeypatch):
    """A sparse union kernel forced by its setting yields to the dense path the call's densities take (its
    setting comes first in the table) and runs where they do not; SEMIRING_CPU_DENSE=never passes the turn."""
    from semiring.interfaces import call_density
    from semiring.kernels.cpu import strategies as cpu_strategies

    def planned(A):
        return cpu_strategies.plan(cpu_strategies.Product(A, A, semiring.plus_absdiff, "dense")).strategy.name

    full = sp.csr_matrix(np.arange(1.0, 13.0).reshape(3, 4))
    monkeypatch.setenv(semiring.settings.CPU_UNION.name, "merge")
    with call_density(full, full):
        assert planned(full) == "tiled"
        monkeypatch.setenv(semiring.settings.CPU_DENSE.name, "never")
        assert planned(full) == "merge"
    monkeypatch.setenv(semiring.settings.CPU_DENSE.name, "auto")
    assert planned(full) == "merge"  # outside a call: no densities, the sparse kernels


# cityblock of rows over 4·10⁶ columns, dense enough (10⁶ entries) that no column compaction applies: per-column
# scratch would be 24 B × 4·10⁶ = 92 MiB a worker.  Peak RSS growth of the call is measured in a fresh process,
# after a warm-up call has compiled the kernels.
SCRATCH_CHILD = """
import resource, sys, numpy as np, scipy.sparse as sp
from semiring.distances import pairwise_distances
n, nnz = 4_000_000, 500_000
rng = np.random.default_rng(0)
cols = np.sort(rng.choice(n, (4, nnz)), axis=1)
X = sp.csr_matrix((rng.random(4 * nnz), cols.ravel(), np.arange(5) * nnz), shape=(4, n))
X.sum_duplicates()
small = sp.csr_matrix(X[:, :1000])
pairwise_distances(small, metric="cityblock", working_memory=1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
D = pairwise_distances(X, metric="cityblock", working_memory=1)
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
assert abs(D[0, 1] - abs(X[0] - X[1]).sum()) < 1e-6 * D[0, 1]
print(grew // 1024)
"""


def test_union_scratch_stays_within_working_memory():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", SCRATCH_CHILD], check=False, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    grew_mib = int(out.stdout.split()[-1])
    assert grew_mib < 40, f"the call's peak memory grew by {grew_mib} MiB with working_memory=1"


def test_union_kernels_and_the_masked_product_agree_to_the_last_bit(monkeypatch):
    """Merge and scatter add a union's terms in one order, so a result does not depend on which ran (the
    working memory, a batch's rows), and the masked product equals the dense one at its entries (int64 indices,
    float64 rows against float32 ones)."""
    rng = np.random.default_rng(19)
    X = random_csr(rng, 12, 40, 0.5, np.int64, np.float64)
    Y = random_csr(rng, 9, 40, 0.5, np.int64, np.float32)
    X.data = rng.normal(size=X.nnz) * 10.0 ** rng.integers(-8, 8, X.nnz)  # magnitudes that make order matter
    results = {}
    for strategy in ("merge", "scatter"):
        monkeypatch.setenv(semiring.settings.CPU_UNION.name, strategy)
        results[strategy] = ENGINE.pairwise(X, Y, semiring.plus_sqdiff, np.float64)
    np.testing.assert_array_equal(results["merge"], results["scatter"])
    rows, cols = np.nonzero(np.ones(results["merge"].shape, bool))
    masked = ENGINE.pairwise(X, Y, semiring.plus_sqdiff, np.float64, mask=Entries(rows, cols))
    np.testing.assert_array_equal(masked, results["merge"][rows, cols])


def test_a_block_with_nothing_stored_is_the_start_without_a_kernel(monkeypatch):
    """An intersection with a side holding no entries, or a union of two, is the accumulator's start everywhere
    (0 for plus, +inf for min: SciPy's product and graphblas's missing entries), with no kernel compiled or run;
    a union with one side stored is not constant."""
    from semiring.kernels.cpu import pairwise as cpu_pairwise
    from semiring.kernels.cpu import strategies as cpu_strategies

    def planned(A, B, sr):
        return cpu_strategies.plan(cpu_strategies.Product(A, B, sr, "dense")).strategy.name

    rng = np.random.default_rng(41)
    empty, Y = sp.csr_matrix((3, 9)), random_csr(rng, 5, 9, 0.4, np.int32, np.float64)
    monkeypatch.setattr(cpu_pairwise, "_semiring_kernels", None)  # a kernel asked for would fail the call
    for sr, dtype in ((semiring.plus_times, np.float32), (semiring.min_plus, np.float64)):
        assert planned(empty, Y, sr) == planned(Y, empty, sr) == "constant"
        got = ENGINE.pairwise(empty, Y, sr, dtype)
        want = (empty @ Y.T).toarray() if sr is semiring.plus_times else np.full((3, 5), np.inf)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ENGINE.pairwise(empty, empty, semiring.plus_absdiff, np.float64), np.zeros((3, 3)))
    assert planned(empty, Y, semiring.plus_absdiff) != "constant"


# --------------------------------------------------------------------------- expansion in the product kernel


@pytest.mark.parametrize(
    ("metric", "index_dtype"), [("cosine", np.int32), ("cityblock", np.int64), ("euclidean", np.int32)]
)
def test_expanded_products_match_cdist_and_are_taken_only_where_they_apply(metric, index_dtype, monkeypatch):
    """A one-term measure expanded as the row or inverted (cosine, euclidean) or margins (cityblock) kernel writes
    it is SciPy's, in the result's type, and euclidean's near-duplicates (listed by the kernel) are recomputed
    exactly (identical rows at 0); other products (chebyshev's max: its plan's kernel does not expand) and small
    results are expanded apart from the plan's product, to the same values and flagged entries."""
    from scipy.spatial.distance import cdist

    from semiring.distances import pairwise_distances
    from semiring.distances.bound import BoundMeasure
    from semiring.distances.specs import expression, resolve_metric
    from semiring.kernels.cpu import dense as dense_path
    from semiring.kernels.cpu import strategies as cpu_strategies

    rng = np.random.default_rng(29)
    X = random_csr(rng, 13, 20, 0.3, index_dtype, np.float32)
    X.data = (X.data * 1e3).astype(np.float32)  # large norms: identical rows cancel to rounding, refined to 0
    Y = sp.vstack([random_csr(rng, 17, 20, 0.3, index_dtype, np.float32), X[:6]], format="csr")
    spec, values = resolve_metric(metric, {})
    bound = BoundMeasure(ENGINE, spec, values, np.float32)
    Xr, Yr = bound.prepare(X), bound.prepare(Y)
    when = None if spec.refine is None else expression(spec.refine.when, EXPANSION_VARIABLES)
    expansion = (spec.expansion_tree, tuple(spec.param_names), bound.param_array, Xr.norms, Yr.norms, 20, when)
    chosen = cpu_strategies.plan(cpu_strategies.Product(Xr.matrix, Yr.matrix, bound.terms[0], "dense"))
    assert chosen.strategy.expands
    apart, apart_flagged = ENGINE.pairwise_expanded(Xr.matrix, Yr.matrix, bound.terms[0], np.float32, expansion)
    monkeypatch.setattr(cpu_strategies, "EXPANDED_MIN_ENTRIES", 0)
    fused, flagged = ENGINE.pairwise_expanded(Xr.matrix, Yr.matrix, bound.terms[0], np.float32, expansion)
    assert fused.dtype == apart.dtype == np.float32
    np.testing.assert_allclose(fused, apart, rtol=1e-6, atol=1e-6 * np.nanmax(apart))
    # the public call on the sparse kernels, as the engine's direct call above (dense enough, float32 rows would take
    # BLAS in float32, equal to within the float32 tolerance only: tests/cpu/test_dense_blocks.py)
    monkeypatch.setenv(dense_path.DENSE_ENV, "never")
    got = pairwise_distances(X, Y, metric=metric, backend="cpu")
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = cdist(dense(X), dense(Y), metric)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6 * np.nanmax(ref))
    if metric == "euclidean":
        listed = set(zip(flagged.rows.tolist(), flagged.cols.tolist()))
        stored = [i for i in range(6) if X.indptr[i + 1] > X.indptr[i]]  # empty rows (0, 5) need no refining
        assert len(stored) == 4 and {(i, 17 + i) for i in stored} <= listed  # each row against its copy
        assert {(i, 17 + i) for i in stored} <= set(zip(apart_flagged.rows.tolist(), apart_flagged.cols.tolist()))
        np.testing.assert_array_equal(got[np.arange(6), 17 + np.arange(6)], 0.0)
    else:
        assert flagged is None and apart_flagged is None
        np.testing.assert_array_equal(got, fused)
    cheb, _ = resolve_metric("chebyshev", {})
    chebyshev = (cheb.expansion_tree, (), np.zeros(0), [], [], 20, None)
    assert not cpu_strategies.plan(cpu_strategies.Product(X, Y, semiring.max_absdiff, "dense")).strategy.expands
    out, none = ENGINE.pairwise_expanded(X, Y, semiring.max_absdiff, np.float32, chebyshev)
    assert out.dtype == np.float32 and none is None
    np.testing.assert_allclose(out, cdist(dense(X), dense(Y), "chebyshev"), rtol=1e-6)


def test_expanded_product_with_more_flagged_entries_than_room_falls_back(monkeypatch):
    """Refined entries beyond the kernel's room: the plan's product is written again and the entries selected
    from it, and the measure's result is still SciPy's."""
    from scipy.spatial.distance import cdist

    from semiring.distances import pairwise_distances
    from semiring.kernels.cpu import strategies as cpu_strategies

    rng = np.random.default_rng(31)
    X = random_csr(rng, 30, 12, 0.4, np.int64, np.float64)
    Y = sp.vstack([X] * 50, format="csr")  # 1,500 near-duplicates per chunk room of 1,024 at most
    monkeypatch.setattr(cpu_strategies, "EXPANDED_MIN_ENTRIES", 0)
    monkeypatch.setattr(cpu_strategies, "FLAGGED_SHARE", 10**9)
    got = pairwise_distances(X, Y, metric="euclidean", backend="cpu")
    np.testing.assert_allclose(got, cdist(dense(X), dense(Y), "euclidean"), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(got[:, :30].diagonal(), 0.0)
