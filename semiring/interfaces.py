"""What an engine is: the interfaces every engine implements, and the vocabularies they share.

Two interfaces, each method documented once here:

* :class:`PairwiseEngine` — products of rows against rows under a semiring,
  row norms, elementwise expansions, entry selection and running top-k: what
  ``semiring.pairwise``, ``semiring.distances.pairwise_distances`` and
  ``NearestNeighbors`` are built from.
* :class:`GraphEngine` — the graph measures of ``semiring.graph``.

Engines live in ``semiring.kernels`` (``cpu``: numba on host memory; ``cuda``:
NVRTC-compiled kernels run through CuPy) and are found by
``semiring.backend``; this module imports none of them.  Each engine works on
*its device's* matrices (``to_device`` makes one from a canonical SciPy CSR
matrix): host CSR on the CPU, device CSR on the GPU.  Arrays it returns live
on its device too, until ``to_host``.

One representation per concept:

* a matrix on the device — whatever ``to_device`` returns: ``.shape``,
  ``.indptr``, ``.indices``, ``.data`` and ``.dtype``, and what validation
  proved of it where it was made from a checked matrix
  (``semiring.validation.facts_of``: read instead of scanning again);
* a set of entries (a mask to compute, the entries a condition selects) —
  :class:`Entries`, row and column index arrays of equal length on the
  device, in no particular order unless said;
* a running top-k selection — whatever ``topk_init`` returns, opaque to callers.
"""

from __future__ import annotations

import inspect
import weakref
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

# The operands of an expansion (see ``semiring.distances.specs``): up to two
# product terms c0, c1 at entry (i, j), up to two row norms of X (nx0, nx1) at i
# and of Y (ny0, ny1) at j, and the number of columns n.
EXPANSION_VARIABLES = ("c0", "c1", "nx0", "nx1", "ny0", "ny1", "n")

# The operands of a graph measure's expansion: the intersection c of N(u) and
# N(v) (a count or a weighted sum) and the two vertices' norms (degrees).
GRAPH_EXPANSION_VARIABLES = ("c", "nu", "nv")

# The index of an empty slot of a top-k selection: int64's largest value, worse
# than any real index, so that a selection needs no count of filled slots.
TOPK_EMPTY = (1 << 63) - 1


# The bytes an engine's kernels may take for scratch beyond the result tile (a union's per-column arrays): the
# caller's working_memory, set by ``semiring.tiling`` around the calls it makes; None outside the driver.
SCRATCH_BUDGET: ContextVar[int | None] = ContextVar("SCRATCH_BUDGET", default=None)

# What an engine derives from an input once per call and reuses for every tile of it (the split strategy's
# dense copy of the index's heavy columns and its light postings): a dict the driver sets around the calls
# it makes, dropped when the call ends; or a ``DerivedCache`` that a fitted index holds across its queries
# (``held``), so a batch of queries pays only for itself; None outside both.
CALL_CACHE: ContextVar[dict | None] = ContextVar("CALL_CACHE", default=None)


# Where an engine that states ``expanded_bytes_per_entry`` for a call writes the block of its next
# ``pairwise_expanded``: a host array of the block's shape and the result's type, a view of the call's result
# (whole rows of it: C-contiguous), set by ``semiring.tiling`` around each tile it has written in place, so no
# tile is computed apart and copied; the block returned is then that array (the driver copies one that is not).
# None: the engine makes the block's array.
RESULT_BLOCK: ContextVar[Any] = ContextVar("RESULT_BLOCK", default=None)


@contextmanager
def written_into(block):
    """Within the block, ``RESULT_BLOCK`` is ``block``: the engine's next expanded block is written there."""
    token = RESULT_BLOCK.set(block)
    try:
        yield
    finally:
        RESULT_BLOCK.reset(token)


class DerivedCache(dict):
    """What engines derived from a fitted index's own rows (``CALL_CACHE``), kept by the index between calls.

    Each call through :func:`held` keeps only what it used or made: what an earlier call's tiling derived and
    this one's did not (another ``working_memory``, another batch size) is dropped as the call ends, so the
    index holds at most what one call derives.  The index must own the rows (a change to them in place would
    make what was derived stale).
    """

    def __init__(self):
        super().__init__()
        self.used: set = set()

    def __getitem__(self, key):
        self.used.add(key)
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        self.used.add(key)
        super().__setitem__(key, value)


