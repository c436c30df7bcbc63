"""The CPU graph engine's triangle count in parts (what the Dask workers each count of a graph) against SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import check_parts_on_graphs

from semiring.kernels.cpu import GRAPH_ENGINE


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_triangle_parts_match_scipy(index):
    check_parts_on_graphs(GRAPH_ENGINE, index)
