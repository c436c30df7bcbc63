"""``metric="precomputed"``: neighbours read from distances the caller computed, as scikit-learn reads them.

``NearestNeighbors(metric="precomputed")`` is fitted on a square matrix of
distances between the fitted rows, and queried with a ``(n_queries,
n_samples_fit)`` one (``X=None`` queries the fitted rows, each excluding
itself by index).  The matrix is

* **dense** (a NumPy array): every entry is a distance; or
* **sparse** (any SciPy sparse format, read as CSR): a neighbours graph, such
  as ``KNeighborsTransformer`` or ``kneighbors_graph(mode="distance")`` give.
  Only the stored entries are candidates (an explicitly stored 0 is a distance
  of 0); a missing entry is no neighbour at all.  A k-neighbours query needs
  k stored entries in every row (not counting the row's own entry when
  ``X=None``), else it is refused with the rule, as scikit-learn's.

Distances must be finite and non-negative (scikit-learn's rules).  Ties are
ordered by index, as everywhere in this package.  The selection runs on the
host: the CPU engine's top-k for dense rows, a sort of the stored entries for
a graph.  CuPy input is refused (compute the distances on the GPU with
``pairwise_distances`` and pass ``.get()``, or query the measure directly).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from semiring import arrays, tiling, validation
from semiring import backend as _backend

__all__ = ["check_distances", "kneighbors", "within"]


def check_distances(D, name: str, *, square: bool = False, n_columns: int | None = None):
    """D as precomputed distances: a float32/float64 C-contiguous NumPy array, or a canonical CSR matrix.

    Finite and non-negative; square for ``fit``; ``n_columns`` columns (the fitted rows) for a query.
    """
    if arrays.is_cupy(D):
        raise TypeError(
            f"{name}: metric='precomputed' takes NumPy arrays and SciPy sparse matrices; pass the CuPy "
            "array's .get(), or let NearestNeighbors compute the measure on the GPU (metric='<measure>')"
        )
    if sp.issparse(D):
        D = validation.check_matrix(D, name)  # canonical CSR, float, finite
        low = validation.lowest_value(D)
    else:
        if D is None or isinstance(D, (str, bytes)):
            raise TypeError(f"{name} must be a distance matrix (a 2-D array or a sparse matrix), got {D!r}")
        try:
            D = np.asarray(D)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a distance matrix (a 2-D array or a sparse matrix): {exc}") from None
        if D.ndim != 2:
            raise ValueError(
                f"{name} must be a 2-D matrix of distances, got shape {D.shape}. Reshape your data: "
                "x.reshape(1, -1) for the distances of a single sample"
            )
        if D.dtype.kind not in "biuf":
            raise TypeError(f"{name} has dtype {D.dtype}; distances must be real numbers")
        D = np.ascontiguousarray(D, dtype=D.dtype if D.dtype in (np.float32, np.float64) else np.float64)
        if not np.isfinite(D).all():
            what = "NaN" if np.isnan(D).any() else "infinity"
            raise ValueError(f"{name} contains {what}; precomputed distances must be finite")
        low = float(D.min()) if D.size else 0.0
    if low < 0:
        raise ValueError(
            f"Negative values in data passed as precomputed distances ({name}, min {low!r}): distances must be "
            "non-negative (for a similarity, pass a distance such as 1 - similarity)"
        )
    if square and D.shape[1] == 0:
        raise ValueError(f"{name} has 0 feature(s) (shape={D.shape}) while a minimum of 1 is required.")
    if square and D.shape[0] != D.shape[1]:
        raise ValueError(
            f"{name}: a precomputed matrix must be square (distances between the fitted rows), got shape {D.shape}"
        )
    if n_columns is not None and D.shape[1] != n_columns:
        raise ValueError(
            f"{name} has {D.shape[1]} columns, but metric='precomputed' needs one per fitted row "
            f"({n_columns}): the distances from each query to every fitted row"
        )
    return D


def kneighbors(D, k: int, exclude_self: bool, working_memory) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest distances of each row of D (checked), ties by index: ``(distances, indices)``.

    ``exclude_self``: row i does not select column i (the fitted rows queried by ``X=None``).
    """
    if sp.issparse(D):
        return _graph_kneighbors(D, k, exclude_self)
    engine = _backend.engine("cpu")

    def rows(r0: int, r1: int):
        return r0, r1

    def tile(bounds, c0: int, c1: int):
        return np.ascontiguousarray(D[bounds[0] : bounds[1], c0:c1])

    return tiling.topk(
        engine,
        D.shape,
        k,
        D.dtype,
        D.dtype.itemsize,
        working_memory,
        largest=False,
        exclude_self=exclude_self,
        rows=rows,
        tile=tile,
    )


def _sorted_entries(D: sp.csr_matrix, exclude_self: bool):
    """D's stored entries (rows, columns, values) by row, then value, then column; the diagonal left out when
    ``exclude_self``."""
    rows = np.repeat(np.arange(D.shape[0], dtype=np.int64), np.diff(D.indptr))
    cols = D.indices.astype(np.int64)
    values = D.data
    if exclude_self:
        other = rows != cols
        rows, cols, values = rows[other], cols[other], values[other]
    order = np.lexsort((cols, values, rows))
    return rows[order], cols[order], values[order]


def _graph_kneighbors(D: sp.csr_matrix, k: int, exclude_self: bool):
    rows, cols, values = _sorted_entries(D, exclude_self)
    counts = np.bincount(rows, minlength=D.shape[0])
    fewest = int(counts.min()) if counts.size else k
    if fewest < k:
        own = " other than the row's own" if exclude_self else ""
        raise ValueError(
            f"{k} neighbors per sample are required, but some samples have only {fewest} stored entries{own} "
            "in the precomputed graph matrix. Decrease n_neighbors, or recompute the graph with more neighbors"
        )
    starts = np.zeros(D.shape[0] + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    rank = np.arange(rows.size) - starts[rows]
    kept = rank < k
    return values[kept].reshape(-1, k), cols[kept].reshape(-1, k)


def within(
    D, radius: float, exclude_self: bool, working_memory, found=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of D (checked) of at most ``radius``: ``(rows, cols, values)``, by row then column.

    A dense D is read a band of rows at a time (``working_memory`` MiB of it compared at once); ``found(new,
    r1)``, where given, is told each band's count of pairs (rows up to ``r1``) before they are kept (it may
    refuse them).
    """
    if sp.issparse(D):
        rows = np.repeat(np.arange(D.shape[0], dtype=np.int64), np.diff(D.indptr))
        cols, values = D.indices.astype(np.int64), D.data
        kept = values <= radius
        if exclude_self:
            kept &= rows != cols
        return rows[kept], cols[kept], values[kept]
    budget = tiling.budget_bytes(_backend.engine("cpu"), working_memory)
    step = max(1, budget // max(1, D.shape[1] * (D.dtype.itemsize + 1)))
    kept = []
    for r0, r1 in tiling.ranges(D.shape[0], step):
        band = D[r0:r1] <= radius
        if exclude_self:
            diagonal = np.arange(r0, r1)
            in_band = diagonal < D.shape[1]
            band[(diagonal - r0)[in_band], diagonal[in_band]] = False
        r, c = np.nonzero(band)
        if found is not None:
            found(r.size, r1)
        kept.append((r.astype(np.int64) + r0, c.astype(np.int64), D[r0:r1][r, c]))
    if not kept:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, D.dtype)
    return tuple(np.concatenate(parts) for parts in zip(*kept))
