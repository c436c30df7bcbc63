"""``semiring.graph`` on the CPU engine against networkx and python-graphblas.

Oracles: networkx (``triangles``, ``jaccard_coefficient``, ``common_neighbors``,
``k_truss``) on its bundled graphs and on hypothesis random graphs, plain
Python sets for the other similarities and the weighted forms, and
python-graphblas's masked ``plus_pair`` (``C⟨L⟩ = L plus.pair Uᵀ`` for
triangles, ``C⟨S⟩ = S plus.pair Sᵀ`` for the k-truss loop).
"""

from __future__ import annotations

import graphblas as gb
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import BUNDLED, check_against_networkx, edge_values, set_similarity
from strategies import adjacency, graphs, random_graph, weighted_graph

from semiring import graph


@pytest.mark.parametrize("name", list(BUNDLED))
def test_bundled_graphs_match_networkx(name):
    G = nx.Graph(BUNDLED[name]())
    A, nodes = adjacency(G)
    check_against_networkx(G, A, nodes)


@given(graphs())
def test_random_graphs_match_networkx(case):
    G, A, nodes = case
    check_against_networkx(G, A, nodes)


def test_result_forms_follow_the_input():
    G = nx.karate_club_graph()
    A, _ = adjacency(G, np.int64)
    assert isinstance(graph.jaccard(A, backend="cpu"), sp.csr_matrix)
    assert isinstance(graph.jaccard(sp.csr_array(A), backend="cpu"), sp.csr_array)
    J = graph.common_neighbors(A, backend="cpu")
    assert J.dtype == np.int64 and J.indices.dtype == np.int64
    np.testing.assert_array_equal(J.indices, A.indices)


# --------------------------------------------------------------------------- python-graphblas oracles


def gb_matrix(A) -> gb.Matrix:
    return gb.io.from_scipy_sparse(sp.csr_matrix(A, dtype=np.float64))


def gb_triangles(A) -> int:
    """``C⟨L⟩ = L plus.pair Uᵀ`` (U = Lᵀ, so Uᵀ = L): Σ C is the triangle count."""
    L = gb.select.tril(gb_matrix(A), -1)
    C = gb.Matrix(gb.dtypes.INT64, *L.shape)
    C(L.S) << L.mxm(L, gb.semiring.plus_pair)
    return int(C.reduce_scalar().value or 0)


def gb_ktruss(A, k: int) -> set:
    """The k-truss loop: supports ``C⟨S⟩ = S plus.pair Sᵀ``, keep those ≥ k − 2, until stable (k ≥ 3)."""
    S = gb_matrix(A)
    while True:
        C = gb.Matrix(gb.dtypes.INT64, *S.shape)
        C(S.S) << S.mxm(S.T, gb.semiring.plus_pair)
        kept = C.select(">=", k - 2).new()
        if kept.nvals == S.nvals:
            break
        S = kept
    rows, cols, _ = S.to_coo()
    return set(zip(rows.tolist(), cols.tolist()))


def gb_common_neighbors(A) -> dict:
    M = gb_matrix(A)
    C = gb.Matrix(gb.dtypes.INT64, *M.shape)
    C(M.S) << M.mxm(M.T, gb.semiring.plus_pair)
    rows, cols, vals = C.to_coo()
    return {(int(u), int(v)): int(c) for u, v, c in zip(rows, cols, vals)}


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_triangles_and_common_neighbors_match_graphblas(index):
    A = random_graph(3000, 30000, seed=1, index=index)
    total = gb_triangles(A)
    assert total > 0
    assert graph.triangle_count(A, backend="cpu") == total
    assert graph.triangle_count(A, order="id", backend="cpu") == total
    assert int(graph.triangle_count(A, per="vertex", backend="cpu").sum()) == 3 * total
    want = gb_common_neighbors(A)
    got = edge_values(graph.common_neighbors(A, backend="cpu"))
    assert {e: c for e, c in got.items() if c} == want
    assert sum(got.values()) == 6 * total