@contextmanager
def held(cache: DerivedCache):
    """Within the block, engines keep what they derive in ``cache`` (``CALL_CACHE``), which outlives the block;
    as it ends, what the block did not use is dropped."""
    cache.used = set()
    token = CALL_CACHE.set(cache)
    try:
        yield
    finally:
        CALL_CACHE.reset(token)
        for key in [key for key in cache if key not in cache.used]:
            del cache[key]


# The stored share (entries / cells) of a call's whole X and Y, set around the call's tiles (``call_density``):
# an engine choosing a dense path by density (the CPU engine's BLAS and tiled kernels) reads it, so every tile of
# a call takes the same path however the call is tiled, and the result does not depend on the tiling; None
# outside such a call (each block is then judged by its own entries).
CALL_DENSITY: ContextVar[tuple[float, float] | None] = ContextVar("CALL_DENSITY", default=None)


@contextmanager
def call_density(X, Y):
    """Within the block, ``CALL_DENSITY`` is the density of the (checked) matrices X and Y, wholes of a call."""

    def density(A) -> float:
        cells = A.shape[0] * A.shape[1]
        return int(A.nnz) / cells if cells else 0.0

    token = CALL_DENSITY.set((density(X), density(Y)))
    try:
        yield
    finally:
        CALL_DENSITY.reset(token)


class Expansion(NamedTuple):
    """A block of a measure not yet expanded: ``tree`` (of ``EXPANSION_VARIABLES`` and ``param_names``, whose
    values are ``params``) over the product's ``terms`` (each m × p), X's norms (per row) and Y's (per column),
    ``ncols`` the column count.  ``topk_push`` takes one where the block itself need never be written."""

    tree: Any
    param_names: tuple
    params: Any
    terms: list
    xnorms: list
    ynorms: list
    ncols: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.terms[0].shape


class Entries(NamedTuple):
    """Entries ``(rows[s], cols[s])`` of an ``m × p`` result, as index arrays on the engine's device."""

    rows: Any
    cols: Any


