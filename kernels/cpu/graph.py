"""Graph kernels of the CPU engine (numba, multi-core, ``nogil``); ``CpuGraphEngine`` runs them.

The adjacency is canonical CSR (sorted, unique column indices per row) of a
symmetric pattern without self-loops; ``semiring.graph`` checks that first
(with :func:`check` below, through ``CpuGraphEngine.check_graph``).  Every
kernel keeps its memory O(vertices + edges): intersections walk the stored
neighbour lists, nothing enumerates wedges.

* :func:`orient` — the edges ``u → v`` with u ranked below v (by degree, ties
  by id, or by id), vertices renamed by rank so that the lists of high-degree
  vertices lie together; each triangle is found exactly once, at its two lowest
  vertices: ``Σ_(u,v) |N⁺(u) ∩ N⁺(v)|``.
* :func:`triangle_total`, :func:`edge_support` — u's out-list marked in a
  per-thread map, each out-neighbour's list counted against it (or, when it is
  more than ``SKEW`` times longer, u's list looked up in it by binary search);
  vertices in chunks of equal estimated work.  Per edge, each triangle counts
  at its three edges, an atomic add for the one another thread owns; these are
  also the common-neighbour counts (an edge's support is ``|N(u) ∩ N(v)|``).
* :func:`peel` — truss numbers and k-trusses from those supports, lowered as
  edges go (merge or galloping intersections of the surviving lists).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from semiring import expr as _expr
from semiring.interfaces import GRAPH_EXPANSION_VARIABLES

from .elementwise import expression_kernels
from .jit import JIT

# Walk the longer list (merge, or count it against the marks) while it is at most SKEW times the shorter;
# search it beyond (seed 001 switches at ~50).
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


@njit(parallel=True, **JIT)
def _check(indptr, indices, data, weighted, upper_only):
    """Counts of (self-loops, entries whose reverse is missing, reverse present with another weight, entries
    above the diagonal, entries below); with ``upper_only`` only the entries above the diagonal are looked up."""
    n = indptr.size - 1
    loops = 0
    missing = 0
    unequal = 0
    upper = 0
    for u in prange(n):
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            if v == u:
                loops += 1
                continue
            upper += v > u
            if upper_only and v < u:
                continue
            r = find(indices, indptr[v], indptr[v + 1], u)
            if r < 0:
                missing += 1
            elif weighted and data[r] != data[k]:
                unequal += 1
    return loops, missing, unequal, upper, indices.size - loops - upper


def check(indptr, indices, data, weighted: bool) -> tuple[int, int, int]:
    """Counts of (self-loops, entries whose reverse is missing, entries whose reverse has another weight).

    The entries above the diagonal are looked up in the rows below; as many below as above with none missing
    makes the pattern symmetric (the reverses are distinct entries).  Only a broken graph has every entry looked
    up, for the counts its error message gives.
    """
    loops, missing, unequal, upper, lower = _check(indptr, indices, data, weighted, True)
    if missing or upper != lower:
        loops, missing, unequal, _, _ = _check(indptr, indices, data, weighted, False)
        return loops, missing, unequal
    return loops, 0, 2 * unequal  # each unequal pair is two stored entries


@njit(**JIT)
def _degree_ranks(indptr, rank, vertex):
    """``rank[u]``: u's place in the order by degree, ties by id (a counting sort, O(vertices + max degree));
    ``vertex[r]``: the vertex of rank r."""
    n = indptr.size - 1
    top = 0
    for u in range(n):
        top = max(top, indptr[u + 1] - indptr[u])
    start = np.zeros(top + 2, np.int64)
    for u in range(n):
        start[indptr[u + 1] - indptr[u] + 1] += 1
    for d in range(top + 1):
        start[d + 1] += start[d]
    for u in range(n):
        d = indptr[u + 1] - indptr[u]
        rank[u] = start[d]
        vertex[start[d]] = u
        start[d] += 1


@njit(parallel=True, **JIT)
def _ranked_out_degrees(indptr, indices, rank, counts):
    for u in prange(indptr.size - 1):
        ru = rank[u]
        c = 0
        for k in range(indptr[u], indptr[u + 1]):
            c += rank[indices[k]] > ru
        counts[ru] = c


@njit(parallel=True, **JIT)
def _fill_ranked(indptr, indices, rank, lp, li, position, keys):
    """Row rank[u] of L: the ranks above u's among its neighbours, each with its entry's position in G.

    Only rows longer than ``2 * SKEW`` are sorted (as one key, rank << 32 | offset in u's row): the counting
    kernels search only in those (a list searched is more than ``SKEW`` times one of two or more), and sorting
    every short row would cost more than the counting saves.
    """
    for u in prange(indptr.size - 1):
        ru = rank[u]
        lo, hi = lp[ru], lp[ru + 1]
        t = lo
        for k in range(indptr[u], indptr[u + 1]):
            rv = rank[indices[k]]
            if rv > ru:
                li[t] = rv
                position[t] = k
                t += 1
        if hi - lo > 2 * SKEW:
            for t in range(lo, hi):
                keys[t] = (np.int64(li[t]) << 32) | (position[t] - indptr[u])
            keys[lo:hi].sort()
            for t in range(lo, hi):
                li[t] = keys[t] >> 32
                position[t] = indptr[u] + (keys[t] & 0xFFFFFFFF)


class Oriented(NamedTuple):
    """The oriented graph L on the vertices renamed by rank (CSR ``lp``, ``li``; row r is ``vertex[r]``'s
    out-list, sorted when longer than ``2 * SKEW``); ``position[t]``: where L's entry t is in G.  L's entries
    are the undirected edges, each once."""

    lp: np.ndarray
    li: np.ndarray
    position: np.ndarray
    vertex: np.ndarray
    rank: np.ndarray  # rank[vertex[r]] == r


def orient(indptr, indices, by_degree: bool) -> Oriented:
    """The edges ``u → v`` for u ranked below v (``by_degree``: by degree, ties by id — out-degrees are then
    O(sqrt(edges)); else by id), the vertices renamed by rank; memory O(edges).

    Renamed by degree, the many lists the counting kernels read of high-degree vertices lie together at the
    end of L, and their marks together in the byte maps: about 1.8× fewer cycles on R-MAT 18 (one thread)
    than L in the input's ids.  Rows hold offsets below 2**32 (degrees and vertex counts of any graph in memory).
    """
    n = indptr.size - 1
    vertex = np.arange(n, dtype=indices.dtype)
    rank = vertex
    if by_degree and n:
        rank, vertex = np.empty(n, indices.dtype), np.empty(n, indices.dtype)
        _degree_ranks(indptr, rank, vertex)
    counts = np.zeros(n, indptr.dtype)
    if n:
        _ranked_out_degrees(indptr, indices, rank, counts)
    lp = np.zeros(n + 1, indptr.dtype)
    np.cumsum(counts, out=lp[1:])
    li = np.empty(int(lp[-1]), indices.dtype)
    position = np.empty(li.size, indptr.dtype)
    if li.size:
        keys = np.empty(li.size, np.int64)  # scratch of the long rows' sort: only their pages are touched
        _fill_ranked(indptr, indices, rank, lp, li, position, keys)
    return Oriented(lp, li, position, vertex, rank)


@njit(inline="always", **JIT)
def _find_out(li, lo, hi, x):
    """Position of ``x`` in the out-list ``li[lo:hi]`` (present): binary search in a long, sorted row, else a
    scan of the short one."""
    if hi - lo > 2 * SKEW:
        return find(li, lo, hi, x)
    for t in range(lo, hi):
        if li[t] == x:
            return t
    return -1


@njit(parallel=True, **JIT)
def _fill_edge_ids(indptr, indices, lp, li, position, rank, edge):
    for r in prange(lp.size - 1):
        for t in range(lp[r], lp[r + 1]):
            edge[position[t]] = t
    for v in prange(indptr.size - 1):  # (v, u) with u ranked lower: found in u's out-list, short by the order
        rv = rank[v]
        for k in range(indptr[v], indptr[v + 1]):
            ru = rank[indices[k]]
            if ru < rv:
                edge[k] = _find_out(li, lp[ru], lp[ru + 1], rv)


def edge_ids(indptr, indices, L: Oriented) -> np.ndarray:
    """The undirected edge (L's entry) of each stored entry of G: ``(u, v)`` and ``(v, u)`` share one."""
    edge = np.empty(indices.size, np.int64)
    if L.li.size:
        _fill_edge_ids(indptr, indices, L.lp, L.li, L.position, L.rank, edge)
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


def _work_chunks(lp, li, part: tuple[int, int] | None = None) -> np.ndarray:
    """Bounds of vertex chunks of about equal work (``_triangle_work``), 16 per thread, so that a few heavy
    vertices do not leave threads idle while one thread finishes them.

    ``part=(b, nparts)``: the chunks of part b only, when the vertices are cut in ``nparts`` runs of about
    equal work (the parts tile the vertices).
    """
    n = lp.size - 1
    work = np.zeros(n, np.int64)
    _triangle_work(lp, li, work)
    cumulative = np.cumsum(work)
    first, last = 0, n
    if part is not None:
        b, nparts = part
        first, last = np.searchsorted(cumulative, cumulative[-1] * np.array([b, b + 1]) / nparts, side="right")
        first, last = (0 if b == 0 else int(first)), (n if b == nparts - 1 else int(last))
    done = cumulative[first - 1] if first else 0
    nchunks = max(1, min(last - first, 16 * numba.get_num_threads()))
    targets = done + (cumulative[last - 1] - done if last > first else 0) * np.arange(1, nchunks) / nchunks
    inner = np.searchsorted(cumulative, targets, side="right").clip(first, last)
    return np.unique(np.concatenate([[first], inner, [last]]).astype(np.int64))


@njit(parallel=True, **JIT)
def _triangle_chunks(lp, li, bounds, marks):
    """Σ over u → v of |N⁺(u) ∩ N⁺(v)|, vertices in chunks ``bounds[c]:bounds[c+1]`` of about equal work.

    u's out-list is marked in its thread's bit map, then each out-neighbour's list is counted against the map
    (no comparisons, no branches on order), unless that list is more than ``SKEW`` times longer: then each of
    u's out-neighbours is looked up in it by binary search.  Bits, not bytes: the map of R-MAT 18 is 32 KiB,
    held in L1 (about 15 % faster than a byte map on one thread).
    """
    one = np.uint64(1)
    total = 0
    for c in prange(bounds.size - 1):
        mark = marks[numba.get_thread_id()]
        for u in range(bounds[c], bounds[c + 1]):
            a, ae = lp[u], lp[u + 1]
            if ae - a < 2:
                continue  # a triangle at u needs two out-neighbours
            for k in range(a, ae):
                mark[li[k] >> 6] |= one << np.uint64(li[k] & 63)
            for k in range(a, ae):
                v = li[k]
                b, be = lp[v], lp[v + 1]
                if be - b > SKEW * (ae - a):  # u's list looked up in v's, sorted as it is long
                    for j in range(a, ae):
                        total += find(li, b, be, li[j]) >= 0
                else:
                    for t in range(b, be):
                        total += np.int64((mark[li[t] >> 6] >> np.uint64(li[t] & 63)) & one)
            for k in range(a, ae):
                mark[li[k] >> 6] = 0  # every bit set in the word is u's
    return total


def triangle_total(lp, li, part: tuple[int, int] | None = None) -> int:
    """Every triangle once: ``Σ over u → v of |N⁺(u) ∩ N⁺(v)|`` on the oriented graph, balanced by work; each
    thread has a bit map of the vertices.  ``part=(b, nparts)``: the triangles found at part b of the vertices
    (``_work_chunks``)."""
    marks = np.zeros((numba.get_num_threads(), (lp.size + 62) // 64), np.uint64)
    return int(_triangle_chunks(lp, li, _work_chunks(lp, li, part), marks))


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
                if be - b > SKEW * (ae - a):  # u's list looked up in v's, sorted as it is long
                    for j in range(a, ae):
                        t = find(li, b, be, li[j])
                        if t >= 0:
                            found += 1
                            own[j] += 1
                            atomic_add(shared, t, 1)
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
    L = orient(indptr, indices, by_degree)
    return oriented_support(L.lp, L.li)[edge_ids(indptr, indices, L)]


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
    L = orient(indptr, indices, True)
    m = L.li.size
    edge = edge_ids(indptr, indices, L)
    support = oriented_support(L.lp, L.li)
    first = np.repeat(L.vertex, np.diff(L.lp))  # each edge's two vertices, in G's ids
    second = indices[L.position]
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
            _peel_round(*G, G_edge, first, second, frontier, level, alive, in_frontier, support, nxt, count)
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
