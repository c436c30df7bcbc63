"""Cancellation and mixed precision on the GPU engine (marked ``gpu``; skipped without a GPU): correlation of
rows far from the origin recomputed exactly from centred sums, and float32 rows against float64 ones giving a
float64-accurate result, under every GPU strategy.

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_numerics_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import oracle

from semiring import distances

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


@pytest.mark.parametrize("magnitude", [1e-100, 1e150])
@pytest.mark.parametrize("metric", ["cosine", "correlation"])
def test_the_norms_product_neither_overflows_nor_underflows(strategy, metric, magnitude):
    """Values of 1e150 or 1e-100: ‖x‖²·‖y‖² over- or underflows float64, each root taken apart does not (as on
    the CPU)."""
    X = np.random.default_rng(3).normal(size=(20, 6)) * magnitude
    X[1] = -0.5 * X[0]
    got = distances.pairwise_distances(sp.csr_matrix(X), metric=metric, backend="cuda")
    np.testing.assert_allclose(got, oracle(metric, X, X), rtol=1e-9, atol=1e-12)


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
