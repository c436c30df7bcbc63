"""The semiring kernels of the CPU engine: products of rows against rows (numba, multi-core).

Each kernel is a loop skeleton written once in the template ``semiring_kernels``;
the semiring's ops are rendered to scalar Python into a copy of it in the kernel
cache (``jit.generate``), so one skeleton serves every semiring, the ops are
inlined, and numba caches the compiled kernels on disk.

Strategies (rows of X against rows of Y; Y is streamed as stored, never transposed):

* intersection, dense result — ``inverted_kernel``: a block of X rows is
  indexed by column (bounded memory: one block at a time), then each Y row's
  nonzeros walk the X rows sharing their column, so only products that exist
  are formed, as in SpGEMM, and sums land in a cache-resident tile.
* union, dense result — long rows: every pair merges its two sorted rows
  (``merge_kernel``, no scratch); short rows: a worker scatters one X row into a
  dense scratch vector indexed by column (values, plus a stamp saying "stored
  in row i", so explicitly stored zeros count as stored) and streams Y rows
  through it, then makes a second pass over the X row for the columns the Y
  row did not hit (by structure, so a stored zero is counted once); workers
  within the working-memory budget (``union_strategy``).
* intersection, sparse result — Gustavson's product with a hash accumulator
  per row, only the pairs that meet stored (``pairwise_sparse``).
* masked (sampled) products — each mask entry ``(rows[s], cols[s])`` (an
  ``Entries``, in any order) merges its two sorted rows: no per-column scratch,
  so the cost follows the mask.

Huge, sparse column spaces are first compacted to the columns that occur, so
per-column arrays stay small (see ``compact_columns``).

Values are accumulated in float64 whatever the input type.
"""

from __future__ import annotations

import os
from functools import cache

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from semiring import monoid
from semiring.engine import SCRATCH_BUDGET, Entries

from .jit import JIT, generate, scalar_source


@cache
def _semiring_kernels(key: tuple, add_tree, mult_tree, param_names: tuple[str, ...]):
    """The generated kernel module of one semiring key (expression + semantics): ``semiring_kernels`` with its ops."""
    return generate(
        "semiring_kernels",
        {
            "UNION": f"UNION = {key[2] == 'union'}\n",
            "add": scalar_source("add", add_tree, ("x", "y"), ()),
            "mult": scalar_source("mult", mult_tree, ("x", "y"), param_names),
        },
    )


# Rows of X indexed per block, and Y rows per tile of the inverted kernel: a
# tile's sums (Y_TILE x X_BLOCK float64 = 128 KiB) stay in L2.
X_BLOCK = 1024
Y_TILE = 16


@njit(**JIT)
def invert_rows(xp, xi, xv, x0, x1, ncols):
    """Rows x0..x1 of X by column: for column c, rows crow[colptr[c]:colptr[c+1]] (relative to x0)."""
    colptr = np.zeros(ncols + 1, np.int64)
    for k in range(xp[x0], xp[x1]):
        colptr[xi[k] + 1] += 1
    for c in range(ncols):
        colptr[c + 1] += colptr[c]
    crow = np.empty(xp[x1] - xp[x0], np.int32)
    cval = np.empty(xp[x1] - xp[x0], np.float64)
    # Each column's next free position: int32 where it fits, a quarter of the time of int64 on EDGAR-like data
    # (858,000 columns: the positions are read and written at random).
    if xp[x1] - xp[x0] < 2**31:
        _place_by_column(xp, xi, xv, x0, x1, colptr[:-1].astype(np.int32), crow, cval)
    else:
        _place_by_column(xp, xi, xv, x0, x1, colptr[:-1].copy(), crow, cval)
    return colptr, crow, cval


@njit(**JIT)
def _place_by_column(xp, xi, xv, x0, x1, fill, crow, cval):
    for i in range(x0, x1):
        for k in range(xp[i], xp[i + 1]):
            c = xi[k]
            pos = fill[c]
            crow[pos] = i - x0
            cval[pos] = xv[k]
            fill[c] = pos + 1


def compacted_width(X: sp.csr_matrix, Y: sp.csr_matrix) -> int:
    """The width of the column space ``compact_columns`` gives (an upper bound when it compacts)."""
    ncols = X.shape[1]
    nnz = int(X.indptr[-1] + (0 if Y is X else Y.indptr[-1]))
    return ncols if ncols <= max(1 << 14, 4 * nnz) else max(1, min(ncols, nnz))


def compact_columns(X: sp.csr_matrix, Y: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, int]:
    """Column indices of X and Y renumbered onto the columns that occur in either.

    The renumbering is monotone, so rows stay sorted; per-column arrays then
    have one slot per occurring column instead of one per column of the space.
    Used when the space is much wider than the data: a hashed feature space of
    2**40 columns, or EDGAR-like data with 858,000 columns and a few nonzeros
    per row, where per-column scratch would cost more than the products.
    """
    ncols = X.shape[1]
    if compacted_width(X, Y) == ncols:
        return X.indices, Y.indices, ncols
    xi, yi = X.indices[: X.indptr[-1]], Y.indices[: Y.indptr[-1]]
    if ncols <= 1 << 26:  # a marker per column: linear time, no sort
        new = _renumber(xi, yi, ncols)
        xi_new = new[xi].astype(xi.dtype)
        yi_new = xi_new if Y is X else new[yi].astype(yi.dtype)
        return xi_new, yi_new, max(int(new[-1]), 1)
    used = np.union1d(xi, yi)
    xi_new = np.searchsorted(used, xi).astype(xi.dtype)
    yi_new = xi_new if Y is X else np.searchsorted(used, yi).astype(yi.dtype)
    return xi_new, yi_new, max(int(used.size), 1)


