"""What the library knows of array libraries: NumPy and SciPy on the host, CuPy on the GPU, in one place.

Public calls take NumPy/SciPy or CuPy input and give results in the caller's
kind; the core and the measures ask this module which kind an array is, which
array and sparse modules go with it, and how to make one kind from the other.
Apart from here, only the GPU engine (``semiring.kernels.cuda``) names CuPy
(``tests/unit/test_architecture.py`` fails on another module that imports
it), so a new device backend is its own engine package plus its array kind
here.

Nothing here imports CuPy until a CuPy array is met: :func:`is_cupy` reads the
type's module.

>>> import numpy as np, scipy.sparse as sp
>>> from semiring import arrays
>>> arrays.is_cupy(np.ones(2)), arrays.array_module(sp.eye(2)) is np, arrays.backend_of(np.ones(2))
(False, True, None)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def is_cupy(A) -> bool:
    """Whether A is a CuPy array or a ``cupyx.scipy.sparse`` matrix (told by its module: CuPy is not imported)."""
    return type(A).__module__.split(".")[0] in ("cupy", "cupyx")


def backend_of(A) -> str | None:
    """The engine whose device holds A (``"cuda"`` for CuPy), or None for host arrays, which every engine takes."""
    return "cuda" if is_cupy(A) else None


def array_module(A):
    """``cupy`` for CuPy arrays and ``cupyx.scipy.sparse`` matrices, else ``numpy``."""
    if is_cupy(A):
        import cupy

        return cupy
    return np


def sparse_module(A):
    """``cupyx.scipy.sparse`` for CuPy arrays and matrices, else ``scipy.sparse``."""
    if is_cupy(A):
        import cupyx.scipy.sparse as csp

        return csp
    return sp


def csr_matrix_class(xp):
    """SciPy's ``csr_matrix`` for NumPy arrays (``xp`` numpy), ``cupyx.scipy.sparse``'s for CuPy ones."""
    if xp is np:
        return sp.csr_matrix
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix


def as_cupy(result):
    """A host result as the CuPy kind of it: ``cupy.ndarray`` or ``cupyx.scipy.sparse.csr_matrix``."""
    import cupy

    if sp.issparse(result):
        import cupyx.scipy.sparse as csp

        return csp.csr_matrix(result)
    return cupy.asarray(result)


def to_cupy(values, dtype=None):
    """``values`` (host or device) as a ``cupy.ndarray`` (of ``dtype``, if given)."""
    import cupy

    return cupy.asarray(values, dtype=dtype)


def cupy_csr(data, indices, indptr, shape):
    """A ``cupyx.scipy.sparse.csr_matrix`` of host or device arrays (CuPy's sparse matrices hold floats only)."""
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix((to_cupy(data, np.float64), to_cupy(indices), to_cupy(indptr)), shape=shape)


def on_host(A):
    """A on the host: a CuPy array or matrix copied back (``.get()``), anything else as it is."""
    return A.get() if is_cupy(A) else A


def empty_like_kind(like, dtype, *, sparse: bool = False):
    """An empty ``(0, 0)`` array (a CSR matrix where ``sparse``) of ``like``'s kind: CuPy, else NumPy/SciPy."""
    if sparse:
        return csr_matrix_class(array_module(like))((0, 0), dtype=dtype)
    return array_module(like).empty((0, 0), dtype)


def vstack(blocks):
    """Row blocks as one matrix of their kind: CuPy CSR for CuPy blocks, SciPy CSR for sparse ones, else dense."""
    if is_cupy(blocks[0]):
        return sparse_module(blocks[0]).vstack(blocks, format="csr")
    return sp.vstack(blocks, format="csr") if sp.issparse(blocks[0]) else np.concatenate(blocks)
