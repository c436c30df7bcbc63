"""The GPU engine's strategy choice, without a GPU: ``strategies.choose`` reads the table ``STRATEGIES`` and is a
pure function of settings and facts (``planner.Facts``).

The device-side facts (``planner.facts``) and the executors are checked on a GPU
by ``tests/gpu/test_pairwise_gpu.py``; here every branch of the choice, the setting's
validation, that ops are recognised by what they compute, not their spelling, and
that the table chooses as the ladder it replaced did.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import semiring
from semiring import Monoid, Semiring, binary_op
from semiring.kernels.cuda import planner, strategies
from semiring.kernels.cuda.planner import (
    DENSE_GEMM_DENSITY,
    INVERTED_MAX_COLUMNS,
    STRATEGIES,
    STRATEGY_ENV,
    Facts,
    Settings,
)


def decide(settings: Settings, facts: Facts) -> str:
    """The name of the entry the table chooses."""
    return strategies.choose(settings, facts).name


def facts_of(sr, ncols=1000, y_rows=100, y_stored=1000, mean_degree=None, x_rows=100, x_stored=1000, **lazy) -> Facts:
    """Facts as ``planner.facts`` derives them from a semiring, with the data-dependent ones given."""
    if mean_degree is None:
        mean_degree = x_stored / max(1, x_rows) + y_stored / max(1, y_rows)
    return Facts(
        ncols=ncols,
        y_rows=y_rows,
        y_stored=y_stored,
        mean_degree=mean_degree,
        union=sr.is_union,
        annihilates=sr.annihilates,
        plus=sr.add.kind == "plus",
        plus_times=sr.add.kind == "plus" and sr.mult.kind == "times",
        x_rows=x_rows,
        x_stored=x_stored,
        extremum=sr.add.kind in ("max", "min"),
        **lazy,
    )


def cheapest(facts: Facts) -> str:
    costs = planner.family_costs(facts)
    return min(costs, key=costs.get)


def never():
    raise AssertionError("the decision asked for a fact it does not need")


SPARSE = {"y_stored": 100}  # 0.1 % of Y's 100 × 1000 cells: below DENSE_GEMM_DENSITY
DENSE = {"y_stored": int(DENSE_GEMM_DENSITY * 100 * 1000)}


def test_auto_choices():
    auto = Settings()
    assert decide(auto, facts_of(semiring.plus_times, **DENSE)) == "dense-gemm"
    assert decide(auto, facts_of(semiring.plus_times, **SPARSE, inverted_pays=True)) == "inverted"
    assert decide(auto, facts_of(semiring.plus_times, **SPARSE, inverted_pays=True, ranges_pays=True)) == "ranges"
    assert decide(auto, facts_of(semiring.plus_times, **SPARSE, split_pays=True)) == "split"
    assert decide(auto, facts_of(semiring.plus_times, **DENSE, split_pays=never)) == "dense-gemm"
    assert decide(auto, facts_of(semiring.plus_pair, **SPARSE, split_pays=never)) != "split"  # not times
    assert decide(auto, facts_of(semiring.plus_times, **SPARSE, finite=False, split_pays=never)) == "merge"
    assert decide(auto, facts_of(semiring.plus_pair, **SPARSE, inverted_pays=False, ranges_pays=never)) != "ranges"
    assert decide(auto, facts_of(semiring.plus_times, **DENSE, finite=False)) == "merge"  # 0 × inf must be NaN
    assert decide(auto, facts_of(semiring.plus_absdiff, margins=True)) == "margins"
    assert decide(auto, facts_of(semiring.min_plus, ncols=0, rowvec_fits=never)) == "merge"
    plain = facts_of(semiring.min_plus, inverted_pays=True)  # not a plus monoid: no inverted kernel
    assert decide(auto, plain) == cheapest(plain)


# The four paper-shaped datasets' facts (2,048 query rows against all rows, ``benchmarks/synthetic.py``),
# for an intersection (plus_times) and a union (max_absdiff, which has no margin split).
DATASETS = {
    "movielens": {"ncols": 20_000, "x_rows": 2048, "x_stored": 2048 * 100, "y_rows": 40_000, "y_stored": 4_019_628},
    "nytimes": {"ncols": 100_000, "x_rows": 2048, "x_stored": 2048 * 200, "y_rows": 40_000, "y_stored": 8_004_552},
    "scrna": {"ncols": 26_000, "x_rows": 2048, "x_stored": 2048 * 1605, "y_rows": 16_000, "y_stored": 25_678_285},
    "edgar": {"ncols": 858_000, "x_rows": 2048, "x_stored": 2048 * 6, "y_rows": 100_000, "y_stored": 604_181},
}
FITS = {"movielens": True, "nytimes": False, "scrna": True, "edgar": False}  # a dense float32 row in 227 KiB


@pytest.mark.parametrize("sr", [semiring.plus_times, semiring.max_absdiff, semiring.plus_absdiff], ids=str)
@pytest.mark.parametrize("name", DATASETS)
def test_auto_takes_the_cheapest_kernel_of_the_cost_model(name, sr):
    facts = facts_of(sr, rowvec_fits=FITS[name], margins=False, inverted_pays=False, **DATASETS[name])
    costs = planner.family_costs(facts)
    assert set(costs) == {"rowvec" if FITS[name] else "rowvec-compact", "coo", "hash", "merge"}
    if not (sr.add.kind == "plus" and sr.mult.kind == "times" and name == "scrna"):  # else dense GEMM
        assert decide(Settings(), facts) == min(costs, key=costs.get)


def test_hash_runs_a_costly_margin_split_where_no_dense_row_fits():
    """A margin split's cross op of a costly union op (Jensen–Shannon's logs): the hash kernel, which
    evaluates the op once per pair, where no dense row fits (nytimes-like); elsewhere the cost model."""
    js = facts_of(semiring.plus_times, rowvec_fits=False, inverted_pays=False, **DATASETS["nytimes"])
    assert decide(Settings(), replace(js, costly_split=True)) == "hash"
    assert decide(Settings(), js) == "rowvec-compact"  # the measured cheapest without the split's saving
    fits = facts_of(semiring.plus_pair, rowvec_fits=True, inverted_pays=False, **DATASETS["movielens"])
    assert decide(Settings(), replace(fits, costly_split=True)) == "rowvec"
    assert decide(Settings("rowvec"), replace(js, costly_split=True)) == "rowvec-compact"  # auto only


def test_the_measured_cheapest_on_the_datasets():
    """The fitted model's picks on the four datasets' shapes: rowvec where a dense row fits, rowvec-compact
    on nytimes-like rows, merge for a union of EDGAR-like short rows (coo and hash lose there: docs/cuda.md)."""
    want = {"movielens": "rowvec", "nytimes": "rowvec-compact", "scrna": "rowvec"}
    for name, kernel in want.items():
        for sr in (semiring.plus_pair, semiring.max_absdiff):
            assert cheapest(facts_of(sr, rowvec_fits=FITS[name], **DATASETS[name])) == kernel, (name, sr)
    assert cheapest(facts_of(semiring.max_absdiff, rowvec_fits=False, **DATASETS["edgar"])) == "merge"


def test_hash_is_the_cheapest_nowhere_by_the_model_alone():
    """Over a grid of shapes the fitted model never prefers hash (it runs when forced or for a costly margin
    split), coo only where the streamed rows hold about one entry; rowvec, rowvec-compact and merge each win
    somewhere."""
    shapes = [
        {"rowvec_fits": fits, "ncols": 1000, "x_rows": m, "y_rows": p, "x_stored": m * dx, "y_stored": p * dy}
        for fits in (True, False)
        for m in (1, 64, 2048)
        for p in (10, 1000, 100_000)
        for dx in (1, 8, 100, 1000)
        for dy in (1, 8, 100, 1000)
    ]
    reached = {
        cheapest(facts_of(sr, **shape)) for shape in shapes for sr in (semiring.plus_times, semiring.max_absdiff)
    }
    assert reached <= {"rowvec", "rowvec-compact", "merge", "coo"}
    assert {"rowvec", "rowvec-compact", "merge"} <= reached
    single = {"ncols": 1000, "x_rows": 64, "y_rows": 100_000, "x_stored": 64_000, "y_stored": 100_000}
    assert cheapest(facts_of(semiring.plus_times, **single)) == "coo"


def test_costly_facts_are_asked_only_when_needed():
    # an intersection never asks about margins; a finite-only check only for annihilating ops
    assert decide(Settings(), facts_of(semiring.plus_times, margins=never, **DENSE)) == "dense-gemm"
    assert decide(Settings("rowvec"), facts_of(semiring.max_absdiff, finite=never, margins=False)) == "rowvec"
    assert decide(Settings("hash"), facts_of(semiring.plus_times, finite=never, **SPARSE)) == "hash"  # exact anyway
    assert decide(Settings("merge"), facts_of(semiring.plus_absdiff, margins=never, rowvec_fits=never)) == "merge"
    assert decide(Settings("rowvec"), facts_of(semiring.plus_times, inverted_pays=never, **SPARSE)) == "rowvec"


# Σ over X's entries of their column's length in Y (the postings kernels' products), counted with SciPy for
# 2,048 queries against all rows of benchmarks/synthetic.py's draws at seed 0, scale 1.
POSTINGS_WORK = {"edgar": 35_050_290, "scrna": 5_332_259_713}


def test_ranges_pay_where_walking_the_postings_costs_less_than_the_output():
    width = 64 * 2**10 // 4  # float32 sums in RANGE_SHARED_BYTES
    assert planner.RANGE_SHARED_BYTES == 64 * 2**10
    edgar, scrna = DATASETS["edgar"], DATASETS["scrna"]
    # EDGAR-like: 7 ranges of 16,384 rows walk 2.5e8 postings for 2.0e8 output entries (1.2 an entry)
    assert planner.ranges_pay(POSTINGS_WORK["edgar"], edgar["x_rows"], edgar["y_rows"], width)
    # float64 sums: ranges of 8,192 rows, 13 of them, 2.2 walks an entry
    assert not planner.ranges_pay(POSTINGS_WORK["edgar"], edgar["x_rows"], edgar["y_rows"], width // 2)
    # scRNA-like: one range, but 163 products an output entry: the products are the work, not the output
    assert not planner.ranges_pay(POSTINGS_WORK["scrna"], scrna["x_rows"], scrna["y_rows"], width)
    assert planner.ranges_pay(0, 3, 5, 1)  # no products: each output entry written once, no zeroing first
    # the boundary: RANGES_WALKS_PER_OUTPUT walks an output entry, 4 ranges of 25 rows
    at = int(planner.RANGES_WALKS_PER_OUTPUT * 10 * 100 / 4)
    assert planner.ranges_pay(at, 10, 100, 25) and not planner.ranges_pay(at + 1, 10, 100, 25)


def test_range_width_within_shared_memory(monkeypatch):
    monkeypatch.setattr(planner.launch, "max_shared_bytes", lambda: 48 * 2**10)
    assert planner.range_width(10**6, 4) == 12 * 2**10  # the device's 48 KiB, less than RANGE_SHARED_BYTES
    assert planner.range_width(100, 8) == 100  # at most the rows there are
    monkeypatch.setattr(planner.launch, "max_shared_bytes", lambda: 227 * 2**10)
    assert planner.range_width(10**6, 8) == planner.RANGE_SHARED_BYTES // 8


def test_inverted_only_within_its_column_limit():
    wide = facts_of(semiring.plus_times, ncols=INVERTED_MAX_COLUMNS + 1, y_rows=1, **SPARSE, inverted_pays=True)
    assert decide(Settings(), wide) == "rowvec"
    assert decide(Settings("inverted"), wide) == "rowvec"


@pytest.mark.parametrize(
    "forced, sr, want",
    [
        ("rowvec", semiring.plus_times, "rowvec"),
        ("rowvec-compact", semiring.plus_times, "rowvec-compact"),
        ("rowvec-compact", semiring.plus_absdiff, "rowvec-compact"),
        ("merge", semiring.plus_times, "merge"),
        ("inverted", semiring.plus_times, "inverted"),
        ("inverted", semiring.plus_pair, "inverted"),
        ("inverted", semiring.plus_absdiff, "rowvec"),  # a union: inverted does not apply
        ("ranges", semiring.plus_times, "ranges"),
        ("ranges", semiring.plus_pair, "ranges"),
        ("ranges", semiring.plus_absdiff, "rowvec"),  # the inverted kernel's semirings only
        ("dense-gemm", semiring.plus_times, "dense-gemm"),  # forced: whatever Y's density
        ("dense-gemm", semiring.plus_pair, "rowvec"),  # not a matrix product
        ("split", semiring.plus_times, "split"),
        ("split", semiring.plus_pair, "rowvec"),  # not a matrix product
        ("split", semiring.plus_absdiff, "rowvec"),  # a union
        ("margins", semiring.plus_absdiff, "margins"),
        ("margins", semiring.plus_times, "rowvec"),  # an intersection: nothing to split
        ("margins", semiring.max_absdiff, "rowvec"),  # no split of a max monoid (margins says False)
        ("extrema", semiring.max_absdiff, "extrema"),  # forced: however many pairs share a column
        ("ranked", semiring.max_absdiff, "ranked"),  # forced: however long X's rows
        ("ranked", semiring.plus_absdiff, "rowvec"),  # a plus union: margins, not ranks
        ("ranked", semiring.plus_times, "rowvec"),  # an intersection
        ("extrema", semiring.plus_absdiff, "rowvec"),  # a plus union: margins, not extrema
        ("extrema", semiring.plus_times, "rowvec"),  # an intersection
        ("coo", semiring.plus_times, "coo"),
        ("coo", semiring.max_absdiff, "coo"),
        ("hash", semiring.plus_times, "hash"),
        ("hash", semiring.plus_absdiff, "hash"),
        ("hash", semiring.plus_pair, "hash"),
    ],
)
def test_forced_strategy_runs_where_it_applies(forced, sr, want):
    margins = sr.add.kind == "plus" and sr.is_union
    short_rows = facts_of(sr, mean_degree=2.0, margins=margins, inverted_pays=False, **SPARSE)
    assert decide(Settings(forced), short_rows) == want  # forcing also turns off auto's union-of-short-rows merge


def test_forced_coo_and_hash_run_whether_or_not_a_dense_row_fits():
    for fits in (True, False):
        for forced in ("coo", "hash"):
            assert decide(Settings(forced), facts_of(semiring.plus_times, rowvec_fits=fits, **SPARSE)) == forced


def test_masked_products_merge_unless_a_table_is_forced():
    assert strategies.choose_masked(Settings()).name == "merge"
    assert strategies.choose_masked(Settings("rowvec")).name == "merge"
    assert strategies.choose_masked(Settings("hash")).name == "hash"
    assert strategies.choose_masked(Settings("coo")).name == "coo"


def test_every_gpu_strategy_can_be_forced():
    """The GPU tests' strategy fixture reaches every executor: each one is the answer to some forced setting."""
    reached = set()
    for forced in STRATEGIES[1:]:
        for sr in (semiring.plus_times, semiring.plus_absdiff, semiring.max_absdiff):
            reached.add(decide(Settings(forced), facts_of(sr, margins=True, **SPARSE)))
    assert reached == set(STRATEGIES[1:])


