"""Input validation, in one place: every message names the argument and the rule.

Inputs are never modified: anything that must change (format, dtype, sorting,
summing duplicates) happens on a copy.

A checked matrix carries what its check proved of it (:class:`Facts`: finite values, their sign once asked) to
the engines, so that none scans for it again (``facts_of``; ``carry_facts`` passes them to a matrix of the same
values or of some of its rows).

CuPy input (``cupy`` arrays, ``cupyx.scipy.sparse`` matrices) is validated
where it lives, on the GPU, by CuPy reductions: only their scalar verdicts
reach the host, and the result is a canonical ``cupyx.scipy.sparse`` CSR
matrix.  Engines bring a checked matrix into their own memory
(``PairwiseEngine.to_device``): the GPU engine uses it as it is.  Which
library an array belongs to is ``semiring.arrays``' to say.
"""

from __future__ import annotations

import copy
import numbers
import os
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from . import backend as _backend
from .arrays import array_module, as_cupy, csr_matrix_class, is_cupy, sparse_module  # noqa: F401 (earlier callers)

FLOAT_TYPES = (np.float32, np.float64)

FACTS = ("finite", "nonnegative")


@dataclass(frozen=True)
class Facts:
    """What validation proved of a checked matrix's stored values (``facts_of``): True, False, or None where
    nothing proved it.

    A matrix carrying facts is canonical CSR (sorted column indices without repeats in every row: validation made
    it so) with signed int32 or int64 index arrays (their type is the arrays' own, read, never scanned).
    ``finite``: no stored value is NaN or infinite (proved by every check; False only where ``allow_inf``
    let an infinity through).  ``nonnegative``: no stored value is below 0 (-0.0 is not), found where a measure's
    rule or its form asks (``check_nonnegative``, ``is_nonnegative``), or where a bound measure's union term may
    ask, once a call (``semiring.distances.bound``).  ``magnitudes``: ``(low, high)``, every stored nonzero
    magnitude within [low, high] (``(inf, 0.0)`` where none is nonzero), found by an engine's one-pass check
    of finite values (``csr_verdicts``) or where first asked (``magnitudes_of``), None until then; a part's lie
    within its whole's.
    ``stored``: the stored entries, indptr's last value, as the check read it (``stored_entries``: a device
    matrix's would otherwise be copied back at each use, a wait for the device each time); None on a part.
    """

    finite: bool | None = None
    nonnegative: bool | None = None
    magnitudes: tuple[float, float] | None = None
    stored: int | None = None

    def of_part(self) -> Facts:
        """The facts of some of the entries (a slice of the rows): what holds of all holds of each part; what
        fails somewhere may hold in a part, so it is unknown there (the magnitudes stay bounds)."""
        return Facts(self.finite or None, self.nonnegative or None, self.magnitudes)


def stored_entries(A) -> int:
    """``int(A.indptr[-1])``: what the check read where A carries it (``Facts.stored``), else read (on the
    device, a copy back)."""
    facts = facts_of(A)
    return facts.stored if facts is not None and facts.stored is not None else int(A.indptr[-1])


def facts_of(A) -> Facts | None:
    """What validation proved of ``A`` (a checked matrix, or a matrix or device matrix they were carried to), or
    None: nothing, as for any matrix that did not come from a check."""
    facts = getattr(A, "facts", None)
    return facts if isinstance(facts, Facts) else None


def carry_facts(B, A, *, part: bool = False):
    """``B``, a new matrix of our own whose stored values are A's (A's arrays, or copies, in A's type or a wider
    one: a narrower one gets none) or, with ``part``, those of some of A's rows, given the facts A carries; B
    returned."""
    facts = facts_of(A)
    if facts is not None and np.dtype(B.dtype).itemsize >= np.dtype(A.dtype).itemsize:  # a narrower cast: unknown
        B.facts = facts.of_part() if part else facts
    return B


def proved(A, fact: str, values=None) -> bool | None:
    """What validation proved of ``fact`` (one of ``FACTS``) for A's stored values, or None where nothing did.

    ``values``: the values a caller reads, A's own in the caller's type; a type narrower than A's answers None (a
    cast may overflow to infinity, or round a negative value to -0.0), a wider one A's own answer (exact)."""
    facts = facts_of(A)
    if facts is None or values is not None and np.dtype(values.dtype).itemsize < np.dtype(A.dtype).itemsize:
        return None
    return getattr(facts, fact)


