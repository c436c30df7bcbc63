"""The Dask paths on a ``LocalCluster`` (2 worker processes) against the single-machine calls and the oracles.

Every public call that takes a Dask array is run on the cluster and compared
with the same call on the whole input on one machine (exact where the values
are counts or selected indices) and, for the neighbours and the triangles,
with an independent reference (SciPy ``cdist`` + brute-force order, networkx).
The merge of per-shard top-k selections is checked by itself against a
brute-force sort, on inputs full of ties and NaN.

Cost: the workers compile the CPU engine's kernels too, so the cases share few
kernels: float64 only, ``plus_absdiff`` (cityblock), ``plus_times`` (inner
product), top-k, and the masked ``plus_pair`` product of the graph measures.
"""

from __future__ import annotations

import collections
import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import reference_knn
from scipy.spatial.distance import cdist
from strategies import random_graph, weighted_graph

import semiring
from semiring import dask as dask_paths
from semiring import graph
from semiring.distances import NearestNeighbors, pairwise_distances

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    # No work stealing: a worker still compiling its first kernels would otherwise lose a shard's query to an
    # idle one, which copies the shard (a cold-cache run failed "a shard was copied" that way).
    with (
        dask.config.set({"distributed.scheduler.work-stealing": False}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def row_blocks(A, rows):
    """A as a Dask array of row blocks of ``rows`` rows (SciPy blocks for sparse A)."""
    return da.from_array(A, chunks=(rows, -1), asarray=not sp.issparse(A))


def tied_data(m: int, n: int, seed: int) -> sp.csr_matrix:
    """Small integer values, so that many distances are equal: tie order matters."""
    rng = np.random.default_rng(seed)
    X = sp.random(m, n, density=0.3, format="csr", random_state=seed, dtype=np.float64)
    X.data = rng.integers(1, 3, X.nnz).astype(np.float64)
    return X


# --------------------------------------------------------------------------- merge, on its own


@st.composite
def shard_cases(draw):
    m = draw(st.integers(1, 4))
    n = draw(st.integers(2, 12))
    k = draw(st.integers(1, n))
    values = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, -1.0, np.nan, np.inf]), min_size=m * n, max_size=m * n))
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=3)))
    return np.array(values).reshape(m, n), k, [0, *cuts, n], draw(st.booleans())


@settings(max_examples=60)
@given(shard_cases())
def test_merge_of_shards_equals_one_selection_over_all(case):
    D, k, bounds, largest = case
    parts = []
    for c0, c1 in itertools.pairwise(bounds):  # each shard's own best min(k, size), global indices
        d, i = reference_knn(D[:, c0:c1], min(k, c1 - c0), largest=largest)
        parts.append((d, i + c0))
    dist, ind = dask_paths.merge(parts[::-1] if largest else parts, k, largest)  # parts in any order
    want_d, want_i = reference_knn(D, k, largest=largest)
    np.testing.assert_array_equal(ind, want_i)
    np.testing.assert_array_equal(dist, want_d)


# --------------------------------------------------------------------------- semiring.pairwise, pairwise_distances


def test_pairwise_blocks_equal_the_single_machine_result(client):
    X = tied_data(23, 9, 0)
    Y = tied_data(17, 9, 1)
    dX, dY = row_blocks(X, 7), row_blocks(Y, 6)
    C = semiring.pairwise(dX, dY, semiring.plus_absdiff)
    assert isinstance(C, da.Array) and C.chunks == (dX.chunks[0], dY.chunks[0])
    got = C.compute()
    np.testing.assert_array_equal(got, semiring.pairwise(X, Y, semiring.plus_absdiff))
    np.testing.assert_array_equal(got, cdist(X.toarray(), Y.toarray(), "cityblock"))  # small integers: exact

    mask = sp.random(23, 23, density=0.2, format="csr", random_state=2)
    masked = semiring.pairwise(dX, None, "plus_pair", mask=mask).compute()
    want = semiring.pairwise(X, None, "plus_pair", mask=mask)
    np.testing.assert_array_equal(masked.indptr, want.indptr)
    np.testing.assert_array_equal(masked.indices, want.indices)
    np.testing.assert_array_equal(masked.data, want.data)


