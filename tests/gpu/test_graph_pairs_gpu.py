"""Pair results, two-hop similarities and networkx input of ``semiring.graph`` on the GPU engine (marked ``gpu``).

The CPU engine is the reference here: it is checked against networkx and a float64
brute force in ``tests/cpu/test_graph.py``.  Run on a GPU machine with
``python -m pytest -m gpu tests/gpu/test_graph_pairs_gpu.py``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from strategies import random_graph, weighted_graph

from semiring import graph


@pytest.mark.parametrize("measure", ["jaccard", "cosine"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("topk", [None, 25])
def test_two_hop_similarity_matches_cpu_engine(measure, weighted, topk):
    A = weighted_graph(400, 3000, seed=11) if weighted else random_graph(400, 2500, seed=11)
    want = graph.two_hop_similarity(A, measure, weighted=weighted, topk=topk, backend="cpu")
    got = graph.two_hop_similarity(A, measure, weighted=weighted, topk=topk, working_memory=0.05, backend="cuda")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("name", ["adamic_adar", "resource_allocation"])
def test_neighbour_weighted_indices_match_cpu_engine(name):
    """The neighbour-weighted rows (each common neighbour adds its own weight: the masked plus_min product over
    the graph reweighted on the device) at every edge, from CuPy input, and over two hops."""
    import cupy
    import cupyx.scipy.sparse as cusparse

    A = random_graph(400, 2500, seed=13)
    index = getattr(graph, f"{name}_index")
    want = index(A, backend="cpu")
    got = index(cusparse.csr_matrix(A), backend="cuda")
    assert isinstance(got.data, cupy.ndarray)
    np.testing.assert_allclose(got.get().toarray(), want.toarray(), rtol=1e-12)
    cpu = graph.two_hop_similarity(A, name, backend="cpu")
    for g, w in zip(graph.two_hop_similarity(A, name, working_memory=0.05, backend="cuda"), cpu):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_as_pairs_keeps_cupy_input_on_the_device():
    import cupy
    import cupyx.scipy.sparse as csp

    A = random_graph(200, 1200, seed=3).astype(np.float64)
    first, second, value = graph.jaccard(csp.csr_matrix(A), as_pairs=True)
    assert all(isinstance(a, cupy.ndarray) for a in (first, second, value))
    want = graph.jaccard(A, as_pairs=True, backend="cpu")
    for g, w in zip((first, second, value), want):
        np.testing.assert_allclose(g.get(), w, rtol=1e-14)


def test_networkx_graph_on_the_gpu():
    G = nx.les_miserables_graph()
    got = graph.jaccard(G, weighted=True, backend="cuda")  # networkx's shape: (u, v, p) triples, each edge once
    want = graph.jaccard(G, weighted=True, backend="cpu")
    assert [(u, v) for u, v, _ in got] == [(u, v) for u, v, _ in want]
    np.testing.assert_allclose([p for *_, p in got], [p for *_, p in want], rtol=1e-12)
    counts = graph.triangle_count(G, per="vertex", backend="cuda")
    assert counts == nx.triangles(G)


def test_as_frame_of_cupy_input():
    """A cuDF frame where cuDF is installed, else pandas; the CPU engine's values either way."""
    pandas = pytest.importorskip("pandas")
    import cupyx.scipy.sparse as csp

    A = random_graph(200, 1200, seed=3).astype(np.float64)
    got = graph.jaccard(csp.csr_matrix(A), as_frame=True)
    want = graph.jaccard(A, as_frame=True, backend="cpu")
    try:
        import cudf
    except ImportError:
        assert isinstance(got, pandas.DataFrame)
    else:
        assert isinstance(got, cudf.DataFrame)
        got = got.to_pandas()
    assert list(got.columns) == ["first", "second", "jaccard_coeff"]
    np.testing.assert_array_equal(got[["first", "second"]].to_numpy(), want[["first", "second"]].to_numpy())
    np.testing.assert_allclose(got["jaccard_coeff"], want["jaccard_coeff"], rtol=1e-14)
    counts = graph.triangle_count(csp.csr_matrix(A), per="vertex", as_frame=True)
    counts = counts if isinstance(counts, pandas.DataFrame) else counts.to_pandas()
    np.testing.assert_array_equal(counts["counts"], graph.triangle_count(A, per="vertex", backend="cpu"))
