"""The kernels radius queries and masked measures generate render and compile with NVRTC — no GPU needed.

A radius query thresholds each tile with a selection kernel (``neighbors.WITHIN``, a parameter ``radius``);
``pairwise_distances(mask=)`` expands a measure over one row of entries, X's norms renamed into the free term
slots (``measure.entry_layout``).  Both are expressions the built-in kernels do not render.
"""

from __future__ import annotations

import pytest

from semiring import expr as E
from semiring.distances.bound import entry_layout
from semiring.distances.neighbors import WITHIN
from semiring.distances.specs import DISTANCES
from semiring.kernels.cuda import compile as cuda_compile
from semiring.kernels.cuda import source as cuda_source

ARGS = tuple(cuda_source.EXPANSION_ARGS)


@pytest.mark.parametrize("similarity", [False, True])
@pytest.mark.parametrize("value_type, index_type", [("float32", "int32"), ("float64", "int64")])
def test_radius_selection_compiles(similarity, value_type, index_type):
    tree = E.parse(WITHIN[similarity], (*ARGS, "radius"))[0]
    kernel = cuda_source.render_expansion(tree, ("radius",), "within", value_type, True, index_type)
    assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize(
    "d", [d for d in DISTANCES if len(d.terms) + len(d.norms) <= 2 and d.norms], ids=lambda d: d.name
)
def test_entry_layout_expansion_compiles(d):
    """Measures with X norms: their expansion (and refinement test) over one row of entries."""
    rename = entry_layout(d)
    kernels = [cuda_source.render_expansion(E.substitute(d.expansion_tree, rename), d.param_names, d.name, "float64")]
    if d.refine:
        when = E.substitute(E.parse(d.refine.when, ARGS)[0], rename)
        kernels.append(cuda_source.render_expansion(when, (), f"{d.name}_when", "float64", True, "int32"))
    for kernel in kernels:
        assert len(cuda_compile.compile_cached(kernel)) > 0
