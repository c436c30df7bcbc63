"""The CPU engine's (numba's) threads under threadpoolctl: listed, limited, restored."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from numba import njit, prange
from scipy.spatial.distance import cdist

from semiring import distances
from semiring.kernels import cpu  # noqa: F401  (loading the engine registers its threads)

threadpoolctl = pytest.importorskip("threadpoolctl")  # scikit-learn's dependency (a test dependency), not ours


@njit(parallel=True)
def _threads_used(n):
    """The numba thread id of each of n iterations."""
    out = np.empty(n, np.int64)
    for i in prange(n):
        out[i] = numba.get_thread_id()
    return out


def _numba_entries():
    return [lib for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "numba"]


def test_listed_by_threadpool_info():
    (entry,) = _numba_entries()
    assert entry["internal_api"] == "numba"
    assert entry["version"] == numba.__version__
    assert entry["num_threads"] == numba.get_num_threads()
    assert "numba" in entry["filepath"]


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs numba to start 2 threads or more")
@pytest.mark.parametrize("user_api", [None, "numba"])
def test_threadpool_limits_limit_the_engine(user_api, rng):
    before = numba.get_num_threads()
    X = rng.random((60, 7))
    with threadpoolctl.threadpool_limits(limits=1, user_api=user_api):
        assert numba.get_num_threads() == 1
        assert _numba_entries()[0]["num_threads"] == 1
        assert set(_threads_used(10_000)) == {0}  # one thread ran every iteration
        got = distances.pairwise_distances(X, metric="cityblock", backend="cpu")
        assert numba.get_num_threads() == 1  # the call kept the limit (n_jobs=None)
    np.testing.assert_allclose(got, cdist(X, X, "cityblock"), rtol=1e-12)
    assert numba.get_num_threads() == before
    assert len(set(_threads_used(10_000))) > 1


def test_other_apis_leave_the_engine_alone():
    before = numba.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        assert numba.get_num_threads() == before


def test_a_limit_above_numbas_threads_is_capped():
    with threadpoolctl.threadpool_limits(limits=10_000, user_api="numba"):
        assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS


def test_small_calls_run_on_the_calling_thread(monkeypatch):
    """Below SMALL_CALL_WORK a call with n_jobs=None takes one thread (waking workers costs more than they
    save); an explicit n_jobs is obeyed; above it, the current number."""
    from semiring.distances import bound, pairwise

    seen = []
    block = bound.BoundMeasure.block
    monkeypatch.setattr(bound.BoundMeasure, "block", lambda *a: seen.append(numba.get_num_threads()) or block(*a))
    current = numba.get_num_threads()
    distances.pairwise_distances(np.eye(3), backend="cpu")
    distances.pairwise_distances(np.eye(3), backend="cpu", n_jobs=-1)
    monkeypatch.setattr(pairwise, "SMALL_CALL_WORK", 0)
    distances.pairwise_distances(np.eye(3), backend="cpu")
    assert seen == [1, numba.config.NUMBA_NUM_THREADS, current]
    assert numba.get_num_threads() == current


def test_the_float32_tiles_hold_blas_to_one_thread_and_restore_it():
    """``dense.one_blas_thread`` (the float32 products' tiles, each thread calling BLAS): every BLAS library
    threadpoolctl finds at one thread inside, its own number again after."""
    from semiring.kernels.cpu import dense

    def blas():
        return {
            lib["filepath"]: lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"
        }

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = blas()
        with dense.one_blas_thread():
            inside = blas()
        assert blas() == before
    assert inside and set(inside.values()) == {1} and inside.keys() == before.keys()
