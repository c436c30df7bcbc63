"""The GPU graph engine's triangle count in parts of L's edges (what the Dask workers each count of a graph)
against SciPy (marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import check_parts_on_graphs


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_triangle_parts_match_scipy(index):
    from semiring.kernels.cuda import GRAPH_ENGINE

    check_parts_on_graphs(GRAPH_ENGINE, index)
