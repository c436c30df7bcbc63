"""Graph kernels of the CPU engine (numba, multi-core, ``nogil``); ``CpuGraphEngine`` runs them.

The adjacency is canonical CSR (sorted, unique column indices per row) of a
symmetric pattern without self-loops; ``distances.graph`` checks that first
(with :func:`check` below, through ``CpuGraphEngine.check_graph``).  Every
kernel keeps its memory O(vertices + edges): intersections walk the stored
neighbour lists, nothing enumerates wedges.

* :func:`intersect_count` — ``|N(u) ∩ N(v)|`` of two sorted lists: a merge when
  the lengths are within ``SKEW`` of each other, else each element of the
  shorter list is found in the longer by galloping (doubling then binary
  search, the search start moving forward), so the cost follows the shorter list
  (seed 001's MPS with pivot skip).
* :func:`common_neighbors` — every undirected edge once (``u < v``) and the
  count written to both of its stored entries (symmetric assignment).
* :func:`orient` + :func:`triangle_total` — the edges ``u → v`` with
  ``u ≺ v`` in a total order (degree then id, or id), so each triangle is found
  exactly once, at its two lowest vertices: ``Σ_(u,v) |N⁺(u) ∩ N⁺(v)|``, each
  u's out-list in a per-thread byte map, vertices in chunks of equal work.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from semiring import expr as _expr
from semiring.engine import GRAPH_EXPANSION_VARIABLES

from .jit import JIT
from .rowops import expression_kernels

# Merge while the longer list is at most SKEW times the shorter (seed 001 switches at ~50).
SKEW = 32


@njit(inline="always", **JIT)
def lower_bound(indices, lo, hi, x):
    """First position in the sorted ``indices[lo:hi]`` whose value is not less than ``x``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(inline="always", **JIT)
def find(indices, lo, hi, x):
    """Position of ``x`` in the sorted ``indices[lo:hi]``, or -1."""
    k = lower_bound(indices, lo, hi, x)
    return k if k < hi and indices[k] == x else -1


@njit(inline="always", **JIT)
def _gallop(indices, lo, hi, x):
    """``lower_bound`` found by doubling steps from ``lo`` first: cheap when ``x`` is near."""
    step = 1
    while lo + step < hi and indices[lo + step] < x:
        lo += step
        step <<= 1
    return lower_bound(indices, lo, min(hi, lo + step + 1), x)


@njit(inline="always", **JIT)
def intersect_count(a_idx, a, ae, b_idx, b, be):
    """``|a_idx[a:ae] ∩ b_idx[b:be]|`` of two sorted lists; merge or gallop by their skew."""
    if ae - a > be - b:
        a_idx, a, ae, b_idx, b, be = b_idx, b, be, a_idx, a, ae
    count = 0
    if (be - b) > SKEW * (ae - a):
        for k in range(a, ae):
            b = _gallop(b_idx, b, be, a_idx[k])
            if b == be:
                break
            if b_idx[b] == a_idx[k]:
                count += 1
                b += 1
        return count
    while a < ae and b < be:
        x, y = a_idx[a], b_idx[b]
        if x == y:
            count += 1
            a += 1
            b += 1
        elif x < y:
            a += 1
        else:
            b += 1
    return count


@njit(parallel=True, **JIT)
def check(indptr, indices, data, weighted):
    """Counts of (self-loops, entries whose reverse is missing, reverse present with another weight)."""
    n = indptr.size - 1
    loops = 0
    missing = 0
    unequal = 0
    for u in prange(n):
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            if v == u:
                loops += 1
                continue
            r = find(indices, indptr[v], indptr[v + 1], u)
            if r < 0:
                missing += 1
            elif weighted and data[r] != data[k]:
                unequal += 1
    return loops, missing, unequal


@njit(parallel=True, **JIT)
def common_neighbors(indptr, indices, out):
    """``out[k] = |N(u) ∩ N(v)|`` for every stored ``(u, v)``: computed at ``u < v``, mirrored to ``(v, u)``."""
    n = indptr.size - 1
    for u in prange(n):
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            if v <= u:
                continue
            c = intersect_count(indices, indptr[u], indptr[u + 1], indices, indptr[v], indptr[v + 1])
            out[k] = c
            out[find(indices, indptr[v], indptr[v + 1], u)] = c


@njit(inline="always", **JIT)
def precedes(u, v, du, dv, by_degree):
    """The total order: by degree, ties by id (``by_degree``), else by id alone."""
    if by_degree and du != dv:
        return du < dv
    return u < v


@njit(parallel=True, **JIT)
def _out_degrees(indptr, indices, by_degree, counts):
    n = indptr.size - 1
    for u in prange(n):
        du = indptr[u + 1] - indptr[u]
        c = 0
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            if precedes(u, v, du, indptr[v + 1] - indptr[v], by_degree):
                c += 1
        counts[u] = c


@njit(parallel=True, **JIT)
def _fill_oriented(indptr, indices, by_degree, lp, li):
    n = indptr.size - 1
    for u in prange(n):
        du = indptr[u + 1] - indptr[u]
        t = lp[u]
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            if precedes(u, v, du, indptr[v + 1] - indptr[v], by_degree):
                li[t] = v
                t += 1


