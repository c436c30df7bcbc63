"""The product kernels of the CPU engine and what they read: rows against rows (numba, multi-core).

Each kernel is a loop skeleton written once in the template ``semiring_template``;
the semiring's ops are rendered to scalar Python into a copy of it in the kernel
cache (``jit.generate``), so one skeleton serves every semiring, the ops are
inlined, and numba caches the compiled kernels on disk.

Which kernel a product runs is an entry of ``strategies.STRATEGIES`` (when it
applies, what it costs, how it runs); this module holds what the entries run
(Y is streamed as stored, never transposed):

* ``row_kernel`` (intersection, dense result, few products an entry): Y's
  entries in X's columns indexed by (range of Y rows, X column) (the row index,
  in two passes: ``count_row_index``, whose count is the kernel's cost, then
  ``place_row_index``), then each X row's entries walk the Y rows of a range
  holding their column into a range-long accumulator, written out as one run of
  the result's row;
* ``inverted_kernel`` (intersection, dense result, many products an entry): a
  block of X rows is indexed by column (bounded memory: one block at a time),
  then each Y row's nonzeros walk the X rows sharing their column, so only
  products that exist are formed, as in SpGEMM, and sums land in a
  cache-resident tile;
* ``margins_kernel`` (union with a plus monoid where ``Semiring.margin_split``
  holds): row margins Σ f(x, 0), Σ f(0, y) and the intersection of
  f(x, y) − f(x, 0) − f(0, y), formed as in the inverted kernel; entries that
  cancel are recomputed by merging their rows in the kernel;
* ``merge_kernel`` (other unions, long rows): every pair merges its two sorted
  rows, no scratch; ``dense_kernel`` (short rows): a worker scatters one X row
  into a dense scratch vector indexed by column (values, plus a stamp saying
  "stored in row i", so explicitly stored zeros count as stored) and streams Y
  rows through it, then makes a second pass over the X row for the columns the
  Y row did not hit;
* the row, inverted and margins kernels apply a one-term measure's expansion
  as they write each entry: no float64 m × p temporary;
* a sparse result (``sparse_by_columns``, ``sparse_by_rows``): Gustavson's
  product, only the pairs that meet stored;
* ``masked_kernel``: each mask entry ``(rows[s], cols[s])`` (an ``Entries``,
  in any order) merges its two sorted rows: no per-column scratch, so the cost
  follows the mask.

Huge, sparse column spaces are first compacted to the columns that occur, so
per-column arrays stay small (see ``compact_columns``).

Values are accumulated in float64 whatever the input type.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from semiring import expr as _expr
from semiring import settings
from semiring.interfaces import EXPANSION_VARIABLES, SCRATCH_BUDGET, Entries

from .jit import JIT, generate, scalar_source


@cache
def _semiring_kernels(key: tuple, add_tree, mult_tree, param_names: tuple[str, ...], expansion=None):
    """The generated kernel module of one semiring key (expression + semantics): ``semiring_template`` with its ops.

    ``expansion``: None, or ``(tree, parameter names, refine test)`` of a one-term measure's expansion applied
    as the dense kernels write each entry (``strategies.product_expanded``); a module of its own, so compiled only where
    asked for.
    """
    never = _expr.Node("num", (0.0,))
    tree, names, when = expansion if expansion is not None else (_expr.Node("var", ("c0",)), (), never)
    return generate(
        "semiring_template",
        {
            "UNION": f"UNION = {key[2] == 'union'}\n",
            "add": scalar_source("add", add_tree, ("x", "y"), ()),
            "mult": scalar_source("mult", mult_tree, ("x", "y"), param_names),
            "expansion": scalar_source("expansion", tree, EXPANSION_VARIABLES, names),
            "refine_when": scalar_source("refine_when", when if when is not None else never, EXPANSION_VARIABLES, ()),
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


def index_by_column(xp, xi, xv, ncols: int):
    """``invert_rows`` of all of X's rows with the values in X's own type (a float32 X's postings take 8 bytes
    an entry, not 12: the sparse-result kernels stream postings, widening each value as they read it), built
    across threads: X's rows in ranges, each range's entries counted and placed by column at the range's own
    offsets, so each column's rows come out in order, as ``invert_rows`` gives them (serial, it took a tenth of
    a 16-thread sparse product on scRNA-like queries)."""
    m = xp.size - 1
    # Ranges of at least 32 rows, and a count per (range, column) no more than X's entries: linear whatever the
    # width (a wide, very sparse X is indexed in one range).
    nchunks = max(1, min(numba.get_num_threads(), m // 32, int(xp[-1]) // max(ncols, 1)))
    return _index_by_column(xp, xi, xv, ncols, nchunks)


@njit(parallel=True, **JIT)
def _index_by_column(xp, xi, xv, ncols, nchunks):
    m = xp.size - 1
    fill = np.zeros((nchunks, ncols), np.int64)
    for chunk in prange(nchunks):
        for k in range(xp[chunk * m // nchunks], xp[(chunk + 1) * m // nchunks]):
            fill[chunk, xi[k]] += 1
    colptr = np.empty(ncols + 1, np.int64)
    total = 0
    for c in range(ncols):
        colptr[c] = total
        for chunk in range(nchunks):
            n = fill[chunk, c]
            fill[chunk, c] = total
            total += n
    colptr[ncols] = total
    crow = np.empty(total, np.int32)
    cval = np.empty(total, xv.dtype)
    for chunk in prange(nchunks):
        at = fill[chunk]
        for i in range(chunk * m // nchunks, (chunk + 1) * m // nchunks):
            for k in range(xp[i], xp[i + 1]):
                q = at[xi[k]]
                crow[q] = i
                cval[q] = xv[k]
                at[xi[k]] = q + 1
    return colptr, crow, cval


# An intersection's dense result runs through one of two kernels (``strategies``: "rows" and "inverted"):
# * "rows" (``semiring_template.row_kernel``): each X row against a range of ROW_RANGE Y rows at a time, its
#   entries walking the Y rows of the range that hold their column, sums in a range-long accumulator (32 KiB of
#   float64, in L1) written out as one run of the result's row (16 KiB of float32): the writes stream, as a
#   memset's do.  Best where the result, not the products, is the work: EDGAR-like rows (0.17 products an entry),
#   and still ahead on MovieLens- and NYTimes-like ones (15 and 27 an entry).
# * "inverted" (``inverted_kernel``): a block of X rows indexed by column, each Y row's entries walking the X rows
#   that hold their column, 16 Y rows' sums at a time in L2; each Y row's sums stay in one 8 KiB row of the
#   accumulator, so where the products are many (scRNA-like: 162 an entry) it is the faster, while its writes
#   are 64-byte pieces of 16 columns, one per X row.
# * "spgemm": the sparse result's kernels (``product_sparse``: down Y's rows, X's index in column blocks within
#   L2, a tile of Y rows sharing each read of a column's postings, dense columns of X as axpys), its entries then
#   written into the dense result (``densify_rows``).  Where the products are many it is the fastest: 2 threads,
#   512 queries, best of 7 (float64 plus_times): scRNA-like (162 an entry) 230-244 ms against the inverted
#   kernel's 467-562 and the row kernel's 407; uniform rows of 10 % (30 an entry) 89-100 against the row
#   kernel's 155-188; NYTimes-like (27) a tie; MovieLens-like (15) 60-70 against 52-60, EDGAR-like (0.17) 20-22
#   against 18.  Its CSR (12 bytes an entry, the result being nearly dense) is taken beside the result, so only
#   where it fits the scratch budget.
# "rows" is taken while the products are at most SPGEMM_ENTRY_PRODUCTS per result entry, then "spgemm" where it
# fits, else "inverted" (the products: Σ over columns of X's entries in each times Y's, from their counts).
ROW_RANGE = 4096
ROWS_MAX_PRODUCTS = 64
SPGEMM_ENTRY_PRODUCTS = 32
SPGEMM_ENTRY_BYTES = 20  # a CSR entry (int32 column, float64 value) and the float64 product it is written into


def shared_products(xi, nx: int, yi, ny: int, ncols: int) -> int:
    """The products of an intersection of X and Y: Σ over columns of X's entries in each times Y's (``xi``,
    ``yi``: their first ``nx``, ``ny`` column indices), as the smaller side's column counts summed over the
    larger's entries, across threads."""
    if nx > ny:
        xi, nx, yi, ny = yi, ny, xi, nx
    return int(_counts_at(np.bincount(xi[:nx], minlength=ncols).astype(np.int64), yi, ny))


