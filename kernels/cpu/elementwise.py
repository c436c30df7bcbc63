"""Row-wise and elementwise kernels of the CPU engine: row norms, expansions, selection, scatter.

* :func:`row_norm` — ``Σ_k f(A[i, k])`` over each row's stored values;
* :func:`expand` — a measure's expansion ``f(c0, c1, nx*, ny*, n)`` applied to
  dense product blocks (``semiring.interfaces.EXPANSION_VARIABLES``);
* :func:`select` — the entries where such an expression is nonzero, as
  ``Entries``: counted per row first, then filled, so memory follows the number
  selected and no ``m × p`` flag array is made;
* :func:`scatter` — values written back at a set of entries.

Each is a parallel loop over rows; the expression is compiled once per tree
into a copy of ``expansion_template`` (``jit.generate``) and inlined.  Values are float64.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from semiring import expr as _expr
from semiring.interfaces import EXPANSION_VARIABLES, Entries

from .jit import JIT, generate, scalar_source

# --------------------------------------------------------------------------- row norms


@cache
def expression_kernels(tree: _expr.Node, variables: tuple[str, ...], param_names: tuple[str, ...] = ()):
    """The generated ``expansion_template`` module applying ``tree`` (see its docstring for the kernels of each
    variable set)."""
    return generate("expansion_template", {"f": scalar_source("f", tree, variables, param_names)})


def row_norm(A: sp.csr_matrix, tree: _expr.Node, dtype=np.float64) -> np.ndarray:
    """``Σ_k f(A[i, k])`` over each row's stored values, in float64 (``dtype`` is for the GPU's sake)."""
    out = np.zeros(A.shape[0], np.float64)
    if A.shape[0]:
        expression_kernels(tree, ("x",)).row_reduce(A.indptr, A.data, out)
    return out


# --------------------------------------------------------------------------- expansions


def _operands(terms, xnorms, ynorms, m: int, p: int) -> list:
    """c0, c1, nx0, nx1, ny0, ny1 for an expansion; zeros stand for those a measure lacks."""
    # A missing c1 (c0, the measure's product, is always given) is a zero-stride view of at least 2 x 2, of which
    # the kernels read the first m x p: numba types a 1 x 1 view as C-contiguous, a larger one as of any layout,
    # and each type is one more compile of every expansion.
    c = list(terms) + [np.broadcast_to(np.zeros((1, 1)), (max(m, 2), max(p, 2)))] * (2 - len(terms))
    nx = list(xnorms) + [np.zeros(m)] * (2 - len(xnorms))
    ny = list(ynorms) + [np.zeros(p)] * (2 - len(ynorms))
    return [*c, *nx, *ny]


def expand(tree, param_names, params, terms, xnorms, ynorms, ncols: int, out: np.ndarray) -> np.ndarray:
    """Apply an expansion elementwise: ``out[i, j] = f(c0[i,j], c1[i,j], nx*[i], ny*[j], n)``."""
    if out.size:
        operands = _operands(terms, xnorms, ynorms, *out.shape)
        expression_kernels(tree, EXPANSION_VARIABLES, tuple(param_names)).expand(*operands, float(ncols), params, out)
    return out


def row_terms(trees, norms, ncols: int) -> list:
    """``g(nx0[i], nx1[i], n)`` for each tree at every row of ``norms``, in their type (an ``m × 1`` expansion)."""
    m = norms[0].shape[0]
    return [
        expand(tree, (), np.zeros(0), [], norms, [], ncols, np.empty((m, 1), norms[0].dtype)).ravel() for tree in trees
    ]


def row_shares(indptr, values: np.ndarray, root: bool = False) -> np.ndarray:
    """Each of the stored ``values`` (of the CSR rows ``indptr``) divided by its row's sum (0 where the sum is
    0), its square root with ``root``, in the values' type, a chunk of entries at a time (``entry_chunks``).

    Sums accumulate in float64 and are rounded to the values' type, so float32 rows stay float32; a row whose sum
    leaves that type's range (values finite: near 3.4e38 in float32, 1e308 in float64) is scaled first by the
    power of two 2^-(1 + ⌈log₂ length⌉) (exact), so its sum fits, as the GPU engine's kernel does."""
    from semiring.validation import entry_chunks

    dtype, nnz, nrows = values.dtype, values.size, indptr.size - 1

    def chunks():
        for e0, e1 in entry_chunks(nnz):
            yield e0, e1, np.searchsorted(indptr, np.arange(e0, e1), side="right") - 1

    def row_sums(scale):
        sums = np.zeros(nrows, np.float64)
        for e0, e1, rows in chunks():
            weights = values[e0:e1] if scale is None else values[e0:e1] * scale[rows]
            sums += np.bincount(rows, weights=weights, minlength=nrows)
        with np.errstate(over="ignore"):
            return sums.astype(dtype)

    sums, scale = row_sums(None), None
    overflowed = np.isinf(sums)
    if overflowed.any():
        lengths = np.maximum(np.diff(indptr), 1).astype(np.float64)
        scale = np.where(overflowed, np.ldexp(dtype.type(1), -(1 + np.ceil(np.log2(lengths))).astype(int)), 1)
        scale = scale.astype(dtype)
        sums = row_sums(scale)
    data = np.empty(nnz, dtype)
    for e0, e1, rows in chunks():
        s, v = sums[rows], values[e0:e1] if scale is None else values[e0:e1] * scale[rows]
        data[e0:e1] = np.where(s != 0, v / np.where(s != 0, s, 1), 0)
    return np.sqrt(data, out=data) if root else data


