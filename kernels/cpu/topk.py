"""Per-row top-k selection of the CPU engine (numba): the k best entries of each row of distance blocks.

The running selection of a row is a max-heap of ``k`` (key, index) pairs with
the worst pair at its root, kept in two ``(m, k)`` arrays; each block of
distances (rows of queries against a batch of index columns) is pushed through
it, so the rows of a block are never sorted and only ``m × k`` survives.

Order: a smaller key is better; equal keys are ordered by the smaller index
(ties broken by index, as a stable sort of the whole row would); NaN is worse
than any number, NaNs ordered by index.  Similarities (``largest=True``) are
pushed as their negation, so the largest value is the smallest key, and turned
back in :func:`topk_finish`.  The heap starts full of sentinels ``(NaN,
TOPK_EMPTY)`` (``semiring.interfaces.TOPK_EMPTY``), worse than every real entry, so
no count of filled slots is needed.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from semiring.interfaces import TOPK_EMPTY

from .jit import JIT


@njit(inline="always", **JIT)
def _worse(ka, ia, kb, ib):
    """(ka, ia) comes after (kb, ib): larger key, NaN after numbers, then larger index."""
    if np.isnan(ka):
        return not np.isnan(kb) or ia > ib
    if np.isnan(kb):
        return False
    return ka > kb or (ka == kb and ia > ib)


@njit(inline="always", **JIT)
def _sift_down(keys, ids, start, size):
    """Restore the max-heap below ``start`` in ``keys[:size]`` / ``ids[:size]``."""
    i = start
    while True:
        worst, left, right = i, 2 * i + 1, 2 * i + 2
        if left < size and _worse(keys[left], ids[left], keys[worst], ids[worst]):
            worst = left
        if right < size and _worse(keys[right], ids[right], keys[worst], ids[worst]):
            worst = right
        if worst == i:
            return
        keys[i], keys[worst] = keys[worst], keys[i]
        ids[i], ids[worst] = ids[worst], ids[i]
        i = worst


@njit(parallel=True, **JIT)
def _push(block, col0, self0, sign, keys, ids):
    # Row r of the block is query row self0 + r (when self0 >= 0) and column j is
    # index row col0 + j: the query itself is skipped, as scikit-learn's
    # kneighbors(X=None) does not count a point as its own neighbour.
    m, p = block.shape
    k = keys.shape[1]
    for r in prange(m):
        rk, ri = keys[r], ids[r]
        skip = self0 + r - col0 if self0 >= 0 else -1
        for j in range(p):
            if j == skip:
                continue
            key = sign * np.float64(block[r, j])
            idx = col0 + j
            if _worse(rk[0], ri[0], key, idx):
                rk[0], ri[0] = key, idx
                _sift_down(rk, ri, 0, k)


@njit(parallel=True, **JIT)
def _sort_heaps(keys, ids):
    """Heap-sort every row in place: best first."""
    m, k = keys.shape
    for r in prange(m):
        rk, ri = keys[r], ids[r]
        for end in range(k - 1, 0, -1):
            rk[0], rk[end] = rk[end], rk[0]
            ri[0], ri[end] = ri[end], ri[0]
            _sift_down(rk, ri, 0, end)


def topk_init(m: int, k: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """An empty selection for ``m`` rows: ``k`` sentinel slots each."""
    return np.full((m, k), np.nan, np.float64), np.full((m, k), TOPK_EMPTY, np.int64)


def topk_push(block, col0: int, self0: int, largest: bool, selection) -> None:
    """Merge a block (rows: queries, columns: index rows ``col0, col0 + 1, …``) into the selection.

    ``self0 >= 0`` says the block's row r is index row ``self0 + r``, which is
    then not selected (a point is not its own neighbour); ``-1`` selects all.
    """
    keys, ids = selection
    if block.size:
        _push(block, np.int64(col0), np.int64(self0), -1.0 if largest else 1.0, keys, ids)


def topk_finish(selection, largest: bool, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The selection as host arrays ``(values, indices)``, each row best first; empty slots ``(NaN, TOPK_EMPTY)``."""
    keys, ids = selection
    if keys.size:
        _sort_heaps(keys, ids)
    values = -keys if largest else keys
    return values.astype(dtype), ids