def test_auto_takes_extrema_for_a_max_union_where_few_pairs_share_a_column():
    """Chebyshev's max union: its rows' extrema where at most 1 pair in 8 can share a column, on finite values;
    elsewhere a kernel of the union."""
    few = facts_of(semiring.max_absdiff, few_share=True, **SPARSE)
    assert decide(Settings(), few) == "extrema"
    assert decide(Settings(), facts_of(semiring.max_absdiff, few_share=False, **SPARSE)) != "extrema"
    assert decide(Settings(), facts_of(semiring.max_absdiff, few_share=True, finite=False, **SPARSE)) == "merge"
    assert decide(Settings(), facts_of(semiring.plus_absdiff, few_share=True, **SPARSE)) != "extrema"


def test_auto_takes_ranks_for_a_max_union_whose_x_rows_are_mostly_short():
    """Chebyshev's max union: X's rows held and ranked where at most 1 in RANKED_LONG_SHARE stores more than
    RANKED_ROW entries, however many pairs share a column, on finite values; else the extrema where few pairs
    share, else a kernel of the union."""
    assert decide(Settings(), facts_of(semiring.max_absdiff, short_rows=True, **SPARSE)) == "ranked"
    assert decide(Settings(), facts_of(semiring.max_absdiff, short_rows=True, few_share=True, **SPARSE)) == "ranked"
    long_few = facts_of(semiring.max_absdiff, short_rows=False, few_share=True, **SPARSE)
    assert decide(Settings(), long_few) == "extrema"
    assert decide(Settings(), facts_of(semiring.max_absdiff, short_rows=True, finite=False, **SPARSE)) == "merge"
    assert decide(Settings(), facts_of(semiring.plus_absdiff, short_rows=True, **SPARSE)) != "ranked"


