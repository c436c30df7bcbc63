"""A distance measure bound to an engine: its rows prepared on the device, and one block computed there.

``pairwise_distances`` and ``NearestNeighbors`` hand these two steps to the
blocked driver (``semiring.driver``); what a measure *is* (semiring terms, row
norms, expansion) is the spec's business (``semiring.distances.specs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from semiring import validation
from semiring.engine import EXPANSION_VARIABLES, PairwiseEngine
from semiring.ops import Semiring

from .specs import NORMS, Distance, expression


def prepare(A, how: str):
    """The rows as a measure reads them; a new matrix sharing A's index arrays, A untouched.

    SciPy or ``cupyx.scipy.sparse`` CSR alike: the arithmetic runs where A lives.
    """
    if how == "none":
        return A
    xp = validation.array_module(A)
    nnz = int(A.indptr[-1])
    values = A.data[:nnz]
    if how == "binary":
        data = (values != 0).astype(A.dtype)
    elif how == "l1":
        # Each entry's row, from the row starts: the same in NumPy and CuPy (cupy.repeat takes no array counts).
        rows = xp.searchsorted(A.indptr, xp.arange(nnz), side="right") - 1
        # Gathered and divided in A's type: float32 rows stay float32, half the bytes on the device.
        sums = xp.bincount(rows, weights=values, minlength=A.shape[0]).astype(A.dtype)[rows]
        data = xp.where(sums != 0, values / xp.where(sums != 0, sums, 1), 0).astype(A.dtype, copy=False)
    else:
        raise ValueError(f"unknown row preparation {how!r}")
    return type(A)((data, A.indices[:nnz], A.indptr), shape=A.shape, copy=False)


@dataclass
class Rows:
    """Rows as a measure reads them, on the engine's device, with the row norms it needs."""

    matrix: Any
    norms: list

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

    def __init__(self, engine: PairwiseEngine, spec: Distance, values: dict, dtype):
        self.engine, self.spec, self.values = engine, spec, values
        self.dtype = np.dtype(dtype)
        self.acc = engine.accumulate_dtype(self.dtype)  # float64 on the CPU; the result's type on the GPU
        self.param_array = np.array(list(values.values()), dtype=np.float64)
        self.terms = [_bind(sr, values) for sr in spec.terms]

    @property
    def bytes_per_entry(self) -> int:
        """Temporaries per result entry: the terms, and the result when it has its own buffer (``block``)."""
        own_buffer = not (len(self.terms) == 1 and self.acc == self.dtype)
        return len(self.terms) * self.acc.itemsize + (self.dtype.itemsize if own_buffer else 0)

    def prepare(self, A) -> Rows:
        """A's rows on the engine's device as the measure reads them, with their norms."""
        Ap = self.engine.to_device(prepare(A, self.spec.prepare))
        tree = {name: expression(NORMS[name], ("x",)) for name in self.spec.norms}
        return Rows(Ap, [self.engine.row_norm(Ap, tree[name], self.acc) for name in self.spec.norms])

    def block(self, X: Rows, Y: Rows):
        """The measure for the rows of X against all of Y, an ``m × p`` array on the engine's device."""
        engine, spec = self.engine, self.spec
        (m, n), p = X.matrix.shape, Y.matrix.shape[0]
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

    def _refine(self, X, Y, flagged, out) -> None:
        """Recompute the flagged entries exactly (see ``Refinement``)."""
        engine, refine = self.engine, self.spec.refine
        exact = engine.pairwise(X, Y, refine.semiring, self.acc, mask=flagged)
        tree = expression(refine.expansion, EXPANSION_VARIABLES)
        fixed = engine.empty((1, exact.size), self.acc)
        engine.expand(tree, (), np.zeros(0), [exact[None, :]], [], [], X.shape[1], fixed)
        engine.scatter(out, flagged, fixed[0])


def _bind(sr: Semiring, values: dict) -> Semiring:
    own = {k: v for k, v in values.items() if k in sr.mult.param_names}
    return sr.with_params(**own) if own else sr
