"""The CPU engine's triangle count on skewed graphs, against networkx: hubs make the work per vertex uneven
(the chunks are cut by work) and, ordered by id, make out-lists of very unequal length (the galloping branch)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from semiring.distances import graph
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


@pytest.mark.parametrize("order", ["degree", "id"])
@pytest.mark.parametrize("seed", [0, 1])
def test_triangle_count_of_hub_graphs_matches_networkx(order, seed):
    A, G = hub_graph(seed)
    want = sum(nx.triangles(G).values()) // 3
    assert want > 0
    assert graph.triangle_count(sp.csr_matrix(A), order=order, backend="cpu") == want
    if order == "id":  # some edge u → v has N⁺(v) more than SKEW times N⁺(u): the galloping branch runs
        lp, li, _, _ = cpu_graph.orient(A.indptr, A.indices, False)
        length = np.diff(lp)
        assert length[1] > cpu_graph.SKEW * length[0] and 1 in li[lp[0] : lp[1]]
