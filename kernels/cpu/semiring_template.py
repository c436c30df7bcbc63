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
from llvmlite import ir
from numba import njit, prange, types
from numba.core.extending import intrinsic

from semiring.kernels.cpu.jit import JIT
from semiring.kernels.cpu.pairwise import X_BLOCK, Y_TILE, invert_rows, order_by_column

# <ops> replaced in each generated copy; as written: plus_times (an intersection), and the product itself as
# its expansion (a measure's, applied as each entry is written: ``strategies.product_expanded``), and nothing to
# refine (a measure's test of the entries it recomputes exactly)
UNION = False


@njit(inline="always", **JIT)
def add(x, y, params):
    return x + y


@njit(inline="always", **JIT)
def mult(x, y, params):
    return x * y


@njit(inline="always", **JIT)
def expansion(c0, c1, nx0, nx1, ny0, ny1, n, params):
    return c0


@njit(inline="always", **JIT)
def refine_when(c0, c1, nx0, nx1, ny0, ny1, n, params):
    return np.float64(0.0)


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


@njit(**JIT)
def _held_columns(colptr):
    # A bit per column, set where the block of X rows holds it: a Y entry of a column no X row holds is skipped
    # on a read of this bitmap (ncols / 8 bytes, cache-resident) instead of colptr (8 bytes a column).
    ncols = colptr.size - 1
    held = np.zeros((ncols + 63) >> 6, np.uint64)
    for c in range(ncols):
        if colptr[c + 1] > colptr[c]:
            held[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
    return held


@njit(inline="always", **JIT)
def _x_block(xp, xi, xv, x0, ncols, p, nthreads):
    # The setup of a block of X rows from x0 in the inverted and margins kernels: its end, its rows by column and
    # the bitmap of its columns, and Y's tiles with the chunks they are dealt in.
    x1 = min(xp.size - 1, x0 + X_BLOCK)
    colptr, crow, cval = invert_rows(xp, xi, xv, x0, x1, ncols)
    ntiles = (p + Y_TILE - 1) // Y_TILE
    return x1, colptr, crow, cval, _held_columns(colptr), ntiles, min(ntiles, 8 * nthreads)


@njit(inline="always", **JIT)
def _holds(held, c):
    return (held[c >> 6] >> np.uint64(c & 63)) & np.uint64(1)


@njit(inline="always", **JIT)
def _any_flagged(row, nj, i, j0, xn, yn, n, eparams):
    hit = False
    for jj in range(nj):
        j = j0 + jj
        hit |= refine_when(row[jj], 0.0, xn[0, i], xn[1, i], yn[0, j], yn[1, j], n, eparams) != 0.0
    return hit


@njit(inline="always", **JIT)
def _flag(c0, i, j, xn, yn, n, eparams, flagged, chunk):
    # flagged[chunk]: [count, i0, j0, i1, j1, …]; entries past its room are counted, not kept (the caller
    # then recomputes the whole product apart).
    if refine_when(c0, 0.0, xn[0, i], xn[1, i], yn[0, j], yn[1, j], n, eparams) != 0.0:
        k = flagged[chunk, 0]
        if 2 * k + 2 < flagged.shape[1]:
            flagged[chunk, 2 * k + 1] = i
            flagged[chunk, 2 * k + 2] = j
        flagged[chunk, 0] = k + 1


@njit(inline="always", **JIT)
def _listed(i, j, lists, chunk):
    # lists[chunk]: [count, i0, j0, i1, j1, …], as ``_flag`` keeps them
    k = lists[chunk, 0]
    if 2 * k + 2 < lists.shape[1]:
        lists[chunk, 2 * k + 1] = i
        lists[chunk, 2 * k + 2] = j
    lists[chunk, 0] = k + 1


@njit(**JIT)
def _row_tiles(chunk, nchunks, ntiles, mirror):
    # The rows of tiles a chunk of a product kernel takes: a run of them; with ``mirror`` (the tiles on and above
    # the diagonal only, fewer a row further down) pairs of a row from the top and its partner from the bottom,
    # every nchunks-th pair, so each chunk has ntiles + 1 tiles a pair (numba gives each thread a run of chunks:
    # dealt one row a chunk, the first thread's rows held three quarters of the tiles on two threads).
    if not mirror:
        return np.arange(chunk * ntiles // nchunks, (chunk + 1) * ntiles // nchunks)
    npairs = (ntiles + 1) // 2
    rows = np.empty(2 * ((npairs - chunk + nchunks - 1) // nchunks), np.int64)
    k = 0
    for pair in range(chunk, npairs, nchunks):
        rows[k] = pair
        k += 1
        if ntiles - 1 - pair != pair:
            rows[k] = ntiles - 1 - pair
            k += 1
    return rows[:k]


@njit(parallel=True, **JIT)
def float32_product_kernel(
    xd, yd, xa, ya, gamma, floor, tau, tile, nthreads, mirror, xn, yn, n, eparams, flagged, uncertain, out
):
    # xd @ yd.T (float32 blocks of X's and Y's rows) by BLAS in tiles of ``tile`` rows and columns, each
    # thread multiplying its own (BLAS held to one thread by the caller: none then waits on another's pool) and
    # expanding it while it is in cache.  A product is known only to within e = gamma * xa[i] * ya[j] + floor
    # (dense.py's error model), and the expansion is monotone in c0 (every measure's is), so its values at c - e
    # and c + e bound the exact entry's: the entry is written as their midpoint, within half their spread of
    # it.  Where the spread exceeds tau of that value (cancelling, or not finite), or the product itself
    # overflowed (an expansion may clip infinity to a finite value), the entry is listed in ``uncertain`` for
    # the caller to recompute from the rows (its value here is a placeholder); the others are tested by
    # refine_when and listed in ``flagged``, as the kernels above list theirs.  Two evaluations an entry, in a
    # loop that vectorises.  ``mirror`` (X's rows are Y's, and the expansion and refine_when are symmetric in
    # the two rows' norms): only the tiles on and above the diagonal are multiplied, each written to its mirror
    # too, its listed entries with theirs (``_row_tiles`` deals their rows so every chunk has as many).
    m, p = out.shape
    ny0, ny1 = yn[0], yn[1]  # rows of yn: 2-D indexing in the loop does not vectorise
    ntiles = (m + tile - 1) // tile
    nchunks = min((ntiles + 1) // 2 if mirror else ntiles, 8 * nthreads)
    for chunk in prange(nchunks):
        far = np.empty(tile, np.bool_)
        written = np.empty(tile, out.dtype)  # a row's entries, stored with one copy: ``out`` may be a strided view
        for t in _row_tiles(chunk, nchunks, ntiles, mirror):
            i0, i1 = t * tile, min(m, (t + 1) * tile)
            for j0 in range(i0 if mirror else 0, p, tile):
                j1 = min(p, j0 + tile)
                mirrored = mirror and j0 != i0
                c = np.dot(xd[i0:i1], yd[j0:j1].T)  # row slices: contiguous, as BLAS takes them
                for r in range(i1 - i0):
                    i = i0 + r
                    row = c[r]
                    x0, x1, a = xn[0, i], xn[1, i], gamma * xa[i]
                    for jj in range(j1 - j0):  # vectorises; the rare entries are listed below
                        j = j0 + jj
                        v, e = np.float64(row[jj]), a * ya[j] + floor
                        lo = expansion(v - e, 0.0, x0, x1, ny0[j], ny1[j], n, eparams)
                        hi = expansion(v + e, 0.0, x0, x1, ny0[j], ny1[j], n, eparams)
                        f = 0.5 * (lo + hi)
                        written[jj] = f
                        far[jj] = not (abs(hi - lo) <= tau * abs(f) and abs(v) < np.inf)  # inf may clip to finite
                    out[i, j0:j1] = written[: j1 - j0]
                    if far[: j1 - j0].any() or _any_flagged(row, j1 - j0, i, j0, xn, yn, n, eparams):
                        for jj in range(j1 - j0):
                            if far[jj]:
                                _listed(i, j0 + jj, uncertain, chunk)
                                if mirrored:
                                    _listed(j0 + jj, i, uncertain, chunk)
                            else:
                                _flag(np.float64(row[jj]), i, j0 + jj, xn, yn, n, eparams, flagged, chunk)
                                if mirrored:
                                    _flag(np.float64(row[jj]), j0 + jj, i, xn, yn, n, eparams, flagged, chunk)
                if mirrored:
                    out[j0:j1, i0:i1] = out[i0:i1, j0:j1].T


@njit(parallel=True, **JIT)
def expand_at_kernel(rows, cols, c, xn, yn, n, eparams, out, flag):
    # out[rows[s], cols[s]] = the expansion of c[s] (products recomputed at those entries); flag[s]: whether
    # refine_when holds there.
    for s in prange(rows.size):
        i, j = rows[s], cols[s]
        out[i, j] = expansion(c[s], 0.0, xn[0, i], xn[1, i], yn[0, j], yn[1, j], n, eparams)
        flag[s] = refine_when(c[s], 0.0, xn[0, i], xn[1, i], yn[0, j], yn[1, j], n, eparams) != 0.0


@njit(parallel=True, **JIT)
def inverted_kernel(xp, xi, xv, yp, yi, yv, ncols, nthreads, start, params, xn, yn, n, eparams, flagged, out):
    # Intersection only: each product x*y of a shared column is formed once
    # (as in SpGEMM), by walking, for each nonzero of a Y row, the X rows
    # holding that column.  The index is built per block of X rows, so its
    # memory stays bounded; Y is streamed as stored, never transposed.
    # Each entry is written as expansion(c0, 0, xn[:, i], yn[:, j], n, eparams): the product itself, or a
    # one-term measure of it and its rows' norms (xn, yn: 2 × rows), with no m × p temporary; entries where
    # refine_when holds are listed per chunk (``_flag``) for the caller to recompute.
    m, p = xp.size - 1, yp.size - 1
    for x0 in range(0, m, X_BLOCK):
        x1, colptr, crow, cval, held, ntiles, nchunks = _x_block(xp, xi, xv, x0, ncols, p, nthreads)
        for chunk in prange(nchunks):
            acc = np.empty((Y_TILE, x1 - x0), np.float64)  # acc[jj, i]: one Y row's sums stay in L1
            row = np.empty(Y_TILE, np.float64)
            for tile in range(chunk * ntiles // nchunks, (chunk + 1) * ntiles // nchunks):
                j0 = tile * Y_TILE
                nj = min(Y_TILE, p - j0)
                acc[:nj] = start
                for jj in range(nj):
                    for s in range(yp[j0 + jj], yp[j0 + jj + 1]):
                        c = yi[s]
                        if not _holds(held, c):
                            continue
                        y = np.float64(yv[s])
                        for q in range(colptr[c], colptr[c + 1]):
                            r = crow[q]
                            acc[jj, r] = add(acc[jj, r], mult(cval[q], y, params), params)
                ny0, ny1 = yn[0, j0 : j0 + nj], yn[1, j0 : j0 + nj]
                for r in range(x1 - x0):
                    i = x0 + r
                    for jj in range(nj):  # one X row's sums, contiguous: the expansion below vectorises
                        row[jj] = acc[jj, r]
                    o = out[i, j0 : j0 + nj]  # a row view: 2-D indexing in the loop does not vectorise
                    for jj in range(nj):
                        o[jj] = expansion(row[jj], 0.0, xn[0, i], xn[1, i], ny0[jj], ny1[jj], n, eparams)
                    if _any_flagged(row, nj, i, j0, xn, yn, n, eparams):  # a test that vectorises, then the rare list
                        for jj in range(nj):
                            _flag(row[jj], i, j0 + jj, xn, yn, n, eparams, flagged, chunk)


@njit(parallel=True, **JIT)
def row_kernel(
    xp, xv, xs, nslots, width, keyptr, prow, pval, pos, nthreads, upper, start, params, xn, yn, n, eparams, flagged, out
):
    # Intersection only, each X row at a time against a range of ``width`` Y rows (Gustavson's product): the X
    # row's entries walk the Y rows of the range holding their column (``pairwise.place_row_index``) into a
    # range-long accumulator, which is then written as one run of the output row, expanded as in inverted_kernel.
    # Long runs: where products are few against the entries (EDGAR-like rows), writing the result is the work.
    # Sums are formed in the inverted kernel's order (column by column), so both give the same bits.
    # ``upper`` (X is Y, an op that commutes, the product unexpanded): only the entries j >= i are formed, each X
    # entry's walk in its own row's range starting at its own posting (``pos``); ``pairwise.mirror_upper`` then
    # copies them below the diagonal.  Entry (j, i)'s sum is (i, j)'s terms, each mult(x, y) as mult(y, x), in
    # the same column order: the same value.
    m, p = xp.size - 1, out.shape[1]
    nranges = (p + width - 1) // width
    nblocks = max(1, min(m, (8 * nthreads + nranges - 1) // nranges))  # X rows cut too where ranges are few
    items = nranges * nblocks
    nchunks = min(items, 8 * nthreads)
    for chunk in prange(nchunks):
        acc = np.full(width, start, np.float64)
        for item in range(chunk * items // nchunks, (chunk + 1) * items // nchunks):
            rg, b = item // nblocks, item % nblocks
            j0 = rg * width
            nj = min(width, p - j0)
            a = acc[:nj]
            ny0, ny1 = yn[0, j0 : j0 + nj], yn[1, j0 : j0 + nj]
            i0, i1 = _row_block(m, b, nblocks, upper)
            for i in range(i0, i1):
                first = 0  # the first column of the range written: past the diagonal where ``upper``
                if upper:
                    if j0 + nj <= i:
                        continue
                    first = max(0, i - j0)
                own = upper and j0 <= i  # X row i is row i of this range: its entries' own postings start
                for k in range(xp[i], xp[i + 1]):
                    key = rg * nslots + xs[k]
                    x = np.float64(xv[k])
                    # unsigned indices: numba tests a signed one for a negative (wraparound) at every product
                    for q in range(np.uint64(pos[k] if own else keyptr[key]), np.uint64(keyptr[key + 1])):
                        jj = np.uint64(prow[q])
                        a[jj] = add(a[jj], mult(x, pval[q], params), params)
                o = out[i, j0 : j0 + nj]  # a row view: 2-D indexing in the loop below does not vectorise
                nx0, nx1 = xn[0, i], xn[1, i]
                # from a literal 0 where the whole run is written: a loop from the variable ``first`` did not
                # vectorise (EDGAR-like cosine, whose work is this loop: 24 -> 34 ms a call)
                if first == 0:
                    hit = _expand_run(a, o, 0, nj, nx0, nx1, ny0, ny1, n, eparams)
                else:
                    hit = _expand_run(a, o, first, nj, nx0, nx1, ny0, ny1, n, eparams)
                if hit:  # rare: a test that vectorises above, then the list
                    for jj in range(first, nj):
                        _flag(a[jj], i, j0 + jj, xn, yn, n, eparams, flagged, chunk)
                a[first:] = start


@njit(inline="always", **JIT)
def _expand_run(a, o, first, nj, nx0, nx1, ny0, ny1, n, eparams):
    # o[first:nj] from the sums a[first:nj] of one X row against a run of Y rows; whether any entry needs the
    # exact recomputation (a test that vectorises, the list made by the caller where it does)
    hit = False
    for jj in range(first, nj):
        o[jj] = expansion(a[jj], 0.0, nx0, nx1, ny0[jj], ny1[jj], n, eparams)
        hit |= refine_when(a[jj], 0.0, nx0, nx1, ny0[jj], ny1[jj], n, eparams) != 0.0
    return hit


@njit(inline="always", **JIT)
def _row_block(m, b, nblocks, upper):
    # Block b of nblocks of X's rows: equal counts, or where only j >= i is formed (row i's work falling with i),
    # equal shares of the triangle (the rows before i hold 1 - (1 - i/m)^2 of it).
    if not upper:
        return b * m // nblocks, (b + 1) * m // nblocks
    return _triangle_row(m, b, nblocks), _triangle_row(m, b + 1, nblocks)


@njit(inline="always", **JIT)
def _triangle_row(m, b, nblocks):
    if b >= nblocks:
        return m
    return min(m, int(m * (1.0 - np.sqrt(1.0 - b / nblocks))))


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
def _x_margins(xp, xv, params):
    # Each X row's Σ f(x, 0) and Σ |f(x, 0)|, in its entries' order (the margins kernels' X side).
    m = xp.size - 1
    mx, ax = np.empty(m, np.float64), np.empty(m, np.float64)
    for i in prange(m):
        s, a = 0.0, 0.0
        for k in range(xp[i], xp[i + 1]):
            f = mult(np.float64(xv[k]), 0.0, params)
            s += f
            a += abs(f)
        mx[i], ax[i] = s, a
    return mx, ax


@njit(parallel=True, **JIT)
def margins_kernel(xp, xi, xv, yp, yi, yv, ncols, nthreads, xmax, start, params, xn, yn, n, eparams, flagged, out):
    # A plus-monoid union (Semiring.margin_split): Σ_{X_i} f(x, 0) + Σ_{Y_j} f(0, y) + Σ_{X_i ∩ Y_j} [f(x, y) −
    # f(x, 0) − f(0, y)], the last an intersection formed as in inverted_kernel, so only products that exist are
    # computed.  Where the sum cancels to at most 1/8 of the margins' magnitudes (or anything is not finite),
    # the entry is recomputed exactly by merging its rows (merge_pair), in the kernel, while its rows are hot.
    # Entries are written through expansion, as in inverted_kernel.
    m, p = xp.size - 1, yp.size - 1
    mx, ax = _x_margins(xp, xv, params)
    for x0 in range(0, m, X_BLOCK):
        x1, colptr, crow, cval, held, ntiles, nchunks = _x_block(xp, xi, xv, x0, ncols, p, nthreads)
        for chunk in prange(nchunks):
            acc = np.empty((Y_TILE, x1 - x0), np.float64)
            my, ay = np.empty(Y_TILE, np.float64), np.empty(Y_TILE, np.float64)
            pending = np.empty(xmax, np.int64)
            for tile in range(chunk * ntiles // nchunks, (chunk + 1) * ntiles // nchunks):
                j0 = tile * Y_TILE
                nj = min(Y_TILE, p - j0)
                acc[:nj] = 0.0
                for jj in range(nj):
                    s, a = 0.0, 0.0
                    for t in range(yp[j0 + jj], yp[j0 + jj + 1]):
                        c = yi[t]
                        y = np.float64(yv[t])
                        f0y = mult(0.0, y, params)
                        s += f0y
                        a += abs(f0y)
                        if not _holds(held, c):
                            continue
                        for q in range(colptr[c], colptr[c + 1]):
                            r = crow[q]
                            acc[jj, r] += mult(cval[q], y, params) - mult(cval[q], 0.0, params) - f0y
                    my[jj], ay[jj] = s, a
                for r in range(x1 - x0):
                    i = x0 + r
                    for jj in range(nj):
                        j = j0 + jj
                        v = acc[jj, r] + mx[i] + my[jj]
                        if not abs(v) > 0.125 * (ax[i] + ay[jj]):  # cancels, or not finite: exactly
                            v = merge_pair(i, j, xp, xi, xv, yp, yi, yv, pending, start, params)
                        out[i, j] = expansion(v, 0.0, xn[0, i], xn[1, i], yn[0, j], yn[1, j], n, eparams)
                        _flag(v, i, j, xn, yn, n, eparams, flagged, chunk)


@njit(parallel=True, **JIT)
def margins_from_cross(ip, ic, iv, xp, xi, xv, yp, yi, yv, xmax, start, params, xn, yn, n, eparams, flagged, out):
    # The margins kernel's entries with the intersection term given as a sparse result (``ip, ic, iv``: CSR of
    # Σ_{X_i ∩ Y_j} [f(x, y) − f(x, 0) − f(0, y)], the cross semiring's ``product_sparse``, its sums from 0 in
    # column order as the margins kernel's acc), so the same bits: each X row's cross sums scattered into a
    # p-long row, then every entry summed with the two margins, recomputed by merging where it cancels, and
    # written through expansion.
    m, p = xp.size - 1, yp.size - 1
    mx, ax = _x_margins(xp, xv, params)
    my, ay = np.empty(p, np.float64), np.empty(p, np.float64)
    for j in prange(p):
        s, a = 0.0, 0.0
        for t in range(yp[j], yp[j + 1]):
            f0y = mult(0.0, np.float64(yv[t]), params)
            s += f0y
            a += abs(f0y)
        my[j], ay[j] = s, a
    nchunks = min(m, flagged.shape[0])
    for chunk in prange(nchunks):
        row = np.zeros(p, np.float64)
        pending = np.empty(xmax, np.int64)
        for i in range(chunk * m // nchunks, (chunk + 1) * m // nchunks):
            for k in range(ip[i], ip[i + 1]):
                row[ic[k]] = iv[k]
            for j in range(p):
                v = row[j] + mx[i] + my[j]
                if not abs(v) > 0.125 * (ax[i] + ay[j]):  # cancels, or not finite: exactly
                    v = merge_pair(i, j, xp, xi, xv, yp, yi, yv, pending, start, params)
                out[i, j] = expansion(v, 0.0, xn[0, i], xn[1, i], yn[0, j], yn[1, j], n, eparams)
                _flag(v, i, j, xn, yn, n, eparams, flagged, chunk)
            for k in range(ip[i], ip[i + 1]):
                row[ic[k]] = 0.0


@njit(parallel=True, **JIT)
def extremum_kernel(xp, xi, xv, yp, yi, yv, ncols, nthreads, largest, start, params, out):
    # A max- or min-monoid union (chebyshev's max |x − y|), values and products finite: the best over X_i ∩ Y_j
    # of f(x, y), over X_i \ Y_j of f(x, 0) and over Y_j \ X_i of f(0, y), in any order (the monoid is
    # idempotent, commutative and exact).  The intersection is formed from Y's postings, only the products that
    # exist (as the inverted kernel's); each side's best outside the other is its best margin whose column the
    # other row lacks: X_i's margins best first, those of its first 64 found in Y_j marked in a word as the
    # intersection is formed (beyond them, Y_j's sorted columns searched), Y_j's margins best first checked
    # against X_i's columns (stamped).  A merge walks both rows for every pair; here a pair costs its shared
    # columns and, mostly, one look at each side.
    m, p = xp.size - 1, yp.size - 1
    ycolptr, yrow, yval = invert_rows(yp, yi, yv, 0, p, ncols)
    ybest = np.empty(yp[p], np.int64)  # each Y row's entries, best margin f(0, y) first
    for j in prange(p):
        a, b = yp[j], yp[j + 1]
        margins = np.empty(b - a, np.float64)
        for t in range(a, b):
            v = mult(0.0, np.float64(yv[t]), params)
            margins[t - a] = -v if largest else v
        ybest[a:b] = a + np.argsort(margins, kind="mergesort")
    for chunk in prange(nthreads):
        stamp = np.full(ncols, -1, np.int64)
        acc = np.empty(p, np.float64)
        found = np.empty(p, np.uint64)
        for i in range(chunk * m // nthreads, (chunk + 1) * m // nthreads):
            a, b = xp[i], xp[i + 1]
            nx = b - a
            margins = np.empty(nx, np.float64)
            for k in range(a, b):
                v = mult(np.float64(xv[k]), 0.0, params)
                margins[k - a] = -v if largest else v
                stamp[xi[k]] = i
            xbest = a + np.argsort(margins, kind="mergesort")
            acc[:] = start
            found[:] = 0
            for r in range(nx):
                k = xbest[r]
                c, x = xi[k], np.float64(xv[k])
                bit = _u(1) << _u(r) if r < 64 else _u(0)
                # unsigned indices: numba tests a signed one for a negative (wraparound) at every product
                for q in range(_u(ycolptr[c]), _u(ycolptr[c + 1])):
                    j = _u(yrow[q])
                    acc[j] = add(acc[j], mult(x, yval[q], params), params)
                    found[j] |= bit
            for j in range(p):
                v = acc[j]
                missing = ~found[j]
                if missing != _u(0):
                    r = _lowest_bit(missing)[1]
                    if r < nx:
                        v = add(v, mult(np.float64(xv[xbest[r]]), 0.0, params), params)
                elif nx > 64:  # X_i's first 64 are all in Y_j: search on among the rest
                    for r in range(64, nx):
                        c = xi[xbest[r]]
                        at = yp[j] + np.searchsorted(yi[yp[j] : yp[j + 1]], c)
                        if at == yp[j + 1] or yi[at] != c:
                            v = add(v, mult(np.float64(xv[xbest[r]]), 0.0, params), params)
                            break
                for t in range(_u(yp[j]), _u(yp[j + 1])):
                    s = _u(ybest[t])
                    if stamp[_u(yi[s])] != i:
                        v = add(v, mult(0.0, np.float64(yv[s]), params), params)
                        break
                out[i, j] = v


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
# product.  Y is indexed by column once (colptr, crow, cval: values as Y stores them, widened as read); X row i's
# entries walk the Y rows holding their column, and the products are summed per Y row j in one of two
# accumulators, chosen per row by its products: flops[i] >= dense_at (p / ``pairwise.SPARSE_DENSE_ROW``, or forced):
# * many products: p-long values, kept at ``start`` between rows, and a p-bit bitmap of the j met, set with no
#   test; the row's entries come out sorted by walking the bitmap's set bits (p/64 words, then one step per
#   entry), no sort and no p-long scan, and the values are reset to ``start`` on the way;
# * few: an open-addressing table of 2^b >= 2 min(flops[i], p) slots, read back and sorted; scratch follows the
#   row's work, never p.
# Two passes: count the entries of each row (the bitmap's bits, or the keys), then fill them.  Workers take rows
# w, w + workers, …; each owns one accumulator of each kind.
#
# Inner loops index through ``_u``: numba tests every signed index for wraparound (a negative one counts from
# the end), which took half the time of these loops (python -m benchmarks cpu --measures sparse, scRNA-like:
# 162 products a result entry); their indices are never negative.


@njit(inline="always", **JIT)
def _u(k):
    return np.uint64(k)


@njit(inline="always", **JIT)
def _slot(keys, j, mask):
    # Linear probing from a multiplicative hash: the slot holding j, or the empty one where j goes.
    h = (_u(j) * _u(2654435761)) & mask
    while keys[h] != -1 and keys[h] != j:
        h = (h + _u(1)) & mask
    return h


@njit(inline="always", **JIT)
def _table_mask(flops_i, p):
    size = 2
    while size < 2 * min(flops_i, p):
        size *= 2
    return _u(size - 1)


# The lowest set bit's position: de Bruijn multiplication (numba has no count-trailing-zeros).
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
# fmt: off
_DEBRUIJN_TABLE = np.array(
    [
        0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43, 22, 45, 39, 33, 30,
        24, 18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11, 46, 26, 40, 15, 34, 20, 31,
        10, 25, 14, 19, 9, 13, 8, 7, 6,
    ],
    np.int64,
)
# fmt: on


@njit(inline="always", **JIT)
def _lowest_bit(word):
    # (the lowest set bit of a nonzero word, its position)
    low = word & (~word + _u(1))
    return low, _DEBRUIJN_TABLE[(low * _DEBRUIJN) >> _u(58)]


@njit(inline="always", **JIT)
def _popcount(word):
    # Set bits of a word (SWAR: numba has no popcount).
    word = word - ((word >> _u(1)) & _u(0x5555555555555555))
    word = (word & _u(0x3333333333333333)) + ((word >> _u(2)) & _u(0x3333333333333333))
    word = (word + (word >> _u(4))) & _u(0x0F0F0F0F0F0F0F0F)
    return np.int64((word * _u(0x0101010101010101)) >> _u(56))


@njit(inline="always", **JIT)
def _mark(bits, j):
    bits[_u(j) >> _u(6)] |= _u(1) << (_u(j) & _u(63))


@njit(parallel=True, **JIT)
def sparse_count(xp, xi, colptr, crow, flops, dense_at, p, table, dense_width, workers, counts):
    m = xp.size - 1
    for w in prange(workers):
        keys = np.empty(table, np.int64)
        bits = np.zeros((dense_width + 63) >> 6, np.uint64)
        for i in range(w, m, workers):
            n = 0
            if flops[i] >= dense_at:
                for k in range(xp[i], xp[i + 1]):
                    c = _u(xi[_u(k)])
                    for q in range(colptr[c], colptr[c + _u(1)]):
                        _mark(bits, crow[_u(q)])
                for v in range(bits.size):
                    n += _popcount(bits[v])
                bits[:] = 0
            else:
                mask = _table_mask(flops[i], p)
                keys[: mask + _u(1)] = -1
                for k in range(xp[i], xp[i + 1]):
                    c = _u(xi[_u(k)])
                    for q in range(colptr[c], colptr[c + _u(1)]):
                        j = np.int64(crow[_u(q)])
                        h = _slot(keys, j, mask)
                        if keys[h] == -1:
                            keys[h] = j
                            n += 1
            counts[i] = n


@njit(parallel=True, **JIT)
def sparse_fill(
    xp,
    xi,
    xv,
    colptr,
    crow,
    cval,
    flops,
    dense_at,
    p,
    table,
    dense_width,
    workers,
    start,
    params,
    indptr,
    indices,
    data,
):
    m = xp.size - 1
    for w in prange(workers):
        keys = np.empty(table, np.int64)
        vals = np.empty(table, np.float64)
        bits = np.zeros((dense_width + 63) >> 6, np.uint64)
        dvals = np.full(dense_width, start, np.float64)
        for i in range(w, m, workers):
            a, b = indptr[i], indptr[i + 1]
            if flops[i] >= dense_at:
                for k in range(xp[i], xp[i + 1]):
                    c = _u(xi[_u(k)])
                    x = np.float64(xv[_u(k)])
                    for q in range(colptr[c], colptr[c + _u(1)]):
                        j = _u(crow[_u(q)])
                        dvals[j] = add(dvals[j], mult(x, np.float64(cval[_u(q)]), params), params)
                        _mark(bits, j)
                t = _u(a)
                for v in range(bits.size):
                    word = bits[v]
                    while word:
                        low, bit = _lowest_bit(word)
                        j = (v << 6) + bit
                        indices[t] = j
                        data[t] = dvals[j]
                        dvals[j] = start
                        t += _u(1)
                        word ^= low
                    bits[v] = 0
            else:
                mask = _table_mask(flops[i], p)
                keys[: mask + _u(1)] = -1
                for k in range(xp[i], xp[i + 1]):
                    c = _u(xi[_u(k)])
                    x = np.float64(xv[_u(k)])
                    for q in range(colptr[c], colptr[c + _u(1)]):
                        j = np.int64(crow[_u(q)])
                        h = _slot(keys, j, mask)
                        if keys[h] == -1:
                            keys[h] = j
                            vals[h] = start
                        vals[h] = add(vals[h], mult(x, np.float64(cval[_u(q)]), params), params)
                t = a
                for h in range(mask + _u(1)):
                    if keys[h] != -1:
                        indices[t] = keys[h]
                        t += 1
                indices[a:b] = np.sort(indices[a:b])
                for t in range(a, b):
                    data[t] = vals[_slot(keys, np.int64(indices[t]), mask)]


# When X has fewer rows than Y (queries against a collection), the product runs down Y's rows instead: for each
# Y row j, its entries walk the X rows holding their column (X indexed by the slot of each column it holds,
# ``slot[c]``, -1 for the others; relative rows r, values as X stores them), and the sums per X row r live in an
# m-long accumulator (in L1 for hundreds of queries), reset through the list of rows j touched.  Y's rows are
# cut into ranges in order (range k: rows ``cuts[k]`` to ``cuts[k + 1]``, of about equal entries);
# ``counts[chunk, r]`` are the entries each range gives row r, so each range writes its entries of row r at its
# own offset (``starts``) in increasing j: rows come out sorted with no sort.


@intrinsic
def _prefetch(typingctx, array, index):
    # A hint to bring array[index]'s cache line in (llvm.prefetch: a read, kept in every level); never faults.
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        byte = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [byte], fnty)
        address = builder.bitcast(builder.gep(data, [args[1]]), byte)
        builder.call(fn, [address, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


# Down Y's rows, each Y entry's postings (a few X rows' worth, anywhere in X's index) are asked for this many
# entries before they are walked: the walks are too short for the hardware to prefetch, and waiting on them
# took a third of the fill on scRNA-like data (32 postings an entry, X's index out of L2).
PREFETCH_AHEAD = 4


@njit(inline="always", **JIT)
def _slot_of(slot, held, c):
    # The slot of column c, or -1: X's bit of the column first (a bit a column, in cache), so that Y's columns
    # X lacks read nothing of ``slot`` (4 bytes a column: EDGAR-like, 858,000 columns, read at random).
    c = _u(c)
    if (held[c >> _u(6)] >> (c & _u(63))) & _u(1):
        return slot[c]
    return np.int32(-1)


@njit(inline="always", **JIT)
def _postings(yi, yv, slot, held, colptr, crow, cval, t):
    # (slot, first, end) of Y entry t's postings in X's index (empty where X lacks its column), and its value; the
    # postings of entry t + PREFETCH_AHEAD asked for meanwhile.
    ahead = t + PREFETCH_AHEAD
    if ahead < yi.size:
        s = _slot_of(slot, held, yi[_u(ahead)])
        if s >= 0:
            q = colptr[_u(s)]
            _prefetch(crow, q)
            _prefetch(crow, q + 16)
            _prefetch(cval, q)
            _prefetch(cval, q + 8)
    s = _slot_of(slot, held, yi[_u(t)])
    if s < 0:
        return s, np.int64(0), np.int64(0), 0.0
    return s, np.int64(colptr[_u(s)]), np.int64(colptr[_u(s + 1)]), np.float64(yv[_u(t)])


@njit(parallel=True, **JIT)
def sparse_count_by_columns(yp, yi, slot, held, colptr, crow, m, cuts, counts):
    for chunk in prange(cuts.size - 1):
        mark = np.full(m, -1, np.int64)
        for j in range(cuts[chunk], cuts[chunk + 1]):
            for t in range(yp[j], yp[j + 1]):
                _, q0, q1, _ = _postings(yi, yi, slot, held, colptr, crow, crow, t)
                for q in range(q0, q1):
                    r = _u(crow[_u(q)])
                    if mark[r] != j:
                        mark[r] = j
                        counts[chunk, r] += 1


@njit(parallel=True, **JIT)
def sparse_fill_by_columns(yp, yi, yv, slot, held, colptr, crow, cval, m, cuts, start, params, starts, indices, data):
    for chunk in prange(cuts.size - 1):
        mark = np.full(m, -1, np.int64)
        acc = np.empty(m, np.float64)
        touched = np.empty(m, np.int64)
        pos = starts[chunk].copy()
        for j in range(cuts[chunk], cuts[chunk + 1]):
            n = 0
            for t in range(yp[j], yp[j + 1]):
                _, q0, q1, y = _postings(yi, yv, slot, held, colptr, crow, cval, t)
                for q in range(q0, q1):
                    r = _u(crow[_u(q)])
                    if mark[r] != j:
                        mark[r] = j
                        acc[r] = start
                        touched[n] = r
                        n += 1
                    acc[r] = add(acc[r], mult(np.float64(cval[_u(q)]), y, params), params)
            for u in range(n):
                r = _u(touched[u])
                indices[_u(pos[r])] = j
                data[_u(pos[r])] = acc[r]
                pos[r] += 1


# The same down Y's rows, where the X rows holding a column are many against m/64: each slot's X rows as an
# m-bit bitmap (``rowbits[s]``), ORed over a Y row's columns, give the X rows it meets, so the count costs m/64
# words a Y entry instead of a walk of its postings, and the fill's accumulation needs no test per product: its
# accumulators are kept at ``start`` between Y rows, reset as they are read back through the bits.  ``met``
# (p × m/64 words, or no rows where they would not fit): the bits of each Y row, kept by the count for the fill.
# A slot with ``dslot[s] >= 0`` is also an m-long column of X, ``dense[dslot[s]]`` (zeros where X lacks it:
# plus_times only, ``pairwise.dense_columns``): a finite y there is one vectorised axpy into the accumulators,
# not a walk of its postings; the other rows get 0 (the bits, not the sums, say what is stored).
# A count adds a whole word's bits at once, with no branch per bit, where the word is dense (results of many
# products an entry are often nearly so).
_DENSE_WORD = 16


@njit(inline="always", **JIT)
def _all_met(seen, full):
    # Whether seen holds every X row (``full``: the bits of the last word that stand for rows, ``_last_word``).
    for w in range(seen.size - 1):
        if seen[w] != ~_u(0):
            return False
    return seen[seen.size - 1] == full


@njit(inline="always", **JIT)
def _last_word(m):
    # The bits of an m-bit bitmap's last word that stand for rows.
    return ~_u(0) if m & 63 == 0 else (_u(1) << _u(m & 63)) - _u(1)


@njit(inline="always", **JIT)
def _meets(yi, slot, held, rowbits, t, row_end, end, seen, full):
    # ORs into seen the bitmaps of Y entries t, t + 1, … of a row (up to row_end) in columns below end; returns the
    # first entry not taken, or row_end once the row meets every X row (tested every 8 entries): results of many
    # products an entry are nearly dense (MovieLens-, NYTimes-, scRNA-like: 99-100 % of the entries), and a
    # scRNA-like Y row meets all 512 queries within its first two hundred of 1,600 entries.
    taken = 0
    while t < row_end and yi[_u(t)] < end:
        taken += 1
        if taken & 7 == 0 and _all_met(seen, full):
            return row_end
        ahead = t + PREFETCH_AHEAD  # the bitmap of a Y entry's column, anywhere in rowbits: asked for ahead too
        if ahead < yi.size:
            s = _slot_of(slot, held, yi[_u(ahead)])
            if s >= 0:
                _prefetch(rowbits, s * rowbits.shape[1])
        s = _slot_of(slot, held, yi[_u(t)])
        if s >= 0:
            for w in range(seen.size):
                seen[w] |= rowbits[_u(s), w]
        t += 1
    return t


# The count goes by tiles of Y rows and blocks of X's columns as the fill below does, so that the bitmaps of a
# block (64 bytes a column for 512 queries) are read into L2 once a tile, not once a Y row.


@njit(parallel=True, **JIT)
def sparse_count_by_bitmaps(yp, yi, slot, held, colptr, crow, rowbits, met, bounds, tile, cuts, counts):
    for chunk in prange(cuts.size - 1):
        scratch = np.empty((tile, rowbits.shape[1]), np.uint64)
        cursor = np.empty(tile, np.int64)
        row = counts[chunk]
        full = _last_word(row.size)
        last = cuts[chunk + 1]
        for j0 in range(cuts[chunk], last, tile):
            nj = min(tile, last - j0)
            seen = met[j0 : j0 + nj] if met.shape[0] else scratch[:nj]
            seen[:] = 0
            for jj in range(nj):
                cursor[jj] = yp[j0 + jj]
            for b in range(bounds.size):
                for jj in range(nj):
                    cursor[jj] = _meets(yi, slot, held, rowbits, cursor[jj], yp[j0 + jj + 1], bounds[b], seen[jj], full)
            for jj in range(nj):
                for v in range(seen.shape[1]):
                    word = seen[jj, v]
                    if _popcount(word) >= _DENSE_WORD:
                        base = v << 6
                        for b in range(min(64, row.size - base)):
                            row[base + b] += np.int64((word >> _u(b)) & _u(1))
                        continue
                    while word:
                        low, bit = _lowest_bit(word)
                        row[(v << 6) + bit] += 1
                        word ^= low


# X's index out of L2 (scRNA-like: 512 queries × 1,611 entries, 6.6 MB), each Y row's walks would read their
# postings from further out, every Y row again.  So X's columns are cut into blocks (``bounds``: each block's
# end, in increasing columns; ``pairwise.column_blocks``), each block's postings (and dense columns) within L2,
# and Y's rows taken ``tile`` at a time: the tile's rows walk one block's postings, then the next's, each row's
# sums kept in its own m-long row of ``acc`` (tile × m, in L2) and its entries of the block found by a cursor
# (Y's rows are sorted), so each block is read into L2 once a tile, not once a Y row.  One block and a tile of
# one: the walk of each Y row in turn.


@njit(inline="always", **JIT)
def _walk(crow, cval, q0, q1, a, y, params):
    # Postings q0..q1 of X's index into one Y row's sums a, times y.
    for q in range(_u(q0), _u(q1)):
        r = _u(crow[q])
        a[r] = add(a[r], mult(np.float64(cval[q]), y, params), params)


@njit(inline="always", **JIT)
def _walk_two(crow, cval, q0, q1, a1, y1, a2, y2, params):
    # The same for two Y rows holding the column: each posting read once for both.
    for q in range(_u(q0), _u(q1)):
        r = _u(crow[q])
        x = np.float64(cval[q])
        a1[r] = add(a1[r], mult(x, y1, params), params)
        a2[r] = add(a2[r], mult(x, y2, params), params)


@njit(inline="always", **JIT)
def _axpy(column, a, y, params):
    # An m-long column of X (``dense_columns``) into one Y row's sums a, times a finite y.
    for r in range(a.size):  # vectorises
        a[r] = add(a[r], mult(np.float64(column[r]), y, params), params)


@njit(inline="always", **JIT)
def _accumulate(yi, yv, slot, held, colptr, crow, cval, dslot, dense, t, a, params):
    # Y entry t's products into a (m-long sums of one Y row, at ``start`` where nothing has been added).
    s, q0, q1, y = _postings(yi, yv, slot, held, colptr, crow, cval, t)
    if q1 > q0 and dslot[_u(s)] >= 0 and np.isfinite(y):
        _axpy(dense[_u(dslot[_u(s)])], a, y, params)
    else:
        _walk(crow, cval, q0, q1, a, y, params)


@njit(**JIT)
def _column_major(slot, held, colptr, crow, cval, dslot, dense, acc, m, begin, end, order, params):
    # A tile's entries in columns begin..end, ordered by column (``order``: ``pairwise.order_by_column``), walked
    # column by column: the tile rows holding a column (about 4 of 64 on scRNA-like rows) share each read of its
    # postings, two at a time, where walking row by row read them once a row (scRNA-like products 9 % faster at
    # 2 threads: docs/cpu-engine.md).  Each row's sums still take its columns in increasing order, so the bits
    # are those of the walk row by row.  Compiled apart (not inlined), with buffers of a fixed size: inlined in
    # the parallel loop's body, with buffers grown as needed, it took tests/cpu/test_sparse_results.py from
    # 200 to 288 s cold.
    width = end - begin
    counts, rows, values = order
    k0 = 0
    for c in range(width):
        k1 = counts[c]
        if k1 > k0:
            s = _slot_of(slot, held, begin + c)
            if s >= 0:
                q0, q1 = colptr[_u(s)], colptr[_u(s + 1)]
                if dslot[_u(s)] >= 0:  # an m-long column of X: one axpy an entry (a non-finite y walks)
                    column = dense[_u(dslot[_u(s)])]
                    for k in range(k0, k1):
                        a = acc[_u(rows[k]), :m]
                        if np.isfinite(values[k]):
                            _axpy(column, a, values[k], params)
                        else:
                            _walk(crow, cval, q0, q1, a, values[k], params)
                else:
                    k = k0
                    while k + 1 < k1:
                        a1, a2 = acc[_u(rows[k]), :m], acc[_u(rows[k + 1]), :m]
                        _walk_two(crow, cval, q0, q1, a1, values[k], a2, values[k + 1], params)
                        k += 2
                    if k < k1:
                        _walk(crow, cval, q0, q1, acc[_u(rows[k]), :m], values[k], params)
        k0 = k1


@njit(parallel=True, **JIT)
def sparse_fill_by_bitmaps(
    yp,
    yi,
    yv,
    slot,
    held,
    colptr,
    crow,
    cval,
    rowbits,
    met,
    dslot,
    dense,
    bounds,
    tile,
    m,
    cuts,
    workers,
    column_major,
    column_entries,
    column_width,
    start,
    params,
    starts,
    indices,
    data,
):
    nchunks = cuts.size - 1
    # Each worker allocates its tile once and takes the ranges w·nchunks/workers, … (a tile of 256 KiB a range
    # would be as many allocations and first touches, and munmaps, as ranges: page faults across threads).
    for w in prange(workers):
        scratch = np.empty(rowbits.shape[1], np.uint64)
        # Rows of acc a cache line longer than m: read down a column (below), rows 4 KiB apart would all fall
        # in one set of the cache, and evict each other.
        acc = np.full((tile, (m | 7) + 9), start, np.float64)
        cursor = np.empty(tile, np.int64)
        ends = np.empty(tile, np.int64)
        full = _last_word(m)
        order = (np.empty(column_width + 1, np.int32), np.empty(column_entries, np.uint8), np.empty(column_entries))
        below = np.zeros(m, np.uint64)
        rows = np.empty(rowbits.shape[1], np.uint64)
        pos = np.empty(m, np.int64)
        for chunk in range(w * nchunks // workers, (w + 1) * nchunks // workers):
            pos[:] = starts[chunk]
            first, last = cuts[chunk], cuts[chunk + 1]
            for j0 in range(first, last, tile):
                nj = min(tile, last - j0)
                for jj in range(nj):
                    cursor[jj] = yp[j0 + jj]
                for b in range(bounds.size):
                    begin = bounds[b - 1] if b else 0
                    end = bounds[b]
                    total = 0
                    for jj in range(nj):  # the tile's entries in the block: cursor[jj] to ends[jj]
                        t = cursor[jj]
                        row_end = yp[j0 + jj + 1]
                        while t < row_end and yi[_u(t)] < end:
                            t += 1
                        ends[jj] = t
                        total += t - cursor[jj]
                    # a count a column within a few a tile entry, and the buffers within their bytes
                    if end - begin <= min(column_major * total, column_width) and total <= column_entries:
                        order_by_column(yi, yv, cursor, ends, nj, begin, end, *order)
                        _column_major(slot, held, colptr, crow, cval, dslot, dense, acc, m, begin, end, order, params)
                    else:  # wide and sparse (EDGAR-like): row by row
                        for jj in range(nj):
                            a = acc[jj, :m]
                            for t in range(cursor[jj], ends[jj]):
                                _accumulate(yi, yv, slot, held, colptr, crow, cval, dslot, dense, t, a, params)
                    for jj in range(nj):
                        cursor[jj] = ends[jj]
                # The tile's entries, X row by X row: which of its Y rows meet X row r (a bit each in below[r], and r
                # in ``rows``, the union of the tile's bits), then r's entries written as one run, in increasing j;
                # written Y row by Y row, each entry went to another of m result rows (MovieLens-like, 2 threads:
                # 46 -> 36 ms a product).
                rows[:] = 0
                for jj in range(nj):
                    if met.shape[0]:
                        seen = met[j0 + jj]
                    else:
                        seen = scratch
                        seen[:] = 0
                        _meets(yi, slot, held, rowbits, yp[j0 + jj], yp[j0 + jj + 1], bounds[-1], seen, full)
                    for v in range(seen.size):
                        word = seen[v]
                        rows[v] |= word
                        while word:
                            low, bit = _lowest_bit(word)
                            below[_u((v << 6) + bit)] |= _u(1) << _u(jj)
                            word ^= low
                for v in range(rows.size):
                    union = rows[v]
                    while union:
                        low_r, bit_r = _lowest_bit(union)
                        r = _u((v << 6) + bit_r)
                        word = below[r]
                        below[r] = 0
                        q = pos[r]
                        while word:
                            low, jj = _lowest_bit(word)
                            indices[_u(q)] = j0 + jj
                            data[_u(q)] = acc[jj, r]
                            acc[jj, r] = start
                            q += 1
                            word ^= low
                        pos[r] = q
                        union ^= low_r