# --------------------------------------------------------------------------- selection and scatter


def select(tree, param_names, params, terms, xnorms, ynorms, ncols: int, shape: tuple[int, int]) -> Entries:
    """The entries where the expression holds, row by row (int64 indices; no m×p buffer is made)."""
    m, p = shape
    operands = [*_operands(terms, xnorms, ynorms, m, p), float(ncols), params]
    kernels = expression_kernels(tree, EXPANSION_VARIABLES, tuple(param_names))
    counts = np.zeros(m, np.int64)
    if m and p:
        kernels.select_count(*operands, counts)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    rows = np.empty(indptr[-1], np.int64)
    cols = np.empty(indptr[-1], np.int64)
    if cols.size:
        kernels.select_fill(*operands, indptr, rows, cols)
    return Entries(rows, cols)


def scatter(out: np.ndarray, entries: Entries, values: np.ndarray) -> None:
    """``out[rows[s], cols[s]] = values[s]``, in place."""
    out[entries.rows, entries.cols] = values


# --------------------------------------------------------------------------- the mirror of a symmetric result

# Rows and columns of the squares a transposed copy moves at a time: both sides' lines stay in cache, and each
# thread writes rows of its own.
MIRROR_BLOCK = 64


def transposed_into(target: np.ndarray, source: np.ndarray) -> None:
    """``target[...] = source.T`` on every thread the engine has (numba's), in squares of ``MIRROR_BLOCK``; the
    two arrays must not overlap (a tile above a symmetric result's diagonal and its place below).  One NumPy
    thread took 5.5 s of a 17 s cosine of 30,000 x 768 dense rows on two cores, most of it the first write of
    each fresh page of the 3.6 GB result (the same copy into written pages: 0.4 s)."""
    if target.shape != source.shape[::-1]:
        raise ValueError(f"target's shape {target.shape} is not the transpose of source's {source.shape}")
    if target.size:
        _transposed(target, source, MIRROR_BLOCK)


@njit(parallel=True, **JIT)
def _transposed(target, source, block):
    rows, cols = target.shape
    for t in prange((rows + block - 1) // block):  # a thread's band of target rows: their pages its own
        r0, r1 = t * block, min(rows, (t + 1) * block)
        for c0 in range(0, cols, block):
            for r in range(r0, r1):
                for c in range(c0, min(cols, c0 + block)):
                    target[r, c] = source[c, r]
