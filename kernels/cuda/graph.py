"""The GPU graph engine: the kernels of :mod:`.graph_source` run through CuPy.

The functions of ``semiring.interfaces.GraphEngine`` (``CudaGraphEngine`` in
:mod:`.engine` calls them) on :class:`.launch.DeviceCSR` graphs; everything
stays on the device (orientation, compaction and scans included) and only
scalars (a total, the count of broken rules) come back.  Memory beyond the
graph and the result is O(vertices + edges): the oriented graph L with its
rows, flags and per-edge counters — never one entry per wedge.  CuPy is
imported inside the functions, only when a GPU is used.
"""

from __future__ import annotations

import numpy as np

from semiring import expr, settings
from semiring.interfaces import GRAPH_EXPANSION_VARIABLES, Entries, LastDerived

from . import elementwise, launch, strategies
from . import graph_source as src
from .launch import DeviceCSR


def _index(G: DeviceCSR) -> tuple[str, object, object]:
    """The index type name and G's index arrays in it (both int32, else both int64)."""
    name, (indptr, indices) = launch.common_index(G.indptr, G.indices)
    return name, indptr, indices


def _launch(kernel, threads: int, args: tuple) -> None:
    launch.launch(kernel, threads, args, threads=src.BLOCK)


def nnz(G: DeviceCSR) -> int:
    return int(G.indices.size)


def to_device(A) -> DeviceCSR:
    return launch.to_device(A)


def to_host(a):
    import cupy

    return a.get() if isinstance(a, cupy.ndarray) else a