@pytest.mark.parametrize("k", [3, 4, 5, 6])
def test_ktruss_matches_graphblas_loop(k):
    A = random_graph(400, 6000, seed=2)
    want = gb_ktruss(A, k)
    assert set(edge_values(graph.ktruss(A, k, backend="cpu"))) == want
    truss = edge_values(graph.truss_decomposition(A, backend="cpu"))
    assert {e for e, t in truss.items() if t >= k} == want


# --------------------------------------------------------------------------- the primitive route


@given(graphs(max_n=16), st.data())
@settings(max_examples=20)
def test_pairs_use_the_masked_primitive_and_agree_with_sets(case, data):
    G, A, nodes = case
    n = len(nodes)
    if n == 0:
        assert graph.jaccard(A, pairs=np.zeros((0, 2), int), backend="cpu").shape == (0,)
        return
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20))
    N = {i: set(G[nodes[i]]) for i in range(n)}
    for name in ("jaccard", "sorensen", "overlap", "cosine"):
        got = getattr(graph, name)(A, pairs=pairs, backend="cpu")
        assert got.shape == (len(pairs),)
        want = [set_similarity(name, N[u], N[v]) for u, v in pairs]
        np.testing.assert_allclose(got, want, rtol=1e-12)
        # the specialised edge kernel and the masked primitive at the edges agree
        E = edge_values(getattr(graph, name)(A, backend="cpu"))
        if E:
            edges = list(E)
            np.testing.assert_allclose(getattr(graph, name)(A, pairs=edges, backend="cpu"), list(E.values()))


def test_weighted_similarities_sum_weights():
    A = weighted_graph(60, 600, seed=3)
    D = A.toarray()
    for name in ("jaccard", "sorensen", "overlap", "cosine"):
        got = edge_values(getattr(graph, name)(A, weighted=True, backend="cpu"))
        assert set(got) == set(edge_values(A))
        for (u, v), value in got.items():
            x, y = D[u], D[v]
            mins, su, sv = np.minimum(x, y).sum(), x.sum(), y.sum()
            want = {
                "jaccard": mins / np.maximum(x, y).sum(),
                "sorensen": 2 * mins / (su + sv),
                "overlap": mins / min(su, sv),
                "cosine": x @ y / np.sqrt((x @ x) * (y @ y)),
            }[name]
            assert value == pytest.approx(want, rel=1e-12, abs=1e-15)
    # unit weights: the weighted forms are the counted ones
    B = A.copy()
    B.data[:] = 1.0
    np.testing.assert_allclose(
        graph.jaccard(B, weighted=True, backend="cpu").data, graph.jaccard(B, backend="cpu").data, rtol=1e-12
    )
    pairs = [(0, 1), (5, 7), (3, 3)]
    got = graph.jaccard(A, pairs=pairs, weighted=True, backend="cpu")
    want = [np.minimum(D[u], D[v]).sum() / max(np.maximum(D[u], D[v]).sum(), 1e-300) for u, v in pairs]
    np.testing.assert_allclose(got, want, rtol=1e-12)


# --------------------------------------------------------------------------- input rules


def test_empty_graphs_and_isolated_vertices():
    for n in (0, 1, 5):
        A = sp.csr_matrix((n, n))
        assert graph.triangle_count(A, backend="cpu") == 0
        assert graph.triangle_count(A, per="vertex", backend="cpu").shape == (n,)
        for f in (graph.jaccard, graph.common_neighbors, graph.truss_decomposition, graph.scan_similarity):
            R = f(A, backend="cpu")
            assert R.shape == (n, n) and R.nnz == 0
        assert graph.ktruss(A, 3, backend="cpu").nnz == 0
        assert graph.jaccard(A, pairs=[(i, i) for i in range(n)], backend="cpu").tolist() == [0.0] * n