def all_hold(fact: str, scan, *operands) -> bool:
    """Whether ``fact`` (one of ``FACTS``) holds of every operand: each ``(A, values)``, a matrix and its stored
    values as the caller reads them (``proved``).  What validation proved answers where it can; the values of
    the others are found by one ``scan(*values)``, as a caller with no facts finds them all."""
    unknown = []
    for A, values in operands:
        known = proved(A, fact, values)
        if known is False:
            return False
        if known is None:
            unknown.append(values)
    return scan(*unknown) if unknown else True


def _with_facts(given, A, finite: bool, magnitudes=None, stored=None):
    """The checked ``A`` carrying its facts, on an object of our own: a CuPy matrix that is the caller's
    ``given`` object itself is shared through a shallow copy (its arrays, not its object: the caller's is never
    written to, see ``_as_csr_matrix``)."""
    if A is given:
        A = copy.copy(A)
    A.facts = Facts(finite=finite, magnitudes=magnitudes if finite else None, stored=stored)
    return A


def check_matrix(A, name: str, *, allow_inf: bool = False, verdicts=None) -> sp.csr_matrix:
    """``A`` as a canonical CSR matrix (sorted, unique column indices), float32 or float64.

    Accepts any SciPy sparse matrix or array and dense 2-D array-likes.  CSR
    input in canonical form with float32/float64 values is used without a copy.
    Integer and boolean values become float64.  CuPy input gives a
    ``cupyx.scipy.sparse.csr_matrix``, checked on the device.

    ``verdicts`` (an engine's ``csr_verdicts``) checks a SciPy CSR matrix's entries in one pass where it
    gives verdicts for it; elsewhere NumPy's reductions do.

    A matrix this check made (carrying its facts, ``facts_of``) is returned as it is: what the check proved of
    it holds (a Dask shard's rows, checked by its fit, are queries of every other shard's pair task).
    """
    facts = facts_of(A)
    if facts is not None and (facts.finite or allow_inf):
        return A
    given = A
    if is_cupy(A):
        return _with_facts(given, *_check_device_matrix(A, name, allow_inf))
    if sp.issparse(A):
        if A.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got a sparse array of shape {A.shape}")
        dtype = _value_dtype(A.dtype, name)
        A, copied = _signed_indices(A, name)
        if A.format != "csr":
            try:
                A = A.tocsr()  # a new object: the caller's matrix is untouched
            except (ValueError, TypeError, OverflowError) as exc:
                raise ValueError(f"{name}: cannot be converted to CSR ({exc})") from None
            copied = True
        if A.dtype != dtype:
            A = A.astype(dtype)
            copied = True
        A = _as_csr_matrix(A, copied)
        _check_pointer_arrays(A, name)
        verdict = None if verdicts is None else verdicts(A)
        if verdict is not None:
            return _with_facts(given, *_checked_by_verdicts(A, name, allow_inf, copied, verdict))
        _check_structure(A, name)
        A = _canonical(A, copied)
    else:
        if isinstance(A, (str, bytes)) or A is None:
            raise TypeError(f"{name} must be a sparse matrix or a 2-D array, got {type(A).__name__}")
        if type(A).__module__.split(".")[0] == "networkx":  # np.asarray would give a 1-D array of its nodes
            raise TypeError(
                f"{name} is a networkx {type(A).__name__}, not a matrix; pass its adjacency matrix, for example "
                f"{name} = networkx.to_scipy_sparse_array(G, nodelist=sorted(G), format='csr')"
            )
        try:
            dense = np.asarray(A)
        except (TypeError, ValueError) as exc:  # ragged lists and such
            raise TypeError(f"{name} must be a sparse matrix or a 2-D array: {exc}") from None
        _require_2d(dense, name)
        dtype = _value_dtype(dense.dtype, name)
        A = _dense_to_csr(dense.astype(dtype, copy=False))
        finite = _check_finite(A, name, allow_inf)
        # its stored values are its nonzeros: their magnitudes' bounds, two reductions, spare a row-scale-free
        # measure's range check its passes over every value (bound.rows_in_range: 7 ms of a 60 ms cosine of
        # 3,000 x 300 dense rows)
        magnitudes = None
        if finite and A.nnz:
            size = np.abs(A.data)
            magnitudes = (float(size.min()), float(size.max()))
        return _with_facts(given, A, finite, magnitudes)
    return _with_facts(given, A, _check_finite(A, name, allow_inf))