def test_short_rows_counts_x_rows_longer_than_the_kernel_holds():
    """At most 1 row of X in RANKED_LONG_SHARE may store more than RANKED_ROW entries (a row of exactly
    RANKED_ROW is held)."""
    import scipy.sparse as sp

    from semiring.kernels.cuda import launch, source

    share, held = planner.RANKED_LONG_SHARE, source.RANKED_ROW

    def rows(lengths):
        n = max(lengths) + 1
        A = sp.csr_matrix(np.vstack([np.r_[np.ones(k), np.zeros(n - k)] for k in lengths]))
        return launch.DeviceCSR(A.indptr, A.indices, A.data, A.shape)

    Y = rows([1])
    assert planner.long_rows(rows([held] * share)) == 0
    one_long, two_long = rows([held + 1] + [1] * (share - 1)), rows([held + 1] * 2 + [1] * (share - 2))
    assert planner.known(planner.facts(semiring.max_absdiff, one_long, Y).short_rows)
    assert not planner.known(planner.facts(semiring.max_absdiff, two_long, Y).short_rows)


def test_few_share_bounds_the_pairs_by_the_stored_pairs_meeting_in_a_column():
    """The stored pairs meeting in a column (each X entry against its column's count in Y) bound the row pairs
    that share one: at most 1 in EXTREMA_SHARED_SHARE of them, and a max union takes its extrema."""
    import scipy.sparse as sp

    from semiring.kernels.cuda import launch

    def held(A):  # host arrays standing in for device ones, Y's column counts given as the device counts them
        M = launch.DeviceCSR(A.indptr, A.indices, A.data, A.shape)
        M.__dict__["column_counts"] = lambda: np.bincount(A.indices, minlength=A.shape[1])
        return M

    share = planner.EXTREMA_SHARED_SHARE
    X = sp.csr_matrix(np.array([[1.0, 0, 0, 0], [0, 2.0, 0, 0]]))
    # 2 × share row pairs: one stored pair meeting (X's row 0 and Y's last) is few, three are too many
    Y = sp.csr_matrix(np.array([[0, 0, 3.0, 0]] * (share - 1) + [[1.0, 0, 0, 0]]))
    assert share * 1 <= 2 * share < share * 3
    facts = planner.facts(semiring.max_absdiff, held(X), held(Y))
    assert facts.extremum and planner.known(facts.few_share)
    Y3 = sp.csr_matrix(np.array([[0, 0, 3.0, 0]] * (share - 3) + [[1.0, 0, 0, 0]] * 3))  # three meet: too many
    assert not planner.known(planner.facts(semiring.max_absdiff, held(X), held(Y3)).few_share)


