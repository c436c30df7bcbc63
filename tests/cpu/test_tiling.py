"""The one blocked driver (``semiring.tiling``) on the CPU engine: every tiling gives the untiled answer."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import semiring
from semiring import backend, tiling


def tiles_seen(monkeypatch) -> list:
    """Record the (c0, c1) column ranges the driver asks the engine for."""
    seen = []
    real = tiling.ranges

    def recording(total, step):
        out = list(real(total, step))
        seen.append(out)
        return iter(out)

    monkeypatch.setattr(tiling, "ranges", recording)
    return seen


@pytest.mark.parametrize(
    ("working_memory", "row_tiles", "col_tiles"),
    # one tile; 4-row batches; a budget below one row: one-row tiles of every column (the floor)
    [(None, 1, 1), (40 * 8 * 4 / 2**20, 10, 1), (16 / 2**20, 40, 1)],
)
def test_dense_results_are_the_same_however_tiled(monkeypatch, working_memory, row_tiles, col_tiles):
    X = sp.random(40, 30, density=0.3, format="csr", random_state=1, dtype=np.float64)
    Y = sp.random(40, 30, density=0.3, format="csr", random_state=2, dtype=np.float64)
    seen = tiles_seen(monkeypatch)
    got = semiring.pairwise(X, Y, semiring.plus_times, backend="cpu", working_memory=working_memory)
    np.testing.assert_allclose(got, (X @ Y.T).toarray(), rtol=1e-12, atol=1e-15)
    if row_tiles == 1 and col_tiles == 1:
        assert seen == []  # one tile: the engine's array is the result
    else:
        assert len(seen[0]) == row_tiles and len(seen[1]) == col_tiles


def test_tile_shape_never_exceeds_the_budget():
    for m, n, per, budget in [(10, 10**6, 8, 1000), (1000, 7, 8, 10**9), (5, 5, 16, 1), (0, 0, 8, 100)]:
        rows, cols = tiling.tile_shape(m, n, per, budget)
        assert rows >= 1 and cols >= 1
        if m and n and per * n <= budget:
            assert rows * cols * per <= budget and cols == n


def test_topk_over_column_tiles_equals_a_full_sort():
    rng = np.random.default_rng(3)
    D = rng.random((9, 23))
    engine = backend.engine("cpu")
    for budget_entries in (9 * 23, 9 * 4, 1):
        values, indices = tiling.topk(
            engine,
            D.shape,
            5,
            np.float64,
            8,
            budget_entries * 8 / 2**20,
            largest=False,
            exclude_self=True,
            rows=lambda r0, r1: (r0, r1),
            tile=lambda rows, c0, c1: np.ascontiguousarray(D[rows[0] : rows[1], c0:c1]),
        )
        masked = D.copy()
        np.fill_diagonal(masked, np.inf)  # exclude_self: row i does not select column i
        want = np.argsort(masked, axis=1, kind="stable")[:, :5]
        np.testing.assert_array_equal(indices, want)
        np.testing.assert_array_equal(values, np.take_along_axis(masked, want, axis=1))


def test_working_memory_is_checked_at_the_public_call():
    X = sp.eye(3, format="csr")
    with pytest.raises(ValueError, match="working_memory must be > 0"):
        semiring.pairwise(X, X, semiring.plus_times, backend="cpu", working_memory=0)


@pytest.mark.parametrize("kind", ["dense", "topk"])
def test_engines_see_the_working_memory_as_their_scratch_budget(kind):
    """While the driver computes a tile, ``SCRATCH_BUDGET`` is the working memory in bytes; outside, None."""
    from semiring.interfaces import SCRATCH_BUDGET

    seen = []

    def tile(rows, c0, c1):
        seen.append(SCRATCH_BUDGET.get())
        return np.zeros((rows[1] - rows[0], c1 - c0))

    engine = backend.engine("cpu")
    common = {"rows": lambda r0, r1: (r0, r1), "tile": tile}
    if kind == "dense":
        tiling.dense(engine, (3, 4), np.float64, 8, 2.0, False, **common)
    else:
        tiling.topk(engine, (3, 4), 2, np.float64, 8, 2.0, largest=False, exclude_self=False, **common)
    assert seen and all(b == 2 * 2**20 for b in seen)
    assert SCRATCH_BUDGET.get() is None


def test_row_batches_reach_the_engine_in_the_callers_index_type(monkeypatch):
    """Batches of X's rows keep X's int64 indices (SciPy's ``X[r0:r1]`` narrows them to int32, and each index
    type the kernels meet is another compile of each): ``semiring.pairwise``, ``pairwise_distances`` and
    ``kneighbors``, each in several batches, against the oracle."""
    from scipy.spatial.distance import cdist

    from semiring import distances
    from semiring.kernels.cpu.engine import CpuEngine

    def int64(A):
        A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
        return A

    X = int64(sp.random(12, 9, density=0.4, format="csr", random_state=5, dtype=np.float64))
    Y = int64(sp.random(10, 9, density=0.4, format="csr", random_state=6, dtype=np.float64))
    seen = []
    real_pairwise, real_row_norms = CpuEngine.pairwise, CpuEngine.row_norms

    def pairwise(self, A, B, *rest, **kw):
        seen.append({A.indptr.dtype, A.indices.dtype})
        return real_pairwise(self, A, B, *rest, **kw)

    def row_norms(self, A, *rest):
        seen.append({A.indptr.dtype, A.indices.dtype})
        return real_row_norms(self, A, *rest)

    monkeypatch.setattr(CpuEngine, "pairwise", pairwise)
    monkeypatch.setattr(CpuEngine, "row_norms", row_norms)
    batches = 3 * 10 * 8 / 2**20  # three rows of float64 results against Y's ten
    got = semiring.pairwise(X, Y, semiring.plus_times, backend="cpu", working_memory=batches)
    np.testing.assert_allclose(got, (X @ Y.T).toarray(), rtol=1e-12, atol=1e-15)
    got = distances.pairwise_distances(X, Y, "euclidean", backend="cpu", working_memory=batches)
    np.testing.assert_allclose(got, cdist(X.toarray(), Y.toarray()), rtol=1e-9, atol=1e-12)
    nn = distances.NearestNeighbors(n_neighbors=3, metric="euclidean", backend="cpu", working_memory=batches)
    dist, _ = nn.fit(Y).kneighbors(X)
    np.testing.assert_allclose(dist, np.sort(cdist(X.toarray(), Y.toarray()), axis=1)[:, :3], rtol=1e-9, atol=1e-12)
    assert len(seen) > 6 and all(types == {np.dtype(np.int64)} for types in seen), seen


@pytest.mark.parametrize(("symmetric", "extra"), [(True, 2), (False, 2), (True, None)])
def test_a_symmetric_result_written_in_place_computes_the_tiles_above_the_diagonal(symmetric, extra):
    """Tiles written into the result (``result_extra_bytes`` given): of a symmetric one, only the tiles on and
    above the diagonal of the row batches are asked for, in batches not dividing the rows, each written into
    a view of the result and its mirror below as its transpose; otherwise (or tiles computed apart) every
    tile.  An entry here is min(i, j)·1000 + max(i, j), written in place where the driver asks it."""
    from semiring.interfaces import RESULT_BLOCK

    m, budget = 50, 50 * 50 * 2 * 0.3  # at 2 bytes an entry: batches of 15, 21 and 14 rows
    asked, in_place = [], []

    def tile(rows, c0, c1):
        asked.append((*rows, c0, c1))
        i, j = np.arange(*rows)[:, None], np.arange(c0, c1)[None, :]
        block = np.minimum(i, j) * 1000.0 + np.maximum(i, j)
        target = RESULT_BLOCK.get()
        in_place.append(target is not None)
        if target is None:
            return block
        target[...] = block
        return target

    engine = backend.engine("cpu")
    common = {"rows": lambda r0, r1: (r0, r1), "tile": tile, "result_extra_bytes": extra, "symmetric": symmetric}
    got = tiling.dense(engine, (m, m), np.float64, 8, budget / 2**20, False, **common)
    i, j = np.arange(m)[:, None], np.arange(m)[None, :]
    np.testing.assert_array_equal(got, np.minimum(i, j) * 1000.0 + np.maximum(i, j))
    if symmetric and extra is not None:
        batches = list(tiling.square_batches(m, extra, int(budget)))
        assert [b - a for a, b in batches] == [15, 21, 14]
        assert asked == [t for a, b in batches for t in ((a, b, a, b), (a, b, b, m)) if t[2] < t[3]]
    else:
        assert all(c0 == 0 and c1 == m for *_, c0, c1 in asked) and len(asked) > 1
    assert all(in_place) == (extra is not None) and any(in_place) == (extra is not None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("rows", "cols"), [(130, 67), (64, 64), (1, 200), (0, 5)])
def test_the_cpu_engines_mirror_is_the_transpose_into_a_view_of_the_result(dtype, rows, cols):
    """``mirror_into``: a tile above the diagonal (a strided view of the result) copied transposed into its
    place below, in squares not dividing the sides, on the engine's threads; nothing else written, and a
    target of another shape refused."""
    from semiring.kernels.cpu import elementwise

    m = rows + cols + 3
    result = np.full((m, m), -1.0, dtype)
    upper = result[:rows, rows + 3 :]  # rows × cols, row stride m
    upper[...] = np.arange(rows * cols, dtype=dtype).reshape(rows, cols)
    below = result[rows + 3 :, :rows]
    engine = backend.engine("cpu")
    with engine.threads(-1):
        engine.mirror_into(below, upper)
    np.testing.assert_array_equal(below, upper.T)
    outside = np.ones((m, m), bool)
    outside[:rows, rows + 3 :] = outside[rows + 3 :, :rows] = False
    assert (result[outside] == -1.0).all()
    with pytest.raises(ValueError, match="not the transpose"):
        elementwise.transposed_into(result[:cols, : rows + 1], upper)