def magnitudes_of(A) -> tuple[float, float]:
    """The smallest nonzero and the largest magnitude of the stored values of ``A`` (checked by ``check_matrix``,
    finite): what A's facts say, else found (``stored_magnitudes``) and kept in them, for the next question.  A
    fitted index's rows are so found once, at fit, and carried to every Dask pair of shards that asks them (a
    pair of 125,000-row shards scanned them again in 42 ms of its 0.68 s on an H200's host)."""
    facts = facts_of(A)
    if facts is not None and facts.magnitudes is not None:
        return facts.magnitudes
    found = stored_magnitudes(A)
    if facts is not None and facts.finite:
        A.facts = replace(facts, magnitudes=found)
    return found


def stored_magnitudes(A) -> tuple[float, float]:
    """The smallest nonzero and the largest magnitude of A's stored (finite) values, ``(inf, 0.0)`` where none is
    nonzero: the largest from two reductions, the smallest a bounded chunk of entries at a time
    (``entry_chunks``)."""
    xp = array_module(A)
    nnz = stored_entries(A)
    if nnz == 0:
        return (np.inf, 0.0)
    data = A.data[:nnz]
    high = max(float(data.max()), -float(data.min()))
    low = np.inf
    if high > 0:
        for e0, e1 in entry_chunks(nnz):
            size = xp.abs(data[e0:e1])
            low = min(low, float(xp.where(size > 0, size, xp.inf).min()))
    return (low, high)


def _dense_to_csr(D):
    """``csr_matrix(D)`` (its nonzeros stored, in order), NumPy's or CuPy's, made from one mask: the values and
    their columns picked by it in row order, the row pointers from its counts.  SciPy finds the entries one by
    one and then sorts them: 2.1 s for 20,000 x 768 rows with one zero, against 0.06 s so; CuPy's constructor
    (cuSPARSE's conversion, then a sort of the entries) took 14 ms of a 29 ms cosine of those rows on an H200."""
    xp = array_module(D)
    m, n = D.shape
    index = np.int32 if max(D.size, n) < 2**31 else np.int64
    if xp is not np and index is np.int64:  # CuPy's sparse matrices index with int32: its own conversion then
        return sparse_module(D).csr_matrix(D)
    stored = D != 0
    indptr = xp.zeros(m + 1, dtype=index)
    indptr[1:] = xp.cumsum(xp.count_nonzero(stored, axis=1))
    indices = xp.broadcast_to(xp.arange(n, dtype=index), (m, n))[stored]
    A = csr_matrix_class(xp)((D[stored], indices, indptr), shape=(m, n))
    A.has_canonical_format = True
    return A


def _check_finite(A, name: str, allow_inf: bool) -> bool:
    """NaN refused, infinity too unless ``allow_inf``; whether every stored value is finite."""
    xp = array_module(A)
    if A.nnz and not bool(xp.isfinite(A.data).all()):
        _refuse_nonfinite(name, bool(xp.isnan(A.data).any()), True, allow_inf)
        return False
    return True


def _refuse_nonfinite(name: str, nan: bool, inf: bool, allow_inf: bool) -> None:
    """The rule on values every check states alike: NaN refused, infinity too unless ``allow_inf``."""
    if nan:
        raise ValueError(f"{name} contains NaN; stored values must be numbers")
    if inf and not allow_inf:
        raise ValueError(f"{name} contains infinity; all stored values must be finite")


def _check_device_matrix(A, name: str, allow_inf: bool):
    """``check_matrix`` for CuPy input, on the device: the same rules, the same messages, no host copy; with
    whether every stored value is finite and the values' magnitudes where the check found them."""
    xp, xsp = array_module(A), sparse_module(A)
    if xsp.issparse(A):
        dtype = _value_dtype(A.dtype, name)
        copied = A.format != "csr"
        A = A.tocsr() if copied else A
        if A.dtype != dtype:
            A, copied = A.astype(dtype), True
    elif isinstance(A, xp.ndarray):
        _require_2d(A, name)
        dtype = _value_dtype(A.dtype, name)
        A, copied = _dense_to_csr(A.astype(dtype, copy=False)), True
    else:
        raise TypeError(f"{name} must be a sparse matrix or a 2-D array, got {type(A).__module__}.{type(A).__name__}")
    return _checked_on_device(A, name, allow_inf, copied)


