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
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from semiring import expr as _expr
from semiring.engine import GRAPH_EXPANSION_VARIABLES

from .jit import JIT
from .rowops import expression_kernels

# Merge while the longer list is at most SKEW times the shorter (seed 001 switches at ~50).
SKEW = 32


@intrinsic
def atomic_add(typingctx, array, index, value):
    """``array[index] += value`` as one atomic step (LLVM ``atomicrmw``), returning the old value.

    numba has no atomics on the CPU; parallel loops that scatter one triangle to edges owned by other
    threads need them.
    """

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        array = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, array, [args[1]], wraparound=False)
        return builder.atomic_rmw("add", pointer, args[2], "monotonic")

    return array.dtype(array, types.intp, array.dtype), codegen


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
def _fill_oriented(indptr, indices, by_degree, lp, li, position):
    n = indptr.size - 1
    for u in prange(n):
        du = indptr[u + 1] - indptr[u]
        t = lp[u]
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            if precedes(u, v, du, indptr[v + 1] - indptr[v], by_degree):
                li[t] = v
                position[t] = k
                t += 1


def orient(indptr, indices, by_degree: bool):
    """The oriented graph L (``u → v`` for ``u ≺ v``) as CSR, rows sorted by id, and the position in G of each
    of its entries; memory O(edges).  L's entries are the undirected edges, each once: entry t is edge t."""
    n = indptr.size - 1
    counts = np.zeros(n, indptr.dtype)
    if n:
        _out_degrees(indptr, indices, by_degree, counts)
    lp = np.zeros(n + 1, indptr.dtype)
    np.cumsum(counts, out=lp[1:])
    li = np.empty(int(lp[-1]), indices.dtype)
    position = np.empty(li.size, indptr.dtype)
    if li.size:
        _fill_oriented(indptr, indices, by_degree, lp, li, position)
    return lp, li, position


@njit(parallel=True, **JIT)
def _fill_edge_ids(indptr, indices, lp, li, position, edge):
    for u in prange(lp.size - 1):
        for t in range(lp[u], lp[u + 1]):
            v = li[t]
            edge[position[t]] = t
            edge[find(indices, indptr[v], indptr[v + 1], u)] = t


def edge_ids(indptr, indices, lp, li, position) -> np.ndarray:
    """The undirected edge (L's entry) of each stored entry of G: ``(u, v)`` and ``(v, u)`` share one."""
    edge = np.empty(indices.size, np.int64)
    if li.size:
        _fill_edge_ids(indptr, indices, lp, li, position, edge)
    return edge


@njit(parallel=True, **JIT)
def _triangle_work(lp, li, work):
    """work[u] = the entries the triangle kernels read at u: its out-list, and the out-list of each out-neighbour
    (or the out-list again when it is searched in a much longer one)."""
    for u in prange(lp.size - 1):
        d = lp[u + 1] - lp[u]
        w = d
        for k in range(lp[u], lp[u + 1]):
            w += min(lp[li[k] + 1] - lp[li[k]], SKEW * d)
        work[u] = w


def _work_chunks(lp, li) -> np.ndarray:
    """Bounds of vertex chunks of about equal work (``_triangle_work``), 16 per thread, so that a few heavy
    vertices do not leave threads idle while one thread finishes them."""
    n = lp.size - 1
    work = np.zeros(n, np.int64)
    _triangle_work(lp, li, work)
    cumulative = np.cumsum(work)
    nchunks = max(1, min(n, 16 * numba.get_num_threads()))
    targets = cumulative[-1] * np.arange(1, nchunks) / nchunks
    return np.unique(np.concatenate([[0], np.searchsorted(cumulative, targets, side="right"), [n]]).astype(np.int64))


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
    """Every triangle once: ``Σ over u → v of |N⁺(u) ∩ N⁺(v)|`` on the oriented graph, balanced by work; each
    thread has a byte map of the vertices."""
    marks = np.zeros((numba.get_num_threads(), lp.size - 1), np.bool_)
    return int(_triangle_chunks(lp, li, _work_chunks(lp, li), marks))


@njit(parallel=True, **JIT)
def _support_chunks(lp, li, bounds, marks, own, shared):
    """The triangles through each edge of L, found as in ``_triangle_chunks``; each triangle u ≺ v ≺ w (found at
    u, the marks holding the positions of u's out-list) counts once at each of its three edges.

    The edges u → v and u → w are u's: only u's thread writes them (``own``).  The edge v → w is another
    vertex's, written from any thread: atomically, in ``shared``.
    """
    for c in prange(bounds.size - 1):
        mark = marks[numba.get_thread_id()]
        for u in range(bounds[c], bounds[c + 1]):
            a, ae = lp[u], lp[u + 1]
            if ae - a < 2:
                continue
            for k in range(a, ae):
                mark[li[k]] = k + 1
            for k in range(a, ae):
                v = li[k]
                b, be = lp[v], lp[v + 1]
                found = 0
                if be - b > SKEW * (ae - a):  # u's list found in v's much longer one by galloping
                    t = b
                    for j in range(a, ae):
                        t = _gallop(li, t, be, li[j])
                        if t == be:
                            break
                        if li[t] == li[j]:
                            found += 1
                            own[j] += 1
                            atomic_add(shared, t, 1)
                            t += 1
                else:
                    for t in range(b, be):
                        j = mark[li[t]]
                        if j:
                            found += 1
                            own[j - 1] += 1
                            atomic_add(shared, t, 1)
                own[k] += found
            for k in range(a, ae):
                mark[li[k]] = 0
    return own