def test_plus_is_recognised_however_written():
    """``y + x`` and ``y * x`` are plus and times: the same plan as the built-in spelling."""
    flipped = Semiring(Monoid(binary_op("y + x"), 0.0), binary_op("y * x"))
    assert flipped.add.kind == "plus" and flipped.mult.kind == "times"
    for kw in (DENSE, SPARSE, {**SPARSE, "inverted_pays": True}):
        for forced in STRATEGIES:
            settings = Settings(forced)
            assert decide(settings, facts_of(flipped, **kw)) == decide(settings, facts_of(semiring.plus_times, **kw))
    assert decide(Settings(), facts_of(flipped, **DENSE)) == "dense-gemm"


def test_setting_is_validated_and_read_per_call(monkeypatch):
    monkeypatch.delenv(STRATEGY_ENV, raising=False)
    assert Settings.from_env() == Settings("auto")
    monkeypatch.setenv(STRATEGY_ENV, "merge")
    assert Settings.from_env().strategy == "merge"  # read at each call, not at import
    monkeypatch.setenv(STRATEGY_ENV, "fastest")
    with pytest.raises(ValueError, match=f"{STRATEGY_ENV} must be one of .*'rowvec'.*got 'fastest'"):
        Settings.from_env()
    assert decide(Settings("merge"), facts_of(semiring.plus_times)) == "merge"


