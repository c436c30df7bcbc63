"""``pairwise_distances``: a measure from ``semiring.distances.specs`` run by the blocked driver."""

from __future__ import annotations

import numpy as np

from semiring import backend as _backend
from semiring import dask as _sdask
from semiring import driver, validation

from .measure import BoundMeasure
from .specs import resolve_metric

__all__ = ["pairwise_distances", "resolve_metric"]


def pairwise_distances(
    X, Y=None, metric: str = "euclidean", *, backend: str = "auto", working_memory: float | None = None, **params
) -> np.ndarray:
    """Distances between the rows of X and the rows of Y (X itself when Y is None).

    ``metric`` takes SciPy/scikit-learn names and aliases (see
    ``distances.METRICS``); the result equals ``scipy.spatial.distance.cdist`` on
    the densified input where SciPy defines the measure, except where the docs
    state otherwise.  Inputs are SciPy sparse matrices/arrays or dense arrays;
    the result is a dense array, float32 when both inputs are float32.  CuPy
    inputs (``cupy`` arrays, ``cupyx.scipy.sparse``) give a ``cupy.ndarray``,
    which, computed on the GPU, never leaves it (the inputs are validated on a
    host copy).

    ``working_memory`` (MiB, as scikit-learn) bounds the engine's temporaries:
    rows of X are processed in batches whose buffers fit it (``semiring.driver``:
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
    """
    if _sdask.is_dask(X, Y):  # row blocks on the workers, a lazy Dask result (docs/dask.md)
        from . import dask as _dask

        return _dask.pairwise_distances(X, Y, metric, backend, working_memory, params)
    spec, values = resolve_metric(metric, params)
    engine = _backend.engine(backend)
    where = driver.placement(engine, X, Y)
    X, Y = validation.check_pair(validation.from_cupy(X), validation.from_cupy(Y))
    if spec.nonnegative:
        validation.check_nonnegative(X, "X", spec.name)
        if Y is not X:
            validation.check_nonnegative(Y, "Y", spec.name)
    working_memory = driver.check_working_memory(working_memory)  # refused before any work
    dtype = validation.result_dtype(X, Y)
    measure = BoundMeasure(engine, spec, values, dtype)
    Yrows = measure.prepare(Y)

    def rows(r0: int, r1: int):  # X against itself in one batch shares Y's preparation and norms
        return Yrows if (Y is X and (r0, r1) == (0, X.shape[0])) else measure.prepare(X[r0:r1])

    def tile(Xrows, c0: int, c1: int):
        return measure.block(Xrows, Yrows.slice(engine, c0, c1))

    shape = (X.shape[0], Y.shape[0])
    D = driver.dense(engine, shape, dtype, measure.bytes_per_entry, working_memory, where.on_device, rows, tile)
    return where.give(D)
