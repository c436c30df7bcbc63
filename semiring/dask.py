"""Dask arrays in ``semiring.pairwise``, and the row-block plumbing the measures' Dask paths share.

A Dask array passed to a public call is read as row blocks: each block holds
whole rows (a SciPy sparse matrix or array, a NumPy array, or their CuPy
kinds).  The result is a lazy Dask array whose block ``(i, j)`` is the
single-machine call on row block ``i`` of X and row block ``j`` of Y, run on
the worker that holds them with that worker's engine (``backend="auto"``
takes a worker's GPU when it has one), with the same validation and results.
What can be checked without the data (shapes, dtypes, parameters) is checked
when the call is made; the values of a block are checked when it is computed.

Nothing here imports Dask until a Dask array is passed: :func:`is_dask` reads
the type's module, so ``import semiring`` loads no Dask.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

from . import arrays, driver, validation
from . import backend as _backend


def is_dask(*inputs) -> bool:
    """Whether any input is a Dask collection (told by its type's module: Dask is not imported)."""
    return any(type(a).__module__.split(".")[0] == "dask" for a in inputs)


def as_row_blocks(A, name: str):
    """``A`` as a 2-D Dask array of row blocks, each with every column (a non-Dask ``A`` is one block)."""
    import dask.array as da

    if not is_dask(A):
        if not (sp.issparse(A) or arrays.is_cupy(A)):
            A = np.asarray(A)
        A = da.from_array(A, chunks=A.shape, asarray=False)
    if not isinstance(A, da.Array):
        raise TypeError(f"{name} must be a dask.array.Array of row blocks, got {type(A).__name__}")
    if A.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (rows are samples, columns features), got a Dask array of shape {A.shape}"
        )
    return A.rechunk({1: -1}) if A.numblocks[1] > 1 else A


def known_rows(A, name: str) -> tuple[int, ...]:
    """The row counts of A's blocks; unknown ones (NaN, after filtering) are refused with the fix."""
    rows = A.chunks[0]
    if any(np.isnan(r) for r in rows):
        raise ValueError(f"{name} has blocks of unknown size; call {name}.compute_chunk_sizes() first")
    return tuple(int(r) for r in rows)


def result_dtype(X, Y=None) -> np.dtype:
    """The single-machine result type of X against Y, from the blocks' dtypes and widths alone.

    Checked as the single-machine call checks them (the same messages): value
    types, and equal widths.
    """
    X0 = np.empty((0, X.shape[1]), X.dtype)
    Y0 = None if Y is None else np.empty((0, Y.shape[1]), Y.dtype)
    X0, Y0 = validation.check_pair(X0, Y0)
    return validation.result_dtype(X0, Y0)


def check_call(backend: str, working_memory) -> None:
    """What the workers would refuse, refused now: ``backend``'s name and ``working_memory``.

    Whether the backend can run is the workers' to say (a GPU worker's engine may run where the client cannot).
    """
    if backend not in _backend.BACKENDS:
        _backend.resolve(backend)  # the resolver's message
    driver.check_working_memory(working_memory)


def meta(like, dtype, *, sparse: bool = False):
    """An empty block of the result's kind: CuPy when ``like``'s blocks are CuPy, NumPy/SciPy otherwise."""
    return arrays.empty_like_kind(like._meta, dtype, sparse=sparse)


def _call(X, Y, *mask, func, y_is_x: bool = False):
    try:
        return func(X, Y, mask=mask[0]) if mask else func(X, Y)
    except (ValueError, TypeError) as exc:
        # X against itself: the single-machine call names the column blocks "Y", but the caller gave only X
        message = str(exc)
        if y_is_x and message[:1] == "Y" and message[1:2] in (" ", ":"):
            raise type(exc)("X" + message[1:]) from None
        raise


def block_pairs(func, X, Y, dtype, *, mask=None):
    """The lazy result whose block ``(i, j)`` is ``func(X_i, Y_j)`` (``mask=`` its block of ``mask``).

    X and Y are row-block Dask arrays (:func:`as_row_blocks`); ``Y=None`` is X
    against itself.  Blocks follow X's rows and Y's rows.  A ``mask`` (a SciPy
    sparse matrix or a Dask array of sparse blocks) is cut the same way, and
    each block of the result is then a CSR matrix with its mask block's
    pattern.
    """
    import dask.array as da

    y_is_x = Y is None
    Y = X if Y is None else Y
    args = [X, "ik", Y, "jk"]
    if mask is not None:
        shape = (X.shape[0], Y.shape[0])
        if mask.shape != shape:
            raise ValueError(f"mask has shape {mask.shape} but the result has shape {shape} (rows of X by rows of Y)")
        if not is_dask(mask):
            mask = validation.check_mask(mask, shape)
            mask = da.from_array(mask, chunks=(X.chunks[0], Y.chunks[0]), asarray=False)
        args += [mask.rechunk((X.chunks[0], Y.chunks[0])), "ij"]
    call = functools.partial(_call, func=func, y_is_x=y_is_x)
    kind = meta(X, dtype, sparse=mask is not None)
    return da.blockwise(call, "ij", *args, dtype=dtype, meta=kind, concatenate=True)


def pairwise(X, Y, sr, *, mask=None, backend: str = "auto", working_memory: float | None = None):
    """``semiring.pairwise`` on Dask arrays: the single-machine call on each pair of row blocks (lazy)."""
    from .api import as_semiring
    from .api import pairwise as single_machine

    sr = as_semiring(sr)
    check_call(backend, working_memory)
    X = as_row_blocks(X, "X")
    Y = None if Y is None else as_row_blocks(Y, "Y")
    dtype = result_dtype(X, Y)
    func = functools.partial(single_machine, sr=sr, backend=backend, working_memory=working_memory)
    return block_pairs(func, X, Y, dtype, mask=mask)


__all__ = ["as_row_blocks", "block_pairs", "check_call", "is_dask", "known_rows", "meta", "pairwise", "result_dtype"]
