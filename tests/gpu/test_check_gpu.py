"""CuPy input checked by one kernel (``validation._checked_on_device``) against the host checks of the same
matrix as SciPy (marked ``gpu``): the same error message, or the same canonical matrix.

The matrices are built from raw CSR arrays, so that they can break every rule: rows out of order or
repeated, column indices out of range, a decreasing or overlong indptr, NaN and infinity (also made by
summing repeats), empty rows and matrices, float32/float64 values, int32/int64 indices.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from semiring import validation


@st.composite
def raw_csr(draw):
    m, n = draw(st.integers(0, 6)), draw(st.integers(1, 8))
    counts = draw(st.lists(st.integers(0, 5), min_size=m, max_size=m))
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    nnz = int(indptr[-1])
    rows = [sorted(draw(st.lists(st.integers(0, n - 1), min_size=c, max_size=c, unique=c <= n))) for c in counts]
    indices = np.array([c for r in rows for c in r], dtype=np.int64)
    # no subnormals: CuPy's sum_duplicates flushes float32 ones to 0 (the GPU's arithmetic), SciPy keeps them
    floats = st.floats(-3, 3, width=32, allow_subnormal=False)
    data = np.array(draw(st.lists(floats, min_size=nnz, max_size=nnz)), dtype=np.float64)
    fault = draw(st.sampled_from(["none", "unsorted", "range", "negative", "indptr", "nan", "inf", "big"]))
    if nnz and fault == "unsorted":
        indices = indices[::-1].copy()
    elif nnz and fault == "range":
        indices[draw(st.integers(0, nnz - 1))] = n + draw(st.integers(0, 3))
    elif nnz and fault == "negative":
        indices[draw(st.integers(0, nnz - 1))] = -1
    elif m >= 2 and fault == "indptr":
        indptr[1], indptr[2] = indptr[2] + 1, indptr[1]  # decreasing (or beyond the entries at the end)
    elif nnz and fault in ("nan", "inf"):
        data[draw(st.integers(0, nnz - 1))] = np.nan if fault == "nan" else -np.inf
    elif nnz and fault == "big":  # finite values whose repeats sum to infinity in float32
        indices[:] = 0
        data[:] = 3e38
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    index = draw(st.sampled_from([np.int32, np.int64]))
    return data.astype(dtype), indices.astype(index), indptr.astype(index), (m, n)


def outcome(A, allow_inf: bool):
    """``check_matrix``'s checked matrix as host (indptr, indices, data, dtype), or its error's type and message."""
    try:
        B = validation.check_matrix(A, "X", allow_inf=allow_inf)
    except (ValueError, TypeError) as exc:
        return type(exc).__name__, str(exc)
    get = (lambda a: a.get()) if validation.is_cupy(B) else np.asarray
    return get(B.indptr), get(B.indices), get(B.data), B.dtype


@given(parts=raw_csr(), allow_inf=st.booleans())
@settings(max_examples=150, deadline=None)
def test_device_check_agrees_with_the_host_check(parts, allow_inf):
    import cupy
    import cupyx.scipy.sparse as csp

    data, indices, indptr, shape = parts
    host = sp.csr_matrix((data, indices, indptr), shape=shape)
    want = outcome(host, allow_inf)
    try:
        device = csp.csr_matrix((cupy.asarray(data), cupy.asarray(indices), cupy.asarray(indptr)), shape=shape)
    except ValueError:  # CuPy's constructor refuses it: no such matrix reaches us; the host refuses it too
        assert isinstance(want[0], str), "CuPy refused a matrix the host check accepts"
        return
    got = outcome(device, allow_inf)
    if isinstance(want[0], str):  # refused: the same error and message
        assert got == want
        return
    assert not isinstance(got[0], str), got
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)  # repeats summed in another order: float32 rounding
    assert got[3] == want[3]


def test_verdicts_of_a_valid_matrix_and_it_is_used_as_it_is():
    """The kernel's findings on a canonical SciPy matrix copied to the device, against SciPy's own reductions."""
    import cupyx.scipy.sparse as csp

    from semiring.kernels.cuda import launch

    H = sp.random(500, 300, density=0.05, format="csr", random_state=0)
    H.sort_indices()
    X = csp.csr_matrix(H)
    want = {
        "decreasing rows": 0,
        "lowest column": int(H.indices.min()),
        "highest column": int(H.indices.max()),
        "unsorted": 0,
        "nan": 0,
        "inf": 0,
        "first": 0,
        "last": H.nnz,
    }
    assert launch.csr_verdicts(X) == want
    assert validation.check_matrix(X, "X") is X  # canonical float64 CSR: no copy