def test_a_product_answers_the_margin_split_question_without_a_gpu():
    """``strategies.Product`` over host arrays in a DeviceCSR (the split reads only the semiring and the data's
    signs): a union's split is asked of the data's signs, an intersection has none; the facts of the matrices
    take the margins fact they are given (the product's, which also needs the margins finite: a GPU's row norms)."""
    import scipy.sparse as sp

    from semiring.kernels.cuda import launch

    A = sp.random(6, 9, density=0.4, format="csr", random_state=1)
    X = launch.DeviceCSR(A.indptr, A.indices, A.data, A.shape)
    signed = launch.DeviceCSR(A.indptr, A.indices, -A.data, A.shape)
    settings = Settings("margins")
    assert strategies.Product(X, X, semiring.plus_absdiff, np.float64, settings=settings).margin_split is not None
    assert strategies.Product(signed, signed, semiring.plus_sqdiff, np.float64).margin_split is None  # (x − y)²
    assert strategies.Product(X, X, semiring.plus_sqdiff, np.float32).margin_split is not None
    assert strategies.Product(X, X, semiring.plus_times, np.float64).margin_split is None  # an intersection
    assert decide(settings, planner.facts(semiring.plus_absdiff, X, X, margins=lambda: True)) == "margins"
    no_split = replace(planner.facts(semiring.plus_absdiff, X, X, margins=lambda: False), rowvec_fits=True)
    assert decide(settings, no_split) == "rowvec"  # forced where it does not apply: as for rowvec


