"""The CPU engine's strategies: one entry a way of computing a product (when it applies, what it costs, how it
runs), and the choice among them, made once a tile.

``STRATEGIES`` is the whole of the choice.  For one tile's product (:class:`Product`: its operands, the result
asked for, and the facts of them the entries ask, each found at most once), :func:`plan` takes the entries for
that result and semantics, in groups of one setting each (``setting``; an entry without one is a group of its
own), in the table's order, and the first group that chooses an entry runs it.  A group chooses

1. the entry its setting forces (the values ``forced_by``, else the entry's name), where it ``runs`` at all, past
   its own measured rule (tests force each path with the settings); a value naming no entry of the group
   (``SEMIRING_CPU_DENSE=never``) passes the turn to the next group;
2. otherwise (``auto``, or a forced entry that cannot run here: ``SEMIRING_CPU_UNION=margins`` on a product the
   split does not hold for chooses among the other unions as ``auto`` does), among its entries that run and
   ``pays`` (the measured rule that takes it in ``auto``), the least ``cost`` (ties: the earlier entry); an entry
   with no cost model costs 0, so the table's order ranks it; none: the next group.

So the dense blocks, first, are taken where their setting forces them or the call's densities pay, before
``SEMIRING_CPU_INTERSECTION`` or ``_UNION`` chooses a sparse kernel, as each setting's docs say.

The :class:`Plan` (the entry and the product with the facts found for the choice: the row kernel's index counted
for its cost is the one it runs on) is executed as is.  Adding a strategy is one entry here, its kernel (in the
template ``semiring_template`` and its driver in ``pairwise``, or a module of its own), and, where tests force
it, its name in a setting's choices (``semiring.settings``).

Figures behind the constants: docs/cpu-engine.md.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import numba
import numpy as np
import scipy.sparse as sp

from semiring import expr as _expr
from semiring import monoid, settings, validation
from semiring import semantics as _semantics
from semiring.interfaces import SCRATCH_BUDGET, Entries

from . import dense as _dense
from . import elementwise as _elementwise
from . import pairwise as _pairwise

# A union's dense-scatter worker keeps three per-column arrays (value, stamp, hit): 24 bytes a column.
UNION_SCRATCH_BYTES_PER_COLUMN = 24
# Scattering is faster on short rows; on long ones merging is as fast or faster and needs no scratch
# (python -m benchmarks cpu-union; figures in docs/cpu-engine.md).
MERGE_MIN_MEAN_ROW = 512
# A measure's expansion is applied in the product kernel (``product_expanded``) from this many result entries:
# below it the separate pass costs less than compiling a kernel of the semiring and the measure together.
EXPANDED_MIN_ENTRIES = 1 << 20
# A pass of less work than this (entries x columns) runs in the calling thread: the float32 products' cancelling
# entries of 3,000 x 300 dense rows against themselves (its 3,000 self-pairs: 900,000) took 14 ms on 2 threads of a
# loaded 2-core machine (waking a thread there can take a time slice), about 2 ms on one.
CALLING_THREAD_WORK = 1 << 21
# Room for the entries a refinement recomputes (near-duplicates): 1/FLAGGED_SHARE of the result, at least 1,024
# a chunk; more, and the product is written again unexpanded (the refinement's selection then reads its terms).
FLAGGED_SHARE = 64
# Bytes an entry the float32 BLAS path takes beyond its result, at most (``expanded_bytes_per_entry``): its two
# lists' rooms (uncertain and flagged entries, 1/FLAGGED_SHARE of the result each, two int64 an entry), the
# entries read out of them (two int64, as much again while gathered) and the uncertain ones recomputed (a float64
# and a flag), as many as the rooms hold: (2 · 16 + 2 · 32 + 9) / 64 = 1.6, rounded up.
FLOAT32_EXTRA_BYTES = -(-(2 * 16 + 2 * 32 + 9) // FLAGGED_SHARE)


class Product:
    """One tile's product ``X ⊕.⊗ Yᵀ`` under ``sr``: the result asked for (``"dense"``, ``"sparse"`` or
    ``"masked"``, at the entries ``mask``) and the facts of the operands the strategies ask, each found once."""

    def __init__(
        self,
        X: sp.csr_matrix,
        Y: sp.csr_matrix,
        sr,
        result: str,
        mask: Entries | None = None,
        expanded: bool = False,
        out: np.ndarray | None = None,
    ):
        self.X, self.Y, self.sr, self.result, self.mask = X, Y, sr, result, mask
        self.expanded = expanded  # a measure's expansion asked of the kernel that writes the result
        self.out = out  # where that expansion is written (a view of the call's result), or None: a new array
        self.m, self.p = X.shape[0], Y.shape[0]
        self.semantics = "union" if sr.is_union else "intersection"
        self.budget = SCRATCH_BUDGET.get()

    @cached_property
    def columns(self) -> tuple[np.ndarray, np.ndarray, int]:
        """X's and Y's column indices on the columns either holds, and their width (``compact_columns``)."""
        return _pairwise.compact_columns(self.X, self.Y)

    @cached_property
    def row_count(self) -> _pairwise.RowCount:
        """The row kernel's index of Y, counted (one pass over Y's entries): its products are its cost."""
        xi, yi, ncols = self.columns
        return _pairwise.count_row_index(self.X, xi, self.Y, yi, ncols)

    @cached_property
    def row_index(self):
        """The row kernel's index of Y, placed from its count (``pairwise.place_row_index``)."""
        return _pairwise.place_row_index(self.row_count, self.row_positions if self.upper else None)

    @cached_property
    def upper(self) -> bool:
        """X is Y under an op that commutes: entry (j, i) is entry (i, j), so the row kernel may form j >= i
        only (for the product unexpanded: a measure's expansion need not read the two rows' norms alike)."""
        return self.X is self.Y and self.m > 1 and _commutes(self.sr.mult.tree)

    @cached_property
    def row_positions(self) -> np.ndarray:
        """Each of Y's entries' place in the row index (``upper`` only; empty otherwise)."""
        return np.empty(int(self.Y.indptr[-1]) if self.upper else 0, np.int64)

    @cached_property
    def margin_split(self):
        """``Semiring.margin_split`` on these data's signs (a plus monoid only), or None."""
        X, Y = self.X, self.Y
        if self.sr.add.key != monoid.plus.key:
            return None
        stored = (X, X.data[: X.indptr[-1]]), (Y, Y.data[: Y.indptr[-1]])
        return self.sr.margin_split(validation.all_hold("nonnegative", _none_negative, *stored))

    def sparse_under(self, sr) -> Product:
        """The same operands' sparse product under ``sr`` (the ``spgemm`` strategies' first step), reading these
        compacted columns, found once."""
        sparse = Product(self.X, self.Y, sr, "sparse")
        sparse.columns = self.columns
        return sparse

    @cached_property
    def shared_products(self) -> int:
        """The products of an intersection of X and Y (every pair's shared columns): Σ over columns of X's
        entries in it times Y's."""
        xi, yi, ncols = self.columns
        return _pairwise.shared_products(xi, int(self.X.indptr[-1]), yi, int(self.Y.indptr[-1]), ncols)

    @cached_property
    def scatter_workers(self) -> int:
        """The union scatter's workers whose scratch fits the budget (at most two a thread; may be 0)."""
        per_worker = UNION_SCRATCH_BYTES_PER_COLUMN * max(_pairwise.compacted_width(self.X, self.Y), 1)
        workers = min(self.m, 2 * numba.get_num_threads())
        return workers if self.budget is None else min(workers, self.budget // per_worker)

    @property
    def mean_row(self) -> float:
        return (self.X.indptr[-1] + self.Y.indptr[-1]) / max(1, self.m + self.p)


def _none_negative(*values) -> bool:
    return not any(bool((v < 0).any()) for v in values)


def _always(product: Product) -> bool:
    return True


def _never(product: Product) -> bool:
    return False


def _free(product: Product) -> float:
    return 0.0


@dataclass(frozen=True)
class Strategy:
    """One way of computing a product.

    ``result`` and ``semantics`` (None: either) say which products it is for; ``runs``: whether it can compute
    this one; ``pays``: whether ``auto`` may take it (its measured rule); ``cost``: its work, against the other
    entries that pay, in the unit its entry states (0: none modelled, the table's order ranks it); ``run(product,
    out_dtype, expansion)``: the result; ``setting``: the setting whose value ``forced_by`` (default: its
    ``name``) forces it; ``expands``:
    it writes a one-term measure's expansion as it writes each entry (``product_expanded``).
    """

    name: str
    result: str
    semantics: str | None
    run: Callable[..., Any]
    runs: Callable[[Product], bool] = _always
    pays: Callable[[Product], bool] = _always
    cost: Callable[[Product], float] = _free
    setting: settings.Setting | None = None
    forced_by: tuple[str, ...] = ()
    expands: bool = False

    def forced(self, value: str) -> bool:
        """Whether ``value`` of its setting forces it: the values ``forced_by`` lists, else its own name."""
        return value in (self.forced_by or (self.name,))


# --------------------------------------------------------------------------- how the entries run


def _dense_path(product: Product, out_dtype, expansion=None) -> np.ndarray:
    return _dense.product(product.X, product.Y, product.sr, out_dtype)


def _blas(product: Product, out_dtype, expansion=None):
    """BLAS's product; with a measure's ``expansion`` of a float32 result of float32 rows, the product in float32
    written expanded, the entries it cannot give to ``dense.FLOAT32_TOLERANCE`` recomputed from the rows in
    float64 (``dense.float32_blocks``; the kernel: ``float32_product_kernel``).  None where the expansion
    is better applied apart (a float64 result, or the product itself), or where more entries than their room
    (``FLAGGED_SHARE``) need recomputing: ``product_expanded`` then multiplies in float64."""
    X, Y, sr = product.X, product.Y, product.sr
    if expansion is None:
        return _dense.product(X, Y, sr, out_dtype)
    if not _dense.multiplies_in_float32(X, Y, out_dtype, expansion[0]):
        return None
    xd, yd, xa, ya, gamma, floor = _dense.float32_blocks(X, Y)
    kernels, operands, out = _written(product, out_dtype, expansion)
    xn, yn, n, eparams, flagged = operands
    room = max(1024, product.m * product.p // (FLAGGED_SHARE * flagged.shape[0]))
    uncertain = np.zeros((flagged.shape[0], 1 + 2 * room), np.int64)
    threads, tolerance, tile = numba.get_num_threads(), _dense.FLOAT32_TOLERANCE, _dense.FLOAT32_TILE
    mirror = Y is X and np.array_equal(xn, yn, equal_nan=True) and _symmetric(expansion)  # a row term may be NaN
    with _dense.one_blas_thread():
        kernels.float32_product_kernel(
            xd, yd, xa, ya, gamma, floor, tolerance, tile, threads, mirror, *operands, uncertain, out
        )
    if _pairwise.with_flagged(out, flagged) is None or _pairwise.with_flagged(out, uncertain) is None:
        return None
    listed, redo = _pairwise.flagged_entries(flagged), _pairwise.flagged_entries(uncertain)
    if len(redo.rows):
        with _calling_thread_for(len(redo.rows) * X.shape[1]):
            exact = _masked(Product(X, Y, sr, "masked", redo), np.float64)
            refine = np.zeros(len(redo.rows), np.bool_)
            kernels.expand_at_kernel(redo.rows, redo.cols, exact, xn, yn, n, eparams, out, refine)
        if listed is not None and refine.any():
            rows = np.concatenate([listed.rows, redo.rows[refine]])
            cols = np.concatenate([listed.cols, redo.cols[refine]])
            order = np.lexsort((cols, rows))
            listed = Entries(rows[order], cols[order])
    return out, listed


_SWAPPED = {
    name: _expr.Node("var", (other,))
    for name, other in (("nx0", "ny0"), ("ny0", "nx0"), ("nx1", "ny1"), ("ny1", "nx1"))
}


def _symmetric(expansion) -> bool:
    """Whether a measure's expansion and its refinement test give an entry (i, j) of X against itself what they
    give (j, i): each tree the same with the two rows' norms swapped, up to the order of commutative operations
    (exact in floating point: ``expr.canonical``, and ``and``/``or`` in any order).  Cosine, correlation,
    euclidean are; a measure whose expansion weighs its two rows differently is not."""
    tree, when = expansion[0], expansion[-1]
    return all(t is None or _commuted(_expr.substitute(t, _SWAPPED)) == _commuted(t) for t in (tree, when))


def _commuted(node):
    """``expr.canonical``'s tree with the operands of each chain of ``and`` or ``or`` in a fixed order too: the
    same truth value for the pure tests of an expansion (not for recognising an op, nor to be run)."""

    def walk(n):
        args = tuple(walk(a) if isinstance(a, _expr.Node) else a for a in n.args)
        if n.kind in ("and", "or"):  # a chain of them flattened, its operands sorted (compared, never run)
            flat = (b for a in args for b in (a.args if a.kind == n.kind else (a,)))
            args = tuple(sorted(flat, key=repr))
        return _expr.Node(n.kind, args)

    return walk(_expr.canonical(node))


@contextmanager
def _calling_thread_for(work: int):
    """numba's threads held to the calling one for a pass of less ``work`` than ``CALLING_THREAD_WORK``: waking
    the others costs more than they save there, on a loaded machine many times more."""
    if work >= CALLING_THREAD_WORK:
        yield
        return
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _written(product: Product, out_dtype, expansion):
    """``(kernels, expansion operands, out)`` of a kernel writing the dense result, expanded where asked: into
    ``product.out`` where given (an expanded result only: a product unexpanded is a float64 temporary)."""
    sr, m, p = product.sr, product.m, product.p
    chunks = 8 * numba.get_num_threads()  # the kernels' chunks at most
    if expansion is None:
        xn, yn, n, eparams, key = np.zeros((2, m)), np.zeros((2, p)), 0.0, np.zeros(0), None
        flagged = np.zeros((chunks, 1), np.int64)
    else:
        tree, names, eparams, xnorms, ynorms, n, when = expansion
        xn, yn, n = _pairwise.norm_rows(xnorms, m), _pairwise.norm_rows(ynorms, p), float(n)
        key = (tree, tuple(names), when)
        room = 0 if when is None else max(1024, m * p // (FLAGGED_SHARE * chunks))
        flagged = np.zeros((chunks, 1 + 2 * room), np.int64)
    kernels = _pairwise._semiring_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names, key)
    operands = (xn, yn, n, np.asarray(eparams, np.float64), flagged)
    given = product.out if expansion is not None else None
    return kernels, operands, np.empty((m, p), dtype=out_dtype) if given is None else given


def _finished(out, operands, expansion):
    """The product, or (its expansion, the flagged entries); None where they overflowed their room."""
    return out if expansion is None else _pairwise.with_flagged(out, operands[-1])


def _rows(product: Product, out_dtype, expansion=None):
    X, sr = product.X, product.sr
    kernels, operands, out = _written(product, out_dtype, expansion)
    upper = expansion is None and product.upper  # half the products
    index, threads = (*product.row_index, product.row_positions), numba.get_num_threads()
    kernels.row_kernel(X.indptr, X.data, *index, threads, upper, sr.start(X.shape[1]), sr.params, *operands, out)
    if upper:
        _pairwise.mirror_upper(out, out.size >= _pairwise.ROW_INDEX_PARALLEL_ENTRIES)
    return _finished(out, operands, expansion)


@cache
def _commutes(tree) -> bool:
    """Whether the op gives the same value with its operands exchanged: its tree with ``x`` and ``y`` swapped has
    the same canonical form (``expr.canonical`` orders only the operands of ops exact in either order)."""
    x, y = _expr.Node("var", ("x",)), _expr.Node("var", ("y",))
    return _expr.canonical(_expr.substitute(tree, {"x": y, "y": x})) == _expr.canonical(tree)


def _inverted(product: Product, out_dtype, expansion=None):
    X, Y, sr = product.X, product.Y, product.sr
    (xi, yi, ncols), (kernels, operands, out) = product.columns, _written(product, out_dtype, expansion)
    args = (X.indptr, xi, X.data, Y.indptr, yi, Y.data, ncols, numba.get_num_threads())
    kernels.inverted_kernel(*args, sr.start(X.shape[1]), sr.params, *operands, out)
    return _finished(out, operands, expansion)


def _spgemm(product: Product, out_dtype, expansion=None):
    """The sparse result (``product_sparse``'s plan, sharing this product's compacted columns), written dense:
    its entries' values, the semiring's start elsewhere.  The same sums in the same column order as the row and
    inverted kernels, so the same bits."""
    indptr, indices, data = plan(product.sparse_under(product.sr)).run(out_dtype)
    out = np.empty((product.m, product.p), out_dtype)
    start = np.dtype(out_dtype).type(product.sr.start(product.X.shape[1]))
    _pairwise.densify_rows(indptr, indices, data, start, out)
    return out


def _margins(product: Product, out_dtype, expansion=None):
    X, Y, sr = product.X, product.Y, product.sr
    (xi, yi, ncols), (kernels, operands, out) = product.columns, _written(product, out_dtype, expansion)
    xmax = int(np.diff(X.indptr).max(initial=0))
    args = (X.indptr, xi, X.data, Y.indptr, yi, Y.data, ncols, numba.get_num_threads(), xmax)
    kernels.margins_kernel(*args, sr.start(X.shape[1]), sr.params, *operands, out)
    return _finished(out, operands, expansion)


def _margins_spgemm(product: Product, out_dtype, expansion=None):
    """The margins kernel's result with its intersection term from the sparse kernels (``product_sparse`` of the
    split's cross semiring, as the ``spgemm`` entry's), for many products an entry."""
    X, Y = product.X, product.Y
    ip, ic, iv = plan(product.sparse_under(product.margin_split.cross)).run(np.float64)
    (xi, yi, _), (kernels, operands, out) = product.columns, _written(product, out_dtype, expansion)
    xmax = int(np.diff(X.indptr).max(initial=0))
    args = (ip, ic, iv, X.indptr, xi, X.data, Y.indptr, yi, Y.data, xmax)
    kernels.margins_from_cross(*args, product.sr.start(X.shape[1]), product.sr.params, *operands, out)
    return _finished(out, operands, expansion)


def _merge(product: Product, out_dtype, expansion=None):
    X, Y, sr = product.X, product.Y, product.sr
    kernels, _, out = _written(product, out_dtype, None)
    kernels.merge_kernel(X.indptr, X.indices, X.data, Y.indptr, Y.indices, Y.data, sr.start(X.shape[1]), sr.params, out)
    return out


def _scatter(product: Product, out_dtype, expansion=None):
    X, Y, sr = product.X, product.Y, product.sr
    (xi, yi, ncols), (kernels, _, out) = product.columns, _written(product, out_dtype, None)
    workers = max(1, product.scatter_workers)  # forced: even past the budget (tests of the path)
    args = (X.indptr, xi, X.data, Y.indptr, yi, Y.data, ncols, workers)
    kernels.dense_kernel(*args, sr.start(X.shape[1]), sr.params, out)
    return out


def _extremum(product: Product, out_dtype, expansion=None):
    X, Y, sr = product.X, product.Y, product.sr
    (xi, yi, ncols), (kernels, _, out) = product.columns, _written(product, out_dtype, None)
    args = (X.indptr, xi, X.data, Y.indptr, yi, Y.data, ncols, numba.get_num_threads(), sr.add.kind == "max")
    kernels.extremum_kernel(*args, sr.start(X.shape[1]), sr.params, out)
    return out


def _extremum_runs(product: Product) -> bool:
    """A max- or min-monoid union whose op cannot give NaN on finite operands, over finite values: then no term
    can make the result depend on the order the terms are taken in, and the kernel may take them in its own."""
    sr = product.sr
    return (
        sr.add.kind in ("max", "min")
        and _finite_op(sr.mult.tree, tuple(sr.mult.params))
        and _dense.all_finite(product.X, product.Y)
    )


@cache
def _finite_op(tree, params) -> bool:
    bound = _expr.substitute(tree, {name: _semantics.number(value) for name, value in params})
    return _semantics.value_range(bound).finite


def _constant(product: Product, out_dtype, expansion=None):
    return np.full((product.m, product.p), product.sr.start(product.X.shape[1]), dtype=out_dtype)


def _nothing_stored(product: Product) -> bool:
    """No pair has a stored column to combine: an intersection with a side holding no entries, or a union with
    neither side holding any; each entry is then the accumulator's start (``Semiring.start``)."""
    stored = int(product.X.indptr[-1]), int(product.Y.indptr[-1])
    return 0 in stored if product.semantics == "intersection" else stored == (0, 0)


def _masked(product: Product, out_dtype, expansion=None):
    X, Y, sr = product.X, product.Y, product.sr
    kernels = _pairwise._semiring_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names)
    rows, cols = product.mask
    out = np.empty(len(rows), dtype=out_dtype)
    if out.size:
        args = (X.indptr, X.indices, X.data, Y.indptr, Y.indices, Y.data)
        xmax = int(np.diff(X.indptr).max(initial=0))
        kernels.masked_kernel(*args, rows, cols, xmax, numba.get_num_threads(), sr.start(X.shape[1]), sr.params, out)
    return out


def _sparse_by_rows(accumulator: str):
    def run(product: Product, out_dtype, expansion=None):
        return _pairwise.sparse_by_rows(product.X, product.Y, product.sr, out_dtype, accumulator)

    return run


def _sparse_by_columns(product: Product, out_dtype, expansion=None):
    return _pairwise.sparse_by_columns(product.X, product.Y, product.sr, out_dtype)


def _dense_runs(product: Product) -> bool:
    return _dense.runs(product.X, product.Y, product.sr)


def _dense_pays(product: Product) -> bool:
    return _dense.pays(product.sr)


def _scatter_pays(product: Product) -> bool:
    return product.scatter_workers >= 1 and product.mean_row < MERGE_MIN_MEAN_ROW


# --------------------------------------------------------------------------- the table

_DENSE, _INTERSECTION, _UNION, _SPARSE = (
    settings.CPU_DENSE,
    settings.CPU_INTERSECTION,
    settings.CPU_UNION,
    settings.CPU_SPARSE,
)


def _products(product: Product) -> float:
    # counted from the columns' entries, not by the row index's count (its pass over Y is the row kernel's own
    # first step, a quarter of a scRNA-like call where another entry is taken); X against itself written
    # unexpanded, the row kernel forms the entries j >= i only (``upper``): half of them (TF-IDF rows of
    # docstrings against themselves, 33 products an entry: 2.3 ms where the sparse kernels took 3.3)
    return product.shared_products / 2 if product.upper and not product.expanded else product.shared_products


def _result_entries(product: Product) -> float:
    return _pairwise.ROWS_MAX_PRODUCTS * product.m * product.p


def _spgemm_entries(product: Product) -> float:
    return _pairwise.SPGEMM_ENTRY_PRODUCTS * product.m * product.p


def _spgemm_fits(product: Product) -> bool:
    """Its CSR and product beside the result within the scratch budget (none set: a direct engine call)."""
    return product.budget is None or _pairwise.SPGEMM_ENTRY_BYTES * product.m * product.p <= product.budget


def _margins_spgemm_pays(product: Product) -> bool:
    """The cross term's products (those of the shared columns) above ``SPGEMM_ENTRY_PRODUCTS`` an entry, and
    its CSR within the scratch budget."""
    return product.shared_products > _spgemm_entries(product) and _spgemm_fits(product)


def _margins_run(product: Product) -> bool:
    return product.margin_split is not None


STRATEGIES: tuple[Strategy, ...] = (
    # Nothing stored to combine: the start everywhere, no kernel compiled or run (a custom semiring's kernels
    # take seconds to compile; a block of empty rows needs none).
    Strategy("constant", "dense", None, _constant, runs=_nothing_stored),
    # Dense blocks (``dense``): taken wherever the call's densities say they pay (the measured crossover), so
    # first, at no cost.
    Strategy(
        "blas",
        "dense",
        "intersection",
        _blas,
        _dense_runs,
        _dense_pays,
        setting=_DENSE,
        forced_by=("always",),
        expands=True,
    ),
    Strategy("tiled", "dense", "union", _dense_path, _dense_runs, _dense_pays, setting=_DENSE, forced_by=("always",)),
    # Intersections, each by what it costs beyond the others: the row kernel its products (walks of Y's rows by
    # column, scattered), the sparse kernels written dense their result's entries, a result entry weighing
    # SPGEMM_ENTRY_PRODUCTS products, the inverted kernel (where the sparse result does not fit) one weighing
    # ROWS_MAX_PRODUCTS (``pairwise``: measured on the four datasets' shapes and uniform rows); the row kernel on
    # a tie.
    Strategy("rows", "dense", "intersection", _rows, cost=_products, setting=_INTERSECTION, expands=True),
    Strategy(
        "spgemm", "dense", "intersection", _spgemm, pays=_spgemm_fits, cost=_spgemm_entries, setting=_INTERSECTION
    ),
    Strategy("inverted", "dense", "intersection", _inverted, cost=_result_entries, setting=_INTERSECTION, expands=True),
    # Unions: margins wherever the split holds (its shared columns are at most every column a merge or a
    # scatter walks, from a cache-resident tile); else scatter on short rows where a worker's scratch fits, else
    # merge.
    # (the intersection term from the sparse kernels where products are many an entry, as ``spgemm``)
    Strategy(
        "margins-spgemm",
        "dense",
        "union",
        _margins_spgemm,
        runs=_margins_run,
        pays=_margins_spgemm_pays,
        setting=_UNION,
        expands=True,
    ),
    Strategy("margins", "dense", "union", _margins, runs=_margins_run, setting=_UNION, expands=True),
    # Max- and min-monoid unions (chebyshev): the intersection from Y's postings, each side's best margin the
    # other lacks found in a look or two, instead of a merge of both rows for every pair.
    Strategy("extremum", "dense", "union", _extremum, runs=_extremum_runs, setting=_UNION),
    Strategy("scatter", "dense", "union", _scatter, pays=_scatter_pays, setting=_UNION),
    Strategy("merge", "dense", "union", _merge, setting=_UNION),
    # Masked products: each mask entry merges its two rows.
    Strategy("masked", "masked", None, _masked),
    # Sparse results (``mxm``): down the longer side, so that the accumulator spans the shorter (its length the
    # cost); "hash" and "dense" (down X's rows, every row with that accumulator) only when forced.
    Strategy("columns", "sparse", "intersection", _sparse_by_columns, cost=lambda pr: pr.m, setting=_SPARSE),
    Strategy("rows", "sparse", "intersection", _sparse_by_rows("auto"), cost=lambda pr: pr.p, setting=_SPARSE),
    Strategy("hash", "sparse", "intersection", _sparse_by_rows("hash"), pays=_never, setting=_SPARSE),
    Strategy("dense", "sparse", "intersection", _sparse_by_rows("dense"), pays=_never, setting=_SPARSE),
)


# --------------------------------------------------------------------------- the choice


@dataclass(frozen=True)
class Plan:
    """A strategy chosen for a product: ``run`` executes it as is."""

    strategy: Strategy
    product: Product

    def run(self, out_dtype, expansion=None):
        return self.strategy.run(self.product, out_dtype, expansion)


def plan(product: Product) -> Plan:
    """The strategy of ``STRATEGIES`` that computes ``product`` (see the module docstring)."""
    entries = [s for s in STRATEGIES if s.result == product.result and s.semantics in (None, product.semantics)]
    value = {s.setting: s.setting.read() for s in entries if s.setting is not None}  # each read once
    groups: dict = {}  # the entries of one setting (an entry without one: alone), in the table's order
    for s in entries:
        groups.setdefault(s.setting or s.name, []).append(s)
    for group in groups.values():
        chosen = _choice(group, value.get(group[0].setting, "auto"), product)
        if chosen is not None:
            return Plan(chosen, product)
    raise ValueError(f"no CPU strategy computes this {product.semantics} product ({product.result} result)")


def _choice(group: list[Strategy], value: str, product: Product) -> Strategy | None:
    """The entry of one setting's group that runs, or None: the one ``value`` forces where it runs; else (auto,
    or a forced entry that cannot run here) the cheapest that runs and pays; none where ``value`` names no entry
    ("never")."""
    if value != "auto":
        named = [s for s in group if s.forced(value)]
        for s in named:
            if s.runs(product):
                return s
        if not named:
            return None
    candidates = [s for s in group if s.runs(product) and s.pays(product)]
    return min(candidates, key=lambda s: s.cost(product)) if candidates else None


# --------------------------------------------------------------------------- the engine's products


def product(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype, mask: Entries | None = None) -> np.ndarray:
    """``C[i, j] = ⊕_k X[i,k] ⊗ Y[j,k]`` over the columns ``sr.semantics`` selects: a dense ``(m, p)`` array, or
    with ``mask`` the values at its entries ``(mask.rows[s], mask.cols[s])``, in its order.  Inputs are
    canonical CSR of one index type (checked by ``semiring.validation``, ``engine``)."""
    if mask is None and 0 in (X.shape[0], Y.shape[0]):
        return np.empty((X.shape[0], Y.shape[0]), dtype=out_dtype)
    return plan(Product(X, Y, sr, "dense" if mask is None else "masked", mask)).run(out_dtype)


def product_expanded(
    X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype, expansion, out: np.ndarray | None = None
) -> tuple[np.ndarray, Entries | None]:
    """A one-term measure ``f(c0, 0, nx*[i], ny*[j], n)`` of the product ``c0``: ``(result, entries where its
    refinement test holds, or None where it has none)``, as ``semiring.interfaces.PairwiseEngine.pairwise_expanded``.

    Planned once: where the strategy ``expands`` and the result has ``EXPANDED_MIN_ENTRIES``, its kernel writes
    each entry expanded (no float64 ``m × p`` temporary, no second pass) and lists the flagged entries; else, or
    where those overflow their room (``FLAGGED_SHARE``), the plan writes the product and the expansion and the
    selection follow apart (``elementwise``), as a measure does after ``pairwise``: in row slabs of X where the
    float64 product would pass the scratch budget (a float32 block that is the whole result, sized by the float32
    path's own temporaries: ``expanded_bytes_per_entry``), each slab's product expanded into the result.

    ``expansion``: ``(tree, param_names, params, xnorms, ynorms, ncols, when)`` as ``elementwise.expand`` takes them,
    ``when`` None or the refinement test (without parameters).  ``out``: the array the result is written into
    (``semiring.interfaces.RESULT_BLOCK``: a view of the call's result), on every path; None: a new one.
    """
    m, p = X.shape[0], Y.shape[0]
    if out is not None and (out.shape != (m, p) or out.dtype != np.dtype(out_dtype)):
        raise ValueError(
            f"internal error: a block of {(m, p)} {np.dtype(out_dtype)} asked into {out.shape} {out.dtype}"
        )
    if 0 in (m, p):
        return (np.empty((m, p), dtype=out_dtype) if out is None else out), None
    expanded = m * p >= EXPANDED_MIN_ENTRIES
    chosen = plan(Product(X, Y, sr, "dense", expanded=expanded, out=out))
    if chosen.strategy.expands and expanded:
        done = chosen.run(out_dtype, expansion)
        if done is not None:
            return done
    step = _apart_rows(m, p)
    if step >= m:
        return _expanded_apart(chosen.run(np.float64), expansion, out_dtype, out)
    # The float64 product would pass the scratch budget: row slabs of it, each expanded into the result.
    tree, names, params, xnorms, ynorms, ncols, when = expansion
    out, found = np.empty((m, p), out_dtype) if out is None else out, []
    for r0 in range(0, m, step):
        r1 = min(m, r0 + step)
        rows = validation.row_slice(X, r0, r1)
        c = plan(Product(rows, Y, sr, "dense")).run(np.float64)
        part = (tree, names, params, [x[r0:r1] for x in xnorms], ynorms, ncols, when)
        _, flagged = _expanded_apart(c, part, out_dtype, out[r0:r1])
        if flagged is not None:
            found.append(Entries(flagged.rows + r0, flagged.cols))
        del c
    if when is None:
        return out, None
    return out, Entries(np.concatenate([f.rows for f in found]), np.concatenate([f.cols for f in found]))


def _apart_rows(m: int, p: int) -> int:
    """Rows of X a slab of a product written apart (float64, ``m × p``): all of them, unless the product would
    pass the scratch budget (``SCRATCH_BUDGET``), then as many as fit it, at least one."""
    budget = SCRATCH_BUDGET.get()
    if budget is None or m * p * 8 <= budget:
        return m
    return max(1, budget // (8 * p))


def _expanded_apart(c, expansion, out_dtype, out=None):
    """(the expansion of the float64 product ``c``, in ``out`` or a new array of ``out_dtype``, or in c itself
    where it is of that type; the entries its refinement test flags, or None where it has none)."""
    tree, names, params, xnorms, ynorms, ncols, when = expansion
    flagged = None if when is None else _elementwise.select(when, (), params, [c], xnorms, ynorms, ncols, c.shape)
    if out is None:
        out = c if c.dtype == out_dtype else np.empty(c.shape, out_dtype)
    return _elementwise.expand(tree, names, params, [c], xnorms, ynorms, ncols, out), flagged


def expanded_bytes_per_entry(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype, tree) -> int | None:
    """``PairwiseEngine.expanded_bytes_per_entry``: ``FLOAT32_EXTRA_BYTES`` where the block of X against Y takes the
    float32 BLAS path (a dense ``plus_times`` of float32 rows, a float32 result, an expansion that is not the
    product itself: ``dense.multiplies_in_float32``; ``EXPANDED_MIN_ENTRIES`` or more), whose kernel writes it
    expanded, in the result's type.  Where that kernel falls back (more entries to recompute than its lists
    hold), the float64 product is made in row slabs within the scratch budget (``product_expanded``).  None on
    every other path, smaller blocks among them (a float64 product expanded apart): the measure's count."""
    if X.shape[0] * Y.shape[0] < EXPANDED_MIN_ENTRIES:
        return None
    if not (_dense.applies(X, Y, sr) and _dense.multiplies_in_float32(X, Y, out_dtype, tree)):
        return None
    return FLOAT32_EXTRA_BYTES


def product_sparse(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of the product at the pairs sharing a stored column only (GraphBLAS ``mxm``),
    an intersection semiring's; indices int32 where they fit (SciPy's rule), sorted within each row."""
    if sr.is_union:
        raise ValueError(f"a sparse result needs an intersection semiring; {sr.name!r} is a union")
    return plan(Product(X, Y, sr, "sparse")).run(out_dtype)
