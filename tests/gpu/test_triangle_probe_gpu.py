"""The probe method of the GPU graph engine (``render_probe``) against networkx and the search method.

Each triangle u ≺ v ≺ w is found at its middle vertex v, whose out-list is hashed in shared memory: a warp's
table for short lists, a block's for long ones, global memory's binary search for lists longer than half the
block's table.  These tests force every branch: warp and block tasks, the global fallback (a block's table made
small), targets whose in-neighbours span many tasks, the Dask parts of the task lists, and the sort of L's rows
of ranks in each of its tiers.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from strategies import random_graph, star_graph

from semiring import graph

pytestmark = pytest.mark.gpu


def clique_plus(n: int, extra: int, seed: int, index=np.int32) -> sp.csr_matrix:
    """A clique on ``n`` vertices inside a sparse random graph: in the degree order the clique's vertices
    have out-lists up to n − 1 long (block tasks, and with a small table the global fallback)."""
    A = sp.lil_matrix(random_graph(extra, 6 * extra, seed))
    A[:n, :n] = 1
    A.setdiag(0)
    A = sp.csr_matrix(A)
    A.eliminate_zeros()
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def networkx_counts(A):
    G = nx.from_scipy_sparse_array(A)
    per_vertex = nx.triangles(G)
    return sum(per_vertex.values()) // 3, np.array([per_vertex[v] for v in range(A.shape[0])])


def edge_counts(A):
    """Common neighbours at every stored entry, by set arithmetic."""
    lists = [set(A.indices[A.indptr[u] : A.indptr[u + 1]].tolist()) for u in range(A.shape[0])]
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    return np.array([len(lists[u] & lists[v]) for u, v in zip(rows, A.indices.tolist())], dtype=np.int64)


@pytest.fixture(params=["probe", "search"])
def method(request, monkeypatch):
    from semiring.kernels.cuda import graph as cuda_graph

    monkeypatch.setenv(cuda_graph.TRIANGLES_ENV, request.param)
    return request.param


@pytest.fixture(params=["table", "fallback"])
def table(request, monkeypatch):
    """A block's table as the device allows, or so small (256 slots) that long lists are searched in global
    memory."""
    from semiring.kernels.cuda import graph as cuda_graph
    from semiring.kernels.cuda import graph_source as src

    if request.param == "fallback":
        monkeypatch.setattr(cuda_graph.launch, "max_shared_bytes", lambda: 256 * src.probe_slot_bytes("edge", "int64"))
    return request.param


@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("shape", ["clique", "star", "sparse"])
def test_probe_counts_match_networkx_and_set_arithmetic(shape, index, method, table):
    import cupyx.scipy.sparse as csp

    A = {
        "clique": lambda: clique_plus(300, 3000, seed=1, index=index),
        "star": lambda: star_graph(4000, 20000, seed=2, index=index),
        "sparse": lambda: random_graph(5000, 30000, seed=3, index=index),
    }[shape]()
    D = csp.csr_matrix(A)
    total, per_vertex = networkx_counts(A)
    assert total > 0
    assert graph.triangle_count(D) == total
    for order in ("degree", "id"):
        assert graph.triangle_count(D, order=order) == total
    np.testing.assert_array_equal(graph.triangle_count(D, per="vertex").get(), per_vertex)
    per_edge = graph.triangle_count(D, per="edge").get()
    np.testing.assert_array_equal(per_edge.indices, A.indices)
    np.testing.assert_array_equal(per_edge.data, edge_counts(A))
    J = graph.jaccard(D).get()
    deg = np.diff(A.indptr)
    rows = np.repeat(np.arange(A.shape[0]), deg)
    c = edge_counts(A)
    np.testing.assert_allclose(J.data, c / (deg[rows] + deg[A.indices] - c), rtol=1e-14)


def test_probe_tasks_span_a_target_with_many_in_neighbours(method):
    """A target whose in-neighbours fill many tasks (a warp's 32 and a block's 256 in-neighbours a task): a
    hub joined to a clique's members and to thousands of leaves in triangles with it."""
    import cupyx.scipy.sparse as csp

    n = 6000
    u, v = [], []
    for leaf in range(1, n - 1, 2):  # triangles {0, leaf, leaf + 1}
        u += [0, 0, leaf]
        v += [leaf, leaf + 1, leaf + 1]
    A = sp.csr_matrix((np.ones(len(u)), (u, v)), shape=(n, n))
    A = sp.csr_matrix(((A + A.T) > 0).astype(np.float64))
    total, per_vertex = networkx_counts(A)
    D = csp.csr_matrix(A)
    assert graph.triangle_count(D) == total == (n - 2) // 2
    np.testing.assert_array_equal(graph.triangle_count(D, per="vertex").get(), per_vertex)
    np.testing.assert_array_equal(graph.triangle_count(D, per="edge").get().data, edge_counts(A))


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_probe_on_tiny_graphs(n, method):
    import cupyx.scipy.sparse as csp

    A = sp.csr_matrix((n, n)) if n == 0 else sp.csr_matrix(nx.to_scipy_sparse_array(nx.complete_graph(n)), dtype=float)
    D = csp.csr_matrix(A) if A.nnz else csp.csr_matrix(A.shape, dtype=np.float64)
    expected = n * (n - 1) * (n - 2) // 6
    assert graph.triangle_count(D) == expected
    np.testing.assert_array_equal(graph.triangle_count(D, per="vertex").get(), [expected and 1] * n)
    assert int(graph.triangle_count(D, per="edge").get().sum()) == 6 * expected


