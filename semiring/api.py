"""``semiring.pairwise``: the generalised inner product of rows against rows."""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

from . import arrays, tiling, validation
from . import backend as _backend
from . import dask as _dask
from .interfaces import call_density
from .interop import graphblas_in_out
from .ops import BUILTIN_SEMIRINGS, Semiring


def as_semiring(sr) -> Semiring:
    if isinstance(sr, Semiring):
        return sr
    if isinstance(sr, str) and sr in BUILTIN_SEMIRINGS:
        return BUILTIN_SEMIRINGS[sr]
    raise TypeError(
        f"sr must be a Semiring or the name of a built-in one ({', '.join(BUILTIN_SEMIRINGS)}), got {sr!r}; "
        "for example semiring.pairwise(X, Y, semiring.plus_times)"
    )


@graphblas_in_out
def pairwise(X, Y, sr, *, mask=None, sparse: bool = False, backend: str = "auto", working_memory: float | None = None):
    """``C[i, j] = ⊕_k X[i, k] ⊗ Y[j, k]`` for every row ``i`` of X and row ``j`` of Y.

    The columns ``k`` are those stored in both rows for an ``"intersection"``
    semiring, in either row (a missing entry read as 0) for a ``"union"`` one;
    see :class:`semiring.Semiring`.  Rows are compared against rows, so neither
    input is transposed.  ``Y=None`` compares X with itself.

    Without ``mask`` the result is a dense NumPy array of shape
    ``(X.shape[0], Y.shape[0])``; where an intersection is empty it holds the
    add monoid's identity.  With ``mask`` (a sparse matrix of that shape) only
    the entries stored in the mask are computed and the result is a CSR matrix
    with exactly the mask's pattern (mask values are ignored).

    With ``sparse=True`` the result is a CSR matrix holding only the entries
    the semiring produces, the pairs of rows sharing a stored column, as
    python-graphblas ``mxm`` gives them.  The CPU engine computes it row by
    row (Gustavson's product with a hash accumulator), with no dense
    ``m × n`` pass, so memory follows the result; the GPU engine in bands of
    rows, each band's values and shared-column counts as dense tiles within
    ``working_memory``.  Intersection semirings only: a union semiring has a
    value at every pair, and is refused with the reason.

    The result is float32 when both inputs are float32, else float64; values
    are accumulated in float64 on the CPU.  Stored values may be ±inf, not NaN.

    CuPy inputs (``cupy`` arrays, ``cupyx.scipy.sparse`` matrices) give a CuPy
    result (``cupy.ndarray``, or ``cupyx.scipy.sparse.csr_matrix`` with a
    mask); computed on the GPU, nothing leaves it: CuPy inputs are validated
    there too.

    ``graphblas.Matrix`` operands (python-graphblas) are read as SciPy CSR and
    give a ``graphblas.Matrix`` back: every entry of a dense result stored, or
    the stored entries of a masked one.

    ``working_memory`` (MiB, as scikit-learn's) bounds each tile of the dense
    result computed at once (default 1024; see ``semiring.tiling``).

    A Dask array of row blocks (any input) gives a lazy Dask array, each block
    this call on the worker holding its rows (``semiring.dask``, docs/dask.md).

    >>> import numpy as np, scipy.sparse as sp, semiring
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]]))
    >>> semiring.pairwise(X, None, semiring.min_plus)
    array([[2., 3.],
           [3., 2.]])
    """
    if _dask.is_dask(X, Y, mask):  # row blocks on the workers, a lazy Dask result (semiring.dask)
        func = functools.partial(pairwise, sr=as_semiring(sr), backend=backend, working_memory=working_memory)
        return _dask.pairs_of_blocks(func, X, Y, mask=mask, backend=backend, working_memory=working_memory)
    sr = as_semiring(sr)
    _check_sparse(sparse, sr, mask)
    engine = _backend.engine(backend)
    where = tiling.placement(engine, X, Y, mask)
    csr_kind = _csr_kind(X)  # a sparse result is a csr_array for sparse-array input
    X, Y = validation.check_pair(X, Y, allow_inf=True, verdicts=engine.csr_verdicts)
    dtype = validation.result_dtype(X, Y)
    shape = (X.shape[0], Y.shape[0])
    M = None if mask is None else validation.check_mask(mask, shape)
    Yd = engine.to_device(Y)
    if sparse:
        Xd = Yd if Y is X else engine.to_device(X)
        with tiling.scratch_budget(tiling.budget_bytes(engine, working_memory)):
            indptr, indices, data = engine.pairwise_sparse(Xd, Yd, sr, dtype)
        if where.on_device:  # built on the GPU, where it stays
            return arrays.csr_matrix_class(arrays.array_module(data))((data, indices, indptr), shape=shape)
        indptr, indices, data = (engine.to_host(a) for a in (indptr, indices, data))
        return where.give(csr_kind((data, indices, indptr), shape=shape))
    if M is None:

        def rows(r0: int, r1: int):
            return Yd if (Y is X and (r0, r1) == (0, X.shape[0])) else engine.to_device(validation.row_slice(X, r0, r1))

        def tile(Xd, c0: int, c1: int):
            Yt = Yd if (c0, c1) == (0, shape[1]) else engine.row_slice(Yd, c0, c1)
            return engine.pairwise(Xd, Yt, sr, dtype)

        per_entry = np.dtype(dtype).itemsize  # the tile itself; the engines' kernels take no m×p temporaries
        with call_density(X, Y):  # every tile takes the path the whole call's inputs choose (semiring.interfaces)
            if not engine.device_results:  # the result with a tile and the rows it densifies, checked before either
                tile_shape = tiling.tile_shape(*shape, per_entry, tiling.budget_bytes(engine, working_memory))
                validation.check_tiled_result(
                    shape,
                    dtype,
                    tile_shape,
                    per_entry,
                    engine.dense_block_bytes(X, Y, sr, dtype, *tile_shape),
                    "compute fewer rows at a time, or give a smaller working_memory, mask= or sparse=True",
                )
            D = tiling.dense(engine, shape, dtype, per_entry, working_memory, where.on_device, rows, tile)
        return where.give(D)
    Xd = Yd if Y is X else engine.to_device(X)
    return where.masked(engine, mask, M, engine.pairwise(Xd, Yd, sr, dtype, mask=engine.entries_from_csr(M)))


def _check_sparse(sparse, sr: Semiring, mask) -> None:
    """``sparse`` a bool, and a sparse result one the semiring can give (refused with the reason)."""
    if not isinstance(sparse, (bool, np.bool_)):
        raise TypeError(f"sparse must be True or False, got {sparse!r}")
    if not sparse:
        return
    if mask is not None:
        raise ValueError("give mask= or sparse=True, not both: with a mask the result is already sparse (its pattern)")
    if sr.is_union:
        raise ValueError(
            f"sparse=True needs an intersection semiring, and {sr.name!r} is a union one: it has a value at every "
            "pair of rows (columns stored in only one row count too), so its result is dense; use sparse=False, "
            "or mask= to compute chosen entries"
        )


def _csr_kind(X):
    """SciPy's sparse-array CSR for sparse-array input, else the matrix one (as SciPy's own products do)."""
    return sp.csr_array if isinstance(X, sp.sparray) else sp.csr_matrix
