"""``semiring.pairwise(..., sparse=True)`` on the CPU engine: python-graphblas ``mxm`` is the oracle (the same
pattern and values), and the dense result agrees at every stored entry and holds the add identity elsewhere."""

from __future__ import annotations

import graphblas as gb
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import sparse_pair

import semiring
from semiring import settings as env_settings

# Four semirings, one per add monoid, to keep the compiles few; graphblas names them alike.
SEMIRINGS = ["plus_times", "min_plus", "max_times", "plus_pair"]


def to_gb(A) -> gb.Matrix:
    coo = sp.coo_matrix(A)
    return gb.Matrix.from_coo(coo.row, coo.col, coo.data.astype(np.float64), nrows=A.shape[0], ncols=A.shape[1])


def assert_csr_equal_to_graphblas(C, X, Y, name: str, rtol: float) -> None:
    add, mult = name.split("_", 1)
    G = to_gb(X).mxm(to_gb(Y).T, getattr(gb.semiring, f"{add}_{mult}")).new()
    rows, cols, vals = G.to_coo()
    order = np.lexsort((cols, rows))
    coo = C.tocoo()
    np.testing.assert_array_equal(coo.row, rows[order])  # CSR order, sorted within rows: the same pattern
    np.testing.assert_array_equal(coo.col, cols[order])
    np.testing.assert_allclose(coo.data, vals[order], rtol=rtol, atol=1e-300)


@pytest.mark.parametrize("name", SEMIRINGS)
@settings(max_examples=25)
@given(data=st.data())
def test_sparse_result_is_graphblas_mxm_and_the_dense_one_at_its_entries(name, data):
    # Every value and index type on plus_times; the others on float64/int32: the ops see float64 whatever
    # the input, so the types only exercise the kernels' skeleton, the same for every semiring (cold compiles).
    types = {} if name == "plus_times" else {"dtype": np.float64, "index": np.int32}
    X, Y = data.draw(sparse_pair(**types))
    sr = getattr(semiring, name)
    C = semiring.pairwise(X, Y, sr, sparse=True)
    assert isinstance(C, sp.csr_matrix) and C.shape == (X.shape[0], Y.shape[0])
    assert C.dtype == semiring.pairwise(X, Y, sr).dtype and C.has_sorted_indices
    rtol = 1e-5 if C.dtype == np.float32 else 1e-12
    assert_csr_equal_to_graphblas(C, X, Y, name, rtol)
    dense = semiring.pairwise(X, Y, sr)
    coo = C.tocoo()
    np.testing.assert_allclose(dense[coo.row, coo.col], coo.data, rtol=rtol, atol=1e-300)
    outside = np.ones(dense.shape, bool)
    outside[coo.row, coo.col] = False
    np.testing.assert_array_equal(dense[outside], sr.add.identity)  # no shared column: the identity, not stored


# Every strategy of the sparse product, forced: down X's rows with each row's accumulator by its products
# ("rows"), every row hashed ("hash") or in p-long arrays ("dense"); down Y's rows walking postings (bitmaps "0")
# or ORing row bitmaps ("1"), these with X's index whole (blocks "0") or in blocks of columns walked by tiles of
# Y rows ("1").
STRATEGIES = [
    ("rows", "auto", "auto"),
    ("hash", "auto", "auto"),
    ("dense", "auto", "auto"),
    ("columns", "0", "auto"),
    ("columns", "1", "0"),
    ("columns", "1", "1"),
]


def force(env, strategy: str, bitmaps: str, blocks: str) -> None:
    env.setenv(env_settings.CPU_SPARSE.name, strategy)
    env.setenv(env_settings.CPU_SPARSE_BITMAPS.name, bitmaps)
    env.setenv(env_settings.CPU_SPARSE_BLOCKS.name, blocks)