def _checked_on_device(A, name: str, allow_inf: bool, copied: bool):
    """Device CSR ``A`` checked by one kernel of the engine whose device holds it (its ``csr_verdicts``).

    The engine is reached through the resolver at call time: the core imports no engine.
    """
    _check_pointer_arrays(A, name)
    verdict = _backend.engine_of(A).csr_verdicts(A)
    return _checked_by_verdicts(A, name, allow_inf, copied, verdict)


def _checked_by_verdicts(A, name: str, allow_inf: bool, copied: bool, verdict: dict[str, int]):
    """CSR ``A`` (its index arrays' types and indptr's length checked) judged by what an engine's one pass found
    in it (``csr_verdicts``: the GPU engine's kernel, or the CPU engine's), with the NumPy checks' messages;
    canonical order restored on a copy when the pass finds a row out of order or repeated.  ``(A, whether every
    stored value is finite, the values' magnitudes where the pass found them, its stored entries where A is the
    matrix the pass read)``."""
    n = A.shape[1]
    nnz = _check_pointer_ends(A, name, verdict["first"], verdict["last"])
    if verdict["decreasing rows"]:
        raise ValueError(f"{name}: indptr must be non-decreasing")
    low, high = verdict["lowest column"], verdict["highest column"]
    if nnz and (low < 0 or high >= n):
        raise ValueError(f"{name}: column indices must lie in [0, {n}), found {low}..{high}")
    if verdict["unsorted"]:
        A = _canonical(A, copied)  # repeats summed: their sums are checked again below (magnitudes unknown)
        return A, _check_finite(A, name, allow_inf), None, None
    _refuse_nonfinite(name, verdict["nan"], verdict["inf"], allow_inf)
    return A, not verdict["inf"], verdict.get("magnitudes"), nnz


def _canonical(A, copied: bool):
    """CSR ``A`` with sorted, unique column indices in every row: A itself when it has them, else its repeats
    summed and indices sorted on a copy (``copied``: A is already ours), on the device for CuPy."""
    if _device_canonical(A) if is_cupy(A) else A.has_canonical_format:
        return A
    if not (copied or is_cupy(A)) and A.indptr[-1] <= 1 << 24 and A.shape[1] <= 4 * A.indptr[-1] + (1 << 14):
        A = _sorted_by_transposes(A)  # new arrays, the caller's untouched (one transient copy more than a sort)
    elif not copied:
        A = A.copy()
    A.sum_duplicates()
    return A


def _sorted_by_transposes(A: sp.csr_matrix) -> sp.csr_matrix:
    """A's entries with each row's in column order (repeats kept, in their order), by two counting sorts (to
    CSC and back: linear, a pointer a column), in A's index type: 3x faster than SciPy's sort of each row."""
    B = A.tocsc().tocsr()
    B.indptr, B.indices = B.indptr.astype(A.indptr.dtype, copy=False), B.indices.astype(A.indices.dtype, copy=False)
    B.has_sorted_indices = True
    return B


def _device_canonical(A) -> bool:
    """Whether every row's column indices strictly increase (sorted, no duplicates): one reduction."""
    nnz = int(A.indptr[-1])
    if nnz < 2:
        return True
    starts = array_module(A).zeros(nnz, dtype=bool)
    first = A.indptr[:-1]
    starts[first[first < nnz]] = True  # a row's first entry need not exceed the previous row's last
    indices = A.indices[:nnz]
    return bool(((indices[1:] > indices[:-1]) | starts[1:]).all())


_INDEX_ATTRIBUTES = ("indptr", "indices", "row", "col", "offsets")


def _signed_indices(A, name: str):
    """``(A, copied)``: A with int32/int64 index arrays.

    SciPy's and our kernels' index code is compiled for signed 32- and 64-bit
    indices only; unsigned or narrower ones are converted to int64 on a copy,
    values beyond int64 refused naming the argument.
    """
    arrays = {a: getattr(A, a) for a in _INDEX_ATTRIBUTES if isinstance(getattr(A, a, None), np.ndarray)}
    if all(v.dtype in (np.int32, np.int64) for v in arrays.values()):
        return A, False
    for attr, v in arrays.items():
        if v.dtype.kind not in "iu":
            raise TypeError(f"{name}: index array {attr} must hold integers, got {v.dtype}")
        if v.size and v.dtype == np.uint64 and v.max() > np.iinfo(np.int64).max:
            raise ValueError(f"{name}: index array {attr} ({v.dtype}) holds {v.max()}, beyond int64")
    A = A.copy()
    for attr in arrays:
        setattr(A, attr, getattr(A, attr).astype(np.int64))
    return A, True


