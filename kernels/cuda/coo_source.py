"""The paper's load-balanced hybrid CSR + COO kernel, rendered from a semiring spec (pure: no GPU library).

One block holds one *part* of a row ``a`` of A (a range of its stored
entries) in shared memory, then its threads walk B's stored entries:

* ``table="hash"`` — the part in a hash table (Murmur3's 32-bit finaliser,
  linear probing, at most half full: the executor sizes the table and cuts a
  row longer than half of it into parts by column range, each part taking the
  columns from its first stored column up to the next part's);
* ``table="dense"`` — the whole row scattered into a dense vector of the
  column space (and a bitmap of its stored columns where the semantics need
  it), as ``render_pairwise_rowvec`` holds it (``rowvec_shared_bytes``).

Unmasked, B is read as COO (a row index per stored entry) so its entries, not
its rows, are dealt evenly to the warps whatever the row degrees; each warp
takes 32 consecutive entries, applies ⊗ with the held row, and reduces by
B-row with a warp-level segmented scan (a ballot of segment heads, five
shuffles), so each warp writes once per B-row it touches.  A segment holding
a whole B-row of a whole A-row has one writer and stores plainly; the others
(a B-row cut by a warp's 32 entries, or an A-row cut into parts) combine with
an atomic ⊕ (``atomicAdd`` for plus, a compare-and-swap loop for any other
monoid).  The output starts filled with the semiring's start value.

Masked, the block walks the mask entries of its held row (an entry list built
by the executor), one group of lanes per entry streaming that entry's B row.

A union runs two passes (the paper's section 3.3.1): the first adds ``x ⊗ y``
where the held row stores the column and ``0 ⊗ y`` where it does not; the
second swaps the roles (Y's rows held, X's entries streamed, the output
transposed) and adds ``x ⊗ 0`` for the columns the held Y row does not store —
skipped by structure (the table lookup), so a stored zero is counted once.
"""

from __future__ import annotations

from semiring import expr as _expr

from .source import PREAMBLE, KernelSource, _costly, _ops, _suffix, _types

TABLES = ("hash", "dense")
# How an unmasked kernel walks B: its entries dealt evenly to warps (COO, segmented reduction), or its rows
# to groups of lanes (a shuffle reduction per row, as ``render_pairwise_rowvec``).
STREAMS = ("coo", "rows")
# The hash table's empty key: no column is negative.
EMPTY_KEY = -1


def table_slot_bytes(value_type: str, index_type: str, split: bool = False) -> int:
    """Shared memory per hash-table slot: a key and a value (and a margin, for a margin split)."""
    return (4 if value_type == "float32" else 8) * (2 if split else 1) + (4 if index_type == "int32" else 8)


def _needs_presence(sr, second_pass: bool) -> bool:
    """Whether a dense row must tell a stored column from a missing one: its 0 does for an annihilating op and
    for a union's first pass (a missing entry is read as 0), not for a structural op or a second pass."""
    return second_pass or (not sr.annihilates and not sr.is_union)


def _term(sr, second_pass: bool, table: str, split: bool = False) -> str:
    """C statements giving ``v`` (this entry's ⊗, or ⊕'s identity) and ``hit`` (whether it adds anything),
    from ``found`` (the held row stores column c), ``x`` (its value there) and the streamed value ``y``;
    with ``split``, the margin split's cross op from the union's op and the two entries' margins."""
    if split:  # f(x, y) − f(x, 0) − f(0, y), the margins computed once per stored entry
        return "if (found) { v = (sr_union(x, y, params) - mx) - bm[k]; hit = true; }"
    if second_pass:  # the held row is Y's, the streamed value X's: X's columns Y lacks
        return "if (!found) { v = sr_mult(y, T(0), params); hit = true; }"
    if sr.is_union:  # a missing held entry counts as 0 (a dense row holds 0 there)
        return "v = sr_mult(found ? x : T(0), y, params); hit = true;"
    if table == "dense" and sr.annihilates and not _costly(sr.mult.tree):
        return "v = sr_mult(x, y, params); hit = true;"  # 0 ⊗ y is the identity: the branch costs more
    if table == "dense" and sr.annihilates:
        return "if (x != T(0)) { v = sr_mult(x, y, params); hit = true; }"  # skip the costly op of a missing 0
    return "if (found) { v = sr_mult(x, y, params); hit = true; }"  # the columns both rows store


