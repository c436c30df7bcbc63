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
from strategies import check_outcome as outcome
from strategies import raw_csr

from semiring import validation


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
    checked = validation.check_matrix(X, "X")  # canonical float64 CSR: no copy, the caller's arrays themselves
    assert all(getattr(checked, part) is getattr(X, part) for part in ("data", "indices", "indptr"))