@njit(**JIT)
def _renumber(xi, yi, ncols):
    """new[c] = number of occurring columns before c; new[ncols] = how many occur."""
    new = np.zeros(ncols + 1, np.int64)
    for c in xi:
        new[c + 1] = 1
    for c in yi:
        new[c + 1] = 1
    for c in range(ncols):
        new[c + 1] += new[c]
    return new


# A union's dense-scatter worker keeps three per-column arrays (value, stamp, hit): 24 bytes a column.
UNION_SCRATCH_BYTES_PER_COLUMN = 24
# Scattering is faster on short rows; on long ones merging is as fast or faster and needs no scratch
# (benchmarks/cpu_union_strategies.py; figures in docs/cpu-engine.md).
MERGE_MIN_MEAN_ROW = 512
UNION_STRATEGY_ENV = "SEMIRING_CPU_UNION"  # "margins", "merge" or "scatter" forces one (tests run each path)
UNION_STRATEGIES = ("auto", "margins", "merge", "scatter")


def splits_by_margins(sr, X: sp.csr_matrix, Y: sp.csr_matrix) -> bool:
    """Whether this union product can run as margins + an intersection (``Semiring.margin_split``, on these data's
    signs): a plus monoid, and an op whose cross term annihilates and whose margins bound it."""
    if sr.add.key != monoid.plus.key:
        return False
    nonnegative = not ((X.data[: X.indptr[-1]] < 0).any() or (Y.data[: Y.indptr[-1]] < 0).any())
    return sr.margin_split(nonnegative) is not None


def union_strategy(
    X: sp.csr_matrix, Y: sp.csr_matrix, ncols: int, budget: int | None, splittable: bool = False
) -> tuple[str, int]:
    """("margins" | "merge" | "scatter", scatter workers) for a union product: a cost model of the three.

    * margins (``splittable``: see ``splits_by_margins``): cost ∝ the products of shared columns, as an
      intersection (``inverted_kernel``), plus one merge per entry that cancels; no per-column scratch beyond a
      block of X's rows by column.  Taken whenever the split holds: the shared columns are at most every column
      a merge or a scatter walks, and are walked from a cache-resident tile.
    * merge: walks both rows of every pair (cost ∝ their lengths, sequential, no scratch);
    * scatter: puts an X row in a dense vector once and streams Y rows through it (cost ∝ Y's row plus a
      second pass over X's, random access into ``ncols``-long scratch per worker): cheaper per entry on short
      rows, dearer on long ones (``MERGE_MIN_MEAN_ROW``).  Scatter workers are as many as the budget
      (``working_memory``) allows, at most two per thread; none fit: merge.
    """
    forced = os.environ.get(UNION_STRATEGY_ENV, "auto")
    if forced not in UNION_STRATEGIES:
        raise ValueError(f"${UNION_STRATEGY_ENV} must be one of {', '.join(map(repr, UNION_STRATEGIES))}, got {forced!r}")
    if splittable and forced in ("auto", "margins"):
        return "margins", 0
    per_worker = UNION_SCRATCH_BYTES_PER_COLUMN * max(ncols, 1)
    workers = min(X.shape[0], 2 * numba.get_num_threads())
    if budget is not None:
        workers = min(workers, budget // per_worker)
    if forced == "scatter":
        return "scatter", max(1, workers)  # forced: even past the budget (tests of the path)
    if forced == "merge" or workers < 1:
        return "merge", 0
    mean_row = (X.indptr[-1] + Y.indptr[-1]) / max(1, X.shape[0] + Y.shape[0])
    return ("merge", 0) if mean_row >= MERGE_MIN_MEAN_ROW else ("scatter", workers)


def pairwise(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype, mask: Entries | None = None) -> np.ndarray:
    """``C[i, j] = ⊕_k X[i,k] ⊗ Y[j,k]`` over the columns ``sr.semantics`` selects.

    Inputs are canonical CSR (checked by ``semiring.validation``).  Returns a
    dense ``(m, p)`` array, or with ``mask`` the values at its entries
    ``(mask.rows[s], mask.cols[s])``, in its order.  A union's scratch stays
    within the driver's budget (``semiring.engine.SCRATCH_BUDGET``).
    """
    kernels = _semiring_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names)
    start = sr.start(X.shape[1])
    if mask is None:
        out = np.empty((X.shape[0], Y.shape[0]), dtype=out_dtype)
        if not out.size:
            return out
        if not sr.is_union:
            xi, yi, ncols = compact_columns(X, Y)
            args = (X.indptr, xi, X.data, Y.indptr, yi, Y.data, ncols, numba.get_num_threads())
            kernels.inverted_kernel(*args, start, sr.params, out)
            return out
        splittable = splits_by_margins(sr, X, Y)
        strategy, workers = union_strategy(X, Y, compacted_width(X, Y), SCRATCH_BUDGET.get(), splittable)
        if strategy == "merge":
            kernels.merge_kernel(X.indptr, X.indices, X.data, Y.indptr, Y.indices, Y.data, start, sr.params, out)
            return out
        xi, yi, ncols = compact_columns(X, Y)
        if strategy == "margins":
            xmax = int(np.diff(X.indptr).max(initial=0))
            args = (X.indptr, xi, X.data, Y.indptr, yi, Y.data, ncols, numba.get_num_threads(), xmax)
            kernels.margins_kernel(*args, start, sr.params, out)
            return out
        args = (X.indptr, xi, X.data, Y.indptr, yi, Y.data, ncols, workers)
        kernels.dense_kernel(*args, start, sr.params, out)
        return out
    rows, cols = mask
    out = np.empty(len(rows), dtype=out_dtype)
    if out.size:
        args = (X.indptr, X.indices, X.data, Y.indptr, Y.indices, Y.data)
        xmax = int(np.diff(X.indptr).max(initial=0))
        kernels.masked_kernel(*args, rows, cols, xmax, numba.get_num_threads(), start, sr.params, out)
    return out


