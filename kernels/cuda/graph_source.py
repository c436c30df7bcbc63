"""CUDA C for the graph kernels, rendered as text: a pure function, no GPU library imported.

The adjacency is CSR with sorted rows; ``I`` is its index type (``int`` or
``long long``).  Kernels (``semiring.kernels.cuda.graph`` launches them):

* ``render_check`` — one streaming pass: entries out of order or range,
  self-loops, and fingerprints of symmetry; ``render_check_exact`` (one warp
  per row, a binary search per entry) counts the entries whose reverse is
  missing or weighs differently, run only when a fingerprint says so.
* ``render_compact`` — two passes (count, then fill), a warp 32 short rows
  and a block each segment of a long one: the entries that ``u ≺ v`` in the
  total order keeps (``mode="orient"``, giving the oriented graph L) or that a
  flag keeps (``mode="keep"``, the k-truss loop).  Warp ballots give each kept
  entry its slot: no scan over the edges, rows stay sorted.
* ``render_intersect`` — the set-intersection kernel behind triangle counts
  and common neighbours.  One warp per 32 consecutive edges (u, v): each edge
  contributes ``min(|N(u)|, |N(v)|)`` work items (the elements of its shorter
  list), the warp scans these counts and its lanes deal the items out evenly, so
  hub edges and leaf edges share lanes without idling.  An item is a binary
  search of one element of the shorter list in the longer (degree skew costs
  the shorter list only).  ``mode`` says what a match does:

  - ``"total"`` — count (per-warp sum, one atomic per block);
  - ``"edge"`` — per-edge triangles on L: the edge, and the two edges to the
    third vertex, each +1 (atomics);
  - ``"vertex"`` — per-vertex triangles: the third vertex +1 per match, the
    edge's two vertices + its count once;
  - ``"measure"`` — common neighbours of every undirected edge once (at
    ``u < v``), a measure of (c, d(u), d(v)) written to both of its entries.

  Every mode takes a range of entries ``[begin, end)`` (a part of the graph
  for one worker), with ``rows[e - begin]`` the row of entry e.
* ``render_mirror`` — per-edge counts of L written to both entries of A, or a
  measure of (count, d(u), d(v)) — how the edge similarities are finished when
  the per-edge counts come from the oriented graph.
* ``render_expand`` — ``out[k] = f(c[k], norms[rows[k]], norms[cols[k]])``.
* ``render_peel`` — one warp per edge removed in a round of the k-truss
  peeling: the triangles it closed that were whole before the round lose it,
  and each of their surviving edges' supports drops by one, once a triangle.
"""

from __future__ import annotations

import hashlib

from semiring import expr as _expr

from .source import PREAMBLE, KernelSource, _types

INTERSECT_MODES = ("total", "edge", "vertex", "measure")
WARPS = 8  # warps per block of the per-edge and per-row kernels
BLOCK = 32 * WARPS

_SEARCH = """\
__device__ __forceinline__ I gr_lower_bound(const I* __restrict__ a, I lo, I hi, I x) {
    while (lo < hi) {
        const I mid = lo + ((hi - lo) >> 1);
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}
// A warp's deal: each lane's items laid end to end, start[i] the first of lane i's and start[32] the warp's
// total, which it returns (an inclusive scan by shuffles); the caller's __syncwarp() makes start readable.
__device__ __forceinline__ long long gr_deal(long long items, long long* start, int lane) {
    long long scan = items;
    for (int o = 1; o < 32; o <<= 1) {
        const long long x = __shfl_up_sync(0xffffffffu, scan, o);
        if (lane >= o) scan += x;
    }
    start[lane + 1] = scan;
    if (lane == 0) start[0] = 0;
    return __shfl_sync(0xffffffffu, scan, 31);
}
"""

_ORDER = """\
// The total order: by degree, ties by id (by_degree), else by id alone.
__device__ __forceinline__ bool gr_precedes(I u, I v, I du, I dv, int by_degree) {
    return (by_degree && du != dv) ? du < dv : u < v;
}
"""


# A total kernel's end: each lane's count summed over the warp, the warps' over the block, one atomic a block.
_TOTAL = """\
    for (int o = 16; o > 0; o >>= 1) found += __shfl_down_sync(0xffffffffu, found, o);
    __shared__ unsigned long long s_found[GR_WARPS];
    if (lane == 0) s_found[warp] = found;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long sum = 0;
        for (int w = 0; w < GR_WARPS; ++w) sum += s_found[w];
        if (sum) atomicAdd(total, sum);
    }"""


def _label(tree: _expr.Node) -> str:
    return hashlib.sha1(repr(tree).encode()).hexdigest()[:12]


AHEAD = 4  # loads a lane keeps in flight where a warp walks a list (GR_AHEAD)


def _head(index_type: str) -> str:
    _, I = _types("float64", index_type)
    return PREAMBLE + f"typedef {I} I;\n#define GR_AHEAD {AHEAD}\n" + _SEARCH


_MIX = """\
__device__ __forceinline__ unsigned long long gr_mix(unsigned long long z) {  // splitmix64's finaliser
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
"""


