"""The GPU graph engine's row-block entries (what a Dask worker computes of a graph) against SciPy (marked
``gpu``): the ``"entry"`` intersection over a row block, and the triangles of parts of L's edges."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import check_row_blocks
from strategies import random_graph, star_graph


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_row_blocks_and_parts_match_scipy(index):
    from semiring.kernels.cuda import GRAPH_ENGINE

    for nparts in (1, 3, 7):
        check_row_blocks(random_graph(90, 400, seed=nparts, index=index), GRAPH_ENGINE, nparts)
    check_row_blocks(star_graph(300, 300, seed=1, index=index), GRAPH_ENGINE, 4)  # a hub among short lists
    check_row_blocks(random_graph(4, 6, seed=0, index=index), GRAPH_ENGINE, 9)  # more parts than vertices
