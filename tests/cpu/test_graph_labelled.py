"""Graph results in the caller's terms (CPU engine): networkx input gives networkx's shapes keyed by its nodes,
checked against networkx's own functions; ``as_frame=True`` gives cuGraph's DataFrame columns."""

from __future__ import annotations

import math
import sys

import networkx as nx
import numpy as np
import pytest
from oracles import BUNDLED
from strategies import random_graph

from semiring import graph


def labelled_graphs():
    """networkx's bundled graphs (int and string labels), and one with shuffled, mixed labels and an isolate."""
    cases = {name: nx.Graph(make()) for name, make in BUNDLED.items()}
    G = nx.relabel_nodes(nx.karate_club_graph(), {i: (f"v{i}" if i % 3 else i * 10) for i in range(34)})
    G.add_node("alone")
    cases["mixed"] = G
    return cases


CASES = labelled_graphs()


def common(G, u, v) -> int:
    return sum(1 for _ in nx.common_neighbors(G, u, v))


def same_edge_keys(got: dict, G) -> None:
    """One key an edge, oriented as G.edges() gives it."""
    assert len(got) == G.number_of_edges()
    assert set(got) == set(G.edges())


@pytest.mark.parametrize("name", list(CASES))
def test_triangles_per_vertex_and_edge_as_networkx(name):
    G = CASES[name]
    assert graph.triangle_count(G, per="vertex", backend="cpu") == nx.triangles(G)
    per_edge = graph.triangle_count(G, per="edge", backend="cpu")
    same_edge_keys(per_edge, G)
    assert per_edge == {(u, v): common(G, u, v) for u, v in G.edges()}
    assert graph.common_neighbors(G, backend="cpu") == per_edge
    assert all(type(c) is int for c in per_edge.values())


@pytest.mark.parametrize("name", list(CASES))
def test_similarities_are_networkx_triples(name):
    G = CASES[name]
    want = {(u, v): p for u, v, p in nx.jaccard_coefficient(G, G.edges())}
    got = graph.jaccard(G, backend="cpu")
    assert len(got) == len(want) and {(u, v) for u, v, _ in got} == set(want)
    for u, v, p in got:
        assert p == pytest.approx(want[u, v], rel=1e-12)
    non_edges = list(nx.non_edges(G))[:40]
    got = graph.jaccard(G, pairs=non_edges, backend="cpu")
    assert [(u, v) for u, v, _ in got] == non_edges
    np.testing.assert_allclose([p for *_, p in got], [p for *_, p in nx.jaccard_coefficient(G, non_edges)])
    for u, v, p in graph.scan_similarity(G, backend="cpu"):
        assert p == pytest.approx((common(G, u, v) + 2) / math.sqrt((G.degree(u) + 1) * (G.degree(v) + 1)))
    for u, v, p in graph.cosine(G, backend="cpu"):
        assert p == pytest.approx(common(G, u, v) / math.sqrt(G.degree(u) * G.degree(v)))


@pytest.mark.parametrize("name", ["karate", "les_miserables", "mixed", "k6", "davis"])
def test_ktruss_is_networkxs_graph(name):
    G = CASES[name]
    for k in (3, 4, 5, 6):
        got, want = graph.ktruss(G, k, backend="cpu"), nx.k_truss(G, k)
        assert type(got) is type(want)
        assert set(got.nodes) == set(want.nodes)
        assert {frozenset(e) for e in got.edges} == {frozenset(e) for e in want.edges}
        assert dict(got.edges.items()) == {e: G.edges[e] for e in got.edges}  # the edges' attributes kept


@pytest.mark.parametrize("name", ["karate", "les_miserables", "mixed"])
def test_truss_numbers_keyed_by_edge(name):
    G = CASES[name]
    numbers = graph.truss_decomposition(G, backend="cpu")
    same_edge_keys(numbers, G)
    for k in range(3, max(numbers.values()) + 2):
        inside = {frozenset(e) for e in nx.k_truss(G, k).edges}
        assert inside == {frozenset(e) for e, t in numbers.items() if t >= k}


# --------------------------------------------------------------------------- as_frame


pandas = pytest.importorskip("pandas")