def test_pairwise_distances_blocks_equal_the_single_machine_result(client):
    X = tied_data(21, 8, 3)
    dX = row_blocks(X, 8)
    D = pairwise_distances(dX, metric="cityblock")
    assert D.dtype == np.float64 and D.chunks == (dX.chunks[0], dX.chunks[0])
    assert pairwise_distances(dX.astype(np.float32), metric="cityblock").dtype == np.float32  # as one machine's
    got = D.compute()
    np.testing.assert_array_equal(got, pairwise_distances(X, metric="cityblock"))
    np.testing.assert_array_equal(got, cdist(X.toarray(), X.toarray(), "cityblock"))
    dense = pairwise_distances(row_blocks(X.toarray(), 5), X[:4], metric="cityblock").compute()  # NumPy blocks
    np.testing.assert_array_equal(dense, pairwise_distances(X, X[:4], metric="cityblock"))


def test_what_needs_no_data_is_refused_at_the_call(client):
    dX = row_blocks(tied_data(10, 4, 0), 5)
    with pytest.raises(ValueError, match="X has 4 columns but Y has 3"):
        pairwise_distances(dX, np.ones((2, 3)), metric="cityblock")
    with pytest.raises(ValueError, match="unknown metric"):
        pairwise_distances(dX, metric="nope")
    with pytest.raises(ValueError, match="working_memory must be > 0"):
        semiring.pairwise(dX, None, "plus_times", working_memory=-1)
    with pytest.raises(ValueError, match="backend must be one of"):
        semiring.pairwise(dX, None, "plus_times", backend="tpu")
    with pytest.raises(ValueError, match="mask has shape"):
        semiring.pairwise(dX, None, "plus_times", mask=sp.eye(3, format="csr"))
    with pytest.raises(ValueError, match="n_neighbors <= n_samples_fit"):
        NearestNeighbors(metric="cityblock").fit(tied_data(10, 4, 0)).kneighbors(dX, 11)
    with pytest.raises(ValueError, match="unknown size"):
        dense = row_blocks(np.ones((10, 4)), 5)
        NearestNeighbors(metric="cityblock").fit(dense[dense[:, 0] > 0])  # a filter: block sizes unknown


def test_a_blocks_values_are_checked_by_the_single_machine_call(client):
    X = tied_data(10, 4, 0)
    X.data[-1] = np.nan  # in the last block only
    D = pairwise_distances(row_blocks(X, 5), metric="cityblock")  # lazy: nothing read yet
    with pytest.raises(ValueError, match="X contains NaN"):
        D.compute()
    with pytest.raises(ValueError, match="X contains NaN"):
        NearestNeighbors(metric="cityblock").fit(row_blocks(X, 5))  # fit returns a ready index: raises now


# --------------------------------------------------------------------------- NearestNeighbors


@pytest.mark.parametrize("metric", ["cityblock", "inner_product"])
def test_kneighbors_on_a_sharded_index(client, metric):
    X = tied_data(40, 6, 4)
    Q = tied_data(13, 6, 5)
    nn = NearestNeighbors(n_neighbors=5, metric=metric).fit(row_blocks(X, 11))  # shards of 11, 11, 11, 7 rows
    held = client.who_has()
    shard_workers = {w for s, _, _ in nn._index.shards for w in held[s.key]}
    assert len(shard_workers) == 2, "the shards were not spread over both workers"
    one = NearestNeighbors(n_neighbors=5, metric=metric).fit(X)
    largest = metric == "inner_product"
    D = X.toarray() @ X.toarray().T if largest else cdist(X.toarray(), X.toarray(), metric)
    DQ = Q.toarray() @ X.toarray().T if largest else cdist(Q.toarray(), X.toarray(), metric)
    for queries, dense, exclude_self in ((None, D, True), (row_blocks(Q, 4), DQ, False), (Q, DQ, False)):
        dist, ind = nn.kneighbors(queries)
        assert isinstance(ind, da.Array) and ind.dtype == np.int64
        dist, ind = dask.compute(dist, ind)
        want_d, want_i = one.kneighbors(None if queries is None else Q)
        np.testing.assert_array_equal(ind, want_i)
        np.testing.assert_array_equal(dist, want_d)
        ref_d, ref_i = reference_knn(dense, 5, largest=largest, exclude_self=exclude_self)
        np.testing.assert_array_equal(ind, ref_i)  # tie order: the documented one
        np.testing.assert_allclose(dist, ref_d, rtol=1e-12)
    held = client.who_has()
    assert all(len(held[s.key]) == 1 for s, _, _ in nn._index.shards), "a shard was copied: queries go to the shards"
    graph_ = nn.kneighbors_graph(None, 4, mode="distance")
    assert isinstance(graph_, sp.csr_matrix)
    assert (graph_ != one.kneighbors_graph(None, 4, mode="distance")).nnz == 0
    with pytest.raises(ValueError, match="mode must be"):
        nn.kneighbors_graph(None, 4, mode="weights")


