"""CUDA C for the per-row top-k selection of k-nearest neighbours: a pure function, no GPU library imported.

``render_topk`` renders one kernel: **one warp per row** of a distance block
(query rows × a tile of index rows).  The block need not exist: each candidate
is the measure's expansion ``f(c0, c1, nx*, ny*, n)`` (``semiring.interfaces.EXPANSION_VARIABLES``)
evaluated as it is read from the product's terms, so the distances are never
written and read back (a block already expanded is the expansion ``c0``).  Each lane keeps a sorted list of its
``capacity`` best (value, index) pairs in registers (the list is indexed only
by unrolled loops, so it never leaves them), first fed with the row's running
selection from earlier tiles, then with its strided share of the block's row
(coalesced reads).  A candidate costs one comparison with the lane's worst
kept pair unless it enters the list.  The warp then merges its 32 sorted lists
with ``k`` tournament rounds (a butterfly of shuffles finds the best list head,
the lane that owned it drops it) and writes the row's new selection in place:
the block itself is never sorted or copied, and only ``m × k`` pairs persist
between tiles.

For ``k`` up to 32 (``WARP_LIST``, the default ``k`` of 10 among them) the warp keeps **one list across its
lanes** instead, lane ``s`` holding the row's ``s``-th best pair: a candidate is compared with the list's
``k``-th (a value every lane holds), and the few that beat it are inserted one at a time by the whole warp (a
ballot finds them, a shuffle moves the list's tail down a lane).  With a list a lane, each lane kept its own
best ``capacity`` of a 32nd of the row, and a third of the rounds at the end of a 40,000-candidate row still had
a lane inserting into its list (``k`` ln(candidates / k) inserts a lane) while the other 31 waited: ``ncu`` of
all-pairs cosine of 40,000 movielens-like rows gave 11.9 active threads a warp and the selection 17.2 of the
kNN's 58.5 ms on an H200.  With one list the inserts are about ``k`` ln(candidates / k) a row, not a lane.

A row of a block far longer than the GPU has warps for its rows (a few hundred queries against millions of
index rows: 256 warps on 132 multiprocessors) is cut into segments, a warp each (``mode="segment"``): each
writes its segment's best ``k`` with their indices to a scratch row, and a second kernel
(``mode="merge"``) merges those lists, read with their indices (``cand_i``), into the running selection.

Order (the same as the CPU engine's top-k): ascending, or
descending for a similarity (``largest``); equal values by the smaller index;
NaN after every number, NaNs by index.  Empty slots are ``(NaN, TOPK_EMPTY)``,
after every real pair.
"""

from __future__ import annotations

from semiring import expr as _expr
from semiring.interfaces import TOPK_EMPTY

from .source import EXPANSION_ARGS, PREAMBLE, VALUE_TYPES, KernelSource, memo_by_identity

# A block already expanded: the candidate is its entry.
BLOCK = _expr.Node("var", ("c0",))


# List capacities rendered; a larger k is selected by sorting (semiring.kernels.cuda.topk.topk_push).
CAPACITIES = (8, 16, 32, 64, 128)
WARPS_PER_BLOCK = 4
# Up to this capacity the warp keeps one list across its lanes (a pair a lane), else a list a lane.
WARP_LIST = 32


MODES = ("tile", "segment", "merge")
# Candidates a lane reads ahead of comparing them (their loads in flight together), where the block is written
# (an entry a candidate): the selection of 500 queries against the 8.8 M-row index went from 35 to 20 ms on an
# H200.  An expansion's candidates (terms and norms read, the measure computed) are read one at a time with a list
# a lane: read ahead, all-pairs cosine of 40,000 rows took 92 ms against 81 (more registers a lane, fewer warps
# resident); with one list a warp (no list of pairs in each lane's registers) still one: 4 took 6.2-6.3 ms of
# that selection against 6.0 (a development run at a9e8a5b, movielens-like rows).
UNROLL = 4
EXPANSION_UNROLL = 1


def capacity_for(k: int) -> int | None:
    """The smallest rendered list capacity holding ``k`` pairs, or None when k is too large for registers."""
    return next((c for c in CAPACITIES if c >= k), None)