def test_bad_input_is_refused_with_the_rule():
    tri = sp.csr_matrix(np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0]], float))
    with pytest.raises(ValueError, match="A must be square"):
        graph.jaccard(sp.csr_matrix((3, 4)), backend="cpu")
    loop = sp.csr_matrix(tri.toarray() + np.diag([1.0, 0, 0]))
    with pytest.raises(ValueError, match="self-loops.*1 stored entries.*normalize=True"):
        graph.triangle_count(loop, backend="cpu")
    directed = sp.csr_matrix(np.triu(tri.toarray()))
    with pytest.raises(ValueError, match="must be symmetric.*3 stored entries"):
        graph.common_neighbors(directed, backend="cpu")
    weights = tri.copy()
    weights.data[0] = 2.0  # A[0, 1]
    with pytest.raises(ValueError, match="weights must be symmetric"):
        graph.jaccard(weights, weighted=True, backend="cpu")
    assert graph.jaccard(weights, backend="cpu").nnz == 6  # unweighted measures read the pattern only
    negative = tri.copy()
    negative.data[:] = -1.0
    with pytest.raises(ValueError, match="negative weights"):
        graph.cosine(negative, weighted=True, backend="cpu")
    with pytest.raises(ValueError, match="per must be one of"):
        graph.triangle_count(tri, per="node", backend="cpu")
    with pytest.raises(ValueError, match="order must be one of"):
        graph.triangle_count(tri, order="random", backend="cpu")
    with pytest.raises(ValueError, match="k must be >= 2"):
        graph.ktruss(tri, 1, backend="cpu")
    with pytest.raises(TypeError, match="k must be an integer"):
        graph.ktruss(tri, 3.5, backend="cpu")
    with pytest.raises(ValueError, match="pairs must hold vertex ids in"):
        graph.jaccard(tri, pairs=[(0, 3)], backend="cpu")
    with pytest.raises(ValueError, match="k × 2"):
        graph.jaccard(tri, pairs=[0, 1, 2], backend="cpu")
    with pytest.raises(ValueError, match="backend must be one of"):
        graph.jaccard(tri, backend="gpu")


def test_normalize_removes_loops_and_symmetrises():
    D = np.array([[1, 2, 0, 0], [0, 0, 1, 0], [3, 0, 0, 1], [0, 0, 0, 0]], float)
    A = sp.csr_matrix(D)
    G = nx.Graph([(0, 1), (1, 2), (0, 2), (2, 3)])
    assert graph.triangle_count(A, normalize=True, backend="cpu") == 1
    jac = edge_values(graph.jaccard(A, normalize=True, backend="cpu"))
    for u, v, p in nx.jaccard_coefficient(G, list(jac)):
        assert jac[u, v] == pytest.approx(p)
    W = graph.cosine(A, weighted=True, normalize=True, backend="cpu")  # weights: the larger direction
    S = np.array([[0, 2, 3, 0], [2, 0, 1, 0], [3, 1, 0, 1], [0, 0, 1, 0]], float)
    assert W[0, 1] == pytest.approx(S[0] @ S[1] / np.sqrt(S[0] @ S[0] * (S[1] @ S[1])))


# --------------------------------------------------------------------------- networkx graphs, pair results, two hops


def test_networkx_graph_in_matches_networkx_own_measures():
    G = nx.les_miserables_graph()  # string node labels, a "weight" edge attribute
    nodes = list(G)
    ebunch = [(nodes[0], nodes[5]), ("Valjean", "Javert"), ("Myriel", "Valjean"), ("Cosette", "Cosette")]
    expected = list(nx.jaccard_coefficient(G, ebunch))
    got = graph.jaccard(G, pairs=ebunch, backend="cpu")  # networkx's shape: (u, v, p) triples, in ebunch order
    assert [(u, v) for u, v, _ in got] == ebunch
    np.testing.assert_allclose([p for *_, p in got], [p for *_, p in expected], rtol=1e-12)
    first, second, value = graph.jaccard(G, pairs=ebunch, as_pairs=True, backend="cpu")
    assert list(zip(first, second)) == ebunch
    np.testing.assert_allclose(value, [p for *_, p in expected])
    at_edges = graph.jaccard(G, backend="cpu")  # each edge once, as G.edges() orients it
    want = {(u, v): p for u, v, p in nx.jaccard_coefficient(G, G.edges())}
    assert {(u, v) for u, v, _ in at_edges} == set(want)
    for u, v, p in at_edges:
        assert p == pytest.approx(want[u, v], rel=1e-12)
    assert graph.triangle_count(G, backend="cpu") == sum(nx.triangles(G).values()) // 3
    assert graph.jaccard(nx.Graph(), backend="cpu") == []  # networkx itself refuses its matrix
    with pytest.raises(ValueError, match="node 'nobody' is not in the graph"):
        graph.jaccard(G, pairs=[("Valjean", "nobody")], backend="cpu")


