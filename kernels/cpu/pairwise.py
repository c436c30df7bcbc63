"""The semiring kernels of the CPU engine: products of rows against rows (numba, multi-core).

Each kernel is a loop skeleton written once below; the semiring's ops are
rendered to scalar Python (``semiring.expr.render_python``), compiled by numba
and inlined into the skeleton through a closure, so one skeleton serves every
semiring and the compiled code has no per-element call overhead.

Strategies (rows of X against rows of Y; Y is streamed as stored, never transposed):

* intersection, dense result — ``inverted_kernel``: a block of X rows is
  indexed by column (bounded memory: one block at a time), then each Y row's
  nonzeros walk the X rows sharing their column, so only products that exist
  are formed, as in SpGEMM, and sums land in a cache-resident tile.
* union, dense result — a worker scatters one X row into a dense scratch
  vector indexed by column (values, plus a stamp saying "stored in row i", so
  explicitly stored zeros count as stored) and streams Y rows through it, then
  makes a second pass over the X row for the columns the Y row did not hit (by
  structure, so a stored zero is counted once).
* masked (sampled) products — each mask entry ``(rows[s], cols[s])`` (an
  ``Entries``, in any order) merges its two sorted rows: no per-column scratch,
  so the cost follows the mask.

Huge, sparse column spaces are first compacted to the columns that occur, so
per-column arrays stay small (see ``compact_columns``).

Values are accumulated in float64 whatever the input type.
"""

from __future__ import annotations

from functools import cache

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from semiring.engine import Entries

from .jit import JIT, compile_scalar