def _table_code(
    sr, value_type: str, index_type: str, table: str, second_pass: bool, split: bool = False
) -> tuple[str, str, str]:
    """(device functions, the block's table set-up, the lookup of column ``c`` in held row ``r``); with
    ``split`` (hash tables only) each slot also holds its entry's margin ``f(x, 0)``."""
    if table == "hash":
        key_bits = "(unsigned)c" if index_type == "int32" else "(unsigned)(c ^ (c >> 32))"
        cas = (
            "atomicCAS(&keys[h], (int)SR_EMPTY, (int)c)"
            if index_type == "int32"
            else "(long long)atomicCAS((unsigned long long*)&keys[h], (unsigned long long)SR_EMPTY, "
            "(unsigned long long)c)"
        )
        functions = f"""\
#define SR_EMPTY ((I){EMPTY_KEY})
// MurmurHash3's 32-bit finaliser: neighbouring columns land far apart, so linear probing stays short.
__device__ __forceinline__ unsigned sr_hash(I c) {{
    unsigned h = {key_bits};
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
    return h;
}}
__device__ __forceinline__ unsigned sr_insert(I* keys, unsigned mask, I c) {{
    unsigned h = sr_hash(c) & mask;
    while ((I){cas} != SR_EMPTY) h = (h + 1) & mask;  // at most half full: a free slot is near
    return h;
}}
__device__ __forceinline__ int sr_find(const I* keys, unsigned mask, I c) {{
    for (unsigned h = sr_hash(c) & mask;; h = (h + 1) & mask) {{
        const I k = keys[h];
        if (k == c) return (int)h;
        if (k == SR_EMPTY) return -1;
    }}
}}
"""
        margins = SPLIT_TABLE if split else ("", "", "")
        setup = f"""\
    T* vals = (T*)sr_shared;
    {margins[0]}I* keys = (I*)(vals + {2 if split else 1} * SR_ROWS * slots);
    const unsigned mask = (unsigned)(slots - 1);
    for (long long s = threadIdx.x; s < SR_ROWS * slots; s += blockDim.x) keys[s] = SR_EMPTY;
    __syncthreads();
    for (int r = 0; r < SR_ROWS; ++r)
        for (I k = k0[r] + threadIdx.x; k < k1[r]; k += blockDim.x) {{
            const unsigned h = r * slots + sr_insert(keys + r * slots, mask, ai[k]);
            vals[h] = av[k];{margins[1]}
        }}
    __syncthreads();"""
        lookup = f"""const int h = sr_find(keys + r * slots, mask, (I)c);
                    const bool found = h >= 0;
                    const T x = found ? vals[r * slots + h] : T(0);{margins[2]}"""
        return functions, setup, lookup
    presence = _needs_presence(sr, second_pass)
    setup = f"""\
    T* vals = (T*)sr_shared;  // one row (SR_ROWS is 1): the whole column space
    unsigned* present = (unsigned*)(vals + slots);
    const long long words = {"(slots + 31) / 32" if presence else "0"};
    for (long long s = threadIdx.x; s < slots; s += blockDim.x) vals[s] = T(0);
    for (long long w = threadIdx.x; w < words; w += blockDim.x) present[w] = 0u;
    __syncthreads();
    for (I k = k0[0] + threadIdx.x; k < k1[0]; k += blockDim.x) {{
        const I c = ai[k];
        vals[c] = av[k];
        {"atomicOr(&present[c >> 5], 1u << (c & 31));" if presence else ""}
    }}
    __syncthreads();"""
    found = "((present[c >> 5] >> (c & 31)) & 1u) != 0u" if presence else "true"
    lookup = f"const T x = vals[c]; const bool found = {found}; (void)found;"
    return "", setup, lookup


# The margin split's extras of a hash table: the margins' array, their insertion, their lookup.
SPLIT_TABLE = (
    "T* margs = vals + SR_ROWS * slots;\n    ",
    "\n            margs[h] = am[k];",
    "\n                    const T mx = found ? margs[r * slots + h] : T(0);",
)


def render_entrywise(tree: _expr.Node, label: str, value_type: str = "float32") -> KernelSource:
    """One thread per stored entry: ``out[k] = f(x)`` of its value ``x`` — a margin split's ``f(x, 0)``,
    evaluated once per stored entry rather than once per pair of rows."""
    T, _ = _types(value_type, "int64")
    name = f"sr_entrywise_{_suffix(label, value_type, 'int64')}"
    f = _expr.render_cuda(tree, {"x": "x"}, "T")
    body = f"""\
typedef {T} T;
extern "C" __global__ void {name}(const T* __restrict__ data, long long n, T* __restrict__ out)
{{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const T x = data[k];
    out[k] = {f};
}}
"""
    return KernelSource(name, PREAMBLE + body)