def render_check(index_type: str = "int32") -> KernelSource:
    """Rows in order, self-loops, and two fingerprints of symmetry, in one streaming pass.

    ``counts[0]`` += entries out of order or range, ``counts[1]`` += self-loops,
    ``counts[2..3]`` += Σ h(u, v, w) − h(v, u, w) for two seeds of a 64-bit hash
    (``w`` the weight's bits when ``weighted``).  A symmetric matrix sums to 0
    (the multisets {(u, v, w)} and {(v, u, w)} are equal); an asymmetric one
    sums to 0 with probability about 2⁻¹²⁸.  No random access, unlike looking
    up each entry's reverse: ``render_check_exact`` does that, to count the
    entries at fault, only when a fingerprint is not 0.

    Warps take the entries in chunks of ``GR_CHUNK`` (their first row found by a
    binary search in ``indptr``), every lane on an entry, each lane walking on to
    its entries' rows: a warp a row left most lanes idle on short rows and one
    warp walking a hub's row (R-MAT 22: 3.4 ms; 1.6 ms so, with two of the
    hash's six mixes an entry; one mix a direction since, ``gr_key``).  ``indptr`` is non-decreasing
    (the CSR check says so first); reads stay within it whatever it holds.  Each
    block adds its sums once.
    """
    name = f"gr_check_{index_type}"
    body = f"""\
#define GR_WARPS {WARPS}
#define GR_CHUNK {CHECK_CHUNK}
#define GR_SEED0 0x243f6a8885a308d3ull
#define GR_SEED1 0x13198a2e03707344ull
// h(a, b, w) = mix(key(a, b) + mix(w ^ seed)), the w term 0 unweighted; key(a, b) = (a, b) as one word, seeded,
// where ids fit 32 bits, else mix(a ^ seed) + b: one mix a direction and seed (a first mix of a was 3 of 6 a pair)
__device__ __forceinline__ unsigned long long gr_key(unsigned long long a, unsigned long long b,
                                                     unsigned long long seed, bool packed) {{
    return packed ? ((a << 32) | b) ^ seed : gr_mix(a ^ seed) + b;
}}
extern "C" __global__ void __launch_bounds__({BLOCK}) {name}(
    const I* __restrict__ indptr, const I* __restrict__ indices, const double* __restrict__ data,
    long long n, int weighted, unsigned long long* __restrict__ counts)
{{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned long long sums[4] = {{0ull, 0ull, 0ull, 0ull}};
    const long long nnz = n > 0 ? (long long)indptr[n] : 0;
    const bool packed = n <= (1ll << 32);  // a pair's ids fit one 64-bit word
    for (long long c0 = ((long long)blockIdx.x * GR_WARPS + warp) * GR_CHUNK; c0 < nnz;
         c0 += (long long)gridDim.x * GR_WARPS * GR_CHUNK) {{
        long long u = 0;  // the row of entry c0: the last with indptr[u] <= c0
        if (lane == 0) {{
            long long hi = n - 1;
            while (u < hi) {{
                const long long mid = (u + hi + 1) >> 1;
                if ((long long)indptr[mid] <= c0) u = mid; else hi = mid - 1;
            }}
        }}
        u = __shfl_sync(0xffffffffu, u, 0);
        long long start = indptr[u], next = indptr[u + 1];
        const long long c1 = min(nnz, c0 + GR_CHUNK);
        for (long long k0 = c0 + lane; k0 < c1; k0 += 32 * GR_AHEAD) {{  // GR_AHEAD loads in flight a lane
            I vs[GR_AHEAD], before[GR_AHEAD];
#pragma unroll
            for (int q = 0; q < GR_AHEAD; ++q) {{
                const long long k = k0 + 32 * q;
                vs[q] = k < c1 ? indices[k] : (I)0;
                before[q] = k < c1 && k > 0 ? indices[k - 1] : (I)-1;  // read where k > start
            }}
#pragma unroll
            for (int q = 0; q < GR_AHEAD; ++q) {{
                const long long k = k0 + 32 * q;
                if (k >= c1) continue;
                while (k >= next && u + 1 < n) {{  // on to k's row
                    ++u;
                    start = next;
                    next = indptr[u + 1];
                }}
                const I v = vs[q];
                if (v < 0 || v >= n || (k > start && before[q] >= v)) {{ ++sums[0]; continue; }}
                if (v == u) {{ ++sums[1]; continue; }}
                const unsigned long long a = (unsigned long long)u, b = (unsigned long long)v;
                unsigned long long w0 = 0ull, w1 = 0ull;
                if (weighted) {{
                    const unsigned long long w = (unsigned long long)__double_as_longlong(data[k]);
                    w0 = gr_mix(w ^ GR_SEED0);
                    w1 = gr_mix(w ^ GR_SEED1);
                }}
                sums[2] += gr_mix(gr_key(a, b, GR_SEED0, packed) + w0) - gr_mix(gr_key(b, a, GR_SEED0, packed) + w0);
                sums[3] += gr_mix(gr_key(a, b, GR_SEED1, packed) + w1) - gr_mix(gr_key(b, a, GR_SEED1, packed) + w1);
            }}
        }}
    }}
    __shared__ unsigned long long s_sums[GR_WARPS][4];
    for (int q = 0; q < 4; ++q) {{
        unsigned long long x = sums[q];
        for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
        if (lane == 0) s_sums[warp][q] = x;
    }}
    __syncthreads();
    if (threadIdx.x < 4) {{
        unsigned long long x = 0;
        for (int w = 0; w < GR_WARPS; ++w) x += s_sums[w][threadIdx.x];
        if (x) atomicAdd(&counts[threadIdx.x], x);
    }}
}}
"""
    return KernelSource(name, _head(index_type) + _MIX + body)


CHECK_CHUNK = 2048  # entries a warp of the streaming check takes at a time (a binary search for its first row)


def render_check_exact(index_type: str = "int32") -> KernelSource:
    """counts[0..3] += entries unsorted or out of range, self-loops, missing reverses, unequal reverse weights."""
    name = f"gr_check_exact_{index_type}"
    body = f"""\
extern "C" __global__ void {name}(
    const I* __restrict__ indptr, const I* __restrict__ indices, const double* __restrict__ data,
    long long n, int weighted, unsigned long long* __restrict__ counts)
{{
    const long long u = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (u >= n) return;
    for (I k = indptr[u] + lane; k < indptr[u + 1]; k += 32) {{
        const I v = indices[k];
        if (v < 0 || v >= n || (k > indptr[u] && indices[k - 1] >= v)) {{ atomicAdd(&counts[0], 1ull); continue; }}
        if (v == u) {{ atomicAdd(&counts[1], 1ull); continue; }}
        const I r = gr_lower_bound(indices, indptr[v], indptr[v + 1], (I)u);
        if (r == indptr[v + 1] || indices[r] != u) atomicAdd(&counts[2], 1ull);
        else if (weighted && data[r] != data[k]) atomicAdd(&counts[3], 1ull);
    }}
}}
"""
    return KernelSource(name, _head(index_type) + body)


COMPACT_LONG = BLOCK  # a row of more entries is compacted by blocks (``render_compact``)
COMPACT_SEGMENT = 4 * BLOCK * AHEAD  # a long row's entries a block takes: R-MAT 22's longest rows hold ~10⁵