@cache
def _semiring_kernels(key: tuple, add_tree, mult_tree, param_names: tuple[str, ...]):
    """Compile the pairwise kernels for one semiring key (expression + semantics)."""
    union = key[2] == "union"
    mult = compile_scalar(mult_tree, ("x", "y"), param_names)
    add = compile_scalar(add_tree, ("x", "y"), ())

    @njit(inline="always", **JIT)
    def row_pair(i, j, xp, xi, xv, yp, yi, yv, dense, stamp, hit, token, start, params):
        acc = start
        if union:
            for t in range(yp[j], yp[j + 1]):
                c = yi[t]
                if stamp[c] == i:
                    acc = add(acc, mult(dense[c], np.float64(yv[t]), params), params)
                    hit[c] = token
                else:
                    acc = add(acc, mult(0.0, np.float64(yv[t]), params), params)
            for k in range(xp[i], xp[i + 1]):
                if hit[xi[k]] != token:
                    acc = add(acc, mult(np.float64(xv[k]), 0.0, params), params)
        else:
            for t in range(yp[j], yp[j + 1]):
                c = yi[t]
                if stamp[c] == i:
                    acc = add(acc, mult(dense[c], np.float64(yv[t]), params), params)
        return acc

    @njit(parallel=True, **JIT)
    def inverted_kernel(xp, xi, xv, yp, yi, yv, ncols, start, params, out):
        # Intersection only: each product x*y of a shared column is formed once
        # (as in SpGEMM), by walking, for each nonzero of a Y row, the X rows
        # holding that column.  The index is built per block of X rows, so its
        # memory stays bounded; Y is streamed as stored, never transposed.
        m, p = xp.size - 1, yp.size - 1
        for x0 in range(0, m, X_BLOCK):
            x1 = min(m, x0 + X_BLOCK)
            colptr, crow, cval = _invert_rows(xp, xi, xv, x0, x1, ncols)
            ntiles = (p + Y_TILE - 1) // Y_TILE
            nchunks = min(ntiles, 8 * numba.get_num_threads())
            for chunk in prange(nchunks):
                acc = np.empty((Y_TILE, x1 - x0), np.float64)  # acc[jj, i]: one Y row's sums stay in L1
                for tile in range(chunk * ntiles // nchunks, (chunk + 1) * ntiles // nchunks):
                    j0 = tile * Y_TILE
                    nj = min(Y_TILE, p - j0)
                    acc[:nj] = start
                    for jj in range(nj):
                        for s in range(yp[j0 + jj], yp[j0 + jj + 1]):
                            c = yi[s]
                            y = np.float64(yv[s])
                            for q in range(colptr[c], colptr[c + 1]):
                                r = crow[q]
                                acc[jj, r] = add(acc[jj, r], mult(cval[q], y, params), params)
                    for r in range(x1 - x0):
                        for jj in range(nj):
                            out[x0 + r, j0 + jj] = acc[jj, r]

    @njit(parallel=True, **JIT)
    def dense_kernel(xp, xi, xv, yp, yi, yv, ncols, start, params, out):
        m, p = xp.size - 1, yp.size - 1
        nblocks = min(m, 2 * numba.get_num_threads())  # each block allocates scratch of ncols
        for b in prange(nblocks):
            dense = np.zeros(ncols, np.float64)
            stamp = np.full(ncols, -1, np.int64)
            hit = np.full(ncols if union else 0, -1, np.int64)
            for i in range(b * m // nblocks, (b + 1) * m // nblocks):
                for k in range(xp[i], xp[i + 1]):
                    dense[xi[k]] = xv[k]
                    stamp[xi[k]] = i
                for j in range(p):
                    out[i, j] = row_pair(i, j, xp, xi, xv, yp, yi, yv, dense, stamp, hit, i * p + j, start, params)

    @njit(inline="always", **JIT)
    def merge_pair(i, j, xp, xi, xv, yp, yi, yv, start, params):
        # Two sorted rows walked together: no per-column scratch, so a sparse
        # mask costs only the rows it touches.  Structure decides, as above.
        acc = start
        a, ae, b, be = xp[i], xp[i + 1], yp[j], yp[j + 1]
        while a < ae and b < be:
            ca, cb = xi[a], yi[b]
            if ca == cb:
                acc = add(acc, mult(np.float64(xv[a]), np.float64(yv[b]), params), params)
                a += 1
                b += 1
            elif ca < cb:
                if union:
                    acc = add(acc, mult(np.float64(xv[a]), 0.0, params), params)
                a += 1
            else:
                if union:
                    acc = add(acc, mult(0.0, np.float64(yv[b]), params), params)
                b += 1
        if union:
            for k in range(a, ae):
                acc = add(acc, mult(np.float64(xv[k]), 0.0, params), params)
            for k in range(b, be):
                acc = add(acc, mult(0.0, np.float64(yv[k]), params), params)
        return acc

    @njit(parallel=True, **JIT)
    def masked_kernel(xp, xi, xv, yp, yi, yv, rows, cols, start, params, out):
        # out[s] = X row rows[s] against Y row cols[s]; entries in chunks of
        # consecutive s (in CSR order, consecutive rows), several per thread.
        n = rows.size
        nchunks = min(n, 8 * numba.get_num_threads())
        for b in prange(nchunks):
            for s in range(b * n // nchunks, (b + 1) * n // nchunks):
                out[s] = merge_pair(rows[s], cols[s], xp, xi, xv, yp, yi, yv, start, params)

    return (dense_kernel if union else inverted_kernel), masked_kernel


# Rows of X indexed per block, and Y rows per tile of the inverted kernel: a
# tile's sums (Y_TILE x X_BLOCK float64 = 128 KiB) stay in L2.
X_BLOCK = 1024
Y_TILE = 16


@njit(**JIT)
def _invert_rows(xp, xi, xv, x0, x1, ncols):
    """Rows x0..x1 of X by column: for column c, rows crow[colptr[c]:colptr[c+1]] (relative to x0)."""
    colptr = np.zeros(ncols + 1, np.int64)
    for k in range(xp[x0], xp[x1]):
        colptr[xi[k] + 1] += 1
    for c in range(ncols):
        colptr[c + 1] += colptr[c]
    fill = colptr[:-1].copy()
    crow = np.empty(xp[x1] - xp[x0], np.int32)
    cval = np.empty(xp[x1] - xp[x0], np.float64)
    for i in range(x0, x1):
        for k in range(xp[i], xp[i + 1]):
            pos = fill[xi[k]]
            crow[pos] = i - x0
            cval[pos] = xv[k]
            fill[xi[k]] += 1
    return colptr, crow, cval


def compact_columns(X: sp.csr_matrix, Y: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, int]:
    """Column indices of X and Y renumbered onto the columns that occur in either.

    The renumbering is monotone, so rows stay sorted; per-column arrays then
    have one slot per occurring column instead of one per column of the space.
    Used when the space is much wider than the data: a hashed feature space of
    2**40 columns, or EDGAR-like data with 858,000 columns and a few nonzeros
    per row, where per-column scratch would cost more than the products.
    """
    ncols = X.shape[1]
    nnz = X.indptr[-1] + (0 if Y is X else Y.indptr[-1])
    if ncols <= max(1 << 14, 4 * nnz):
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


def pairwise(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype, mask: Entries | None = None) -> np.ndarray:
    """``C[i, j] = ⊕_k X[i,k] ⊗ Y[j,k]`` over the columns ``sr.semantics`` selects.

    Inputs are canonical CSR (checked by ``semiring.validation``).  Returns a
    dense ``(m, p)`` array, or with ``mask`` the values at its entries
    ``(mask.rows[s], mask.cols[s])``, in its order.
    """
    dense_kernel, masked_kernel = _semiring_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names)
    start = sr.start(X.shape[1])
    if mask is None:
        xi, yi, ncols = compact_columns(X, Y)
        out = np.empty((X.shape[0], Y.shape[0]), dtype=out_dtype)
        if out.size:
            dense_kernel(X.indptr, xi, X.data, Y.indptr, yi, Y.data, ncols, start, sr.params, out)
        return out
    rows, cols = mask
    out = np.empty(len(rows), dtype=out_dtype)
    if out.size:
        args = (X.indptr, X.indices, X.data, Y.indptr, Y.indices, Y.data)
        masked_kernel(*args, rows, cols, start, sr.params, out)
    return out
