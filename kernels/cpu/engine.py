"""The CPU engines: ``semiring.interfaces.PairwiseEngine`` and ``GraphEngine`` on host memory.

On the CPU "the device" is host memory: a device matrix is the canonical SciPy
CSR matrix itself, device arrays are NumPy arrays, ``to_device`` and
``to_host`` are the identity.  The methods are documented once, on the
interfaces in ``semiring.interfaces``; the notes here say only what is particular
to the CPU.  The products are chosen in ``strategies`` and run by ``pairwise`` and ``dense``; the other kernels are
in ``elementwise``, ``topk`` and ``graph``.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba
import numpy as np
import scipy.sparse as sp

from semiring import arrays, validation
from semiring.interfaces import RESULT_BLOCK, Entries, LastDerived

from . import checks as _checks
from . import dense as _dense
from . import elementwise as _elementwise
from . import graph as _graph
from . import strategies as _strategies
from . import topk as _topk
from .jit import fork_guarded


def _one_index_type(X: sp.csr_matrix, Y: sp.csr_matrix) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """X and Y with the same index type: int64 for both where either has it (a block of rows SciPy sliced
    to int32 against int64 rows would otherwise compile every kernel for a third pair of types)."""
    types = {a.dtype for a in (X.indptr, X.indices, Y.indptr, Y.indices)}
    if len(types) == 1:
        return X, Y
    X64 = _with_index_type(X, np.int64)
    return X64, (X64 if Y is X else _with_index_type(Y, np.int64))  # Y is X stays so (the kernels share its work)


def _with_index_type(A: sp.csr_matrix, index_dtype) -> sp.csr_matrix:
    """A sharing its values, its index arrays in ``index_dtype`` (copied only where they are not)."""
    B = sp.csr_matrix(A.shape, dtype=A.dtype)
    B.data, B.indices, B.indptr = (
        A.data,
        A.indices.astype(index_dtype, copy=False),
        A.indptr.astype(index_dtype, copy=False),
    )
    B.has_canonical_format = validation.facts_of(A) is not None or A.has_canonical_format  # checked: canonical
    return validation.carry_facts(B, A)


def _csr_entries(M: sp.csr_matrix) -> Entries:
    """The stored entries of a CSR matrix in its CSR order, indexed in its index type."""
    rows = np.repeat(np.arange(M.shape[0], dtype=M.indices.dtype), np.diff(M.indptr))
    return Entries(rows, M.indices[: M.indptr[-1]])


@fork_guarded
class CpuEngine:
    """Products of rows against rows on all cores (numba); values accumulated in float64.

    >>> import numpy as np, scipy.sparse as sp, semiring
    >>> from semiring.kernels.cpu import ENGINE
    >>> X = ENGINE.to_device(sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])))
    >>> ENGINE.pairwise(X, X, semiring.plus_times, np.float64)
    array([[5., 0.],
           [0., 9.]])
    """

    name = "cpu"
    device_results = False  # results live in host memory (CuPy callers get a copy)
    expands_in_topk = False  # blocks are expanded first, in the result type
    all_pairs_once = True  # each pair's block once, pushed to both rows' selections

    def __repr__(self) -> str:
        return "CpuEngine()"

    def unavailable_reason(self) -> str | None:
        return None  # numba runs wherever the package imports

    @contextmanager
    def threads(self, n_jobs: int | None):
        """numba's threads, set for the calls inside (numba sets them per calling thread)."""
        if n_jobs is None:
            yield
            return
        most = numba.config.NUMBA_NUM_THREADS
        wanted = n_jobs if n_jobs > 0 else most + 1 + n_jobs
        before = numba.get_num_threads()
        numba.set_num_threads(max(1, min(most, wanted)))
        try:
            yield
        finally:
            numba.set_num_threads(before)

    def device_name(self) -> str:
        return f"the host's CPU, {numba.get_num_threads()} numba threads"

    def memory_limit_bytes(self) -> int | None:
        return None  # host memory: the caller's working-memory budget is the only limit

    def csr_verdicts(self, A) -> dict[str, int] | None:
        """Across threads (``checks``), from ``checks.VERDICTS_MIN_ENTRIES`` entries."""
        if A.indices.size < _checks.VERDICTS_MIN_ENTRIES:
            return None
        return _checks.csr_verdicts(A)

    def to_device(self, A) -> sp.csr_matrix:
        B = arrays.on_host(A)  # a CuPy caller's matrix, checked on the GPU, copied here once
        return B if B is A else validation.carry_facts(B, A)

    def to_host(self, a, out=None) -> np.ndarray:
        if out is None:
            return a
        out[...] = a
        return out

    def empty(self, shape, dtype) -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    def accumulate_dtype(self, result_dtype) -> np.dtype:
        """Float64 whatever the result type."""
        return np.dtype(np.float64)

    def row_slice(self, A, r0: int, r1: int) -> sp.csr_matrix:
        """Views of A's values and column indices, in A's index type (``semiring.validation.row_slice``)."""
        return validation.row_slice(A, r0, r1)

    def entries_from_csr(self, M) -> Entries:
        return _csr_entries(self.to_device(M))

    def pairwise(self, X, Y, sr, dtype, mask: Entries | None = None) -> np.ndarray:
        """The kernel ``strategies.plan`` chooses from the table of strategies (dense enough blocks as dense
        arrays, others by the sparse kernels)."""
        return _strategies.product(*_one_index_type(X, Y), sr, dtype, mask)

    def pairwise_expanded(self, X, Y, sr, dtype, expansion) -> tuple[np.ndarray, Entries | None]:
        """Planned once (``strategies.product_expanded``): the product kernel writes the expansion as it writes
        each entry where its strategy can; else the plan's product is expanded apart.  Never None.  Into
        ``RESULT_BLOCK`` where the driver set it (a view of the call's result)."""
        return _strategies.product_expanded(*_one_index_type(X, Y), sr, dtype, expansion, out=RESULT_BLOCK.get())

    def transposed_columns(self, a, c0: int, c1: int):
        return np.ascontiguousarray(a[:, c0:c1].T)

    def mirror_into(self, target, source) -> None:
        _elementwise.transposed_into(target, source)

    def dense_expanded(self, X, Y, trees, sr, dtype, expansion, refine, symmetric: bool) -> None:
        """None: dense host rows reach this engine as CSR, whose dense blocks take BLAS (``kernels.cpu.dense``)."""

    def dense_verdicts(self, findings) -> list[dict]:
        raise NotImplementedError("the CPU engine has no dense-rows path (dense_expanded gives None): pass CSR rows")

    def expanded_bytes_per_entry(self, X, Y, sr, dtype, tree) -> int | None:
        """The float32 BLAS path's lists of entries to recompute, where the whole block takes it
        (``strategies.expanded_bytes_per_entry``); None elsewhere: the measure's count."""
        return _strategies.expanded_bytes_per_entry(X, Y, sr, dtype, tree)

    def pairwise_sparse(self, X, Y, sr, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Only the pairs that share a stored column, as GraphBLAS ``mxm`` (``strategies.product_sparse``)."""
        return _strategies.product_sparse(*_one_index_type(X, Y), sr, dtype)

    def row_norms(self, A, trees, dtype, terms=()) -> list:
        """Each norm a pass of its own, float64 whatever ``dtype``; the terms an ``m × 1`` expansion of them."""
        norms = [_elementwise.row_norm(A, tree, dtype) for tree in trees]
        return _elementwise.row_terms(terms, norms, A.shape[1]) if terms else norms

    def row_shares(self, indptr, values, root: bool = False) -> np.ndarray:
        return _elementwise.row_shares(indptr, values, root)

    def expand(self, tree, param_names, params, terms, xnorms, ynorms, ncols: int, out) -> np.ndarray:
        return _elementwise.expand(tree, param_names, params, terms, xnorms, ynorms, ncols, out)

    def select(self, tree, param_names, params, terms, xnorms, ynorms, ncols: int, shape) -> Entries:
        """Row by row, int64 indices."""
        return _elementwise.select(tree, param_names, params, terms, xnorms, ynorms, ncols, shape)

    def scatter(self, out, entries: Entries, values) -> None:
        _elementwise.scatter(out, entries, values)

    def topk_init(self, m: int, k: int, dtype):
        """A pair of ``(m, k)`` heaps, float64 keys and int64 indices (see ``topk``)."""
        return _topk.topk_init(m, k, dtype)

    def topk_push(self, block, col0: int, self0: int, largest: bool, selection) -> None:
        _topk.topk_push(block, col0, self0, largest, selection)

    def topk_finish(self, selection, largest: bool, dtype) -> tuple[np.ndarray, np.ndarray]:
        return _topk.topk_finish(selection, largest, dtype)

    def topk_extra_bytes(self, k: int) -> int:
        """None: the heaps are m × k, pushed into in place."""
        return 0

    def dense_block_bytes(self, X, Y, sr, dtype, rows: int, cols: int) -> int:
        """The dense path's densified rows where the call's tiles take it (``dense.block_bytes``), else 0."""
        return _dense.block_bytes(X, Y, sr, dtype, rows, cols)


_ORIENTED = LastDerived()  # the oriented graph of the graph whose parts are being counted (Dask)


@fork_guarded
class CpuGraphEngine:
    """Graph measures on all cores (numba), on host CSR matrices ``G``.

    Triangles per edge and per vertex are enumerated once on the oriented graph, each
    counted at its three edges (one of them another thread's: an atomic add), and the
    truss numbers peel those supports, updating them as edges go.
    """

    name = "cpu"
    xp = np

    def __repr__(self) -> str:
        return "CpuGraphEngine()"

    def to_device(self, A) -> sp.csr_matrix:
        return arrays.on_host(A)  # a CuPy caller's matrix, checked on the GPU, copied here once

    def to_host(self, a) -> np.ndarray:
        return a

    def nnz(self, G) -> int:
        return int(G.indptr[-1])

    def check_graph(self, G, weighted: bool) -> dict[str, int]:
        """Canonical order is ensured by ``semiring.validation``, so ``"unsorted"`` is 0."""
        if G.nnz == 0:
            return {"self-loops": 0, "missing reverse": 0, "unequal reverse weight": 0, "unsorted": 0}
        loops, missing, unequal = _graph.check(G.indptr, G.indices, G.data, weighted)
        return {"self-loops": loops, "missing reverse": missing, "unequal reverse weight": unequal, "unsorted": 0}

    def edge_rows(self, G) -> np.ndarray:
        return np.repeat(np.arange(G.shape[0], dtype=G.indices.dtype), np.diff(G.indptr))

    def row_norm(self, G, tree) -> np.ndarray:
        return _elementwise.row_norm(G, tree)

    def common_neighbor_counts(self, G) -> np.ndarray:
        """The triangles through each edge (``edge_triangles``, degree order): each counted once."""
        return _graph.edge_support(G.indptr, G.indices, True)

    def edge_measure(self, G, tree) -> np.ndarray:
        return _graph.expand(
            tree, self.edge_rows(G), G.indices[: G.indptr[-1]], self.common_neighbor_counts(G), np.diff(G.indptr)
        )

    def masked_product(self, G, P, sr) -> np.ndarray:
        """The semiring primitive at P's entries (P a host CSR pattern): the pairwise masked kernel."""
        return _strategies.product(G, G, sr, np.float64, mask=_csr_entries(P))

    def expand(self, tree, rows, cols, c, norms) -> np.ndarray:
        return _graph.expand(tree, rows, cols, c, norms)

    def triangle_count_total(self, G, by_degree: bool, part: tuple[int, int] | None = None) -> int:
        """The parts of one graph come in turn (the Dask path): its oriented graph is made once for them."""
        if part is None:
            L = _graph.orient(G.indptr, G.indices, by_degree)
        else:
            L = _ORIENTED.get(G, by_degree, lambda: _graph.orient(G.indptr, G.indices, by_degree))
        return _graph.triangle_total(L.lp, L.li, part) if L.li.size else 0

    def edge_triangles(self, G, by_degree: bool) -> np.ndarray:
        """Each triangle found once on the oriented graph and counted at its three edges."""
        return _graph.edge_support(G.indptr, G.indices, by_degree)

    def vertex_triangles(self, G, by_degree: bool) -> np.ndarray:
        out = np.zeros(G.shape[0], np.int64)
        if G.shape[0]:
            _graph.row_sums(G.indptr, self.edge_triangles(G, by_degree), out)
        return out // 2  # a vertex's triangle is counted at both of its edges in the triangle

    def truss_numbers(self, G) -> np.ndarray:
        """Peeling with supports updated as edges go (``graph.peel``)."""
        return _graph.peel(G.indptr, G.indices)[0]

    def ktruss_keep(self, G, k: int) -> np.ndarray:
        """Peeling of the one level k − 3 (``graph.peel``)."""
        return _graph.peel(G.indptr, G.indices, k)[1]

    def compact_graph(self, G, keep) -> tuple[sp.csr_matrix, np.ndarray]:
        """The subgraph of the kept entries (G's matrix type), and their positions in G."""
        indptr, indices, position = _graph.compact(G.indptr, G.indices, keep.astype(np.bool_))
        return type(G)((G.data[position], indices, indptr), shape=G.shape), position
