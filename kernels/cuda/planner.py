"""What the GPU engine's strategy choice reads: a product's facts and the measurements behind each rule.

The choice itself is the table ``strategies.STRATEGIES`` (each entry: when it applies, when ``auto`` takes it,
what it costs, how it runs) and ``strategies.choose``; its rules and costs are the functions here, each
constant annotated with the measurement behind it:

* :class:`Facts` — what a choice depends on (shapes, densities, what the semiring is), the costly ones
  (a sign check, a finiteness check, the inverted kernel's work) left as callables asked only when a rule
  needs them; so the choice is a pure function of :class:`Settings` and facts, unit-tested without a GPU;
* :func:`facts` — the facts of two device matrices;
* the cost model of the kernels (:func:`family_costs`) and the postings kernels' rules (:func:`ranges_pay`,
  :func:`split_pays`).

The setting ``$SEMIRING_GPU_STRATEGY`` is read once per engine call
(:meth:`Settings.from_env`, at the engine's public entry) and passed down.
Monoids and ops are recognised by what they compute (``Monoid.kind``,
``BinaryOp.kind``), not by their spelling: ``y + x`` is plus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from semiring import settings
from semiring.interfaces import CALL_CACHE, SCRATCH_BUDGET, DerivedCache
from semiring.validation import all_hold, array_module, proved

from . import launch
from .launch import DeviceCSR
from .source import RANKED_ROW, _costly, rowvec_shared_bytes

STRATEGY_ENV = settings.GPU_STRATEGY.name
# What $SEMIRING_GPU_STRATEGY may say: "auto", or one strategy forced where it applies (declared in semiring.settings).
STRATEGIES = settings.GPU_STRATEGY.choices


@dataclass(frozen=True)
class Settings:
    """The engine's settings for one call.

    ``strategy``: ``"auto"`` lets ``strategies.choose`` choose; any other of
    ``STRATEGIES`` forces that strategy where it applies (and turns off the
    choices only ``auto`` makes: margins, dense GEMM, the postings kernels by
    their cost, the cheapest kernel by the cost model); where it does not apply
    the product runs as for ``"rowvec"`` (``"coo"`` as ``"hash"`` when a dense
    row does not fit).
    """

    strategy: str = "auto"

    def __post_init__(self):
        settings.GPU_STRATEGY.check(self.strategy)

    @classmethod
    def from_env(cls) -> Settings:
        """The settings ``$SEMIRING_GPU_STRATEGY`` says (``auto`` when unset); read at each engine call."""
        return cls(settings.GPU_STRATEGY.read())


# plus_times on dense-ish rows is a dense matrix product: cuBLAS's GEMM (float32
# without TF32, so products are exact as in the sparse kernels) beats looking each
# stored value up once Y stores more than a few % of its columns.  Measured on an
# H200, 2048 rows against all: scRNA-like (6 %) GEMM 33 ms against rowvec 62 ms;
# movielens-like (0.5 %) GEMM 61 ms against rowvec 12 ms.
DENSE_GEMM_DENSITY = 0.03

# Plus-monoid intersections of short rows over a wide space: walk, for each stored
# entry of X, the postings of its column in Y (``render_pairwise_inverted``).
# Its work is Σ over X's entries of their column's length in Y, each an atomic
# add; rowvec's is one shared-memory lookup per stored entry of Y per X row.
# The inverted kernel runs where its work, weighted by INVERTED_COST per atomic,
# is the smaller; its postings index the whole column space, so at most
# INVERTED_MAX_COLUMNS columns.
INVERTED_COST = 8
INVERTED_MAX_COLUMNS = 1 << 24

# The row-range kernel (``render_pairwise_ranges``) forms the inverted kernel's products with an X row's sums
# over a range of Y rows in RANGE_SHARED_BYTES of shared memory, each output entry written once: no zeroed
# output, no scatter-adds into global memory, but each of the ``ranges`` walks all of its row's postings.
# Under ``auto`` it replaces the inverted kernel where those walks (ranges × postings) are at most
# RANGES_WALKS_PER_OUTPUT per output entry, where the output's traffic is what the inverted kernel spends.
# Measured on an H200 (public_api_h200_623c58c_edgar_{auto,ranges}.json, 2,048 EDGAR-like queries against
# 100,000 rows, 7 ranges, 1.2 walks an output entry): kernel 3.07 -> 1.96 ms for inner_product, 3.75 -> 2.87
# for euclidean.  scRNA-like products (1 range, 163 walks an output entry) stay with the inverted kernel: not
# measured there, and there the products, not the output, are the work.
RANGE_SHARED_BYTES = 64 * 2**10
RANGES_WALKS_PER_OUTPUT = 2.0

# plus_times over Zipf-skewed columns (text, ratings): a few hundred popular columns hold ~98 % of the
# postings kernels' products (nytimes-like rows: 765 columns of 100,000 stored in >= 3 % of rows hold 97 % of
# Σ over columns of count²), and those products grow with the square of the rows.  The split strategy takes
# the columns stored in at least SPLIT_HEAVY_DENSITY of Y's rows (the "heavy" ones) as a dense matrix product
# (cuBLAS, float32 without TF32: exact products as in the sparse kernels) and the rest as the inverted
# kernel's scatter-adds on top.  A column is heavy where its GEMM (GEMM_FMA_COST per output entry) costs less
# than its scatter-adds (INVERTED_COST per stored pair, about density² × outputs on self-similar queries):
# density >= sqrt(GEMM_FMA_COST / INVERTED_COST).  GEMM_FMA_COST: one FMA of an H200's FP32 GEMM (about
# 25 T a second) in the units of the cost model below (1.3 ps).  The dense copy of Y's heavy columns takes at
# most SPLIT_DENSE_SHARE of the scratch budget (the rest stays light), or, where a fitted index holds it between
# its queries (``semiring.interfaces.DerivedCache``), at most HELD_DENSE_SHARE of the bytes of the rows it copies:
# it is then part of the index, not one call's scratch.  On the MS MARCO-shaped index (8.8 M rows, ~120 stored
# a row) a call's share left room for 64 of its 240 heavy columns a tile (docs/scale.md).
GEMM_FMA_COST = 0.03
SPLIT_HEAVY_DENSITY = (GEMM_FMA_COST / INVERTED_COST) ** 0.5
SPLIT_DENSE_SHARE = 0.25
HELD_DENSE_SHARE = 1.0

# The cost model of the kernels that stream one matrix's stored entries past rows of the other held in
# shared memory (a union's second pass swaps the roles), in units of one streamed entry looked up in a
# dense shared row by ``rowvec`` (about 1.3 ps on an H200), fitted to the H200 runs of
# ``python -m benchmarks strategies`` (``docs/cuda.md``, "Strategy choice"):
#   rowvec           per held row: every streamed entry, plus ROWVEC_ROW_COST per streamed row (a lane group's
#                    reduction and store, and the idle lanes of a group longer than its row)
#   rowvec-compact   its entries × COMPACT_COST (Y's columns renumbered per batch of held rows); nytimes-like
#   coo              per held row: every streamed entry × COO_COST (its row index, the segmented scan: five
#                    shuffles an entry) and COO_ROW_COST per streamed row (a segment's write)
#   hash             per block of HASH_ROWS held rows: every streamed entry once (HASH_STREAM_COST), and per
#                    held row HASH_PROBE_COST an entry (the hash and the probes) and ROWVEC_ROW_COST a row
#   merge            per output entry: both rows' stored entries × MERGE_COST
ROWVEC_ROW_COST = 20.0
COMPACT_COST = 1.7
COO_COST = 4.2
COO_ROW_COST = 15.0
HASH_STREAM_COST = 1.0
HASH_PROBE_COST = 2.6
HASH_ROWS = 8  # held rows per block of the hash kernel on the datasets' rows (``strategies.hash_layout``)
MERGE_COST = 2.9
# So fitted, neither ``coo`` nor ``hash`` is the cheapest on the four datasets: the warp scan and the
# hash and probes cost more than rowvec's reduction per row and its dense lookups (nytimes-like cosine:
# rowvec-compact 37.5 ms, hash 51.4 ms, coo 81.0 ms; movielens-like: rowvec 12.5, hash 36.7, coo 49.6).
# Where the hash kernel does win is a margin split's cross op of a costly union op (Jensen–Shannon's
# logs, canberra's divisions) over a space too wide for a dense row: there it evaluates the op once per
# pair, its margins once per stored entry, where the others evaluate it three times a pair
# (nytimes-like Jensen–Shannon: margins + hash 131.8 ms, margins + rowvec-compact 140.4 ms).

Lazy = bool | Callable[[], bool]  # a fact, or how to find it out (asked only when the choice needs it)


def known(fact: Lazy) -> bool:
    return bool(fact() if callable(fact) else fact)


@dataclass(frozen=True)
class Facts:
    """What the choice of a dense product's strategy depends on.

    ``margins``, ``finite``, ``rowvec_fits`` and the ``*_pays`` facts may be
    callables: they cost a pass over the data (or a device query) and are
    asked only when the choice reaches them.
    """

    ncols: int  # columns of X and Y
    y_rows: int
    y_stored: int  # stored entries of Y
    mean_degree: float | None  # the two inputs' mean stored values per row, added
    union: bool  # the semiring's semantics
    annihilates: bool  # 0 ⊗ y = x ⊗ 0 = 0 (for finite values)
    plus: bool  # the add monoid is plus
    plus_times: bool  # plus and times: a dense matrix product
    x_rows: int = 0
    x_stored: int = 0  # stored entries of X
    costly_split: bool = False  # the cross op of a margin split whose union op is costly (logs, divisions)
    margins: Lazy = False  # a margin split applies (``Semiring.margin_split`` on this data) and its margins are finite
    finite: Lazy = True  # every value of X and Y is finite
    rowvec_fits: Lazy = True  # a dense row of the column space fits the block's shared memory
    inverted_pays: Lazy = False  # the inverted kernel's weighted work is the smaller
    ranges_pays: Lazy = False  # the row-range kernel's walks of the postings are few for the output's size
    split_pays: Lazy = False  # heavy columns as a dense product and the rest scatter-added cost the least
    extremum: bool = False  # the add monoid is max or min
    few_share: Lazy = False  # at most 1/EXTREMA_SHARED_SHARE of the row pairs can share a stored column
    short_rows: Lazy = False  # at most 1/RANKED_LONG_SHARE of X's rows store more than source.RANKED_ROW entries


def _passes(facts: Facts, entry_cost: float, row_cost: float, rows_per_block: float = 1.0) -> float:
    """The streaming kernels' work: per block of held X rows every streamed entry and row of Y, and for a union
    its second pass, the roles swapped."""
    held_x = facts.x_rows / rows_per_block * (entry_cost * facts.y_stored + row_cost * facts.y_rows)
    held_y = facts.y_rows / rows_per_block * (entry_cost * facts.x_stored + row_cost * facts.x_rows)
    return held_x + (held_y if facts.union else 0.0)


def rowvec_cost(facts: Facts) -> float:
    return _passes(facts, 1.0, ROWVEC_ROW_COST)


def rowvec_compact_cost(facts: Facts) -> float:
    return _passes(facts, COMPACT_COST, ROWVEC_ROW_COST)


def coo_cost(facts: Facts) -> float:
    return _passes(facts, COO_COST, COO_ROW_COST)


def hash_cost(facts: Facts) -> float:
    return _passes(facts, HASH_STREAM_COST, 0.0, HASH_ROWS) + _passes(facts, HASH_PROBE_COST, ROWVEC_ROW_COST)


def merge_cost(facts: Facts) -> float:
    outputs = facts.x_rows * facts.y_rows
    return MERGE_COST * outputs * (facts.mean_degree or 0.0)


def family_costs(facts: Facts) -> dict[str, float]:
    """The cost model's estimate for each kernel that ``auto`` weighs (``rowvec`` where a dense row fits,
    ``rowvec-compact`` where it does not; ``coo``, ``hash`` and ``merge`` always), in the units above."""
    costs = {"hash": hash_cost(facts), "coo": coo_cost(facts), "merge": merge_cost(facts)}
    if known(facts.rowvec_fits):
        costs["rowvec"] = rowvec_cost(facts)
    else:
        costs["rowvec-compact"] = rowvec_compact_cost(facts)
    return costs


def dense_pays(facts: Facts) -> bool:
    """Whether Y stores at least DENSE_GEMM_DENSITY of its cells: a dense matrix product pays."""
    return facts.y_stored >= DENSE_GEMM_DENSITY * facts.y_rows * facts.ncols


# A max- or min-union takes its row extrema and merges the pairs that share a column (``strategies.extrema``)
# where at most 1 pair in EXTREMA_SHARED_SHARE can share one: the stored pairs meeting in a column bound them.
# Measured on an H200, 2,048 EDGAR-like rows (6 values in 858,000 Zipf-popular columns) against 100,000, where
# 14.5 % of the pairs share a column (17 % by the bound): at 84c5a52, the sharing pairs listed by a product of
# their own and merged apart, 14.5 ms against merge's 11.2 (listing 6.9, merging 4.2; the rewrite would pay
# below about 8 %); at f181b34, in one kernel, 9.19 ms against 9.07; at 494c25e, X's row held in shared memory
# for the queued pairs, 8.70 ms against 9.53 (medians of 15, one run).  Taken up to 1/5 of the pairs (by the
# bound), above the EDGAR-like 17 %: movielens-like rows, where most pairs share, took 164 ms against 72.
EXTREMA_SHARED_SHARE = 5

# A max- or min-union whose X rows mostly store at most source.RANKED_ROW entries holds them, hashed and ranked,
# a few a block, and streams Y's rows past them (``strategies.union_by_ranks``), whatever share of the pairs
# meet in a column; a longer row's pairs are merged, so it is taken where at most 1 row in RANKED_LONG_SHARE is
# longer.
RANKED_LONG_SHARE = 8


def inverted_applies(facts: Facts) -> bool:
    return facts.plus and not facts.union and 0 < facts.ncols <= INVERTED_MAX_COLUMNS


# --------------------------------------------------------------------------- the facts of device matrices


def facts(sr, X: DeviceCSR, Y: DeviceCSR, xv=None, yv=None, margins: Lazy = False, split_of=None) -> Facts:
    """The :class:`Facts` of a product of X and Y, the costly ones left to compute on demand.

    ``xv``/``yv`` are their values in the accumulation type (by default their own); ``margins``: whether a
    margin split applies, or how to find out (``strategies.Product`` answers it with the margins themselves);
    ``split_of``: ``sr`` is the cross op of this (union semiring, margin split).
    """
    xv = X.data if xv is None else xv
    yv = Y.data if yv is None else yv
    value_type = launch.value_type(yv.dtype)[0]

    @cache
    def work() -> int:  # the stored pairs X's entries meet in Y's columns: both postings kernels' products
        return int(Y.column_counts()[X.indices].sum())

    itemsize = 4 if value_type == "float32" else 8
    return Facts(
        ncols=X.shape[1],
        y_rows=Y.shape[0],
        y_stored=Y.indices.size,
        mean_degree=X.indices.size / max(1, X.shape[0]) + Y.indices.size / max(1, Y.shape[0]),
        union=sr.is_union,
        annihilates=sr.annihilates,
        plus=sr.add.kind == "plus",
        plus_times=sr.add.kind == "plus" and sr.mult.kind == "times",
        x_rows=X.shape[0],
        x_stored=X.indices.size,
        costly_split=split_of is not None and _costly(split_of[0].mult.tree),
        margins=margins,
        # Y's in the accumulation type, kept with what else is derived from Y's memory (a held index: its tiles
        # were read whole at every query, ~2 ms a tile of the 8.8 M-row MS MARCO-shaped index on an H200)
        # (what validation proved of them, where they carry it, is not scanned for again: semiring.validation.Facts)
        finite=lambda: (
            all_hold("finite", all_finite, (X, xv))
            and (proved(Y, "finite", yv) or launch.derived(Y, ("finite", value_type), lambda: all_finite(yv)))
        ),
        rowvec_fits=lambda: rowvec_fits(sr, X.shape[1], value_type),
        inverted_pays=lambda: X.indices.size > 0 and INVERTED_COST * work() < X.shape[0] * Y.indices.size,
        ranges_pays=lambda: ranges_pay(work(), X.shape[0], Y.shape[0], range_width(Y.shape[0], itemsize)),
        split_pays=lambda: split_pays(X, Y, itemsize, work()),
        extremum=sr.add.kind in ("max", "min"),
        few_share=lambda: EXTREMA_SHARED_SHARE * work() <= X.shape[0] * Y.shape[0],
        short_rows=lambda: RANKED_LONG_SHARE * long_rows(X) <= X.shape[0],
    )


def long_rows(X: DeviceCSR) -> int:
    """How many of X's rows store more than ``source.RANKED_ROW`` entries (one reduction, one copy back)."""
    xp = array_module(X.indptr)
    return int(xp.count_nonzero(X.indptr[1:] - X.indptr[:-1] > RANKED_ROW))