def check_graph(G: DeviceCSR, weighted: bool) -> dict:
    """Entries breaking each rule; symmetry by fingerprints, the exact count only when they differ from 0."""
    import cupy

    it, indptr, indices = _index(G)
    n = G.shape[0]
    counts = cupy.zeros(4, np.uint64)
    data = G.data.astype(np.float64, copy=False) if weighted else counts  # read only when weighted
    args = (indptr, indices, data, np.int64(n), np.int32(weighted), counts)
    if n and indices.size:
        blocks = min(CHECK_BLOCKS, -(-int(indices.size) // (src.WARPS * src.CHECK_CHUNK)))
        launch.run(launch.function(src.render_check(it)), (blocks,), (src.BLOCK,), args)
    unsorted, loops, *fingerprints = (int(c) for c in counts.get())
    broken = {"self-loops": loops, "missing reverse": 0, "unequal reverse weight": 0, "unsorted": unsorted}
    if not unsorted and any(fingerprints):  # asymmetric (or weights equal but for their bits, as -0.0 and 0.0)
        counts[...] = 0
        _launch(src.render_check_exact(it), 32 * n, args)
        broken["missing reverse"], broken["unequal reverse weight"] = (int(c) for c in counts.get()[2:])
    return broken


CHECK_BLOCKS = 2048  # the streaming check's grid: warps stride over chunks of entries, one atomic per block


def edge_rows(G: DeviceCSR):
    """The row of every stored entry (COO rows), in G's index type."""

    _, indptr, indices = _index(G)
    return launch.entry_rows(indptr, indices.size, indices.dtype)


def _compact(G: DeviceCSR, mode: str, flag: tuple, *, rows: bool, positions: bool, rest: bool = False):
    """(indptr, indices, rows or None, positions or None, rest or None) of the entries kept; ``rest``: the
    (indptr, indices) of the entries not kept (see ``render_compact``: its short rows by warps, its long rows
    by blocks, listed by the count pass); ``flag``: the mode's arguments."""
    import cupy

    it, indptr, indices = _index(G)
    n = G.shape[0]
    counts = cupy.empty(n, np.int64)
    # the long rows' segments: at most one a row past COMPACT_LONG entries, and one every COMPACT_SEGMENT
    items = int(indices.size) // (src.COMPACT_LONG + 1) + int(indices.size) // src.COMPACT_SEGMENT + 1
    listed = (  # each segment's row and place in it, their number, each one's count of kept entries
        cupy.empty(items, indices.dtype),
        cupy.empty(items, np.int32),
        cupy.zeros(1, np.uint64),
        cupy.empty(items, np.uint32),
    )
    for group in ("rows", "long"):  # the rows' pass lists the long rows for the long rows' pass
        _compact_launch(
            src.render_compact(mode, it, group=group), group, n, (indptr, indices, np.int64(n), *flag, counts, *listed)
        )
    new_indptr = cupy.zeros(n + 1, indices.dtype)
    if n:
        new_indptr[1:] = cupy.cumsum(counts)
    total = int(new_indptr[-1])
    new_indices = cupy.empty(total, indices.dtype)
    new_rows = cupy.empty(total if rows else 1, indices.dtype)
    new_positions = cupy.empty(total if positions else 1, np.int64)
    rest_indices = cupy.empty(indices.size - total if rest else 1, indices.dtype)
    args = (indptr, indices, np.int64(n), *flag, new_indptr, np.int32(rows), np.int32(positions), np.int32(rest))
    fill_args = (*args, new_rows, new_positions, rest_indices, new_indices, *listed)
    for group in ("rows", "long"):
        _compact_launch(src.render_compact(mode, it, fill=True, group=group), group, n, fill_args)
    return (
        new_indptr,
        new_indices,
        (new_rows if rows else None),
        (new_positions if positions else None),
        ((indptr - new_indptr, rest_indices) if rest else None),
    )


def _compact_launch(kernel, group: str, n: int, args: tuple) -> None:
    """A compaction kernel over n rows: a warp a group of 32 rows (``"rows"``), or blocks striding over the long
    rows listed (``"long"``; their count is on the device: no wait for it)."""
    if n <= 0:
        return
    if group == "long":
        blocks = COMPACT_LONG_BLOCKS_PER_SM * launch.multiprocessor_count()
    else:
        blocks = -(-n // (32 * src.WARPS))
    launch.run(launch.function(kernel), (blocks,), (src.BLOCK,), args)


COMPACT_LONG_BLOCKS_PER_SM = 8  # the long rows' grid: as many blocks as an SM holds at once


def orient(G: DeviceCSR, by_degree: bool, rows: bool = True, transpose: bool = False, ranks=None):
    """L: the entries u → v with u ≺ v, as (indptr, indices, rows or None, Lᵀ or None); Lᵀ (``transpose``) is
    (indptr, indices) with row v holding the u ≺ v: the entries L leaves.  ``ranks``: the degree order's
    (``degree_order``; ``by_degree``), which then order the entries, and L's indices are ``ranks[v]``; Lᵀ's
    stay ids."""
    ranked = ranks is not None
    flag = (np.int32(by_degree), ranks if ranked else G.indices, np.int32(ranked))
    indptr, indices, l_rows, _, lt = _compact(G, "orient", flag, rows=rows, positions=False, rest=transpose)
    return indptr, indices, l_rows, lt


def compact_graph(G: DeviceCSR, keep):
    """The subgraph of the kept entries, and their positions in G."""
    flags = keep.astype(np.uint8)
    indptr, indices, _, positions, _ = _compact(G, "keep", (flags,), rows=False, positions=True)
    return DeviceCSR(indptr, indices, G.data[positions], G.shape), positions


# How triangles and per-edge counts are found on the oriented graph L ($SEMIRING_GRAPH_TRIANGLES, declared in
# semiring.settings): "probe" — at each triangle's middle vertex v, v's out-list hashed in shared memory and
# its in-neighbours' lists looked up in it (``render_probe``); "search" — at each edge, the shorter list
# binary-searched in the longer (``render_intersect``).  ``auto`` takes the probe in the degree order from
# PROBE_MIN_ENTRIES stored entries: measured on an H200 (benchmarks/results/graph_h200_0c6b837*.json), R-MAT 18
# (7.6 M entries) counts in 5.2 ms probing against 4.0 searching (the probe's tasks cost a fixed ~1 ms), R-MAT
# 20 (31 M) in 14.9 against 19.6, R-MAT 22 in 62.8 against 115.8; in the id order a hub's out-list is as long
# as its degree, past any table (R-MAT 22: 1.6 s probing against 0.2 searching).
TRIANGLES_ENV = settings.GRAPH_TRIANGLES.name
PROBE_MIN_ENTRIES = 1 << 24


def triangle_method(G: DeviceCSR, by_degree: bool) -> str:
    chosen = settings.GRAPH_TRIANGLES.read()
    if chosen != "auto":
        return chosen
    return "probe" if by_degree and nnz(G) >= PROBE_MIN_ENTRIES else "search"


def _degrees(lp, up, labels):
    """L's out- and in-degrees (int64) from its row pointers and its transpose's, of the targets in the order the
    probe deals them: of ≺ where L is ranked (``labels``), else of ids.  In the order of ≺ targets of a degree
    run together and share in-neighbours, whose lists are then read from L2 (R-MAT 22 on an H200: the block
    tasks 28.6 -> 24.1 ms; from the highest rank down 24.4; each Lᵀ row also in the order of ≺, 24.5)."""
    import cupy

    degrees = cupy.diff(lp).astype(np.int64), cupy.diff(up).astype(np.int64)
    return degrees if labels is None else tuple(d[labels[1]] for d in degrees)


def _probe_tasks(degrees, group: str):
    """(task_ptr, tasks, longest out-list) of ``group``'s targets: tasks per target scanned (see ``PROBE_TASKS``)."""
    import cupy

    out_degree, in_degree = degrees
    base, per = src.PROBE_TASKS[group]["base"], src.PROBE_TASKS[group]["per"]
    chunk = base * cupy.maximum(1, (out_degree + per - 1) // per)
    light = out_degree <= src.PROBE_LIGHT_MAX
    mine = (out_degree > 0) & (light if group == "warp" else ~light)
    tasks = cupy.where(mine, (in_degree + chunk - 1) // chunk, 0)
    task_ptr = cupy.zeros(out_degree.size + 1, np.int64)
    task_ptr[1:] = cupy.cumsum(tasks)
    longest = cupy.where(mine, out_degree, 0).max() if out_degree.size else cupy.zeros((), np.int64)
    total, longest = (int(x) for x in cupy.stack([task_ptr[-1], longest]).get())
    return task_ptr, total, longest


def _probe_slots(group: str, longest: int, index_type: str, mode: str) -> int:
    """The hash table's slots a group holds: a warp's fixed; a block's the next power of two over twice the
    longest list, within the shared memory a block may take (a longer list is then searched in global memory)."""
    if group == "warp":
        return src.PROBE_LIGHT_SLOTS
    fit = launch.max_shared_bytes() // src.probe_slot_bytes(mode, index_type)
    slots = 256
    while slots < 2 * longest and 2 * slots <= fit:
        slots *= 2
    return slots


def probe(mode: str, lp, li, lt, labels, out, part: tuple[int, int] | None = None) -> None:
    """The probe kernels (``render_probe``) over L (``lp``, ``li``) and its transpose ``lt``: the block tasks
    (long out-lists), then the warp tasks; ``part=(b, nparts)``: part b of each kind's tasks (every nparts-th).  ``labels``:
    ``(rank, order)`` where L's lists hold the degree order's ranks, each list ascending (``ranked_orient``);
    None where they hold ids, ascending (the id order)."""
    degrees = _degrees(lp, lt[0], labels)
    for group in ("block", "warp"):
        probe_group(group, mode, lp, li, lt, labels, out, part, degrees)


def probe_group(
    group: str, mode: str, lp, li, lt, labels, out, part: tuple[int, int] | None = None, degrees=None
) -> None:
    """One kind of the probe's tasks (``"block"`` or ``"warp"``); ``degrees``: L's (``_degrees``), if known."""
    it = "int32" if li.dtype == np.int32 else "int64"
    up, ui = lt
    task_ptr, tasks, longest = _probe_tasks(_degrees(lp, up, labels) if degrees is None else degrees, group)
    # part b of n takes every n-th task from the b-th: the targets come in the order of ≺, the costly ones last,
    # so contiguous parts were unequal (R-MAT 24 on two H200s through Dask: 0.120 s on one, 0.025 on the other)
    t0, step = part if part is not None else (0, 1)
    mine = max(0, -(-(tasks - t0) // step))
    if mine == 0:
        return
    slots = _probe_slots(group, longest, it, mode)
    groups = src.BLOCK // (32 if group == "warp" else src.BLOCK)
    shared = groups * slots * src.probe_slot_bytes(mode, it)
    fn = launch.function(src.render_probe(mode, it, group, slots))
    launch.allow_shared(fn, shared)
    blocks = min((mine + groups - 1) // groups, PROBE_BLOCKS_PER_SM * launch.multiprocessor_count())
    rank, order = labels if labels is not None else (li, li)
    args = (lp, li, up, ui, rank, order, np.int32(labels is not None), task_ptr, np.int64(lp.size - 1))
    args = (*args, np.int64(t0), np.int64(tasks), np.int64(step), out)
    launch.run(fn, (blocks,), (src.BLOCK,), args, shared=shared)


PROBE_BLOCKS_PER_SM = 16  # the probe kernels' grid: groups stride over the tasks


def intersect(mode: str, indptr, indices, rows, out, tree=None, begin: int = 0) -> None:
    """The set-intersection kernel (``render_intersect``; ``mode`` says what a match does) over the stored
    entries ``begin, begin + 1, …`` whose rows ``rows`` holds (every entry by default)."""
    it = "int32" if indices.dtype == np.int32 else "int64"
    end = begin + int(rows.size)
    _launch(
        src.render_intersect(mode, it, tree), end - begin, (indptr, indices, rows, np.int64(begin), np.int64(end), out)
    )


def part_bounds(total: int, part: tuple[int, int] | None) -> tuple[int, int]:
    """Part ``b`` of ``nparts`` of ``range(total)`` (all of it for ``part=None``): the parts tile the range.

    >>> [part_bounds(10, (b, 3)) for b in range(3)]
    [(0, 3), (3, 6), (6, 10)]
    """
    if part is None:
        return 0, total
    b, nparts = part
    return total * b // nparts, total * (b + 1) // nparts


_ORIENTED = LastDerived()  # the oriented graph L of the graph whose parts are being counted


def _oriented(G: DeviceCSR, by_degree: bool, rows: bool):
    """L for the chosen method: (indptr, indices, rows, Lᵀ, labels).  The search's has its rows; the probe's its
    transpose, and in the degree order each row holding its vertices' ranks, ascending, with ``labels`` = (rank,
    order) to map them (in the id order a row's id order is already ≺'s; ``labels`` None)."""
    if triangle_method(G, by_degree) != "probe":
        return (*orient(G, by_degree), None)
    if not by_degree:
        return (*orient(G, False, rows=rows, transpose=True), None)
    return ranked_orient(G, rows)


def degree_order(G: DeviceCSR):
    """``(rank, order)`` of the degree order (by degree, ties by id), in G's index type: ``rank[v]`` v's place
    in it, ``order[r]`` the vertex at place r."""
    import cupy

    _, indptr, _ = _index(G)
    n = G.shape[0]
    order = cupy.argsort(cupy.diff(indptr))  # CuPy's sorts are stable: ties keep the order of ids
    rank = cupy.empty(n, indptr.dtype)
    rank[order] = cupy.arange(n, dtype=indptr.dtype)
    return rank, order.astype(indptr.dtype)


def ranked_orient(G: DeviceCSR, rows: bool):
    """The degree-oriented L with each row holding its vertices' ranks, ascending (``sort_rows``): (indptr,
    ranks, rows or None, Lᵀ, (rank, order)), ``order[r]`` the vertex of rank r.  Ranks rather than ids: an
    in-neighbour's list is searched for v's rank without a lookup a step.  The orientation compares and writes
    the ranks (``ranks``): no gather of them apart."""
    rank, order = degree_order(G)
    lp, keys, lrows, lt = orient(G, True, rows=rows, transpose=True, ranks=rank)
    return lp, sort_rows(lp, keys), lrows, lt, (rank, order)


def sort_rows(indptr, keys):
    """Each row of ``keys`` sorted ascending, in a new array (``render_sort_rows``: rows of up to 32 keys in a
    warp's registers, up to ``RANK_ROWS_WARP`` in its shared memory, up to ``RANK_ROWS_BLOCK`` in a block's;
    longer rows by one CuPy sort of their entries)."""
    import cupy

    it = "int32" if keys.dtype == np.int32 else "int64"
    out = cupy.empty_like(keys)
    rows, degree = indptr.size - 1, cupy.diff(indptr)
    if rows <= 0 or not keys.size:
        return out
    warp = src.RANK_ROWS_WARP
    blocks = min(-(-rows // src.WARPS), PROBE_BLOCKS_PER_SM * launch.multiprocessor_count())
    fn = launch.function(src.render_sort_rows(it, "warp", warp))
    launch.run(fn, (blocks,), (src.BLOCK,), (indptr, keys, indptr, np.int64(rows), out))
    long = cupy.nonzero(degree > warp)[0].astype(keys.dtype)
    if not long.size:
        return out
    longest = int(degree[long].max())
    within = long[degree[long] <= src.RANK_ROWS_BLOCK] if longest > src.RANK_ROWS_BLOCK else long
    if within.size:
        slots = 1 << max(5, (min(longest, src.RANK_ROWS_BLOCK) - 1).bit_length())
        fn = launch.function(src.render_sort_rows(it, "block", slots))
        blocks = min(int(within.size), PROBE_BLOCKS_PER_SM * launch.multiprocessor_count())
        launch.run(fn, (blocks,), (src.BLOCK,), (indptr, keys, within, np.int64(within.size), out))
    beyond = long[degree[long] > src.RANK_ROWS_BLOCK]
    if beyond.size:  # their entries' positions, row by row; sorted by (row, key) they keep that order
        lengths = degree[beyond].astype(np.int64)
        first = cupy.cumsum(lengths) - lengths
        at = cupy.arange(int(lengths.sum()), dtype=np.int64) + cupy.repeat(
            indptr[beyond].astype(np.int64) - first, lengths
        )
        n = int(keys.max()) + 1
        order = cupy.repeat(cupy.arange(beyond.size, dtype=np.int64), lengths) * n + keys[at]
        order.sort()
        out[at] = (order % n).astype(out.dtype)
    return out


def _count(mode: str, oriented, out, part: tuple[int, int] | None = None) -> None:
    """``mode``'s counts of L's triangles into ``out``, by the method ``oriented`` was made for."""
    lp, li, rows, lt, labels = oriented
    if lt is not None:
        probe(mode, lp, li, lt, labels, out, part)
    else:
        begin, end = part_bounds(int(li.size), part)
        intersect(mode, lp, li, rows[begin:end], out, begin=begin)


def triangle_count_total(G: DeviceCSR, by_degree: bool, part: tuple[int, int] | None = None) -> int:
    """Triangles, each found once; ``part=(b, nparts)``: those found in part b of the work cut in ``nparts``
    parts (of L's edges, each costing its shorter list; or every nparts-th of the probe's tasks: about equal
    work)."""
    import cupy

    if part is None:
        oriented = _oriented(G, by_degree, rows=False)
    else:  # the parts of one graph come in turn: L made once
        key = (by_degree, triangle_method(G, by_degree))
        oriented = _ORIENTED.get(G, key, lambda: _oriented(G, by_degree, rows=False))
    total = cupy.zeros(1, np.uint64)
    _count("total", oriented, total, part)
    return int(total.get()[0])


def edge_triangles(G: DeviceCSR, by_degree: bool, tree=None):
    """Triangles through each entry of G: counted on L (atomics), written to both entries of each edge.

    With ``tree`` (an expression of c, nu, nv): that measure of the count and the two degrees instead.
    """
    import cupy

    it, indptr, indices = _index(G)
    oriented = _oriented(G, by_degree, rows=True)
    _, li, lrows, _, labels = oriented
    counts = cupy.zeros(li.size, np.uint32)
    _count("edge", oriented, counts)
    if labels is not None:  # L's lists hold ranks: the mirror wants ids
        li = labels[1][li]
    out = cupy.zeros(indices.size, np.int64 if tree is None else np.float64)
    _launch(src.render_mirror(it, tree), li.size, (lrows, li, counts, np.int64(li.size), indptr, indices, out))
    return out


def vertex_triangles(G: DeviceCSR, by_degree: bool):
    import cupy

    counts = cupy.zeros(G.shape[0], np.uint64)
    _count("vertex", _oriented(G, by_degree, rows=False), counts)
    return counts.astype(np.int64)


class _Peeling:
    """The k-truss peeling of G, supports kept up to date as edges go (``render_peel``) instead of counted
    again on the survivors each round: the rounds together cost about one triangle count, where recounting
    cost one a round.

    Everything is kept at the canonical entries (row < column) of G's own arrays, which never shrink (a removed
    edge stays stored, flagged dead); ``canonical[e]`` is the canonical entry of entry e's edge.
    """

    def __init__(self, G: DeviceCSR):
        import cupy

        self.index_type, self.indptr, self.indices = _index(G)
        self.rows = edge_rows(G)
        n, count = G.shape[0], nnz(G)
        below = self.rows < self.indices
        keys = self.rows.astype(np.int64) * n + self.indices  # sorted: CSR order is (row, column) order
        mirror = cupy.searchsorted(keys, self.indices.astype(np.int64) * n + self.rows)
        self.canonical = cupy.where(below, cupy.arange(count, dtype=np.int64), mirror)
        self.support = edge_triangles(G, True).astype(np.int32)
        self.alive = below.astype(np.uint8)
        self.removed = cupy.zeros(count, np.uint8)

    def below(self, bound: int):
        """The canonical entries of the live edges in fewer than ``bound`` live triangles."""
        import cupy

        return cupy.nonzero((self.alive != 0) & (self.support < bound))[0]

    def remove(self, edges) -> None:
        """Edges (canonical entries) go together: the triangles they closed lose them, once each."""
        self.alive[edges] = 0
        self.removed[edges] = 1
        args = (self.indptr, self.indices, self.rows, edges, np.int64(edges.size), self.alive, self.removed)
        _launch(src.render_peel(self.index_type), 32 * int(edges.size), (*args, self.support))
        self.removed[edges] = 0

    def least_live_support(self) -> int | None:
        live = self.alive != 0
        return int(self.support[live].min()) if bool(live.any()) else None


def ktruss_keep(G: DeviceCSR, k: int):
    """Whether each entry's edge is in the k-truss: edges in fewer than k − 2 live triangles removed, round
    after round, until none is."""
    peeling = _Peeling(G)
    while (low := peeling.below(k - 2)).size:
        peeling.remove(low)
    return peeling.alive[peeling.canonical] != 0


def truss_numbers(G: DeviceCSR):
    """Peeling by levels: at level k the edges in fewer than k − 2 live triangles get truss number k − 1 and go,
    round after round; once none does, the least support s of the survivors makes them the (s + 2)-truss, so the
    next level tried is s + 3."""
    import cupy

    peeling = _Peeling(G)
    truss = cupy.full(nnz(G), 2, dtype=cupy.int64)
    k = 3
    while True:
        low = peeling.below(k - 2)
        if low.size:
            truss[low] = k - 1
            peeling.remove(low)
            continue
        least = peeling.least_live_support()
        if least is None:
            return truss[peeling.canonical]
        k = least + 3


# How the per-edge counts behind common neighbours and the edge similarities are found:
# "oriented" — on the degree-oriented graph L, each triangle once, scattered to its three edges
# (atomics) and mirrored; "direct" — each undirected edge u < v intersects its full lists.
# ($SEMIRING_GRAPH_EDGES, declared in semiring.settings).
EDGE_STRATEGY_ENV = settings.GRAPH_EDGES.name


def edge_strategy() -> str:
    chosen = settings.GRAPH_EDGES.read()
    return "oriented" if chosen == "auto" else chosen


def edge_measure(G: DeviceCSR, tree):
    """A measure of (|N(u) ∩ N(v)|, d(u), d(v)) at every entry, each undirected edge counted once."""
    import cupy

    if edge_strategy() == "oriented":
        return edge_triangles(G, True, tree)
    _, indptr, indices = _index(G)
    out = cupy.zeros(indices.size, np.float64)
    intersect("measure", indptr, indices, edge_rows(G), out, tree)
    return out


_COUNT = expr.parse("c", GRAPH_EXPANSION_VARIABLES)[0]


def common_neighbor_counts(G: DeviceCSR):
    if edge_strategy() == "oriented":
        return edge_triangles(G, True)
    return edge_measure(G, _COUNT).astype(np.int64)


def masked_product(G: DeviceCSR, P: DeviceCSR, sr):
    """``C⟨P⟩ = G ⊕.⊗ Gᵀ``: the semiring primitive at P's entries."""
    return strategies.product(G, G, sr, np.float64, mask=Entries(edge_rows(P), P.indices))


def row_norm(G: DeviceCSR, tree):
    return elementwise.row_norm(G, tree, np.float64)


def expand(tree, rows, cols, c, norms):
    """``out[k] = f(c[k], norms[rows[k]], norms[cols[k]])`` on the device."""
    import cupy

    it, (rows, cols) = launch.common_index(rows, cols)
    out = cupy.empty(rows.size, np.float64)
    args = (rows, cols, c.astype(np.float64), norms.astype(np.float64), np.int64(rows.size), out)
    _launch(src.render_expand(tree, it), rows.size, args)
    return out