@pytest.mark.parametrize(("strategy", "bitmaps", "blocks"), STRATEGIES)
@settings(max_examples=15)
@given(data=st.data())
def test_every_sparse_strategy_is_scipys_product_and_graphblas_mxm(strategy, bitmaps, blocks, data):
    """Awkward inputs (empty rows and matrices, explicit zeros, one column, float32 and float64, int32 and int64
    indices) on each strategy: the pattern is where the rows share a stored column (SciPy's product of the
    structures), the values SciPy's float64 ``X @ Y.T`` there, and the whole is graphblas's mxm."""
    X, Y = data.draw(sparse_pair())
    with pytest.MonkeyPatch.context() as env:
        force(env, strategy, bitmaps, blocks)
        C = semiring.pairwise(X, Y, semiring.plus_times, sparse=True)
    assert C.dtype == X.dtype and C.has_sorted_indices
    structure = [sp.csr_matrix((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape) for A in (X, Y)]
    pattern = (structure[0] @ structure[1].T).tocsr()
    pattern.sort_indices()
    np.testing.assert_array_equal(C.indptr, pattern.indptr)
    np.testing.assert_array_equal(C.indices, pattern.indices)
    exact = X.astype(np.float64).toarray() @ Y.astype(np.float64).toarray().T
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    rtol = 1e-5 if C.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(C.data, exact[rows, C.indices], rtol=rtol, atol=1e-300)
    assert_csr_equal_to_graphblas(C, X, Y, "plus_times", rtol)


@pytest.mark.parametrize(("strategy", "bitmaps", "blocks"), STRATEGIES)
def test_sparse_result_of_wide_very_sparse_rows_under_a_tiny_working_memory(strategy, bitmaps, blocks, monkeypatch):
    """EDGAR-like rows over 10⁶ columns (compacted), one worker's scratch at most: still mxm's, down X's rows
    on both accumulators (hashed rows of few products, p-long arrays read back through a bitmap for many; or
    every row on one, forced) and down Y's rows (sorted by construction) walking postings or ORing row bitmaps
    (the bits each Y row meets too many to keep for the fill), each forced."""
    from semiring.kernels.cpu.pairwise import SPARSE_DENSE_ROW

    force(monkeypatch, strategy, bitmaps, blocks)

    rng = np.random.default_rng(3)
    p, n = 3000, 1_000_000
    hot = rng.choice(n, 500, replace=False)  # shared columns, so that pairs meet

    def rows(k, nhot, pool=hot):
        cols = np.sort(np.concatenate([rng.choice(pool, (k, nhot)), rng.choice(n, (k, 4))], axis=1), axis=1)
        A = sp.csr_matrix((rng.random(cols.size), cols.ravel(), np.arange(k + 1) * cols.shape[1]), shape=(k, n))
        A.sum_duplicates()
        return A

    pair = np.array([n - 2, n - 1])  # 150 Y rows hold both: X rows holding both meet them twice each
    X = sp.vstack([rows(40, 2), rows(10, 100), rows(10, 2, pair)], format="csr")
    Y = sp.vstack([rows(p - 150, 2), rows(150, 2, pair)], format="csr")
    products = (X != 0).astype(np.int64) @ np.asarray((Y != 0).sum(axis=0)).ravel()
    dense_rows = SPARSE_DENSE_ROW * products >= p  # the kernel's rule (semiring_template._dense_row)
    assert dense_rows.any() and not dense_rows.all()
    C = semiring.pairwise(X, Y, semiring.plus_times, sparse=True, working_memory=1e-4)
    assert 0 < C.nnz < X.shape[0] * p
    assert np.diff(C.indptr)[dense_rows].max() > 64  # entries in several bitmap words
    assert_csr_equal_to_graphblas(C, X, Y, "plus_times", 1e-12)


def test_sparse_result_keeps_the_input_kind_and_empty_shapes():
    X = sp.csr_array(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0]], dtype=np.float32))
    C = semiring.pairwise(X, None, semiring.plus_times, sparse=True)
    assert isinstance(C, sp.csr_array) and C.dtype == np.float32
    np.testing.assert_array_equal(C.toarray(), [[5.0, 0.0], [0.0, 0.0]])
    assert C.nnz == 1  # the empty row meets nothing: nothing stored
    for shape in [(0, 3), (2, 0)]:
        E = semiring.pairwise(sp.csr_matrix(shape), sp.csr_matrix((4, shape[1])), semiring.min_plus, sparse=True)
        assert E.shape == (shape[0], 4) and E.nnz == 0