def oriented_support(lp, li) -> np.ndarray:
    """Triangles through each edge of L (int64, in L's order), each triangle enumerated once."""
    own = np.zeros(li.size, np.int64)
    if li.size:
        shared = np.zeros(li.size, np.int64)
        marks = np.zeros((numba.get_num_threads(), lp.size - 1), lp.dtype)
        _support_chunks(lp, li, _work_chunks(lp, li), marks, own, shared)
        own += shared
    return own


def edge_support(indptr, indices, by_degree: bool) -> np.ndarray:
    """Triangles through each stored entry of G (int64, CSR order): found once each on the oriented graph,
    then given to both entries of each edge."""
    lp, li, position = orient(indptr, indices, by_degree)
    return oriented_support(lp, li)[edge_ids(indptr, indices, lp, li, position)]


# --------------------------------------------------------------------------- truss peeling


@njit(inline="always", **JIT)
def _lose_triangle(x, level, support, nxt, count):
    """Edge x lost a triangle: its support falls by one, never below ``level``; the edge whose support reaches
    ``level`` joins the next frontier (exactly once, whichever thread takes it there)."""
    if support[x] > level:
        old = atomic_add(support, x, -1)
        if old == level + 1:
            nxt[atomic_add(count, 0, 1)] = x
        elif old <= level:  # another thread took it to the level first
            atomic_add(support, x, 1)


@njit(inline="always", **JIT)
def _remove_triangle(e, e1, e2, level, alive, in_frontier, support, nxt, count):
    """The triangle of edges e (being removed), e1 and e2 is lost, unless one of them is gone already; where e1
    or e2 is removed in the same round too, the triangle is taken away once: by the lower of the two."""
    if not (alive[e1] and alive[e2]):
        return
    f1, f2 = in_frontier[e1], in_frontier[e2]
    if f1 and f2:
        return
    if f1:
        if e < e1:
            _lose_triangle(e2, level, support, nxt, count)
    elif f2:
        if e < e2:
            _lose_triangle(e1, level, support, nxt, count)
    else:
        _lose_triangle(e1, level, support, nxt, count)
        _lose_triangle(e2, level, support, nxt, count)


@njit(parallel=True, **JIT)
def _peel_round(indptr, indices, edge, first, second, frontier, level, alive, in_frontier, support, nxt, count):
    """Remove the edges of ``frontier`` (support ≤ level): each of their surviving triangles, found by
    intersecting the two endpoints' lists of the (compacted) graph, is taken from the other two edges."""
    for i in prange(frontier.size):
        e = frontier[i]
        u, v = first[e], second[e]
        a, ae, b, be = indptr[u], indptr[u + 1], indptr[v], indptr[v + 1]
        if ae - a > be - b:
            a, ae, b, be = b, be, a, ae
        if be - b > SKEW * (ae - a):
            for j in range(a, ae):
                b = _gallop(indices, b, be, indices[j])
                if b == be:
                    break
                if indices[b] == indices[j]:
                    _remove_triangle(e, edge[j], edge[b], level, alive, in_frontier, support, nxt, count)
                    b += 1
        else:
            while a < ae and b < be:
                x, y = indices[a], indices[b]
                if x == y:
                    _remove_triangle(e, edge[a], edge[b], level, alive, in_frontier, support, nxt, count)
                    a += 1
                    b += 1
                elif x < y:
                    a += 1
                else:
                    b += 1


def peel(indptr, indices, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Truss numbers by peeling, with supports updated as edges go (never recounted): per stored entry of G,
    ``(truss, alive)``.

    Supports are counted once (``oriented_support``).  Level by level (l = 0, 1, ...; an empty level jumps to
    the least surviving support), the edges of support ≤ l are removed in rounds: a round removes its frontier
    in parallel and the edges whose support falls to l form the next one; the removed get truss number l + 2.
    Each removed edge intersects its endpoints' lists, so the graph is compacted to the surviving edges when
    they fill less than half of it.  With ``k``, only the level k − 3 is peeled: ``alive`` is the k-truss.
    """
    lp, li, position = orient(indptr, indices, True)
    m = li.size
    edge = edge_ids(indptr, indices, lp, li, position)
    support = oriented_support(lp, li)
    first = np.repeat(np.arange(lp.size - 1, dtype=li.dtype), np.diff(lp))
    truss = np.full(m, 2, np.int64)
    alive = np.ones(m, np.bool_)
    in_frontier = np.zeros(m, np.bool_)
    nxt = np.empty(m, np.int64)
    count = np.zeros(1, np.int64)
    G, G_edge = (indptr, indices), edge
    level, remaining = (0 if k is None else k - 3), m
    while remaining:
        frontier = np.flatnonzero(alive & (support <= level))
        if not frontier.size:
            if k is not None:
                break
            level = int(support[alive].min())
            continue
        if 4 * remaining < G_edge.size:  # entries of G: 2 per surviving edge
            G_indptr, G_indices, kept = compact(*G, alive[G_edge])
            G, G_edge = (G_indptr, G_indices), G_edge[kept]
        while frontier.size:
            in_frontier[frontier] = True
            count[0] = 0
            _peel_round(*G, G_edge, first, li, frontier, level, alive, in_frontier, support, nxt, count)
            alive[frontier] = False
            in_frontier[frontier] = False
            truss[frontier] = level + 2
            remaining -= frontier.size
            frontier = nxt[: count[0]].copy()
        if k is not None:
            break
        level += 1
    return truss[edge], alive[edge]


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
