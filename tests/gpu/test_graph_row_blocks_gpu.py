"""The GPU graph engine's row-block entries (what a Dask worker computes of a graph) against SciPy (marked
``gpu``): the ``"entry"`` intersection over a row block, and the triangles of parts of L's edges."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import check_row_blocks_on_graphs


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_row_blocks_and_parts_match_scipy(index):
    from semiring.kernels.cuda import GRAPH_ENGINE

    check_row_blocks_on_graphs(GRAPH_ENGINE, index)
