"""``pairwise_distances``: a measure from ``semiring.distances.specs`` run by the blocked driver."""

from __future__ import annotations

import functools
import numbers
from contextlib import contextmanager

import numpy as np

from semiring import backend as _backend
from semiring import dask as _sdask
from semiring import tiling, validation
from semiring.interfaces import call_density

from .bound import BoundMeasure, dense_rows_block
from .specs import column_scale, dask_column_defaults, resolve_metric, split_columns

__all__ = ["check_n_jobs", "cpu_threads", "pairwise_distances", "resolve_metric"]


def pairwise_distances(
    X,
    Y=None,
    metric: str = "euclidean",
    *,
    mask=None,
    out: np.ndarray | None = None,
    n_jobs: int | None = None,
    ensure_all_finite: bool | str = True,
    backend: str = "auto",
    working_memory: float | None = None,
    **params,
):
    """Distances between the rows of X and the rows of Y (X itself when Y is None).

    ``metric`` takes SciPy/scikit-learn names and aliases (see
    ``distances.METRICS``); the result equals ``scipy.spatial.distance.cdist`` on
    the densified input where SciPy defines the measure, except where the docs
    state otherwise.  A callable is refused (every measure runs as generated
    kernels).  Inputs are SciPy sparse matrices/arrays or dense arrays;
    the result is a dense array, float32 when both inputs are float32.  CuPy
    inputs (``cupy`` arrays, ``cupyx.scipy.sparse``) give a ``cupy.ndarray``,
    which, computed on the GPU, never leaves it: CuPy inputs are validated and
    prepared on the GPU too.

    ``params`` are the measure's (``p``; jensenshannon's ``base``), and as in
    ``cdist`` the per-column ``w`` (weights, for the measures whose weighted
    form is the measure on scaled columns: see ``docs/measures.md``) and
    seuclidean's ``V``.

    ``mask`` (a sparse matrix of the result's shape): only the entries it
    stores are computed, and the result is a CSR matrix with exactly its
    pattern (its values are ignored), as ``semiring.pairwise``'s mask.  For the
    entries within a radius (an ε-graph) see ``radius_neighbors_graph``.

    ``out``: a C-contiguous NumPy array of the result's shape and type, written
    in place and returned (SciPy's ``cdist(out=)``).  ``n_jobs`` (as
    scikit-learn's): the CPU engine's threads for this call, restored after;
    ``-1`` all, ``-2`` all but one, None the current number; the GPU engine
    ignores it.  ``ensure_all_finite`` (scikit-learn's): True only, since the
    expanded forms are not defined for infinite or NaN values; False and
    ``"allow-nan"`` are refused with that reason.

    ``working_memory`` (MiB, as scikit-learn) bounds the engine's temporaries:
    rows of X are processed in batches whose buffers fit it (``semiring.tiling``:
    1024 MiB by default on both engines, and at most half the GPU's free
    memory), so a result larger than the GPU is computed batch by batch into
    host memory.

    A Dask array of row blocks gives a lazy Dask array, each block this call on
    the worker holding its rows (docs/dask.md).

    >>> import numpy as np
    >>> from semiring import distances
    >>> X = np.array([[0.0, 3.0, 4.0], [0.0, 0.0, 0.0]])
    >>> distances.pairwise_distances(X, metric="euclidean")
    array([[0., 5.],
           [5., 0.]])
    >>> distances.pairwise_distances(X, metric="minkowski", p=1)
    array([[0., 7.],
           [7., 0.]])
    >>> distances.pairwise_distances(X, metric="cityblock", w=[1.0, 1.0, 0.5])
    array([[0., 5.],
           [5., 0.]])
    """
    if _sdask.is_dask(X, Y):  # row blocks on the workers, a lazy Dask result (docs/dask.md)
        if mask is not None or out is not None:
            raise NotImplementedError("mask= and out= are not available for Dask input: compute blocks by hand")
        resolve_metric(metric, split_columns(metric, params)[0])  # unknown metric or parameter: named now
        # A default computed from all the rows (seuclidean's V): over the whole Dask input, as the call on one
        # machine computes it over its whole input; per block it would be each block pair's own.
        params = dask_column_defaults(metric, params, X, Y)
        func = functools.partial(
            pairwise_distances, metric=metric, backend=backend, working_memory=working_memory, **params
        )
        return _sdask.pairs_of_blocks(func, X, Y, backend=backend, working_memory=working_memory)
    params, columns = split_columns(metric, params)
    spec, values = resolve_metric(metric, params)
    check_all_finite(ensure_all_finite)
    engine = _backend.engine(backend)
    working_memory = tiling.check_working_memory(working_memory)  # refused before any work, on every path
    check_n_jobs(n_jobs)
    if mask is None and out is None and (spec.columns is None or columns is None and spec.columns.default is None):
        D = dense_rows_block(engine, spec, values, X, Y)  # dense CuPy rows kept dense, where that path takes them
        if D is not None:
            return D
    where = tiling.placement(engine, X, Y, mask)
    X, Y = validation.check_pair(X, Y, verdicts=engine.csr_verdicts)  # CuPy input: on the GPU, where it stays
    if spec.nonnegative:
        validation.check_nonnegative(X, "X", spec.name)
        if Y is not X:
            validation.check_nonnegative(Y, "Y", spec.name)
    spec = spec.for_rows(X) if Y is X else spec.for_rows(X, Y)
    dtype = validation.result_dtype(X, Y)
    shape = (X.shape[0], Y.shape[0])
    M = None if mask is None else validation.check_mask(mask, shape)
    _check_out(out, shape, dtype, where.cupy_input or M is not None)
    measure = BoundMeasure(engine, spec, values, dtype, column_scale(spec, values, columns, X, Y))
    work = shape[0] * shape[1] + X.nnz + (0 if Y is X else Y.nnz)
    with cpu_threads(n_jobs, engine, work), call_density(X, Y):  # one path for every tile (semiring.interfaces)
        # What the engine's path takes beyond a block that is the result, where it states it: the float32 BLAS
        # path's lists only, so its rows against themselves are one tile, mirrored (docs/cpu-engine.md)
        extra = measure.result_extra_bytes(X, Y)
        if M is None and out is None and not engine.device_results:
            _check_host_memory(engine, X, Y, measure, extra, working_memory)
        Yrows = measure.prepare(Y)
        if M is not None:
            Xrows = Yrows if Y is X else measure.prepare(X)
            return where.masked(engine, mask, M, measure.at(Xrows, Yrows, engine.entries_from_csr(M)))

        def rows(r0: int, r1: int):
            if Y is X and (r0, r1) == (0, X.shape[0]):  # X against itself in one batch shares Y's preparation
                return Yrows
            prepared = measure.prepare(validation.row_slice(X, r0, r1))
            prepared.span = (r0, r1)
            return prepared

        def tile(Xrows, c0: int, c1: int):
            if Y is X and Xrows.span == (c0, c1):  # a batch against itself: one matrix, which the engine mirrors
                return measure.block(Xrows, Xrows)
            return measure.block(Xrows, Yrows.slice(engine, c0, c1))

        held = measure.held_bytes(Y) + (0 if Y is X else measure.held_bytes(X))  # X's counted as if prepared whole
        D = tiling.dense(
            engine,
            shape,
            dtype,
            measure.bytes_per_entry,
            working_memory,
            where.on_device,
            rows,
            tile,
            out=out,
            held_bytes=held,
            result_extra_bytes=extra,
            symmetric=Y is X and spec.symmetric,
        )
    return where.give(D)


