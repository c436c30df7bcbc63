"""Dense blocks on the CPU engine (``kernels/cpu/dense.py``): BLAS for dot products, the tiled kernel for unions,
against SciPy's cdist (float64) and the sparse kernels, forced both ways and chosen per block."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import NONNEGATIVE, ill_posed, oracle, tolerances
from strategies import dense, sparse_pair

import semiring
from semiring import distances
from semiring.distances.specs import DISTANCES
from semiring.interfaces import call_density
from semiring.kernels.cpu import dense as dense_path

MEASURES = [d.name for d in DISTANCES if d.name not in ("seuclidean",)]  # seuclidean: its own V test below


def run(X, Y, metric, monkeypatch, mode, **params):
    monkeypatch.setenv(dense_path.DENSE_ENV, mode)
    return distances.pairwise_distances(X, Y, metric, backend="cpu", **params)


def rows(rng, m, n, metric, dtype=np.float64):
    X = rng.random((m, n))
    if metric not in NONNEGATIVE:
        X -= 0.3
    return X.astype(dtype)


@pytest.mark.parametrize("metric", MEASURES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_measure_on_dense_rows_against_cdist(metric, dtype, monkeypatch, rng):
    # 37 x 130 against 45 x 130: row counts not multiples of the kernel's four, p not of its tile
    X, Y = rows(rng, 37, 130, metric, dtype), rows(rng, 45, 130, metric, dtype)
    Y[3] = X[5]  # a duplicate: euclidean's exact recomputation, distance 0
    params = {"p": 3.0} if metric == "minkowski" else {}
    got = run(X, Y, metric, monkeypatch, "always", **params)
    Xd, Yd = X.astype(np.float64), Y.astype(np.float64)
    want = oracle(metric, Xd, Yd, **params)
    keep = ~ill_posed(metric, Xd, Yd)
    np.testing.assert_allclose(got[keep], want[keep], **tolerances(metric, got.dtype))
    sparse = run(X, Y, metric, monkeypatch, "never", **params)
    rtol = 1e-12 if dtype == np.float64 else 1e-6  # the two paths' sums, in another order
    np.testing.assert_allclose(got, sparse, rtol=rtol, atol=1e-12)


def test_near_duplicates_are_recomputed_exactly(monkeypatch, rng):
    X = rng.random((20, 64)) * 1e4
    Y = X + rng.normal(scale=1e-6, size=X.shape)  # d² far below 1e-3 (‖x‖² + ‖y‖²): the expansion cancels
    for metric in ("euclidean", "sqeuclidean"):
        got = run(X, Y, metric, monkeypatch, "always")
        want = oracle(metric, X, Y)
        np.testing.assert_allclose(np.diag(got), np.diag(want), rtol=1e-9)
        assert (np.diag(got) > 0).all()


@settings(max_examples=60, deadline=None)
@given(
    pair=sparse_pair(max_rows=9, max_cols=11),
    metric=st.sampled_from(["cityblock", "chebyshev", "euclidean", "cosine", "canberra", "hamming"]),
)
def test_awkward_blocks_forced_dense(pair, metric):
    """Empty rows, explicit zeros, one column, int32/int64 indices, float32: the dense path's answer is cdist's."""
    X, Y = pair
    import os

    os.environ[dense_path.DENSE_ENV] = "always"
    try:
        got = distances.pairwise_distances(X, Y, metric, backend="cpu")
    finally:
        del os.environ[dense_path.DENSE_ENV]
    Xd, Yd = dense(X), dense(Y)
    want = oracle(metric, Xd, Yd)
    keep = ~ill_posed(metric, Xd, Yd) & ~(np.isnan(want) & np.isnan(got))
    np.testing.assert_allclose(got[keep], want[keep], **tolerances(metric, got.dtype))


def test_chosen_by_the_calls_densities():
    dot, union = semiring.plus_times, semiring.plus_absdiff
    full = sp.csr_matrix(np.ones((8, 10)))
    tenth = sp.random(8, 10, density=0.1, format="csr", random_state=0)
    for (dx, dy), want_dot, want_union in [
        ((1.0, 1.0), True, True),
        ((0.1, 0.1), False, False),  # 0.01 of the dense product's work; merges read 0.2 of the columns
        ((1.0, 0.1), True, True),  # 0.1: BLAS still wins
        ((0.2, 0.2), False, False),
    ]:
        with call_density(sp.random(10, 10, density=dx, random_state=1), sp.random(10, 10, density=dy, random_state=2)):
            # the call's wholes decide, whatever the block's own entries
            assert dense_path.applies(tenth, tenth, dot) == want_dot
            assert dense_path.applies(full, full, union) == want_union
    assert not dense_path.applies(full, full, dot)  # outside a call: the sparse kernels
    empty = sp.csr_matrix((0, 10))
    with call_density(full, full):
        assert not dense_path.applies(empty, full, dot)


def test_which_semirings(monkeypatch):
    """Unions (whose 0 ⊗ 0 is neutral by construction, semiring.ops) and plus_times; no other intersection."""
    full = sp.csr_matrix(np.ones((4, 6)))
    custom = semiring.Semiring(semiring.monoid.plus, semiring.binary_op("(x - y) ** 4.0", name="quartic_diff"))
    with call_density(full, full):
        assert dense_path.applies(full, full, semiring.max_absdiff)  # f(0, 0) = 0 under max: neutral
        assert custom.is_union and dense_path.applies(full, full, custom)
        assert not dense_path.applies(full, full, semiring.min_plus)  # an intersection other than plus_times
    monkeypatch.setenv(dense_path.DENSE_ENV, "always")
    assert not dense_path.applies(full, full, semiring.min_plus)
    monkeypatch.setenv(dense_path.DENSE_ENV, "sometimes")
    with pytest.raises(ValueError, match=r"\$SEMIRING_CPU_DENSE must be one of"):
        dense_path.applies(full, full, semiring.plus_times)


def test_custom_union_semiring_dense(monkeypatch, rng):
    X, Y = rng.random((9, 17)) - 0.5, rng.random((6, 17)) - 0.5
    monkeypatch.setenv(dense_path.DENSE_ENV, "always")
    got = semiring.pairwise(X, Y, semiring.max_absdiff, backend="cpu")
    np.testing.assert_allclose(got, np.abs(X[:, None] - Y[None]).max(-1), rtol=0)
    got = semiring.pairwise(X, Y, semiring.plus_times, backend="cpu")
    np.testing.assert_allclose(got, X @ Y.T, rtol=1e-13)
    quartic = semiring.Semiring(semiring.monoid.plus, semiring.binary_op("(x - y) ** 4.0", name="quartic_diff"))
    got = semiring.pairwise(X, Y, quartic, backend="cpu")
    np.testing.assert_allclose(got, ((X[:, None] - Y[None]) ** 4).sum(-1), rtol=1e-12)


def test_seuclidean_and_weights_on_dense_rows(monkeypatch, rng):
    X, Y = rng.random((12, 20)), rng.random((7, 20))
    w = rng.random(20) + 0.1
    for metric, params in (("seuclidean", {}), ("cityblock", {"w": w}), ("euclidean", {"w": w})):
        got = run(X, Y, metric, monkeypatch, "always", **params)
        np.testing.assert_allclose(got, oracle(metric, X, Y, **params), rtol=1e-9)


def test_knn_on_dense_rows_matches_scikit_learn(rng):
    from sklearn.neighbors import NearestNeighbors

    X = rng.random((300, 40)).astype(np.float32)
    for metric in ("euclidean", "cosine", "manhattan", "chebyshev"):
        got = distances.NearestNeighbors(n_neighbors=5, metric=metric, backend="cpu").fit(X).kneighbors()
        want = NearestNeighbors(n_neighbors=5, metric=metric, algorithm="brute").fit(X).kneighbors()
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)


@pytest.mark.parametrize("metric", ["cosine", "cityblock", "euclidean"])
def test_a_call_takes_one_path_whatever_its_tiling(metric, rng):
    """The whole inputs' densities choose (semiring.interfaces.CALL_DENSITY): tiles of one row, whose own densities
    straddle the thresholds, give the one-pass result to the last bit, and so do kNN's tiles."""
    X = sp.random(60, 40, density=0.1, format="csr", random_state=1)  # whole: 0.18, sparse; a dense row: dense
    X = sp.vstack([X, sp.csr_matrix(rng.random((6, 40)))], format="csr")  # a few dense rows among sparse ones
    whole = distances.pairwise_distances(X, metric=metric, backend="cpu")
    one_row = 8 * 2 * X.shape[0] / 2**20  # a budget of about one row a tile
    tiled = distances.pairwise_distances(X, metric=metric, backend="cpu", working_memory=one_row)
    np.testing.assert_array_equal(tiled, whole)
    nn = distances.NearestNeighbors(n_neighbors=4, metric=metric, backend="cpu", working_memory=one_row).fit(X)
    dist, ind = nn.kneighbors(X.copy())  # queries that are not the index: every pair as its tile gives it
    np.testing.assert_array_equal(dist, np.take_along_axis(whole, ind, axis=1))
    # all pairs once (X=None): each pair's one value serves both rows, and a union's two orders of a pair may
    # sum in different orders (here 3.3052568294223508 against ...503), so to rounding
    dist, ind = nn.kneighbors()
    np.testing.assert_allclose(dist, np.take_along_axis(whole, ind, axis=1), rtol=1e-15, atol=0)