@njit(parallel=True, **JIT)
def _counts_at(counts, indices, n):
    total = 0
    for t in prange(n):
        total += counts[indices[t]]
    return total


@njit(parallel=True, **JIT)
def densify_rows(indptr, indices, data, start, out):
    """``out``: ``start`` everywhere but at the CSR entries, their values (a sparse result written dense)."""
    for i in prange(out.shape[0]):
        row = out[i]
        row[:] = start
        for k in range(indptr[i], indptr[i + 1]):
            row[indices[k]] = data[k]


@njit(**JIT)
def _x_column_slots(xp, xi, ncols):
    """The columns X holds, numbered in order of first use: (slot of each column or -1, a bit per column set
    where X holds it, slot of each X entry, how many)."""
    slot = np.full(ncols, -1, np.int32)
    held = np.zeros((ncols + 63) >> 6, np.uint64)
    nslots = 0
    xs = np.empty(xp[-1], np.int32)
    for k in range(xp[-1]):
        c = xi[k]
        if slot[c] < 0:
            slot[c] = nslots
            held[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
            nslots += 1
        xs[k] = slot[c]
    return slot, held, xs, nslots


@njit(inline="always", **JIT)
def _count_range(yp, yi, slot, held, nslots, width, keyptr, ys, rg):
    # ys[t]: the slot of Y entry t's column, or -1; the bitmap (a bit a column, cache-resident) spares most
    # entries a read of ``slot`` (4 bytes a column, read at random).
    base = rg * nslots + 1
    for t in range(yp[rg * width], yp[min(yp.size - 1, (rg + 1) * width)]):
        c = yi[t]
        s = np.int32(-1)
        if (held[c >> 6] >> np.uint64(c & 63)) & np.uint64(1):
            s = slot[c]
            keyptr[base + s] += 1
        ys[t] = s


@njit(inline="always", **JIT)
def _place_range(yp, yv, ys, nslots, width, keyptr, prow, pval, pos, rg):
    fill = keyptr[rg * nslots : (rg + 1) * nslots].copy()
    noted = pos.size > 0
    for j in range(rg * width, min(yp.size - 1, (rg + 1) * width)):
        for t in range(yp[j], yp[j + 1]):
            s = ys[t]
            if s >= 0:
                q = fill[s]
                prow[q] = j - rg * width
                pval[q] = yv[t]
                fill[s] = q + 1
                if noted:
                    pos[t] = q


@njit(parallel=True, **JIT)
def _index_by_range(yp, yi, yv, slot, held, nslots, width, keyptr, ys, prow, pval, pos, place, parallel):
    """One pass of the row index over Y's ranges: count Y's entries by (range, slot) into keyptr[1:], noting
    their slots in ys, or (``place``) put them in place, each one's place in ``pos`` where it is not empty;
    across ranges when ``parallel``, else in the calling thread (a small Y: no parallel region to start)."""
    nranges = (yp.size - 1 + width - 1) // width
    if parallel:
        for rg in prange(nranges):
            _index_range(yp, yi, yv, slot, held, nslots, width, keyptr, ys, prow, pval, pos, place, rg)
    else:
        for rg in range(nranges):
            _index_range(yp, yi, yv, slot, held, nslots, width, keyptr, ys, prow, pval, pos, place, rg)


@njit(inline="always", **JIT)
def _index_range(yp, yi, yv, slot, held, nslots, width, keyptr, ys, prow, pval, pos, place, rg):
    if place:
        _place_range(yp, yv, ys, nslots, width, keyptr, prow, pval, pos, rg)
    else:
        _count_range(yp, yi, slot, held, nslots, width, keyptr, ys, rg)


# Y's entries from which the row index is built across threads (fewer: in the calling thread, which costs less
# than starting a parallel region, on a shared machine above all).
ROW_INDEX_PARALLEL_ENTRIES = 1 << 18


class RowCount(NamedTuple):
    """The first pass of the row kernel's index of Y (``count_row_index``): Y's entries counted by (range of Y
    rows, slot of an X column), and the products the row kernel would form (``products``, its cost)."""

    index: tuple
    xs: np.ndarray
    nslots: int
    width: int
    keyptr: np.ndarray
    parallel: bool
    products: int


def count_row_index(X, xi, Y, yi, ncols: int) -> RowCount:
    """The row index's counting pass: one pass over Y's entries (see ``place_row_index``)."""
    p = Y.shape[0]
    slot, held, xs, nslots = _x_column_slots(X.indptr, xi, ncols)
    width = max(1, min(p, max(ROW_RANGE, -(-p * nslots // (int(Y.indptr[-1]) + p)))))
    nranges = -(-p // width)
    keyptr = np.zeros(nranges * nslots + 1, np.int64)
    ys = np.empty(int(Y.indptr[-1]), np.int32)
    parallel = ys.size >= ROW_INDEX_PARALLEL_ENTRIES
    index = (Y.indptr, yi, Y.data, slot, held, nslots, width, keyptr, ys)
    _index_by_range(*index, np.empty(0, np.int32), np.empty(0), np.empty(0, np.int64), False, parallel)
    per_column = keyptr[1:].reshape(nranges, nslots).sum(axis=0)  # Y's entries in each X column
    return RowCount(index, xs, nslots, width, keyptr, parallel, int(per_column[xs].sum()))


def place_row_index(counted: RowCount, positions: np.ndarray | None = None):
    """The row kernel's index of Y from its counts: ``(xs, nslots, width, keyptr, prow, pval)``.

    Y's rows in ranges of ``width``; for the key ``range × nslots + slot`` of an X column, the rows of the range
    holding it (relative to the range's first, in order) ``prow[keyptr[key]:keyptr[key + 1]]`` and their values
    ``pval``; ``xs`` is each X entry's slot.  Linear in Y's entries; ranges widen past ``ROW_RANGE`` where the
    keys would outnumber Y's entries and rows.  The counts' ``keyptr`` becomes the index's.  ``positions``
    (int64, one a Y entry): each entry's place in ``prow``, written where given (Y is X: an X entry's own
    posting, where the row kernel's ``upper`` starts)."""
    keyptr = counted.keyptr
    np.cumsum(keyptr, out=keyptr)
    prow = np.empty(int(keyptr[-1]), np.int32)
    pval = np.empty(int(keyptr[-1]), np.float64)
    pos = np.empty(0, np.int64) if positions is None else positions
    _index_by_range(*counted.index, prow, pval, pos, True, counted.parallel)
    return counted.xs, counted.nslots, counted.width, keyptr, prow, pval


@njit(parallel=True, **JIT)
def mirror_upper(out, parallel):
    """``out[j, i] = out[i, j]`` below the diagonal of a square result (the row kernel's ``upper``), in tiles of
    64 x 64, so that the column read of each stays in cache; across threads when ``parallel``, else in the calling
    thread (a small result: no parallel region to start)."""
    ntiles = (out.shape[0] + 63) >> 6
    if parallel:
        for tj in prange(ntiles):
            _mirror_tiles(out, tj)
    else:
        for tj in range(ntiles):
            _mirror_tiles(out, tj)


@njit(inline="always", **JIT)
def _mirror_tiles(out, tj):
    m = out.shape[0]
    j0, j1 = tj << 6, min(m, (tj + 1) << 6)
    for ti in range(tj + 1):
        i0 = ti << 6
        for j in range(j0, j1):
            for i in range(i0, min(i0 + 64, j)):
                out[j, i] = out[i, j]


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


# compact_columns renumbers through a marker per column (8 bytes) up to this width, by sorting beyond it.
MARKER_MAX_COLUMNS = 1 << 26


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
    if ncols <= MARKER_MAX_COLUMNS:  # a marker per column: linear time, no sort
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


def norm_rows(norms, rows: int) -> np.ndarray:
    """Up to two row norms as a 2 × rows float64 array (zeros for the ones a measure lacks)."""
    out = np.zeros((2, rows), np.float64)
    for k, norm in enumerate(norms):
        out[k] = norm
    return out


def with_flagged(out, flagged):
    """(out, the flagged entries), or None where some chunk had more than its room."""
    if (2 * flagged[:, 0] + 1 > flagged.shape[1]).any():
        return None
    return out, flagged_entries(flagged)


def flagged_entries(flagged) -> Entries | None:
    """The entries a kernel listed per chunk (``semiring_template._flag``), None where none was asked for."""
    if flagged.shape[1] == 1:
        return None
    pairs = [flagged[c, 1 : 1 + 2 * flagged[c, 0]].reshape(-1, 2) for c in range(flagged.shape[0])]
    both = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
    return Entries(both[:, 0].copy(), both[:, 1].copy())


# Scratch of a sparse-result worker: a key (int64) and a value (float64) per hash-table slot; a value
# (float64) and a bit per column of the dense accumulator.
SPARSE_SLOT_BYTES = 16
SPARSE_DENSE_BYTES = 8 + 1 / 8
# A row of a sparse result accumulates in p-long arrays (a value and a bit per Y row) once its products are at
# least p / SPARSE_DENSE_ROW: reading its entries back in order then costs p/64 bitmap words, less than sorting
# them (semiring_template.sparse_fill; ``dense_at`` there).
SPARSE_DENSE_ROW = 32


@njit(parallel=True, **JIT)
def _row_flops(xp, xi, colptr, flops):
    """flops[i] = the products X row i forms with Y (Σ over its columns of the Y rows holding them)."""
    for i in prange(xp.size - 1):
        n = 0
        for k in range(xp[i], xp[i + 1]):
            n += colptr[xi[k] + 1] - colptr[xi[k]]
        flops[i] = n


# A sparse result (GraphBLAS ``mxm``: an intersection semiring's product at the pairs of rows sharing a stored
# column only, no dense m × p pass) runs in two passes (count, then fill), down Y's rows (``sparse_by_columns``)
# or down X's (``sparse_by_rows``): ``strategies`` chooses.  Indices are int32 where they fit (SciPy's rule),
# sorted within each row.


def sparse_by_columns(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of the sparse product down Y's rows (m ≤ p): X indexed by column, sums in an
    m-long accumulator per range of Y rows; memory: X's index, the result, 32 bytes × m per range, ranges
    within the scratch budget (``_sparse_by_columns``)."""
    kernels = _semiring_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names)
    # Down Y's rows the space costs 4 bytes a column (X's slots), less than compact_columns' own marker (8),
    # and no serial pass over Y's entries (EDGAR-like, 16 threads: a tenth of the product).
    wide = X.shape[1] > MARKER_MAX_COLUMNS
    xi, yi, ncols = compact_columns(X, Y) if wide else (X.indices, Y.indices, X.shape[1])
    return _sparse_by_columns(kernels, X, xi, Y, yi, ncols, sr, out_dtype, SCRATCH_BUDGET.get())


def sparse_by_rows(
    X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype, accumulator: str = "auto"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of the sparse product down X's rows: Gustavson's row-by-row product, Y
    indexed by column (``O(nnz(Y) + columns)``), with a hash accumulator (rows with products ≥
    p/``SPARSE_DENSE_ROW`` accumulate in p-long arrays and a bitmap instead); per worker a table of 16 bytes ×
    2 min(products of a row, p) (plus 8⅛ bytes × p where some row is dense); workers are as many as the scratch
    budget (``semiring.interfaces.SCRATCH_BUDGET``) allows, at least one.  ``accumulator`` "hash" or "dense" gives
    every row that accumulator."""
    kernels = _semiring_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names)
    m, p = X.shape[0], Y.shape[0]
    budget = SCRATCH_BUDGET.get()
    xi, yi, ncols = compact_columns(X, Y)
    colptr, crow, cval = index_by_column(Y.indptr, yi, Y.data, ncols)
    flops = np.zeros(m, np.int64)
    if m:
        _row_flops(X.indptr, xi, colptr, flops)
    # Rows of at least dense_at products accumulate in p-long arrays, the others in a hash table.
    dense_at = {"hash": np.iinfo(np.int64).max, "dense": 0}.get(accumulator, -(-p // SPARSE_DENSE_ROW))
    dense = flops >= dense_at
    hashed_max = int(flops[~dense].max(initial=0))
    table = 2
    while table < 2 * min(hashed_max, p):
        table *= 2
    dense_width = p if dense.any() else 0
    workers = max(1, min(m, numba.get_num_threads()))
    if budget is not None:
        workers = max(1, min(workers, int(budget // (SPARSE_SLOT_BYTES * table + SPARSE_DENSE_BYTES * dense_width))))
    counts = np.zeros(m, np.int64)
    if m and p:
        kernels.sparse_count(X.indptr, xi, colptr, crow, flops, dense_at, p, table, dense_width, workers, counts)
    indptr, indices, data = _sparse_arrays(counts, p, out_dtype)
    if indices.size:
        args = (X.indptr, xi, X.data, colptr, crow, cval, flops, dense_at, p, table, dense_width, workers)
        kernels.sparse_fill(*args, sr.start(X.shape[1]), sr.params, indptr, indices, data)
    return indptr, indices, data


def _sparse_arrays(counts: np.ndarray, p: int, out_dtype):
    """indptr from the entries of each row, and room for the indices and values (int32 where they fit)."""
    nnz = int(counts.sum())
    index_dtype = np.int32 if max(nnz, p) < 2**31 else np.int64
    indptr = np.zeros(counts.size + 1, index_dtype)
    np.cumsum(counts, out=indptr[1:])
    return indptr, np.empty(nnz, index_dtype), np.empty(nnz, out_dtype)


# A sparse result down Y's rows: per range of Y rows, a count of its entries in each X row (8 bytes × m) and an
# m-long accumulator (24 bytes × m); ranges as many as SPARSE_CHUNKS_PER_THREAD per thread, within the budget.
SPARSE_CHUNKS_PER_THREAD = 4


def row_ranges(indptr: np.ndarray, ranges: int) -> np.ndarray:
    """``cuts`` (int64, ``ranges + 1`` of them, from 0 to the rows): rows cut where the entries before them reach
    each k/ranges of all, so that ranges of skewed or sorted row lengths take about equal work; ranges may be
    empty.  Whatever a malformed indptr holds (``checks``), the cuts are in order and cover every row once."""
    m = indptr.size - 1
    shares = np.arange(ranges + 1, dtype=np.int64) * int(indptr[-1]) // ranges
    cuts = np.searchsorted(indptr, shares.astype(indptr.dtype, copy=False), side="left")
    cuts = np.clip(np.maximum.accumulate(cuts), 0, m).astype(np.int64)
    cuts[0], cuts[-1] = 0, m
    return cuts


def _sparse_by_columns(kernels, X, xi, Y, yi, ncols, sr, out_dtype, budget):
    """``sparse_by_columns`` on its column indices: down Y's rows with X indexed by column (``sparse_fill_by_columns``), or
    with bitmaps of the X rows holding each column where walking them costs more (``sparse_fill_by_bitmaps``).

    X's index is by slot, the columns X holds numbered (``_x_column_slots``): per-column arrays are then one
    int32 slot a column, the rest as long as X's columns, however wide Y's space (EDGAR-like: 858,000 columns,
    3,000 of them in 512 queries; serial passes over every column took half of a 16-thread product)."""
    m, p = X.shape[0], Y.shape[0]
    nchunks = max(1, min(p, SPARSE_CHUNKS_PER_THREAD * numba.get_num_threads()))
    if budget is not None:
        nchunks = max(1, min(nchunks, budget // (32 * max(m, 1))))
    counts = np.zeros((nchunks, m), np.int64)
    if not (m and p):
        return _sparse_arrays(counts.sum(axis=0), p, out_dtype)
    cuts = row_ranges(Y.indptr, nchunks)
    slot, held, xs, nslots = _x_column_slots(X.indptr, xi, ncols)
    colptr, crow, cval = index_by_column(X.indptr, xs, X.data, nslots)
    yi = yi[: Y.indptr[-1]]  # Y's entries only: the kernels read a few ahead (prefetching) up to yi's end
    index = (Y.indptr, yi, slot, held, colptr, crow)
    rowbits = _row_bitmaps(colptr, crow, Y.indptr, yi, slot, m, budget)
    if rowbits is None:
        kernels.sparse_count_by_columns(*index, m, cuts, counts)
    else:
        # The X rows each Y row meets (m bits), kept from the count for the fill where they fit: the fill then
        # ORs no bitmaps of its own.
        words = rowbits.shape[1]
        keep = p * words * 8 <= (SPARSE_BITMAPS_BYTES if budget is None else min(SPARSE_BITMAPS_BYTES, budget))
        met = np.empty((p if keep else 0, words), np.uint64)
        dslot, dense = dense_columns(sr, colptr, crow, cval, m, budget)
        bounds, tile = column_blocks(slot, colptr, dslot, m, cval.itemsize, ncols, nchunks, budget)
        kernels.sparse_count_by_bitmaps(*index, rowbits, met, bounds, tile, cuts, counts)
    indptr, indices, data = _sparse_arrays(counts.sum(axis=0), p, out_dtype)
    if indices.size:
        starts = indptr[:-1].astype(np.int64) + np.cumsum(counts, axis=0) - counts  # each range's offset in a row
        args = (Y.indptr, yi, Y.data, slot, held, colptr, crow, cval)
        ops = (sr.start(X.shape[1]), sr.params, starts, indices, data)
        if rowbits is None:
            kernels.sparse_fill_by_columns(*args, m, cuts, *ops)
        else:
            workers = min(nchunks, numba.get_num_threads())  # each allocates its tile once
            tiles = (rowbits, met, dslot, dense, bounds, tile)
            entries = _tile_room(budget, nchunks) // COLUMN_MAJOR_BYTES
            walks = (COLUMN_MAJOR_WIDTH, entries, int(min(ncols, COLUMN_MAJOR_WIDTH * entries)))
            kernels.sparse_fill_by_bitmaps(*args, *tiles, m, cuts, workers, *walks, *ops)
    return indptr, indices, data


# Down Y's rows with bitmaps, a tile's entries in a block of columns are walked column by column (each column's
# postings read once for the tile rows holding it, ``semiring_template._column_major``) where the block is at
# most this many columns a tile entry (a count a column is kept), else row by row; and where their order takes
# at most a tile's room, COLUMN_MAJOR_BYTES an entry (a tile row and a value, 9 bytes, and up to 4 counts of 4).
COLUMN_MAJOR_WIDTH = 4.0
COLUMN_MAJOR_BYTES = 25

# Down Y's rows with bitmaps, X's index (with its dense columns) is cut into blocks of columns of at most
# SPARSE_BLOCK_BYTES where it is larger, and Y's rows walk them a tile at a time, each row's m-long sums in a
# tile of SPARSE_TILE_BYTES (``semiring_template.sparse_fill_by_bitmaps``): a block and the tile's sums stay in
# L2 (1-2 MiB a core on the machines we run, shared by two hyperthreads), so X's index is read from beyond it
# once a tile, not once a Y row.  (2 threads, scRNA-like: blocks of 256 KiB to 1 MiB within 3 % of each other.)
SPARSE_BLOCK_BYTES = 256 * 2**10
SPARSE_TILE_BYTES = 256 * 2**10
# $SEMIRING_CPU_SPARSE_BLOCKS: "1" or "0" forces blocks (of at least one column) or not.


@njit(**JIT)
def order_by_column(yi, yv, cursor, ends, nj, begin, end, counts, rows, values):
    """Tile rows ``jj`` < nj's entries ``cursor[jj]`` to ``ends[jj]`` (in columns begin..end) in column order, for
    ``semiring_template._column_major``: ``rows`` and ``values`` of them, column c's from ``counts[c - begin - 1]``
    (0 for the first) to ``counts[c - begin]``.  Here, not in the generated module: one compile a type for
    every semiring."""
    width = end - begin
    counts[: width + 1] = 0
    for jj in range(nj):
        for t in range(np.uint64(cursor[jj]), np.uint64(ends[jj])):
            counts[np.uint64(yi[t] - begin + 1)] += 1
    for c in range(width):
        counts[c + 1] += counts[c]
    for jj in range(nj):  # counts[c]: where column c's next entry goes; after, where column c + 1's begin
        for t in range(np.uint64(cursor[jj]), np.uint64(ends[jj])):
            c = np.uint64(yi[t] - begin)
            k = np.uint64(counts[c])
            rows[k] = np.uint8(jj)
            values[k] = np.float64(yv[t])
            counts[c] = np.int32(k + 1)


def _tile_room(budget, nchunks: int) -> int:
    """Bytes of a range's tile: SPARSE_TILE_BYTES, or its share of the scratch budget where that is less."""
    return SPARSE_TILE_BYTES if budget is None else min(SPARSE_TILE_BYTES, budget // max(1, nchunks))


def column_blocks(slot, colptr, dslot, m: int, itemsize: int, ncols: int, nchunks: int, budget):
    """``(bounds, tile)``: the end column of each block of X's index (one block where it fits in one) and the Y
    rows walked together (at most 64: the kernel keeps a bit per tile row)."""
    forced = settings.CPU_SPARSE_BLOCKS.read()
    tile = max(1, min(64, _tile_room(budget, nchunks) // (8 * max(m, 1))))
    weight = np.diff(colptr) * (4 + itemsize)  # bytes a slot: its postings, or its dense column
    weight[dslot >= 0] = m * itemsize
    total = int(weight.sum())
    # Forced: blocks of an eighth of X's index and tiles of 3 rows, so that tests cross both on small inputs.
    block = max(1, total // 8) if forced == "1" else SPARSE_BLOCK_BYTES
    if forced == "0" or total <= block:  # no pass over the columns (EDGAR-like: 858,000, most of them not X's)
        return np.array([ncols], np.int64), tile
    ends = np.cumsum(np.where(slot >= 0, weight[slot], 0))
    bounds = np.unique(np.searchsorted(ends, np.arange(block, total, block), side="right"))
    bounds = np.append(bounds[(bounds > 0) & (bounds < ncols)], ncols).astype(np.int64)
    return bounds, 3 if forced == "1" else tile


# Bitmaps of the X rows holding each column (``_row_bitmaps``) take at most this much memory (and the budget);
# so do the bitmaps of the X rows each Y row meets, kept from the count for the fill.
SPARSE_BITMAPS_BYTES = 64 * 2**20
# $SEMIRING_CPU_SPARSE_BITMAPS: "1" or "0" forces them or not (tests run each path).


def _row_bitmaps(colptr, crow, yp, yi, slot, m: int, budget):
    """``rowbits``: for each slot of a column X holds, the m-bit bitmap of its X rows; or None where a Y entry's
    postings are shorter on average than the m/64 words of a bitmap, or they do not fit."""
    nslots = colptr.size - 1
    words = (m + 63) // 64
    forced = settings.CPU_SPARSE_BITMAPS.read()
    if forced == "0":
        return None
    if forced == "auto":
        limit = SPARSE_BITMAPS_BYTES if budget is None else min(SPARSE_BITMAPS_BYTES, budget)
        if nslots * words * 8 > limit:
            return None
        products, meeting = _postings_met(yp, yi, slot, colptr, max(1, yi.size // POSTINGS_SAMPLE))
        if products < words * meeting:
            return None
    rowbits = np.zeros((nslots, words), np.uint64)
    _fill_row_bitmaps(colptr, crow, rowbits)
    return rowbits


# The choice of bitmaps looks at the entries of every step-th Y row, about this many (a ratio of two sums: a
# sample tells it; all 12.9 M entries of a scale-0.5 scRNA-like Y took 10 ms at 2 threads, 3 % of the product,
# and 2²⁰ of a NYTimes-like one 2.5 ms; 2¹⁶ gave the four shapes' ratios within 2 % of the whole pass's).
POSTINGS_SAMPLE = 1 << 16


@njit(parallel=True, **JIT)
def _postings_met(yp, yi, slot, colptr, step):
    """(Σ over the entries of every step-th Y row of the X rows holding their column, those entries in a column
    X holds): across threads (serial, the whole pass took a tenth of a 16-thread product on scRNA-like data)."""
    products = 0
    meeting = 0
    for k in prange((yp.size - 2 + step) // step):
        for t in range(yp[k * step], yp[k * step + 1]):
            s = slot[yi[t]]
            if s >= 0:
                products += colptr[s + 1] - colptr[s]
                meeting += 1
    return products, meeting


# Down Y's rows with bitmaps, a slot whose X rows are at least m / SPARSE_DENSE_COLUMN is also kept as an
# m-long column of X (zeros elsewhere): a Y entry there is one axpy over it, which vectorises, instead of a walk
# of its postings, each product a scattered add several times dearer (NYTimes- and MovieLens-like: a few dozen
# columns held by a quarter of 512 queries form most of the products; 1/4 was the best of 1/2, 1/4 and 1/8 on
# the four shapes, 2 threads).  Only where a product with 0 adds nothing (plus_times, and a finite y: the
# kernel's test); the columns within SPARSE_BITMAPS_BYTES and the budget.  Figures: docs/cpu-engine.md.
SPARSE_DENSE_COLUMN = 4


def dense_columns(sr, colptr, crow, cval, m: int, budget) -> tuple[np.ndarray, np.ndarray]:
    """``(dslot, dense)``: for each slot its row in ``dense`` (m-long columns of X's values) or -1."""
    nslots = colptr.size - 1
    dslot = np.full(nslots, -1, np.int32)
    if not (sr.add.kind == "plus" and sr.mult.kind == "times"):
        return dslot, np.zeros((0, m), cval.dtype)
    postings = np.diff(colptr)
    chosen = np.flatnonzero(postings * SPARSE_DENSE_COLUMN >= m)
    limit = SPARSE_BITMAPS_BYTES if budget is None else min(SPARSE_BITMAPS_BYTES, budget)
    room = limit // (m * cval.itemsize)
    if chosen.size > room:  # the densest that fit
        chosen = np.sort(chosen[np.argsort(-postings[chosen], kind="stable")[:room]])
    dslot[chosen] = np.arange(chosen.size, dtype=np.int32)
    dense = np.zeros((chosen.size, m), cval.dtype)
    _fill_dense_columns(colptr, crow, cval, chosen, dense)
    return dslot, dense


@njit(**JIT)
def _fill_dense_columns(colptr, crow, cval, chosen, dense):
    for k in range(chosen.size):
        for q in range(colptr[chosen[k]], colptr[chosen[k] + 1]):
            dense[k, crow[q]] = cval[q]


@njit(parallel=True, **JIT)
def _fill_row_bitmaps(colptr, crow, rowbits):
    for s in prange(colptr.size - 1):
        for q in range(colptr[s], colptr[s + 1]):
            r = crow[q]
            rowbits[s, r >> 6] |= np.uint64(1) << np.uint64(r & 63)
