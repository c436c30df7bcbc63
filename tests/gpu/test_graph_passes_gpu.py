"""The GPU graph engine's streaming passes against NumPy: the input check and the compaction.

The check deals the stored entries over the warps in chunks (``graph_source.CHECK_CHUNK``), rows crossing from
one chunk to the next; the compaction deals short rows' entries over a warp 32 rows at a time and cuts each
row longer than ``COMPACT_LONG`` into segments of ``COMPACT_SEGMENT`` entries, a block's each, the fill
starting each segment after its row's earlier ones.  Graphs here have rows of every kind: empty, short, exactly at the
bound, past it by one, and hubs of thousands of entries, in both index types.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.gpu


def hub_graph(n: int, edges: int, hubs: list[int], seed: int, index=np.int32) -> sp.csr_matrix:
    """A random simple undirected graph on n vertices (``edges`` drawn, the last fifth of the vertices left
    isolated) with hub i joined to ``hubs[i]`` others: its row as long as that."""
    rng = np.random.default_rng(seed)
    live = max(1, n - n // 5)
    u, v = rng.integers(0, live, edges), rng.integers(0, live, edges)
    for h, size in enumerate(hubs[:n]):
        others = rng.choice(np.delete(np.arange(n), h), size=min(size, n - 1), replace=False)
        u = np.concatenate([u, np.full(others.size, h)])
        v = np.concatenate([v, others])
    A = sp.csr_matrix((np.ones(u.size), (u, v)), shape=(n, n))
    A = sp.csr_matrix(((A + A.T) > 0).astype(np.float64))
    A.setdiag(0)
    A.eliminate_zeros()
    A.sort_indices()
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


@st.composite
def hub_graphs(draw, max_n: int = 6000):
    n = draw(st.integers(1, max_n))
    hubs = draw(st.lists(st.sampled_from([0, 1, 31, 32, 33, 255, 256, 257, 258, 1500, 4096, 4097, 5999]), max_size=4))
    edges = draw(st.integers(0, 4 * n))
    index = draw(st.sampled_from([np.int32, np.int64]))
    return hub_graph(n, edges, hubs, draw(st.integers(0, 2**16)), index)


def reference_compact(A: sp.csr_matrix, keep: np.ndarray):
    """(indptr, indices, rows, positions, rest indptr, rest indices) of the entries kept, by NumPy."""
    n = A.shape[0]
    rows = np.repeat(np.arange(n), np.diff(A.indptr))
    counts = np.bincount(rows[keep], minlength=n)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    rest_indptr = A.indptr.astype(np.int64) - indptr
    return indptr, A.indices[keep], rows[keep], np.flatnonzero(keep), rest_indptr, A.indices[~keep]


def precedes(A: sp.csr_matrix, by_degree: bool) -> np.ndarray:
    """u ≺ v at each stored entry (u, v): by degree, ties by id; or by id."""
    degree = np.diff(A.indptr).astype(np.int64)
    u = np.repeat(np.arange(A.shape[0]), degree)
    v = A.indices.astype(np.int64)
    if not by_degree:
        return u < v
    return (degree[u] < degree[v]) | ((degree[u] == degree[v]) & (u < v))


def _same(got, want, what):
    got = got.get() if hasattr(got, "get") else np.asarray(got)
    np.testing.assert_array_equal(got.astype(np.int64), np.asarray(want).astype(np.int64), err_msg=what)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(A=hub_graphs(), by_degree=st.booleans())
def test_orientation_keeps_each_edge_once_in_order(A, by_degree):
    from semiring.kernels.cuda import graph as cuda_graph

    G = cuda_graph.to_device(A)
    lp, li, lrows, (tp, ti) = cuda_graph.orient(G, by_degree, rows=True, transpose=True)
    indptr, indices, rows, _, rest_indptr, rest_indices = reference_compact(A, precedes(A, by_degree))
    for got, want, what in (
        (lp, indptr, "L's row pointers"),
        (li, indices, "L's indices"),
        (lrows, rows, "L's rows"),
        (tp, rest_indptr, "Lᵀ's row pointers"),
        (ti, rest_indices, "Lᵀ's indices"),
    ):
        _same(got, want, what)
    assert li.dtype == A.indices.dtype and lp.dtype == A.indices.dtype
    if by_degree:  # ordered by the degree order's ranks instead: the same entries, L's written as ranks
        rank, _ = cuda_graph.degree_order(G)
        kp, keys, krows, (up, ui) = cuda_graph.orient(G, True, rows=True, transpose=True, ranks=rank)
        for got, want, what in (
            (kp, indptr, "L's row pointers, ranked"),
            (keys, rank.get()[indices], "L's ranks"),
            (krows, rows, "L's rows, ranked"),
            (up, rest_indptr, "Lᵀ's row pointers, ranked"),
            (ui, rest_indices, "Lᵀ's indices, ranked"),
        ):
            _same(got, want, what)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(A=hub_graphs(), share=st.sampled_from([0.0, 0.05, 0.5, 0.97, 1.0]), seed=st.integers(0, 2**16))
def test_keeping_flagged_entries_keeps_their_order_and_positions(A, share, seed):
    import cupy

    from semiring.kernels.cuda import graph as cuda_graph

    keep = np.random.default_rng(seed).random(A.nnz) < share
    A = A.copy()
    A.data = np.arange(A.nnz, dtype=np.float64)  # each entry's value names it
    G = cuda_graph.to_device(A)
    H, positions = cuda_graph.compact_graph(G, cupy.asarray(keep))
    indptr, indices, _, where, _, _ = reference_compact(A, keep)
    _same(H.indptr, indptr, "row pointers")
    _same(H.indices, indices, "indices")
    _same(positions, where, "positions")
    _same(H.data, where, "values")


def _boundaries(A: sp.csr_matrix) -> list[int]:
    """Chunk starts of the check that fall inside a row (the entry before is in the same row)."""
    from semiring.kernels.cuda import graph_source as src

    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    starts = np.arange(src.CHECK_CHUNK, A.nnz, src.CHECK_CHUNK)
    return [int(k) for k in starts if rows[k] == rows[k - 1]]


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_check_across_chunks_of_entries(index):
    """A valid graph passes; an entry out of order, a weight changed and reverses removed, each just where a
    chunk of entries starts inside a row, are found and counted as NumPy counts them."""
    from semiring.kernels.cuda import graph as cuda_graph

    A = hub_graph(9000, 40_000, [8999, 5000, 300, 257], seed=3, index=index)
    cuts = _boundaries(A)
    assert len(cuts) >= 3  # the hubs' rows cross chunks
    clean = {"self-loops": 0, "missing reverse": 0, "unequal reverse weight": 0, "unsorted": 0}
    assert cuda_graph.check_graph(cuda_graph.to_device(A), True) == clean

    B = A.copy()
    k = cuts[0]
    B.indices[k - 1], B.indices[k] = A.indices[k], A.indices[k - 1]  # the row's entries k - 1 and k swapped
    assert cuda_graph.check_graph(cuda_graph.to_device(B), False)["unsorted"] == 1

    W = A.copy()
    W.data = W.data.copy()
    W.data[cuts[1]] = 7.0  # one direction of an edge weighs 7: both entries break the rule
    found = cuda_graph.check_graph(cuda_graph.to_device(W), True)
    assert found == {**clean, "unequal reverse weight": 2}
    assert cuda_graph.check_graph(cuda_graph.to_device(W), False) == clean  # the pattern is symmetric

    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    drop = np.zeros(A.nnz, bool)
    drop[cuts] = True  # entries (u, v) at chunk starts removed: their reverses (v, u) lose their pair
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[~drop], minlength=A.shape[0]))])
    M = sp.csr_matrix((A.data[~drop], A.indices[~drop].astype(index), indptr.astype(index)), shape=A.shape)
    pattern = sp.csr_matrix((np.ones(M.nnz), M.indices, M.indptr), shape=M.shape)
    missing = int(((pattern - pattern.T) > 0).sum())  # stored entries whose reverse is not
    assert missing >= len(cuts)
    assert cuda_graph.check_graph(cuda_graph.to_device(M), False) == {**clean, "missing reverse": missing}

    for k in cuts[2:4]:  # an entry made its row's own vertex: a self-loop where it stays in order
        S = A.copy()
        S.indices = S.indices.copy()
        S.indices[k] = rows[k]
        found = cuda_graph.check_graph(cuda_graph.to_device(S), False)
        assert (found["unsorted"], found["self-loops"]) == row_rules(S)


def row_rules(A: sp.csr_matrix) -> tuple[int, int]:
    """(entries out of order or range, self-loops among the others), as the check counts them, by NumPy."""
    n = A.shape[0]
    rows = np.repeat(np.arange(n), np.diff(A.indptr))
    v = A.indices.astype(np.int64)
    after = np.zeros(v.size, bool)
    after[1:] = rows[1:] == rows[:-1]
    previous = np.concatenate([[-1], v[:-1]])
    bad = (v < 0) | (v >= n) | (after & (previous >= v))
    return int(bad.sum()), int(((v == rows) & ~bad).sum())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(A=hub_graphs(1500), method=st.sampled_from(["probe", "search"]), order=st.sampled_from(["degree", "id"]))
def test_each_entry_reads_its_edges_count(A, method, order):
    """Per-edge counts and Jaccard at every entry of A (the counts on L written to both of an edge's entries,
    ``render_mirror``, a hub's row searched) against SciPy's A·A at A's entries."""
    import os

    import cupyx.scipy.sparse as csp

    from semiring import graph
    from semiring.kernels.cuda import graph as cuda_graph

    os.environ[cuda_graph.TRIANGLES_ENV] = method
    try:
        D = csp.csr_matrix(A)
        counts = graph.triangle_count(D, per="edge", order=order).get()
        J = graph.jaccard(D).get()
    finally:
        del os.environ[cuda_graph.TRIANGLES_ENV]
    B = sp.csr_matrix((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape)
    rows, cols = B.nonzero()  # in CSR order
    common = np.asarray((B @ B)[rows, cols]).ravel() if A.nnz else np.zeros(0)  # common neighbours there
    degree = np.diff(A.indptr).astype(np.float64)
    _same(counts.indptr, A.indptr, "row pointers")
    _same(counts.indices, A.indices, "indices")
    _same(counts.data, common, "per-edge counts")
    union = degree[rows] + degree[cols] - common
    np.testing.assert_allclose(J.data, np.where(union > 0, common / np.where(union > 0, union, 1), 0.0), rtol=1e-15)
    _same(J.indices, A.indices, "Jaccard's indices")
