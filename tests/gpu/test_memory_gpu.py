"""The GPU engine's own buffers within the driver's budget (marked ``gpu``): the inverted kernel's postings
built a slab of columns at a time, the margins' recomputed entries a band of rows at a time, the L1 rows
of jensenshannon and hellinger prepared a chunk of entries at a time; each against SciPy ``cdist``, and
the peak device memory of the call counted by an allocator without a pool.

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_memory_gpu.py``.
"""

from __future__ import annotations

import gc
from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import oracle, tolerances

from semiring import distances, validation
from semiring.distances import bound
from semiring.interfaces import SCRATCH_BUDGET
from semiring.kernels.cuda import planner, strategies


def wide(rng, rows: int, cols: int, per_row: int, dtype=np.float32) -> sp.csr_matrix:
    """Rows of ``per_row`` stored values over a wide column space, a few popular columns (long postings)."""
    popular = rng.integers(0, 8, size=(rows, 2))
    spread = rng.integers(0, cols, size=(rows, per_row))
    c = np.concatenate([popular, spread], axis=1)
    r = np.repeat(np.arange(rows), c.shape[1])
    v = rng.random(r.size).astype(dtype) + 0.1
    A = sp.csr_matrix((v, (r, c.ravel())), shape=(rows, cols))
    A.sum_duplicates()
    return A


def peak_extra_mib(fn):
    """``fn()`` under a counting allocator without a pool; (its result, the peak MiB held beyond it).

    The counters live in a closure, not an object, so memory the call left cached (and freed later, after
    the allocator is gone) is still returned safely.
    """
    import cupy

    runtime, sizes, state = cupy.cuda.runtime, {}, {"live": 0, "peak": 0}

    def malloc(size, device):
        ptr = runtime.malloc(size)
        sizes[ptr] = size
        state["live"] += size
        state["peak"] = max(state["peak"], state["live"])
        return ptr

    def free(ptr, device):
        runtime.free(ptr)
        state["live"] -= sizes.pop(ptr, 0)

    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    pool.free_all_blocks()
    cupy.cuda.set_allocator(cupy.cuda.PythonFunctionAllocator(malloc, free).malloc)
    try:
        result = fn()
        cupy.cuda.Device().synchronize()
        # what the call left in reference cycles goes now, not when the garbage collector next runs inside
        # another test (a worker of the whole tier crashed once in this allocator's free, so called, at 39ca802)
        gc.collect()
    finally:
        cupy.cuda.set_allocator(pool.malloc)
    return result, (state["peak"] - result.nbytes) / 2**20


def test_slabs_cover_the_columns_each_within_the_budget():
    import cupy

    rng = np.random.default_rng(0)
    counts = rng.integers(0, 50, size=1000)
    counts[17] = 400  # one column longer than a slab: a slab of its own
    colptr = cupy.asarray(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    host = colptr.get()
    total = int(host[-1])
    slabs = strategies._slabs(colptr, total, 100 * 8, 8)
    assert slabs[0][0] == 0 and slabs[-1][1] == 1000
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in pairwise(slabs))
    for c0, c1, e0, e1 in slabs:  # at most one column past the slab size; its postings' range read from colptr
        assert host[c1 - 1] - host[c0] <= 100 or c1 - c0 == 1
        assert (e0, e1) == (host[c0], host[c1])
    assert strategies._slabs(colptr, total, None, 8) == [(0, 1000, 0, total)]


@pytest.mark.parametrize("metric", ["cityblock", "cosine", "jensenshannon", "braycurtis"])
def test_inverted_postings_in_slabs_equal_cdist(monkeypatch, metric):
    """A tiny working memory: the postings come in many slabs and the margins' bands are short."""
    import cupyx.scipy.sparse as csp

    rng = np.random.default_rng(1)
    X, Q = wide(rng, 3000, 4000, 6), wide(rng, 70, 4000, 6)
    monkeypatch.setenv("SEMIRING_GPU_STRATEGY", "auto")
    got = distances.pairwise_distances(csp.csr_matrix(Q), csp.csr_matrix(X), metric=metric, working_memory=0.5)
    want = oracle(metric, Q.toarray().astype(np.float64), X.toarray().astype(np.float64))
    np.testing.assert_allclose(got.get(), want, **tolerances(metric, np.float32))