# Scratch of a sparse-result worker: a key (int64) and a value (float64) per hash-table slot; a value
# (float64) and a bit per column of the dense accumulator.
SPARSE_SLOT_BYTES = 16
SPARSE_DENSE_BYTES = 8 + 1 / 8
# A row of a sparse result accumulates in p-long arrays (a value and a bit per Y row) once its products are at
# least p / SPARSE_DENSE_ROW: reading its entries back in order then costs p/64 bitmap words, less than sorting
# them (semiring_kernels.sparse_fill).
SPARSE_DENSE_ROW = 32


@njit(parallel=True, **JIT)
def _row_flops(xp, xi, colptr, flops):
    """flops[i] = the products X row i forms with Y (Σ over its columns of the Y rows holding them)."""
    for i in prange(xp.size - 1):
        n = 0
        for k in range(xp[i], xp[i + 1]):
            n += colptr[xi[k] + 1] - colptr[xi[k]]
        flops[i] = n


def pairwise_sparse(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of ``C[i, j] = ⊕_k X[i,k] ⊗ Y[j,k]`` at the pairs sharing a stored column only.

    An intersection semiring's product as GraphBLAS ``mxm`` gives it (see
    ``semiring_kernels``): Gustavson's row-by-row product with a hash
    accumulator, no dense ``m × p`` pass (rows with products ≥ p/``SPARSE_DENSE_ROW``
    accumulate in p-long arrays and a bitmap instead).  Memory: Y indexed by column (``O(nnz(Y) +
    columns)``), the result, and per worker a table of 16 bytes × 2 min(products
    of a row, p) (plus 8⅛ bytes × p where some row is dense); workers are as many as the scratch budget
    (``semiring.engine.SCRATCH_BUDGET``) allows, at least one.  Indices are
    int32 where they fit (SciPy's rule), sorted within each row.
    """
    if sr.is_union:
        raise ValueError(f"a sparse result needs an intersection semiring; {sr.name!r} is a union")
    kernels = _semiring_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names)
    m, p = X.shape[0], Y.shape[0]
    xi, yi, ncols = compact_columns(X, Y)
    colptr, crow, cval = invert_rows(Y.indptr, yi, Y.data, 0, p, ncols)
    flops = np.zeros(m, np.int64)
    if m:
        _row_flops(X.indptr, xi, colptr, flops)
    dense = SPARSE_DENSE_ROW * flops >= p  # rows accumulated in p-long arrays (semiring_kernels._dense_row), the others hashed
    hashed_max = int(flops[~dense].max(initial=0))
    table = 2
    while table < 2 * min(hashed_max, p):
        table *= 2
    dense_width = p if dense.any() else 0
    workers = max(1, min(m, numba.get_num_threads()))
    budget = SCRATCH_BUDGET.get()
    if budget is not None:
        workers = max(1, min(workers, int(budget // (SPARSE_SLOT_BYTES * table + SPARSE_DENSE_BYTES * dense_width))))
    counts = np.zeros(m, np.int64)
    if m and p:
        kernels.sparse_count(X.indptr, xi, colptr, crow, flops, p, table, dense_width, workers, counts)
    nnz = int(counts.sum())
    index_dtype = np.int32 if max(nnz, p) < 2**31 else np.int64
    indptr = np.zeros(m + 1, index_dtype)
    np.cumsum(counts, out=indptr[1:])
    indices, data = np.empty(nnz, index_dtype), np.empty(nnz, out_dtype)
    if nnz:
        args = (X.indptr, xi, X.data, colptr, crow, cval, flops, p, table, dense_width, workers)
        kernels.sparse_fill(*args, sr.start(X.shape[1]), sr.params, indptr, indices, data)
    return indptr, indices, data
