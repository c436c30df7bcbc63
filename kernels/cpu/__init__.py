"""The CPU engine: numba kernels on host memory, on all cores, generated from the same op declarations.

Each kernel is a loop skeleton written once; a semiring's ops are rendered to
scalar Python (``semiring.expr.render_python``), compiled by numba and inlined
into the skeleton through a closure, so one skeleton serves every semiring and
the compiled code has no per-element call overhead.

One concern a module:

* ``jit`` — the numba options of every kernel, and the compile step of an op's
  expression (``compile_scalar``);
* ``pairwise`` — the semiring kernels: inverted (intersection, dense result),
  dense (union, dense result) and masked (a product at given ``Entries``), and
  ``compact_columns`` for column spaces much wider than the data;
* ``rowops`` — row norms, expansions, selection of entries, scatter;
* ``topk`` — the running per-row top-k selection of nearest neighbours;
* ``graph`` — the graph kernels (common neighbours, triangles, compaction);
* ``engine`` — ``CpuEngine`` and ``CpuGraphEngine``, the implementations of
  ``semiring.engine.PairwiseEngine`` and ``GraphEngine`` made of the above.

``ENGINE`` and ``GRAPH_ENGINE`` are the instances ``semiring.backend`` hands
out for ``backend="cpu"``.
"""

from __future__ import annotations

from .engine import CpuEngine, CpuGraphEngine

ENGINE = CpuEngine()
GRAPH_ENGINE = CpuGraphEngine()

__all__ = ["ENGINE", "GRAPH_ENGINE", "CpuEngine", "CpuGraphEngine"]