def render_compact(mode: str, index_type: str = "int32", fill: bool = False, group: str = "rows") -> KernelSource:
    """Keep the entries ``u ≺ v`` (``mode="orient"``) or flagged (``mode="keep"``), in two passes.

    ``fill=False``: ``counts[u]`` = entries kept in row u.  ``fill=True``: with
    ``new_indptr`` (the counts' exclusive scan), writes the kept column indices
    (``"orient"`` with ``ranked``: their ranks in the degree order, ``rank[]``,
    which order the entries: the probe's lists), and their rows (``write_rows``) and old positions (``write_positions``);
    ``write_rest`` writes the entries not kept as a CSR of their own, whose row
    pointers are ``indptr - new_indptr`` (for ``"orient"``: the transpose of L,
    row v holding the u ≺ v).  Rows stay in order: a kept entry's slot is its
    row's new start plus the row's entries kept before it (warp ballots), a left
    entry's its old position less the row's entries kept up to it.

    ``group="rows"``: a warp takes 32 consecutive rows and deals their entries
    over its lanes end to end (R-MAT 22's rows hold 30 entries on average: a
    warp a row left most lanes idle); a row of more than ``COMPACT_LONG``
    entries is left to ``"long"``, and the count pass lists its segments of
    ``COMPACT_SEGMENT`` entries (``long_rows``, ``long_segment``, their number
    ``long_count``; a row's segments listed together).  ``group="long"``: a
    block a segment, blocks striding over the list; the count pass keeps each
    segment's count (``segment_kept``), so the fill pass starts a segment after
    its row's earlier ones (one warp walking a hub's row was the kernel's tail).
    """
    if mode not in ("orient", "keep"):
        raise ValueError(f"mode must be 'orient' or 'keep', got {mode!r}")
    if group not in ("rows", "long"):
        raise ValueError(f"group must be 'rows' or 'long', got {group!r}")
    name = f"gr_compact_{mode}_{'fill' if fill else 'count'}_{group}_{index_type}"
    if mode == "orient":
        # ranked: u ≺ v is rank[u] < rank[v], one read a neighbour where its degree took two, and L's lists
        # hold the ranks read
        flag_args = "int by_degree, const I* __restrict__ rank, int ranked"
        flag = "(ranked ? rank[u] < rank[v] : gr_precedes((I)u, v, du, indptr[v + 1] - indptr[v], by_degree))"
        written = "ranked ? rank[v] : v"
    else:
        flag_args = "const unsigned char* __restrict__ keep"
        flag = "keep[k] != 0"
        written = "v"
    if fill:
        out_args = (
            "const I* __restrict__ new_indptr, int write_rows, int write_positions, int write_rest,\n"
            "    I* __restrict__ new_rows, long long* __restrict__ positions, I* __restrict__ rest_indices,\n"
            "    I* __restrict__ new_indices"
        )
    else:
        out_args = "long long* __restrict__ counts"
    # nb: the row's new start; kb: the row's entries kept before this one
    place = f"""\
                if (flag) {{
                    const long long slot = nb + kb;
                    new_indices[slot] = {written};
                    if (write_rows) new_rows[slot] = (I)u;
                    if (write_positions) positions[slot] = k;
                }} else if (write_rest) {{
                    rest_indices[k - nb - kb] = v;
                }}"""
    if group == "rows":
        placed = (
            """\
            if (active) {
                const long long u = g0 + i, k = ks[q], nb = s_new[warp][i];
                const long long kb = s_kept[warp][i] + __popc(mine & below);
                const I v = vs[q];
"""
            + place
            + "\n            }"
            if fill
            else ""
        )
        listed = (
            ""
            if fill
            else """if (is_long) {  // its segments, listed together
            const long long segments = (d + GR_SEGMENT - 1) / GR_SEGMENT;
            const long long first = (long long)atomicAdd(long_count, (unsigned long long)segments);
            for (long long t = 0; t < segments; ++t) {
                long_rows[first + t] = (I)row;
                long_segment[first + t] = (int)t;
            }
        }"""
        )
        new_start = "s_new[warp][lane] = row < n ? (long long)new_indptr[row] : 0;" if fill else ""
        counted = (
            "" if fill else "if (row < n) counts[row] = is_long ? 0 : s_kept[warp][lane];  // long: added by segments"
        )
        body = f"""\
#define GR_WARPS {WARPS}
#define GR_LONG {COMPACT_LONG}
#define GR_SEGMENT {COMPACT_SEGMENT}
extern "C" __global__ void __launch_bounds__({BLOCK}) {name}(
    const I* __restrict__ indptr, const I* __restrict__ indices, long long n, {flag_args},
    {out_args}, I* __restrict__ long_rows, int* __restrict__ long_segment, unsigned long long* __restrict__ long_count,
    unsigned* __restrict__ segment_kept)
{{
    __shared__ long long s_start[GR_WARPS][33];  // exclusive scan of the group's short rows' lengths
    __shared__ long long s_a[GR_WARPS][32], s_new[GR_WARPS][32], s_kept[GR_WARPS][32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const unsigned below = (1u << lane) - 1u;
    for (long long g0 = ((long long)blockIdx.x * GR_WARPS + warp) * 32; g0 < n;
         g0 += (long long)gridDim.x * GR_WARPS * 32) {{
        const long long row = g0 + lane;
        long long a = 0, d = 0;
        if (row < n) {{
            a = indptr[row];
            d = (long long)indptr[row + 1] - a;
        }}
        const bool is_long = d > GR_LONG;
        {listed}
        const long long work = gr_deal(is_long ? 0 : d, s_start[warp], lane);
        s_a[warp][lane] = a;
        s_kept[warp][lane] = 0;
        {new_start}
        __syncwarp();
        int r = 0;  // the row of item j: the last with s_start[r] <= j
        for (long long j0 = 0; j0 < work; j0 += 32 * GR_AHEAD) {{  // GR_AHEAD loads in flight a lane
            I vs[GR_AHEAD];
            long long ks[GR_AHEAD];
            int at[GR_AHEAD];
            bool flags[GR_AHEAD];
#pragma unroll
            for (int q = 0; q < GR_AHEAD; ++q) {{
                const long long j = j0 + lane + 32 * q;
                at[q] = 32;  // no item: a group of its own in the matches below
                flags[q] = false;
                ks[q] = 0;
                vs[q] = 0;
                if (j < work) {{
                    while (s_start[warp][r + 1] <= j) ++r;
                    const long long u = g0 + r, k = s_a[warp][r] + (j - s_start[warp][r]);
                    const I du = (I)(s_start[warp][r + 1] - s_start[warp][r]), v = indices[k];
                    at[q] = r;
                    ks[q] = k;
                    vs[q] = v;
                    flags[q] = {flag};
                }}
            }}
#pragma unroll
            for (int q = 0; q < GR_AHEAD; ++q) {{  // the lanes of a row are consecutive: one match group
                const int i = at[q];
                const bool active = i < 32, flag = flags[q];
                const unsigned same = __match_any_sync(0xffffffffu, i), kept = __ballot_sync(0xffffffffu, flag);
                const unsigned mine = kept & same;
{placed}
                __syncwarp();
                if (active && lane == __ffs(same) - 1) s_kept[warp][i] += __popc(mine);
                __syncwarp();
            }}
        }}
        {counted}
        __syncwarp();
    }}
}}
"""
    else:
        fill_place = (
            """\
                const long long k = k0 + GR_BLOCK * q + threadIdx.x;
                if (k < end) {
                    const long long kb = base + nb_kept + tile + before + __popc(kept[q] & below);
                    const I v = vs[q];
                    const bool flag = flags[q];
"""
            + place
            + "\n                }"
            if fill
            else ""
        )
        # the fill pass starts after the row's earlier segments, as the count pass counted them
        new_start = (
            """const long long nb = new_indptr[u];
        long long base = 0;
        for (int t = 1; t <= segment; ++t) base += segment_kept[r - t];"""
            if fill
            else ""
        )
        counted = (
            ""
            if fill
            else """if (threadIdx.x == 0) {
            segment_kept[r] = (unsigned)nb_kept;
            if (nb_kept) atomicAdd((unsigned long long*)&counts[u], (unsigned long long)nb_kept);
        }"""
        )
        body = f"""\
#define GR_WARPS {WARPS}
#define GR_BLOCK {BLOCK}
#define GR_SEGMENT {COMPACT_SEGMENT}
extern "C" __global__ void __launch_bounds__(GR_BLOCK) {name}(
    const I* __restrict__ indptr, const I* __restrict__ indices, long long n, {flag_args},
    {out_args}, const I* __restrict__ long_rows, const int* __restrict__ long_segment,
    const unsigned long long* __restrict__ long_count, unsigned* __restrict__ segment_kept)
{{
    __shared__ unsigned s_kept[GR_AHEAD][GR_WARPS];  // each warp's kept entries of each tile of a round
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const unsigned below = (1u << lane) - 1u;
    const long long items = (long long)*long_count;
    for (long long r = blockIdx.x; r < items; r += gridDim.x) {{
        const long long u = long_rows[r];
        const int segment = long_segment[r];
        const long long row_end = indptr[u + 1], du_long = row_end - indptr[u];
        const long long start = indptr[u] + (long long)segment * GR_SEGMENT, end = min(row_end, start + GR_SEGMENT);
        const I du = (I)du_long;
        {new_start}
        long long nb_kept = 0;  // the segment's entries kept so far
        for (long long k0 = start; k0 < end; k0 += GR_BLOCK * GR_AHEAD) {{  // a round: GR_AHEAD tiles of the block
            I vs[GR_AHEAD];
            bool flags[GR_AHEAD];
            unsigned kept[GR_AHEAD];
#pragma unroll
            for (int q = 0; q < GR_AHEAD; ++q) {{
                const long long k = k0 + GR_BLOCK * q + threadIdx.x;
                const I v = k < end ? indices[k] : (I)0;
                vs[q] = v;
                flags[q] = k < end && ({flag});
            }}
#pragma unroll
            for (int q = 0; q < GR_AHEAD; ++q) {{
                kept[q] = __ballot_sync(0xffffffffu, flags[q]);
                if (lane == 0) s_kept[q][warp] = __popc(kept[q]);
            }}
            __syncthreads();  // one wait a round: every tile's counts at once
            long long tile = 0;  // kept in the round's earlier tiles
#pragma unroll
            for (int q = 0; q < GR_AHEAD; ++q) {{
                unsigned before = 0, total = 0;  // kept by the block's warps before this one, and by all
                for (int w = 0; w < GR_WARPS; ++w) {{
                    const unsigned x = s_kept[q][w];
                    total += x;
                    before += w < warp ? x : 0u;
                }}
{fill_place}
                tile += total;
            }}
            nb_kept += tile;
            __syncthreads();
        }}
        {counted}
    }}
}}
"""
    return KernelSource(name, _head(index_type) + _ORDER + body)