@pytest.mark.parametrize("in_ranges", [False, True])
def test_inverted_slabs_forced_equal_one_slab(in_ranges, monkeypatch):
    """The inverted kernel forced, with the scratch budget set directly: slabs and the whole postings agree
    (the row-range form with ranges of 128 rows, so each X row's sums come in several ranges, and later
    slabs add to what the first wrote)."""
    import cupy

    from semiring.kernels.cuda.launch import to_device
    from semiring.ops import BUILTIN_SEMIRINGS

    rng = np.random.default_rng(2)
    X, Y = wide(rng, 50, 3000, 5), wide(rng, 900, 3000, 5)
    sr = BUILTIN_SEMIRINGS["plus_times"]
    monkeypatch.setattr(planner, "RANGE_SHARED_BYTES", 128 * 4)
    outs = []
    for budget in (None, 40 * 8):
        out = cupy.full((50, 900), np.nan, np.float32)  # every entry must be written (or zeroed first)
        token = SCRATCH_BUDGET.set(budget)
        try:
            Xd, Yd = to_device(X), to_device(Y)
            strategies.inverted(sr, "float32", "int32", Xd, Xd.data, Yd, out, in_ranges=in_ranges)
        finally:
            SCRATCH_BUDGET.reset(token)
        outs.append(out.get())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5)
    np.testing.assert_allclose(outs[0], (X @ Y.T).toarray(), rtol=1e-5)


@pytest.mark.parametrize("metric", ["cityblock", "jensenshannon"])
def test_union_peak_memory_follows_working_memory(metric):
    """Extra device memory beyond the inputs and the result stays near ``working_memory`` (here 16 MiB)
    where the whole postings and recompute bands would take far more."""
    import cupyx.scipy.sparse as csp

    rng = np.random.default_rng(3)
    X = wide(rng, 60000, 20000, 40)  # 2.5 M stored entries: postings and a transpose buffer of ~60 MiB
    Q = X[:256]
    Xc, Qc = csp.csr_matrix(X), csp.csr_matrix(Q)
    call = lambda: distances.pairwise_distances(Qc, Xc, metric=metric, working_memory=16)
    call()  # kernels compiled, CuPy's and cuBLAS's own first-use state made, before memory is counted
    result, extra = peak_extra_mib(call)
    # jensenshannon reads its rows divided by their sums: a copy of both inputs' values, as the budget allows
    copies = (X.nnz + Q.nnz) * 4 / 2**20 if metric == "jensenshannon" else 0
    assert extra <= 24 + copies, f"{metric}: {extra:.1f} MiB beyond the result with working_memory=16"
    # checked on a corner: X densified whole is 9.6 GB in float64, and the oracle's copies of it exhaust the host
    want = oracle(metric, Q[:8].toarray().astype(np.float64), X[:2000].toarray().astype(np.float64))
    np.testing.assert_allclose(result[:8, :2000].get(), want, **tolerances(metric, np.float32))


def test_l1_rows_in_chunks_equal_one_piece(monkeypatch):
    import cupyx.scipy.sparse as csp

    rng = np.random.default_rng(4)
    A = wide(rng, 300, 500, 7)
    whole = bound.prepare(csp.csr_matrix(A), "l1").data.get()
    monkeypatch.setattr(validation, "ENTRY_CHUNK", 13)
    chunked = bound.prepare(csp.csr_matrix(A), "l1").data.get()
    np.testing.assert_allclose(chunked, whole, rtol=1e-6)
    sums = np.asarray(A.sum(axis=1)).ravel()
    np.testing.assert_allclose(chunked, (A.multiply(1 / sums[:, None])).tocsr().data, rtol=1e-5)


@pytest.mark.parametrize("where", ["host", "device"])
def test_the_pairs_a_radius_finds_are_checked_against_memory(monkeypatch, where):
    """A radius taking in the whole index is refused with the count of pairs found before a tile's are kept:
    against host memory where they come back to the host, against the GPU's free memory where CuPy queries keep
    them there; a small radius is answered in the same memory."""
    import cupyx.scipy.sparse as cusp
    from scipy.spatial.distance import cdist

    from semiring import backend

    X = np.random.default_rng(5).random((300, 3))
    D = cdist(X, X)
    if where == "device":
        monkeypatch.setattr(type(backend.engine("cuda")), "memory_limit_bytes", lambda self: 2**20)
        queries = cusp.csr_matrix(sp.csr_matrix(X))
        refusal = (
            r"putting in order the [\d,]+ pairs within the radius of the first [\d,]+ of 300 queries needs .* of GPU"
        )
    else:
        monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2 * 2**20)
        queries = X
        refusal = r"putting in order the 90,000 pairs within the radius of the first 300 of 300 queries needs"
    nn = distances.NearestNeighbors(metric="euclidean", backend="cuda").fit(queries)
    with pytest.raises(MemoryError, match=refusal):
        nn.radius_neighbors(queries, radius=10.0)
    ind = nn.radius_neighbors(queries, radius=0.1, return_distance=False)
    for i in range(300):
        expected = np.flatnonzero(D[i] <= 0.1)
        got = ind[i].get() if hasattr(ind[i], "get") else np.asarray(ind[i])
        np.testing.assert_array_equal(np.sort(got), expected)
