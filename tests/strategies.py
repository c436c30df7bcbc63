"""Shared hypothesis strategies: sparse matrices with the awkward corners built in.

Matrices come with empty rows, explicitly stored zeros, a single column, skewed
row degrees, float32/float64 values and int32/int64 indices, in every input
form users pass (CSR/CSC/COO matrices and arrays, dense NumPy).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

# Magnitudes 1e-3..1e3: the awkward cases here are structural, not float extremes.
_MAGNITUDES = st.one_of(st.sampled_from([1.0, 0.5, 2.0, 3.0]), st.floats(1e-3, 1e3, allow_nan=False))


@st.composite
def sparse_pair(draw, *, nonnegative: bool = False, max_rows: int = 7, max_cols: int = 9, dtype=None):
    """(X, Y) canonical CSR matrices of one width, plus their dense float64 forms."""
    n = draw(st.integers(1, max_cols))
    dtype = dtype or draw(st.sampled_from([np.float64, np.float32]))
    index = draw(st.sampled_from([np.int32, np.int64]))
    mats = [draw(_csr(n, max_rows, nonnegative, dtype, index)) for _ in range(2)]
    if draw(st.booleans()) and mats[0].shape[0] and mats[1].shape[0]:
        # share a row so that identical rows (distance 0) are always exercised
        k = draw(st.integers(0, mats[0].shape[0] - 1))
        mats[1] = _with_index(sp.vstack([mats[1], mats[0][k]], format="csr").astype(dtype), index)
    return tuple(mats)


@st.composite
def _csr(draw, n, max_rows, nonnegative, dtype, index):
    m = draw(st.integers(0, max_rows))
    density = draw(st.sampled_from([0.0, 0.15, 0.4, 0.8, 1.0]))
    stored = np.array(draw(st.lists(st.booleans(), min_size=m * n, max_size=m * n)), dtype=bool).reshape(m, n)
    if density < 1.0:
        keep = np.array(draw(st.lists(st.floats(0, 1), min_size=m * n, max_size=m * n))).reshape(m, n) < density
        stored &= keep
    rows, cols = np.nonzero(stored)
    signs = [] if nonnegative else draw(st.lists(st.booleans(), min_size=rows.size, max_size=rows.size))
    values = np.array(draw(st.lists(_MAGNITUDES, min_size=rows.size, max_size=rows.size)), dtype=np.float64)
    if not nonnegative:
        values[np.array(signs, dtype=bool)] *= -1
    zeros = np.array(draw(st.lists(st.booleans(), min_size=rows.size, max_size=rows.size)), dtype=bool)
    values[zeros & (np.arange(rows.size) % 3 == 0)] = 0.0  # explicitly stored zeros
    A = sp.csr_matrix((values.astype(dtype), (rows, cols)), shape=(m, n))
    return _with_index(A, index)


def _with_index(A: sp.csr_matrix, index) -> sp.csr_matrix:
    """A copy of A with index arrays of dtype ``index`` (SciPy would downcast int64 if we let it)."""
    A = A.copy()
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def dense(A) -> np.ndarray:
    return np.asarray(A.toarray(), dtype=np.float64)
