"""The CPU engine's triangles and trusses on skewed graphs, against networkx and python-graphblas.

Hubs make the work per vertex uneven (the chunks are cut by work), make out-lists of very unequal length
(ordered by id: the binary-search branch of the counting kernels; a hub's removed edge: the galloping branch of
the peeling), and share their edges between threads (the atomic adds).  The hypothesis graphs add stars,
cliques, isolated vertices, self-loops and both index types.
"""

from __future__ import annotations

import graphblas as gb
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import edge_values
from strategies import adjacency

from semiring import graph
from semiring.kernels.cpu import graph as cpu_graph


def hub_graph(seed: int) -> sp.csr_matrix:
    """Vertices 1 and 2 are hubs over a sparse rest; vertex 0 meets both, so ordered by id its short out-list
    meets their long ones."""
    rng = np.random.default_rng(seed)
    n = 600
    G = nx.gnm_random_graph(n, 1500, seed=seed)
    for hub in (1, 2):
        G.add_edges_from((hub, int(v)) for v in rng.choice(np.arange(3, n), 300, replace=False))
    G.add_edges_from([(0, 1), (0, 2), (1, 2)])
    return nx.to_scipy_sparse_array(G, format="csr", dtype=np.float64), G


def check_trusses(A, G: nx.Graph) -> int:
    """Every k-truss and the truss numbers against ``networkx.k_truss``, k = 2, 3, ... until it is empty;
    the first k whose truss is empty."""
    truss = edge_values(graph.truss_decomposition(A, backend="cpu"))
    assert set(truss) == {(u, v) for u in G for v in G[u]}
    k = 2
    while True:
        want = {(u, v) for u, v in nx.k_truss(G, k).edges()}
        want |= {(v, u) for u, v in want}
        assert set(edge_values(graph.ktruss(A, k, backend="cpu"))) == want, k
        assert {e for e, t in truss.items() if t >= k} == want, k
        if not want:
            return k
        k += 1


@pytest.mark.parametrize("order", ["degree", "id"])
@pytest.mark.parametrize("seed", [0, 1])
def test_triangles_of_hub_graphs_match_networkx(order, seed):
    A, G = hub_graph(seed)
    A = sp.csr_matrix(A)
    tri = nx.triangles(G)
    assert sum(tri.values()) > 0
    assert graph.triangle_count(A, order=order, backend="cpu") == sum(tri.values()) // 3
    np.testing.assert_array_equal(graph.triangle_count(A, per="vertex", order=order, backend="cpu"), list(tri.values()))
    per_edge = edge_values(graph.triangle_count(A, per="edge", order=order, backend="cpu"))
    assert per_edge == {(u, v): len(list(nx.common_neighbors(G, u, v))) for u in G for v in G[u]}
    if order == "id":  # some edge u → v has N⁺(v) more than SKEW times N⁺(u): the binary-search branch runs
        lp, li = cpu_graph.orient(A.indptr, A.indices, False)[:2]
        length = np.diff(lp)
        assert length[1] > cpu_graph.SKEW * length[0] and 1 in li[lp[0] : lp[1]]


def test_ktruss_of_hub_graphs_matches_networkx():
    """Peeling a hub's edges intersects its long list with short ones (galloping), many edges a round."""
    A, G = hub_graph(0)
    assert check_trusses(sp.csr_matrix(A), G) > 3


@st.composite
def skewed_graphs(draw):
    """A graph with a star, a clique and isolated vertices, its adjacency (int32 or int64 indices), and
    self-loops to add to it."""
    n = draw(st.integers(0, 30))
    G = nx.Graph()
    G.add_nodes_from(range(n))
    if n >= 2:
        pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1])
        G.add_edges_from(draw(st.lists(pairs, max_size=2 * n)))
        hub = draw(st.integers(0, n - 1))
        leaves = draw(st.lists(st.integers(0, n - 1), max_size=n, unique=True))
        G.add_edges_from((hub, v) for v in leaves if v != hub)
        members = draw(st.lists(st.integers(0, n - 1), max_size=8, unique=True))
        G.add_edges_from((u, v) for i, u in enumerate(members) for v in members[i + 1 :])
    A, _ = adjacency(G, draw(st.sampled_from([np.int32, np.int64])))  # nodes 0..n-1 in order
    loops = draw(st.lists(st.integers(0, n - 1), max_size=3, unique=True)) if n else []
    return G, A, loops


def graphblas_support(A) -> dict:
    """``C⟨A⟩ = A plus.pair Aᵀ``: the triangles through each edge (no entry where there are none)."""
    M = gb.io.from_scipy_sparse(sp.csr_matrix((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape))
    C = gb.Matrix(gb.dtypes.INT64, *A.shape)
    C(M.S) << M.mxm(M.T, gb.semiring.plus_pair)
    rows, cols, vals = C.to_coo()
    return {(int(u), int(v)): int(c) for u, v, c in zip(rows, cols, vals)}


@settings(max_examples=25)
@given(skewed_graphs())
def test_skewed_graphs_match_networkx_and_graphblas(case):
    """Both orders, per total, vertex and edge, the truss numbers and every k-truss; self-loops refused as
    documented, and removed by ``normalize=True``."""
    G, A, loops = case
    tri = nx.triangles(G)
    for order in ("degree", "id"):
        assert graph.triangle_count(A, order=order, backend="cpu") == sum(tri.values()) // 3
        np.testing.assert_array_equal(
            graph.triangle_count(A, per="vertex", order=order, backend="cpu"), [tri[u] for u in range(len(G))]
        )
        per_edge = edge_values(graph.triangle_count(A, per="edge", order=order, backend="cpu"))
        assert set(per_edge) == {(u, v) for u in G for v in G[u]}
        assert {e: c for e, c in per_edge.items() if c} == graphblas_support(A)
    check_trusses(A, G)
    if loops:
        L = sp.csr_matrix(A + sp.csr_matrix((np.ones(len(loops)), (loops, loops)), shape=A.shape))
        with pytest.raises(ValueError, match="self-loops"):
            graph.triangle_count(L, backend="cpu")
        with pytest.raises(ValueError, match="self-loops"):
            graph.truss_decomposition(L, backend="cpu")
        assert graph.triangle_count(L, normalize=True, backend="cpu") == sum(tri.values()) // 3
        want = edge_values(graph.truss_decomposition(A, backend="cpu"))
        assert edge_values(graph.truss_decomposition(L, normalize=True, backend="cpu")) == want


def test_broken_symmetry_counts_every_entry():
    """The symmetry check looks up only the entries above the diagonal; a broken graph gets exact counts."""
    upper = sp.csr_matrix(np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]]))
    with pytest.raises(ValueError, match="A must be symmetric.*3 stored entries break it"):
        graph.triangle_count(upper, backend="cpu")
    W = sp.csr_matrix(np.array([[0, 1.0, 2.0], [1.0, 0, 1.0], [5.0, 1.0, 0]]))
    with pytest.raises(ValueError, match="weights must be symmetric.*2 stored entries"):
        graph.jaccard(W, weighted=True, backend="cpu")
    # as many entries below the diagonal as above, one of them the reverse of none
    skew = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [1, 0, 0]]))
    with pytest.raises(ValueError, match="A must be symmetric.*2 stored entries break it"):
        graph.triangle_count(skew, backend="cpu")