def test_networkx_weights_come_from_the_edge_attribute():
    G = nx.les_miserables_graph()
    G.add_edge("Valjean", "Gervais", strength=2.0)  # another attribute: networkx reads a missing weight as 1

    def weighted_jaccard(u, v, attr):
        w = {x: {k: d.get(attr, 1.0) if attr else 1.0 for k, d in G[x].items()} for x in (u, v)}
        keys = set(w[u]) | set(w[v])
        low = sum(min(w[u].get(k, 0.0), w[v].get(k, 0.0)) for k in keys)
        return low / sum(max(w[u].get(k, 0.0), w[v].get(k, 0.0)) for k in keys)

    ebunch = [("Valjean", "Javert"), ("Gervais", "Myriel"), ("Fantine", "Cosette")]
    for attr in ("weight", "strength", None):
        got = [p for *_, p in graph.jaccard(G, pairs=ebunch, weighted=True, weight=attr, backend="cpu")]
        np.testing.assert_allclose(got, [weighted_jaccard(u, v, attr) for u, v in ebunch], rtol=1e-12)


def test_directed_networkx_graph_needs_normalize():
    D = nx.DiGraph([(0, 1), (1, 2), (0, 2)])
    with pytest.raises(ValueError, match="A must be symmetric.*normalize=True"):
        graph.jaccard(D, backend="cpu")
    assert graph.triangle_count(D, normalize=True, backend="cpu") == 1


@pytest.mark.parametrize("name", ["jaccard", "sorensen", "overlap", "cosine"])
@pytest.mark.parametrize("weighted", [False, True])
def test_as_pairs_equals_the_matrix_result(name, weighted):
    A = weighted_graph(30, 120, seed=3) if weighted else random_graph(30, 90, seed=3)
    measure = getattr(graph, name)
    M = measure(A, weighted=weighted, backend="cpu")
    first, second, value = measure(A, weighted=weighted, as_pairs=True, backend="cpu")
    assert np.all(first < second) and first.dtype == np.int64
    assert first.size == M.nnz // 2  # each undirected edge once
    rebuilt = sp.coo_matrix((value, (first, second)), shape=A.shape).toarray()
    np.testing.assert_array_equal(rebuilt + rebuilt.T, M.toarray())
    pairs = np.array([[3, 7], [0, 0], [7, 3], [29, 1]])
    first, second, value = measure(A, pairs, weighted=weighted, as_pairs=True, backend="cpu")
    np.testing.assert_array_equal(np.c_[first, second], pairs)
    np.testing.assert_array_equal(value, measure(A, pairs, weighted=weighted, backend="cpu"))


