"""Row norms, elementwise expansions, entry selection and scattering, on the device.

What ``semiring.distances`` builds a measure from around the products: ``Σ f(x)``
per row (:func:`row_norm`), ``f(c0, c1, nx*, ny*, n)`` per entry
(:func:`expand`, see ``semiring.interfaces.EXPANSION_VARIABLES``), the entries where
a condition holds (:func:`select`, as :class:`semiring.interfaces.Entries`), and
values written at entries (:func:`scatter`).
"""

from __future__ import annotations

import hashlib

import numpy as np

from semiring.interfaces import Entries

from . import launch, source
from .launch import DeviceCSR, common_index, device_params, value_type


@source.memo_by_identity
def label(tree) -> str:
    return "e" + hashlib.sha1(repr(tree).encode()).hexdigest()[:12]


def row_norm(A: DeviceCSR, tree, dtype=np.float64, reduce: str = "sum"):
    """``Σ_k f(A[i, k])`` over each row's stored values, in ``dtype`` (float32 or float64); ``reduce="max"`` or
    ``"min"``: their maximum or minimum (∓inf for an empty row)."""
    return row_norms(A, (tree,), dtype, (), reduce)[0]


def expand(tree, param_names, params, terms, xnorms, ynorms, ncols: int, out):
    """``out[i, j] = f(c0[i,j], c1[i,j], nx*[i], ny*[j], n)`` on the device; ``out`` is 2-D."""
    value_name, T = value_type(out.dtype)
    m, p = out.shape
    kernel = source.render_expansion(tree, tuple(param_names), label(tree), value_name)
    args = (*operands(T, terms, xnorms, ynorms), np.int64(m), np.int64(p), np.int64(ncols), device_params(params), out)
    launch.launch(kernel, m * p, args)
    return out


def row_norms(A: DeviceCSR, trees, dtype=np.float64, terms=(), reduce: str = "sum") -> list:
    """``Σ_k f(A[i, k])`` (or the max or min, ``reduce``) for each of ``trees`` over each row's stored values, in
    ``dtype``; with ``terms`` (a measure's row terms) ``g(nx0[i], nx1[i], n)`` for each of them instead, the sums
    as ``nx0``, ``nx1`` and A's columns as ``n``: one kernel, one pass over the values
    (``source.render_row_norms``; float32 values read as they are, whatever ``dtype``)."""
    import cupy

    value_name, T = value_type(dtype)
    data_name, D = value_type(A.data.dtype)
    index_type, (indptr,) = common_index(A.indptr)
    trees, terms = tuple(trees), tuple(terms)
    m = A.shape[0]
    out = cupy.empty((len(terms) or len(trees), m), dtype=T)
    kernel = source.render_row_norms(trees, terms, label((trees, terms)), value_name, index_type, data_name, reduce)
    launch.launch(kernel, m * 32, (indptr, A.data.astype(D, copy=False), np.int64(m), np.int64(A.shape[1]), out))
    return list(out)


def row_shares(indptr, values, root: bool = False):
    """Each of the stored ``values`` (of the CSR rows ``indptr``) divided by its row's sum, its square root with
    ``root``: one kernel (``source.render_row_shares``), a new array in the values' type."""
    import cupy

    value_name, T = value_type(values.dtype)
    index_type, (indptr,) = common_index(indptr)
    out = cupy.empty(values.size, T)
    m = indptr.size - 1
    launch.launch(source.render_row_shares(value_name, index_type, root), m * 32, (indptr, values, np.int64(m), out))
    return out


def operands(T, terms, xnorms, ynorms) -> list:
    """c0, c1, nx0, nx1, ny0, ny1 in type T; a dummy stands for each one the expression does not read."""
    dummy = launch.empty(1, T)
    pad = [a.astype(T, copy=False) for a in terms] + [dummy] * (2 - len(terms))
    pad += [a.astype(T, copy=False) for a in xnorms] + [dummy] * (2 - len(xnorms))
    return pad + [a.astype(T, copy=False) for a in ynorms] + [dummy] * (2 - len(ynorms))


