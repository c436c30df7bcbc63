"""The GPU engines: ``semiring.interfaces.PairwiseEngine`` and ``GraphEngine`` on NVRTC-compiled kernels run by CuPy.

:class:`CudaEngine` and :class:`CudaGraphEngine` are the entries: each public
call reads the settings (``$SEMIRING_GPU_STRATEGY``) once, through
:meth:`.planner.Settings.from_env`, and passes them down.  Nothing here imports
CuPy or the CUDA bindings until an engine runs.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np

from semiring import arrays
from semiring.interfaces import SCRATCH_BUDGET, Entries

from . import dense, elementwise, graph, launch, strategies, topk
from .launch import DeviceCSR
from .planner import Settings

# The bands of a sparse product when no budget is set (a direct engine call, outside the driver).
SPARSE_BAND_BYTES = 128 * 2**20


class CudaEngine:
    """Products of rows against rows, norms, expansions, selections and top-k on the GPU.

    Arrays stay on the device between steps; only ``to_host`` (and
    ``topk_finish``) copy back.  The methods are documented once, in
    ``semiring.interfaces.PairwiseEngine``.
    """

    name = "cuda"
    device_results = True  # results are CuPy arrays: CuPy callers get them without a host round trip
    expands_in_topk = True  # the selection kernel evaluates the measure as it reads the terms
    # Each column batch of an all-pairs call is a Y of its own (the split strategy's layout made for each); the
    # halved products pay for that: all-pairs 10-NN cosine of 300,000 rows on an H200, nytimes-like 4.05 s ->
    # 3.56 s, movielens-like 3.27 s -> 2.96 s (benchmarks/results/scale_h200_b2eb0b1_all_pairs_{off,on}.json).
    all_pairs_once = True

    def __repr__(self) -> str:
        return "CudaEngine()"

    def unavailable_reason(self) -> str | None:
        return launch.unavailable_reason()

    def threads(self, n_jobs: int | None) -> nullcontext:
        """Nothing to set: the GPU's threads are the kernels' own."""
        return nullcontext()

    def device_name(self) -> str:
        try:
            import cupy

            device = cupy.cuda.Device()
            props = cupy.cuda.runtime.getDeviceProperties(device.id)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            return f"{name}, {props['totalGlobalMem'] / 2**30:.0f} GiB, compute capability {device.compute_capability}"
        except Exception as exc:  # noqa: BLE001 - a description only; the engine reports real failures
            return f"GPU details unavailable: {exc}"

    def memory_limit_bytes(self) -> int | None:
        """Half of the GPU memory free now, counting the blocks CuPy's pool caches unused as free.

        Not by emptying the pool first: ``free_all_blocks`` synchronises the device (``cudaFree``), and the
        call's buffers then come from ``cudaMalloc`` again (about 1 ms of an EDGAR-like call on an H200).
        """
        import cupy

        return (cupy.cuda.Device().mem_info[0] + cupy.get_default_memory_pool().free_bytes()) // 2

    def to_device(self, A) -> DeviceCSR:
        return launch.to_device(A)

    def to_host(self, a, out=None) -> np.ndarray:
        return launch.to_host(a) if out is None else a.get(out=out)

    def empty(self, shape, dtype) -> Any:
        return launch.empty(shape, dtype)

    def csr_verdicts(self, A) -> dict[str, int] | None:
        """The check kernel's verdicts for CuPy CSR input; None for host input: NumPy's reductions check it."""
        return launch.csr_verdicts(A) if arrays.is_cupy(A) else None

    def accumulate_dtype(self, result_dtype) -> np.dtype:
        """The GPU accumulates in the result's type (float32 for float32 input)."""
        return np.dtype(result_dtype)

    def row_slice(self, A: DeviceCSR, r0: int, r1: int) -> DeviceCSR:
        return launch.row_slice(A, r0, r1)

    def entries_from_csr(self, M) -> Entries:
        return elementwise.entries_from_csr(M)

    def pairwise(self, X: DeviceCSR, Y: DeviceCSR, sr, dtype, mask: Entries | None = None) -> Any:
        return strategies.product(X, Y, sr, dtype, mask, Settings.from_env())

    def pairwise_expanded(self, X: DeviceCSR, Y: DeviceCSR, sr, dtype, expansion) -> tuple[Any, Entries | None]:
        """Planned once (``strategies.product_expanded``): expanded as the row-range kernel writes each entry,
        with the entries its refinement recomputes, where the plan is the row ranges; else the plan's product is
        expanded apart.  Never None."""
        return strategies.product_expanded(X, Y, sr, dtype, expansion, Settings.from_env())

    def pairwise_sparse(self, X: DeviceCSR, Y: DeviceCSR, sr, dtype) -> tuple[Any, Any, Any]:
        """Bands of X's rows as dense tiles within the call's scratch budget (``strategies.sparse_product``)."""
        budget = SCRATCH_BUDGET.get() or SPARSE_BAND_BYTES
        return strategies.sparse_product(X, Y, sr, dtype, budget, Settings.from_env())

    def row_norms(self, A: DeviceCSR, trees, dtype=np.float64, terms=()) -> list:
        return elementwise.row_norms(A, trees, dtype, terms)

    def row_shares(self, indptr, values, root: bool = False) -> Any:
        return elementwise.row_shares(indptr, values, root)

    def expand(self, tree, param_names, params, terms, xnorms, ynorms, ncols: int, out) -> Any:
        return elementwise.expand(tree, param_names, params, terms, xnorms, ynorms, ncols, out)

    def select(self, tree, param_names, params, terms, xnorms, ynorms, ncols: int, shape) -> Entries:
        return elementwise.select(tree, param_names, params, terms, xnorms, ynorms, ncols, shape)

    def scatter(self, out, entries: Entries, values) -> None:
        elementwise.scatter(out, entries, values)

    def topk_init(self, m: int, k: int, dtype) -> Any:
        return topk.topk_init(m, k, dtype)

    def topk_push(self, block, col0: int, self0: int, largest: bool, selection) -> None:
        topk.topk_push(block, col0, self0, largest, selection)

    def topk_finish(self, selection, largest: bool, dtype) -> tuple[np.ndarray, np.ndarray]:
        return topk.topk_finish(selection, largest, dtype)

    def topk_extra_bytes(self, k: int) -> int:
        return topk.topk_extra_bytes(k)

    def dense_block_bytes(self, X, Y, sr, dtype, rows: int, cols: int) -> int:
        """None on the host: what a tile densifies is device memory, within the call's device budget."""
        return 0

    def expanded_bytes_per_entry(self, X, Y, sr, dtype, tree) -> int | None:
        """None: a measure's own count (its terms in the result's type, the accumulation type here)."""
        return None

    def transposed_columns(self, a, c0: int, c1: int):
        return elementwise.transposed_columns(a, c0, c1)

    def mirror_into(self, target, source) -> None:
        target[...] = source.T  # CuPy's copy kernel (the tiling writes GPU tiles apart: no caller yet)

    def dense_expanded(self, X, Y, trees, sr, dtype, expansion, refine, symmetric: bool) -> tuple[Any, Any] | None:
        """CuPy arrays only, under the ``auto`` strategy (a forced one runs its own kernel, on CSR rows):
        cuBLAS's product, the rows' pass, the measure in place of the product (``dense.measure``)."""
        if Settings.from_env().strategy != "auto" or not (arrays.is_cupy(X) and arrays.is_cupy(Y)):
            return None
        if not (sr.add.kind == "plus" and sr.mult.kind == "times"):
            raise ValueError(f"the dense path multiplies by cuBLAS: plus_times only, got {sr!r}")
        return dense.measure(X, Y, trees, dtype, expansion, refine, symmetric)

    def dense_verdicts(self, findings) -> list[dict]:
        """One copy back for both matrices (``dense.verdicts``)."""
        return dense.verdicts(findings)