@pytest.mark.parametrize("name", ["jaccard", "sorensen", "overlap", "cosine"])
def test_frames_have_cugraphs_columns(name):
    A = random_graph(40, 150, seed=5)
    measure = getattr(graph, name)
    df = measure(A, as_frame=True, backend="cpu")
    assert isinstance(df, pandas.DataFrame) and list(df.columns) == ["first", "second", f"{name}_coeff"]
    first, second, value = measure(A, as_pairs=True, backend="cpu")
    np.testing.assert_array_equal(df["first"], first)
    np.testing.assert_array_equal(df["second"], second)
    np.testing.assert_array_equal(df[f"{name}_coeff"], value)
    pairs = np.array([[0, 5], [7, 2]])
    df = measure(A, pairs, as_frame=True, backend="cpu")
    np.testing.assert_array_equal(df[["first", "second"]].to_numpy(), pairs)
    np.testing.assert_array_equal(df[f"{name}_coeff"], measure(A, pairs, backend="cpu"))


def test_frames_of_a_networkx_graph_hold_labels():
    G = CASES["mixed"]
    df = graph.triangle_count(G, per="vertex", as_frame=True, backend="cpu")
    assert list(df.columns) == ["vertex", "counts"]
    assert dict(zip(df["vertex"], df["counts"])) == nx.triangles(G)
    df = graph.jaccard(G, as_frame=True, backend="cpu")
    assert list(zip(df["first"], df["second"], df["jaccard_coeff"])) == graph.jaccard(G, backend="cpu")
    df = graph.triangle_count(G, per="edge", as_frame=True, backend="cpu")
    assert list(df.columns) == ["first", "second", "counts"]
    assert dict(zip(zip(df["first"], df["second"]), df["counts"])) == graph.triangle_count(G, per="edge", backend="cpu")
    df = graph.ktruss(G, 4, as_frame=True, backend="cpu")
    assert list(df.columns) == ["first", "second", "weight"]
    assert {frozenset(e) for e in zip(df["first"], df["second"])} == {frozenset(e) for e in nx.k_truss(G, 4).edges}
    df = graph.truss_decomposition(G, as_frame=True, backend="cpu")
    assert dict(zip(zip(df["first"], df["second"]), df["truss"])) == graph.truss_decomposition(G, backend="cpu")
    df = graph.two_hop_similarity(G, "overlap", topk=5, as_frame=True, backend="cpu")
    first, second, value = graph.two_hop_similarity(G, "overlap", topk=5, backend="cpu")
    assert list(df.columns) == ["first", "second", "overlap_coeff"]
    assert list(df["first"]) == list(first) and list(df["second"]) == list(second)
    np.testing.assert_array_equal(df["overlap_coeff"], value)
    assert graph.triangle_count(G, as_frame=True, backend="cpu") == sum(nx.triangles(G).values()) // 3


def test_matrix_input_frames_hold_vertex_ids():
    A = random_graph(30, 100, seed=2)
    df = graph.triangle_count(A, per="vertex", as_frame=True, backend="cpu")
    np.testing.assert_array_equal(df["vertex"], np.arange(30))
    np.testing.assert_array_equal(df["counts"], graph.triangle_count(A, per="vertex", backend="cpu"))
    df = graph.common_neighbors(A, as_frame=True, backend="cpu")
    assert (df["first"] < df["second"]).all() and len(df) == A.nnz // 2
    S = graph.common_neighbors(A, backend="cpu")
    np.testing.assert_array_equal(df["counts"], [S[u, v] for u, v in zip(df["first"], df["second"])])


def test_forms_and_their_errors(monkeypatch):
    A = random_graph(10, 20, seed=1)
    with pytest.raises(ValueError, match="as_pairs=True and as_frame=True"):
        graph.jaccard(A, as_pairs=True, as_frame=True, backend="cpu")
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if not installed
    with pytest.raises(ImportError, match=r"as_frame=True needs pandas \(pip install pandas"):
        graph.jaccard(A, as_frame=True, backend="cpu")
    assert graph.jaccard(A, backend="cpu").nnz == A.nnz  # nothing else needs it


def test_dask_input_frames_and_the_forms_it_refuses():
    """On Dask's local scheduler (the cluster's form: tests/cpu/test_dask_graph.py): the frame of a Dask array
    is the single-machine frame; pairs as arrays, or pairs as a frame, have no Dask form."""
    da = pytest.importorskip("dask.array")
    pd = pytest.importorskip("pandas")
    B = random_graph(10, 20, seed=1)
    A = da.from_array(B.toarray(), chunks=5)
    want = graph.common_neighbors(B, as_frame=True, backend="cpu")
    pd.testing.assert_frame_equal(graph.common_neighbors(A, as_frame=True, backend="cpu"), want)
    with pytest.raises(NotImplementedError, match="as_pairs=True, and as_frame=True with pairs, are not available"):
        graph.jaccard(A, as_pairs=True, backend="cpu")
    with pytest.raises(NotImplementedError, match="as_frame=True gives the"):
        graph.jaccard(A, pairs=[(0, 1)], as_frame=True, backend="cpu")
