"""Graph measures on Dask whose results stay on the workers (``compute=False``, ``as_frame=True``) and the
triangle counts reduced there, on a ``LocalCluster`` of two in-process workers.

Every result is compared with the single-machine call on the whole graph (exactly: the blocks run the same
kernels on the same lists) and with networkx (Jaccard, common neighbours, triangles), on tiny graphs with
empty rows, a single edge, and a hub (a vertex joined to every other).  Where the blocks are is asked of
the scheduler: each block of a kept result is a future held by a worker, computed by both workers' tasks.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from strategies import random_graph, star_graph, weighted_graph

from semiring import graph

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
dd = pytest.importorskip("dask.dataframe")  # needs pandas and pyarrow
pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def client():
    with (
        dask.config.set({"distributed.scheduler.work-stealing": False}),  # blocks stay where they were dealt
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def row_blocks(A, rows):
    return da.from_array(A, chunks=(rows, -1), asarray=False)


def one_edge(n: int = 9) -> sp.csr_matrix:
    """One edge (3, 7) among n vertices: every other row empty."""
    return sp.csr_matrix((np.ones(2), ([3, 7], [7, 3])), shape=(n, n))


GRAPHS = {
    "empty rows": lambda: random_graph(40, 60, seed=4),  # isolated vertices among the rows
    "one edge": one_edge,
    "hub": lambda: star_graph(30, 40, seed=5),
}

# Every per-edge measure, as (name, call): each a sparse matrix with A's pattern, and a frame column.
PER_EDGE = {
    "jaccard": graph.jaccard,
    "sorensen": graph.sorensen,
    "overlap": graph.overlap,
    "cosine": graph.cosine,
    "scan_similarity": graph.scan_similarity,
    "adamic_adar_index": graph.adamic_adar_index,
    "resource_allocation_index": graph.resource_allocation_index,
    "common_neighbors": graph.common_neighbors,
    "triangles per edge": lambda A, **kw: graph.triangle_count(A, "edge", **kw),
}


def assert_kept_on_both_workers(client, result, nblocks: int) -> None:
    """The result's blocks are futures, finished and held by the workers, one a block, dealt to both."""
    futures = distributed.futures_of(result)
    assert len(futures) == nblocks
    distributed.wait(futures)
    holders = client.who_has(futures)
    assert all(holders[f.key] for f in futures), "a block is held by no worker"
    assert len({w for f in futures for w in holders[f.key]}) == 2, "every block on one worker"


def assert_same_sparse(got, want) -> None:
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)  # the same computation: to the last bit


@pytest.mark.parametrize("case", GRAPHS)
def test_per_edge_results_stay_on_the_workers_and_equal_one_machine(client, case):
    A = GRAPHS[case]()
    dA = row_blocks(A, -(-A.shape[0] // 4))
    nblocks = dA.numblocks[0]
    held = graph.hold(dA)  # made into the graph once for the calls below
    for name, call in PER_EDGE.items():
        kept = call(held, compute=False)
        assert isinstance(kept, da.Array) and kept.shape == A.shape and sum(kept.chunks[0]) == A.shape[0], name
        assert_kept_on_both_workers(client, kept, nblocks)
        assert_same_sparse(kept.compute(), call(A))
        frame = call(held, as_frame=True, compute=False)
        assert isinstance(frame, dd.DataFrame) and frame.npartitions == nblocks, name
        assert_kept_on_both_workers(client, frame, nblocks)
        pd.testing.assert_frame_equal(frame.compute(), call(A, as_frame=True), check_exact=True)
    # compute=True with as_frame: that frame computed, the single-machine one
    pd.testing.assert_frame_equal(graph.cosine(held, as_frame=True), graph.cosine(A, as_frame=True), rtol=1e-15)

    # against networkx, not only against ourselves
    G = nx.from_scipy_sparse_array(A)
    frame = graph.jaccard(dA, as_frame=True, compute=False).compute()
    want = {(u, v): p for u, v, p in nx.jaccard_coefficient(G, G.edges())}
    assert len(frame) == G.number_of_edges()
    for u, v, p in frame.itertuples(index=False):
        assert p == pytest.approx(want[(u, v)], rel=1e-12)
    counts = graph.common_neighbors(dA, compute=False).compute().tocoo()
    for u, v, c in zip(counts.row, counts.col, counts.data):
        assert c == len(set(G[u]) & set(G[v]))


def test_weighted_similarities_stay_on_the_workers(client):
    W = weighted_graph(30, 120, seed=10)
    kept = graph.jaccard(row_blocks(W, 8), weighted=True, compute=False)
    assert_kept_on_both_workers(client, kept, 4)
    assert_same_sparse(kept.compute(), graph.jaccard(W, weighted=True))


@pytest.mark.parametrize("case", GRAPHS)
def test_triangle_counts_are_reduced_on_the_workers(client, case):
    A = GRAPHS[case]()
    per_vertex = nx.triangles(nx.from_scipy_sparse_array(A))
    dA = row_blocks(A, max(1, A.shape[0] // 12))  # 9 to 15 blocks: a tree of two levels (8 values a task)
    nblocks = dA.numblocks[0]
    assert nblocks > 8
    with distributed.get_task_stream(client) as stream:
        total = graph.triangle_count(dA)
    assert isinstance(total, int) and total == sum(per_vertex.values()) // 3
    sums = [t for t in stream.data if str(t["key"]).startswith("sum-")]
    assert len(sums) == -(-nblocks // 8) + 1, "the parts' counts were not summed on the workers as a tree"
    assert len({t["worker"] for t in stream.data if "_block_triangles" in str(t["key"])}) == 2
    assert graph.triangle_count(dA, order="id") == total

    vertex = graph.triangle_count(dA, "vertex")
    np.testing.assert_array_equal(vertex, [per_vertex[v] for v in range(A.shape[0])])
    assert vertex.dtype == graph.triangle_count(A, "vertex").dtype
    frame = graph.triangle_count(dA, "vertex", as_frame=True)
    pd.testing.assert_frame_equal(frame, graph.triangle_count(A, "vertex", as_frame=True))


def test_kept_results_outlive_the_call_and_keep_the_input_rules(client):
    A = random_graph(30, 60, seed=9)
    kept = graph.sorensen(row_blocks(A, 10), compute=False)  # the graph held for that call only, then dropped
    import gc

    gc.collect()
    assert_same_sparse(kept.compute(), graph.sorensen(A))
    B = sp.csr_matrix(sp.triu(A))  # not symmetric: refused at the call, as on one machine
    with pytest.raises(ValueError, match="A must be symmetric"):
        graph.jaccard(row_blocks(B, 10), compute=False)
    with pytest.raises(NotImplementedError, match="as_frame=True gives the"):
        graph.jaccard(row_blocks(A, 10), as_pairs=True)
    arr = sp.csr_array(A)  # a SciPy array's blocks give SciPy array blocks, as one machine returns
    assert_same_sparse(graph.cosine(row_blocks(arr, 10), compute=False).compute(), graph.cosine(arr))
