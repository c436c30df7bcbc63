"""``pairwise_distances_chunked``: the distance matrix a band of rows at a time, as scikit-learn's."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator

import numpy as np
import scipy.sparse as sp

from semiring import arrays, tiling
from semiring import dask as _sdask

from . import precomputed as _precomputed
from .pairwise import pairwise_distances

__all__ = ["pairwise_distances_chunked"]

# Bytes of one result entry as the band height is reckoned (scikit-learn's 8, whatever the result's type).
ROW_ENTRY_BYTES = 8


def pairwise_distances_chunked(
    X,
    Y=None,
    *,
    reduce_func: Callable | None = None,
    metric: str = "euclidean",
    n_jobs: int | None = None,
    working_memory: float | None = None,
    backend: str = "auto",
    **params,
) -> Iterator:
    """Yield the distances from X's rows to Y's (X's when Y is None) a band of X's rows at a time.

    As ``sklearn.metrics.pairwise_distances_chunked``: each band is as many
    rows as fit ``working_memory`` MiB at 8 bytes an entry (default
    ``semiring.tiling.DEFAULT_WORKING_MEMORY_MIB``; at least one row, so 0
    gives one row a band), computed by :func:`pairwise_distances` (same
    ``metric``, ``n_jobs``, ``backend`` and measure ``params``; the band's own
    temporaries within the same budget).  With ``reduce_func``, what is
    yielded is ``reduce_func(D_chunk, start)`` for the band starting at row
    ``start``: an array, a list, a sparse matrix or a tuple of them, each with
    one entry a row of the band (checked, as scikit-learn), or None.
    ``metric="precomputed"`` reads X as distances and yields its bands.

    >>> import numpy as np
    >>> from semiring import distances
    >>> X = np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    >>> def nearest(D, start):  # each row's nearest other row
    ...     D = D.copy()
    ...     D[np.arange(D.shape[0]), np.arange(start, start + D.shape[0])] = np.inf
    ...     return D.argmin(axis=1)
    >>> [band for band in distances.pairwise_distances_chunked(X, reduce_func=nearest, working_memory=0)]
    [array([2]), array([2]), array([0])]
    """
    if _sdask.is_dask(X, Y):
        raise NotImplementedError(
            "pairwise_distances_chunked takes in-memory rows; for Dask arrays pairwise_distances gives a lazy Dask "
            "array, computed a block at a time"
        )
    if reduce_func is not None and not callable(reduce_func):
        raise TypeError(f"reduce_func must be a callable (D_chunk, start) or None, got {reduce_func!r}")
    n_rows = _rows_of(working_memory)
    if metric == "precomputed":
        D = _precomputed.check_distances(X, "X")
        bands = ((r0, r1, D[r0:r1]) for r0, r1 in tiling.ranges(D.shape[0], n_rows(D.shape[1])))
        yield from _reduced(bands, reduce_func)
        return
    band_memory = working_memory if working_memory else None  # 0 means one row a band, not a zero budget
    X = _row_sliceable(X)
    n_y = X.shape[0] if Y is None else _row_sliceable(Y, "Y").shape[0]

    def bands():
        for r0, r1 in tiling.ranges(X.shape[0], n_rows(n_y)):
            whole = (r0, r1) == (0, X.shape[0])
            rows = X if whole else X[r0:r1]
            other = (None if whole else X) if Y is None else Y  # Y=None on the whole of X: X against itself
            D = pairwise_distances(
                rows, other, metric, n_jobs=n_jobs, backend=backend, working_memory=band_memory, **params
            )
            yield r0, r1, D

    yield from _reduced(bands(), reduce_func)


def _row_sliceable(A, name: str = "X"):
    """A in a form whose rows slice cheaply (CSR for other sparse formats, an array for lists); checked
    by ``pairwise_distances`` band by band."""
    if sp.issparse(A) or arrays.is_cupy(A):
        return A.tocsr() if getattr(A, "format", "csr") not in ("csr",) else A
    if hasattr(A, "shape") and hasattr(A, "__getitem__"):
        return A
    try:
        return np.asarray(A)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a sparse matrix or a 2-D array: {exc}") from None


def _rows_of(working_memory) -> Callable[[int], int]:
    """The band height for rows of ``n`` entries within ``working_memory`` MiB (>= 0; None: the default)."""
    if working_memory is None:
        working_memory = tiling.DEFAULT_WORKING_MEMORY_MIB
    elif (
        isinstance(working_memory, bool)
        or not isinstance(working_memory, numbers.Real)
        or not np.isfinite(working_memory)
        or working_memory < 0
    ):
        raise ValueError(f"working_memory must be a finite number of MiB >= 0 (or None), got {working_memory!r}")

    def rows(n: int) -> int:
        return max(1, int(min(working_memory, tiling.WORKING_MEMORY_CAP_MIB) * 2**20 // max(1, ROW_ENTRY_BYTES * n)))

    return rows


def _reduced(bands, reduce_func):
    for r0, r1, D in bands:
        if reduce_func is None:
            yield D
            continue
        reduced = reduce_func(D, r0)
        _check_reduced(reduced, r1 - r0)
        yield reduced


def _check_reduced(reduced, n: int) -> None:
    """scikit-learn's rule: None, or a sequence (or a tuple of sequences) of one entry a row of the band."""
    if reduced is None:
        return
    parts = reduced if isinstance(reduced, tuple) else (reduced,)
    if any(isinstance(r, tuple) or not (hasattr(r, "__iter__") or sp.issparse(r)) for r in parts):
        raise TypeError(f"reduce_func returned {reduced!r}. Expected sequence(s) of length {n}.")
    lengths = tuple(r.shape[0] if hasattr(r, "shape") else len(r) for r in parts)
    if any(length != n for length in lengths):
        got = lengths if isinstance(reduced, tuple) else lengths[0]
        raise ValueError(f"reduce_func returned object of length {got}. Expected same length as input: {n}.")
