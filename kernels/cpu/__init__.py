"""The CPU engine: numba kernels on host memory, on all cores, generated from the same op declarations.

Each kernel is a loop skeleton written once, in a template module; a
semiring's ops are rendered to scalar Python into a copy of the template
written to the kernel cache (``jit.generate``), so one skeleton serves every
semiring, the ops are inlined, and numba keeps the compiled code on disk for
the next process.

One concern a module:

* ``jit`` — the numba options of every kernel, the generated kernel modules
  (``generate``) and the fork guard;
* ``semiring_template``, ``expansion_template`` — the templates: one semiring's
  products; the kernels applying one expression;
* ``strategies`` — the table of strategies (when each applies, what it costs,
  how it runs) and the choice among them, made once a tile;
* ``pairwise`` — what the strategies run: row or inverted (intersection, dense
  result), margins, merge or scatter (union, dense result), a one-term measure
  expanded as it is written, masked (a product at given ``Entries``), sparse
  result, and ``compact_columns`` for column spaces much wider than the data;
* ``dense`` — dense blocks: BLAS for ``plus_times``, the tiled union kernel;
* ``elementwise`` — row norms, expansions, selection of entries, scatter;
* ``topk`` — the running per-row top-k selection of nearest neighbours;
* ``graph`` — the graph kernels (common neighbours, triangles, compaction);
* ``engine`` — ``CpuEngine`` and ``CpuGraphEngine``, the implementations of
  ``semiring.interfaces.PairwiseEngine`` and ``GraphEngine`` made of the above;
* ``threadpool`` — the engine's (numba's) threads under threadpoolctl,
  registered here where threadpoolctl is installed.

``ENGINE`` and ``GRAPH_ENGINE`` are the instances ``semiring.backend`` hands
out for ``backend="cpu"``.
"""

from __future__ import annotations

from . import threadpool
from .engine import CpuEngine, CpuGraphEngine

threadpool.register()  # threadpool_limits() limits the engine's threads as it does BLAS's

ENGINE = CpuEngine()
GRAPH_ENGINE = CpuGraphEngine()

__all__ = ["ENGINE", "GRAPH_ENGINE", "CpuEngine", "CpuGraphEngine"]