def test_a_product_and_its_facts_make_no_reference_cycle():
    """A planned product goes as its last reference does: its facts ask the margins' question through a weak
    reference, so no cycle holds its arrays (on a GPU, copies of a tile's values) until the garbage collector
    runs (one did, and a test's allocator was called from the collector inside another test)."""
    import gc
    import weakref

    import scipy.sparse as sp

    from semiring.kernels.cuda import launch

    A = sp.random(6, 9, density=0.4, format="csr", random_state=1)
    X = launch.DeviceCSR(A.indptr, A.indices, A.data, A.shape)
    product = strategies.Product(X, X, semiring.plus_times, np.float32)  # float32 of float64: copies of the values
    assert product.facts.margins() is False  # the question answered through the weak reference: no split
    gone = weakref.ref(product)
    gc.disable()
    try:
        del product
        assert gone() is None  # freed by its reference count, no collection needed
    finally:
        gc.enable()


def test_flag_room_and_index_of_listed_entries(monkeypatch):
    """The room a selection (``elementwise.select``, the row-range kernel's refinement) lists entries in at first:
    1/256 of the result, at least 1,024; their index int32 where positions fit.  Patching the constants (as the
    GPU test of an overflowing room does) changes the room."""
    from semiring.kernels.cuda import elementwise

    assert elementwise.flag_room(2048, 100_000) == 2048 * 100_000 // 256
    assert elementwise.flag_room(10, 10) == 1024
    assert elementwise.flag_index((2048, 100_000)) == ("int32", np.int32)
    assert elementwise.flag_index((3, 2**31)) == ("int64", np.int64)
    monkeypatch.setattr(elementwise, "FLAG_ROOM_MIN", 1)
    monkeypatch.setattr(elementwise, "FLAG_ROOM_SHARE", 2**62)
    assert elementwise.flag_room(2048, 100_000) == 1


def test_dense_room_of_the_split_is_the_calls_share_or_the_held_index_rows(monkeypatch):
    """The split's dense copy of Y's heavy columns: SPLIT_DENSE_SHARE of the call's scratch budget (no bound
    without one); where a fitted index holds it between queries (``held``), HELD_DENSE_SHARE of the bytes of
    Y's stored entries, at most a quarter of the device memory free."""
    import scipy.sparse as sp

    from semiring.interfaces import SCRATCH_BUDGET, DerivedCache, held
    from semiring.kernels.cuda import launch

    A = sp.random(50, 30, density=0.2, format="csr", random_state=2, dtype=np.float32)
    Y = launch.DeviceCSR(A.indptr, A.indices, A.data, A.shape)
    stored = A.data.nbytes + A.indices.nbytes
    assert planner.dense_room(Y) is None
    token = SCRATCH_BUDGET.set(1 << 20)
    try:
        assert planner.dense_room(Y) == int(planner.SPLIT_DENSE_SHARE * (1 << 20))
        monkeypatch.setattr(launch, "free_bytes", lambda: 1 << 40)
        with held(DerivedCache()):
            assert planner.dense_room(Y) == int(planner.HELD_DENSE_SHARE * stored)
        monkeypatch.setattr(launch, "free_bytes", lambda: 400)
        with held(DerivedCache()):
            assert planner.dense_room(Y) == 100
    finally:
        SCRATCH_BUDGET.reset(token)


