"""CuPy input checked by one kernel (``validation._checked_on_device``) against the host checks of the same
matrix as SciPy (marked ``gpu``): the same error message, or the same canonical matrix.

The matrices are built from raw CSR arrays, so that they can break every rule: rows out of order or
repeated, column indices out of range, a decreasing or overlong indptr, NaN and infinity (also made by
summing repeats), empty rows and matrices, float32/float64 values, int32/int64 indices.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import agree, numpy_verdicts
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
        "magnitudes": (float(np.abs(H.data).min()), float(np.abs(H.data).max())),  # sp.random stores no zero
    }
    assert launch.csr_verdicts(X) == want
    checked = validation.check_matrix(X, "X")  # canonical float64 CSR: no copy, the caller's arrays themselves
    assert all(getattr(checked, part) is getattr(X, part) for part in ("data", "indices", "indptr"))


@given(parts=raw_csr())
@settings(max_examples=150, deadline=None)
def test_kernel_findings_agree_with_numpy(parts):
    """Every finding of the check kernel, the values' magnitudes among them, against NumPy's row by row, on
    matrices that break the rules as CuPy lets them be built."""
    import cupy
    import cupyx.scipy.sparse as csp

    from semiring.kernels.cuda import launch

    data, indices, indptr, shape = parts
    try:
        device = csp.csr_matrix((cupy.asarray(data), cupy.asarray(indices), cupy.asarray(indptr)), shape=shape)
    except ValueError:  # CuPy refuses it: no such matrix reaches the kernel
        return
    # CuPy may have cast the arrays (int64 indices where int32 overflow): NumPy reads what the kernel reads
    agree(
        launch.csr_verdicts(device),
        numpy_verdicts(device.indptr.get(), device.indices.get(), device.data.get()),
        min(device.indices.size, device.data.size),
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_magnitudes_of_signed_zeros_subnormals_and_extremes(dtype):
    """The kernel's magnitudes are read from the values' bits: -0.0 is no nonzero, a subnormal (which a
    flush-to-zero comparison would lose) is the smallest, the largest finite value the largest; a matrix of
    zeros alone gives (inf, 0), as the CPU engine's pass does."""
    import cupy
    import cupyx.scipy.sparse as csp

    from semiring.kernels.cuda import launch

    def on_device(data, indices, indptr, shape):
        return csp.csr_matrix((cupy.asarray(data), cupy.asarray(indices), cupy.asarray(indptr)), shape=shape)

    info = np.finfo(dtype)
    tiny = np.nextafter(dtype(0), dtype(1))
    A = on_device(
        np.array([-0.0, -tiny, 2.0, -info.max, 0.0], dtype), np.array([0, 1, 0, 2, 1]), np.array([0, 2, 4, 5]), (3, 3)
    )
    assert launch.csr_verdicts(A)["magnitudes"] == (float(tiny), float(info.max))
    Z = on_device(np.array([0.0, -0.0], dtype), np.array([0, 1]), np.array([0, 2]), (1, 2))
    assert launch.csr_verdicts(Z)["magnitudes"] == (np.inf, 0.0)