def test_sparse_result_refusals_name_the_rule():
    X = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match="'plus_absdiff' is a union one.*value at every pair"):
        semiring.pairwise(X, X, semiring.plus_absdiff, sparse=True)
    with pytest.raises(ValueError, match="mask= or sparse=True, not both"):
        semiring.pairwise(X, X, semiring.plus_times, sparse=True, mask=X)
    with pytest.raises(TypeError, match="sparse must be True or False, got 'yes'"):
        semiring.pairwise(X, X, semiring.plus_times, sparse="yes")


def test_sparse_strategy_runs_along_the_longer_side_and_checks_its_override(monkeypatch):
    from semiring.kernels.cpu import strategies

    SPARSE_STRATEGY_ENV, SPARSE_BITMAPS_ENV = env_settings.CPU_SPARSE.name, env_settings.CPU_SPARSE_BITMAPS.name

    def sparse_strategy(m: int, p: int) -> str:
        product = strategies.Product(sp.csr_matrix((m, 3)), sp.csr_matrix((p, 3)), semiring.plus_times, "sparse")
        return strategies.plan(product).strategy.name

    assert sparse_strategy(512, 100_000) == "columns" and sparse_strategy(100_000, 512) == "rows"
    monkeypatch.setenv(SPARSE_STRATEGY_ENV, "rows")
    assert sparse_strategy(512, 100_000) == "rows"
    monkeypatch.setenv(SPARSE_STRATEGY_ENV, "diagonal")
    message = "SEMIRING_CPU_SPARSE must be one of 'auto', 'rows', 'hash', 'dense', 'columns', got 'diagonal'"
    with pytest.raises(ValueError, match=message):
        sparse_strategy(1, 1)
    monkeypatch.setenv(SPARSE_STRATEGY_ENV, "columns")
    monkeypatch.setenv(SPARSE_BITMAPS_ENV, "yes")
    X = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match="SEMIRING_CPU_SPARSE_BITMAPS must be one of 'auto', '0', '1', got 'yes'"):
        semiring.pairwise(X, X, semiring.plus_times, sparse=True)
    monkeypatch.setenv(SPARSE_BITMAPS_ENV, "1")
    monkeypatch.setenv("SEMIRING_CPU_SPARSE_BLOCKS", "2")
    with pytest.raises(ValueError, match="SEMIRING_CPU_SPARSE_BLOCKS must be one of 'auto', '0', '1', got '2'"):
        semiring.pairwise(X, X, semiring.plus_times, sparse=True)


def test_sparse_result_with_the_queries_index_in_blocks(monkeypatch):
    """Queries whose index (postings and dense columns) is larger than a block: on their own (no override),
    the product down Y's rows cuts X's columns into blocks of at most ``SPARSE_BLOCK_BYTES`` (one column may be
    more), in order, the last ending the space, and walks them by tiles of 64 Y rows; still SciPy's and mxm's."""
    from semiring.kernels.cpu import pairwise

    blocks = []

    def column_blocks(slot, colptr, dslot, m, itemsize, ncols, nchunks, budget):
        bounds, tile = original(slot, colptr, dslot, m, itemsize, ncols, nchunks, budget)
        weight = np.where(dslot >= 0, m * itemsize, np.diff(colptr) * (4 + itemsize))
        per_column = np.where(slot >= 0, weight[np.maximum(slot, 0)], 0)
        sizes = [per_column[a:b].sum() for a, b in zip(np.r_[0, bounds[:-1]], bounds)]
        blocks.append((sizes, per_column.max(), bounds, tile, ncols))
        return bounds, tile

    original = pairwise.column_blocks
    monkeypatch.setattr(pairwise, "column_blocks", column_blocks)
    rng = np.random.default_rng(13)
    dense = sp.csr_matrix(rng.random((128, 40), dtype=np.float32) + 0.5)  # each one axpy (plus_times)
    X = sp.hstack([dense, sp.random(128, 2960, density=0.3, random_state=rng, dtype=np.float32)], format="csr")
    Y = sp.random(300, 3000, density=0.05, format="csr", random_state=rng, dtype=np.float32)
    C = semiring.pairwise(X, Y, semiring.plus_times, sparse=True)
    sizes, widest, bounds, tile, ncols = blocks[-1]
    assert len(sizes) >= 3 and tile == 64 and bounds[-1] == ncols and (np.diff(bounds) > 0).all()
    assert max(sizes) <= pairwise.SPARSE_BLOCK_BYTES + widest  # a block ends past the column that fills it
    np.testing.assert_allclose(C.toarray(), X.toarray().astype(np.float64) @ Y.toarray().T, rtol=1e-5)
    assert_csr_equal_to_graphblas(C, X, Y, "plus_times", 1e-5)


