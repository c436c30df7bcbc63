"""The GPU engine's strategies: one entry a way of computing a product (when it applies, when ``auto`` takes it,
what it costs, how it runs), the choice among them made once a tile, and their executors.

``STRATEGIES`` is the whole of the choice.  Each entry's name is the value of ``$SEMIRING_GPU_STRATEGY`` that
forces it (``semiring.settings.GPU_STRATEGY``); its rules read the product's :class:`~.planner.Facts`, whose
costly ones are found only when a rule asks.  :func:`choose` takes the entries in three stages, in the
table's order within each:

1. a **rewrite** of the product (``margins``: a plus-monoid union as row margins and one intersection product),
   where it applies and the setting forces it or is ``auto``;
2. the **kernel** that computes any product (``hash``, ``coo``, ``merge``, ``rowvec``, ``rowvec-compact``): the
   one the setting forces (``FORCED_KERNEL``, rowvec, under a setting that names no kernel), or where it does
   not apply the one it names ``instead``, in turn (``rowvec`` where a dense row fits, else ``rowvec-compact``;
   ``merge`` without columns); under ``auto`` one whose measured rule takes it outright (``takes``), else the
   cheapest of those that apply and pay by the cost model (``cost``; ties: the earlier entry).  Where the op
   annihilates and a value is not finite, a kernel that reads a missing entry as a stored 0 would form
   ``0 ⊗ inf``: unless the kernel looks stored entries up (``looks_up``: ``hash``), the product merges, and
   nothing replaces it;
3. a **replacement** of the kernel by a path for plus-monoid intersections (``dense-gemm``, ``ranges``,
   ``split``, ``inverted``), the first that applies (and ``replaces`` that kernel) where the setting forces
   it, or, under ``auto``, where it ``pays``; none: the kernel.

Masked products run an entry's ``masked`` form: the forced entry's where it has one (``coo``, ``hash``), else
``merge``'s (their cost follows the mask).  The :class:`Plan` (the entry and the :class:`Product` with the facts
and operands found for the choice: the margins whose finiteness was asked are the ones the split adds) is
executed as is.  Adding a strategy is one entry here and its executor, its renderer (``source``), its rules'
measurements where they have constants (``planner``), and its name in ``semiring.settings.GPU_STRATEGY``.

Figures behind the rules: docs/cuda.md, "Strategy choice".
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import Any

import numpy as np

from semiring import expr as _expr
from semiring import validation
from semiring.interfaces import EXPANSION_VARIABLES, SCRATCH_BUDGET, Entries

from . import coo_source, elementwise, launch, planner, source
from .launch import DeviceCSR, common_index, device_params, value_type
from .planner import Facts, Settings, known

ROWVEC_THREADS = 1024
# Dense copies are made a chunk of columns at a time, X's and Y's together within this.
DENSE_CHUNK_BYTES = 128 * 2**20
# The margins' cancelling entries are recomputed in bands of rows whose coordinates and values fit this, or
# the driver's scratch budget when smaller (at 1 GiB, edgar-like braycurtis took 655 MiB beyond its result).
# Each band costs a selection and a masked merge: on scRNA-like data (nearly every entry cancels) bands of
# 64 MiB took cityblock from 52 to 76 ms on an H200, so bands are no smaller than the budget makes them.
MARGIN_RECOMPUTE_BYTES = 1 << 30
# The row-range kernel (``render_pairwise_ranges``): a range of Y rows' sums of one X row in shared memory
# (``planner.range_width``), a block of RANGE_THREADS, at most RANGE_BLOCKS_PER_SM blocks a multiprocessor
# looping over (row, range).  First values, not yet tuned on a GPU.
RANGE_THREADS = 512
RANGE_BLOCKS_PER_SM = 8


class Product:
    """One tile's product ``X ⊕.⊗ Yᵀ`` under ``sr`` on the device, of ``out_dtype`` (dense, or at ``mask``'s
    entries), the settings of its call, and the facts and operands its strategies ask, each found once.

    ``split_of``: ``sr`` is the ``cross`` of this (union semiring, ``MarginSplit``), so the hash kernel may
    evaluate the margins once per stored entry.
    """

    def __init__(
        self, X: DeviceCSR, Y: DeviceCSR, sr, out_dtype, mask: Entries | None = None, settings=None, split_of=None
    ):
        self.X, self.Y, self.sr, self.out_dtype, self.mask, self.split_of = X, Y, sr, out_dtype, mask, split_of
        self.settings = Settings.from_env() if settings is None else settings
        self.value_name, self.T = value_type(out_dtype)
        self.xv, self.yv = X.data.astype(self.T, copy=False), Y.data.astype(self.T, copy=False)
        self.start = self.T(sr.start(X.shape[1]))
        self.shape = (X.shape[0], Y.shape[0])

    @cached_property
    def facts(self) -> Facts:
        # The margins' question through a weak reference: the facts are kept on the product, and a closure over
        # the product itself would make a cycle holding its device arrays until the garbage collector ran.
        product = weakref.ref(self)
        margins = lambda: product().margins is not None  # asked only while the product plans
        return planner.facts(self.sr, self.X, self.Y, self.xv, self.yv, margins, self.split_of)

    @cached_property
    def operands(self):
        """``(index type, X's (indptr, indices, values), Y's)`` in one index type."""
        X, Y = self.X, self.Y
        index_type, (xp, xi, yp, yi) = common_index(X.indptr, X.indices, Y.indptr, Y.indices)
        return index_type, (xp, xi, self.xv), (yp, yi, self.yv)

    @cached_property
    def margin_split(self):
        """``Semiring.margin_split`` on these data's signs (a union's), or None: the signs validation proved
        (``semiring.validation.Facts``), else one scan of both."""
        operands = (self.X, self.xv), (self.Y, self.yv)
        return (
            self.sr.margin_split(validation.all_hold("nonnegative", planner.all_nonnegative, *operands))
            if self.sr.is_union
            else None
        )

    @cached_property
    def margins(self):
        """The split's row margins of X and of Y, each ``[Σ f, Σ |f|]``, or None where there is no split or a
        margin is not finite (the union then runs another strategy: the one plan's choice)."""
        split = self.margin_split
        if split is None:
            return None
        norms = [
            elementwise.row_norms(A, (tree, _abs(tree)), self.T)
            for A, tree in ((self.X, split.x_margin), (self.Y, split.y_margin))
        ]
        return norms if planner.all_finite(norms[0][1], norms[1][1]) else None


_ABS: dict[int, tuple] = {}


def _abs(tree):
    """``abs(tree)``, one tree for each margin (held, so its id is never another's): the kernels' renderings are
    kept by their trees' identity (``source.memo_by_identity``), and a new tree at every call rendered them again
    and filled the memo, which then emptied."""
    held = _ABS.get(id(tree))
    if held is None or held[0] is not tree:
        held = _ABS[id(tree)] = (tree, _expr.Node("call", ("abs", tree)))
    return held[1]


def _always(facts: Facts) -> bool:
    return True


def _never(facts: Facts) -> bool:
    return False


def _free(facts: Facts) -> float:
    return 0.0


def _any_kernel(kernel: str) -> bool:
    return True


@dataclass(frozen=True)
class Strategy:
    """One way of computing a dense product on the GPU.

    ``name``: the value of ``$SEMIRING_GPU_STRATEGY`` forcing it; ``stage``: ``"rewrite"``, ``"kernel"`` or
    ``"replacement"`` (the module docstring); ``run(product, expansion=None)``: the result (with an
    ``expansion``, an entry that ``expands`` gives ``(result, flagged entries or None)``); ``applies``: whether
    it can compute a product of these facts; ``pays``: whether ``auto`` may take it (its measured rule);
    ``cost``: a kernel's cost by the model, in ``planner``'s units; ``takes``: a kernel ``auto`` takes outright
    where this holds; ``looks_up``: a kernel that never reads a missing entry as a stored 0; ``instead``: the
    kernel that runs where this one is forced and does not apply (merge applies everywhere); ``replaces``: which
    kernels a replacement may stand in for; ``masked(product)``: its form for a masked product, if it has one.
    """

    name: str
    stage: str
    run: Callable[..., Any]
    applies: Callable[[Facts], bool] = _always
    pays: Callable[[Facts], bool] = _always
    cost: Callable[[Facts], float] = _free
    takes: Callable[[Facts], bool] = _never
    looks_up: bool = False
    instead: str | None = None
    replaces: Callable[[str], bool] = _any_kernel
    masked: Callable[[Product], Any] | None = None
    expands: bool = False


# --------------------------------------------------------------------------- how the entries run


def _out(product: Product):
    import cupy

    return cupy.empty(product.shape, dtype=product.T)


def _margins(product: Product, expansion=None):
    return union_by_margins(product)


def _extrema(product: Product, expansion=None):
    return union_by_extrema(product, expansion)


def _ranked(product: Product, expansion=None):
    return union_by_ranks(product, expansion)


def _dense_gemm(product: Product, expansion=None):
    out = _out(product)
    dense_gemm(product.value_name, *product.operands, product.X.shape[1], out, symmetric=product.X is product.Y)
    return out


def _split(product: Product, expansion=None):
    out = _out(product)
    split(product.sr, product.value_name, product.X, product.xv, product.Y, out)
    return out


def _by_postings(in_ranges: bool):
    def run(product: Product, expansion=None):
        out, index_type = _out(product), product.operands[0]
        flagged = inverted(
            product.sr, product.value_name, index_type, product.X, product.xv, product.Y, out, in_ranges, expansion
        )
        return out if expansion is None else (out, flagged)

    return run


def _rowvec(product: Product, expansion=None):
    out = _out(product)
    rowvec(product.sr, product.value_name, *product.operands, product.X.shape[1], product.start, out)
    return out


def _rowvec_compact(product: Product, expansion=None):
    out = _out(product)
    rowvec_compact(product.sr, product.value_name, *product.operands, product.X.shape[1], product.start, out)
    return out


def _tables(kind: str):
    """``coo`` or ``hash``: ``render_pairwise_coo`` with X's rows in the tables ``layout`` gives the strategy."""

    def run(product: Product, expansion=None):
        sr, value_name, ncols, split_of = product.sr, product.value_name, product.X.shape[1], product.split_of
        tab, stream = layout(kind, sr, value_name, ncols)
        margins = entry_margins(split_of, value_name, product.xv, product.yv) if split_of and tab == "hash" else None
        out = _out(product)
        coo(sr, value_name, *product.operands, ncols, product.start, out, tab, stream, margins)
        return out

    return run


def _merge(product: Product, expansion=None):
    out = _out(product)
    merge(product.sr, product.value_name, *product.operands, product.start, out)
    return out


def _masked_operands(product: Product):
    X, Y = product.X, product.Y
    rows, cols = product.mask
    index_type, (xp, xi, yp, yi, rows, cols) = common_index(X.indptr, X.indices, Y.indptr, Y.indices, rows, cols)
    return index_type, (xp, xi, product.xv), (yp, yi, product.yv), (rows, cols)


def _tables_masked(kind: str):
    def run(product: Product):
        import cupy

        sr, value_name, ncols = product.sr, product.value_name, product.X.shape[1]
        index_type, held, streamed, (rows, cols) = _masked_operands(product)
        out = cupy.empty(rows.size, dtype=product.T)
        tab = layout(kind, sr, value_name, ncols)[0]
        coo_masked(sr, value_name, index_type, held, streamed, (rows, cols), ncols, product.start, out, tab)
        return out

    return run


def _merge_masked(product: Product):
    import cupy

    sr = product.sr
    index_type, held, streamed, (rows, cols) = _masked_operands(product)
    out = cupy.empty(rows.size, dtype=product.T)
    kernel = source.render_pairwise_merge(sr, product.value_name, index_type, masked=True)
    launch.launch(
        kernel,
        rows.size,
        (*held, *streamed, rows, cols, np.int64(rows.size), product.start, device_params(sr.params), out),
    )
    return out


# --------------------------------------------------------------------------- when they apply and pay


def _margins_apply(facts: Facts) -> bool:
    return facts.union and known(facts.margins)


def _extrema_apply(facts: Facts) -> bool:
    return facts.union and facts.extremum and known(facts.finite)


def _dense_gemm_applies(facts: Facts) -> bool:
    return facts.plus_times and planner.DENSE_GEMM_DENSITY * facts.y_rows * facts.ncols > 0


def _ranges_pay(facts: Facts) -> bool:
    return known(facts.inverted_pays) and known(facts.ranges_pays)


def _split_applies(facts: Facts) -> bool:
    return planner.inverted_applies(facts) and facts.plus_times


def _has_columns(facts: Facts) -> bool:
    return facts.ncols > 0


def _rowvec_applies(facts: Facts) -> bool:
    return facts.ncols > 0 and known(facts.rowvec_fits)


def _no_dense_row_fits(facts: Facts) -> bool:
    return not known(facts.rowvec_fits)


def _costly_split_wide(facts: Facts) -> bool:
    """A margin split's cross op of a costly union op over a space no dense row fits: ``hash`` evaluates the op
    once a pair and the margins once per stored entry, where the others evaluate it three times a pair
    (nytimes-like Jensen–Shannon: margins + hash 131.8 ms, margins + rowvec-compact 140.4 ms)."""
    return facts.costly_split and not known(facts.rowvec_fits)


def _not_merge(kernel: str) -> bool:
    return kernel != "merge"


# --------------------------------------------------------------------------- the table

STRATEGIES: tuple[Strategy, ...] = (
    # A plus-monoid union whose op never exceeds its margins, with finite margins: row margins and one
    # intersection product (any strategy below), the cancelling entries recomputed by merging.
    Strategy("margins", "rewrite", _margins, applies=_margins_apply),
    # A max- or min-monoid union (chebyshev) on finite values whose X rows are mostly short: a few of them held
    # a block, hashed and ranked, Y's rows streamed past; else, where few row pairs share a column, the rows'
    # extrema, the pairs sharing one marked from Y's postings and merged, in one kernel.
    Strategy("ranked", "rewrite", _ranked, _extrema_apply, lambda facts: known(facts.short_rows), expands=True),
    Strategy("extrema", "rewrite", _extrema, _extrema_apply, lambda facts: known(facts.few_share), expands=True),
    # Plus-monoid intersections, in place of the kernel: cuBLAS where Y is dense enough (DENSE_GEMM_DENSITY; a
    # product the cost model merges is left to merge); the postings kernels where their work is the smaller
    # (INVERTED_COST): the row ranges where they walk the postings few times an output entry, the split where
    # Y's heavy columns as a GEMM and the rest scatter-added cost less, else the inverted kernel.
    Strategy("dense-gemm", "replacement", _dense_gemm, _dense_gemm_applies, planner.dense_pays, replaces=_not_merge),
    Strategy("ranges", "replacement", _by_postings(True), planner.inverted_applies, _ranges_pay, expands=True),
    Strategy("split", "replacement", _split, _split_applies, lambda facts: known(facts.split_pays)),
    Strategy(
        "inverted", "replacement", _by_postings(False), planner.inverted_applies, lambda f: known(f.inverted_pays)
    ),
    # The kernels: one matrix's entries streamed past rows of the other held in shared memory (hash tables, a
    # dense row, renumbered columns), or one thread an output entry (merge, exact on any values).  In the order
    # that breaks the cost model's ties (Y rows of 2 entries cost coo and rowvec-compact alike).
    Strategy(
        "hash",
        "kernel",
        _tables("hash"),
        _has_columns,
        cost=planner.hash_cost,
        takes=_costly_split_wide,
        looks_up=True,
        instead="merge",
        masked=_tables_masked("hash"),
    ),
    Strategy(
        "coo",
        "kernel",
        _tables("coo"),
        _has_columns,
        cost=planner.coo_cost,
        instead="merge",
        masked=_tables_masked("coo"),
    ),
    Strategy("merge", "kernel", _merge, cost=planner.merge_cost, masked=_merge_masked),
    Strategy("rowvec", "kernel", _rowvec, _rowvec_applies, cost=planner.rowvec_cost, instead="rowvec-compact"),
    Strategy(
        "rowvec-compact",
        "kernel",
        _rowvec_compact,
        _has_columns,
        _no_dense_row_fits,
        planner.rowvec_compact_cost,
        instead="merge",
    ),
)
_BY_NAME = {s.name: s for s in STRATEGIES}
# The kernel under a forced setting that names a rewrite or a replacement (the setting's docs: "as for rowvec").
FORCED_KERNEL = "rowvec"


# --------------------------------------------------------------------------- the choice


def choose(settings: Settings, facts: Facts) -> Strategy:
    """The entry of ``STRATEGIES`` that computes a dense product of these facts (the module docstring).

    >>> facts = Facts(ncols=100, y_rows=10, y_stored=500, mean_degree=100.0, union=False,
    ...               annihilates=True, plus=True, plus_times=True, x_rows=10, x_stored=500)
    >>> [choose(Settings(s), facts).name for s in ("auto", "merge", "hash")]
    ['dense-gemm', 'merge', 'hash']
    """
    forced = settings.strategy
    auto = forced == "auto"

    def taken(s: Strategy) -> bool:  # a rewrite or replacement: forced, or auto and its rule pays, where it applies
        return (auto or forced == s.name) and s.applies(facts) and (forced == s.name or s.pays(facts))

    for s in STRATEGIES:
        if s.stage == "rewrite" and taken(s):
            return s
    if auto:
        candidates = [s for s in STRATEGIES if s.stage == "kernel" and s.applies(facts) and s.pays(facts)]
        kernel = next((s for s in candidates if s.takes(facts)), None) or min(candidates, key=lambda s: s.cost(facts))
    else:
        named = _BY_NAME[forced]
        kernel = named if named.stage == "kernel" else _BY_NAME[FORCED_KERNEL]
        while not kernel.applies(facts):
            kernel = _BY_NAME[kernel.instead]
    if facts.annihilates and not kernel.looks_up and not known(facts.finite):
        return _BY_NAME["merge"]
    for s in STRATEGIES:
        if s.stage == "replacement" and s.replaces(kernel.name) and taken(s):
            return s
    return kernel


def choose_masked(settings: Settings) -> Strategy:
    """The entry whose masked form computes a masked product: the forced one where it has a masked form, else
    ``merge`` (one thread a mask entry)."""
    named = _BY_NAME.get(settings.strategy)
    return named if named is not None and named.masked is not None else _BY_NAME["merge"]


@dataclass(frozen=True)
class Plan:
    """A strategy chosen for a product: ``run`` executes it as is."""

    strategy: Strategy
    product: Product

    def run(self, expansion=None):
        if self.product.mask is not None:
            return self.strategy.masked(self.product)
        return self.strategy.run(self.product, expansion)


def plan(product: Product) -> Plan:
    """The strategy of ``STRATEGIES`` that computes ``product``, chosen once."""
    if product.mask is not None:
        return Plan(choose_masked(product.settings), product)
    return Plan(choose(product.settings, product.facts), product)


# --------------------------------------------------------------------------- the engine's products


def product(
    X: DeviceCSR,
    Y: DeviceCSR,
    sr,
    out_dtype,
    mask: Entries | None = None,
    settings: Settings | None = None,
    split_of=None,
):
    """Dense ``(m, p)`` result, or the values at ``mask`` on the device, in its order.

    ``settings`` (read once by the engine's entry; by default from the
    environment) choose the strategy.  ``split_of``: ``sr`` is the ``cross`` of
    this (union semiring, ``MarginSplit``), so the hash kernel may evaluate the
    margins once per stored entry.
    """
    work = Product(X, Y, sr, out_dtype, mask, settings, split_of)
    if mask is None and 0 in work.shape:  # nothing to compute: no plan, no kernel
        return _out(work)
    return plan(work).run()


def product_expanded(X: DeviceCSR, Y: DeviceCSR, sr, out_dtype, expansion, settings: Settings | None = None):
    """A one-term measure ``f(c0, 0, nx*[i], ny*[j], n)`` of the product ``c0``: ``(result, entries where its
    refinement test holds, or None where it has none)``, as ``semiring.interfaces.PairwiseEngine.pairwise_expanded``.

    Planned once: where the strategy ``expands`` (the row ranges) its kernel applies the measure as it writes
    each entry (no second pass over the ``m × p`` sums, 0.65-1.36 ms of an EDGAR-like call on an H200) and
    lists the flagged entries; else the plan writes the product, and the selection and the expansion follow
    apart (``elementwise``), in place.

    ``expansion``: ``(tree, param_names, params, xnorms, ynorms, ncols, when)`` as ``elementwise.expand`` takes
    them, ``when`` None or the measure's refinement test.
    """
    work = Product(X, Y, sr, out_dtype, settings=settings)
    if 0 in work.shape:
        return _out(work), None
    chosen = plan(work)
    if chosen.strategy.expands:
        return chosen.run(expansion)
    return expanded_apart(chosen.run(), expansion)


def expanded_apart(c, expansion):
    """The product ``c`` made the measure in place, by the elementwise kernels: ``(result, flagged entries or
    None)`` as ``product_expanded`` gives them."""
    tree, names, params, xnorms, ynorms, ncols, when = expansion
    flagged = None if when is None else elementwise.select(when, (), params, [c], xnorms, ynorms, ncols, c.shape)
    return elementwise.expand(tree, names, params, [c], xnorms, ynorms, ncols, c), flagged


# A union split into margins (see Semiring.margin_split): the sum, and where it
# cancels to under 1/8 of the margins' magnitudes (relative error then at most
# ~8x the accumulation's, ~1e-5 in float32), the entries recomputed by merging.
_MARGIN_SUM = _expr.parse("c0 + nx0 + ny0", EXPANSION_VARIABLES)[0]
_MARGIN_CANCELS = _expr.parse("abs(c0) <= 0.125 * (nx1 + ny1) and nx1 + ny1 > 0.0", EXPANSION_VARIABLES)[0]


def union_by_margins(work: Product):
    """A plus-monoid union in one intersection pass, on the margins its plan found finite."""
    split, sr, X, Y, settings = work.margin_split, work.sr, work.X, work.Y, work.settings
    (nx, ax), (ny, ay) = work.margins
    out_dtype = work.out_dtype
    out = product(X, Y, split.cross, out_dtype, settings=settings, split_of=(sr, split))
    elementwise.expand(_MARGIN_SUM, (), np.zeros(0), [out], [nx, ax], [ny, ay], X.shape[1], out)
    return recompute_listed(work, out, _MARGIN_CANCELS, [nx, ax], [ny, ay])


def recompute_listed(work: Product, out, when, xnorms, ynorms):
    """``out``'s entries where ``when`` holds (an expansion's condition of ``c0``, the rows' ``xnorms`` and
    ``ynorms``) recomputed by merging: ``work``'s product under the mask of their list, scattered into ``out``.

    The list is made all at once when its coordinates and values (24 bytes an entry) fit the recompute's budget,
    else a band of rows at a time: on similar dense rows nearly all entries may be listed, and they would outgrow
    the result.  Each band costs a selection and a masked merge (on movielens-like kNN tiles, bands sized for
    the worst case took 513 ms where one pass took 419), so bands follow the count found."""
    m, ncols, none = out.shape[0], work.X.shape[1], np.zeros(0)
    limit = min(MARGIN_RECOMPUTE_BYTES, SCRATCH_BUDGET.get() or MARGIN_RECOMPUTE_BYTES) // 24
    found = elementwise.select(when, (), none, [out], xnorms, ynorms, ncols, out.shape, limit=limit)
    band = max(1, m if isinstance(found, Entries) else m * limit // found)  # hits taken as spread evenly; m may be 0
    for r0 in range(0, m, band):
        r1 = min(m, r0 + band)
        part = out[r0:r1]
        if band < m:
            found = elementwise.select(when, (), none, [part], [a[r0:r1] for a in xnorms], ynorms, ncols, part.shape)
        if found.rows.size:
            mask = Entries(found.rows + r0, found.cols)
            values = product(work.X, work.Y, work.sr, work.out_dtype, mask=mask, settings=work.settings)
            elementwise.scatter(part, found, values)
    return out


def union_by_extrema(work: Product, expansion=None):
    """A max- or min-monoid union: a pair of rows that share no stored column is exactly
    ``start ⊕ (⊕ f(x, 0) over X's row) ⊕ (⊕ f(0, y) over Y's row)``, whatever the order ⊕ takes, so every such
    entry is written from the two rows' extrema, and the pairs that share a column, marked from Y's postings,
    are merged, in one kernel (``source.render_pairwise_extrema``).  ``expansion`` (as ``product_expanded``
    takes it): applied as each entry is written, giving ``(result, flagged entries or None)``.

    Where Y's postings do not fit the driver's scratch budget in one piece the merge kernel computes the
    product (the same values), the measure applied after it.
    """
    sr, X, Y = work.sr, work.X, work.Y
    index_type, (xp, xi, xv), (yp, yi, yv) = work.operands
    I = np.int32 if index_type == "int32" else np.int64
    colptr = _column_pointers(Y, I)
    slabs = _slabs(colptr, Y.indices.size, SCRATCH_BUDGET.get(), np.dtype(I).itemsize + work.T().itemsize)
    if len(slabs) > 1:
        out = _merge(work)
        return out if expansion is None else expanded_apart(out, expansion)
    fx0, f0y = sr.mult.margins
    ex, ey = elementwise.row_norm(X, fx0, work.T, sr.add.kind), elementwise.row_norm(Y, f0y, work.T, sr.add.kind)
    out = _out(work)
    (m, p), write = out.shape, None if expansion is None else ExpandedWrite(expansion, out)
    queue = source.EXTREMA_QUEUE
    render = {} if write is None else write.render_args
    kernel = launch.function(source.render_pairwise_extrema(sr, work.value_name, index_type, **render, queue=queue))
    row_bytes = source.EXTREMA_ROW * (np.dtype(I).itemsize + work.T().itemsize)  # X's row held beside the queue
    room = min(planner.RANGE_SHARED_BYTES, launch.max_shared_bytes() - 4 * queue - 16 - row_bytes)
    width = min(p, 8 * max(128, room))  # a bit a row of Y (any device has room beside the queue: 48 KiB)
    shared = 4 * -(-width // 32)
    launch.allow_shared(kernel, shared)
    blocks = min(m * -(-p // width), RANGE_BLOCKS_PER_SM * launch.multiprocessor_count())
    pointers, rows, _ = _postings(Y, work.value_name, index_type, slabs[0], colptr)
    args = (xp, xi, xv, np.int64(m), pointers, rows, yp, yi, yv, ex, ey, work.start, np.int64(p), np.int64(width))
    args += (device_params(sr.params),)
    while True:
        tail = () if write is None else write.kernel_args(True)
        launch.run(kernel, (blocks,), (RANGE_THREADS,), (*args, *tail, out), shared)
        if write is None:
            return out
        if write.listed_all():
            return out, write.flagged()


# The ranked kernel's threads a block, and the rows of Y each streams (the held rows' table is built once a
# block, so a block streams a few thousand of Y's rows past it).
RANKED_THREADS = 128
RANKED_Y_PER_THREAD = 4


def union_by_ranks(work: Product, expansion=None):
    """A max- or min-monoid union with ``source.RANKED_ROWS`` rows of X held a block, hashed and ranked, and Y's
    rows streamed past them (``source.render_pairwise_ranked``): a pair costs its Y row's lookups, however
    many columns the two rows share.  ``expansion`` (as ``product_expanded`` takes it): applied as each entry
    is written, giving ``(result, flagged entries or None)``."""
    sr = work.sr
    index_type, held, streamed = work.operands
    out = _out(work)
    (m, p), write = out.shape, None if expansion is None else ExpandedWrite(expansion, out)
    if out.size == 0:
        return out if write is None else (out, None if write.when is None else elementwise.no_entries(out.shape))
    render = {} if write is None else write.render_args
    rows = source.RANKED_ROWS
    kernel = launch.function(source.render_pairwise_ranked(sr, work.value_name, index_type, **render, rows=rows))
    per_block = RANKED_THREADS * RANKED_Y_PER_THREAD
    grid = (-(-m // rows), min(65535, -(-p // per_block)))
    args = (*held, np.int64(m), *streamed, np.int64(p), work.start, device_params(sr.params))
    while True:
        tail = () if write is None else write.kernel_args(True)
        launch.run(kernel, grid, (RANKED_THREADS,), (*args, *tail, out))
        if write is None:
            return out
        if write.listed_all():
            return out, write.flagged()


def dense_gemm(value_name, index_type, held, streamed, ncols, out, symmetric: bool = False):
    """``out = X · Yᵀ`` by cuBLAS, over chunks of columns densified by a kernel (``render_densify``).

    ``symmetric`` (Y is X): one dense copy a chunk, the upper triangle by SYRK (half the products of the GEMM:
    dense 20,000 x 768 rows against themselves, 12.2 ms of GEMM), then mirrored below (``render_mirror_upper``),
    so the result is exactly symmetric."""
    import cupy
    from cupy import cublas

    (m, p), T = out.shape, out.dtype
    if m == 0:
        return
    chunk = max(1, min(ncols, DENSE_CHUNK_BYTES // (T.itemsize * (m if symmetric else m + p))))
    kernel = source.render_densify(value_name, index_type)
    for c0 in range(0, ncols, chunk):
        c1 = min(ncols, c0 + chunk)
        A = cupy.zeros((m, c1 - c0), T)
        launch.launch(kernel, m * 32, (*held, np.int64(m), np.int64(c0), np.int64(c1), A))
        if symmetric:
            cublas.syrk("N", A, out=out, alpha=1.0, beta=0.0 if c0 == 0 else 1.0)
        else:
            B = cupy.zeros((p, c1 - c0), T)
            launch.launch(kernel, p * 32, (*streamed, np.int64(p), np.int64(c0), np.int64(c1), B))
            cublas.gemm("N", "T", A, B, out=out, alpha=1.0, beta=0.0 if c0 == 0 else 1.0)
            del B
        del A
    if symmetric:
        tiles = -(-m // source.MIRROR_TILE)
        mirror = launch.function(source.render_mirror_upper(value_name))
        launch.run(mirror, (tiles, tiles), (source.MIRROR_TILE, source.MIRROR_ROWS), (np.int64(m), np.int64(p), out))


def _column_pointers(Y: DeviceCSR, I):
    """Where each column's postings start, over the whole column space (built once per device matrix)."""
    import cupy

    cache = Y.__dict__.setdefault("_column_pointers", {})
    if I not in cache:
        colptr = cupy.zeros(Y.shape[1] + 1, np.int64)
        cupy.cumsum(Y.column_counts(), out=colptr[1:])
        cache[I] = colptr.astype(I, copy=False)
    return cache[I]


def _slabs(colptr, total: int, budget: int | None, entry_bytes: int) -> list[tuple[int, int, int, int]]:
    """Column ranges ``(c0, c1)`` whose postings (``entry_bytes`` a stored entry) take about ``budget`` bytes
    each (one range when no budget is set), with where their postings begin and end ``(e0, e1)``; ``total``:
    the stored entries (``colptr[-1]``, known on the host: one range needs no copy back).

    Columns are grouped by the multiple of the slab size their postings start in, so a slab exceeds it by
    at most its last column; the few boundaries are found on the device and come back in one copy.
    """
    import cupy

    ncols = colptr.size - 1
    step = total if budget is None else max(1, budget // entry_bytes)
    if total <= step:
        return [(0, ncols, 0, total)]
    marks = cupy.arange(step, total, step, dtype=colptr.dtype)
    cuts = cupy.searchsorted(colptr[:-1], marks, side="left")
    cuts, starts = cupy.stack([cuts.astype(np.int64), colptr[cuts].astype(np.int64)]).get().tolist()
    bounds = sorted({0: 0, ncols: total, **dict(zip(cuts, starts))}.items())
    return [(c0, c1, e0, e1) for (c0, e0), (c1, e1) in pairwise(bounds)]


def _postings(Y: DeviceCSR, value_name: str, index_type: str, slab: tuple[int, int, int, int], colptr):
    """The postings of Y's columns ``c0:c1`` — row of each entry and value, column by column — and column
    pointers over the whole column space into them (empty outside the slab), so the inverted kernel skips
    X's entries of other columns without a test of its own.  Cached on Y when one slab is the whole space.

    Built by a counting sort (``render_postings``): cuSPARSE's CSR-to-CSC transpose took a 394 MiB work
    buffer for scRNA-like rows (25 M entries) on an H200, and sorting by column with int64 orders 24 bytes
    an entry.
    """
    import cupy

    I, T = colptr.dtype, value_type(value_name)[1]
    c0, c1, base, end = slab
    whole = (c0, c1) == (0, Y.shape[1])
    cache = Y.__dict__.setdefault("_postings", {})
    key = (index_type, value_name)
    if whole and key in cache:
        return cache[key]
    cursor = (colptr[c0:c1] - base).astype(I, copy=False)  # a new array (the kernel advances it), no second copy
    post_row, post_val = cupy.empty(end - base, I), cupy.empty(end - base, T)
    args = (Y.indptr.astype(I, copy=False), Y.indices.astype(I, copy=False), Y.data.astype(T, copy=False))
    kernel = source.render_postings(value_name, index_type)
    launch.launch(
        kernel, Y.shape[0], (*args, np.int64(Y.shape[0]), np.int64(c0), np.int64(c1), cursor, post_row, post_val)
    )
    # over the whole column space the pointers are colptr itself (read only); a slab's are rebased and clipped
    pointers = colptr if whole else cupy.clip(colptr - base, 0, end - base).astype(I, copy=False)
    result = (pointers, post_row, post_val)
    if whole:
        cache[key] = result
    return result


def inverted(
    sr,
    value_name,
    index_type,
    X: DeviceCSR,
    xv,
    Y: DeviceCSR,
    out,
    in_ranges: bool = False,
    expansion=None,
) -> Entries | None:
    """Each stored entry of X walks its column's postings of Y, one atomic add per stored pair.

    Y's postings are built a slab of columns at a time within the driver's scratch budget
    (``semiring.interfaces.SCRATCH_BUDGET``): on scRNA-like data all of them at once took 590 MiB.
    ``in_ranges``: the adds go to X's row's sums over a range of Y's rows in shared memory, each output
    entry written once (``render_pairwise_ranges``); else straight into the zeroed output.
    ``expansion`` (``in_ranges`` only; as ``product_expanded`` takes it): applied as the last slab writes
    each entry, and the entries its refinement test flags returned (None without a test).
    """
    I = np.int32 if index_type == "int32" else np.int64
    colptr = _column_pointers(Y, I)
    (m, p), nnz = out.shape, X.indices.size
    xi, params = X.indices.astype(I, copy=False), device_params(sr.params)
    if out.size == 0:
        return None if expansion is None or expansion[-1] is None else elementwise.no_entries(out.shape)
    write = None if expansion is None else ExpandedWrite(expansion, out)
    if in_ranges:
        held = 0
        xp = X.indptr.astype(I, copy=False)
        render = {} if write is None else write.render_args
        kernel = launch.function(source.render_pairwise_ranges(sr, value_name, index_type, **render))
        width = planner.range_width(p, out.dtype.itemsize)
        shared = width * out.dtype.itemsize
        launch.allow_shared(kernel, shared)
        blocks = min(m * -(-p // width), RANGE_BLOCKS_PER_SM * launch.multiprocessor_count())

        def run(postings, later: bool, last: bool):
            args = (xp, xi, xv, np.int64(m), *postings, np.int64(p), np.int64(width), np.int32(later), params)
            args += () if write is None else write.kernel_args(last)
            launch.run(kernel, (blocks,), (RANGE_THREADS,), (*args, out), shared)
    else:
        if write is not None:
            raise ValueError("the inverted kernel's scatter-adds write the product only: expand apart")
        xrow = launch.entry_rows(X.indptr, nnz, I)
        held = xrow.nbytes
        out.fill(0)
        kernel = source.render_pairwise_inverted(sr, value_name, index_type)

        def run(postings, later: bool, last: bool):
            launch.launch(kernel, nnz * 32, (xrow, xi, xv, np.int64(nnz), *postings, np.int64(p), params, out))

    entry_bytes = np.dtype(I).itemsize + out.dtype.itemsize  # a posting: row and value
    budget = SCRATCH_BUDGET.get()
    if budget is not None:  # what the slabs share the budget with: X's entry rows, a slab's two pointer arrays
        budget = max(entry_bytes, budget - held - 2 * colptr.nbytes)
    slabs = _slabs(colptr, Y.indices.size, budget, entry_bytes)
    while True:
        for k, slab in enumerate(slabs):
            postings = _postings(Y, value_name, index_type, slab, colptr)
            run(postings, later=k > 0, last=k == len(slabs) - 1)
            del postings  # freed before the next slab is built (a slab alive with the next held 50 MiB more)
        if write is None or write.listed_all():
            return None if write is None else write.flagged()


def split(sr, value_name, X: DeviceCSR, xv, Y: DeviceCSR, out) -> None:
    """``out = X · Yᵀ`` as cuBLAS's product over Y's heavy columns (``planner.heavy_columns``) and the inverted
    kernel's scatter-adds over the other columns, added on top (``planner.SPLIT_HEAVY_DENSITY`` says why).

    The dense copy of Y's heavy columns and the postings of the rest (``_split_layout``) are made once per call
    (the driver's ``CALL_CACHE``; once per product outside the driver), or once for every query of a fitted
    index that holds its cache (``NearestNeighbors``), and shared by every tile of X's rows against Y.  The
    scatter-adds run a band of SPLIT_BAND_ROWS of Y's rows at a time, so the outputs they touch at once stay
    in L2.
    """
    from cupy import cublas

    if out.size == 0:
        return
    heavy, count, dense_y, bands = _split_layout(Y, value_name, out.dtype)
    if count:
        dense_x = _dense_columns(X, xv, heavy, count, out.dtype)
        cublas.gemm("N", "T", dense_x, dense_y, out=out, alpha=1.0, beta=0.0)
        del dense_x
    else:
        out.fill(0)
    light_x = _columns_of(X, xv, ~heavy)
    nnz, p = light_x.indices.size, out.shape[1]
    if nnz == 0:
        return
    # int32 indices throughout: X's rows and columns (< 2**24, INVERTED_MAX_COLUMNS) and a band's postings fit
    xrow = launch.entry_rows(light_x.indptr, nnz, np.int32)
    xi = light_x.indices.astype(np.int32, copy=False)
    kernel = source.render_pairwise_inverted(sr, value_name, "int32")
    flat = out.reshape(-1)
    for j0, postings in bands:
        # the band's row j is Y's row j0 + j: its outputs start j0 entries into out, rows still p apart
        args = (xrow, xi, light_x.data, np.int64(nnz), *postings, np.int64(p), device_params(sr.params))
        launch.launch(kernel, nnz * 32, (*args, flat[j0:]))


# The split strategy's scatter-adds, a band of Y's rows at a time: at once they touch about a hundred X rows'
# outputs in the band (the warps resident on an H200, ~130 light entries a row), 12.5 MiB in float32 at this
# width, within its 50 MiB L2.  Over all 300,000 nytimes-like rows at once they took 61 ps a pair against 17
# over 40,000 (the outputs touched outgrew L2); see docs/cuda.md, "The split strategy".
SPLIT_BAND_ROWS = 32_768


def _split_layout(Y: DeviceCSR, value_name: str, T):
    """Y's heavy columns (a boolean device array over its columns, and how many), their dense copy, and the
    postings of Y's other columns as ``(first row, (column pointers, rows, values))`` bands of SPLIT_BAND_ROWS
    rows (int32; the light entries' row-major copy is dropped once they are made): made once per call, or once
    for every query of a fitted index (``launch.derived``).
    """

    def make():
        heavy, count = planner.heavy_columns(Y, np.dtype(T).itemsize, planner.dense_room(Y))
        yv = Y.data.astype(T, copy=False)
        light = _columns_of(Y, yv, ~heavy)
        p = Y.shape[0]
        bands = []
        for j0 in range(0, p, SPLIT_BAND_ROWS):
            band = launch.row_slice(light, j0, min(p, j0 + SPLIT_BAND_ROWS))
            band = DeviceCSR(
                band.indptr.astype(np.int32, copy=False),
                band.indices.astype(np.int32, copy=False),
                band.data,
                band.shape,
            )
            colptr = _column_pointers(band, np.int32)
            postings = _postings(band, value_name, "int32", (0, band.shape[1], 0, band.indices.size), colptr)
            bands.append((j0, postings))
        del light
        return heavy, count, _dense_columns(Y, yv, heavy, count, T) if count else None, bands

    return launch.derived(Y, ("split", value_name), make)


def _entry_rows(indptr, e0: int, e1: int):
    """The rows of stored entries e0..e1 (int64) from the row pointers."""
    import cupy

    return cupy.searchsorted(indptr, cupy.arange(e0, e1, dtype=indptr.dtype), side="right") - 1


def _dense_columns(A: DeviceCSR, values, columns, count: int, T):
    """A's values in the ``columns`` (a boolean device array over its columns, ``count`` of them set) as a dense
    ``rows × count`` array, those columns in their order; a chunk of entries at a time."""
    import cupy

    place = cupy.cumsum(columns, dtype=np.int64) - 1  # a kept column's place among them
    out = cupy.zeros((A.shape[0], count), T)
    for e0, e1 in validation.entry_chunks(A.indices.size):
        cols = A.indices[e0:e1]
        kept = columns[cols]
        out[_entry_rows(A.indptr, e0, e1)[kept], place[cols[kept]]] = values[e0:e1][kept]
    return out


def _columns_of(A: DeviceCSR, values, columns) -> DeviceCSR:
    """A's stored entries in the ``columns`` (a boolean device array over its columns) as a DeviceCSR of A's
    shape, their order kept (so each row's columns stay sorted)."""
    import cupy

    kept = columns[A.indices]
    ends = cupy.zeros(kept.size + 1, np.int64)
    cupy.cumsum(kept, out=ends[1:])
    indptr = ends[A.indptr].astype(A.indptr.dtype, copy=False)
    return DeviceCSR(indptr, A.indices[kept], values[kept], A.shape)


class ExpandedWrite:
    """A one-term measure's expansion as the row-range kernel writes each entry, and the entries its
    refinement test flags, listed in buffers of ``elementwise.flag_room`` entries as ``elementwise.select`` lists
    them (if more are flagged the product runs again with buffers of the exact size: they are pairs of
    near-duplicate rows, rare).

    ``expansion``: ``(tree, param_names, params, xnorms, ynorms, ncols, when)`` (``product_expanded``).
    """

    def __init__(self, expansion, out):
        import cupy

        tree, names, params, xnorms, ynorms, self.ncols, self.when = expansion
        m, p = out.shape
        flag_type, self.I = elementwise.flag_index((m, p))
        label = elementwise.label(tree) + ("" if self.when is None else elementwise.label(self.when)[1:])
        self.render_args = {
            "expansion": tree,
            "param_names": tuple(names),
            "when": self.when,
            "label": label,
            "flag_type": flag_type,
        }
        self.norms = elementwise.operands(out.dtype, [], xnorms, ynorms)[2:]
        self.params = device_params(params)
        self.count = cupy.zeros(1, np.uint64)
        self._size(0 if self.when is None else elementwise.flag_room(m, p))

    def _size(self, capacity: int) -> None:
        import cupy

        self.capacity = capacity
        self.rows, self.cols = cupy.empty(max(1, capacity), self.I), cupy.empty(max(1, capacity), self.I)

    def kernel_args(self, last: bool) -> tuple:
        if last:
            self.count.fill(0)
        tail = (np.int64(self.capacity), self.rows, self.cols, self.count)
        return (*self.norms, np.int64(self.ncols), self.params, np.int32(last), *tail)

    def listed_all(self) -> bool:
        """Whether every flagged entry fit; if not, the buffers are made their exact size for a second run."""
        if self.when is None:
            return True
        self.hits = int(self.count[0])
        if self.hits <= self.capacity:
            return True
        self._size(self.hits)
        return False

    def flagged(self) -> Entries | None:
        return None if self.when is None else Entries(self.rows[: self.hits], self.cols[: self.hits])


def _shared_capacity(value_name: str, sr) -> int:
    """The most columns ``render_pairwise_rowvec`` can hold in shared memory."""
    budget, item = launch.max_shared_bytes(), (4 if value_name == "float32" else 8)
    n = budget // item
    while n > 0 and source.rowvec_shared_bytes(n, value_name, sr, second_pass=sr.is_union) > budget:
        n -= max(1, n // 256)
    return n


def merge(sr, value_name, index_type, held, streamed, start, out):
    """One thread per output entry, merging its two sorted rows."""
    m, p = out.shape
    kernel = source.render_pairwise_merge(sr, value_name, index_type, masked=False)
    launch.launch(kernel, m * p, (*held, *streamed, np.int64(m), np.int64(p), start, device_params(sr.params), out))


def rowvec_compact(sr, value_name, index_type, held, streamed, ncols, start, out):
    """``rowvec`` over a wide column space: batches of X rows whose stored columns fit in shared memory.

    A batch's columns U (sorted) become 0..|U|-1; every other column, in Y,
    becomes the sentinel |U|, a slot that holds 0 and is never marked stored,
    so it contributes exactly what a column the X row lacks contributes.  The
    renumbering is monotone, so rows stay sorted.
    """
    import cupy

    xp, xi, xv = held
    yp, yi, yv = streamed
    capacity = _shared_capacity(value_name, sr) - 1  # one slot for the sentinel
    m, r0, rows = out.shape[0], 0, out.shape[0]
    while r0 < m:
        r1 = min(m, r0 + rows)
        k0, k1 = int(xp[r0]), int(xp[r1])
        used = cupy.unique(xi[k0:k1])
        if used.size > capacity and r1 - r0 > 1:
            rows = max(1, (r1 - r0) // 2)  # fewer rows, fewer distinct columns
            continue
        if used.size > capacity:  # one row alone stores more columns than fit: merge it
            merge(sr, value_name, index_type, (xp[r0 : r1 + 1] - k0, xi[k0:k1], xv[k0:k1]), streamed, start, out[r0:r1])
        else:
            renumber = cupy.full(ncols, used.size, dtype=xi.dtype)
            renumber[used] = cupy.arange(used.size, dtype=xi.dtype)
            batch = (xp[r0 : r1 + 1] - k0, renumber[xi[k0:k1]], xv[k0:k1])
            rowvec(sr, value_name, index_type, batch, (yp, renumber[yi], yv), int(used.size) + 1, start, out[r0:r1])
        r0 = r1


def layout(strategy: str, sr, value_name: str, ncols: int) -> tuple[str, str]:
    """(table, stream) of ``render_pairwise_coo`` for a strategy: ``hash`` holds rows in hash tables and
    streams Y's rows to lane groups; ``coo`` deals Y's entries evenly to warps, rows held dense where a row
    of the column space fits shared memory, else hashed."""
    if strategy == "hash":
        return "hash", "rows"
    fits = source.rowvec_shared_bytes(ncols, value_name, sr, sr.is_union) <= launch.max_shared_bytes()
    return ("dense" if fits else "hash"), "coo"


# A block's hash tables take at most half the shared memory one block may opt in to, so two blocks of
# 1,024 threads share a multiprocessor.
HASH_BLOCKS_PER_SM = 2
MIN_SLOTS = 16


def _parts(ap, part: int):
    """Held rows cut by column range into parts of at most ``part`` stored entries, each part one item:
    (row, first entry, end entry) per item, and the count of items."""
    import cupy

    m = ap.size - 1
    if m == 0:
        return ap[:0], ap[:0], ap[:0], 0
    deg = cupy.diff(ap)
    nparts = cupy.maximum(1, (deg + part - 1) // part)
    ends = cupy.cumsum(nparts)
    n = int(ends[-1])
    if n == m:  # every row fits: one item per row
        return cupy.arange(m, dtype=ap.dtype), ap[:-1], ap[1:], m
    size = (deg + nparts - 1) // nparts  # a heavy row is cut into parts of equal size
    item = cupy.arange(n, dtype=ends.dtype)
    row = cupy.searchsorted(ends, item, side="right")
    k0 = ap[row] + (item - (ends[row] - nparts[row])) * size[row]
    k1 = cupy.minimum(ap[row + 1], k0 + size[row])
    return row.astype(ap.dtype), k0.astype(ap.dtype), k1.astype(ap.dtype), n


def hash_layout(
    ap, value_name: str, index_type: str, max_rows: int = coo_source.MAX_ROWS, split: bool = False
) -> tuple[int, int]:
    """(slots of one row's table, rows held per block) for held rows with pointers ``ap``.

    Each block streams all of B once for the rows it holds, so the layout that
    needs the fewest blocks wins: small tables hold more rows per block (up to
    ``max_rows``), large ones cut fewer heavy rows into parts.  Reads only a
    histogram of the rows' degrees (by powers of two) from the device.
    """
    import cupy

    slot_bytes = coo_source.table_slot_bytes(value_name, index_type, split)
    budget = launch.max_shared_bytes() // HASH_BLOCKS_PER_SM
    deg = cupy.diff(ap)
    if deg.size == 0:
        return MIN_SLOTS, 1
    bits = cupy.ceil(cupy.log2(cupy.maximum(deg, 1).astype(np.float64))).astype(np.int64)
    hist = cupy.bincount(bits).get()  # rows by ceil(log2(degree)): at most 64 bins
    best = None
    slots = MIN_SLOTS
    while slots * slot_bytes <= budget:
        rows = max(1, min(max_rows, budget // (slots * slot_bytes)))
        items = sum(int(h) * max(1, (1 << j) // (slots // 2)) for j, h in enumerate(hist))
        blocks = -(-items // rows)
        cost = items + 2 * blocks  # a lookup per item and entry; a block's streaming of an entry costs ~2
        if best is None or cost < best[0]:
            best = (cost, slots, rows)
        slots *= 2
    return best[1], best[2]


def _coo_pass(
    sr, value_name, index_type, held, streamed, ncols, out, tab, second_pass, masked=None, margins=None, stream="coo"
):
    """One pass of ``render_pairwise_coo``: the held rows (in parts) against the streamed entries (with
    ``margins`` — the union semiring and its entries' margins — the margin split's cross op)."""

    ap, ai, av = held
    bp, bi, bv = streamed
    m_a, m_b = ap.size - 1, bp.size - 1
    nnz_b = bi.size
    if m_a == 0 or m_b == 0:
        return
    if tab == "dense":
        slots, rows = ncols, 1
        shared = source.rowvec_shared_bytes(ncols, value_name, sr, second_pass)
        part = max(1, int(ap[-1]))  # never cut: the whole column space is held
    else:
        most = 1 if masked is not None else coo_source.MAX_ROWS
        slots, rows = hash_layout(ap, value_name, index_type, most, margins is not None)
        shared = rows * slots * coo_source.table_slot_bytes(value_name, index_type, margins is not None)
        part = slots // 2
    item_row, item_k0, item_k1, n_items = _parts(ap, part)
    group = _group_size(bp, m_b) if masked is not None or stream == "rows" else 8
    union = margins[0] if margins else None
    kernel = coo_source.render_pairwise_coo(
        sr, value_name, index_type, tab, second_pass, masked is not None, rows, group, union, stream
    )
    fn = launch.function(kernel)
    launch.allow_shared(fn, shared)
    head = (ap, ai, av, item_row, item_k0, item_k1, np.int64(n_items), bp, bi, bv)
    head = (*head, np.int64(slots), np.int64(ncols), device_params(sr.params), *(margins[1:] if margins else ()))
    blocks = -(-n_items // rows)
    if masked is not None:
        eptr, other, slot = masked
        launch.run(fn, (blocks,), (coo_source.BLOCK_THREADS,), (*head, eptr, other, slot, out), shared)
        return
    sms = launch.multiprocessor_count()
    stride_a, stride_b = (1, out.shape[1]) if second_pass else (out.shape[1], 1)
    if stream == "rows":
        groups = coo_source.BLOCK_THREADS // group
        grid_y = max(1, min(-(-m_b // groups), -(-COO_BLOCKS_PER_SM * sms // blocks), 65535))
        args = (*head, np.int64(m_b), np.int64(stride_a), np.int64(stride_b), out)
        launch.run(fn, (blocks, grid_y), (coo_source.BLOCK_THREADS,), args, shared)
        return
    brow = launch.entry_rows(bp, nnz_b, bp.dtype)
    per_block = coo_source.BLOCK_THREADS * COO_ENTRIES_PER_THREAD
    grid_y = max(1, min(-(-nnz_b // per_block), -(-COO_BLOCKS_PER_SM * sms // blocks), 65535))
    args = (*head, brow, np.int64(nnz_b), np.int64(stride_a), np.int64(stride_b), out)
    launch.run(fn, (blocks, grid_y), (coo_source.BLOCK_THREADS,), args, shared)


# A block's share of B's entries is at least this many per thread, so filling its tables pays; blocks are
# split over B's entries until about this many per multiprocessor run.
COO_ENTRIES_PER_THREAD = 16
COO_BLOCKS_PER_SM = 8


def coo(sr, value_name, index_type, held, streamed, ncols, start, out, tab, stream, margins=None):
    """``render_pairwise_coo`` over all rows: X's rows held in ``tab`` tables, Y streamed by ``stream`` (its
    entries dealt evenly to warps, or its rows to lane groups); a union adds its second pass with the roles
    swapped.  ``margins`` (:func:`entry_margins`): ``sr`` is that union's margin split, its margins given
    per stored entry."""
    out.fill(start)
    _coo_pass(sr, value_name, index_type, held, streamed, ncols, out, tab, False, None, margins, stream)
    if sr.is_union:
        _coo_pass(sr, value_name, index_type, streamed, held, ncols, out, tab, True, None, None, stream)


def entry_margins(split_of, value_name: str, xv, yv):
    """(the union semiring, ``f(x, 0)`` of each stored entry of X, ``f(0, y)`` of each of Y): the margin
    split's one-sided terms, evaluated once per entry rather than once per pair of rows."""
    import cupy

    union, split = split_of
    margins = []
    for label, tree, values in (("x", split.x_margin, xv), ("y", split.y_margin, yv)):
        kernel = coo_source.render_entrywise(tree, f"{union.name}_{label}_margin", value_name)
        out = cupy.empty_like(values)
        launch.launch(kernel, values.size, (values, np.int64(values.size), out))
        margins.append(out)
    return (union, *margins)


def coo_masked(sr, value_name, index_type, held, streamed, mask, ncols, start, out, tab):
    """The CSR + COO kernel at the mask's entries: each held row's entries listed, one lane group per entry."""
    import cupy

    rows, cols = mask
    out.fill(start)
    passes = [(held, streamed, rows, cols, False)]
    if sr.is_union:  # the columns only X stores: Y's rows held, their entries' X rows streamed
        passes.append((streamed, held, cols, rows, True))
    for a, b, key, other, second in passes:
        order = cupy.argsort(key).astype(key.dtype)
        eptr = cupy.searchsorted(key[order], cupy.arange(a[0].size, dtype=key.dtype), side="left").astype(key.dtype)
        _coo_pass(sr, value_name, index_type, a, b, ncols, out, tab, second, masked=(eptr, other[order], order))


def _group_size(indptr, rows: int) -> int:
    """Lanes per streamed row: about one lane per 8 stored values, a power of two up to a warp."""
    mean = float(indptr[-1]) / max(1, rows)
    group = 1
    while group < 32 and group * 8 < mean:
        group *= 2
    return group


def rowvec(sr, value_name, index_type, held, streamed, ncols, start, out, second_pass=False):
    """One pass of the shared-memory kernel: rows of ``held`` against all rows of ``streamed``."""
    m_a, m_b = held[0].size - 1, streamed[0].size - 1
    if m_a == 0 or m_b == 0:
        return
    group = _group_size(streamed[0], m_b)
    kernel = source.render_pairwise_rowvec(sr, value_name, index_type, group, second_pass)
    fn = launch.function(kernel)
    shared = source.rowvec_shared_bytes(ncols, value_name, sr, second_pass)
    launch.allow_shared(fn, shared)
    groups = ROWVEC_THREADS // group
    sms = launch.multiprocessor_count()
    grid_y = max(1, min((m_b + groups - 1) // groups, (8 * sms + m_a - 1) // m_a, 65535))
    stride_a, stride_b = (1, out.shape[1]) if second_pass else (out.shape[1], 1)
    args = (*held, *streamed, np.int64(m_b), np.int64(ncols), start, device_params(sr.params))
    launch.run(fn, (m_a, grid_y), (ROWVEC_THREADS,), (*args, np.int64(stride_a), np.int64(stride_b), out), shared)
    if sr.is_union and not second_pass:  # the columns only X stores: Y's rows held, X's streamed
        rowvec(sr, value_name, index_type, streamed, held, ncols, start, out, second_pass=True)


def sparse_product(X: DeviceCSR, Y: DeviceCSR, sr, out_dtype, budget_bytes: int, settings: Settings):
    """An intersection semiring's product at the pairs of rows sharing a stored column only: CSR
    ``(indptr, indices, data)`` on the device, columns sorted within each row (GraphBLAS ``mxm``'s pattern).

    Bands of X's rows, each as two dense tiles within ``budget_bytes``: the semiring's values and the count
    of shared stored columns (``plus_pair``), whose nonzero entries are the ones kept.  Memory follows the
    band and the result, never ``m × p`` at once.
    """
    import cupy

    from semiring.ops import BUILTIN_SEMIRINGS

    shared_columns = BUILTIN_SEMIRINGS["plus_pair"]
    T = value_type(out_dtype)[1]
    m, p = X.shape[0], Y.shape[0]
    index = np.int32 if max(m, p) < 2**31 else np.int64
    band = max(1, budget_bytes // (max(1, p) * (2 * np.dtype(T).itemsize + 1)))
    counts, cols, vals = [cupy.zeros(0, np.int64)], [cupy.zeros(0, index)], [cupy.zeros(0, T)]
    for r0 in range(0, m, band):
        Xb = launch.row_slice(X, r0, min(m, r0 + band))
        kept = product(Xb, Y, shared_columns, T, settings=settings) > 0
        values = product(Xb, Y, sr, T, settings=settings)
        rows, cs = cupy.nonzero(kept)  # row-major: rows in order, columns sorted within each
        counts.append(kept.sum(axis=1, dtype=np.int64))
        cols.append(cs.astype(index))
        vals.append(values[rows, cs])
        del kept, values, rows, cs
    ends = cupy.cumsum(cupy.concatenate(counts))
    nnz = int(ends[-1]) if m else 0
    indptr = cupy.zeros(m + 1, index if nnz < 2**31 else np.int64)  # int64 pointers past 2^31 entries
    indptr[1:] = ends
    return indptr, cupy.concatenate(cols), cupy.concatenate(vals)