def render_intersect(mode: str, index_type: str = "int32", tree: _expr.Node | None = None) -> KernelSource:
    """|N(u) ∩ N(v)| for every edge of a CSR graph, one warp per 32 edges; see the module docstring.

    ``mode="measure"`` needs ``tree``, an expression of c, nu, nv (d(u), d(v)).
    """
    if mode not in INTERSECT_MODES:
        raise ValueError(f"mode must be one of {INTERSECT_MODES}, got {mode!r}")
    if (mode == "measure") != (tree is not None):
        raise ValueError("a tree (the measure) is given with mode='measure' and only then")
    label = "" if tree is None else "_" + _label(tree)
    name = f"gr_intersect_{mode}{label}_{index_type}"
    take = "u < v" if mode == "measure" else "true"  # measure: each undirected edge once
    outputs = {
        "total": "unsigned long long* __restrict__ total",
        "edge": "unsigned int* __restrict__ counts",
        "vertex": "unsigned long long* __restrict__ counts",
        "measure": "double* __restrict__ out",
    }[mode]
    on_match = {
        "total": "++found;",
        "edge": (
            "atomicAdd(&s_count[warp][i], 1u);\n"
            "                atomicAdd(&counts[sa + k], 1u);  // the shorter list's owner to x\n"
            "                atomicAdd(&counts[r], 1u);      // the longer list's owner to x"
        ),
        "vertex": "atomicAdd(&s_count[warp][i], 1u);\n                atomicAdd(&counts[x], 1ull);",
        "measure": "atomicAdd(&s_count[warp][i], 1u);",
    }[mode]
    if mode == "total":
        finish = _TOTAL
    elif mode == "edge":
        finish = """\
    if (e < end && s_count[warp][lane]) atomicAdd(&counts[e], s_count[warp][lane]);"""
    elif mode == "vertex":
        finish = """\
    const unsigned c = s_count[warp][lane];
    if (e < end && c) { atomicAdd(&counts[u], (unsigned long long)c); atomicAdd(&counts[v], (unsigned long long)c); }"""
    else:
        f = _expr.render_cuda(tree, {"c": "c", "nu": "nu", "nv": "nv"}, "double")
        finish = f"""\
    if (e < end && take) {{
        const double c = (double)s_count[warp][lane], nu = (double)du, nv = (double)dv;
        const double value = {f};
        out[e] = value;
        out[gr_lower_bound(indices, indptr[v], indptr[v + 1], u)] = value;  // the entry (v, u)
    }}"""
    body = f"""\
#define GR_WARPS {WARPS}
extern "C" __global__ void __launch_bounds__({BLOCK}) {name}(
    const I* __restrict__ indptr, const I* __restrict__ indices, const I* __restrict__ rows, long long begin,
    long long end, {outputs})
{{
    __shared__ long long s_start[GR_WARPS][33];  // exclusive scan of the edges' work items
    __shared__ I s_a[GR_WARPS][32], s_b[GR_WARPS][32], s_bend[GR_WARPS][32];
    __shared__ unsigned s_count[GR_WARPS][32];
    __shared__ unsigned long long s_next;  // a block task's next batch: warps take batches as they finish one
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long e = begin + ((long long)blockIdx.x * GR_WARPS + warp) * 32 + lane;
    I u = 0, v = 0, du = 0, dv = 0, a = 0, b = 0, bend = 0;
    bool take = false;
    long long items = 0;
    if (e < end) {{
        u = rows[e - begin];
        v = indices[e];
        du = indptr[u + 1] - indptr[u];
        dv = indptr[v + 1] - indptr[v];
        take = {take};
        if (take) {{  // a: the shorter list, searched for in b
            if (du <= dv) {{ a = indptr[u]; b = indptr[v]; bend = indptr[v + 1]; items = du; }}
            else {{ a = indptr[v]; b = indptr[u]; bend = indptr[u + 1]; items = dv; }}
        }}
    }}
    const long long work = gr_deal(items, s_start[warp], lane);
    s_a[warp][lane] = a;
    s_b[warp][lane] = b;
    s_bend[warp][lane] = bend;
    s_count[warp][lane] = 0;
    __syncwarp();
    unsigned long long found = 0;
    for (long long j = lane; j < work; j += 32) {{
        int lo = 0, hi = 31;  // the edge i of item j: the last with s_start[i] <= j
        while (lo < hi) {{
            const int mid = (lo + hi + 1) >> 1;
            if (s_start[warp][mid] <= j) lo = mid; else hi = mid - 1;
        }}
        const int i = lo;
        const I sa = s_a[warp][i], k = (I)(j - s_start[warp][i]);
        const I x = indices[sa + k];
        const I r = gr_lower_bound(indices, s_b[warp][i], s_bend[warp][i], x);
        if (r < s_bend[warp][i] && indices[r] == x) {{
                {on_match}
        }}
    }}
    __syncwarp();
{finish}
}}
"""
    return KernelSource(name, _head(index_type) + body)