def rowvec_fits(sr, ncols: int, value_type: str) -> bool:
    """Whether a dense row of ``ncols`` columns of ``value_type`` (and a union's bitmap) fits this device's
    shared memory."""
    return rowvec_shared_bytes(ncols, value_type, sr, sr.is_union) <= launch.max_shared_bytes()


def dense_room(Y: DeviceCSR) -> int | None:
    """The bytes the split strategy's dense copy of Y's heavy columns may take (None: no bound): where a fitted
    index holds it between queries, HELD_DENSE_SHARE of Y's stored entries' bytes, and at most a quarter of the
    device memory free now; else SPLIT_DENSE_SHARE of the scratch budget."""
    if isinstance(CALL_CACHE.get(), DerivedCache):
        stored = Y.data.nbytes + Y.indices.nbytes
        return int(min(HELD_DENSE_SHARE * stored, launch.free_bytes() // 4))
    budget = SCRATCH_BUDGET.get()
    return None if budget is None else int(SPLIT_DENSE_SHARE * budget)


def heavy_columns(Y: DeviceCSR, itemsize: int, room: int | None):
    """The split strategy's heavy columns of Y: a boolean device array over its columns, and how many.

    Those stored in at least SPLIT_HEAVY_DENSITY of Y's rows, the most stored first, as many as a dense
    ``rows × heavy`` copy of Y in ``room`` bytes (``dense_room``) holds (all of them where None).
    """
    counts = Y.column_counts()
    xp = array_module(counts)
    p = Y.shape[0]
    heavy = counts >= max(1.0, SPLIT_HEAVY_DENSITY * p)
    count = int(heavy.sum())
    room = count if room is None else room // max(1, p * itemsize)
    if count > room:  # keep the `room` most stored of them
        heavy = xp.zeros(counts.size, bool)
        if room > 0:
            heavy[xp.argsort(-counts)[:room]] = True
        count = max(0, room)
    return heavy, count


def split_pays(X: DeviceCSR, Y: DeviceCSR, itemsize: int, work: int) -> bool:
    """Whether the split strategy's GEMM over Y's heavy columns and scatter-adds over the rest cost less than
    the inverted kernel's scatter-adds alone and than rowvec's pass over Y per X row (the units above), and
    X's dense copy of those columns fits the scratch budget as Y's does (SPLIT_DENSE_SHARE)."""
    budget = SCRATCH_BUDGET.get()
    heavy, count = heavy_columns(Y, itemsize, dense_room(Y))
    m, p = X.shape[0], Y.shape[0]
    if count == 0 or budget is not None and m * count * itemsize > SPLIT_DENSE_SHARE * budget:
        return False  # no heavy column, or X's dense copy of them would not fit beside Y's
    counts = Y.column_counts()
    light_work = int(array_module(counts).where(heavy, 0, counts)[X.indices].sum())
    cost = GEMM_FMA_COST * m * p * count + INVERTED_COST * light_work
    return cost < min(INVERTED_COST * work, m * (Y.indices.size + ROWVEC_ROW_COST * p))


def all_nonnegative(*values) -> bool:
    """Whether every value of these device arrays (or host arrays) is ≥ 0: one copy back for all of them."""
    lows = [v.min() for v in values if v.size]
    return not lows or float(array_module(lows[0]).stack(lows).min()) >= 0


def all_finite(*values) -> bool:
    """Whether every value of these device arrays (or host arrays) is finite: one copy back for all of them."""
    if not values:
        return True
    xp = array_module(values[0])
    return bool(xp.stack([xp.isfinite(v).all() for v in values]).all())


def range_width(p: int, itemsize: int) -> int:
    """The Y rows of one range of the row-range kernel: as many sums as RANGE_SHARED_BYTES hold (or the
    device's shared memory, if less), at most ``p``."""
    return max(1, min(p, min(RANGE_SHARED_BYTES, launch.max_shared_bytes()) // itemsize))


def ranges_pay(work: int, m: int, p: int, width: int) -> bool:
    """Whether the row-range kernel's walks of the postings, ``ceil(p / width)`` ranges each walking all of
    ``work`` products of the m × p result, are at most RANGES_WALKS_PER_OUTPUT an output entry."""
    return -(-p // width) * work <= RANGES_WALKS_PER_OUTPUT * m * p