@pytest.mark.parametrize("persisted", [True, False])
def test_shards_are_dealt_evenly_over_the_workers_wherever_the_blocks_are(client, persisted):
    """Blocks all persisted on one worker, or not computed yet: the fit keeps half the shards on each worker
    (every later task runs where its shards are), the answers equal to the single machine's."""
    X = tied_data(40, 6, 4)
    dX = da.from_array(X, chunks=(10, -1), asarray=False)
    if persisted:
        first = sorted(client.nthreads())[0]
        dX = client.persist(dX, workers=[first])
        distributed.wait(dX)
        assert {w for ws in client.who_has(dX).values() for w in ws} == {first}
    nn = NearestNeighbors(n_neighbors=4, metric="cityblock").fit(dX)
    held = client.who_has()
    per_worker = collections.Counter(w for s, _, _ in nn._index.shards for w in held[s.key])
    assert sorted(per_worker.values()) == [2, 2]
    want = NearestNeighbors(n_neighbors=4, metric="cityblock").fit(X).kneighbors()
    for got, expected in zip(dask.compute(*nn.kneighbors()), want):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "sizes, holders, workers, want",
    [
        ([4, 4, 4, 4], [["a"]] * 4, ["a", "b"], ["a", "a", "b", "b"]),  # two move, to the empty worker
        ([4, 4, 4, 4], [["a"], ["b"], ["a"], ["b"]], ["a", "b"], ["a", "b", "a", "b"]),  # already even: none moves
        ([9, 3, 3, 3], [["a"], ["a"], ["a"], ["a"]], ["a", "b"], ["a", "b", "b", "b"]),  # rows, not shards, dealt
        ([2, 2], [[], []], ["a", "b", "c"], ["a", "b"]),  # blocks not computed yet; more workers than shards
        ([4, 4, 4], [["c"], ["c"], ["b"]], ["a", "b", "c"], ["c", "a", "b"]),  # the least loaded take the rest
    ],
)
def test_deal_shards(sizes, holders, workers, want):
    homes = dask_paths.deal_shards(sizes, holders, workers)
    assert homes == want
    load = collections.Counter()
    for size, w in zip(sizes, homes):
        load[w] += size
    assert max(load.values()) - min(load[w] for w in workers if w in load) <= max(sizes)


def _planned(nn, client) -> list:
    """The jobs the fitted model's all-pairs query runs on the cluster, as its ``kneighbors`` plans them: the
    shards' workers, then the plan (``(function name, shard, query block)``, with the shard's worker)."""
    index = nn._index
    _, _, holders = index._placed(client)

    def args_of(size, own, offset):
        kk = min(4, size - 1) if own else min(4, size)
        return (kk, offset) if kk > 0 or not own else None

    pairs = ("_shard_kneighbors_both", lambda a, b: (), None)
    jobs, _ = index._plan(index.X, True, "_shard_kneighbors", args_of, holders, pairs)
    return [(f, i, q, holders[i]) for f, i, q, _ in jobs]


def test_all_pairs_kneighbors_asks_each_pair_of_shards_once(client, monkeypatch):
    """X=None under a symmetric measure: each shard answers its own rows, each pair of shards is asked once for
    both blocks (B(B-1)/2 tasks, on both workers); the answer equals the single machine's and the reference's,
    with uneven blocks and an empty one.  A measure that is not symmetric asks every shard every block."""
    X = tied_data(47, 6, 11)
    blocks = da.from_array(X, chunks=((9, 9, 2, 0, 12, 12, 3), (6,)), asarray=False)  # six shards, a block of none
    asked = []
    kneighbors = dask_paths.ShardedIndex.kneighbors

    def spy(self, *args, **kwargs):
        asked.append(kwargs["pair_part"])  # None unless each pair of shards is asked once
        return kneighbors(self, *args, **kwargs)

    monkeypatch.setattr(dask_paths.ShardedIndex, "kneighbors", spy)
    nn = NearestNeighbors(n_neighbors=4, metric="cityblock").fit(blocks)
    dist, ind = dask.compute(*nn.kneighbors())
    assert asked.pop() is not None
    jobs = _planned(nn, client)
    pairs = [j for j in jobs if j[0] == "_shard_kneighbors_both"]
    assert len(pairs) == 6 * 5 // 2 and len({j[3] for j in pairs}) == 2  # on both workers
    assert len(jobs) == len(pairs) + 6 + 6  # each shard's own rows; every shard for the empty block
    want_d, want_i = NearestNeighbors(n_neighbors=4, metric="cityblock").fit(X).kneighbors()
    np.testing.assert_array_equal(ind, want_i)
    np.testing.assert_array_equal(dist, want_d)
    ref_d, ref_i = reference_knn(cdist(X.toarray(), X.toarray(), "cityblock"), 4, largest=False, exclude_self=True)
    np.testing.assert_array_equal(ind, ref_i)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-12)

    P = X.multiply(1 / X.sum(axis=1)).tocsr()  # rows of a distribution
    P.data += 0.0
    nn = NearestNeighbors(n_neighbors=3, metric="kldivergence").fit(row_blocks(P, 12))
    ind = nn.kneighbors(return_distance=False).compute()
    assert asked.pop() is None  # every shard asked by every block
    np.testing.assert_array_equal(ind, NearestNeighbors(n_neighbors=3, metric="kldivergence").fit(P).kneighbors()[1])


