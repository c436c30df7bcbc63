"""Hostile input through the API and the ``semiring`` command, on the CPU engine.

The standing suite of issue 12 (with ``tests/unit/test_hostile.py`` for what
runs no engine).  Each case is an input a careless or hostile user tried; the
test says what must happen instead: the right answer (SciPy's ``cdist`` on the
densified input is the oracle), or a clear error naming the argument or file
and the rule, with nothing the user had lost.  The command runs in-process
through ``main(argv)``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import cdist

import semiring
from semiring import validation
from semiring.distances import pairwise_distances

# Inputs the validation must take or name


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("index", [np.uint64, np.uint32, np.int16])
def test_unusual_index_arrays_are_converted(fmt, index):
    A = sp.random(6, 5, density=0.5, format=fmt, random_state=3)
    dense = A.toarray()
    attrs = ("row", "col") if fmt == "coo" else ("indptr", "indices")
    for attr in attrs:
        setattr(A, attr, getattr(A, attr).astype(index))
    given = {attr: getattr(A, attr).dtype for attr in attrs}
    np.testing.assert_allclose(
        pairwise_distances(A, metric="cityblock", backend="cpu"), cdist(dense, dense, "cityblock")
    )
    assert {attr: getattr(A, attr).dtype for attr in attrs} == given  # the caller's matrix is untouched


def test_uint64_indices_beyond_int64_name_the_argument():
    A = sp.random(4, 5, density=0.5, format="csr", random_state=3)
    A.indices = A.indices.astype(np.uint64)
    A.indices[0] = np.iinfo(np.uint64).max
    with pytest.raises(ValueError, match=r"^Y: index array indices \(uint64\) holds 18446744073709551615"):
        pairwise_distances(np.ones((2, 5)), A, backend="cpu")


def test_a_networkx_graph_as_a_matrix_is_named():
    with pytest.raises(TypeError, match="X is a networkx Graph, not a matrix; pass its adjacency matrix"):
        pairwise_distances(nx.karate_club_graph(), backend="cpu")


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0, -1])
def test_working_memory_must_be_finite_and_positive(value):
    with pytest.raises(ValueError, match="working_memory must be > 0 and finite"):
        pairwise_distances(np.eye(3), backend="cpu", working_memory=value)


# Memory: a dense result is checked against the memory available before it is allocated


def test_a_dense_result_larger_than_memory_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 1000 * 8)
    X = sp.random(101, 4, density=0.5, format="csr", random_state=0)
    for call in (
        lambda: pairwise_distances(X, backend="cpu"),
        lambda: semiring.pairwise(X, X, "plus_times", backend="cpu"),
    ):
        with pytest.raises(
            MemoryError,
            match=r"the dense result \(101 x 101 float64\) needs 79\.7 KiB of memory; 7\.8 KiB is available",
        ):
            call()
    np.testing.assert_allclose(pairwise_distances(X[:10], backend="cpu"), cdist(X[:10].toarray(), X[:10].toarray()))


# IEEE magnitudes: the expanded forms must not hide an overflow (SciPy's cdist is the oracle)

HUGE_ROWS = {
    "overflowing-norms": np.array([[1e200, 0.0], [1e200, 1.0], [0.0, 1.0]]),
    "near-duplicates-1e160": np.array([[1e160, 0.0], [1e160 * (1 + 2**-52), 0.5], [1e160, 3.0]]),
    "opposite-signs": np.array([[1e200, 0.0], [-1e200, 0.0], [1.0, 1.0]]),
    "float32-norms-overflow": np.array([[1.5e19, 0.0], [1.5e19, 2.0], [0.0, 0.0]], dtype=np.float32),
}


@pytest.mark.parametrize("case", sorted(HUGE_ROWS))
@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean", "chebyshev", "cityblock"])
def test_huge_magnitudes_equal_scipy(case, metric):
    X = HUGE_ROWS[case]
    ref = cdist(X.astype(np.float64), X.astype(np.float64), metric)
    D = pairwise_distances(sp.csr_matrix(X), metric=metric, backend="cpu")
    np.testing.assert_allclose(D, ref, rtol=1e-6 if X.dtype == np.float32 else 1e-12)


def test_huge_magnitudes_in_kneighbors():
    from semiring.distances import NearestNeighbors

    X = HUGE_ROWS["overflowing-norms"]
    distances, indices = NearestNeighbors(n_neighbors=1, backend="cpu").fit(X).kneighbors()
    ref = cdist(X, X)
    np.fill_diagonal(ref, np.inf)
    np.testing.assert_allclose(distances[:, 0], ref.min(axis=1))
    np.testing.assert_array_equal(indices[:, 0], ref.argmin(axis=1))


@pytest.mark.parametrize("metric", ["chebyshev", "linf", "cityblock", "euclidean", "minkowski"])
def test_zero_columns_give_scipys_value(metric):
    X, Y = np.zeros((3, 0)), np.zeros((2, 0))
    scipy_name = {"linf": "chebyshev"}.get(metric, metric)
    np.testing.assert_array_equal(pairwise_distances(X, Y, metric=metric, backend="cpu"), cdist(X, Y, scipy_name))


def test_an_empty_reduction_of_a_semiring_is_its_monoids_identity():
    """semiring.pairwise keeps GraphBLAS's meaning: no column, the add monoid's identity (the measure maps it)."""
    X = np.zeros((2, 0))
    assert (semiring.pairwise(X, X, "max_absdiff", backend="cpu") == -np.inf).all()
    assert (semiring.pairwise(X, X, "plus_absdiff", backend="cpu") == 0.0).all()