@runtime_checkable
class PairwiseEngine(Protocol):
    """An engine for products of rows against rows.  Implementations: ``semiring.kernels.cpu.ENGINE``,
    ``semiring.kernels.cuda.ENGINE``."""

    name: str  # "cpu" or "cuda", as ``backend=`` names it
    device_results: bool  # arrays it returns live off the host (CuPy callers keep them there)
    expands_in_topk: bool  # topk_push takes an Expansion, computing each candidate as it reads it
    all_pairs_once: bool  # an all-pairs top-k of a symmetric measure computes each pair once (tiling.topk)

    def unavailable_reason(self) -> str | None:
        """Why this engine cannot run here (a sentence), or None when it can."""

    def memory_limit_bytes(self) -> int | None:
        """The most temporary memory a call may take on the device now, or None for no limit of its own."""

    def threads(self, n_jobs: int | None) -> AbstractContextManager:
        """A context in which the engine's calls run on ``n_jobs`` threads, as scikit-learn's ``n_jobs`` (a
        nonzero integer, checked by the caller): None keeps the current number, ``-1`` every thread the engine
        has, ``-2`` all but one; more than it has is capped there.  The number before is restored on exit."""

    def device_name(self) -> str:
        """The device it computes on, in words, for reports (``semiring info``); never raises."""

    def csr_verdicts(self, A) -> dict | None:
        """What one pass over a CSR matrix's entries finds, for ``semiring.validation`` (the keys of the GPU
        engine's check kernel: ``kernels.cpu.checks.VERDICT_KEYS``, each an int; and where the engine finds
        them, ``"magnitudes"``: the values' smallest nonzero and largest magnitude), or None where NumPy's
        reductions are to check it: a SciPy matrix, or one on this engine's device
        (``semiring.arrays.backend_of``).  Only its index arrays' types and indptr's length are known good:
        entries are read within the stored arrays whatever indptr holds."""

    def to_device(self, A) -> Any:
        """A canonical CSR matrix (sorted, unique indices; float32/float64) on the device: a SciPy one, or a
        ``cupyx.scipy.sparse`` one checked on the GPU (``semiring.validation``), which each engine brings into its
        own memory (a GPU engine uses it as it is), with what validation proved of it (``validation.facts_of``)."""

    def to_host(self, a, out=None) -> np.ndarray:
        """A device array as a NumPy array (the same object on the CPU), or copied into ``out`` (C-contiguous,
        of a's shape) and ``out`` returned: a tile of a larger host result lands in place, copied once."""

    def empty(self, shape, dtype) -> Any:
        """An uninitialised array on the device."""

    def accumulate_dtype(self, result_dtype) -> np.dtype:
        """The type products are accumulated in for a result of ``result_dtype``."""

    def row_slice(self, A, r0: int, r1: int) -> Any:
        """Rows ``r0:r1`` of a device matrix, as a device matrix (views where possible)."""

    def entries_from_csr(self, M) -> Entries:
        """The stored entries of a SciPy CSR matrix, in its CSR order, on the device."""

    def pairwise(self, X, Y, sr, dtype, mask: Entries | None = None) -> Any:
        """``C[i, j] = ⊕_k X[i, k] ⊗ Y[j, k]`` over the columns ``sr.semantics`` selects.

        A dense ``(m, p)`` array of ``dtype``, or with ``mask`` the values at its
        entries, in its order (a 1-D array).
        """

    def pairwise_expanded(self, X, Y, sr, dtype, expansion) -> tuple[Any, Entries | None]:
        """A one-term measure's block, its product planned once: ``(out, flagged)``, the ``m × p`` result of
        ``dtype`` and the entries its refinement recomputes (None: none to).  Written expanded as the product is,
        in one pass, where the plan's kernel can; else the plan's product expanded apart, as ``expand`` does.

        ``expansion`` is ``(tree, param_names, params, xnorms, ynorms, ncols, when)``: the measure's expression
        and operands as ``expand`` takes them, and ``when`` (an expression over the same variables, or None)
        flags the entries to recompute, as ``select`` would.  Where ``RESULT_BLOCK`` is set (only on an engine
        that states ``expanded_bytes_per_entry`` for the call), ``out`` is that array, written in place.
        """

    def transposed_columns(self, a, c0: int, c1: int):
        """Columns ``c0:c1`` of the 2-D array ``a`` (a block or an expansion's term) transposed, a new C-contiguous
        array: what an all-pairs selection pushes to the columns' rows (``tiling._push_transposed``)."""

    def mirror_into(self, target, source) -> None:
        """``target[...] = source.T`` (two views of one result that do not overlap: a tile above the diagonal and
        its place below), in the engine's threads where it has its own: the first write of each fresh page of a
        large result is what the copy costs, so it is spread over the threads as the tiles' writes are."""

    def dense_expanded(self, X, Y, trees, sr, dtype, expansion, refine, symmetric: bool) -> tuple[Any, Any] | None:
        """A one-term measure of dense rows kept dense, where the engine has that path for them, else None (the
        caller converts them to CSR).  X and Y (2-D, C-contiguous, on the engine's device, of ``dtype``; Y may
        be X): ``(result, findings)``, the ``m × p`` block of ``dtype`` and what one pass over the rows' values
        found (read by ``dense_verdicts``, before the result may be used).  The product ``sr`` (``plus_times``;
        others refused) expanded by ``expansion`` ``(tree, param_names, params, when)`` with the rows' norms
        ``Σ f(x)`` for each of ``trees`` (expressions of ``x``); where ``when`` holds, ``refine``
        ``(semiring, tree)`` gives the entry exactly from the rows (``Refinement``).  ``symmetric`` (Y is X, a
        symmetric measure): each pair once, the result exactly symmetric."""

    def dense_verdicts(self, findings) -> list[dict]:
        """What ``dense_expanded``'s pass over the rows found, one dict a matrix (X's, then Y's where Y is not
        X), as ``semiring.validation.judge_dense`` reads it: ``"nan"`` and ``"inf"`` (how many),
        ``"magnitudes"`` (the smallest nonzero and the largest magnitude, ``(inf, 0)`` where none is nonzero).
        The host waits here, after the engine's work on the rows is queued."""

    def expanded_bytes_per_entry(self, X, Y, sr, dtype, tree) -> int | None:
        """Bytes per result entry that ``pairwise_expanded`` (``sr``, a result of ``dtype``, the expansion
        ``tree``) takes beyond the block it returns, for the block of all X's rows against all Y's (the call's
        whole checked inputs, within its ``call_density``), where the engine's path for it writes that block in
        ``dtype`` and keeps its other temporaries within the scratch budget, and so for a block of rows of them
        (its own path's temporaries, or the path's fallback's, within the scratch budget): the blocked driver
        then has the engine write each tile into the result (``RESULT_BLOCK``), a tile of as many entries as
        these fit the working memory, the whole result where they do for all of it (``tiling.dense``).  None: a
        measure's own count holds (each term in ``accumulate_dtype``, and the result's buffer beside them)."""

    def pairwise_sparse(self, X, Y, sr, dtype) -> tuple[Any, Any, Any]:
        """``(indptr, indices, data)`` on the device: the product of an intersection semiring at the pairs of rows
        sharing a stored column only (``mxm``'s result in GraphBLAS), as CSR with sorted indices; no dense
        ``m × p`` pass.  An engine that cannot raises ``NotImplementedError`` naming one that can."""

    def row_norms(self, A, trees, dtype, terms=()) -> list:
        """A measure's norms: ``Σ_k f(A[i, k])`` over each row's stored values for each of ``trees`` (expressions
        of ``x``), in their type (float64 on the CPU, for the GPU's sake).  With ``terms`` (its row-only
        terms, ``Distance.row_terms``: trees of ``nx0``, ``nx1`` and ``n``) ``g(nx0[i], nx1[i], n)`` for each of
        them instead, the norms as ``nx0`` and ``nx1`` and A's columns as ``n``."""

    def row_shares(self, indptr, values, root: bool = False) -> Any:
        """Each of the stored ``values`` of the CSR rows ``indptr`` (on this engine's device; finite and
        non-negative) divided by its row's sum, accumulated in float64 (0 where the sum is 0), in the values'
        type, its square root with ``root``: jensenshannon's and hellinger's rows (``Distance.prepare``)."""

    def expand(self, tree, param_names, params, terms, xnorms, ynorms, ncols: int, out) -> Any:
        """``out[i, j] = f(c0[i, j], c1[i, j], nx*[i], ny*[j], n)`` (see ``EXPANSION_VARIABLES``); returns ``out``.

        ``terms`` (up to two ``(m, p)`` arrays), ``xnorms`` and ``ynorms`` (up to
        two vectors each) may be fewer than the expression names: missing ones
        read as 0.  ``out`` may be ``terms[0]``.
        """

    def select(self, tree, param_names, params, terms, xnorms, ynorms, ncols: int, shape) -> Entries:
        """The entries of an ``m × p`` result where the expression (as in ``expand``) is nonzero.

        Memory follows the number selected: no ``m × p`` flag array is made.
        """

    def scatter(self, out, entries: Entries, values) -> None:
        """``out[rows[s], cols[s]] = values[s]`` for every entry, in place."""

    def topk_init(self, m: int, k: int, dtype) -> Any:
        """An empty running selection of the ``k`` best of ``m`` rows."""

    def topk_push(self, block, col0: int, self0: int, largest: bool, selection) -> None:
        """Merge ``block`` (rows × candidates ``col0``, ``col0 + 1``, …) into ``selection`` in place; an
        :class:`Expansion` where the engine ``expands_in_topk``.

        Best means smallest (``largest=False``) or largest; NaN ranks after
        every number, ties go to the smaller index.  ``self0 >= 0``: row ``r``
        of the block is candidate ``self0 + r``, which it does not select.
        """

    def topk_finish(self, selection, largest: bool, dtype) -> tuple[Any, Any]:
        """The selection as arrays ``(values, indices)`` on the engine's device, each row best first; empty
        slots are ``(NaN, TOPK_EMPTY)``."""

    def topk_extra_bytes(self, k: int) -> int:
        """Temporary bytes ``topk_push`` takes per block entry beyond the block itself."""

    def dense_block_bytes(self, X, Y, sr, dtype, rows: int, cols: int) -> int:
        """Host bytes a tile of ``rows`` rows of X against ``cols`` rows of Y (the call's whole checked inputs,
        within its ``call_density``) takes beyond its entries' own buffers, where the engine densifies rows on
        the host for it; computing ``pairwise(..., sr, dtype)``; 0 where it densifies none."""


