"""Pair results, two-hop similarities and networkx input of ``distances.graph`` on the GPU engine (marked ``gpu``).

The CPU engine is the reference here: it is checked against networkx and a float64
brute force in ``tests/cpu/test_graph.py``.  Run on a GPU machine with
``python -m pytest -m gpu tests/gpu/test_graph_pairs_gpu.py``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from strategies import random_graph, weighted_graph

from semiring.distances import graph


@pytest.mark.parametrize("measure", ["jaccard", "cosine"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("topk", [None, 25])
def test_two_hop_similarity_matches_cpu_engine(measure, weighted, topk):
    A = weighted_graph(400, 3000, seed=11) if weighted else random_graph(400, 2500, seed=11)
    want = graph.two_hop_similarity(A, measure, weighted=weighted, topk=topk, backend="cpu")
    got = graph.two_hop_similarity(A, measure, weighted=weighted, topk=topk, working_memory=0.05, backend="cuda")
    for g, w in zip(got, want):
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
    J = graph.jaccard(G, weighted=True, backend="cuda")
    assert isinstance(J, sp.csr_array)
    np.testing.assert_allclose(J.toarray(), graph.jaccard(G, weighted=True, backend="cpu").toarray(), rtol=1e-12)