def test_pairs_of_shards_are_placed_on_the_less_busy_worker():
    """The plan's own arithmetic: each unordered pair once, both blocks answered by it, the work of two workers
    holding four equal shards split evenly, a pair of shards of one worker kept there."""
    X = da.zeros((40, 3), chunks=(10, 3))
    index = dask_paths.ShardedIndex(X, [(None, 10 * i, 10) for i in range(4)], held=True)

    def args_of(size, own, offset):
        return (3, offset)

    pairs = ("pair", lambda a, b: (a, b), None)
    jobs, uses = index._plan(X, True, "part", args_of, ["w0", "w0", "w1", "w1"], pairs)
    own = [j for j in jobs if j[0] == "part"]
    pairs = [j for j in jobs if j[0] == "pair"]
    assert [(i, q) for _, i, q, _ in own] == [(i, None) for i in range(4)]  # each shard's own rows
    assert all(q[0] == "rows" for _, _, q, _ in pairs)  # the other shard's rows, as its fit checked them
    assert sorted(tuple(sorted((i, q[1]))) for _, i, q, _ in pairs) == list(itertools.combinations(range(4), 2))
    holder = {0: "w0", 1: "w0", 2: "w1", 3: "w1"}
    work = {"w0": 0, "w1": 0}
    for _, i, q, args in pairs:
        assert args == (i, q[1])  # pair_args(shard run, shard whose rows are asked)
        work[holder[i]] += 1
    assert work == {"w0": 3, "w1": 3}
    for q, use in enumerate(uses):  # its own rows, then three pairs, each the side that answers block q
        assert len(use) == 4 and use[0] == (q, None)
        for j, side in use[1:]:
            _, i, asked, _ = jobs[j]
            assert (asked[1], i)[side] == q


@pytest.mark.parametrize(
    "holders",
    [
        ["w0", "w0", "w1", "w1", "w2", "w2", "w3", "w3"],  # blocks placed in row order, two a worker
        ["w0", "w1", "w2", "w3", "w0", "w1", "w2", "w3"],
        ["w2", "w0", "w3", "w1", "w1", "w3", "w0", "w2"],
    ],
)
def test_pairs_of_eight_shards_are_dealt_evenly_over_four_workers(holders):
    """Each unordered pair of eight equal shards once, on a worker holding one of the two, seven a worker
    whatever the shards' layout (the greedy pass alone gave the first layout's workers 4, 7, 8 and 9)."""
    X = da.zeros((80, 3), chunks=(10, 3))
    index = dask_paths.ShardedIndex(X, [(None, 10 * i, 10) for i in range(8)], held=True)
    jobs, _ = index._plan(
        X, True, "part", lambda size, own, offset: (3, offset), holders, ("pair", lambda a, b: (), None)
    )
    pairs = [(i, q[1]) for f, i, q, _ in jobs if f == "pair"]
    assert sorted(tuple(sorted(p)) for p in pairs) == list(itertools.combinations(range(8), 2))
    per_worker = collections.Counter(holders[i] for i, _ in pairs)
    assert per_worker == {"w0": 7, "w1": 7, "w2": 7, "w3": 7}


