"""The CPU engine's one-pass check of a SciPy CSR matrix (``kernels.cpu.checks``), used by ``semiring.validation``
for large host inputs: its findings against NumPy's, and ``check_matrix``'s outcome with it against the outcome
with NumPy's reductions (the same error message, or the same canonical matrix)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import agree, numpy_verdicts
from strategies import check_outcome, raw_csr

import semiring
from semiring import distances
from semiring.kernels.cpu import ENGINE, checks


def from_arrays(data, indices, indptr, shape):
    try:
        return sp.csr_matrix((data, indices, indptr), shape=shape)
    except ValueError:  # SciPy's constructor refuses it: no such matrix reaches the check
        return None


@given(parts=raw_csr(), allow_inf=st.booleans())
@settings(max_examples=120, deadline=None)
def test_one_pass_agrees_with_numpy(parts, allow_inf):
    A = from_arrays(*parts)
    if A is None:
        return
    agree(checks.csr_verdicts(A), numpy_verdicts(A.indptr, A.indices, A.data), A.nnz)
    got = check_outcome(A, allow_inf, verdicts=checks.csr_verdicts)
    want = check_outcome(A, allow_inf)
    if isinstance(want[0], str):  # refused: the same error and message
        assert got == want
        return
    assert not isinstance(got[0], str), got
    for g, w in zip(got[:3], want[:3]):
        np.testing.assert_array_equal(g, w)
    assert got[3] == want[3]


def skewed(seed: int, index=np.int32, dtype=np.float64) -> sp.csr_matrix:
    """3,000 rows of 0 or 21 to 420 entries (a few long ones), over 65,536: every thread's ranges in use."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.zipf(1.6, 3000), 400) + 20
    lengths[::97] = 0
    rows = [np.sort(rng.choice(5000, k, replace=False)) for k in lengths]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(index)
    indices = np.concatenate(rows).astype(index)
    data = rng.standard_normal(indices.size).astype(dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(3000, 5000))


def long_row(A: sp.csr_matrix, r: int) -> int:
    """The first row from r on with three entries or more."""
    return r + int(np.flatnonzero(np.diff(A.indptr[r:]) >= 3)[0])


@pytest.mark.parametrize("index, dtype", [(np.int32, np.float32), (np.int64, np.float64)])
def test_one_pass_on_skewed_rows_with_faults(index, dtype):
    A = skewed(0, index, dtype)
    agree(checks.csr_verdicts(A), numpy_verdicts(A.indptr, A.indices, A.data), A.nnz)
    B = A.copy()
    k = int(B.indptr[long_row(B, 2500)])  # a row's first entry repeated as its second; NaN, inf
    B.indices[k + 1] = B.indices[k]
    B.data[[5, 17]] = [np.nan, -np.inf]
    B.indices[1000] = -3
    found = checks.csr_verdicts(B)
    agree(found, numpy_verdicts(B.indptr, B.indices, B.data), B.indices.size)
    assert found["unsorted"] and found["nan"] == 1 and found["inf"] == 1 and found["lowest column"] == -3
    B.indptr[1234] = B.indptr[1235] + 1  # a row ending before it starts (and its neighbour reaching back)
    found = checks.csr_verdicts(B)
    agree(found, numpy_verdicts(B.indptr, B.indices, B.data), B.indices.size)
    assert found["decreasing rows"] == 1


def test_large_inputs_are_checked_in_one_pass_with_the_same_rules(monkeypatch):
    """Through the public calls, from ``VERDICTS_MIN_ENTRIES`` entries (lowered to 65,536 here, a matrix of
    2²⁰ would be slow to build): the pass is used, a repeat is summed and a row sorted on a copy, NaN and
    out-of-range columns are refused with the NumPy checks' messages."""
    monkeypatch.setattr(checks, "VERDICTS_MIN_ENTRIES", 1 << 16)
    calls = []
    one_pass = checks.csr_verdicts
    monkeypatch.setattr(checks, "csr_verdicts", lambda A: calls.append(A.nnz) or one_pass(A))
    X = skewed(1)
    assert X.nnz >= checks.VERDICTS_MIN_ENTRIES
    Y = sp.random(4, 5000, density=0.3, format="csr", random_state=2)
    want = (X @ Y.T).toarray()
    np.testing.assert_allclose(semiring.pairwise(X, Y, semiring.plus_times, backend="cpu"), want, rtol=1e-12)
    assert calls == [X.nnz]  # Y is below the threshold: NumPy's reductions
    B = X.copy()
    r = long_row(B, 2500)
    k0, k1 = int(B.indptr[r]), int(B.indptr[r + 1])
    B.indices[k0:k1] = B.indices[k0:k1][::-1].copy()  # row r reversed
    B.indices[k0 + 1] = B.indices[k0]  # and its first column stored twice
    before = (B.indices.copy(), B.data.copy())
    dense = np.zeros(X.shape)
    np.add.at(dense, (np.repeat(np.arange(X.shape[0]), np.diff(B.indptr)), B.indices), B.data)
    np.testing.assert_allclose(
        distances.pairwise_distances(B, Y, metric="euclidean", backend="cpu"),
        np.sqrt(np.maximum((dense**2).sum(1)[:, None] + (Y.toarray() ** 2).sum(1) - 2 * dense @ Y.toarray().T, 0)),
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_array_equal(B.indices, before[0])  # canonicalised on a copy
    np.testing.assert_array_equal(B.data, before[1])
    C = X.copy()
    C.data[7] = np.nan
    with pytest.raises(ValueError, match="X contains NaN; stored values must be numbers"):
        semiring.pairwise(C, Y, semiring.plus_times, backend="cpu")
    C = X.copy()
    C.indices[9] = 5000
    with pytest.raises(ValueError, match=r"X: column indices must lie in \[0, 5000\), found \d+\.\.5000"):
        distances.pairwise_distances(C, Y, metric="cosine", backend="cpu")
    assert len(calls) == 4


def test_small_inputs_keep_numpys_reductions():
    assert ENGINE.csr_verdicts(skewed(1)) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_magnitudes_of_signed_zeros_subnormals_and_extremes(dtype):
    """The one pass's magnitudes (read from the values' bits): -0.0 is no nonzero, a subnormal is the smallest,
    the largest finite value the largest; a row of zeros alone gives (inf, 0)."""
    info = np.finfo(dtype)
    tiny = np.nextafter(dtype(0), dtype(1))  # the smallest subnormal
    A = sp.csr_matrix(
        (np.array([-0.0, -tiny, 2.0, -info.max, 0.0], dtype), np.array([0, 1, 0, 2, 1]), np.array([0, 2, 4, 5])),
        shape=(3, 3),
    )
    assert checks.csr_verdicts(A)["magnitudes"] == (float(tiny), float(info.max))
    Z = sp.csr_matrix((np.array([0.0, -0.0], dtype), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    assert checks.csr_verdicts(Z)["magnitudes"] == (np.inf, 0.0)