def render_mirror(index_type: str = "int32", tree: _expr.Node | None = None) -> KernelSource:
    """For each edge (u, v) of L, its count ``counts[e]`` written to A's entries (u, v) and (v, u).

    With ``tree`` (an expression of c, nu, nv) the value written is the measure
    of (c, d(u), d(v)), in double; without, the count itself.
    """
    label = "" if tree is None else "_" + _label(tree)
    name = f"gr_mirror{label}_{index_type}"
    if tree is None:
        out_type, value = "long long", "c"
    else:
        f = _expr.render_cuda(tree, {"c": "(double)c", "nu": "nu", "nv": "nv"}, "double")
        out_type = "double"
        value = f"""[&]() {{
        const double nu = (double)(indptr[u + 1] - indptr[u]), nv = (double)(indptr[v + 1] - indptr[v]);
        return {f};
    }}()"""
    body = f"""\
extern "C" __global__ void {name}(
    const I* __restrict__ l_rows, const I* __restrict__ l_indices, const unsigned int* __restrict__ counts,
    long long l_nnz, const I* __restrict__ indptr, const I* __restrict__ indices, {out_type}* __restrict__ out)
{{
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= l_nnz) return;
    const I u = l_rows[e], v = l_indices[e];
    const long long c = counts[e];
    const {out_type} value = {value};
    out[gr_lower_bound(indices, indptr[u], indptr[u + 1], v)] = value;
    out[gr_lower_bound(indices, indptr[v], indptr[v + 1], u)] = value;
}}
"""
    return KernelSource(name, _head(index_type) + body)


def render_expand(tree: _expr.Node, index_type: str = "int32") -> KernelSource:
    """``out[k] = f(c[k], norms[rows[k]], norms[cols[k]])``, f an expression of c, nu, nv."""
    name = f"gr_expand_{_label(tree)}_{index_type}"
    f = _expr.render_cuda(tree, {"c": "c", "nu": "nu", "nv": "nv"}, "double")
    body = f"""\
extern "C" __global__ void {name}(
    const I* __restrict__ rows, const I* __restrict__ cols, const double* __restrict__ cs,
    const double* __restrict__ norms, long long count, double* __restrict__ out)
{{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) return;
    const double c = cs[k], nu = norms[rows[k]], nv = norms[cols[k]];
    out[k] = {f};
}}
"""
    return KernelSource(name, _head(index_type) + body)


def render_peel(index_type: str = "int32") -> KernelSource:
    """One warp per edge ``(u, v)`` removed in this round (``edges``: its entry with u < v).

    Supports, flags and removals are kept at the entries with row < column (an undirected edge's canonical
    entry).  The lanes deal out the shorter of the two lists, each element w searched for in the longer; a
    match is the triangle {u, v, w}.  It was whole before the round where both other edges were alive or
    removed in it; of its edges removed this round the least (by its vertex pair) does its bookkeeping, so
    each surviving edge loses one support per triangle however many of its edges went: ``atomicSub`` on it.
    """
    name = f"gr_peel_{index_type}"
    body = f"""\
__device__ __forceinline__ I gr_canonical(const I* __restrict__ indptr, const I* __restrict__ indices, I a, I x,
                                          I entry) {{  // the entry of edge {{a, x}} in row min(a, x), given a's
    return a < x ? entry : gr_lower_bound(indices, indptr[x], indptr[x + 1], a);
}}
__device__ __forceinline__ bool gr_before(I a, I b, I c, I d) {{  // pair {{a, b}} before {{c, d}}, each sorted
    const I a0 = min(a, b), a1 = max(a, b), c0 = min(c, d), c1 = max(c, d);
    return a0 < c0 || (a0 == c0 && a1 < c1);
}}
extern "C" __global__ void __launch_bounds__({BLOCK}) {name}(
    const I* __restrict__ indptr, const I* __restrict__ indices, const I* __restrict__ rows,
    const long long* __restrict__ edges, long long count, const unsigned char* __restrict__ alive,
    const unsigned char* __restrict__ removed, int* __restrict__ support)
{{
    const long long wid = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (wid >= count) return;
    const long long e = edges[wid];
    const I u = rows[e], v = indices[e];
    const I du = indptr[u + 1] - indptr[u], dv = indptr[v + 1] - indptr[v];
    const I s = du <= dv ? u : v, l = du <= dv ? v : u;  // the shorter list's owner, the longer's
    const I sa = indptr[s], send = indptr[s + 1], lb = indptr[l], lend = indptr[l + 1];
    for (I k = sa + lane; k < send; k += 32) {{
        const I w = indices[k];
        const I r = gr_lower_bound(indices, lb, lend, w);
        if (r >= lend || indices[r] != w) continue;
        const I cs = gr_canonical(indptr, indices, s, w, k), cl = gr_canonical(indptr, indices, l, w, r);
        if (!(alive[cs] | removed[cs]) || !(alive[cl] | removed[cl])) continue;  // not whole before the round
        if ((removed[cs] && gr_before(s, w, u, v)) || (removed[cl] && gr_before(l, w, u, v))) continue;
        if (alive[cs]) atomicSub(&support[cs], 1);
        if (alive[cl]) atomicSub(&support[cl], 1);
    }}
}}
"""
    return KernelSource(name, _head(index_type) + body)