def test_radius_neighbors_on_a_sharded_index(client):
    """Each shard's ε-neighbours side by side equal the single-machine call's, and cdist's pairs within r."""
    X, Q = tied_data(40, 6, 4), tied_data(13, 6, 5)
    nn = NearestNeighbors(radius=1.5, metric="cityblock").fit(row_blocks(X, 11))
    one = NearestNeighbors(radius=1.5, metric="cityblock").fit(X)
    for queries, Qd in ((None, X), (row_blocks(Q, 4), Q), (Q, Q)):
        D = cdist(Qd.toarray(), X.toarray(), "cityblock")
        if queries is None:
            np.fill_diagonal(D, np.inf)  # a point is not its own neighbour
        for mode, sort in (("distance", False), ("distance", True), ("connectivity", False)):
            got = nn.radius_neighbors_graph(queries, mode=mode, sort_results=sort)
            want = one.radius_neighbors_graph(None if queries is None else Q, mode=mode, sort_results=sort)
            assert isinstance(got, sp.csr_matrix) and got.dtype == want.dtype
            np.testing.assert_array_equal(got.indptr, want.indptr)
            np.testing.assert_array_equal(got.indices, want.indices)
            np.testing.assert_array_equal(got.data, want.data)
            stored = sp.csr_matrix((np.ones(got.nnz), got.indices, got.indptr), shape=got.shape).toarray()
            np.testing.assert_array_equal(stored != 0, D <= 1.5)  # the pattern: distances of 0 are stored
        dist, ind = nn.radius_neighbors(queries, sort_results=True)
        for d, i, row in zip(dist, ind, D):
            np.testing.assert_array_equal(np.sort(i), np.flatnonzero(row <= 1.5))
            np.testing.assert_allclose(d, row[i], rtol=1e-12)
    ind = one.radius_neighbors(row_blocks(Q, 4), return_distance=False)  # a single-machine index, Dask queries
    for i, row in zip(ind, cdist(Q.toarray(), X.toarray(), "cityblock")):
        np.testing.assert_array_equal(i, np.flatnonzero(row <= 1.5))


def test_a_single_machine_index_answers_dask_queries(client):
    X, Q = tied_data(30, 6, 6), tied_data(9, 6, 7)
    nn = NearestNeighbors(n_neighbors=3, metric="cityblock").fit(X)
    ind = nn.kneighbors(row_blocks(Q, 4), return_distance=False)
    assert ind.chunks == ((4, 4, 1), (3,))
    np.testing.assert_array_equal(ind.compute(), nn.kneighbors(Q, return_distance=False))
    refit = NearestNeighbors(n_neighbors=3, metric="cityblock").fit(row_blocks(X, 8)).fit(X)  # back to one machine
    assert isinstance(refit.kneighbors(Q)[1], np.ndarray)


# --------------------------------------------------------------------------- graph measures


def test_graph_measures_by_row_blocks_equal_the_single_machine_results(client):
    A = random_graph(60, 200, seed=8)
    dA = row_blocks(A, 17)
    for name in ("jaccard", "common_neighbors"):
        with distributed.get_task_stream(client) as stream:
            got = getattr(graph, name)(dA)
        assert len({t["worker"] for t in stream.data if "_block_" in str(t["key"])}) == 2, "blocks on one worker"
        want = getattr(graph, name)(A)
        assert type(got) is type(want) and got.dtype == want.dtype
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-15)
    W = weighted_graph(40, 160, seed=10)
    got, want = graph.jaccard(row_blocks(W, 15), weighted=True), graph.jaccard(W, weighted=True)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, rtol=1e-14)
    pairs = np.array([[0, 1], [5, 9], [59, 3], [0, 1], [7, 7]])
    np.testing.assert_allclose(graph.jaccard(dA, pairs), graph.jaccard(A, pairs), rtol=1e-15)

    triangles = sum(nx.triangles(nx.from_scipy_sparse_array(A)).values()) // 3
    assert graph.triangle_count(dA) == graph.triangle_count(dA, order="id") == triangles
    np.testing.assert_array_equal(graph.triangle_count(dA, "vertex"), graph.triangle_count(A, "vertex"))
    edge = graph.triangle_count(dA, "edge")
    assert (edge != graph.triangle_count(A, "edge")).nnz == 0

    held = graph.hold(dA)  # made into the graph once, for the calls below (the adamic_adar row: plus_min by blocks)
    assert graph.triangle_count(held) == triangles
    got, want = graph.adamic_adar_index(held), graph.adamic_adar_index(A)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, rtol=1e-14)
    with pytest.raises(ValueError, match=r"checked for \(False, False\), this call asks for \(True, False\)"):
        graph.jaccard(held, weighted=True)


def test_graph_input_rules_hold_on_dask(client):
    A = random_graph(30, 60, seed=9)
    B = sp.csr_matrix(sp.triu(A))  # not symmetric
    with pytest.raises(ValueError, match="A must be symmetric"):
        graph.common_neighbors(row_blocks(B, 10))
    assert graph.triangle_count(row_blocks(B, 10), normalize=True) == graph.triangle_count(A)
    with pytest.raises(NotImplementedError, match=r"ktruss\(A.compute\(\)"):
        graph.ktruss(row_blocks(A, 10), 3)