@runtime_checkable
class GraphEngine(Protocol):
    """An engine for graph measures on a symmetric adjacency matrix ``G`` without self-loops.

    Implementations: ``semiring.kernels.cpu.GRAPH_ENGINE``, ``semiring.kernels.cuda.GRAPH_ENGINE``.
    """

    name: str  # "cpu" or "cuda"
    xp: Any  # the array module of its device: numpy or cupy

    def to_device(self, A) -> Any:
        """A canonical SciPy CSR matrix on the device."""

    def to_host(self, a) -> np.ndarray:
        """A device array as a NumPy array."""

    def nnz(self, G) -> int:
        """Stored entries of G."""

    def check_graph(self, G, weighted: bool) -> dict[str, int]:
        """How many stored entries break each rule: ``"unsorted"``, ``"self-loops"``,
        ``"missing reverse"``, ``"unequal reverse weight"`` (checked only when ``weighted``)."""

    def edge_rows(self, G) -> Any:
        """The row of each stored entry, in CSR order."""

    def row_norm(self, G, tree) -> Any:
        """``Σ_k f(G[u, k])`` over each row (``tree`` an expression of ``x``), float64."""

    def common_neighbor_counts(self, G) -> Any:
        """``|N(u) ∩ N(v)|`` at each stored entry (u, v), in CSR order."""

    def edge_measure(self, G, tree) -> Any:
        """``f(c, d(u), d(v))`` at each stored entry (``tree`` over ``GRAPH_EXPANSION_VARIABLES``, c the
        common-neighbour count, d the degree), each undirected edge computed once."""

    def masked_product(self, G, P, sr) -> Any:
        """``(G ⊕.⊗ Gᵀ)`` at the stored entries of the device matrix P, in P's CSR order."""

    def expand(self, tree, rows, cols, c, norms) -> Any:
        """``f(c[s], norms[rows[s]], norms[cols[s]])`` for each s (``GRAPH_EXPANSION_VARIABLES``), float64."""

    def triangle_count_total(self, G, by_degree: bool, part: tuple[int, int] | None = None) -> int:
        """Triangles of G, each counted once (edges oriented by degree, else by vertex id); ``part=(b, nparts)``:
        those of part b when the engine cuts its work in ``nparts`` parts of about equal work (the parts'
        counts sum to the total)."""

    def edge_triangles(self, G, by_degree: bool) -> Any:
        """Triangles through each stored entry (its support), in CSR order."""

    def vertex_triangles(self, G, by_degree: bool) -> Any:
        """Triangles at each vertex."""

    def truss_numbers(self, G) -> Any:
        """The truss number of each stored entry (the largest k whose k-truss holds its edge), int64, CSR order."""

    def ktruss_keep(self, G, k: int) -> Any:
        """Whether each stored entry's edge is in the k-truss (k ≥ 2), a boolean array in CSR order."""

    def compact_graph(self, G, keep) -> tuple[Any, Any]:
        """G with only the stored entries where ``keep`` holds, and the positions in G of those kept."""