# --------------------------------------------------------------------------- the ladder the table replaced
# ``planner.decide`` as it stood at 68a07a5, before the strategies became a table: the reference the table's
# choice is held to over random facts below.  A new strategy that changes what a setting chooses updates it.


def _ladder_costs(facts: Facts) -> dict[str, float]:
    def passes(entry_cost: float, row_cost: float, rows_per_block: float = 1.0) -> float:
        held_x = facts.x_rows / rows_per_block * (entry_cost * facts.y_stored + row_cost * facts.y_rows)
        held_y = facts.y_rows / rows_per_block * (entry_cost * facts.x_stored + row_cost * facts.x_rows)
        return held_x + (held_y if facts.union else 0.0)

    outputs = facts.x_rows * facts.y_rows
    costs = {
        "hash": passes(planner.HASH_STREAM_COST, 0.0, planner.HASH_ROWS)
        + passes(planner.HASH_PROBE_COST, planner.ROWVEC_ROW_COST),
        "coo": passes(planner.COO_COST, planner.COO_ROW_COST),
        "merge": planner.MERGE_COST * outputs * (facts.mean_degree or 0.0),
    }
    if planner.known(facts.rowvec_fits):
        costs["rowvec"] = passes(1.0, planner.ROWVEC_ROW_COST)
    else:
        costs["rowvec-compact"] = passes(planner.COMPACT_COST, planner.ROWVEC_ROW_COST)
    return costs


def _ladder_family(forced: str, facts: Facts) -> str:
    known = planner.known
    if forced == "merge" or facts.ncols == 0:
        return "merge"
    if forced in ("hash", "coo"):
        return forced
    if forced == "auto":
        if facts.costly_split and not known(facts.rowvec_fits):
            return "hash"
        costs = _ladder_costs(facts)
        return min(costs, key=costs.get)
    if forced == "rowvec-compact":
        return "rowvec-compact"
    return "rowvec" if known(facts.rowvec_fits) else "rowvec-compact"


def _ladder(forced: str, facts: Facts) -> str:
    known, auto = planner.known, forced == "auto"
    if facts.union and (auto or forced == "margins") and known(facts.margins):
        return "margins"
    extremum = facts.union and facts.extremum and known(facts.finite)
    if extremum and (forced == "ranked" or auto and known(facts.short_rows)):
        return "ranked"
    if extremum and (forced == "extrema" or auto and known(facts.few_share)):
        return "extrema"
    strategy = _ladder_family(forced, facts)
    if facts.annihilates and strategy != "hash" and not known(facts.finite):
        return "merge"
    cells = DENSE_GEMM_DENSITY * facts.y_rows * facts.ncols
    dense_pays = facts.y_stored >= cells > 0 if auto else cells > 0
    if strategy != "merge" and facts.plus_times and (forced == "dense-gemm" or auto) and dense_pays:
        return "dense-gemm"
    if not planner.inverted_applies(facts):
        return strategy
    if forced in ("inverted", "ranges") or forced == "split" and facts.plus_times:
        return forced
    if auto and known(facts.inverted_pays) and known(facts.ranges_pays):
        return "ranges"
    if auto and facts.plus_times and known(facts.split_pays):
        return "split"
    if auto and known(facts.inverted_pays):
        return "inverted"
    return strategy


LAZY = ("margins", "finite", "rowvec_fits", "inverted_pays", "ranges_pays", "split_pays", "few_share", "short_rows")


def _random_facts(rng: np.random.Generator) -> tuple[Facts, dict[str, bool]]:
    """Facts of a nonempty product (an empty one is not planned: ``strategies.product``) of a real semiring's
    kind, sizes log-uniform, the lazy facts drawn; with the drawn values of the lazy ones."""
    sr = rng.choice(SEMIRINGS_BY_KIND)
    ncols = int(rng.choice([0, 1, int(10 ** rng.uniform(0, 6)), INVERTED_MAX_COLUMNS + 1]))
    x_rows, y_rows = (int(10 ** rng.uniform(0, 5)) for _ in range(2))
    x_stored, y_stored = (rows * int(min(ncols, 10 ** rng.uniform(-0.5, 3.5))) for rows in (x_rows, y_rows))
    drawn = {name: bool(rng.random() < 0.5) for name in LAZY}
    facts = facts_of(
        sr,
        ncols=ncols,
        x_rows=x_rows,
        y_rows=y_rows,
        x_stored=x_stored,
        y_stored=y_stored,
        costly_split=bool(rng.random() < 0.3),
    )
    return facts, drawn


