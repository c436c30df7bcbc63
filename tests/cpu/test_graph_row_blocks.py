"""The CPU graph engine's row-block entries (what a Dask worker computes of a graph) against SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import check_row_blocks_on_graphs

from semiring.kernels.cpu import GRAPH_ENGINE


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_row_blocks_and_parts_match_scipy(index):
    check_row_blocks_on_graphs(GRAPH_ENGINE, index)
