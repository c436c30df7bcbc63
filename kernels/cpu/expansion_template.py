"""Template of the kernels that apply one scalar expression ``f``: ``jit.generate`` copies it with ``f`` rendered.

Each generated copy defines ``f`` over one set of variables, and only the
kernels written for that set are compiled (numba compiles on first call):

* ``f(x, params)`` — :func:`row_reduce` (row norms, ``elementwise.row_norm``);
* ``f(c0, c1, nx0, nx1, ny0, ny1, n, params)`` (``semiring.interfaces.EXPANSION_VARIABLES``)
  — :func:`expand`, :func:`select_count`, :func:`select_fill` (``elementwise``);
* ``f(c, nu, nv, params)`` (``GRAPH_EXPANSION_VARIABLES``) — :func:`edge_expand` (``graph.expand``).

As written (the ops block below), ``f`` is the row norm ``x * x``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from semiring.kernels.cpu.jit import JIT

# <ops> replaced in each generated copy; as written: the squared norm of a row


@njit(inline="always", **JIT)
def f(x, params):
    return x * x


# </ops>


@njit(parallel=True, **JIT)
def row_reduce(indptr, data, out):
    empty = np.empty(0, np.float64)
    for i in prange(indptr.size - 1):
        acc = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            acc += f(np.float64(data[k]), empty)
        out[i] = acc


@njit(parallel=True, **JIT)
def expand(c0, c1, nx0, nx1, ny0, ny1, n, params, out):
    m, p = out.shape
    for i in prange(m):
        for j in range(p):
            out[i, j] = f(c0[i, j], c1[i, j], nx0[i], nx1[i], ny0[j], ny1[j], n, params)


@njit(parallel=True, **JIT)
def select_count(c0, c1, nx0, nx1, ny0, ny1, n, params, counts):
    for i in prange(counts.size):
        k = 0
        for j in range(c0.shape[1]):
            k += f(c0[i, j], c1[i, j], nx0[i], nx1[i], ny0[j], ny1[j], n, params) != 0.0
        counts[i] = k


@njit(parallel=True, **JIT)
def select_fill(c0, c1, nx0, nx1, ny0, ny1, n, params, indptr, rows, cols):
    for i in prange(indptr.size - 1):
        k = indptr[i]
        for j in range(c0.shape[1]):
            if f(c0[i, j], c1[i, j], nx0[i], nx1[i], ny0[j], ny1[j], n, params) != 0.0:
                rows[k] = i
                cols[k] = j
                k += 1


@njit(parallel=True, **JIT)
def edge_expand(rows, cols, c, norms, out):
    empty = np.empty(0, np.float64)
    for k in prange(c.size):
        out[k] = f(np.float64(c[k]), norms[rows[k]], norms[cols[k]], empty)