def _atomic_combine(sr, value_type: str) -> str:
    """``sr_combine(addr, v)``: ``*addr = *addr ⊕ v`` atomically (several warps or parts share an output)."""
    if sr.add.kind == "plus":
        return "__device__ __forceinline__ void sr_combine(T* addr, T v) { atomicAdd(addr, v); }\n"
    if value_type == "float32":
        word, to_word, from_word = "unsigned", "__float_as_uint", "__uint_as_float"
    else:
        word, to_word, from_word = (
            "unsigned long long",
            "(unsigned long long)__double_as_longlong",
            "__longlong_as_double",
        )
    return f"""\
__device__ __forceinline__ void sr_combine(T* addr, T v) {{
    {word}* w = ({word}*)addr;
    {word} old = *w, seen;
    do {{
        seen = old;
        old = atomicCAS(w, seen, {to_word}(sr_add({from_word}(seen), v)));
    }} while (old != seen);
}}
"""


BLOCK_THREADS = 1024  # every launch's block size: registers are budgeted for it (``__launch_bounds__``)
MAX_ROWS = 8  # held rows per block of the hash table: each streamed entry is read once for all of them


def render_pairwise_coo(
    sr,
    value_type: str = "float32",
    index_type: str = "int32",
    table: str = "hash",
    second_pass: bool = False,
    masked: bool = False,
    rows: int = 1,
    group: int = 8,
    split_of=None,
    stream: str = "coo",
) -> KernelSource:
    """The load-balanced CSR + COO kernel with rows of A held in a ``table`` (see the module docstring).

    Block x holds ``rows`` items (parts of rows of A): item ``x * rows + r``
    is row ``item_row[.]``'s entries ``[item_k0[.], item_k1[.])``.  Arguments:
    ``ap, ai, av`` (held CSR), ``item_row, item_k0, item_k1, n_items``, ``bp,
    bi, bv`` (streamed CSR), ``slots`` (slots of one row's table, a power of
    two; for a dense table the column count), ``ncols``, ``params``; then
    unmasked: ``brow`` (B's row of each entry), ``nnz_b``, ``stride_a,
    stride_b``, ``out`` (``out[a * stride_a + b * stride_b]``); masked (one
    row per block): ``eptr, other, slot`` (held row a's mask entries are
    ``[eptr[a], eptr[a+1])``, entry e pairs it with B's row ``other[e]`` and
    writes ``out[slot[e]]``), ``out``.  ``group`` (masked only): lanes per
    entry, a power of two up to 32.

    ``split_of``: ``sr`` is the margin split of this union semiring (``Semiring.margin_split``'s ``cross``),
    and the kernel takes, after ``params``, each stored entry's margin ``am`` (``f(x, 0)`` of the held
    matrix) and ``bm`` (``f(0, y)`` of the streamed one), so the cross op evaluates ``f`` once per pair
    rather than three times (hash tables, unmasked, first pass only).
    """
    T, I = _types(value_type, index_type)
    if table not in TABLES:
        raise ValueError(f"table must be one of {TABLES}, got {table!r}")
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {STREAMS}, got {stream!r}")
    if group not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"group must be a power of two up to 32, got {group}")
    if not 1 <= rows <= (1 if table == "dense" or masked else MAX_ROWS):
        raise ValueError(f"rows must be 1 for a dense table or a masked product, else 1..{MAX_ROWS}; got {rows}")
    if second_pass and not sr.is_union:
        raise ValueError(f"a second pass completes a union; {sr!r} is not one")
    split = split_of is not None
    if split and (table != "hash" or masked or second_pass or sr.is_union):
        raise ValueError("a margin split's cross op runs in hash tables, unmasked, in one pass")
    functions, setup, lookup = _table_code(sr, value_type, index_type, table, second_pass, split)
    term = _term(sr, second_pass, table, split)
    identity = _expr.render_cuda(_expr.Node("num", (sr.add.identity,)), {}, "T")
    kind = f"{table}_{'second' if second_pass else 'first'}_{'masked' if masked else stream}"
    shape = f"_g{group}" if masked else f"_r{rows}" + (f"_g{group}" if stream == "rows" else "")
    name = f"sr_{kind}{shape}{'_split' if split else ''}_{_suffix(sr.name, value_type, index_type)}"
    if split:
        union_op = split_of.mult.cuda("x", "y", "params", "T")
        functions += f"""\
__device__ __forceinline__ T sr_union(T x, T y, const double* __restrict__ params) {{
    return {union_op};
}}
"""
    # Only the entries of B in the part's column range: each column belongs to exactly one part of a row.
    visit = f"""\
                if (c >= c_lo[r] && c < c_hi[r]) {{
                    {lookup}
                    {term}
                }}"""
    if masked:
        signature = "const I* __restrict__ eptr, const I* __restrict__ other, const I* __restrict__ slot"
        stream_code = f"""\
    const int r = 0, lane = threadIdx.x % SR_GROUP;
    const long long groups = blockDim.x / SR_GROUP, e1 = eptr[a[0] + 1];
    // Every lane runs the same number of iterations, so the shuffles below see whole warps.
    for (long long base = eptr[a[0]]; base < e1; base += groups) {{
        const long long e = base + threadIdx.x / SR_GROUP;
        T acc = {identity};
        if (e < e1) {{
            const long long b = other[e];
            for (I k = bp[b] + lane; k < bp[b + 1]; k += SR_GROUP) {{
                const long long c = bi[k];
                const T y = bv[k];
                T v = {identity};
                bool hit = false;
{visit}
                if (hit) acc = sr_add(acc, v);
            }}
        }}
        for (int offset = SR_GROUP / 2; offset > 0; offset /= 2)
            acc = sr_add(acc, __shfl_down_sync(0xffffffffu, acc, offset, SR_GROUP));
        if (e < e1 && lane == 0) {{
            T* o = &out[slot[e]];
            if (whole[0]) *o = sr_add(*o, acc); else sr_combine(o, acc);
        }}
    }}"""
    elif stream == "rows":
        signature = "long long m_b, long long stride_a, long long stride_b"
        stream_code = f"""\
    // Groups of SR_GROUP lanes walk B's rows, each entry looked up in every held row's table.
    const int lane = threadIdx.x % SR_GROUP, first_lane = threadIdx.x % 32 - lane;
    const long long groups = blockDim.x / SR_GROUP;
    const unsigned group_bits = SR_GROUP == 32 ? 0xffffffffu : ((1u << SR_GROUP) - 1u) << first_lane;
    // Every lane runs the same number of iterations, so the shuffles below see whole warps.
    for (long long base = (long long)blockIdx.y * groups; base < m_b; base += (long long)gridDim.y * groups) {{
        const long long b = base + threadIdx.x / SR_GROUP;
        T acc[SR_ROWS];
        bool any[SR_ROWS];
        #pragma unroll
        for (int r = 0; r < SR_ROWS; ++r) {{ acc[r] = {identity}; any[r] = false; }}
        if (b < m_b) {{
            for (I k = bp[b] + lane; k < bp[b + 1]; k += SR_GROUP) {{
                const long long c = bi[k];
                const T y = bv[k];
                #pragma unroll
                for (int r = 0; r < SR_ROWS; ++r) {{
                    T v = {identity};
                    bool hit = false;
{visit}
                    if (hit) {{ acc[r] = sr_add(acc[r], v); any[r] = true; }}
                }}
            }}
        }}
        #pragma unroll
        for (int r = 0; r < SR_ROWS; ++r) {{
            T v = acc[r];
            for (int offset = SR_GROUP / 2; offset > 0; offset /= 2)
                v = sr_add(v, __shfl_down_sync(0xffffffffu, v, offset, SR_GROUP));
            const bool hit = (__ballot_sync(0xffffffffu, any[r]) & group_bits) != 0u;
            if (b < m_b && lane == 0 && hit) {{
                T* o = &out[a[r] * stride_a + b * stride_b];
                if (whole[r]) *o = sr_add(*o, v); else sr_combine(o, v);
            }}
        }}
    }}"""
    else:
        signature = "const I* __restrict__ brow, long long nnz_b, long long stride_a, long long stride_b"
        stream_code = f"""\
    // This block's share of B's entries, then each warp's contiguous share of it, walked 32 at a time.
    const int lane = threadIdx.x % 32;
    const long long warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const long long per_block = (nnz_b + gridDim.y - 1) / gridDim.y;
    const long long s0 = (long long)blockIdx.y * per_block, s1 = min(nnz_b, s0 + per_block);
    const long long per_warp = ((max(s1 - s0, 0LL) + warps - 1) / warps + 31) / 32 * 32;
    const long long w0 = s0 + warp * per_warp, w1 = min(s1, w0 + per_warp);
    T carry[SR_ROWS];
    bool carried = false, carry_hit[SR_ROWS];
    for (long long t0 = w0; t0 < w1; t0 += 32) {{
        const long long k = t0 + lane;
        const bool active = k < w1;
        const long long b = active ? (long long)brow[k] : -1;
        const long long c = active ? (long long)bi[k] : -1;
        const T y = active ? bv[k] : T(0);
        // B's row at lane 31 goes on into the next tile: its sum is carried there, not written.
        const bool open = __shfl_sync(0xffffffffu, lane == 31 && t0 + 32 < w1 && (long long)brow[t0 + 32] == b, 31);
        const long long before = __shfl_up_sync(0xffffffffu, b, 1);
        const unsigned heads = __ballot_sync(0xffffffffu, lane == 0 || before != b);
        const unsigned upto = 0xffffffffu >> (31 - lane);  // lanes 0..lane
        const int head = 31 - __clz(heads & upto);
        const unsigned segment = upto & ~((1u << head) - 1u);  // lanes head..lane: this lane's run of B's row
        const bool tail = active && (lane == 31 || ((heads >> (lane + 1)) & 1u)) && !(open && lane == 31);
        #pragma unroll
        for (int r = 0; r < SR_ROWS; ++r) {{
            T v = {identity};
            bool hit = false;
            if (active) {{
{visit}
            }}
            if (lane == 0 && carried) {{ v = sr_add(carry[r], v); hit = hit || carry_hit[r]; }}
            const unsigned hits = __ballot_sync(0xffffffffu, hit);
            for (int d = 1; d < 32; d *= 2) {{  // segmented inclusive scan: rows are sorted, so segments are runs
                const T up = __shfl_up_sync(0xffffffffu, v, d);
                if (lane - d >= head) v = sr_add(up, v);
            }}
            if (tail && (hits & segment)) {{
                T* o = &out[a[r] * stride_a + b * stride_b];
                // A whole B-row in this warp's share, against a whole A-row: nobody else writes this output.
                if (whole[r] && bp[b] >= w0 && bp[b + 1] <= w1) *o = sr_add(*o, v);
                else sr_combine(o, v);
            }}
            carry[r] = __shfl_sync(0xffffffffu, v, 31);
            carry_hit[r] = __shfl_sync(0xffffffffu, (hits & segment) != 0u, 31);
        }}
        carried = open;
    }}"""
    margin_args = "\n    const T* __restrict__ am, const T* __restrict__ bm," if split else ""
    body = f"""\
typedef {I} I;
#define SR_GROUP {group}
#define SR_ROWS {rows}
{functions}{_atomic_combine(sr, value_type)}
extern "C" __global__ void __launch_bounds__({BLOCK_THREADS}) {name}(
    const I* __restrict__ ap, const I* __restrict__ ai, const T* __restrict__ av,
    const I* __restrict__ item_row, const I* __restrict__ item_k0, const I* __restrict__ item_k1, long long n_items,
    const I* __restrict__ bp, const I* __restrict__ bi, const T* __restrict__ bv,
    long long slots, long long ncols, const double* __restrict__ params,{margin_args}
    {signature}, T* __restrict__ out)
{{
    extern __shared__ double sr_shared[];  // double: aligned for either value type
    long long a[SR_ROWS], c_lo[SR_ROWS], c_hi[SR_ROWS];
    I k0[SR_ROWS], k1[SR_ROWS];
    bool whole[SR_ROWS];
    #pragma unroll
    for (int r = 0; r < SR_ROWS; ++r) {{
        const long long item = (long long)blockIdx.x * SR_ROWS + r;
        if (item < n_items) {{
            a[r] = item_row[item];
            k0[r] = item_k0[item];
            k1[r] = item_k1[item];
            const bool first = k0[r] == ap[a[r]], last = k1[r] == ap[a[r] + 1];
            whole[r] = first && last;
            c_lo[r] = first ? 0 : (long long)ai[k0[r]];
            c_hi[r] = last ? ncols : (long long)ai[k1[r]];
        }} else {{  // no item: an empty column range, nothing visited or written
            a[r] = 0; k0[r] = k1[r] = 0; whole[r] = false; c_lo[r] = c_hi[r] = 0;
        }}
    }}
{setup}
{stream_code}
}}
"""
    return KernelSource(name, PREAMBLE + _ops(sr, T) + body)