class LastDerived:
    """A value derived from an object, kept for the next call on the same object while the object lives.

    The Dask path asks an engine for the parts of one graph's work in turn (``triangle_count_total(G, ...,
    part=(b, n))``): the oriented graph is made at the first part and reused by the next; and a worker's per-edge
    measure of a held graph, cut into its row blocks (``semiring.graph``).  One value is kept;
    it is dropped when its object is, or when another object's value replaces it.

    >>> class Graph: pass
    >>> kept, g = LastDerived(), Graph()
    >>> kept.get(g, "degree", lambda: [1, 2]) is kept.get(g, "degree", lambda: [3])
    True
    """

    def __init__(self):
        self._entry = None  # (weak reference to the object, key, value), read and replaced whole (threads)

    def get(self, obj, key, make):
        entry = self._entry
        if entry is not None and entry[0]() is obj and entry[1] == key:
            return entry[2]
        self._entry = None  # the old value is freed before the new one is made
        value = make()
        self._entry = (weakref.ref(obj, self._forget), key, value)
        return value

    def _forget(self, ref) -> None:
        entry = self._entry
        if entry is not None and entry[0] is ref:
            self._entry = None


def missing_methods(engine, interface) -> list[str]:
    """The names of ``interface`` that ``engine`` lacks (a test and the resolver's guard use it)."""
    names = [n for n in dir(interface) if not n.startswith("_")] + list(getattr(interface, "__annotations__", {}))
    return sorted({n for n in names if not _has_static(engine, n)})


def _has_static(obj, name: str) -> bool:
    """Whether ``obj`` defines ``name``, without running it: the GPU engine's ``xp`` imports CuPy when read."""
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True
