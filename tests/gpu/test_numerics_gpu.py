"""Cancellation and mixed precision on the GPU engine (marked ``gpu``; skipped without a GPU): correlation of
rows far from the origin recomputed exactly from centred sums, and float32 rows against float64 ones giving a
float64-accurate result, under every GPU strategy.

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_numerics_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import (
    NONNEGATIVE,
    correlation_rows,
    ill_posed,
    offset_rows,
    offset_tolerance,
    oracle,
    share_rows,
    shares_reference,
)

from semiring import distances
from semiring.distances.specs import DISTANCES

STRATEGIES = ("auto", "rowvec", "merge", "inverted", "dense-gemm", "coo", "hash")


@pytest.fixture(params=STRATEGIES)
def strategy(request, monkeypatch):
    from semiring.kernels.cuda import planner

    monkeypatch.setenv(planner.STRATEGY_ENV, request.param)
    return request.param


@pytest.mark.parametrize("offset", [1e6, 1e8])
def test_correlation_of_rows_with_a_large_mean(strategy, offset):
    rng = np.random.default_rng(0)
    X = rng.random((50, 40)) + offset
    Y = sp.random(30, 40, density=0.3, random_state=1, format="csr")
    for A, B in ((X, X), (X, Y), (Y, X)):
        Ad, Bd = np.asarray(sp.csr_matrix(A).toarray()), np.asarray(sp.csr_matrix(B).toarray())
        got = distances.pairwise_distances(A, B, metric="correlation", backend="cuda")
        np.testing.assert_allclose(got, oracle("correlation", Ad, Bd), rtol=1e-9, atol=1e-12 + 1e-15 * offset)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_correlation_row_terms_equal_the_cpu_engines(strategy, dtype):
    """Correlation's row terms (``Distance.row_terms``) on the GPU engine against the CPU engine's (float64:
    equal to rounding; NaN and 0 where those are), and the awkward rows through every strategy against SciPy."""
    import cupy

    from semiring.distances.specs import NORMS, expression, get_metric
    from semiring.kernels.cpu import ENGINE as CPU
    from semiring.kernels.cuda import ENGINE as GPU

    spec, A = get_metric("correlation"), correlation_rows().astype(dtype)
    n, sums = A.shape[1], [expression(NORMS[name], ("x",)) for name in spec.norms]
    want = CPU.row_norms(A, sums, np.float64, spec.row_term_trees)
    G = GPU.to_device(A)
    got = GPU.row_norms(G, sums, dtype, spec.row_term_trees)
    assert len(got) == len(want) == 2 and n == A.shape[1]
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(cupy.asnumpy(g), w, rtol=1e-6 if dtype == np.float32 else 1e-13, equal_nan=True)
    D = distances.pairwise_distances(A, metric="correlation", backend="cuda")
    with np.errstate(all="ignore"):
        ref = oracle("correlation", A.toarray().astype(np.float64), A.toarray().astype(np.float64))
    np.testing.assert_allclose(D, ref, rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("dtype, data", [(np.float64, np.float64), (np.float32, np.float32), (np.float64, np.float32)])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_row_norms_in_one_pass_against_numpy(dtype, data, index):
    """The GPU's norms of a measure in one kernel (``row_norms``): Σx and Σx² of each row against NumPy's float64
    sums, empty rows 0, float32 values read into float64 norms, both index types."""
    import cupy

    from semiring.distances.specs import NORMS, expression
    from semiring.kernels.cuda import ENGINE as GPU

    A = sp.random(70, 33, density=0.2, format="csr", random_state=4, dtype=np.float64)
    A = sp.vstack([sp.csr_matrix((2, 33)), A, sp.csr_matrix((1, 33))], format="csr").astype(data)
    A.indptr, A.indices = A.indptr.astype(index), A.indices.astype(index)
    dense_rows = A.toarray().astype(np.float64)
    trees = [expression(NORMS[name], ("x",)) for name in ("sum", "sumsq")]
    got = GPU.row_norms(GPU.to_device(A), trees, dtype)
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    for g, want in zip(got, (dense_rows.sum(axis=1), (dense_rows**2).sum(axis=1)), strict=True):
        assert g.dtype == dtype and g.shape == (A.shape[0],)
        np.testing.assert_allclose(cupy.asnumpy(g), want, rtol=rtol, atol=0)
    assert not cupy.asnumpy(got[0][[0, 1, -1]]).any()
    empty = GPU.row_norms(GPU.to_device(sp.csr_matrix((0, 33), dtype=data)), trees, dtype)
    assert [e.shape for e in empty] == [(0,), (0,)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("root", [False, True])
def test_row_shares_in_one_pass_against_numpy(dtype, index, root):
    """The GPU's rows divided by their sums (``row_shares``, jensenshannon's and hellinger's rows) against NumPy
    in float64: empty and zero rows 0, a row whose sum overflows its type scaled, not lost; both index types."""
    import cupy

    from semiring.kernels.cuda import ENGINE as GPU

    A = share_rows(dtype)
    indptr = cupy.asarray(A.indptr.astype(index))
    got = cupy.asnumpy(GPU.row_shares(indptr, cupy.asarray(A.data), root))
    assert got.dtype == dtype and got.shape == A.data.shape
    tiny = np.sqrt(np.finfo(dtype).tiny) if root else np.finfo(dtype).tiny  # subnormal shares keep fewer digits
    np.testing.assert_allclose(got, shares_reference(A, root), rtol=1e-6 if dtype == np.float32 else 1e-13, atol=tiny)
    assert np.isfinite(got).all() and (got > 0).any()


@pytest.mark.parametrize("magnitude", [1e-300, 1e-100, 1e150, 1e300])
@pytest.mark.parametrize("metric", ["cosine", "correlation"])
def test_the_norms_product_neither_overflows_nor_underflows(strategy, metric, magnitude):
    """Values of 1e150 or 1e-100: ‖x‖²·‖y‖² over- or underflows float64, each root taken apart does not; at
    1e±300 the squares themselves do, and each row is scaled into range first (as on the CPU): the oracle is the
    same rows at magnitude 1."""
    unit = np.random.default_rng(3).normal(size=(20, 6))
    unit[1] = -0.5 * unit[0]
    got = distances.pairwise_distances(sp.csr_matrix(unit * magnitude), metric=metric, backend="cuda")
    np.testing.assert_allclose(got, oracle(metric, unit, unit), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("magnitude", [1e-30, 1e25])
@pytest.mark.parametrize("metric", ["cosine", "correlation"])
def test_float32_rows_whose_squares_leave_float32_are_scaled_into_range(metric, magnitude):
    """The GPU accumulates a float32 result in float32: squares of 1e25 overflow it and of 1e-30 vanish (NaN
    both ways); rows beyond 2^±48 are scaled by powers of two into range first (``measure.rows_in_range``)."""
    unit = np.random.default_rng(4).normal(size=(12, 5))
    unit[1] = -0.5 * unit[0]
    X = (unit * magnitude).astype(np.float32)
    got = distances.pairwise_distances(sp.csr_matrix(X), metric=metric, backend="cuda")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, oracle(metric, unit, unit), rtol=1e-4, atol=1e-5)


def test_correlation_kneighbors_at_a_large_offset(strategy):
    X = np.random.default_rng(5).random((30, 20))
    near = distances.NearestNeighbors(n_neighbors=4, metric="correlation", backend="cpu").fit(X)
    far = distances.NearestNeighbors(n_neighbors=4, metric="correlation", backend="cuda").fit(X + 1e8)
    np.testing.assert_array_equal(near.kneighbors(X)[1], far.kneighbors(X + 1e8)[1])


@pytest.mark.parametrize("name", ["jensenshannon", "hellinger", "cosine", "euclidean", "correlation", "braycurtis"])
def test_float32_rows_against_float64_give_float64_accuracy(strategy, name):
    rng = np.random.default_rng(3)
    X, Y = rng.random((4, 50)).astype(np.float32), rng.random((5, 50))
    got = distances.pairwise_distances(sp.csr_matrix(X), sp.csr_matrix(Y), metric=name, backend="cuda")
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, oracle(name, X.astype(np.float64), Y), rtol=1e-12, atol=1e-14)


# The CPU tier's property tests of cancellation and mixed types (tests/cpu/test_numerics.py), at fixed draws: every
# SciPy measure at each offset under auto, and the expanded measures whose terms cancel under every strategy.

SCIPY_MEASURES = [d.name for d in DISTANCES if d.scipy is not None]


def _offset_case(name, seed, offset, spread, dtypes, shape):
    """(got on the GPU, SciPy's reference, the entries to compare, the tolerance), or None where seuclidean's
    default V is refused over a constant column (as documented)."""
    m, p, n = shape
    nonneg = name in NONNEGATIVE
    X = offset_rows(seed, m, n, offset, spread, dtypes[0], nonneg)
    Y = offset_rows(seed + 1, p, n, -offset if not nonneg and seed % 2 else offset, spread, dtypes[1], nonneg)
    Xd, Yd = X.toarray().astype(np.float64), Y.toarray().astype(np.float64)
    try:
        got = distances.pairwise_distances(X, Y, metric=name, backend="cuda")
    except ValueError as e:
        assert name == "seuclidean" and "constant" in str(e)
        return None
    assert got.dtype == np.float64
    return got, oracle(name, Xd, Yd), ~ill_posed(name, Xd, Yd), offset_tolerance(name, offset, spread)


@pytest.mark.parametrize("dtypes", [(np.float64, np.float64), (np.float32, np.float64)], ids=["f64", "f32-f64"])
@pytest.mark.parametrize("offset", [1e4, 1e8])
@pytest.mark.parametrize("name", SCIPY_MEASURES)
def test_large_offsets_and_mixed_types_match_cdist(name, offset, dtypes):
    for seed, spread, shape in ((0, 1.0, (6, 5, 30)), (1, 1e-3, (3, 4, 7)), (2, 1.0, (1, 6, 2))):
        case = _offset_case(name, seed, offset, spread, dtypes, shape)
        if case is not None:
            got, ref, keep, atol = case
            np.testing.assert_allclose(got[keep], ref[keep], rtol=1e-9, atol=atol, err_msg=f"seed {seed}")


@pytest.mark.parametrize("name", ["euclidean", "sqeuclidean", "cosine", "correlation"])
def test_expanded_measures_at_a_large_offset_under_every_strategy(strategy, name):
    """The expansions that subtract norms (euclidean's ‖x‖² + ‖y‖² − 2x·y, correlation's centred sums, cosine's
    1 − x·y/‖x‖‖y‖) on rows at 1e8, float32 against float64, whichever kernel computes the product."""
    for seed, spread in ((0, 1.0), (1, 1e-3)):
        case = _offset_case(name, seed, 1e8, spread, (np.float32, np.float64), (8, 6, 24))
        got, ref, keep, atol = case
        np.testing.assert_allclose(got[keep], ref[keep], rtol=1e-9, atol=atol, err_msg=f"seed {seed}")


@pytest.mark.parametrize("name", ["euclidean", "cosine", "correlation", "cityblock", "jensenshannon"])
def test_integer_rows_against_float32_give_float64(name):
    """Integer input is read as float64 (its values exact below 2^53): against float32 rows the result is
    float64, as accurate as float64 arithmetic on the float32 values."""
    rng = np.random.default_rng(9)
    Y = rng.random((5, 12)).astype(np.float32)
    for X in (rng.integers(0, 1000, (4, 12)).astype(np.int32), rng.integers(0, 255, (4, 12)).astype(np.uint8)):
        got = distances.pairwise_distances(X, Y, metric=name, backend="cuda")
        assert got.dtype == np.float64
        np.testing.assert_allclose(
            got, oracle(name, X.astype(np.float64), Y.astype(np.float64)), rtol=1e-12, atol=1e-14
        )


def test_float32_rows_whose_sums_overflow_are_normalised_exactly():
    """float32 rows summing past 3.4e38 (the GPU prepares jensenshannon's and hellinger's rows in the result's
    type): their sums were inf, the rows zeros and the distances NaN; scaled by a power of two first."""
    X = np.random.default_rng(6).random((5, 4)) + 0.1
    X[1] = 3 * X[0]
    big = (X / X.max(axis=1, keepdims=True) * 3e38).astype(np.float32)
    for name in ("jensenshannon", "hellinger"):
        got = distances.pairwise_distances(sp.csr_matrix(big), metric=name, backend="cuda")
        assert got.dtype == np.float32 and np.isfinite(got).all()
        np.testing.assert_allclose(got, oracle(name, X, X), atol=1e-5, err_msg=name)
