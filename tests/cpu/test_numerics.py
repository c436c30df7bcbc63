"""Cancellation and mixed precision against SciPy's ``cdist``: rows far from the origin, and float32 rows
against float64 ones (a float64 result must be float64-accurate).

Every measure SciPy defines, on dense rows with a large common offset (where an expanded form subtracts
numbers of size ``n·offset²``) mixed with sparse rows, each side float32 or float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import NONNEGATIVE, ill_posed, offset_rows, offset_tolerance, oracle

from semiring import distances
from semiring.distances.specs import DISTANCES

MEASURES = [d.name for d in DISTANCES if d.scipy is not None]
IN_INPUT_UNITS = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "minkowski")  # not ratios: they scale


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(MEASURES),
    seed=st.integers(0, 2**32 - 1),
    offset=st.sampled_from([0.0, 1e4, 1e6, 1e8, 1e10]),
    spread=st.sampled_from([1.0, 1e-3]),
    dtypes=st.sampled_from([(np.float64, np.float64), (np.float32, np.float64), (np.float64, np.float32)]),
    shape=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(2, 30)),
)
def test_large_offsets_and_mixed_types_match_cdist(name, seed, offset, spread, dtypes, shape):
    m, p, n = shape
    nonneg = name in NONNEGATIVE
    if name == "seuclidean" and m + p < 2:
        return
    X = offset_rows(seed, m, n, offset, spread, dtypes[0], nonneg)
    Y = offset_rows(seed + 1, p, n, -offset if not nonneg and seed % 2 else offset, spread, dtypes[1], nonneg)
    Xd, Yd = X.toarray().astype(np.float64), Y.toarray().astype(np.float64)
    try:
        got = distances.pairwise_distances(X, Y, metric=name, backend="cpu")
    except ValueError as e:  # seuclidean's default V over a constant column: refused, as documented
        assert name == "seuclidean" and "constant" in str(e)
        return
    assert got.dtype == np.float64
    ref = oracle(name, Xd, Yd)
    skip = ill_posed(name, Xd, Yd)
    np.testing.assert_allclose(got[~skip], ref[~skip], rtol=1e-9, atol=offset_tolerance(name, offset, spread))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(MEASURES),
    seed=st.integers(0, 2**32 - 1),
    magnitude=st.sampled_from([1e-120, 1e-80, 1.0, 1e80, 1e150]),
    shape=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 12)),
)
def test_far_magnitudes_match_cdist(name, seed, magnitude, shape):
    """Rows of 1e±80 and beyond, whose squared norms' products over- or underflow float64 (cosine gave 1, and 0
    or 2, for every pair): every measure as SciPy computes it, to its own scale."""
    m, p, n = shape
    if name == "seuclidean" and m + p < 3:
        return
    X = offset_rows(seed, m, n, 0.0, magnitude, np.float64, name in NONNEGATIVE)
    Y = offset_rows(seed + 1, p, n, 0.0, magnitude, np.float64, name in NONNEGATIVE)
    Xd, Yd = X.toarray(), Y.toarray()
    try:
        got = distances.pairwise_distances(X, Y, metric=name, backend="cpu")
    except ValueError as e:  # seuclidean's default V over a constant column: refused, as documented
        assert name == "seuclidean" and "constant" in str(e)
        return
    ref = oracle(name, Xd, Yd)
    keep = ~ill_posed(name, Xd, Yd)
    # Values in the inputs' units are compared at their own scale, the others (ratios) at 1; jensenshannon's
    # near-uniform rows keep √ε, as in test_large_offsets_and_mixed_types_match_cdist.
    unit = np.abs(ref[keep & np.isfinite(ref)]).max(initial=0.0) if name in IN_INPUT_UNITS else 1.0
    atol = (1e-7 if name == "jensenshannon" else 1e-12) * unit
    np.testing.assert_allclose(got[keep], ref[keep], rtol=1e-9, atol=atol)


@pytest.mark.parametrize("offset", [1e6, 1e7, 1e8])
def test_correlation_of_rows_with_a_large_mean(offset):
    """The issue's reproduction: the expansion subtracted two numbers of size n·mean² (0.0 for 0.532 at 1e8,
    errors of 2 and NaN entries at 1e7)."""
    X = np.random.default_rng(0).random((50, 40)) + offset
    got = distances.pairwise_distances(X, metric="correlation", backend="cpu")
    ref = oracle("correlation", X, X)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12 + 1e-15 * offset)


def test_correlation_of_a_constant_row_far_from_zero_is_nan_as_scipy():
    """A constant row's centred sums are exactly 0 (0/0), where the expansion left rounding noise."""
    X = np.array([[1e8] * 6, [1e8 + 1, 1e8 + 3, 1e8, 1e8 + 2, 1e8 + 5, 1e8 + 1]])
    got = distances.pairwise_distances(X, metric="correlation", backend="cpu")
    assert np.isnan(got[0]).all() and np.isnan(got[:, 0]).all()
    assert got[1, 1] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("name", ["jensenshannon", "cosine", "euclidean", "braycurtis"])
def test_float32_rows_against_float64_give_float64_accuracy(name):
    """Row normalisation (jensenshannon's L1) and norms are taken in the result's type, not the input's."""
    rng = np.random.default_rng(3)
    X, Y = rng.random((4, 50)).astype(np.float32), rng.random((5, 50))
    got = distances.pairwise_distances(X, Y, metric=name, backend="cpu")
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, oracle(name, X.astype(np.float64), Y), rtol=1e-12, atol=1e-15)


def test_correlation_kneighbors_unchanged_by_a_large_offset():
    """Correlation is shift-invariant per row: neighbours of rows at 1e8 are those of the same rows at 0."""
    X = np.random.default_rng(5).random((30, 20))
    near = distances.NearestNeighbors(n_neighbors=4, metric="correlation", backend="cpu").fit(X)
    far = distances.NearestNeighbors(n_neighbors=4, metric="correlation", backend="cpu").fit(X + 1e8)
    np.testing.assert_array_equal(near.kneighbors(X)[1], far.kneighbors(X + 1e8)[1])
