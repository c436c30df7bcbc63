"""The rules of a host CSR matrix that read its entries, in one pass across threads (``csr_verdicts``).

``semiring.validation`` checks a SciPy matrix with NumPy reductions, each a serial pass over the entries (the
column range twice, the values' finiteness into a temporary, the canonical order once more in SciPy): 8 ms on a
scale-0.5 scRNA-like matrix (12.9 M entries), a tenth of a 16-thread product there.  On the CPU engine that
check is this one pass, in row ranges of equal entries across threads, with the findings of the GPU engine's
check kernel (``kernels.cuda.source.render_csr_check``), so ``validation`` reads both the same way.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from .jit import JIT
from .pairwise import row_ranges

# Below this many entries NumPy's reductions cost about as little as calling the kernel (EDGAR-like, 300,000
# entries: 0.10 ms against 0.20-0.29 ms), and a new process need not load it.
VERDICTS_MIN_ENTRIES = 1 << 20

VERDICT_KEYS = ("decreasing rows", "lowest column", "highest column", "unsorted", "nan", "inf", "first", "last")


def csr_verdicts(A: sp.csr_matrix) -> dict:
    """What one pass over CSR ``A``'s entries finds (``VERDICT_KEYS``): rows ending before they start, the
    smallest and largest column index, entries not above the one before them in their row (unsorted or
    repeated), NaN and infinite values (counts of rows or entries: nonzero is what matters), and the first and
    last row pointers.  indptr's type and length are the caller's to check; entries are read within the
    stored arrays only, whatever indptr holds.  Also ``"magnitudes"``: the smallest nonzero and the largest
    magnitude of the values (inf and 0 where none is nonzero), which ``semiring.validation.Facts`` carries (a
    row-scale-free measure's range check then reads no value again); they mean something where the rows are
    canonical and the values finite."""
    indptr = A.indptr
    m = indptr.size - 1
    bound = min(A.indices.size, A.data.size)
    ranges = max(1, min(4 * numba.get_num_threads(), m))
    found = np.zeros((ranges, 6), np.int64)
    # The values read as the unsigned integers of their bits, the sign cleared: magnitudes then order as those
    # integers do (zero 0, infinity EXPONENT, NaN above it), and their least and greatest are integer min and max,
    # which vectorise (float min and max, NaN-aware, did not: the pass took 9.2 ms where it took 2.1).
    bits_type = np.uint64 if A.data.dtype.itemsize == 8 else np.uint32
    bits = np.ascontiguousarray(A.data).view(bits_type)
    sign = bits_type(1) << bits_type(8 * A.data.dtype.itemsize - 1)
    exponent = np.array([np.inf], A.data.dtype).view(bits_type)[0]  # the bits of infinity: all exponent bits
    magnitudes = np.zeros((ranges, 2), bits_type)
    magnitudes[:, 0] = exponent  # "none nonzero" reads as infinity
    if m:
        cuts = row_ranges(indptr, ranges)
        _verdicts(indptr, A.indices, A.data, bits, sign - bits_type(1), exponent, bound, cuts, found, magnitudes)
    low = found[:, 1].min() if m else 0
    high = found[:, 2].max() if m else 0
    first, last = (int(x) for x in indptr[[0, -1]])
    values = (found[:, 0].sum(), low, high, found[:, 3].sum(), found[:, 4].sum(), found[:, 5].sum(), first, last)
    verdict = dict(zip(VERDICT_KEYS, (int(x) for x in values)))
    low_high = np.array([magnitudes[:, 0].min(), magnitudes[:, 1].max()], bits_type).view(A.data.dtype)
    verdict["magnitudes"] = (float(low_high[0]), float(low_high[1]))
    return verdict


@njit(parallel=True, **JIT)
def _verdicts(indptr, indices, data, bits, magnitude, exponent, bound, cuts, found, magnitudes):
    # found[range]: decreasing rows, lowest column, highest column, unsorted entries, NaNs, infinities;
    # magnitudes[range]: the smallest nonzero and the largest magnitude of its values, as bits (``bits``: the
    # values' own, ``magnitude`` masking off their sign; ``exponent``: infinity's, at or above it not finite).
    # Each range's entries are read as one run, by one loop without branches through unsigned indices, which
    # vectorises (numba tests a signed index for a negative one: a loop over each row's entries so took three
    # times NumPy's reductions).  They are the range's rows' entries where indptr holds (rows in order, from 0
    # to at most the stored arrays' end); elsewhere the verdicts other than "decreasing rows", "first" and
    # "last" mean nothing, and validation reads none of them: it refuses the matrix first.
    one = np.uint64(1)
    for r in prange(cuts.size - 1):
        i0, i1 = cuts[r], cuts[r + 1]
        decreasing = 0
        for i in range(i0, i1):
            decreasing += indptr[i + 1] < indptr[i]
        k0 = np.uint64(min(max(np.int64(indptr[i0]), 0), bound))
        k1 = max(np.uint64(min(max(np.int64(indptr[i1]), 0), bound)), k0)
        low = np.int64(np.iinfo(np.int64).max)
        high = np.int64(np.iinfo(np.int64).min)
        descents = 0  # entries not above the one before them, in their row or not
        nonfinite = 0
        smallest, largest = exponent, exponent - exponent  # infinity (none nonzero), and 0 in the bits' type
        if k1 > k0:
            low = high = np.int64(indices[k0])
        for k in range(k0, k1):
            a = bits[k] & magnitude
            nonfinite += a >= exponent
            smallest = min(smallest, a if a != 0 else exponent)
            largest = max(largest, a)
        for k in range(k0 + one, k1):
            v = indices[k]
            low = min(low, np.int64(v))
            high = max(high, np.int64(v))
            descents += indices[k - one] >= v
        for i in range(i0 + 1, i1):  # less those at the start of a row (each start once: rows may be empty)
            s = np.int64(indptr[i])
            if np.int64(k0) < s < np.int64(k1) and s > indptr[i - 1]:
                descents -= indices[s - 1] >= indices[s]
        nans = 0
        if nonfinite:
            for k in range(k0, k1):
                nans += np.isnan(data[k])
        found[r, 0] = decreasing
        found[r, 1] = low
        found[r, 2] = high
        found[r, 3] = descents
        found[r, 4] = nans
        found[r, 5] = nonfinite - nans
        magnitudes[r, 0] = smallest
        magnitudes[r, 1] = largest