class CudaGraphEngine:
    """The graph measures on the GPU (:mod:`.graph`); methods documented in ``semiring.interfaces.GraphEngine``."""

    name = "cuda"

    def __repr__(self) -> str:
        return "CudaGraphEngine()"

    @property
    def xp(self):
        """CuPy, imported on first use (importing this package does not import it)."""
        try:
            import cupy
        except ImportError as exc:  # an AttributeError, so hasattr() and Protocol checks say False, not raise
            raise AttributeError(
                "CudaGraphEngine.xp: CuPy is not installed (pip install 'sparse-semirings[cuda]')"
            ) from exc
        return cupy

    def to_device(self, A) -> DeviceCSR:
        return graph.to_device(A)

    def to_host(self, a) -> np.ndarray:
        return graph.to_host(a)

    def nnz(self, G: DeviceCSR) -> int:
        return graph.nnz(G)

    def check_graph(self, G: DeviceCSR, weighted: bool) -> dict[str, int]:
        return graph.check_graph(G, weighted)

    def edge_rows(self, G: DeviceCSR) -> Any:
        return graph.edge_rows(G)

    def row_norm(self, G: DeviceCSR, tree) -> Any:
        return graph.row_norm(G, tree)

    def common_neighbor_counts(self, G: DeviceCSR) -> Any:
        return graph.common_neighbor_counts(G)

    def edge_measure(self, G: DeviceCSR, tree) -> Any:
        return graph.edge_measure(G, tree)

    def masked_product(self, G: DeviceCSR, P: DeviceCSR, sr) -> Any:
        return graph.masked_product(G, P, sr)

    def expand(self, tree, rows, cols, c, norms) -> Any:
        return graph.expand(tree, rows, cols, c, norms)

    def triangle_count_total(self, G: DeviceCSR, by_degree: bool, part=None) -> int:
        return graph.triangle_count_total(G, by_degree, part)

    def edge_triangles(self, G: DeviceCSR, by_degree: bool) -> Any:
        return graph.edge_triangles(G, by_degree)

    def vertex_triangles(self, G: DeviceCSR, by_degree: bool) -> Any:
        return graph.vertex_triangles(G, by_degree)

    def truss_numbers(self, G: DeviceCSR) -> Any:
        return graph.truss_numbers(G)

    def ktruss_keep(self, G: DeviceCSR, k: int) -> Any:
        return graph.ktruss_keep(G, k)

    def compact_graph(self, G: DeviceCSR, keep) -> tuple[Any, Any]:
        return graph.compact_graph(G, keep)