def _as_csr_matrix(A, copied: bool) -> sp.csr_matrix:
    """A ``csr_matrix`` of A's arrays (A may be a ``csr_array``): A itself where it is ours (``copied``), else a
    new object sharing them, so that what SciPy caches on a matrix as it is asked (``has_canonical_format``
    writes ``_has_canonical_format``) is cached on ours, and the caller's object is never written to: a Dask
    worker sending a query block to another while a task checked the same block failed ("dictionary changed
    size during iteration") and the call waited forever.  What the caller's object already knows is kept."""
    if copied and isinstance(A, sp.csr_matrix):
        return A
    view = sp.csr_matrix(A.shape, dtype=A.dtype)  # its arrays set, not passed: the constructor would narrow them
    view.indptr, view.indices, view.data = A.indptr, A.indices, A.data
    known = A.__dict__.get("_has_canonical_format")  # read from its dict: the property would compute and write
    if known is not None:
        view.has_canonical_format = known
    return view


def _value_dtype(dtype: np.dtype, name: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype in FLOAT_TYPES:
        return dtype
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    raise TypeError(f"{name} has dtype {dtype}; values must be real numbers (float32, float64, integer or bool)")


def _check_pointers(A, name: str) -> int:
    """The rules of a CSR matrix's arrays that need no pass over its entries; the end of its entries."""
    _check_pointer_arrays(A, name)
    first, last = (int(x) for x in A.indptr[[0, -1]].tolist())  # one copy back for CuPy arrays
    return _check_pointer_ends(A, name, first, last)


def _check_pointer_arrays(A, name: str) -> None:
    """The index arrays' types and indptr's length (no value of them read)."""
    indptr, indices = A.indptr, A.indices
    if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
        raise TypeError(f"{name}: CSR index arrays must be integers, got {indptr.dtype} and {indices.dtype}")
    if indptr.shape != (A.shape[0] + 1,):
        raise ValueError(f"{name}: indptr must have {A.shape[0] + 1} entries (rows + 1), got {indptr.shape[0]}")


def _check_pointer_ends(A, name: str, first: int, last: int) -> int:
    """indptr's first and last values against the stored arrays; the end of the entries."""
    if first != 0 or last > A.indices.shape[0] or last > A.data.shape[0]:
        raise ValueError(f"{name}: indptr must start at 0 and end at most at the number of stored values")
    return last


def _check_structure(A, name: str) -> None:
    """Reject malformed CSR arrays, which would otherwise read out of bounds in a kernel.

    NumPy or CuPy arrays (a reduction per rule for CuPy: masks); a CuPy matrix given as data is checked by
    one kernel instead (``_checked_on_device``).
    """
    xp = array_module(A)
    m, n = A.shape
    indptr, indices = A.indptr, A.indices
    last = _check_pointers(A, name)
    if m and bool((xp.diff(indptr) < 0).any()):
        raise ValueError(f"{name}: indptr must be non-decreasing")
    used = indices[:last]
    if used.size:
        low, high = int(used.min()), int(used.max())
        if low < 0 or high >= n:
            raise ValueError(f"{name}: column indices must lie in [0, {n}), found {low}..{high}")


def row_slice(A, r0: int, r1: int):
    """Rows ``r0:r1`` of canonical CSR ``A``, its values and column indices as views, in A's index type.

    Not ``A[r0:r1]`` for SciPy: it narrows int64 indices to int32 where they fit, and each index type the
    kernels meet is another compile of each of them.  CuPy's CSR holds int32 indices only: sliced as it is.
    All the rows: A itself (CuPy's slice copies the values and indices, 25 MiB of 2,048 scRNA-like rows on
    the GPU that the memory budget does not count).
    """
    if (r0, r1) == (0, A.shape[0]):
        return A
    if is_cupy(A):
        return carry_facts(A[r0:r1], A, part=True)
    lo, hi = A.indptr[r0], A.indptr[r1]
    rows = type(A)((r1 - r0, A.shape[1]), dtype=A.dtype)
    rows.data, rows.indices, rows.indptr = A.data[lo:hi], A.indices[lo:hi], A.indptr[r0 : r1 + 1] - lo
    rows.has_canonical_format = True  # rows of a canonical matrix
    return carry_facts(rows, A, part=True)


# Entries an elementwise pass over a matrix's values handles at a time (row sums, column scaling, column
# variances): each entry costs some 24 bytes of temporaries (its row or column, a gathered float64, the result),
# so scRNA-like rows (12.9 M entries) took 250-500 MiB in one piece on an H200.
ENTRY_CHUNK = 1 << 22


def entry_chunks(nnz: int):
    """``(e0, e1)`` ranges of at most ``ENTRY_CHUNK`` entries covering ``0..nnz``."""
    for e0 in range(0, nnz, ENTRY_CHUNK):
        yield e0, min(nnz, e0 + ENTRY_CHUNK)


def check_pair(X, Y, *, allow_inf: bool = False, verdicts=None):
    """Validate X and Y (``Y=None`` means X against itself) and their widths (``verdicts``: see ``check_matrix``)."""
    same = Y is None or Y is X  # one matrix against itself: checked once, one object (its dense rows made once)
    X = check_matrix(X, "X", allow_inf=allow_inf, verdicts=verdicts)
    Y = X if same else check_matrix(Y, "Y", allow_inf=allow_inf, verdicts=verdicts)
    if X.shape[1] != Y.shape[1]:
        _refuse_widths(X, Y)
    return X, Y


def dense_device_pair(X, Y):
    """``(X, Y, dtype)``: dense CuPy rows (``Y=None``: X against itself, one object) kept dense, as 2-D
    C-contiguous arrays of the result's type, with the rules ``check_pair`` states of their shapes and types
    (the same messages); their values are not read here (an engine's ``dense_expanded`` pass finds what
    ``judge_dense`` rules on).  None unless both are dense CuPy arrays with a row and a column each: then
    ``check_pair`` takes them, as CSR."""
    same = Y is None or Y is X
    given = [X] if same else [X, Y]
    if not all(is_cupy(A) and isinstance(A, array_module(A).ndarray) for A in given):
        return None
    for A, name in zip(given, ("X", "Y")):
        _require_2d(A, name)
    dtype = np.result_type(*(_value_dtype(A.dtype, name) for A, name in zip(given, ("X", "Y"))))
    if not same and X.shape[1] != Y.shape[1]:
        _refuse_widths(X, Y)
    if any(0 in A.shape for A in given):
        return None
    xp = array_module(X)
    X = xp.ascontiguousarray(X, dtype=dtype)  # the caller's own array where it is already so: never written
    return X, X if same else xp.ascontiguousarray(Y, dtype=dtype), dtype


def judge_dense(verdict: dict, name: str, allow_inf: bool = False) -> None:
    """Dense rows judged by what an engine's pass found in their values (``PairwiseEngine.dense_verdicts``), with
    the messages every check gives."""
    _refuse_nonfinite(name, verdict["nan"], verdict["inf"], allow_inf)


def _require_2d(A, name: str) -> None:
    """Dense input's one rule of shape, as scikit-learn states it."""
    if A.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (rows are samples, columns features), got shape {A.shape}; "
            "Reshape your data: x.reshape(1, -1) for a single sample"
        )


