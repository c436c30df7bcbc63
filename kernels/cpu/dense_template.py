"""Template of one semiring's dense kernel: ``jit.generate`` copies it with the semiring's ops in the ops block.

Rows of X against rows of Y held as dense arrays, every column visited: the
union semirings (cityblock's ``plus_absdiff``, chebyshev's ``max_absdiff``...)
on dense or dense-enough blocks (``dense.union_product``).  As written, this
file is a working module for ``plus_absdiff``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from semiring.kernels.cpu.jit import JIT

# <ops> replaced in each generated copy; as written: plus_absdiff


@njit(inline="always", **JIT)
def add(x, y, params):
    return x + y


@njit(inline="always", **JIT)
def mult(x, y, params):
    return abs(x - y)


# </ops>


@njit(parallel=True, **JIT)
def tiled_kernel(X, YT, start, params, tile, out):
    # out[i, j] = start ⊕ (⊕_k mult(X[i, k], YT[k, j])), k in column order (each entry's own sum, in one order).
    # Y is given transposed (n × p), so for fixed rows of X and a column k the innermost loop runs along j over
    # contiguous memory and independent accumulators: it vectorises whatever the ops, with no reassociation of
    # any sum.  Four rows of X share each load of Y (register blocking: 2.5x one row at a time, measured); a
    # tile of ``tile`` columns of YT (n × tile values) is read once per four rows while it stays in cache, and
    # tiles are shared out between threads.
    m, n = X.shape
    p = YT.shape[1]
    for t in prange((p + tile - 1) // tile):
        j0 = t * tile
        j1 = min(p, j0 + tile)
        w = j1 - j0
        acc = np.empty((4, w), np.float64)
        for i0 in range(0, m, 4):
            rows = min(4, m - i0)
            acc[:] = start
            if rows == 4:
                a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
                for k in range(n):
                    x0, x1 = np.float64(X[i0, k]), np.float64(X[i0 + 1, k])
                    x2, x3 = np.float64(X[i0 + 2, k]), np.float64(X[i0 + 3, k])
                    y = YT[k, j0:j1]
                    for j in range(w):
                        yj = np.float64(y[j])
                        a0[j] = add(a0[j], mult(x0, yj, params), params)
                        a1[j] = add(a1[j], mult(x1, yj, params), params)
                        a2[j] = add(a2[j], mult(x2, yj, params), params)
                        a3[j] = add(a3[j], mult(x3, yj, params), params)
            else:
                for q in range(rows):
                    a = acc[q]
                    for k in range(n):
                        x = np.float64(X[i0 + q, k])
                        y = YT[k, j0:j1]
                        for j in range(w):
                            a[j] = add(a[j], mult(x, np.float64(y[j]), params), params)
            for q in range(rows):
                out[i0 + q, j0:j1] = acc[q]