@pytest.mark.parametrize("forced", ["auto", "always"])
def test_dense_dot_path_keeps_the_intersection_where_values_are_infinite(forced, monkeypatch):
    """A dense row reads a missing entry as 0, and 0 × inf is NaN: with ±inf stored, the product stays sparse (the
    intersection of stored entries, as python-graphblas computes it), forced or not."""
    from semiring import settings as semiring_settings

    monkeypatch.setenv(semiring_settings.CPU_DENSE.name, forced)
    X = sp.csr_matrix((np.array([0.0, 2.0, 1.0, np.inf]), np.array([0, 1, 0, 2]), np.array([0, 2, 4])), shape=(2, 3))
    Y = sp.csr_matrix(np.array([[np.inf, 1.0, 0.0], [0.0, 3.0, -np.inf]]))
    got = semiring.pairwise(X, Y, semiring.plus_times, backend="cpu")
    # by hand over the stored pairs: row 0 meets Y's row 0 at columns 0 (0 × inf) and 1, Y's row 1 at column 1
    want = np.array([[np.nan, 6.0], [np.inf, -np.inf]])
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- float32 products


@pytest.fixture
def float32_products(monkeypatch):
    """The float32 BLAS path taken on small blocks (it is taken from 2**20 result entries), each call counted."""
    from semiring.kernels.cpu import strategies as cpu_strategies

    monkeypatch.setattr(cpu_strategies, "EXPANDED_MIN_ENTRIES", 0)
    monkeypatch.setenv(dense_path.DENSE_ENV, "always")
    calls = []
    blocks = dense_path.float32_blocks

    def counted(X, Y):
        calls.append(X.shape)
        return blocks(X, Y)

    monkeypatch.setattr(dense_path, "float32_blocks", counted)
    return calls


