"""Exact recomputation of the entries a measure's expanded form cancels on, where no semiring product can.

Euclidean's cancelling entries are one union product (``Σ(x−y)²``, a ``Refinement``'s semiring).  Correlation's
are not: its exact form centres each row by its mean over *all* ``n`` columns, the unstored zeros included,
and a semiring op sees no row's mean.  Here the centred sums are split by where the two rows store values,

    Σ_k (x_k−a)(y_k−b) = Σ_both x'y' − b·Σ_x-only x' − a·Σ_y-only y' + (n − |x ∪ y|)·a·b,   x' = x − a on x's
    stored entries, y' = y − b on y's,

every piece a sum of centred values (the two-pass form NumPy's ``var`` uses), so nothing of size ``n·mean²``
is ever subtracted.  Computed with array operations only, NumPy or CuPy alike (the engine's device matrix has
SciPy's ``indptr``/``indices``/``data``/``shape``), in float64, for the listed entries a chunk at a time.
"""

from __future__ import annotations

import numpy as np

from semiring import arrays

# Entries (stored values of the listed pairs' rows) expanded at once: 4 Mi, ~100 MiB of temporaries.
CHUNK_ENTRIES = 1 << 22


def _row_stats(xp, A):
    """Per row: the mean over all columns ``a``, ``Σ (x − a)`` over the stored entries, ``Σ (x − a)²`` over
    every column (an unstored zero contributing ``a²``), and the stored count."""
    m, n = A.shape
    indptr = xp.asarray(A.indptr).astype(np.int64)
    nnz = int(indptr[-1])
    data = A.data[:nnz].astype(np.float64)
    counts = indptr[1:] - indptr[:-1]
    rows = xp.searchsorted(indptr, xp.arange(nnz), side="right") - 1
    mean = xp.bincount(rows, weights=data, minlength=m) / n if n else xp.zeros(m, np.float64)
    centred = data - mean[rows]
    stored = xp.bincount(rows, weights=centred, minlength=m)
    var = xp.bincount(rows, weights=centred * centred, minlength=m) + (n - counts) * mean * mean
    return mean, stored, var, counts, indptr


def _expand(xp, indptr, rows):
    """The stored entries of ``rows`` (repeats allowed) laid end to end: each one's position in ``rows`` and its
    index into the matrix's ``indices``/``data``."""
    begin = indptr[rows]
    lengths = indptr[rows + 1] - begin
    ends = xp.cumsum(lengths)
    t = xp.arange(int(ends[-1]) if ends.size else 0)
    q = xp.searchsorted(ends, t, side="right")
    return q, begin[q] + t - (ends[q] - lengths[q])


def centred_correlation(X, Y, rows, cols):
    """SciPy's correlation distance of X's row ``rows[e]`` and Y's row ``cols[e]`` for every listed entry ``e``,
    exactly (see the module's docstring): a float64 array on X's device, clipped to [0, 2] keeping NaN."""
    xp = arrays.array_module(X.data)
    n = X.shape[1]
    ax, px, vx, kx, ipx = _row_stats(xp, X)
    ay, py, vy, ky, ipy = _row_stats(xp, Y)
    rows, cols = xp.asarray(rows).astype(np.int64), xp.asarray(cols).astype(np.int64)
    out = xp.empty(rows.size, np.float64)
    lengths = (ipx[rows + 1] - ipx[rows]) + (ipy[cols + 1] - ipy[cols])
    # A chunk of pairs: its entries within CHUNK_ENTRIES, and (pair, column) keys within int64.
    most_pairs = max(1, min(rows.size, (2**62) // max(n, 1)))
    start = 0
    while start < rows.size:
        reach = xp.cumsum(lengths[start : start + most_pairs])
        stop = start + max(1, int(xp.searchsorted(reach, CHUNK_ENTRIES, side="right")))
        pairs = rows[start:stop], cols[start:stop]
        out[start:stop] = _pairs(xp, X, Y, *pairs, n, ipx, ipy, (ax, px, vx, kx), (ay, py, vy, ky))
        start = stop
    return out


def _pairs(xp, X, Y, rows, cols, n, ipx, ipy, xs, ys):
    ax, px, vx, kx = (s[rows] for s in xs)
    ay, py, vy, ky = (s[cols] for s in ys)
    qx, ex = _expand(xp, ipx, rows)
    qy, ey = _expand(xp, ipy, cols)
    xkey = qx * n + xp.asarray(X.indices)[ex].astype(np.int64)
    ykey = qy * n + xp.asarray(Y.indices)[ey].astype(np.int64)  # ascending: pairs in order, columns sorted
    at = xp.minimum(xp.searchsorted(ykey, xkey), max(ykey.size - 1, 0))
    hit = (ykey[at] == xkey) if ykey.size else xp.zeros(xkey.size, bool)
    q, m = qx[hit], rows.size
    x = X.data[ex[hit]].astype(np.float64) - ax[q]
    y = Y.data[ey[at[hit]]].astype(np.float64) - ay[q]
    both = xp.bincount(q, weights=x * y, minlength=m)
    x_both = xp.bincount(q, weights=x, minlength=m)
    y_both = xp.bincount(q, weights=y, minlength=m)
    k_both = xp.bincount(q, minlength=m)
    neither = n - kx - ky + k_both
    cov = both - ay * (px - x_both) - ax * (py - y_both) + neither * ax * ay
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        q = vx * vy  # each root apart where the product over- or underflows (semiring.expr.root_of_product)
        d = 1.0 - cov / xp.where((q > 1e-300) & (q < np.inf), xp.sqrt(q), xp.sqrt(vx) * xp.sqrt(vy))
    return xp.where(d < 0.0, 0.0, xp.where(d > 2.0, 2.0, d))