@pytest.mark.parametrize(("bitmaps", "blocks"), [("0", "auto"), ("1", "0"), ("1", "1")])
def test_sparse_result_down_y_rows_meeting_every_x_row(bitmaps, blocks, monkeypatch):
    """100 X rows that all hold column 0 (some as a stored zero), against Y rows holding it: each Y row meets
    every X row, so the count adds whole words of bits at once (a full word and a last word of 36 rows), and
    the X rows' stored zeros still count as entries."""
    force(monkeypatch, "columns", bitmaps, blocks)
    rng = np.random.default_rng(5)

    def rows(k, every):  # column 0 stored in every `every`-th row
        stored = rng.random((k, 6)) < 0.3
        stored[:, 0] = np.arange(k) % every == 0
        r, c = np.nonzero(stored)
        return sp.csr_matrix((rng.random(r.size), (r, c)), shape=(k, 6))

    X, Y = rows(100, 1), rows(150, 2)
    X.data[(X.indices == 0) & (np.arange(X.nnz) % 7 == 0)] = 0.0  # stored zeros
    C = semiring.pairwise(X, Y, semiring.plus_times, sparse=True)
    assert np.diff(C.indptr).min() >= 75  # every X row meets every Y row holding column 0
    np.testing.assert_allclose(C.toarray(), X.toarray() @ Y.toarray().T, rtol=1e-12)
    assert_csr_equal_to_graphblas(C, X, Y, "plus_times", 1e-12)


@pytest.mark.parametrize("blocks", ["0", "1"])
def test_sparse_result_with_dense_columns_and_an_infinite_value(blocks, monkeypatch):
    """A column held by most queries runs as one axpy over an m-long column of X (plus_times), the others as
    postings walks; an infinite y in the dense column takes the walk (0 × inf is NaN: the X rows without the
    column must keep their finite sums), as mxm gives it; X's index whole or in blocks walked by tiles."""
    force(monkeypatch, "auto", "auto", blocks)
    rng = np.random.default_rng(11)
    X = sp.random(70, 40, density=0.1, format="lil", random_state=rng)
    X[:60, 3] = 1.0 + rng.random((60, 1))  # a dense column (60 of 70 rows)
    X[60:, 3] = 0.0
    X[60:, 7] = 1.0  # rows without column 3 that meet Y row 4 at column 7
    Y = sp.random(90, 40, density=0.1, format="lil", random_state=rng)
    Y[::3, 3] = rng.random((30, 1))
    Y[4, 3], Y[4, 7] = np.inf, 2.0
    X, Y = X.tocsr(), Y.tocsr()
    X[5, 3] = 0.0  # a stored zero in the dense column (an existing entry: stays stored)
    X.sort_indices()
    Y.sort_indices()
    C = semiring.pairwise(X, Y, semiring.plus_times, sparse=True)
    assert_csr_equal_to_graphblas(C, X, Y, "plus_times", 1e-12)
    column = C[:, 4].toarray().ravel()
    assert np.isinf(column[:60]).sum() == 59 and np.isnan(column[5])  # inf × x, and inf × a stored 0
    assert np.isfinite(column[60:]).all() and (column[60:] > 0).all()


