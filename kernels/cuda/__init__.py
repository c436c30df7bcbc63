"""The GPU engine: CUDA C rendered from the specs, compiled with NVRTC, run through CuPy.

One concern a module:

* :mod:`.source`, :mod:`.coo_source`, :mod:`.topk_source`, :mod:`.graph_source`
  — rendering CUDA C (pairwise products, norms, expansions; the hybrid CSR + COO
  kernel; top-k selection; graph kernels): pure
  functions that import no GPU library, so CI renders and compiles every kernel
  without a GPU;
* :mod:`.compile` — NVRTC compilation and the compile cache (memory and disk,
  atomic writes, keyed by source, architecture, options and NVRTC's version);
* :mod:`.launch` — loading compiled kernels with CuPy and launching them,
  shared-memory opt-in, device queries, :class:`.launch.DeviceCSR` and moving
  data to and from the device;
* :mod:`.planner` — what the strategy choice reads: a product's facts, the
  cost model, its tuning constants and the measurements behind them; the
  engine settings (``$SEMIRING_GPU_STRATEGY``), read once per call;
* :mod:`.strategies` — the table of strategies (``STRATEGIES``: when each
  applies, when ``auto`` takes it, what it costs, how it runs), the choice
  made once a tile (``plan``), and the executors (margins, dense-gemm, ranges,
  split, inverted, hash, coo, merge, rowvec, rowvec-compact);
* :mod:`.elementwise` — row norms, expansions, entry selection, scattering;
* :mod:`.topk` — the running top-k selection of k-nearest neighbours;
* :mod:`.graph` — the graph measures' device work;
* :mod:`.engine` — :class:`CudaEngine` and :class:`CudaGraphEngine`, the
  ``semiring.interfaces`` interfaces, and the entry where settings are read.

``ENGINE`` and ``GRAPH_ENGINE`` are the engines ``semiring.backend`` resolves
``backend="cuda"`` to.  Importing this package imports neither CuPy nor the
CUDA bindings; they are imported when an engine runs.
"""

from .engine import CudaEngine, CudaGraphEngine

ENGINE = CudaEngine()
GRAPH_ENGINE = CudaGraphEngine()

__all__ = ["ENGINE", "GRAPH_ENGINE", "CudaEngine", "CudaGraphEngine"]
