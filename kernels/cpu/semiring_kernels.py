"""Template of one semiring's pairwise kernels: ``jit.generate`` copies it with the semiring's ops in the ops block.

The loop skeletons are written once, here; each semiring gets its own copy of
this module (a file in the kernel cache, see ``jit``) with ``add``, ``mult``
and ``UNION`` replaced, so the ops are inlined and numba can cache the
compiled kernels on disk.  The strategies are described in ``pairwise``;
this file is also a working module for ``plus_times`` (its ops block as written).
``nthreads`` arguments are ``numba.get_num_threads()`` read by the caller: called
inside a kernel it is a dynamic global, which numba's disk cache refuses.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from semiring.kernels.cpu.jit import JIT
from semiring.kernels.cpu.pairwise import X_BLOCK, Y_TILE, invert_rows

# <ops> replaced in each generated copy; as written: plus_times (an intersection)
UNION = False


@njit(inline="always", **JIT)
def add(x, y, params):
    return x + y


@njit(inline="always", **JIT)
def mult(x, y, params):
    return x * y


# </ops>


@njit(inline="always", **JIT)
def row_pair(i, j, xp, xi, xv, yp, yi, yv, dense, stamp, hit, token, start, params):
    acc = start
    if UNION:
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
def inverted_kernel(xp, xi, xv, yp, yi, yv, ncols, nthreads, start, params, out):
    # Intersection only: each product x*y of a shared column is formed once
    # (as in SpGEMM), by walking, for each nonzero of a Y row, the X rows
    # holding that column.  The index is built per block of X rows, so its
    # memory stays bounded; Y is streamed as stored, never transposed.
    m, p = xp.size - 1, yp.size - 1
    for x0 in range(0, m, X_BLOCK):
        x1 = min(m, x0 + X_BLOCK)
        colptr, crow, cval = invert_rows(xp, xi, xv, x0, x1, ncols)
        ntiles = (p + Y_TILE - 1) // Y_TILE
        nchunks = min(ntiles, 8 * nthreads)
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
def dense_kernel(xp, xi, xv, yp, yi, yv, ncols, nblocks, start, params, out):
    # nblocks workers, each with scratch of 3 x ncols (the caller bounds it by the working memory).
    m, p = xp.size - 1, yp.size - 1
    for b in prange(nblocks):
        dense = np.zeros(ncols, np.float64)
        stamp = np.full(ncols, -1, np.int64)
        hit = np.full(ncols if UNION else 0, -1, np.int64)
        for i in range(b * m // nblocks, (b + 1) * m // nblocks):
            for k in range(xp[i], xp[i + 1]):
                dense[xi[k]] = xv[k]
                stamp[xi[k]] = i
            for j in range(p):
                out[i, j] = row_pair(i, j, xp, xi, xv, yp, yi, yv, dense, stamp, hit, i * p + j, start, params)


@njit(inline="always", **JIT)
def merge_pair(i, j, xp, xi, xv, yp, yi, yv, pending, start, params):
    # Two sorted rows walked together: no per-column scratch, so a sparse mask
    # costs only the rows it touches.  Structure decides, as above.  A union
    # adds its terms in the scatter kernel's order (row_pair): Y's entries in
    # order, x or 0 against y, then X's entries Y lacks, held in ``pending``
    # (room for X's row) until then; so both kernels, and masked and dense
    # results, agree to the last bit, whichever ran.
    acc = start
    a, ae, b, be = xp[i], xp[i + 1], yp[j], yp[j + 1]
    npending = 0
    while a < ae and b < be:
        ca, cb = xi[a], yi[b]
        if ca == cb:
            acc = add(acc, mult(np.float64(xv[a]), np.float64(yv[b]), params), params)
            a += 1
            b += 1
        elif ca < cb:
            if UNION:
                pending[npending] = a
                npending += 1
            a += 1
        else:
            if UNION:
                acc = add(acc, mult(0.0, np.float64(yv[b]), params), params)
            b += 1
    if UNION:
        for k in range(b, be):
            acc = add(acc, mult(0.0, np.float64(yv[k]), params), params)
        for t in range(npending):
            acc = add(acc, mult(np.float64(xv[pending[t]]), 0.0, params), params)
        for k in range(a, ae):
            acc = add(acc, mult(np.float64(xv[k]), 0.0, params), params)
    return acc


@njit(parallel=True, **JIT)
def masked_kernel(xp, xi, xv, yp, yi, yv, rows, cols, xmax, nthreads, start, params, out):
    # out[s] = X row rows[s] against Y row cols[s]; entries in chunks of
    # consecutive s (in CSR order, consecutive rows), several per thread.
    # xmax: the longest X row (room for merge_pair's pending entries).
    n = rows.size
    nchunks = min(n, 8 * nthreads)
    for b in prange(nchunks):
        pending = np.empty(xmax if UNION else 0, np.int64)
        for s in range(b * n // nchunks, (b + 1) * n // nchunks):
            out[s] = merge_pair(rows[s], cols[s], xp, xi, xv, yp, yi, yv, pending, start, params)


@njit(parallel=True, **JIT)
def merge_kernel(xp, xi, xv, yp, yi, yv, start, params, out):
    # Every pair by merging its two sorted rows: no per-column scratch at all
    # (scikit-learn's way for manhattan), best for short rows.
    m, p = xp.size - 1, yp.size - 1
    for i in prange(m):
        pending = np.empty(xp[i + 1] - xp[i] if UNION else 0, np.int64)
        for j in range(p):
            out[i, j] = merge_pair(i, j, xp, xi, xv, yp, yi, yv, pending, start, params)


# --------------------------------------------------------------------------- sparse results (intersection only)
#
# C = X ⊕.⊗ Yᵀ keeping only the pairs that share a stored column, as GraphBLAS mxm does: Gustavson's row-by-row
# product with a hash accumulator.  Y is indexed by column once (colptr, crow, cval); X row i's entries walk the
# Y rows holding their column, and the products are summed per Y row j in an open-addressing table of
# 2^b >= 2 min(flops[i], p) slots, so scratch follows the row's work, never p.  Two passes: count the entries of
# each row, then fill them (sorted by j).  Workers take rows w, w + workers, …; each owns one table.


@njit(inline="always", **JIT)
def _slot(keys, j, mask):
    # Linear probing from a multiplicative hash: the slot holding j, or the empty one where j goes.
    h = (j * 2654435761) & mask
    while keys[h] != -1 and keys[h] != j:
        h = (h + 1) & mask
    return h


@njit(inline="always", **JIT)
def _table_mask(flops_i, p):
    size = 2
    while size < 2 * min(flops_i, p):
        size *= 2
    return size - 1


@njit(inline="always", **JIT)
def _dense_row(flops_i, p):
    # A row with many products relative to p accumulates in p-long arrays (no probing, no reset, a row's
    # entries found in order by a scan); the others in a hash table sized by their products.
    return 16 * flops_i >= p


@njit(parallel=True, **JIT)
def sparse_count(xp, xi, colptr, crow, flops, p, table, dense_width, workers, counts):
    m = xp.size - 1
    for w in prange(workers):
        keys = np.empty(table, np.int64)
        mark = np.full(dense_width, -1, np.int64)
        for i in range(w, m, workers):
            n = 0
            if _dense_row(flops[i], p):
                for k in range(xp[i], xp[i + 1]):
                    c = xi[k]
                    for q in range(colptr[c], colptr[c + 1]):
                        if mark[crow[q]] != i:
                            mark[crow[q]] = i
                            n += 1
            else:
                mask = _table_mask(flops[i], p)
                keys[: mask + 1] = -1
                for k in range(xp[i], xp[i + 1]):
                    c = xi[k]
                    for q in range(colptr[c], colptr[c + 1]):
                        h = _slot(keys, np.int64(crow[q]), mask)
                        if keys[h] == -1:
                            keys[h] = crow[q]
                            n += 1
            counts[i] = n


@njit(parallel=True, **JIT)
def sparse_fill(
    xp, xi, xv, colptr, crow, cval, flops, p, table, dense_width, workers, start, params, indptr, indices, data
):
    m = xp.size - 1
    for w in prange(workers):
        keys = np.empty(table, np.int64)
        vals = np.empty(table, np.float64)
        mark = np.full(dense_width, -1, np.int64)
        dvals = np.empty(dense_width, np.float64)
        for i in range(w, m, workers):
            a, b = indptr[i], indptr[i + 1]
            if _dense_row(flops[i], p):
                t = a
                for k in range(xp[i], xp[i + 1]):
                    c = xi[k]
                    x = np.float64(xv[k])
                    for q in range(colptr[c], colptr[c + 1]):
                        j = crow[q]
                        if mark[j] != i:
                            mark[j] = i
                            dvals[j] = start
                            indices[t] = j
                            t += 1
                        dvals[j] = add(dvals[j], mult(x, cval[q], params), params)
                if 16 * (b - a) >= p:  # many entries: a scan of the marks gives them in order
                    t = a
                    for j in range(p):
                        if mark[j] == i:
                            indices[t] = j
                            t += 1
                else:
                    indices[a:b] = np.sort(indices[a:b])
                for t in range(a, b):
                    data[t] = dvals[indices[t]]
            else:
                mask = _table_mask(flops[i], p)
                keys[: mask + 1] = -1
                for k in range(xp[i], xp[i + 1]):
                    c = xi[k]
                    x = np.float64(xv[k])
                    for q in range(colptr[c], colptr[c + 1]):
                        j = np.int64(crow[q])
                        h = _slot(keys, j, mask)
                        if keys[h] == -1:
                            keys[h] = j
                            vals[h] = start
                        vals[h] = add(vals[h], mult(x, cval[q], params), params)
                t = a
                for h in range(mask + 1):
                    if keys[h] != -1:
                        indices[t] = keys[h]
                        t += 1
                indices[a:b] = np.sort(indices[a:b])
                for t in range(a, b):
                    data[t] = vals[_slot(keys, np.int64(indices[t]), mask)]
