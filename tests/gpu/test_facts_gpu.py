"""What validation proved travels to the GPU engine (``DeviceCSR.facts``, ``semiring.validation.Facts``): the
plans and results with the facts are those without them, the inputs are not scanned again for what the facts
say, and a CuPy caller's matrix is never written to (marked ``gpu``; skipped without a GPU).

    python -m pytest -m gpu tests/gpu/test_facts_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import ill_posed, oracle, tolerances
from spies import Calls

import semiring
from semiring import validation
from semiring.distances import NearestNeighbors, pairwise_distances
from semiring.kernels.cuda import ENGINE, planner, strategies
from semiring.validation import Facts

METRICS = ["cityblock", "euclidean", "cosine", "chebyshev", "braycurtis", "jensenshannon"]


def rows(seed: int, m: int, n: int, nonnegative: bool, dtype=np.float64, index=np.int32) -> sp.csr_matrix:
    """Random rows with empty ones, explicitly stored zeros and (unless ``nonnegative``) negative values."""
    rng = np.random.default_rng(seed)
    stored = rng.random((m, n)) < 0.3
    stored[rng.random(m) < 0.15] = False  # empty rows
    r, c = np.nonzero(stored)
    data = rng.uniform(0.1, 4.0, r.size) * (1 if nonnegative else rng.choice([-1, 1], r.size))
    data[rng.random(r.size) < 0.1] = 0.0  # explicitly stored zeros
    A = sp.csr_matrix((data, (r, c)), shape=(m, n))
    assert A.nnz == r.size
    return sp.csr_matrix((A.data.astype(dtype), A.indices.astype(index), A.indptr.astype(index)), shape=A.shape)


def planned(monkeypatch) -> list:
    """The names of the strategies the GPU plans choose from now on, in order."""
    chosen, choose = [], strategies.choose

    def recording(settings, facts):
        strategy = choose(settings, facts)
        chosen.append(strategy.name)
        return strategy

    monkeypatch.setattr(strategies, "choose", recording)
    return chosen


@pytest.mark.parametrize("strategy", ["auto", "rowvec", "hash", "merge"])
@pytest.mark.parametrize("metric", METRICS)
def test_the_same_plans_and_results_with_and_without_the_facts(metric, strategy, monkeypatch):
    monkeypatch.setenv(planner.STRATEGY_ENV, strategy)
    nonnegative = metric == "jensenshannon"
    X, Y = rows(1, 40, 60, nonnegative), rows(2, 30, 60, nonnegative)
    chosen = planned(monkeypatch)
    with_facts = pairwise_distances(X, Y, metric, backend="cuda", working_memory=0.02)  # several tiles
    plans = list(chosen)
    chosen.clear()
    monkeypatch.setattr(validation, "facts_of", lambda A: None)  # nothing carried or read: every fact scanned
    without = pairwise_distances(X, Y, metric, backend="cuda", working_memory=0.02)
    assert plans and plans == chosen
    np.testing.assert_allclose(with_facts, without, rtol=1e-9, atol=1e-6)  # atomics may sum in another order
    Xd, Yd = X.toarray(), Y.toarray()
    want, keep = oracle(metric, Xd, Yd), ~ill_posed(metric, Xd, Yd)
    np.testing.assert_allclose(with_facts[keep], want[keep], **tolerances(metric, with_facts.dtype))


def test_the_inputs_are_not_scanned_again(monkeypatch):
    """euclidean through rowvec (an annihilating op: the values' finiteness asked) and cityblock (a union: the
    margin split asks their sign), in several tiles: validation's facts answer; a direct engine call on a device
    matrix carrying none scans."""
    finite, signs = Calls(planner.all_finite), Calls(planner.all_nonnegative)  # (the engine's scans of values)
    monkeypatch.setattr(planner, "all_finite", finite)
    monkeypatch.setattr(planner, "all_nonnegative", signs)
    monkeypatch.setenv(planner.STRATEGY_ENV, "rowvec")
    X, Y = rows(3, 40, 50, False), rows(4, 30, 50, False)
    got = pairwise_distances(X, Y, "euclidean", backend="cuda", working_memory=0.02)
    np.testing.assert_allclose(got, oracle("euclidean", X.toarray(), Y.toarray()), rtol=1e-9, atol=1e-9)
    assert finite.count == 0
    monkeypatch.setenv(planner.STRATEGY_ENV, "auto")
    P, R = rows(5, 40, 50, True), rows(6, 30, 50, True)  # non-negative: every part of them is, too
    got = pairwise_distances(P, R, "cityblock", backend="cuda", working_memory=0.02)
    np.testing.assert_allclose(got, oracle("cityblock", P.toarray(), R.toarray()), rtol=1e-9, atol=1e-9)
    assert signs.count == 0
    Xc, Yc = validation.check_pair(X, Y)
    Xd, Yd = ENGINE.to_device(Xc), ENGINE.to_device(Yc)
    assert Xd.facts == validation.facts_of(Xc) and Xd.facts is not None
    Xd.facts = Yd.facts = None  # what a direct engine user passes
    monkeypatch.setenv(planner.STRATEGY_ENV, "rowvec")
    ENGINE.pairwise(Xd, Yd, semiring.plus_times, np.float64)
    monkeypatch.setenv(planner.STRATEGY_ENV, "auto")
    ENGINE.pairwise(Xd, Yd, semiring.plus_absdiff, np.float64)
    assert finite.count >= 1 and signs.count >= 1  # the counters count: without facts the engine scans


def test_a_cupy_callers_matrix_is_never_written_to():
    cupy = pytest.importorskip("cupy")
    from cupyx.scipy import sparse as csp

    X = rows(5, 20, 30, False)
    given = csp.csr_matrix(X)
    before = dict(given.__dict__)
    checked = validation.check_matrix(given, "X", verdicts=ENGINE.csr_verdicts)
    nonzero = np.abs(X.data[X.data != 0])
    found = (float(nonzero.min()), float(nonzero.max()))  # the check kernel's magnitudes, by NumPy
    read = {"magnitudes": found, "stored": X.nnz}  # the check kernel's magnitudes by NumPy, and indptr's end
    assert checked is not given and validation.facts_of(checked) == Facts(finite=True, **read)
    assert validation.is_nonnegative(checked) is False
    assert validation.facts_of(checked) == Facts(finite=True, nonnegative=False, **read)
    assert given.__dict__.keys() == before.keys() and all(given.__dict__[k] is v for k, v in before.items())
    assert ENGINE.to_device(checked).facts == Facts(finite=True, nonnegative=False, **read)
    got = pairwise_distances(given, metric="cityblock", backend="cuda")
    np.testing.assert_allclose(cupy.asnumpy(got), oracle("cityblock", X.toarray(), X.toarray()), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("metric", ["euclidean", "cityblock"])
def test_a_held_index_answers_the_same_with_and_without_the_facts(metric, monkeypatch):
    X, Q = rows(6, 60, 40, False), rows(7, 25, 40, False)
    with_facts = NearestNeighbors(n_neighbors=5, metric=metric, backend="cuda").fit(X).kneighbors(Q)
    monkeypatch.setattr(validation, "facts_of", lambda A: None)
    without = NearestNeighbors(n_neighbors=5, metric=metric, backend="cuda").fit(X).kneighbors(Q)
    np.testing.assert_allclose(with_facts[0], without[0], rtol=1e-9, atol=1e-9)
    D = oracle(metric, Q.toarray(), X.toarray())
    np.testing.assert_allclose(with_facts[0], np.sort(D, axis=1)[:, :5], rtol=1e-9, atol=1e-9)