@memo_by_identity
def render_topk(
    value_type: str = "float32",
    capacity: int = 16,
    largest: bool = False,
    expansion: _expr.Node = BLOCK,
    param_names: tuple[str, ...] = (),
    label: str = "block",
    mode: str = "tile",
) -> KernelSource:
    """Merge a block into each row's running top-k: ``run[r] = best k of run[r] ∪ block[r]``, the block's
    entries being ``expansion`` (a tree of the expansion variables and ``param_names``; ``label`` names it).

    Arguments: the operands ``c0, c1`` (m × p terms, row-major), ``nx0, nx1``
    (per row), ``ny0, ny1`` (per candidate; an operand the expansion does not
    read may be any pointer), ``m``, ``p``, ``n`` (the column count), ``params``
    (double), ``col0`` (global index of the block's column 0), ``self0`` (global
    index of row 0 when a query must not select itself, else -1), ``k``
    (≤ capacity), then the running selection ``run_v``, ``run_i`` (m × k,
    sorted, updated in place), then ``seg`` (the candidates of one segment), ``part_v``, ``part_i`` and
    ``cand_i``.  ``mode``: ``tile`` merges the block's row (``seg`` >= p) into the running selection;
    ``segment`` writes segment ``blockIdx.y``'s best k of row r (its candidates ``[y·seg, (y+1)·seg)``) to
    ``part_*[r, y·k : (y+1)·k]`` and does not read the running selection; ``merge`` merges the block (the
    segments' lists, each candidate's index in ``cand_i``, laid out as the block) into the running selection.
    Pointers a mode does not read may be any.
    """
    try:
        T = VALUE_TYPES[value_type]
    except KeyError:
        raise ValueError(f"value_type must be one of {list(VALUE_TYPES)}, got {value_type!r}") from None
    if capacity not in CAPACITIES:
        raise ValueError(f"capacity must be one of {CAPACITIES}, got {capacity}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    order = "largest" if largest else "smallest"
    lists = "w" if capacity <= WARP_LIST else ""  # one list a warp, else one a lane
    name = f"sr_topk_{order}_c{capacity}{lists}_{label}_{value_type}" + ("" if mode == "tile" else f"_{mode}")
    segment, merge = mode == "segment", mode == "merge"
    names = dict(EXPANSION_ARGS)  # the expansion kernel's operands: entry t of row i, candidate j
    names.update({p: f"T(params[{k}])" for k, p in enumerate(param_names)})
    locals_, (f,) = _expr.render_cuda_shared([expansion], names)
    before = "a > b" if largest else "a < b"
    unroll = UNROLL if expansion == BLOCK else EXPANSION_UNROLL if lists else 1
    target = "part_v + (row * gridDim.y + blockIdx.y) * k" if segment else "run_v + row * k"
    target_i = "part_i + (row * gridDim.y + blockIdx.y) * k" if segment else "run_i + row * k"
    index = "cand_i[row * p + jj]" if merge else "col0 + jj"
    loop = (_warp_list if lists else _lane_lists)(target, target_i, index, segment)
    body = f"""\
typedef {T} T;
#define SR_CAP {capacity}
#define SR_UNROLL {unroll}
#define SR_EMPTY {TOPK_EMPTY}LL

// (a, ia) comes before (b, ib): the order of the selection.
__device__ __forceinline__ bool sr_before(T a, long long ia, T b, long long ib) {{
    if (isnan(a)) return isnan(b) && ia < ib;
    if (isnan(b)) return true;
    return ({before}) || (a == b && ia < ib);
}}

// Insert (x, g) into the lane's sorted list; the caller knows it beats the last entry.
__device__ __forceinline__ void sr_insert(T (&v)[SR_CAP], long long (&id)[SR_CAP], T x, long long g) {{
    bool placed = false;
#pragma unroll
    for (int s = SR_CAP - 1; s >= 0; --s) {{
        if (!placed) {{
            if (s > 0 && sr_before(x, g, v[s - 1], id[s - 1])) {{
                v[s] = v[s - 1];
                id[s] = id[s - 1];
            }} else {{
                v[s] = x;
                id[s] = g;
                placed = true;
            }}
        }}
    }}
}}

// The candidate (i, j) of the block, entry t of its operands: the measure's expansion read from the terms.
__device__ __forceinline__ T sr_candidate(
    const T* __restrict__ c0, const T* __restrict__ c1,
    const T* __restrict__ nx0, const T* __restrict__ nx1, const T* __restrict__ ny0, const T* __restrict__ ny1,
    long long n, const double* __restrict__ params, long long i, long long j, long long t)
{{
    {locals_}
    return {f};
}}

extern "C" __global__ void {name}(
    const T* __restrict__ c0, const T* __restrict__ c1,
    const T* __restrict__ nx0, const T* __restrict__ nx1, const T* __restrict__ ny0, const T* __restrict__ ny1,
    long long m, long long p, long long n, const double* __restrict__ params, long long col0, long long self0,
    int k, T* __restrict__ run_v, long long* __restrict__ run_i,
    long long seg, T* __restrict__ part_v, long long* __restrict__ part_i, const long long* __restrict__ cand_i)
{{
    const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= m) return;  // warp-uniform: the shuffles below always see whole warps
{loop}
}}
"""
    return KernelSource(name, PREAMBLE + body)


def _lane_lists(target: str, target_i: str, index: str, segment: bool) -> str:
    """The kernel's loop with a sorted list of ``SR_CAP`` pairs in each lane's registers, merged at the end by
    ``k`` tournament rounds: ``target`` and ``target_i`` the row's pairs (C expressions), ``index`` candidate
    ``jj``'s global index."""
    return f"""\
    T v[SR_CAP];
    long long id[SR_CAP];
#pragma unroll
    for (int s = 0; s < SR_CAP; ++s) {{
        v[s] = sr_nan();
        id[s] = SR_EMPTY;
    }}
    T* rv = {target};
    long long* ri = {target_i};
    {"// a segment starts from empty lists: the merge reads the running selection" if segment else ""}
    for (int s = lane; s < {"0" if segment else "k"}; s += 32)
        if (sr_before(rv[s], ri[s], v[SR_CAP - 1], id[SR_CAP - 1])) sr_insert(v, id, rv[s], ri[s]);
    const long long skip = self0 >= 0 ? self0 + row - col0 : -1;  // the query's own column, if in this tile
    const long long j1 = min(p, (blockIdx.y + 1) * seg);
    long long j = blockIdx.y * seg + lane;
    // SR_UNROLL candidates a lane are read before any is compared, so their loads overlap: one at a time, the
    // loop waited on each load (about 10 ps a candidate on an H200, 8x the memory's pace).
    for (; j + 32 * (SR_UNROLL - 1) < j1; j += 32 * SR_UNROLL) {{
        T xs[SR_UNROLL];
        long long gs[SR_UNROLL];
#pragma unroll
        for (int u = 0; u < SR_UNROLL; ++u) {{
            const long long jj = j + 32 * u;
            xs[u] = sr_candidate(c0, c1, nx0, nx1, ny0, ny1, n, params, row, jj, row * p + jj);
            gs[u] = {index};
        }}
#pragma unroll
        for (int u = 0; u < SR_UNROLL; ++u)
            if (j + 32 * u != skip && sr_before(xs[u], gs[u], v[SR_CAP - 1], id[SR_CAP - 1]))
                sr_insert(v, id, xs[u], gs[u]);
    }}
    for (; j < j1; j += 32) {{
        const T x = sr_candidate(c0, c1, nx0, nx1, ny0, ny1, n, params, row, j, row * p + j);
        const long long jj = j;
        const long long g = {index};
        if (j != skip && sr_before(x, g, v[SR_CAP - 1], id[SR_CAP - 1])) sr_insert(v, id, x, g);
    }}
    // k rounds: the best head among the 32 lists wins (lane number breaks the tie of two empty slots).
    for (int out = 0; out < k; ++out) {{
        T bv = v[0];
        long long bi = id[0];
        int bl = lane;
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) {{
            const T ov = __shfl_xor_sync(0xffffffffu, bv, offset);
            const long long oi = __shfl_xor_sync(0xffffffffu, bi, offset);
            const int ol = __shfl_xor_sync(0xffffffffu, bl, offset);
            if (sr_before(ov, oi, bv, bi) || (!sr_before(bv, bi, ov, oi) && ol < bl)) {{
                bv = ov;
                bi = oi;
                bl = ol;
            }}
        }}
        if (lane == bl) {{  // drop the head: shift the list left, an empty slot enters at the end
#pragma unroll
            for (int s = 0; s < SR_CAP - 1; ++s) {{
                v[s] = v[s + 1];
                id[s] = id[s + 1];
            }}
            v[SR_CAP - 1] = sr_nan();
            id[SR_CAP - 1] = SR_EMPTY;
        }}
        if (lane == 0) {{
            rv[out] = bv;
            ri[out] = bi;
        }}
    }}"""


def _warp_list(target: str, target_i: str, index: str, segment: bool) -> str:
    """The kernel's loop with one sorted list across the warp's lanes, lane ``s`` holding the ``s``-th best pair
    (``k`` ≤ 32): the candidates before the list's ``k``-th, found by a ballot, inserted by the whole warp one at
    a time (the list's tail shuffled down a lane), and the list's ``k``-th read again after each."""
    start = "" if segment else "if (lane < k) {\n        v = rv[lane];\n        id = ri[lane];\n    }"
    return f"""\
    T* rv = {target};
    long long* ri = {target_i};
    T v = sr_nan();  // the running selection is sorted best first: lane s takes its s-th pair
    long long id = SR_EMPTY;
    {start or "// a segment starts from an empty list: the merge reads the running selection"}
    T bound = __shfl_sync(0xffffffffu, v, k - 1);
    long long bound_i = __shfl_sync(0xffffffffu, id, k - 1);
    const long long skip = self0 >= 0 ? self0 + row - col0 : -1;  // the query's own column, if in this tile
    const long long j0 = blockIdx.y * seg, j1 = min(p, (blockIdx.y + 1) * seg);
    // warp-uniform rounds (every lane reaches each ballot); SR_UNROLL candidates a lane read before any is compared
    for (long long base = j0; base < j1; base += 32 * SR_UNROLL) {{
        T xs[SR_UNROLL];
        long long gs[SR_UNROLL];
        bool in[SR_UNROLL];
#pragma unroll
        for (int u = 0; u < SR_UNROLL; ++u) {{
            const long long jj = base + 32 * u + lane;
            in[u] = jj < j1 && jj != skip;
            xs[u] = in[u] ? sr_candidate(c0, c1, nx0, nx1, ny0, ny1, n, params, row, jj, row * p + jj) : T(0);
            gs[u] = in[u] ? {index} : 0;
        }}
#pragma unroll
        for (int u = 0; u < SR_UNROLL; ++u) {{
            bool before = in[u] && sr_before(xs[u], gs[u], bound, bound_i);
            unsigned int hits = __ballot_sync(0xffffffffu, before);
            while (hits) {{  // rare: a candidate among the row's best k so far
                const int src = __ffs(hits) - 1;
                const T x = __shfl_sync(0xffffffffu, xs[u], src);
                const long long g = __shfl_sync(0xffffffffu, gs[u], src);
                const int rank = __popc(__ballot_sync(0xffffffffu, sr_before(v, id, x, g)));  // < k: it beat the k-th
                const T up = __shfl_up_sync(0xffffffffu, v, 1);
                const long long up_i = __shfl_up_sync(0xffffffffu, id, 1);
                if (lane == rank) {{
                    v = x;
                    id = g;
                }} else if (lane > rank) {{
                    v = up;
                    id = up_i;
                }}
                bound = __shfl_sync(0xffffffffu, v, k - 1);
                bound_i = __shfl_sync(0xffffffffu, id, k - 1);
                before = before && lane != src && sr_before(xs[u], gs[u], bound, bound_i);
                hits = __ballot_sync(0xffffffffu, before);
            }}
        }}
    }}
    if (lane < k) {{
        rv[lane] = v;
        ri[lane] = id;
    }}"""
