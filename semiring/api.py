"""``semiring.pairwise``: the generalised inner product of rows against rows."""

from __future__ import annotations

import numpy as np

from . import backend as _backend
from . import dask as _dask
from . import driver, validation
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
def pairwise(X, Y, sr, *, mask=None, backend: str = "auto", working_memory: float | None = None):
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
    result computed at once (default 1024; see ``semiring.driver``).

    A Dask array of row blocks (any input) gives a lazy Dask array, each block
    this call on the worker holding its rows (``semiring.dask``, docs/dask.md).

    >>> import numpy as np, scipy.sparse as sp, semiring
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]]))
    >>> semiring.pairwise(X, None, semiring.min_plus)
    array([[2., 3.],
           [3., 2.]])
    """
    if _dask.is_dask(X, Y, mask):  # row blocks on the workers, a lazy Dask result (semiring.dask)
        return _dask.pairwise(X, Y, sr, mask=mask, backend=backend, working_memory=working_memory)
    sr = as_semiring(sr)
    engine = _backend.engine(backend)
    where = driver.placement(engine, X, Y, mask)
    X, Y = validation.check_pair(X, Y, allow_inf=True)
    dtype = validation.result_dtype(X, Y)
    shape = (X.shape[0], Y.shape[0])
    M = None if mask is None else validation.check_mask(mask, shape)
    Yd = engine.to_device(Y)
    if M is None:

        def rows(r0: int, r1: int):
            return Yd if (Y is X and (r0, r1) == (0, X.shape[0])) else engine.to_device(X[r0:r1])

        def tile(Xd, c0: int, c1: int):
            Yt = Yd if (c0, c1) == (0, shape[1]) else engine.row_slice(Yd, c0, c1)
            return engine.pairwise(Xd, Yt, sr, dtype)

        per_entry = np.dtype(dtype).itemsize  # the tile itself; the engines' kernels take no m×p temporaries
        return where.give(driver.dense(engine, shape, dtype, per_entry, working_memory, where.on_device, rows, tile))
    Xd = Yd if Y is X else engine.to_device(X)
    return where.masked(engine, mask, M, engine.pairwise(Xd, Yd, sr, dtype, mask=engine.entries_from_csr(M)))