# The degree order's lists (``render_sort_rows``): each row of L its vertices' ranks, ascending.  A row of up to
# RANK_ROWS_WARP entries is a warp's, a longer one up to RANK_ROWS_BLOCK a block's (its shared memory holds the
# row); a longer one still is sorted by CuPy (none on R-MAT 22, whose longest out-list in the degree order has
# 1,032 entries: it grows as √edges).
RANK_ROWS_WARP = 256
RANK_ROWS_BLOCK = 4096


def render_sort_rows(index_type: str = "int32", group: str = "warp", slots: int = RANK_ROWS_WARP) -> KernelSource:
    """``out``'s rows: ``keys``' rows, each sorted ascending (the oriented graph's rows of ranks).

    ``group="warp"``: every row of 1 to ``slots`` entries, warps striding over
    the rows; a row of up to 32 (most: R-MAT 22's rows of L hold 15 on average)
    sorted in the lanes' registers by a bitonic network of shuffles, a longer
    one copied into the warp's shared memory padded to a power of two with a
    key after every rank and sorted there by the same network.  ``"block"``:
    the ``count`` rows listed in ``rows``, up to ``slots`` entries each, a block
    a row, in shared memory.  ``slots``: a power of two, 32 to
    ``RANK_ROWS_BLOCK``.
    """
    if group not in ("warp", "block"):
        raise ValueError(f"group must be 'warp' or 'block', got {group!r}")
    if slots < 32 or slots & (slots - 1) or slots > RANK_ROWS_BLOCK:
        raise ValueError(f"slots must be a power of two from 32 to {RANK_ROWS_BLOCK}, got {slots}")
    name = f"gr_sort_rows_{group}_{slots}_{index_type}"
    G = 32 if group == "warp" else BLOCK
    sync = "__syncwarp()" if group == "warp" else "__syncthreads()"
    if group == "warp":
        rows = """\
    const int warp = threadIdx.x / 32;
    I* s = s_keys + warp * GR_SLOTS;
    for (long long r = (long long)blockIdx.x * GR_WARPS + warp; r < count; r += (long long)gridDim.x * GR_WARPS) {
        const I row = (I)r;"""
        skip = """\
        if (d <= 32) {  // in registers: lane g holds the g-th key, partners swap by shuffles
            I x = g < d ? keys[a + g] : GR_LAST;
            if (d > 1)
                for (int k = 2; k <= 32; k <<= 1)
                    for (int j = k >> 1; j > 0; j >>= 1) {
                        const I y = __shfl_xor_sync(0xffffffffu, x, j);
                        x = (((g & j) == 0) == ((g & k) == 0)) ? min(x, y) : max(x, y);
                    }
            if (g < d) out[a + g] = x;
            continue;
        }
        if (d > GR_SLOTS) continue;"""
    else:
        rows = """\
    I* s = s_keys;
    for (long long r = blockIdx.x; r < count; r += gridDim.x) {
        const I row = rows[r];"""
        skip = ""
    body = f"""\
#define GR_WARPS {WARPS}
#define GR_SLOTS {slots}
#define GR_LAST ((I)((1ull << (8 * sizeof(I) - 1)) - 1))  // the padding: after every rank
extern "C" __global__ void __launch_bounds__({BLOCK}) {name}(
    const I* __restrict__ indptr, const I* __restrict__ keys, const I* __restrict__ rows, long long count,
    I* __restrict__ out)
{{
    __shared__ I s_keys[{WARPS if group == "warp" else 1} * GR_SLOTS];
    const int g = threadIdx.x % {G};
{rows}
        const I a = indptr[row], d = indptr[row + 1] - a;
{skip}
        int size = 1;
        while (size < d) size <<= 1;
        for (int i = g; i < size; i += {G}) s[i] = i < d ? keys[a + i] : GR_LAST;
        {sync};
        for (int k = 2; k <= size; k <<= 1)
            for (int j = k >> 1; j > 0; j >>= 1) {{
                for (int i = g; i < size; i += {G}) {{
                    const int x = i ^ j;
                    if (x > i) {{
                        const I p = s[i], q = s[x];
                        if ((p > q) == ((i & k) == 0)) {{ s[i] = q; s[x] = p; }}
                    }}
                }}
                {sync};
            }}
        for (int i = g; i < d; i += {G}) out[a + i] = s[i];
        {sync};
    }}
}}
"""
    return KernelSource(name, _head(index_type) + body)


# The probe method's two kinds of task (``render_probe``): a target v with a short out-list is a warp's task, its
# list hashed in the warp's own slice of shared memory; a target with a long one is a block's, its list hashed
# once for all the block's warps.  A task takes ``chunk`` of v's in-neighbours, ``chunk = base · ⌈d⁺(v) / per⌉``
# (at least ``base``): enough probes that hashing v's list costs at most about a quarter of them.
PROBE_LIGHT_MAX = 64  # out-degree up to which a target is a warp's task
PROBE_TASKS = {"warp": {"base": 32, "per": 8}, "block": {"base": BLOCK, "per": 64}}
PROBE_LIGHT_SLOTS = 2 * PROBE_LIGHT_MAX  # a warp's hash slots: load at most one half
PROBE_MODES = ("total", "edge", "vertex")


def probe_slot_bytes(mode: str, index_type: str) -> int:
    """Shared memory a hash slot takes: its key; a count of the triangles found through it (``"edge"``,
    ``"vertex"``); for ``"edge"`` the key's place in v's list."""
    key = 4 if index_type == "int32" else 8
    return key + (4 if mode != "total" else 0) + (2 if mode == "edge" else 0)