def orient(indptr, indices, by_degree: bool):
    """The oriented graph L (``u → v`` for ``u ≺ v``) as CSR; rows stay sorted by id, memory O(edges)."""
    n = indptr.size - 1
    counts = np.zeros(n, indptr.dtype)
    if n:
        _out_degrees(indptr, indices, by_degree, counts)
    lp = np.zeros(n + 1, indptr.dtype)
    np.cumsum(counts, out=lp[1:])
    li = np.empty(int(lp[-1]), indices.dtype)
    if li.size:
        _fill_oriented(indptr, indices, by_degree, lp, li)
    return lp, li


@njit(parallel=True, **JIT)
def _triangle_work(lp, li, work):
    """work[u] = the entries ``triangle_total`` reads at u: its out-list, and the out-list of each out-neighbour."""
    for u in prange(lp.size - 1):
        w = lp[u + 1] - lp[u]
        for k in range(lp[u], lp[u + 1]):
            w += lp[li[k] + 1] - lp[li[k]]
        work[u] = w


@njit(parallel=True, **JIT)
def _triangle_chunks(lp, li, bounds, marks):
    """Σ over u → v of |N⁺(u) ∩ N⁺(v)|, vertices in chunks ``bounds[c]:bounds[c+1]`` of about equal work.

    u's out-list is marked in its thread's byte map, then each out-neighbour's list is counted against the map
    (no comparisons, no branches on order), unless that list is more than ``SKEW`` times longer: then the
    shorter list is found in it by galloping.
    """
    total = 0
    for c in prange(bounds.size - 1):
        mark = marks[numba.get_thread_id()]
        for u in range(bounds[c], bounds[c + 1]):
            a, ae = lp[u], lp[u + 1]
            if ae - a < 2:
                continue  # a triangle at u needs two out-neighbours
            for k in range(a, ae):
                mark[li[k]] = True
            for k in range(a, ae):
                v = li[k]
                b, be = lp[v], lp[v + 1]
                if be - b > SKEW * (ae - a):
                    total += intersect_count(li, a, ae, li, b, be)
                else:
                    for t in range(b, be):
                        total += mark[li[t]]
            for k in range(a, ae):
                mark[li[k]] = False
    return total


def triangle_total(lp, li) -> int:
    """Every triangle once: ``Σ over u → v of |N⁺(u) ∩ N⁺(v)|`` on the oriented graph, balanced by work.

    The vertices are cut into chunks of about equal work (``_triangle_work``), 16 per thread, so a few
    high-degree vertices do not leave threads idle; each thread has a byte map of the vertices.
    """
    n = lp.size - 1
    work = np.zeros(n, np.int64)
    _triangle_work(lp, li, work)
    cumulative = np.cumsum(work)
    threads = numba.get_num_threads()
    nchunks = max(1, min(n, 16 * threads))
    targets = cumulative[-1] * np.arange(1, nchunks) / nchunks
    bounds = np.concatenate([[0], np.searchsorted(cumulative, targets, side="right"), [n]]).astype(np.int64)
    marks = np.zeros((threads, n), np.bool_)
    return int(_triangle_chunks(lp, li, np.unique(bounds), marks))


@njit(parallel=True, **JIT)
def row_sums(indptr, values, out):
    for u in prange(indptr.size - 1):
        acc = 0
        for k in range(indptr[u], indptr[u + 1]):
            acc += values[k]
        out[u] = acc


@njit(parallel=True, **JIT)
def _compact_fill(indptr, indices, keep, new_indptr, new_indices, position):
    for u in prange(indptr.size - 1):
        t = new_indptr[u]
        for k in range(indptr[u], indptr[u + 1]):
            if keep[k]:
                new_indices[t] = indices[k]
                position[t] = k
                t += 1


def compact(indptr, indices, keep):
    """The entries where ``keep`` holds, as CSR, with each kept entry's old position."""
    n = indptr.size - 1
    counts = np.zeros(n, np.int64)
    if n:
        row_sums(indptr, keep, counts)  # entries kept per row
    new_indptr = np.zeros(n + 1, indptr.dtype)
    np.cumsum(counts, out=new_indptr[1:])
    new_indices = np.empty(int(new_indptr[-1]), indices.dtype)
    position = np.empty(new_indices.size, np.int64)
    if new_indices.size:
        _compact_fill(indptr, indices, keep, new_indptr, new_indices, position)
    return new_indptr, new_indices, position


# --------------------------------------------------------------------------- expansions over the edges


def expand(tree: _expr.Node, rows, cols, c, norms) -> np.ndarray:
    """``out[k] = f(c[k], norms[rows[k]], norms[cols[k]])``: a measure from intersections and norms."""
    out = np.empty(c.size, np.float64)
    if out.size:
        expression_kernels(tree, GRAPH_EXPANSION_VARIABLES).edge_expand(rows, cols, c, norms.astype(np.float64), out)
    return out