@pytest.mark.parametrize("bitmaps", ["0", "1"])
def test_sparse_result_down_y_rows_in_ranges_of_equal_entries(bitmaps, monkeypatch):
    """Y's rows sorted by length (as collections often are), two of them longer than all the others together:
    the ranges, cut at equal shares of Y's entries (``pairwise.row_ranges``), are some empty and some one row."""
    force(monkeypatch, "columns", bitmaps, "auto")
    rng = np.random.default_rng(12)
    lengths = np.sort(np.minimum(rng.zipf(1.5, 60), 30))[::-1]
    lengths[:2] = 200
    Y = sp.csr_matrix(
        (
            rng.random(lengths.sum()),
            np.concatenate([rng.choice(300, k, replace=False) for k in lengths]),
            np.concatenate([[0], np.cumsum(lengths)]),
        ),
        shape=(60, 300),
    )
    Y.sort_indices()
    X = sp.random(20, 300, density=0.1, format="csr", random_state=rng)
    from semiring.kernels.cpu.pairwise import row_ranges

    cuts = row_ranges(Y.indptr, 8)
    assert (np.diff(cuts) == 0).any() and cuts[0] == 0 and cuts[-1] == Y.shape[0] and (np.diff(cuts) >= 0).all()
    C = semiring.pairwise(X, Y, semiring.plus_times, sparse=True)
    assert_csr_equal_to_graphblas(C, X, Y, "plus_times", 1e-12)


@pytest.mark.parametrize("m", [70, 128])
@pytest.mark.parametrize("blocks", ["0", "1"])
def test_sparse_result_of_y_rows_that_meet_every_x_row_early(m, blocks, monkeypatch):
    """Every X row holds column 0 and most Y rows too, with dozens of entries after it: the count stops ORing a
    row's bitmaps once it meets every X row (tested every 8 entries; m a whole number of words or not), and the
    result is still mxm's; some Y rows lack column 0 and meet only some X rows."""
    force(monkeypatch, "columns", "1", blocks)
    rng = np.random.default_rng(14)
    X = sp.random(m, 80, density=0.05, format="lil", random_state=rng)
    X[:, 0] = 1.0 + rng.random((m, 1))
    Y = sp.random(120, 80, density=0.5, format="lil", random_state=rng)
    Y[::3, 0] = 0.0  # a third of Y's rows without column 0 (lil drops the zero)
    Y[1::3, 0] = rng.random((40, 1)) + 0.5
    X, Y = X.tocsr(), Y.tocsr()
    C = semiring.pairwise(X, Y, semiring.plus_times, sparse=True)
    assert (np.diff(C.tocsc().indptr)[1::3] == m).all()  # the Y rows holding column 0 meet every X row
    assert_csr_equal_to_graphblas(C, X, Y, "plus_times", 1e-12)
    np.testing.assert_allclose(C.toarray(), X.toarray() @ Y.toarray().T, rtol=1e-12)


@pytest.mark.parametrize("name", ["plus_times", "min_plus"])
@pytest.mark.parametrize("blocks", ["0", "1"])
def test_sparse_result_walked_column_by_column_is_that_walked_row_by_row(name, blocks, monkeypatch):
    """Down Y's rows with bitmaps, a tile's entries in a block walked column by column (two tile rows a posting
    read, odd ones alone; dense columns of X as axpys, an infinite y there walked) give the bits of the walk
    row by row, and mxm's result; forced each way (``COLUMN_MAJOR_WIDTH``: 0 never, huge always)."""
    from semiring.kernels.cpu import pairwise

    force(monkeypatch, "columns", "1", blocks)
    rng = np.random.default_rng(13)
    X = sp.random(90, 60, density=0.15, format="lil", random_state=rng)
    X[:70, 5] = 1.0 + rng.random((70, 1))  # a dense column of X (plus_times)
    X[3, 8] = 0.0
    X = X.tocsr()
    X[3, 8] = 0.0  # a stored zero
    Y = sp.random(200, 60, density=0.2, format="lil", random_state=rng)
    Y[::2, 5] = rng.random((100, 1))
    Y[6, 5], Y[9, 11] = np.inf, -np.inf
    Y = Y.tocsr()
    X.sort_indices()
    Y.sort_indices()
    sr = getattr(semiring, name)
    results = []
    for width in (0.0, 1e18):
        monkeypatch.setattr(pairwise, "COLUMN_MAJOR_WIDTH", width)
        results.append(semiring.pairwise(X, Y, sr, sparse=True))
    row_major, column_major = results
    np.testing.assert_array_equal(column_major.indptr, row_major.indptr)
    np.testing.assert_array_equal(column_major.indices, row_major.indices)
    np.testing.assert_array_equal(column_major.data, row_major.data)  # the same bits: the same order of sums
    assert_csr_equal_to_graphblas(column_major, X, Y, name, 1e-12)


