"""A distance measure bound to an engine: its rows prepared on the device, and one block computed there.

``pairwise_distances`` and ``NearestNeighbors`` hand these two steps to the
blocked driver (``semiring.tiling``); what a measure *is* (semiring terms, row
norms, expansion) is the spec's business (``semiring.distances.specs``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from semiring import arrays, validation
from semiring import backend as _backend
from semiring.expr import Node, substitute
from semiring.interfaces import EXPANSION_VARIABLES, Entries, Expansion, PairwiseEngine
from semiring.ops import Semiring

from .specs import NORMS, Distance, expression


def scale_columns(A, scale: np.ndarray | None):
    """A with column k multiplied by ``scale[k]`` (SciPy's ``w``, seuclidean's ``V``); A untouched.

    SciPy or ``cupyx.scipy.sparse`` CSR alike, computed where A lives.
    """
    if scale is None:
        return A
    xp = arrays.array_module(A)
    nnz = validation.stored_entries(A)
    scale, data = xp.asarray(scale), xp.empty(nnz, A.dtype)
    for e0, e1 in validation.entry_chunks(nnz):
        data[e0:e1] = A.data[e0:e1] * scale[A.indices[e0:e1]]
    return with_values(A, data, nnz, None)  # scaled values: nothing of A's holds of them


def prepare(A, how: str):
    """The rows as a measure reads them; a new matrix sharing A's index arrays, A untouched.

    SciPy or ``cupyx.scipy.sparse`` CSR alike: the arithmetic runs where A lives.
    """
    if how == "none":
        return A
    nnz = validation.stored_entries(A)
    values = A.data[:nnz]
    if how == "binary":
        data = (values != 0).astype(A.dtype)
    elif how in ("l1", "sqrt_l1"):  # by the engine of the device holding them, host rows by the CPU engine's
        engine = _backend.engine_of(values) if arrays.backend_of(values) else _backend.engine("cpu")
        data = engine.row_shares(A.indptr, values, root=how == "sqrt_l1")
    else:
        raise ValueError(f"unknown row preparation {how!r}")
    # What validation proved of A gives its rows' facts: 0s and 1s, or shares of non-negative values in their
    # row's sum (within [0, 1]; 0 where it is 0) and their square roots, are finite and non-negative.
    proved = validation.facts_of(A) is not None and (how == "binary" or validation.proved(A, "nonnegative"))
    return with_values(A, data, nnz, validation.Facts(finite=True, nonnegative=True, stored=nnz) if proved else None)


def with_values(A, data, nnz: int, facts):
    """A's first ``nnz`` stored entries with the values ``data`` instead, carrying ``facts`` (of the new values;
    None: nothing proved): a shallow copy of A's object sharing its index arrays, A untouched
    (``cupyx.scipy.sparse``'s constructor took 72 µs a matrix on an H200, twice a call)."""
    B = copy.copy(A)
    B.data, B.indices, B.facts = data, A.indices[:nnz], facts
    return B


# A row-scale-free measure's squares and products stay in the accumulation type's normal range, with room for
# sums of 2^32 terms, while every stored magnitude lies within 2^±(maxexp − 32)/2: 2^±496 (about 1e±149) in
# float64, 2^±48 (about 1e±14) in float32 (the GPU's accumulation for float32 results).  Cosine and correlation of
# rows at 1e160 were NaN (SciPy's too), and at 1e-200 NaN (0/0).
ROW_RANGE_TERMS_BITS = 32


def rows_in_range(A, acc):
    """A, or where a stored magnitude lies beyond that range for sums in ``acc`` (see above) a copy with each
    row scaled by a power of two (exact) to its largest magnitude in [0.5, 1), for a measure unchanged by a
    row's positive scale (``Distance.row_scale_free``); a value below 2^-1021 of its row's largest then adds
    nothing to its sums, as beside it in float64 anyway.  The rare copy is made on the host (NumPy's reduceat
    finds each row's largest)."""
    xp = arrays.array_module(A)
    nnz = validation.stored_entries(A)
    if nnz == 0:
        return A

    facts = validation.facts_of(A)
    if facts is not None and facts.magnitudes is not None:  # found by the check's one pass, or asked before
        if magnitudes_in_range(*facts.magnitudes, acc):
            return A
        found = validation.stored_magnitudes(A)  # a part's facts hold its whole's bounds, maybe wider than its own
    else:
        found = validation.magnitudes_of(A)  # kept in A's facts: a fitted index's rows, found at fit
    if magnitudes_in_range(*found, acc):
        return A
    indptr, indices = arrays.on_host(A.indptr), arrays.on_host(A.indices[:nnz])
    data = arrays.on_host(A.data[:nnz])
    counts = np.diff(indptr)
    stored = counts > 0
    largest = np.zeros(A.shape[0], data.dtype)
    largest[stored] = np.maximum.reduceat(np.abs(data), indptr[:-1][stored])
    data = np.ldexp(data, -np.repeat(np.frexp(largest)[1], counts)).astype(A.dtype, copy=False)
    return arrays.csr_matrix_class(xp)((xp.asarray(data), xp.asarray(indices), xp.asarray(indptr)), shape=A.shape)


def magnitudes_in_range(low: float, high: float, acc) -> bool:
    """Whether stored magnitudes within ``[low, high]`` (the smallest nonzero, the largest) keep a row-scale-free
    measure's squares and products in ``acc``'s normal range (see ``ROW_RANGE_TERMS_BITS``)."""
    exponent = (np.finfo(acc).maxexp - ROW_RANGE_TERMS_BITS) // 2
    return 2.0**-exponent <= low and high <= 2.0**exponent or high == 0


@dataclass
class Rows:
    """Rows as a measure reads them, on the engine's device, with the row norms it needs; ``span``: the rows of
    the call's X they are, where they are a batch of it (the driver's tile against the same rows of Y, X's own,
    is then these rows against themselves)."""

    matrix: Any
    norms: list
    span: tuple[int, int] | None = None

    def slice(self, engine: PairwiseEngine, r0: int, r1: int) -> Rows:
        if (r0, r1) == (0, self.matrix.shape[0]):
            return self
        return Rows(engine.row_slice(self.matrix, r0, r1), [norm[r0:r1] for norm in self.norms])


class BoundMeasure:
    """One measure with its parameter values, on one engine, for results of one type.

    >>> import numpy as np, scipy.sparse as sp
    >>> from semiring import backend
    >>> from semiring.distances.specs import resolve_metric
    >>> spec, values = resolve_metric("cityblock", {})
    >>> bound = BoundMeasure(backend.engine("cpu"), spec, values, np.float64)
    >>> X = bound.prepare(sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]])))
    >>> bound.block(X, X)
    array([[0., 3.],
           [3., 0.]])
    """

    def __init__(self, engine: PairwiseEngine, spec: Distance, values: dict, dtype, scale: np.ndarray | None = None):
        self.engine, self.spec, self.values, self.scale = engine, spec, values, scale
        self.dtype = np.dtype(dtype)
        self.acc = engine.accumulate_dtype(self.dtype)  # float64 on the CPU; the result's type on the GPU
        self.param_array = np.array(spec.param_values(values), dtype=np.float64)
        self.terms = [_bind(sr, values) for sr in spec.terms]

    @property
    def bytes_per_entry(self) -> int:
        """Temporaries per result entry: the terms, and the result when it has its own buffer (``block``)."""
        own_buffer = not (len(self.terms) == 1 and self.acc == self.dtype)
        return len(self.terms) * self.acc.itemsize + (self.dtype.itemsize if own_buffer else 0)

    def result_extra_bytes(self, X, Y) -> int | None:
        """Bytes an entry the engine takes beyond a block that is the whole result, for the checked rows X against
        Y (the call's whole inputs, within its ``call_density``), where its path states them
        (``PairwiseEngine.expanded_bytes_per_entry``: a one-term measure on rows it reads in their own type);
        None where it does not (``bytes_per_entry`` counts every tile then)."""
        if len(self.terms) != 1 or X.dtype != self.rows_dtype or Y.dtype != self.rows_dtype:
            return None  # prepare() gives the engine other rows than these (converted, scaled): no statement
        return self.engine.expanded_bytes_per_entry(X, Y, self.terms[0], self.dtype, self.spec.expansion_tree)

    def held_bytes(self, A) -> int:
        """Device bytes ``prepare(A)`` holds beyond A itself: new values where the rows are scaled or divided
        by their sums (jensenshannon's, hellinger's), and the norms."""
        copied = self.spec.prepare != "none" or self.scale is not None or A.dtype != self.rows_dtype
        values = A.nnz * self.rows_dtype.itemsize if copied else 0
        return values + len(self.spec.norms) * A.shape[0] * self.acc.itemsize

    @property
    def rows_dtype(self) -> np.dtype:
        """The type prepared rows are held in: the result's, or the accumulation's where the rows are divided
        or scaled (jensenshannon's and hellinger's L1 normalisation, ``w``): a float32 division there put errors
        of 1e-7 into near-identical rows, 0.4 % of a hellinger distance of 1.5e-6 (float64 on the CPU engine,
        the result's type on the GPU, whose accumulation is the result's)."""
        if self.spec.prepare in ("l1", "sqrt_l1") or self.scale is not None:
            return np.result_type(self.dtype, self.acc)
        return self.dtype

    def prepare(self, A) -> Rows:
        """A's rows on the engine's device as the measure reads them, with their norms.

        Rows of a narrower type than the result (float32 against float64) are widened first, so their scaling,
        normalisation and norms have the result's precision: a float64 result is float64-accurate."""
        if A.dtype != self.rows_dtype:
            A = validation.carry_facts(A.astype(self.rows_dtype), A)
        Ap = prepare(scale_columns(A, self.scale), self.spec.prepare)
        Ap = rows_in_range(Ap, self.acc) if self.spec.row_scale_free else Ap
        if self.finds_sign and validation.facts_of(Ap) is not None:  # kept there: no tile's product scans again
            validation.is_nonnegative(Ap)
        Ap = self.engine.to_device(Ap)
        if not self.spec.norms:
            return Rows(Ap, [])
        trees = [expression(NORMS[name], ("x",)) for name in self.spec.norms]
        return Rows(Ap, self.engine.row_norms(Ap, trees, self.acc, self.spec.row_term_trees))

    @property
    def finds_sign(self) -> bool:
        """Whether the rows' sign is found as they are prepared, where they carry what validation proved (the
        values it checked, not scaled or divided ones: ``validation.carry_facts``): a plus-monoid union term's
        product asks it (its margin split holds on some signs only)."""
        return any(sr.is_union and sr.add.kind == "plus" for sr in self.terms)

    def dense_block_bytes(self, X, Y, tile: tuple[int, int]) -> int:
        """The most the engine's dense path densifies for one tile of checked X rows against Y rows (one term
        at a time), beyond the tile's own temporaries: what ``working_memory`` does not bound."""
        return max(self.engine.dense_block_bytes(X, Y, sr, self.acc, *tile) for sr in self.terms)

    def block(self, X: Rows, Y: Rows):
        """The measure for the rows of X against all of Y, an ``m × p`` array on the engine's device."""
        engine, spec = self.engine, self.spec
        (m, n), p = X.matrix.shape, Y.matrix.shape[0]
        if len(self.terms) == 1:  # the engine's product and expansion, planned once (in one pass where it can)
            when = None if spec.refine is None else expression(spec.refine.when, EXPANSION_VARIABLES)
            expansion = (spec.expansion_tree, tuple(spec.param_names), self.param_array, X.norms, Y.norms, n, when)
            out, flagged = engine.pairwise_expanded(X.matrix, Y.matrix, self.terms[0], self.dtype, expansion)
            if flagged is not None and len(flagged.rows):
                self._refine(X.matrix, Y.matrix, flagged, out)
            return out
        terms = [engine.pairwise(X.matrix, Y.matrix, sr, self.acc) for sr in self.terms]
        flagged = None
        if spec.refine is not None and m and p:
            when = expression(spec.refine.when, EXPANSION_VARIABLES)
            flagged = engine.select(when, (), self.param_array, terms, X.norms, Y.norms, n, (m, p))
        # One term already in the result's type: expand in place, no second m×p buffer.
        out = terms[0] if (len(terms) == 1 and self.acc == self.dtype) else engine.empty((m, p), self.dtype)
        engine.expand(spec.expansion_tree, spec.param_names, self.param_array, terms, X.norms, Y.norms, n, out)
        if flagged is not None and len(flagged.rows):
            self._refine(X.matrix, Y.matrix, flagged, out)
        return out

    def candidates(self, X: Rows, Y: Rows):
        """The block for a top-k selection: an :class:`~semiring.interfaces.Expansion` the engine computes as it
        selects, where it can and no entry needs recomputing (``refine``), else the block itself."""
        engine, spec = self.engine, self.spec
        if not engine.expands_in_topk or spec.refine is not None:
            return self.block(X, Y)
        terms = [engine.pairwise(X.matrix, Y.matrix, sr, self.acc) for sr in self.terms]
        return Expansion(
            spec.expansion_tree, spec.param_names, self.param_array, terms, X.norms, Y.norms, X.matrix.shape[1]
        )

    def at(self, X: Rows, Y: Rows, entries: Entries):
        """The measure at ``entries`` only (rows of X against rows of Y): a 1-D device array in their order.

        The engine's expansion reads the terms at (i, j), X's norms at i and Y's at j.  Laid out as one
        ``1 × s`` row, the entries' terms and Y's norms (gathered) line up, and X's norms (gathered) take the
        term slots the measure leaves free.  A measure with more operands than that (correlation: one term,
        two norms each side) is expanded one row of entries at a time, its X norms then being one row's.
        """
        engine, spec = self.engine, self.spec
        if len(spec.terms) + len(spec.norms) <= 2:
            return self._at(X, Y, entries, [norm[entries.rows] for norm in X.norms], gathered=True)
        out = engine.empty((len(entries.rows),), self.dtype)
        rows = engine.to_host(entries.rows)
        starts = np.flatnonzero(np.diff(rows, prepend=-1))  # entries come in row order (a CSR mask's)
        for a, b in zip(starts, [*starts[1:], rows.size]):
            i = int(rows[a])
            part = Entries(entries.rows[a:b], entries.cols[a:b])
            out[a:b] = self._at(X, Y, part, [norm[i : i + 1] for norm in X.norms], gathered=False)
        return out

    def _at(self, X: Rows, Y: Rows, entries: Entries, xnorms: list, gathered: bool):
        """One ``1 × s`` expansion of the measure at ``entries`` (see ``at``)."""
        engine, spec = self.engine, self.spec
        s, n = len(entries.rows), X.matrix.shape[1]
        out = engine.empty((1, s), self.dtype)
        if s == 0:
            return out[0]
        terms = [engine.pairwise(X.matrix, Y.matrix, sr, self.acc, mask=entries)[None, :] for sr in self.terms]
        ynorms = [norm[entries.cols] for norm in Y.norms]
        rename = {}
        if gathered:
            rename = entry_layout(spec)
            terms, xnorms = terms + [norm[None, :] for norm in xnorms], []
        tree = substitute(spec.expansion_tree, rename)
        engine.expand(tree, spec.param_names, self.param_array, terms, xnorms, ynorms, n, out)
        if spec.refine is not None:
            when = substitute(expression(spec.refine.when, EXPANSION_VARIABLES), rename)
            flagged = engine.select(when, (), self.param_array, terms, xnorms, ynorms, n, (1, s))
            if len(flagged.cols):
                at = Entries(entries.rows[flagged.cols], entries.cols[flagged.cols])
                self._refine(X.matrix, Y.matrix, at, out, flagged)
        return out[0]

    def _refine(self, X, Y, flagged, out, where=None) -> None:
        """Recompute the flagged entries exactly (see ``Refinement``), written to ``out`` at ``where`` (default:
        the flagged entries themselves)."""
        engine, refine = self.engine, self.spec.refine
        if refine.exact is not None:
            engine.scatter(out, flagged if where is None else where, refine.exact(X, Y, flagged.rows, flagged.cols))
            return
        exact = engine.pairwise(X, Y, refine.semiring, self.acc, mask=flagged)
        tree = expression(refine.expansion, EXPANSION_VARIABLES)
        fixed = engine.empty((1, exact.size), self.acc)
        engine.expand(tree, (), np.zeros(0), [exact[None, :]], [], [], X.shape[1], fixed)
        engine.scatter(out, flagged if where is None else where, fixed[0])


def dense_rows_block(engine: PairwiseEngine, spec: Distance, values: dict, X, Y):
    """``pairwise_distances`` of dense rows kept dense, where the engine has that path for them
    (``PairwiseEngine.dense_expanded``: CuPy arrays on the GPU) and the measure is one ``plus_times`` term of the
    rows as given (cosine, euclidean, sqeuclidean, the inner product): the rows checked and normed in one pass,
    cuBLAS's product, the expansion written in place of it.  None where this path does not take the call (other
    inputs or measures, a row-scale-free measure's rows beyond its range, ``rows_in_range``'s rescaling): then
    ``check_pair`` converts the rows to CSR and the driver computes them so.  ``Y=None``: X against itself."""
    if not _dense_form(spec):
        return None
    pair = validation.dense_device_pair(X, Y)
    if pair is None:
        return None
    X, Y, dtype = pair
    acc = engine.accumulate_dtype(dtype)
    if acc != dtype:
        return None
    measure = BoundMeasure(engine, spec, values, dtype)
    refine, when = spec.refine, None
    if refine is not None:
        when = expression(refine.when, EXPANSION_VARIABLES)
        refine = (refine.semiring, expression(refine.expansion, EXPANSION_VARIABLES))
    expansion = (spec.expansion_tree, spec.param_names, measure.param_array, when)
    trees = [expression(NORMS[name], ("x",)) for name in spec.norms]
    symmetric = Y is X and spec.symmetric
    found = engine.dense_expanded(X, Y, trees, measure.terms[0], dtype, expansion, refine, symmetric)
    if found is None:
        return None
    # The rows' check is read once all of the call is queued, and before anything is returned: the device never
    # waits for the host in between, and a refused input's result is dropped unread.
    D, findings = found
    verdicts = engine.dense_verdicts(findings)
    for verdict, name in zip(verdicts, ("X", "Y")):
        validation.judge_dense(verdict, name)
    if spec.row_scale_free and not all(magnitudes_in_range(*v["magnitudes"], acc) for v in verdicts):
        return None  # rows to rescale first (rows_in_range): the CSR route's, this result dropped
    return D


def _dense_form(spec: Distance) -> bool:
    """One ``plus_times`` product of the rows as given, refined (if at all) by a semiring: the dense path's."""
    (sr, *more) = spec.terms
    return (
        not more
        and sr.add.kind == "plus"
        and sr.mult.kind == "times"
        and spec.prepare == "none"
        and not spec.nonnegative
        and spec.on_nonnegative is None
        and (spec.refine is None or spec.refine.exact is None)
        and not spec.row_terms  # its pass sums the norms in the kernel that checks the rows, and keeps them
    )


def entry_layout(spec: Distance) -> dict:
    """The renaming that lays a measure over one row of entries (``BoundMeasure.at``): X's norms, gathered per
    entry, read from the term slots after the measure's own terms (``nx0`` from ``c1`` for cosine)."""
    return {f"nx{k}": Node("var", (f"c{len(spec.terms) + k}",)) for k in range(len(spec.norms))}


def _bind(sr: Semiring, values: dict) -> Semiring:
    own = {k: v for k, v in values.items() if k in sr.mult.param_names}
    return sr.with_params(**own) if own else sr