SEMIRINGS_BY_KIND = [
    semiring.plus_times,
    semiring.plus_pair,
    semiring.plus_absdiff,
    semiring.max_absdiff,
    semiring.min_plus,
    semiring.plus_min,
    Semiring(Monoid(binary_op("y + x"), 0.0), binary_op("y * x")),
]


def _asking(facts: Facts, drawn: dict[str, bool], asked: set) -> Facts:
    """The facts with each lazy one its drawn value, noting in ``asked`` the ones a choice asks."""
    return replace(facts, **{name: (lambda name=name: asked.add(name) or drawn[name]) for name in LAZY})


def test_the_table_chooses_as_the_ladder_it_replaced():
    """Over 1,500 random products and every setting, the table's choice is the old ladder's, and it asks no
    costly fact the ladder did not."""
    rng = np.random.default_rng(28)
    reached = set()
    for _ in range(1500):
        base, drawn = _random_facts(rng)
        for forced in STRATEGIES:
            by_table, by_ladder = set(), set()
            table = decide(Settings(forced), _asking(base, drawn, by_table))
            assert table == _ladder(forced, _asking(base, drawn, by_ladder)), (forced, base, drawn)
            assert by_table <= by_ladder, (forced, base, drawn, by_table, by_ladder)
            reached.add(table)
    assert reached == set(STRATEGIES[1:])  # every entry chosen somewhere


def _host_row_norm(A, tree, dtype=np.float64):
    """``elementwise.row_norm`` on host arrays: ``Σ f(x)`` over each row's stored values."""
    from semiring.expr import compile_python

    f = compile_python(tree, ("x",))
    with np.errstate(over="ignore"):
        terms = np.array([f(np.float64(v), ()) for v in A.data], dtype=np.float64)
        return np.array([terms[A.indptr[i] : A.indptr[i + 1]].sum() for i in range(A.shape[0])], dtype=dtype)


def test_a_union_is_planned_once_and_its_margins_found_for_the_choice_are_the_ones_it_adds(monkeypatch):
    """Host arrays in DeviceCSRs stand in for device ones (the plan reads sizes, signs and row margins): a
    plus-monoid union is chosen once a product; where a margin overflows (two values of 1.7e308 in a row), that
    one choice is the kernel a union without a split would take, and the row margins are not computed again."""
    import scipy.sparse as sp

    from semiring.kernels.cuda import elementwise, launch

    monkeypatch.setattr(launch, "max_shared_bytes", lambda: 227 * 2**10)
    norms = []
    monkeypatch.setattr(
        elementwise,
        "row_norms",
        lambda A, trees, dtype: [norms.append(1) or _host_row_norm(A, tree, dtype) for tree in trees],
    )
    choices, real = [], strategies.choose
    monkeypatch.setattr(strategies, "choose", lambda settings, facts: choices.append(1) or real(settings, facts))
    A = sp.random(6, 9, density=0.5, format="csr", random_state=1)
    big = A.copy()
    big.data[big.indptr[0] : big.indptr[0] + 2] = 1.7e308  # row 0 stores at least two values

    def plan(M):
        X = launch.DeviceCSR(M.indptr, M.indices, M.data, M.shape)
        product = strategies.Product(X, X, semiring.plus_absdiff, np.float64, settings=Settings())
        return product, strategies.plan(product)

    assert big.indptr[1] - big.indptr[0] >= 2
    product, chosen = plan(A)
    assert (chosen.strategy.name, len(choices), len(norms)) == ("margins", 1, 4)  # Σ f and Σ |f|, of X and of Y
    assert product.margins is not None and len(norms) == 4  # the ones the split adds: not found again
    choices.clear(), norms.clear()
    product, chosen = plan(big)
    assert product.margin_split is not None and product.margins is None  # a split, its margin not finite
    no_split = replace(product.facts, margins=False)
    assert len(choices) == 1 and chosen.strategy is real(Settings(), no_split) and chosen.strategy.name != "margins"