def _refuse_widths(X, Y) -> None:
    raise ValueError(
        f"X has {X.shape[1]} columns but Y has {Y.shape[1]}; rows are compared column by column, "
        "so both must have the same number of columns (features)"
    )


def lowest_value(A) -> float:
    """The smallest stored value of ``A`` (checked by ``check_matrix``), 0.0 when it stores none; on the host
    or the device, wherever A lives."""
    return float(A.data[: stored_entries(A)].min()) if A.nnz else 0.0


def is_nonnegative(A) -> bool:
    """Whether no stored value of ``A`` (checked by ``check_matrix``) is negative: what A's facts say, else
    found (one pass) and kept in them, for the engines and the next question."""
    known = proved(A, "nonnegative")
    if known is None:
        known = lowest_value(A) >= 0
        facts = facts_of(A)
        if facts is not None:
            A.facts = replace(facts, nonnegative=known)
    return known


def check_nonnegative(A, name: str, metric: str) -> None:
    """On the host or the device, wherever ``A`` (checked by ``check_matrix``) lives."""
    if is_nonnegative(A):
        return
    low = lowest_value(A)
    raise ValueError(
        f"{name} contains negative values (min {low!r}); metric {metric!r} is defined "
        "for non-negative data (counts or probabilities) only"
    )


