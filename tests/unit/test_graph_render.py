"""Every graph kernel (``semiring.kernels.cuda.graph_source``) compiles with NVRTC for sm_90 — no GPU needed."""

from __future__ import annotations

import pytest

from semiring import expr as E
from semiring.graph import SIMILARITIES
from semiring.interfaces import GRAPH_EXPANSION_VARIABLES
from semiring.kernels.cuda import compile as cuda_compile
from semiring.kernels.cuda import graph_source as src

INDEX_TYPES = ["int32", "int64"]
COUNT = E.parse("c", GRAPH_EXPANSION_VARIABLES)[0]
# The expansions the graph engine renders: a count, each similarity's (rows may share one: adamic_adar's is c),
# and each neighbour weight (of the common neighbour's degree, applied to the graph's entries).
TREES = list(dict.fromkeys([COUNT] + [s.tree for s in SIMILARITIES.values()]))
WEIGHTS = list(dict.fromkeys(s.weight_tree for s in SIMILARITIES.values() if s.neighbour_weight is not None))


def kernels(index_type: str):
    yield src.render_check(index_type)
    yield src.render_check_exact(index_type)
    yield src.render_mirror(index_type)
    yield src.render_peel(index_type)
    for mode in ("orient", "keep"):
        for fill in (False, True):
            for group in ("rows", "long"):
                yield src.render_compact(mode, index_type, fill, group)
    for mode in ("total", "edge", "vertex"):
        yield src.render_intersect(mode, index_type)
    yield src.render_sort_rows(index_type, "warp")
    yield src.render_sort_rows(index_type, "block", src.RANK_ROWS_BLOCK)
    for mode in src.PROBE_MODES:  # a warp's table, and a block's as large as Hopper's shared memory holds
        yield src.render_probe(mode, index_type, "warp")
        yield src.render_probe(mode, index_type, "block", 8192)
    for tree in TREES:
        yield src.render_intersect("measure", index_type, tree)
        yield src.render_mirror(index_type, tree)
        yield src.render_expand(tree, index_type)
    for tree in WEIGHTS:
        yield src.render_expand(tree, index_type)


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_every_graph_kernel_compiles(index_type):
    names = set()
    for kernel in kernels(index_type):
        assert f'extern "C" __global__ void {kernel.name}(' in kernel.source or f") {kernel.name}(" in kernel.source
        assert len(cuda_compile.compile_cached(kernel)) > 0, kernel.name
        names.add(kernel.name)
    assert WEIGHTS and len(names) == 17 + 2 * len(src.PROBE_MODES) + 3 * len(TREES) + len(
        WEIGHTS
    )  # every kernel has its own name


def test_bad_modes_are_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        src.render_intersect("wedges")
    with pytest.raises(ValueError, match="mode='measure' and only then"):
        src.render_intersect("measure")
    with pytest.raises(ValueError, match="mode must be 'orient' or 'keep'"):
        src.render_compact("sort")
    with pytest.raises(ValueError, match="group must be 'rows' or 'long'"):
        src.render_compact("orient", group="warp")
    with pytest.raises(ValueError, match="mode must be one of"):
        src.render_probe("measure")
    with pytest.raises(ValueError, match="group must be one of"):
        src.render_probe("total", group="grid")
    with pytest.raises(ValueError, match="slots must be a power of two"):
        src.render_probe("total", group="block", slots=1000)
    with pytest.raises(ValueError, match="group must be 'warp' or 'block'"):
        src.render_sort_rows("int32", "grid")
    with pytest.raises(ValueError, match="slots must be a power of two from 32"):
        src.render_sort_rows("int32", "block", 2 * src.RANK_ROWS_BLOCK)


def test_measure_renders_its_expression():
    kernel = src.render_intersect("measure", "int64", SIMILARITIES["jaccard"].tree)
    assert "typedef long long I;" in kernel.source
    assert "(c / ((nu + nv) - c))" in kernel.source


def test_auto_probes_large_graphs_in_the_degree_order(monkeypatch):
    """``SEMIRING_GRAPH_TRIANGLES=auto``: the probe from PROBE_MIN_ENTRIES stored entries in the degree order, the
    search below it and in the id order (a hub's out-list there is as long as its degree); a forced method
    holds everywhere."""
    from types import SimpleNamespace

    from semiring.kernels.cuda import graph as cuda_graph

    def graph(entries):
        return SimpleNamespace(indices=SimpleNamespace(size=entries))

    big, small = graph(cuda_graph.PROBE_MIN_ENTRIES), graph(cuda_graph.PROBE_MIN_ENTRIES - 1)
    monkeypatch.delenv(cuda_graph.TRIANGLES_ENV, raising=False)
    assert cuda_graph.triangle_method(big, True) == "probe"
    assert cuda_graph.triangle_method(small, True) == "search"
    assert cuda_graph.triangle_method(big, False) == "search"
    for forced in ("probe", "search"):
        monkeypatch.setenv(cuda_graph.TRIANGLES_ENV, forced)
        assert {cuda_graph.triangle_method(g, d) for g in (big, small) for d in (True, False)} == {forced}
