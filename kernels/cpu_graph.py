"""Graph kernels of the CPU engine (numba, multi-core, ``nogil``).

The adjacency is canonical CSR (sorted, unique column indices per row) of a
symmetric pattern without self-loops; ``distances.graph`` checks that first
(with :func:`check` below).  Every kernel keeps its memory O(vertices + edges):
intersections walk the stored neighbour lists, nothing enumerates wedges.

* :func:`intersect_count` — ``|N(u) ∩ N(v)|`` of two sorted lists: a merge when
  the lengths are within ``SKEW`` of each other, else each element of the
  shorter list is found in the longer by galloping (doubling then binary
  search, the search start moving forward), so the cost follows the shorter list
  (seed 001's MPS with pivot skip).
* :func:`common_neighbors` — every undirected edge once (``u < v``) and the
  count written to both of its stored entries (symmetric assignment).
* :func:`orient` + :func:`triangle_total` — the edges ``u → v`` with
  ``u ≺ v`` in a total order (degree then id, or id), so each triangle is found
  exactly once, at its two lowest vertices: ``Σ_(u,v) |N⁺(u) ∩ N⁺(v)|``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from semiring import expr as _expr

JIT = {"nogil": True, "error_model": "numpy", "cache": False}

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
def triangle_total(lp, li):
    """``Σ over u → v of |N⁺(u) ∩ N⁺(v)|``: every triangle once."""
    n = lp.size - 1
    total = 0
    for u in prange(n):
        for k in range(lp[u], lp[u + 1]):
            v = li[k]
            total += intersect_count(li, lp[u], lp[u + 1], li, lp[v], lp[v + 1])
    return total


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

EXPANSION_VARIABLES = ("c", "nu", "nv")


_EXPANSIONS: dict = {}


def _expansion_kernel(tree: _expr.Node):
    if tree not in _EXPANSIONS:
        f = njit(inline="always", **JIT)(_expr.compile_python(tree, EXPANSION_VARIABLES))

        @njit(parallel=True, **JIT)
        def kernel(rows, cols, c, norms, out):
            empty = np.empty(0, np.float64)
            for k in prange(c.size):
                out[k] = f(np.float64(c[k]), norms[rows[k]], norms[cols[k]], empty)

        _EXPANSIONS[tree] = kernel
    return _EXPANSIONS[tree]


def expand(tree: _expr.Node, rows, cols, c, norms) -> np.ndarray:
    """``out[k] = f(c[k], norms[rows[k]], norms[cols[k]])``: a measure from intersections and norms."""
    out = np.empty(c.size, np.float64)
    if out.size:
        _expansion_kernel(tree)(rows, cols, c, norms.astype(np.float64), out)
    return out


# --------------------------------------------------------------------------- the engine interface
# The same functions as kernels.cuda_graph, on SciPy CSR matrices (G) held in host memory.
# Triangles per edge and per vertex come from the common-neighbour counts (an edge's support is
# |N(u) ∩ N(v)|): numba has no atomics for scattering one triangle to three edges from parallel loops.

xp = np


def check_graph(G, weighted: bool) -> dict:
    """How many entries break each rule (canonical order is ensured by ``semiring.validation``)."""
    if G.nnz == 0:
        return {"self-loops": 0, "missing reverse": 0, "unequal reverse weight": 0, "unsorted": 0}
    loops, missing, unequal = check(G.indptr, G.indices, G.data, weighted)
    return {"self-loops": loops, "missing reverse": missing, "unequal reverse weight": unequal, "unsorted": 0}


def degrees(G) -> np.ndarray:
    return np.diff(G.indptr)


def edge_rows(G) -> np.ndarray:
    return np.repeat(np.arange(G.shape[0], dtype=G.indices.dtype), np.diff(G.indptr))


def common_neighbor_counts(G) -> np.ndarray:
    out = np.zeros(G.nnz, np.int64)
    if G.nnz:
        common_neighbors(G.indptr, G.indices, out)
    return out


def edge_measure(G, tree) -> np.ndarray:
    """A measure of ``(|N(u) ∩ N(v)|, deg u, deg v)`` at every stored edge."""
    return expand(tree, edge_rows(G), G.indices, common_neighbor_counts(G), degrees(G))


def triangle_count_total(G, by_degree: bool) -> int:
    lp, li = orient(G.indptr, G.indices, by_degree)
    return int(triangle_total(lp, li)) if li.size else 0


def edge_triangles(G, by_degree: bool) -> np.ndarray:
    return common_neighbor_counts(G)


def vertex_triangles(G, by_degree: bool) -> np.ndarray:
    out = np.zeros(G.shape[0], np.int64)
    if G.shape[0]:
        row_sums(G.indptr, common_neighbor_counts(G), out)
    return out // 2  # a vertex's triangle is counted at both of its edges in the triangle


def compact_graph(G, keep):
    """The subgraph of the kept entries, and their positions in G."""
    indptr, indices, position = compact(G.indptr, G.indices, keep.astype(np.bool_))
    return type(G)((G.data[position], indices, indptr), shape=G.shape), position


def masked_product(G, P, sr) -> np.ndarray:
    """``C⟨P⟩ = G ⊕.⊗ Gᵀ``: the semiring primitive at P's entries (P a CSR pattern)."""
    from . import cpu

    return cpu.pairwise(G, G, sr, np.float64, mask=P)


def row_norm(G, tree) -> np.ndarray:
    from . import cpu

    return cpu.row_norm(G, tree)


def to_host(a):
    return a


def nnz(G) -> int:
    return int(G.indptr[-1])
