"""``semiring.graph`` on the GPU engine against networkx and the CPU engine (marked ``gpu``).

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_graph_gpu.py``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from oracles import BUNDLED, check_against_networkx, edge_values
from strategies import adjacency, graphs, random_graph, weighted_graph

from semiring import graph


@pytest.fixture(params=[("oriented", "probe"), ("oriented", "search"), ("direct", "probe")], ids="-".join)
def edges(request, monkeypatch):
    """Run a test under each way of counting per-edge common neighbours on the GPU, and each way of intersecting
    the oriented graph's lists."""
    from semiring.kernels.cuda import graph as cuda_graph

    edges, triangles = request.param
    monkeypatch.setenv(cuda_graph.EDGE_STRATEGY_ENV, edges)
    monkeypatch.setenv(cuda_graph.TRIANGLES_ENV, triangles)
    return request.param


@pytest.mark.parametrize("name", list(BUNDLED))
def test_bundled_graphs_match_networkx(name, edges):
    G = nx.Graph(BUNDLED[name]())
    check_against_networkx(G, *adjacency(G), backend="cuda")


@given(case=graphs())  # by keyword: hypothesis fills positional strategies from the right, past the fixture
@settings(max_examples=15)
def test_random_graphs_match_networkx(case, edges):
    G, A, nodes = case
    check_against_networkx(G, A, nodes, backend="cuda")


def same(f, A, **kw):
    """f on the GPU equals f on the CPU engine (exactly: counts, or one formula on the same counts)."""
    want, got = f(A, backend="cpu", **kw), f(A, backend="cuda", **kw)
    if sp.issparse(want):
        assert type(got) is type(want)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-14)
    else:
        np.testing.assert_array_equal(got, want)
    return got


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_skewed_graph_matches_cpu_engine(index, edges):
    A = random_graph(20000, 200000, seed=5, index=index)
    for order in ("degree", "id"):
        total = same(graph.triangle_count, A, order=order)
        assert total > 0
        assert int(same(graph.triangle_count, A, per="vertex", order=order).sum()) == 3 * total
        assert int(same(graph.triangle_count, A, per="edge", order=order).sum()) == 6 * total
    for f in (graph.common_neighbors, graph.jaccard, graph.sorensen, graph.overlap, graph.cosine):
        same(f, A)
    same(graph.scan_similarity, A)
    for k in (3, 4, 5):
        same(graph.ktruss, A, k=k)
    same(graph.truss_decomposition, A)


def test_cupy_input_stays_on_the_device(edges):
    import cupy
    import cupyx.scipy.sparse as csp

    A = random_graph(3000, 30000, seed=6)
    D = csp.csr_matrix(A)
    J = graph.jaccard(D)  # backend "auto": CuPy input runs on the GPU
    assert isinstance(J, csp.csr_matrix)
    np.testing.assert_allclose(J.get().toarray(), graph.jaccard(A, backend="cpu").toarray(), rtol=1e-14)
    assert graph.triangle_count(D) == graph.triangle_count(A, backend="cpu")
    v = graph.triangle_count(D, per="vertex")
    assert isinstance(v, cupy.ndarray)
    np.testing.assert_array_equal(v.get(), graph.triangle_count(A, per="vertex", backend="cpu"))
    T = graph.truss_decomposition(D)
    np.testing.assert_array_equal(T.get().toarray(), graph.truss_decomposition(A, backend="cpu").toarray())
    assert graph.triangle_count(D, backend="cpu") == graph.triangle_count(A, backend="cpu")


def test_pairs_and_weighted_measures_match_cpu_engine():
    A = weighted_graph(300, 4000, seed=7)
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, A.shape[0], (500, 2))
    for f in (graph.jaccard, graph.sorensen, graph.overlap, graph.cosine):
        for weighted in (False, True):
            want = f(A, pairs=pairs, weighted=weighted, backend="cpu")
            np.testing.assert_allclose(f(A, pairs=pairs, weighted=weighted, backend="cuda"), want, rtol=1e-12)
            W = f(A, weighted=weighted, backend="cuda")
            np.testing.assert_allclose(W.data, f(A, weighted=weighted, backend="cpu").data, rtol=1e-12)


def test_bad_input_is_refused_on_the_device():
    import cupyx.scipy.sparse as csp

    tri = np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0]], float)
    with pytest.raises(ValueError, match="self-loops.*1 stored entries"):
        graph.triangle_count(csp.csr_matrix(sp.csr_matrix(tri + np.diag([1.0, 0, 0]))))
    with pytest.raises(ValueError, match="must be symmetric.*3 stored entries"):
        graph.common_neighbors(csp.csr_matrix(sp.csr_matrix(np.triu(tri))))
    with pytest.raises(ValueError, match="A must be square"):
        graph.jaccard(csp.csr_matrix(sp.csr_matrix(np.ones((2, 3)))))
    weights = sp.csr_matrix(tri)
    weights.data[0] = 2.0  # A[0, 1] != A[1, 0]: the fingerprints differ, the exact check counts both entries
    with pytest.raises(ValueError, match="weights must be symmetric.*2 stored entries"):
        graph.jaccard(csp.csr_matrix(weights), weighted=True)
    assert graph.jaccard(csp.csr_matrix(weights)).nnz == 6  # the pattern is symmetric
    from semiring.kernels.cuda import GRAPH_ENGINE

    G = GRAPH_ENGINE.to_device(sp.csr_matrix(tri))
    G.indices[:2] = G.indices[:2][::-1].copy()  # row 0 stored as (2, 1): the device check finds it
    assert GRAPH_ENGINE.check_graph(G, False)["unsorted"] == 1
    assert graph.triangle_count(csp.csr_matrix(sp.csr_matrix(np.triu(tri))), normalize=True) == 1
    empty = csp.csr_matrix((5, 5), dtype=np.float64)
    assert graph.triangle_count(empty) == 0
    assert graph.truss_decomposition(empty).nnz == 0
    assert edge_values(graph.jaccard(sp.csr_matrix((4, 4)), backend="cuda")) == {}