def render_probe(mode: str, index_type: str = "int32", group: str = "warp", slots: int = PROBE_LIGHT_SLOTS):
    """Triangles u ≺ v ≺ w of the oriented graph L, found at their middle vertex v.

    A task is a target v and a range of its in-neighbours u (the rows ``up``/``ui``
    of Lᵀ): v's out-list N⁺(v) is hashed into shared memory (``slots`` slots, a
    power of two; open addressing), then every w of each N⁺(u) is looked up in
    it — one shared-memory probe where the search method walks a binary search
    through global memory — with the in-neighbours' lists dealt evenly over the
    lanes as ``render_intersect`` deals its edges'.  L's lists hold keys in the
    order of ≺, ascending (``ranked``: the degree order's ranks, ``order[]``
    giving back a rank's vertex; else ids, the id order's), so only the
    elements of N⁺(u) after v's key, found by a plain binary search, can be in
    N⁺(v): about half of them on R-MAT.  A list longer than half the
    table is searched in global memory instead (correct at any size; never on
    the graphs measured).  ``group``: ``"warp"`` (a warp a task, its own slice of
    the shared memory) or ``"block"`` (the whole block a task).  Tasks
    ``t_begin, t_begin + t_step, …`` below ``t_end`` of ``task_ptr`` (tasks per
    target, scanned; the targets in the order of ≺ where ``ranked``, ``order[]``
    giving each, else of ids) are dealt over the grid's groups in turn: a part
    of the work takes every ``t_step``-th task, so parts of a graph whose
    costly targets run together cost alike.  ``mode`` as ``render_intersect``'s: a
    total; per edge of L (``u → v`` by its in-neighbour, ``u → w`` by atomics,
    ``v → w`` counted in the slot, added once a task); per vertex.
    """
    if mode not in PROBE_MODES:
        raise ValueError(f"mode must be one of {PROBE_MODES}, got {mode!r}")
    if group not in PROBE_TASKS:
        raise ValueError(f"group must be one of {tuple(PROBE_TASKS)}, got {group!r}")
    if slots < 32 or slots & (slots - 1):
        raise ValueError(f"slots must be a power of two of at least 32, got {slots}")
    name = f"gr_probe_{mode}_{group}_{slots}_{index_type}"
    group_threads = 32 if group == "warp" else BLOCK
    sync = "__syncwarp()" if group == "warp" else "__syncthreads()"
    tasks = PROBE_TASKS[group]
    outputs = {
        "total": "unsigned long long* __restrict__ total",
        "edge": "unsigned int* __restrict__ counts",
        "vertex": "unsigned long long* __restrict__ counts",
    }[mode]
    edge = mode == "edge"
    on_match = {
        "total": "++found;",
        "edge": (
            "atomicAdd(&s_count[warp][i], 1u);\n"
            "                atomicAdd(&counts[sa + k], 1u);  // u → w\n"
            "                if (hashed) atomicAdd(&cnt[h], 1u); else atomicAdd(&counts[av + h], 1u);  // v → w"
        ),
        "vertex": (
            "atomicAdd(&s_count[warp][i], 1u);\n"
            "                ++found;\n"
            "                if (hashed) atomicAdd(&cnt[h], 1u); else atomicAdd(&counts[GR_ID(x)], 1ull);  // w"
        ),
    }[mode]
    per_batch = {
        "total": "",
        "edge": "    if (e < ie && s_count[warp][lane]) atomicAdd(&counts[uv], s_count[warp][lane]);",
        "vertex": "    if (e < ie && s_count[warp][lane]) atomicAdd(&counts[u], (unsigned long long)s_count[warp][lane]);",
    }[mode]
    per_task = {
        "total": "",
        "edge": f"""\
        if (hashed)
            for (int s = g_lane; s < cap; s += G)
                if (cnt[s]) atomicAdd(&counts[av + pos[s]], cnt[s]);
        {sync};""",
        "vertex": f"""\
        if (hashed)
            for (int s = g_lane; s < cap; s += G)
                if (cnt[s]) atomicAdd(&counts[GR_ID(keys[s])], (unsigned long long)cnt[s]);
        {{
            unsigned long long x = found;
            for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
            if (lane == 0 && x) atomicAdd(&counts[v], x);
            found = 0;
        }}
        {sync};""",
    }[mode]
    # A warp's batch (short lists): its items (the elements of its 32 in-neighbours' lists, end to end) dealt
    # evenly over the lanes, GR_AHEAD loads in flight a lane; a lane's items only grow, so it walks on to each
    # one's in-neighbour.  A block's (a long target's in-neighbours have long lists, R-MAT 22: ~160 on average):
    # the warp walks each list in turn, its lanes over the list (measured: dealing took 52 ms of R-MAT 22's
    # triangles where this takes 46).
    deal = """\
            const long long work = gr_deal(items, s_start[warp], lane);
            s_a[warp][lane] = a;
            __syncwarp();
            int i = 0;  // the in-neighbour of item j: the last with s_start[i] <= j
            for (long long j = lane; j < work; j += 32 * GR_AHEAD) {
                I x[GR_AHEAD], sa[GR_AHEAD], k[GR_AHEAD];
                int at[GR_AHEAD];
#pragma unroll
                for (int q = 0; q < GR_AHEAD; ++q) {
                    const long long jq = j + 32 * q;
                    if (jq < work) {
                        while (s_start[warp][i + 1] <= jq) ++i;
                        at[q] = i;
                        sa[q] = s_a[warp][i];
                        k[q] = (I)(jq - s_start[warp][i]);
                        x[q] = li[sa[q] + k[q]];
                    }
                }
#pragma unroll
                for (int q = 0; q < GR_AHEAD; ++q)
                    if (j + 32 * q < work) visit(x[q], sa[q], k[q], at[q]);
            }"""
    if group == "block":
        deal = """\
            const int batch = (int)min(32LL, ie - b);
            __syncwarp();
            for (int i = 0; i < batch; ++i) {
                const I sa = __shfl_sync(0xffffffffu, a, i), d = (I)__shfl_sync(0xffffffffu, items, i);
                for (I k = lane; k < d; k += 32 * GR_AHEAD) {
                    I x[GR_AHEAD];
#pragma unroll
                    for (int q = 0; q < GR_AHEAD; ++q) x[q] = k + 32 * q < d ? li[sa + k + 32 * q] : (I)0;
#pragma unroll
                    for (int q = 0; q < GR_AHEAD; ++q)
                        if (k + 32 * q < d) visit(x[q], sa, k + 32 * q, i);
                }
            }"""
    if group == "warp":
        first, following = "ib", "b + 32"
    else:  # taken as warps finish their last: lists differ in length
        grab = "__shfl_sync(0xffffffffu, lane ? 0ull : atomicAdd(&s_next, 32ull), 0)"
        first = following = f"(long long){grab}"
    finish = _TOTAL if mode == "total" else ""
    # A total's kernel is held to 7 blocks an SM: 32 registers a thread where it took 48 (5 blocks), 32 bytes
    # spilled.  R-MAT 22's block tasks: 30.0 -> 27.5 ms on an H200; per vertex it was slower (44.2 -> 48.7).
    bounds = ", 7" if mode == "total" else ""
    counted = mode != "total"  # the layout: counts (4 bytes a slot), keys, places in v's list (2 bytes)
    edge_slots = (
        f"    unsigned* cnt = {'(unsigned*)s_dyn + group_in_block * GR_SLOTS' if counted else 'nullptr'};\n"
        f"    I* keys = (I*)(s_dyn + GR_GROUPS * GR_SLOTS * {4 if counted else 0}) + group_in_block * GR_SLOTS;\n"
        "    unsigned short* pos = "
        + (
            "(unsigned short*)(s_dyn + GR_GROUPS * GR_SLOTS * (sizeof(unsigned) + sizeof(I))) + group_in_block * GR_SLOTS;"
            if edge
            else "nullptr;"
        )
    )
    body = f"""\
#define GR_WARPS {WARPS}
#define G {group_threads}
#define GR_GROUPS ({BLOCK} / G)
#define GR_SLOTS {slots}
#define GR_ID(x) (ranked ? order[(x)] : (x))  // a vertex's id from its key in L's lists
__device__ __forceinline__ I gr_cas(int* p, int cmp, int val) {{ return atomicCAS(p, cmp, val); }}
__device__ __forceinline__ I gr_cas(long long* p, long long cmp, long long val) {{
    return (long long)atomicCAS((unsigned long long*)p, (unsigned long long)cmp, (unsigned long long)val);
}}
__device__ __forceinline__ int gr_slot(I x, int bits) {{  // Fibonacci hashing: the product's high bits
    const unsigned h = (unsigned)x ^ (unsigned)((unsigned long long)x >> 32);
    return bits ? (int)((h * 2654435769u) >> (32 - bits)) : 0;
}}
extern "C" __global__ void __launch_bounds__({BLOCK}{bounds}) {name}(
    const I* __restrict__ lp, const I* __restrict__ li, const I* __restrict__ up, const I* __restrict__ ui,
    const I* __restrict__ rank, const I* __restrict__ order, int ranked, const long long* __restrict__ task_ptr, long long n, long long t_begin, long long t_end, long long t_step, {outputs})
{{
    extern __shared__ __align__(16) unsigned char s_dyn[];
    __shared__ long long s_start[GR_WARPS][33];  // exclusive scan of the in-neighbours' list lengths
    __shared__ I s_a[GR_WARPS][32];
    __shared__ unsigned s_count[GR_WARPS][32];
    __shared__ unsigned long long s_next;  // a block task's next batch: warps take batches as they finish one
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group_in_block = threadIdx.x / G, g_lane = threadIdx.x % G, warp_in_group = g_lane / 32;
{edge_slots}
    unsigned long long found = 0;
    for (long long t = t_begin + ((long long)blockIdx.x * GR_GROUPS + group_in_block) * t_step; t < t_end;
         t += (long long)gridDim.x * GR_GROUPS * t_step) {{
        long long lo = 0, hi = n - 1;  // the target of task t: the last with task_ptr[lo] <= t
        while (lo < hi) {{
            const long long mid = (lo + hi + 1) >> 1;
            if (task_ptr[mid] <= t) lo = mid; else hi = mid - 1;
        }}
        const I v = ranked ? order[lo] : (I)lo;  // targets in the order of ≺, or of ids
        const I av = lp[v], dv = lp[v + 1] - av, key_v = ranked ? rank[v] : v;  // v's key in L's lists
        const long long chunk = (long long){tasks["base"]} * max((I)1, (dv + {tasks["per"] - 1}) / {tasks["per"]});
        const long long ib = up[v] + (t - task_ptr[lo]) * chunk, ie = min((long long)up[v + 1], ib + chunk);
        int bits = 5;
        while ((1 << bits) < 2 * dv) ++bits;
        const bool hashed = (1 << bits) <= GR_SLOTS;  // at most half full
        while (hashed && (1 << bits) < GR_SLOTS && (1 << bits) < 8 * dv) ++bits;  // an eighth where there is room:
        const int cap = 1 << bits;  // most lookups miss (R-MAT 22: 84 %), and a miss walks to an empty slot
        {"if (threadIdx.x == 0) s_next = ib;" if group == "block" else ""}
        if (hashed) {{  // N⁺(v) into the table
            for (int s = g_lane; s < cap; s += G) {{
                keys[s] = (I)-1;
                {"cnt[s] = 0u;" if counted else ""}
            }}
            {sync};
            for (I k = g_lane; k < dv; k += G) {{
                const I w = li[av + k];
                int h = gr_slot(w, bits);
                while (gr_cas(&keys[h], (I)-1, w) != (I)-1) h = (h + 1) & (cap - 1);
                {"pos[h] = (unsigned short)k;" if edge else ""}
            }}
        }}
        {sync};
        auto visit = [&](const I x, const I sa, const I k, const int i) {{  // w = x, the k-th of N⁺(u) at sa
            int h;
            bool hit;
            if (hashed) {{
                h = gr_slot(x, bits);
                I y;
                while ((y = keys[h]) != x && y != (I)-1) h = (h + 1) & (cap - 1);
                hit = y == x;
            }} else {{
                const I r = gr_lower_bound(li, av, av + dv, x);
                h = (int)(r - av);
                hit = r < av + dv && li[r] == x;
            }}
            if (hit) {{
                {on_match}
            }}
        }};
        for (long long b = {first}; b < ie; b = {following}) {{  // the warp's batches of 32 in-neighbours
            const long long e = b + lane;
            I u = 0, a = 0;
            long long items = 0;
            long long uv = 0;  // the entry u → v of L
            if (e < ie) {{  // N⁺(u) ascends in the order's keys: only its w ≻ v can be in N⁺(v)
                u = ui[e];
                const I end = lp[u + 1];
                uv = gr_lower_bound(li, lp[u], end, key_v);
                a = (I)uv + 1;
                items = end - a;
            }}
            s_count[warp][lane] = 0;
{deal}
            __syncwarp();
{per_batch}
            __syncwarp();
        }}
        {sync};
{per_task}
    }}
{finish}
}}
"""
    return KernelSource(name, _head(index_type) + body)