@pytest.mark.parametrize("nchunks", [1, 3, 8])
def test_index_by_column_across_threads_is_scipys_csc(nchunks):
    """X's index by column, its rows counted and placed in ranges across threads: SciPy's CSC of X (rows in
    order within a column), values in X's own type, whatever the ranges (empty rows and columns included)."""
    from semiring.kernels.cpu.pairwise import _index_by_column

    rng = np.random.default_rng(2)
    X = sp.random(200, 30, density=0.1, format="lil", random_state=rng, dtype=np.float32)
    X[50:80] = 0.0  # empty rows
    X = X.tocsr()
    colptr, crow, cval = _index_by_column(X.indptr, X.indices, X.data, 30, nchunks)
    csc = X.tocsc()
    csc.sort_indices()
    np.testing.assert_array_equal(colptr, csc.indptr)
    np.testing.assert_array_equal(crow, csc.indices)
    assert cval.dtype == np.float32
    np.testing.assert_array_equal(cval, csc.data)


@pytest.mark.parametrize("strategy", ["columns", "rows"])
def test_sparse_result_over_2_40_columns_is_that_of_the_same_rows_on_8(strategy, monkeypatch):
    """A hashed feature space of 2**40 columns (int64 indices): down Y's rows the columns are renumbered (by
    sorting: too wide for a slot a column), down X's rows too; the result is the same rows' on 8 columns."""
    monkeypatch.setenv(env_settings.CPU_SPARSE.name, strategy)
    spread = np.array([0, 7, 99, 12345, 1 << 20, 1 << 30, (1 << 40) - 9, (1 << 40) - 1], dtype=np.int64)
    rng = np.random.default_rng(17)
    small = [sp.random(k, 8, density=0.5, format="coo", random_state=rng) for k in (3, 5)]
    small[0].data[0] = 0.0  # a stored zero still meets
    wide = [sp.csr_matrix((A.data, (A.row, spread[A.col])), shape=(A.shape[0], 1 << 40)) for A in small]
    C = semiring.pairwise(wide[0], wide[1], semiring.plus_times, sparse=True)
    X, Y = (A.tocsr() for A in small)
    structure = [sp.csr_matrix((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape) for A in (X, Y)]
    pattern = (structure[0] @ structure[1].T).tocsr()
    pattern.sort_indices()
    np.testing.assert_array_equal(C.indptr, pattern.indptr)
    np.testing.assert_array_equal(C.indices, pattern.indices)
    np.testing.assert_allclose(C.toarray(), X.toarray() @ Y.toarray().T, rtol=1e-12)


@pytest.mark.parametrize("step", [1, 3])
def test_the_bitmaps_choice_reads_every_step_th_y_row(step):
    """``_postings_met`` (the choice of bitmaps down Y's rows) sums over the entries of rows 0, step, 2·step, …:
    the X rows holding each entry's column, and the entries in a column X holds, as SciPy counts them."""
    from semiring.kernels.cpu.pairwise import _postings_met, _x_column_slots, index_by_column

    rng = np.random.default_rng(19)
    X = sp.random(40, 30, density=0.2, format="csc", random_state=rng)
    X = X[:, :29]  # column 29: one X lacks
    X.resize(40, 30)
    X = X.tocsr()
    X.sort_indices()
    Y = sp.random(10, 30, density=0.3, format="csr", random_state=rng)
    slot, _, xs, nslots = _x_column_slots(X.indptr, X.indices, 30)
    colptr, _, _ = index_by_column(X.indptr, xs, X.data, nslots)
    sample = Y[::step]
    postings = np.diff(X.tocsc().indptr)  # X rows holding each column
    expected = (int(postings[sample.indices].sum()), int((postings[sample.indices] > 0).sum()))
    assert _postings_met(Y.indptr, Y.indices, slot, colptr, step) == expected