def test_gpu_graph_engine_implements_the_interface():
    import cupy

    from semiring.interfaces import GraphEngine, missing_methods
    from semiring.kernels.cuda import GRAPH_ENGINE

    assert GRAPH_ENGINE.xp is cupy
    assert not missing_methods(GRAPH_ENGINE, GraphEngine) and isinstance(GRAPH_ENGINE, GraphEngine)


GRAPH_MAGNITUDES = (1e-300, 1e-170, 1e160, 1e300, 1.79e308 / 3.0)


def _at_magnitude(magnitude) -> sp.csr_matrix:
    """A weighted graph whose weights are near ``magnitude`` (up to 3x it), or (None) each edge of one of them."""
    S = sp.triu(weighted_graph(60, 600, seed=11), 1).tocsr()
    rng = np.random.default_rng(12)
    scale = rng.choice(GRAPH_MAGNITUDES, S.nnz) if magnitude is None else magnitude
    S.data = S.data / 3.0 * scale  # weighted_graph's weights lie in [0.1, 3)
    return sp.csr_matrix(S + S.T)


@pytest.mark.parametrize("magnitude", [*GRAPH_MAGNITUDES, None], ids=[*map(str, GRAPH_MAGNITUDES), "mixed"])
def test_weighted_similarities_at_extreme_weights_match_cpu_engine(magnitude):
    """Weights whose sums or squares leave float64's range (near 1e308; cosine's from 1e154 and below 1e-154)
    are rescaled by powers of two before the sums on the GPU too (``graph._summable``, CuPy arrays there): equal
    to the CPU engine's, which tests/cpu/test_hostile.py checks against exact rational sums; SciPy and CuPy in."""
    import cupyx.scipy.sparse as csp

    A = _at_magnitude(magnitude)
    pairs = np.random.default_rng(13).integers(0, A.shape[0], (300, 2))
    for f in (graph.jaccard, graph.sorensen, graph.overlap, graph.cosine):
        want = f(A, weighted=True, backend="cpu")
        want_pairs = f(A, pairs=pairs, weighted=True, backend="cpu")
        assert np.isfinite(want.data).all() and np.isfinite(want_pairs).all()
        for adjacency_in in (A, csp.csr_matrix(A)):
            got = f(adjacency_in, weighted=True, backend="cuda")
            got = got.get() if hasattr(got, "get") else got
            np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-12, atol=1e-290, err_msg=f.__name__)
            got_pairs = f(adjacency_in, pairs=pairs, weighted=True, backend="cuda")
            got_pairs = got_pairs.get() if hasattr(got_pairs, "get") else got_pairs
            np.testing.assert_allclose(got_pairs, want_pairs, rtol=1e-12, atol=1e-290, err_msg=f.__name__)
    first, second, value = graph.two_hop_similarity(A, "cosine", weighted=True, backend="cuda")
    want = graph.two_hop_similarity(A, "cosine", weighted=True, backend="cpu")
    np.testing.assert_array_equal(first, want[0])
    np.testing.assert_array_equal(second, want[1])
    np.testing.assert_allclose(value, want[2], rtol=1e-12, atol=1e-290)


def test_truss_peeling_matches_networkx_where_edges_of_a_triangle_go_together():
    """Overlapping cliques and random edges: rounds in which two or three edges of one triangle go at once (each
    surviving edge loses that triangle once) and hubs whose supports fall over many rounds; every k-truss and the
    truss numbers against networkx's k_truss."""
    from itertools import combinations

    rng = np.random.default_rng(11)
    G = nx.Graph()
    for _ in range(40):
        G.add_edges_from(combinations(rng.choice(150, size=int(rng.integers(3, 10)), replace=False).tolist(), 2))
    G.add_edges_from(rng.integers(0, 150, (400, 2)).tolist())
    G.remove_edges_from(nx.selfloop_edges(G))
    nodes = sorted(G)
    A = nx.to_scipy_sparse_array(G, nodelist=nodes, format="csr")
    truss = graph.truss_decomposition(A, backend="cuda").tocoo()
    numbers = {(nodes[i], nodes[j]): int(t) for i, j, t in zip(truss.row, truss.col, truss.data, strict=True)}
    for k in range(3, 12):
        want = {frozenset(e) for e in nx.k_truss(G, k).edges}
        kept = graph.ktruss(A, k, backend="cuda").tocoo()
        assert {frozenset((nodes[i], nodes[j])) for i, j in zip(kept.row, kept.col, strict=True)} == want, k
        assert {frozenset(e) for e, t in numbers.items() if t >= k} == want, k