# The entries a selection lists go to buffers of 1/FLAG_ROOM_SHARE of the result, at least FLAG_ROOM_MIN
# entries (hits are rare: entries to recompute); where more hit, the kernel runs again with room for all.
FLAG_ROOM_SHARE = 256
FLAG_ROOM_MIN = 1024


def flag_room(m: int, p: int) -> int:
    """The entries of an ``m × p`` result a selection's buffers hold at first (``FLAG_ROOM_SHARE``)."""
    return max(FLAG_ROOM_MIN, m * p // FLAG_ROOM_SHARE)


def flag_index(shape: tuple[int, int]) -> tuple[str, type]:
    """The index type (name, NumPy type) of listed entries of a result of ``shape``: int32 where positions fit,
    so the merge that recomputes them keeps int32 row arrays too."""
    return ("int32", np.int32) if max(shape) < 2**31 else ("int64", np.int64)


def no_entries(shape: tuple[int, int]) -> Entries:
    """No entries of an ``m × p`` result, in the index type ``select`` gives it."""
    import cupy

    I = flag_index(shape)[1]
    return Entries(cupy.empty(0, I), cupy.empty(0, I))


def select(
    tree, param_names, params, terms, xnorms, ynorms, ncols: int, shape: tuple[int, int], limit: int | None = None
) -> Entries | int:
    """The entries where the condition holds, in no particular order.

    Listed by a kernel with a counter (``render_expansion(select=True)``): the
    memory taken is that of the hits, never an m×p flag array.  The buffers
    start at ``flag_room`` entries (at most ``limit``); if more hit, the kernel
    runs once more with buffers of the exact size it counted — unless that is
    over ``limit``: then the number of hits is returned instead, nothing kept.
    """
    import cupy

    value_name, T = value_type(terms[0].dtype)
    m, p = shape
    index_type, I = flag_index((m, p))
    kernel = source.render_expansion(tree, tuple(param_names), label(tree), value_name, True, index_type)
    args = (*operands(T, terms, xnorms, ynorms), np.int64(m), np.int64(p), np.int64(ncols), device_params(params))
    capacity = flag_room(m, p) if limit is None else max(1, min(flag_room(m, p), limit))
    while True:
        rows, cols = cupy.empty(capacity, I), cupy.empty(capacity, I)
        count = cupy.zeros(1, np.uint64)
        launch.launch(kernel, m * p, (*args, np.int64(capacity), rows, cols, count))
        hits = int(count[0])
        if hits <= capacity:
            return Entries(rows[:hits], cols[:hits])
        if limit is not None and hits > limit:
            return hits
        capacity = hits


def entries_from_csr(M) -> Entries:
    """The stored entries of a CSR matrix (SciPy's or CuPy's), in its CSR order, on the device."""
    import cupy

    indptr, nnz = cupy.asarray(M.indptr), int(M.indptr[-1])
    return Entries(launch.entry_rows(indptr, nnz, M.indices.dtype), cupy.asarray(M.indices[:nnz]))


def scatter(out, entries: Entries, values) -> None:
    """``out[rows[s], cols[s]] = values[s]`` for every entry, in place."""
    rows, cols = entries
    out[rows, cols] = values


def transposed_columns(a, c0: int, c1: int):
    """Columns ``c0:c1`` of a C-contiguous 2-D device array, transposed into a new C-contiguous one
    (``source.render_transpose``: through shared memory, both sides' accesses in rows)."""
    import cupy

    if a.dtype not in (np.float32, np.float64) or not a.flags.c_contiguous:
        return cupy.ascontiguousarray(a[:, c0:c1].T)
    m, n = a.shape
    p = c1 - c0
    out = cupy.empty((p, m), a.dtype)
    if out.size:
        squares = -(-m // 32) * -(-p // 32)
        kernel = source.render_transpose(value_type(a.dtype)[0])
        args = (a, np.int64(m), np.int64(n), np.int64(c0), np.int64(p), out)
        launch.run(launch.function(kernel), (squares,), (32, 8), args)
    return out