def _check_host_memory(engine, X, Y, measure: BoundMeasure, extra: int | None, working_memory) -> None:
    """The dense result with the tiles it is computed in (the driver's: ``tiling.dense_tile``), refused before
    either is allocated: each tile's temporaries (every entry's terms, float64 for a float32 result; of a tile
    written into the result, ``extra`` bytes an entry where the engine states them) and the rows its terms'
    dense path densifies (one term at a time), beside the result unless one tile is the whole result
    (``tiling.dense`` checks the result alone)."""
    shape = (X.shape[0], Y.shape[0])
    budget = tiling.budget_bytes(engine, working_memory)
    tile = tiling.dense_tile(shape, measure.bytes_per_entry, budget, extra, in_place=extra is not None)
    whole = tile == shape
    if extra is None:  # tiles computed apart, each in its own buffer
        per_entry = measure.bytes_per_entry
    else:  # tiles written into the result (of X against itself, batches above the diagonal: no more entries)
        per_entry = measure.dtype.itemsize + extra if whole else extra
    blocks = measure.dense_block_bytes(X, Y, tile)
    validation.check_tiled_result(
        shape,
        measure.dtype,
        tile,
        per_entry,
        blocks,
        "compute fewer rows at a time, or the k nearest (kneighbors), or give a smaller working_memory",
    )


def check_all_finite(ensure_all_finite) -> None:
    """scikit-learn's ``ensure_all_finite``: True is the only value the measures can honour."""
    if ensure_all_finite is True:
        return
    if ensure_all_finite is False or ensure_all_finite == "allow-nan":
        raise ValueError(
            f"ensure_all_finite={ensure_all_finite!r} is not supported: the measures are computed through "
            "expanded forms (norms and products) that infinite or NaN values would turn into wrong numbers, "
            "so the inputs are always checked; leave ensure_all_finite=True"
        )
    raise ValueError(f"ensure_all_finite must be True, False or 'allow-nan', got {ensure_all_finite!r}")


def _check_out(out, shape: tuple[int, int], dtype, refused: bool) -> None:
    if out is None:
        return
    if refused:
        raise ValueError("out= takes a dense host result: it cannot be combined with mask= or CuPy inputs")
    if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous:
        got = f"{type(out).__name__} {getattr(out, 'shape', '')} {getattr(out, 'dtype', '')}".strip()
        raise ValueError(
            f"out must be a C-contiguous numpy array of shape {shape} and dtype {np.dtype(dtype).name} "
            f"(rows of X by rows of Y, the result's type), got {got}"
        )


def check_n_jobs(n_jobs) -> int | None:
    """``n_jobs`` as scikit-learn takes it: None or a nonzero integer."""
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0):
        raise ValueError(f"n_jobs must be None or a nonzero integer (-1 for every core), got {n_jobs!r}")
    return n_jobs


# A call of less work than this (result entries + stored entries) runs on the calling thread alone where n_jobs
# is None: waking numba's workers for each of its parallel loops costs more than they save (cosine of 200 x 3,000
# TF-IDF rows, 40,000 entries: 50 ms on 2 threads of a loaded 2-core machine, 8 ms on one; benchmarks/small_call.py).
SMALL_CALL_WORK = 1 << 18


@contextmanager
def cpu_threads(n_jobs, engine, work: int | None = None):
    """scikit-learn's ``n_jobs``, checked, as the engine's threads for the duration of a call
    (``PairwiseEngine.threads``: the CPU engine's numba threads; the GPU engine has none to set).  With
    ``n_jobs=None`` a call of less ``work`` (result and stored entries) than ``SMALL_CALL_WORK`` takes one."""
    n_jobs = check_n_jobs(n_jobs)
    if n_jobs is None and work is not None and work < SMALL_CALL_WORK:
        n_jobs = 1  # the calling thread alone: waking the workers would cost more than they save
    with engine.threads(n_jobs):
        yield