@pytest.fixture(params=["grid", "one block"])
def grid(request, monkeypatch):
    """The probe's grid as the device gives it, or one block: every group then strides over many tasks."""
    from semiring.kernels.cuda import graph as cuda_graph

    if request.param == "one block":
        monkeypatch.setattr(cuda_graph, "PROBE_BLOCKS_PER_SM", 1)
        monkeypatch.setattr(cuda_graph.launch, "multiprocessor_count", lambda: 1)
    return request.param


def test_probe_parts_add_up_to_the_total(method, grid):
    """The Dask path counts part b of n of the work on each worker: the parts' counts sum to the total."""
    from semiring.kernels.cuda import graph as cuda_graph

    A = clique_plus(200, 4000, seed=4)
    G = cuda_graph.to_device(A)
    total = cuda_graph.triangle_count_total(G, True)
    assert total == networkx_counts(A)[0]
    for parts in (1, 3, 7):
        assert sum(cuda_graph.triangle_count_total(G, True, (b, parts)) for b in range(parts)) == total


@pytest.fixture(params=["device", "tiers forced"])
def rank_tiers(request, monkeypatch):
    """Rows of ranks sorted as the device sorts them (a warp up to 256 entries, a block up to 4,096), or with
    the tiers cut at 32 and 64 entries, so that the clique's rows go to all three: warps, blocks and CuPy."""
    from semiring.kernels.cuda import graph_source as src

    if request.param == "tiers forced":
        monkeypatch.setattr(src, "RANK_ROWS_WARP", 32)
        monkeypatch.setattr(src, "RANK_ROWS_BLOCK", 64)
    return request.param


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_ranked_rows_hold_each_rows_ranks_in_order(index, rank_tiers, monkeypatch):
    """The degree order's lists: the orientation writes each kept entry's rank, then each row of L is sorted
    (in registers, a warp's or a block's shared memory, or by CuPy): against NumPy's sort of each row's ranks
    of L in ids; then the counts made on them against networkx."""
    import cupyx.scipy.sparse as csp

    from semiring.kernels.cuda import graph as cuda_graph

    A = clique_plus(300, 3000, seed=5, index=index)
    G = cuda_graph.to_device(csp.csr_matrix(A))
    lp, li, _, _ = cuda_graph.orient(G, True, rows=False, transpose=True)
    rank, order = cuda_graph.degree_order(G)
    degrees = np.diff(G.indptr.get())
    want_order = np.lexsort((np.arange(degrees.size), degrees))  # by degree, ties by id
    np.testing.assert_array_equal(order.get(), want_order)
    np.testing.assert_array_equal(rank.get()[want_order], np.arange(degrees.size))
    kp, keys, _, _ = cuda_graph.orient(G, True, rows=False, transpose=True, ranks=rank)
    np.testing.assert_array_equal(kp.get(), lp.get())
    np.testing.assert_array_equal(keys.get(), rank.get()[li.get()])  # written in place of the ids
    got = cuda_graph.sort_rows(lp, keys)
    assert got.dtype == index
    lp, li, rank = lp.get(), li.get(), rank.get()
    assert np.diff(lp).max() > 64  # the clique's rows reach the forced tiers' last
    assert (np.diff(lp) <= 32).any() and ((np.diff(lp) > 32) & (np.diff(lp) <= 256)).any()
    want = np.concatenate([np.sort(rank[li[a:b]]) for a, b in itertools.pairwise(lp)])
    np.testing.assert_array_equal(got.get(), want)
    np.testing.assert_array_equal(cuda_graph.ranked_orient(G, rows=False)[1].get(), want)
    monkeypatch.setenv(cuda_graph.TRIANGLES_ENV, "probe")
    total, per_vertex = networkx_counts(A)
    D = csp.csr_matrix(A)
    assert graph.triangle_count(D) == total
    np.testing.assert_array_equal(graph.triangle_count(D, per="vertex").get(), per_vertex)
    np.testing.assert_array_equal(graph.triangle_count(D, per="edge").get().data, edge_counts(A))