def check_mask(mask, shape: tuple[int, int]):
    """The mask's pattern as canonical CSR; its values are ignored (structural mask).

    A ``cupyx.scipy.sparse`` mask is checked on the device and stays there.
    """
    on_device = is_cupy(mask)
    if not sparse_module(mask).issparse(mask):
        raise TypeError(
            "mask must be a SciPy sparse matrix (or a cupyx.scipy.sparse one) whose pattern selects the entries to "
            f"compute, got {type(mask).__name__}"
        )
    if mask.shape != shape:
        raise ValueError(f"mask has shape {mask.shape} but the result has shape {shape} (rows of X by rows of Y)")
    copied = mask.format != "csr"
    M = mask.tocsr() if copied else mask
    M = M if on_device else _as_csr_matrix(M, copied)
    _check_structure(M, "mask")
    return _canonical(M, copied)


def check_positive(value, name: str, rule: str = "> 0", *, finite: bool = False) -> float:
    """``value`` as a float > 0 (and finite where ``finite``), or an error naming ``name`` and the rule."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not value > 0 or (finite and value == np.inf):
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    return value


def result_dtype(X: sp.csr_matrix, Y: sp.csr_matrix) -> np.dtype:
    """float32 when both inputs are float32 (as scikit-learn does), else float64."""
    return np.result_type(X.dtype, Y.dtype)


def available_memory_bytes() -> int | None:
    """Host memory that can be allocated now without swapping (Linux ``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def format_bytes(nbytes: float) -> str:
    """``nbytes`` in GiB, MiB, KiB or bytes, as the memory errors write it."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:,.1f} {unit}"
    return f"{int(nbytes)} bytes"


def check_allocation(nbytes: int, what: str, hint: str = "") -> None:
    """Refuse, before allocating, ``nbytes`` of host memory that is not available (a ``MemoryError`` naming both).

    Checked against what the system says is available now, not against the
    overcommit limit: a result that only fits by swapping would not finish.

    >>> check_allocation(10**18, "the result (10^9 x 10^9 float64)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    MemoryError: the result (10^9 x 10^9 float64) needs 931,322,574.6 GiB of memory; ... available
    """
    available = available_memory_bytes()
    if available is not None and nbytes > available:
        raise MemoryError(
            f"{what} needs {format_bytes(nbytes)} of memory; {format_bytes(available)} is available"
            + (f"; {hint}" if hint else "")
        )


def check_dense_result(shape: tuple[int, int], dtype, hint: str = "") -> None:
    """A dense ``m × n`` result must fit the memory available: refused before it is allocated, naming the sizes."""
    m, n = shape
    nbytes = int(m) * int(n) * np.dtype(dtype).itemsize
    check_allocation(nbytes, f"the dense result ({m:,} x {n:,} {np.dtype(dtype).name})", hint)


def check_tiled_result(
    shape: tuple[int, int], dtype, tile: tuple[int, int], bytes_per_entry: int, block_bytes: int, hint: str = ""
) -> None:
    """A dense host result computed in tiles of ``tile`` (rows, columns) must fit the memory available with one
    tile's temporaries beside it, refused before either is allocated: ``bytes_per_entry`` of every tile entry
    (the tile's own buffers) and ``block_bytes`` an engine makes for the tile beyond them (densified rows).  A
    tile that is the whole result is the result, its buffers among its temporaries.

    >>> check_tiled_result((10**5, 10**5), "float64", (10**4, 10**5), 8, 10**12)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    MemoryError: the dense result (100,000 x 100,000 float64) with its tiles' temporaries (931.3 GiB densified ...
    """
    (m, n), (rows, cols) = shape, tile
    itemsize = np.dtype(dtype).itemsize
    whole = rows >= m and cols >= n
    entries = int(rows) * int(cols) * (max(bytes_per_entry, itemsize) if whole else bytes_per_entry)
    nbytes = entries + block_bytes + (0 if whole else int(m) * int(n) * itemsize)
    densified = f" ({format_bytes(block_bytes)} densified rows a tile)" if block_bytes else ""
    check_allocation(
        nbytes, f"the dense result ({m:,} x {n:,} {np.dtype(dtype).name}) with its tiles' temporaries{densified}", hint
    )