def awkward_float32_rows(rng, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose float32 products cancel in the expansions: duplicates, parallel rows, near-duplicates (1e-4
    apart), an empty row, rows of 1e20 (their float32 products overflow), signed rows."""
    X = rng.random((m, n)).astype(np.float32)
    Y = rng.random((m + 3, n)).astype(np.float32)
    Y[0] = X[0]  # a duplicate
    Y[1] = 3 * X[1]  # parallel: cosine 0
    Y[2] = X[2] + np.float32(1e-4) * rng.random(n).astype(np.float32)  # near-duplicate
    X[3] = 0.0  # empty row: cosine NaN, as SciPy
    X[4] = Y[4] = np.float32(1e20)  # float32's x·y overflows; float64's does not
    X[5] -= 0.5  # signs: products that cancel inside the sum
    Y[5] = X[5]
    return X, Y


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_float32_products_recompute_what_they_cannot_give(metric, float32_products, rng):
    """A float32 result of float32 rows is multiplied in float32 and each entry's uncertainty is carried into its
    expansion: the cancelling entries (duplicates, parallel and near-duplicate rows, overflowed products) are
    recomputed from the rows, as exact as the float64 path's; the rest are within the float32 tolerance."""
    X, Y = awkward_float32_rows(rng, 40, 300)
    got = distances.pairwise_distances(X, Y, metric, backend="cpu")
    assert float32_products and got.dtype == np.float32, "the float32 path did not run"
    Xd, Yd = X.astype(np.float64), Y.astype(np.float64)
    want = oracle(metric, Xd, Yd)
    np.testing.assert_allclose(got, want, rtol=dense_path.FLOAT32_TOLERANCE, atol=1e-12, equal_nan=True)
    exact = [(0, 0), (2, 2), (4, 4), (5, 5)] + ([(1, 1)] if metric == "cosine" else [])
    for i, j in exact:  # recomputed in float64: the exact value (SciPy's own cancels to 2e-16 at the 1e20 rows)
        assert abs(got[i, j] - want[i, j]) <= 1e-6 * abs(want[i, j]) + 1e-12, (i, j, got[i, j], want[i, j])
    assert np.isnan(got[3]).all() if metric == "cosine" else np.isfinite(got[3]).all()


@pytest.mark.parametrize("metric", ["cosine", "euclidean", "correlation"])
def test_float32_products_of_rows_against_themselves_mirror_the_upper_tiles(metric, float32_products, rng, monkeypatch):
    """X against itself: only the tiles on and above the diagonal are multiplied, each written to its mirror with
    its uncertain and flagged entries; the awkward rows' partners lie in other tiles, so their entries are
    mirrored ones, recomputed from the rows on both sides.  Against cdist in float64, the cancelling entries
    exactly, the tiles off the diagonal exactly symmetric."""
    from semiring.kernels.cpu import strategies as cpu_strategies

    mirrored = []
    symmetric = cpu_strategies._symmetric
    monkeypatch.setattr(cpu_strategies, "_symmetric", lambda e: mirrored.append(symmetric(e)) or mirrored[-1])
    tile = dense_path.FLOAT32_TILE
    X = rng.random((2 * tile + 100, 40))
    X[5] = X[tile + 7]  # duplicates in two tiles
    X[9] = 3 * X[2 * tile + 3]  # parallel
    X[11] = X[tile + 20] + 1e-4 * rng.random(40)  # near-duplicates
    X[13] = 0.0  # empty row
    X[17] = X[2 * tile + 50] = 1e20  # float32's products overflow
    X[19] -= 0.5  # signs that cancel inside the sums
    X[tile + 30] = X[19]
    X[23] = 1e4 + rng.random(40)  # a mean large next to the spread: correlation's sums cancel
    X[2 * tile + 60] = X[23] + 1e-3 * rng.random(40)
    X = X.astype(np.float32)
    got = distances.pairwise_distances(X, metric=metric, backend="cpu")
    assert float32_products and mirrored == [True], "the float32 path did not mirror"
    Xd = X.astype(np.float64)
    want = oracle(metric, Xd, Xd)
    np.testing.assert_allclose(got, want, rtol=dense_path.FLOAT32_TOLERANCE, atol=1e-12, equal_nan=True)
    pairs = [(5, tile + 7), (19, tile + 30)] + ([(9, 2 * tile + 3)] if metric != "euclidean" else [])
    for i, j in pairs + [(j, i) for i, j in pairs]:  # recomputed in float64 on both sides of the diagonal
        assert abs(got[i, j] - want[i, j]) <= 1e-6 * abs(want[i, j]) + 1e-12, (i, j, got[i, j], want[i, j])
    off = got[:tile, tile:], got[tile:, :tile].T
    np.testing.assert_array_equal(*off)


def test_an_expansion_that_weighs_its_rows_apart_is_not_mirrored():
    from semiring import expr
    from semiring.interfaces import EXPANSION_VARIABLES
    from semiring.kernels.cpu import strategies as cpu_strategies

    def tree(text):
        return expr.parse(text, EXPANSION_VARIABLES)[0]

    assert cpu_strategies._symmetric((tree("nx0 + ny0 - 2.0 * c0"), None))
    assert cpu_strategies._symmetric((tree("c0 / (sqrt(ny0) * sqrt(nx0))"), tree("nx1 * ny1 > 1.0")))
    assert cpu_strategies._symmetric((tree("c0"), tree("nx0 > 0.0 and c0 > 1.0 and ny0 > 0.0")))
    assert not cpu_strategies._symmetric((tree("c0 / nx0"), None))
    assert not cpu_strategies._symmetric((tree("c0"), tree("nx0 > 1.0")))


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    m=st.integers(1, 6),
    p=st.integers(1, 6),
    n=st.integers(1, 40),
    scale=st.sampled_from([1e-30, 1e-3, 1.0, 1e6, 1e19]),
)
def test_float32_products_against_cdist(data, m, p, n, scale, float32_products):
    """Any float32 rows (ties, zeros, signs, magnitudes where float32's products underflow or overflow): within
    the float32 tolerance of cdist in float64, zeros and cancellations exactly."""
    values = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, 1e-3, -7.0])
    X = np.array(data.draw(st.lists(values, min_size=m * n, max_size=m * n)), np.float32).reshape(m, n)
    Y = np.array(data.draw(st.lists(values, min_size=p * n, max_size=p * n)), np.float32).reshape(p, n)
    X, Y = X * np.float32(scale), np.concatenate([Y * np.float32(scale), X])  # X's rows among Y's: duplicates
    got = distances.pairwise_distances(X, Y, "cosine", backend="cpu")
    want = oracle("cosine", X.astype(np.float64), Y.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=dense_path.FLOAT32_TOLERANCE, atol=1e-12, equal_nan=True)