def two_hop_reference(A, name: str, weighted: bool) -> dict:
    """{(u, v): value} for u < v at distance ≤ 2, in float64 on the dense matrix (definitions of the module)."""
    W = A.toarray().astype(np.float64) if weighted else (A.toarray() != 0).astype(np.float64)
    if name == "cosine":
        c, d = W @ W.T, (W * W).sum(1)
    else:
        c, d = np.minimum(W[:, None, :], W[None, :, :]).sum(-1), W.sum(1)
    du, dv = d[:, None], d[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        den = {"jaccard": du + dv - c, "sorensen": (du + dv) / 2, "overlap": np.minimum(du, dv)}.get(name)
        den = np.sqrt(du * dv) if den is None else den
        value = np.where(den > 0, c / den, 0.0)
    P = (A.toarray() != 0).astype(int)
    near = (P + P @ P) > 0
    return {(u, v): value[u, v] for u, v in zip(*np.nonzero(np.triu(near, 1)))}


@pytest.mark.parametrize("name, weighted", [("jaccard", False), ("overlap", False), ("cosine", True)])
@pytest.mark.parametrize("working_memory", [None, 1e-4])  # 1e-4 MiB: one row a block
def test_two_hop_similarity_against_brute_force(name, weighted, working_memory):
    A = weighted_graph(40, 100, seed=5) if weighted else random_graph(40, 70, seed=5)
    want = two_hop_reference(A, name, weighted)
    kw = {"weighted": weighted, "working_memory": working_memory, "backend": "cpu"}
    first, second, value = graph.two_hop_similarity(A, name, **kw)
    assert list(zip(first.tolist(), second.tolist())) == sorted(want)
    np.testing.assert_allclose(value, [want[p] for p in sorted(want)], rtol=1e-12)
    best = sorted(want, key=lambda p: (-want[p], p))[:7]
    first, second, value = graph.two_hop_similarity(A, name, topk=7, **kw)
    np.testing.assert_allclose(value, [want[p] for p in best], rtol=1e-12)
    assert {p for p in zip(first.tolist(), second.tolist())} <= set(want) and np.all(np.diff(value) <= 0)


def test_two_hop_similarity_edge_cases():
    empty = sp.csr_matrix((0, 0))
    first, second, value = graph.two_hop_similarity(empty, topk=3, backend="cpu")
    assert first.size == second.size == value.size == 0
    G = nx.path_graph(["a", "b", "c"])
    first, second, value = graph.two_hop_similarity(G, backend="cpu")
    assert list(first) == ["a", "a", "b"] and list(second) == ["b", "c", "c"]
    np.testing.assert_array_equal(value, [0.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="measure must be one of"):
        graph.two_hop_similarity(empty, "scan", backend="cpu")
    with pytest.raises(ValueError, match="topk must be a positive integer"):
        graph.two_hop_similarity(empty, topk=0, backend="cpu")


@pytest.mark.parametrize("name", ["adamic_adar", "resource_allocation"])
def test_neighbour_weighted_indices_are_networkx(name):
    """At given pairs (networkx labels, any order, edges or not), at every edge, over two hops and on a SciPy
    matrix, the values are networkx's ``adamic_adar_index`` and ``resource_allocation_index``; neither has a
    weighted form."""
    ours, theirs = getattr(graph, f"{name}_index"), getattr(nx, f"{name}_index")
    G = nx.les_miserables_graph()
    nodes = list(G)
    ebunch = [(nodes[0], nodes[5]), ("Valjean", "Javert"), ("Myriel", "Valjean"), ("Cosette", "Gavroche")]
    got = ours(G, pairs=ebunch, backend="cpu")
    assert [(u, v) for u, v, _ in got] == ebunch
    np.testing.assert_allclose([p for *_, p in got], [p for *_, p in theirs(G, ebunch)], rtol=1e-12)
    want = {(u, v): p for u, v, p in theirs(G, G.edges())}
    at_edges = {(u, v): p for u, v, p in ours(G, backend="cpu")}
    assert at_edges.keys() == want.keys() and max(want.values()) > 0.5
    np.testing.assert_allclose([at_edges[e] for e in want], list(want.values()), rtol=1e-12)
    A = random_graph(40, 70, seed=5)
    H = nx.from_scipy_sparse_array(A)
    first, second, value = graph.two_hop_similarity(A, name, backend="cpu")
    pairs = list(zip(first.tolist(), second.tolist()))
    assert len(pairs) > 40
    np.testing.assert_allclose(value, [p for *_, p in theirs(H, pairs)], rtol=1e-12)
    with pytest.raises(ValueError, match=f"{name} has no weighted form"):
        graph.two_hop_similarity(A, name, weighted=True, backend="cpu")