def rows_with_zeros_and_duplicates(rng, m: int, p: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 rows with rows of zeros and duplicates far apart (in other row tiles), and Y's rows among them."""
    X = rng.random((m, n)).astype(np.float32)
    X[7] = X[m // 2 : m // 2 + 3] = 0.0  # rows of zeros: cosine NaN, as SciPy's
    X[11] = X[m - 20]  # a duplicate in another tile
    Y = rng.random((p, n)).astype(np.float32)
    Y[3], Y[9] = X[5], 0.0
    return X, Y


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize("against", ["itself", "Y"])
def test_float32_tiles_are_the_whole_result_or_cut_by_working_memory(
    metric, against, float32_products, monkeypatch, rng
):
    """What the float32 path takes beyond a block it writes into the result (its lists of entries to recompute:
    ``strategies.FLOAT32_EXTRA_BYTES`` an entry) decides the tiles: a working memory that holds them for the
    whole result gives one tile, the result itself (the rows against themselves: mirrored), where the measure's
    count (a float64 term and the result's type an entry) would have cut it in row tiles; a smaller one cuts it
    by that same count, each tile written into the result in place, and the rows against themselves in batches
    computed on and above the diagonal only (each batch's own tile mirrored by the kernel, the tile right of
    it written below as its transpose).  Both are cdist's, rows of zeros and duplicates included."""
    from semiring import tiling
    from semiring.kernels.cpu import strategies as cpu_strategies

    mirrored = []
    symmetric = cpu_strategies._symmetric
    monkeypatch.setattr(cpu_strategies, "_symmetric", lambda e: mirrored.append(symmetric(e)) or mirrored[-1])
    m, n = 600, 48
    X, Yg = rows_with_zeros_and_duplicates(rng, m, 500, n)
    Y = None if against == "itself" else Yg
    p = m if Y is None else Yg.shape[0]
    extra = cpu_strategies.FLOAT32_EXTRA_BYTES
    assert extra <= 3 < 8 + 4  # the lists fit 3 bytes an entry; the measure's count not
    whole = distances.pairwise_distances(X, Y, metric, backend="cpu", working_memory=m * p * 3 / 2**20)
    assert float32_products == [(m, n)], "not one tile of the float32 path"
    assert mirrored == ([True] if Y is None else [])
    float32_products.clear(), mirrored.clear()
    budget = int(m * p * 0.7)  # tiles of 210 rows, or batches of 210, 323 and 67: none divides the rows
    cut = distances.pairwise_distances(X, Y, metric, backend="cpu", working_memory=budget / 2**20)
    if Y is None:
        batches = list(tiling.square_batches(m, extra, budget))
        assert len(batches) == 3 and all(b - a < m for a, b in batches)
        tiles = [(b - a, n) for a, b in batches for _ in range(2 if b < m else 1)]  # its own rows, those after
        assert float32_products == tiles and mirrored == [True] * len(batches)
    else:
        rows = budget // (p * extra)
        assert float32_products == [(min(rows, m - r0), n) for r0 in range(0, m, rows)] and mirrored == []
    Xd = X.astype(np.float64)
    want = oracle(metric, Xd, Xd if Y is None else Yg.astype(np.float64))
    for got in (whole, cut):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=dense_path.FLOAT32_TOLERANCE, atol=1e-12, equal_nan=True)
    if Y is None:
        tile = dense_path.FLOAT32_TILE  # mirrored: each pair of two row tiles' one value on both sides
        np.testing.assert_array_equal(whole[:tile, tile:], whole[tile:, :tile].T)
        for a, b in batches:  # each pair of two batches computed once, its value on both sides
            np.testing.assert_array_equal(cut[a:b, b:], cut[b:, a:b].T)
        for got in (whole, cut):
            assert got[11, m - 20] == got[m - 20, 11] == 0.0  # a cancelling entry recomputed: exactly 0
    else:
        assert whole[5, 3] == cut[5, 3] == 0.0
    assert np.isnan(whole[7]).all() == np.isnan(cut[7]).all() == (metric == "cosine")


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize("against", ["itself", "Y"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiles_are_written_into_the_result_where_the_engine_can(metric, against, dtype, monkeypatch, rng):
    """Cut by a small working memory, into ``out=`` or a result of the call's own: a float32 result's tiles are
    each written by the engine into a view of the result (``semiring.interfaces.RESULT_BLOCK``), none computed
    apart (the float64 path's are, and copied); cdist's either way, rows of zeros and duplicates included."""
    from semiring.kernels.cpu import strategies as cpu_strategies

    monkeypatch.setattr(cpu_strategies, "EXPANDED_MIN_ENTRIES", 0)  # the float32 path on small tiles
    into = []
    product_expanded = cpu_strategies.product_expanded

    def recorded(X, Y, sr, out_dtype, expansion, out=None):
        into.append(out)
        return product_expanded(X, Y, sr, out_dtype, expansion, out=out)

    monkeypatch.setattr(cpu_strategies, "product_expanded", recorded)
    m, n = 301, 40
    X, Yg = rows_with_zeros_and_duplicates(rng, m, 257, n)
    X, Yg = X.astype(dtype), Yg.astype(dtype)
    Y = None if against == "itself" else Yg
    p = m if Y is None else Yg.shape[0]
    Xd = X.astype(np.float64)
    want = oracle(metric, Xd, Xd if Y is None else Yg.astype(np.float64))
    budget = m * p * 0.45 / 2**20
    for result in (None, np.full((m, p), np.nan, dtype)):
        into.clear()
        got = distances.pairwise_distances(X, Y, metric, backend="cpu", working_memory=budget, out=result)
        assert got is result if result is not None else got.shape == (m, p)
        assert len(into) > 2  # cut in tiles
        if dtype == np.float32:
            assert all(o is not None and np.shares_memory(o, got) for o in into)
        else:
            assert all(o is None for o in into)
        tolerance = dense_path.FLOAT32_TOLERANCE if dtype == np.float32 else 1e-9
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=1e-12, equal_nan=True)
        assert np.isnan(got[7]).all() == (metric == "cosine")


def test_tiles_written_in_place_take_no_more_than_the_working_memory(float32_products):
    """Beside the inputs and the result, a call cut in tiles that the engine writes into the result takes at
    most its working memory (traced by ``tracemalloc``, which sees NumPy's arrays): a tile's buffer made apart
    (4 bytes an entry, twice the lists' count it was cut by) would pass it."""
    import tracemalloc

    m, n = 1200, 32
    X = np.random.default_rng(3).random((m, n)).astype(np.float32)
    budget = m * m  # 1 byte an entry: batches of 600 rows (2 bytes an entry), whose own buffers would take 4
    distances.pairwise_distances(X[:300], metric="cosine", backend="cpu")  # compiled before the trace
    float32_products.clear()
    tracemalloc.start()
    try:
        got = distances.pairwise_distances(X, metric="cosine", backend="cpu", working_memory=budget / 2**20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(float32_products) == 3  # two batches: the first's own rows and those after, the second's own
    inputs = 3 * X.nbytes  # the rows stored as CSR (values and column indices) and a copy while checked
    assert peak <= got.nbytes + budget + inputs, (peak - got.nbytes, budget)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_a_whole_float32_tile_falls_back_to_float64_in_slabs_of_the_working_memory(
    metric, float32_products, monkeypatch, rng
):
    """More entries to recompute than the float32 path's lists hold (every row repeated): the float64 product it
    falls back to is written in row slabs within the working memory (the tile, the whole result, stays the
    result), and the answer is cdist's, the repeated rows' entries exact."""
    from semiring.kernels.cpu import strategies as cpu_strategies

    monkeypatch.setattr(cpu_strategies, "FLAGGED_SHARE", 10**9)  # the lists' least room: 1,024 entries a chunk
    slabs = []
    apart_rows = cpu_strategies._apart_rows
    monkeypatch.setattr(cpu_strategies, "_apart_rows", lambda m, p: slabs.append(apart_rows(m, p)) or slabs[-1])
    base = rng.random((40, 32)).astype(np.float32)
    base[3] = 0.0
    X = np.vstack([base] * 30)  # 1,200 rows, each with 29 copies: 36,000 cancelling entries
    m = X.shape[0]
    budget = m * m * 3  # the float32 path's lists fit for the whole result; its float64 product does not
    got = distances.pairwise_distances(X, metric=metric, backend="cpu", working_memory=budget / 2**20)
    assert float32_products == [(m, 32)] and slabs == [budget // (8 * m)]
    Xd = X.astype(np.float64)
    want = oracle(metric, Xd, Xd)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12, equal_nan=True)
    copies = np.arange(0, m, 40) + 1  # row 1 and its copies
    np.testing.assert_array_equal(got[np.ix_(copies, copies)], 0.0)


def test_rows_storing_every_entry_are_read_in_place():
    """``dense.densified``: CSR storing every entry (dense input, and a tile of its rows) is its values seen as
    an array, no copy; with an entry missing, SciPy's ``toarray``."""
    from semiring import validation

    D = np.arange(1.0, 13.0, dtype=np.float32).reshape(4, 3)
    A = validation.check_matrix(D, "X")
    tile = validation.row_slice(A, 1, 3)
    assert np.shares_memory(dense_path.densified(A), A.data) and np.shares_memory(dense_path.densified(tile), A.data)
    np.testing.assert_array_equal(dense_path.densified(A), D)
    np.testing.assert_array_equal(dense_path.densified(tile), D[1:3])
    gap = D.copy()
    gap[2, 1] = 0.0
    B = validation.check_matrix(gap, "X")
    np.testing.assert_array_equal(dense_path.densified(B), gap)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 7),
    st.integers(0, 9),
    st.floats(0.0, 1.0),
    st.sampled_from([np.float64, np.float32, np.int64, np.bool_]),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_a_dense_input_is_stored_as_scipy_stores_its_nonzeros(m, n, zeros, dtype, fortran, seed):
    """Dense rows with zeros anywhere (whole rows, whole columns, none, all), of any value type and memory order,
    checked into exactly the CSR matrix SciPy makes of them: values, columns, row pointers, canonical."""
    rng = np.random.default_rng(seed)
    D = (rng.random((m, n)) - 0.5) * 10
    D[rng.random((m, n)) < zeros] = 0
    if m > 1:
        D[m // 2] = 0
    D = np.asfortranarray(D.astype(dtype)) if fortran else D.astype(dtype)
    got = semiring.validation.check_matrix(D, "X")
    want = sp.csr_matrix(D.astype(np.float64 if dtype in (np.int64, np.bool_) else dtype))
    assert got.shape == want.shape and got.dtype == want.dtype and got.has_canonical_format
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)


def test_a_strided_view_of_dense_rows_is_stored_in_its_own_order():
    """Every other row and column of a wider array (no copy made by the caller), against SciPy."""
    D = np.arange(1.0, 121.0).reshape(10, 12)
    D[::3, ::4] = 0
    view = D[::2, 1::2]
    got = semiring.validation.check_matrix(view, "X")
    want = sp.csr_matrix(np.ascontiguousarray(view))
    assert (got != want).nnz == 0 and np.array_equal(got.indices, want.indices)
