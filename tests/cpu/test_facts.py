"""What validation proves of a checked matrix travels with it to the engines (``semiring.validation.Facts``):
carried where its values are, never claimed where they are not, not scanned for again on the public path, and
the results are those of a call carrying none."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ill_posed, oracle, tolerances
from spies import Calls
from strategies import dense, sparse_pair

import semiring
from semiring import validation
from semiring.distances import NearestNeighbors, pairwise_distances
from semiring.distances.bound import BoundMeasure
from semiring.distances.specs import resolve_metric
from semiring.interfaces import call_density
from semiring.kernels.cpu import ENGINE
from semiring.kernels.cpu import checks as cpu_checks
from semiring.kernels.cpu import dense as cpu_dense
from semiring.kernels.cpu import strategies as cpu_strategies
from semiring.kernels.cpu.engine import _one_index_type
from semiring.validation import Facts


def scrambled(A: sp.csr_matrix) -> sp.csr_matrix:
    """A's values as a CSR matrix that is not canonical: each row's entries in reverse order, every stored value
    split into two repeats (halves: their sum is the value exactly)."""
    A = sp.csr_matrix(A)
    counts = np.diff(A.indptr)
    order = np.concatenate([np.arange(A.indptr[i + 1] - 1, A.indptr[i] - 1, -1) for i in range(A.shape[0])] or [[]])
    order = order.astype(np.int64)
    indices = np.repeat(A.indices[order], 2).astype(A.indices.dtype)
    data = np.repeat(A.data[order] * A.dtype.type(0.5), 2)
    indptr = np.concatenate([[0], np.cumsum(2 * counts)]).astype(A.indptr.dtype)
    return sp.csr_matrix((data, indices, indptr), shape=A.shape)


def without_facts(A):
    """A's arrays in a new matrix that carries nothing: what a direct engine user passes."""
    B = sp.csr_matrix(A.shape, dtype=A.dtype)
    B.data, B.indices, B.indptr = A.data, A.indices, A.indptr
    return B


def assert_true_facts(A) -> None:
    """Every fact A carries is true of its stored values (-0.0 is not negative); the matrix is canonical."""
    facts = validation.facts_of(A)
    if facts is None:
        return
    values = np.asarray(A.data[: A.indptr[-1]])
    assert facts.finite in (None, bool(np.isfinite(values).all()))
    assert facts.nonnegative in (None, bool((values >= 0).all()))
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    assert (np.diff(A.indices[: A.indptr[-1]])[np.diff(rows) == 0] > 0).all()


def forms(A: sp.csr_matrix) -> dict:
    return {
        "csr_matrix": A,
        "csr_array": sp.csr_array(A),
        "coo": A.tocoo(),
        "dense": A.toarray(),
        "scrambled": scrambled(A),
        "int64": sp.csr_matrix((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape),
    }


@pytest.mark.parametrize("one_pass", [False, True], ids=["numpy", "verdicts"])
@pytest.mark.parametrize("form", ["csr_matrix", "csr_array", "coo", "dense", "scrambled", "int64"])
def test_a_check_carries_what_it_proved_and_never_writes_the_callers_matrix(form, one_pass, monkeypatch):
    if one_pass:  # the CPU engine's one-pass check (csr_verdicts), as for large matrices
        monkeypatch.setattr(cpu_checks, "VERDICTS_MIN_ENTRIES", 0)
    A = sp.random(6, 5, density=0.5, format="csr", random_state=1)
    A.data -= 0.5
    given_ = forms(A)[form]
    before = dict(getattr(given_, "__dict__", {}))
    checked = validation.check_matrix(given_, "X", verdicts=ENGINE.csr_verdicts)
    # the one pass finds the values' magnitudes too, where it reads the values, not where rows came out of order
    # (the repeats are summed after it); a dense array's are found from its nonzeros, either way
    magnitudes = np.abs(A.data)
    read = one_pass and form != "scrambled" or form == "dense"
    found = (magnitudes[magnitudes > 0].min(), magnitudes.max()) if read else None
    # the one pass also reads indptr's end (the stored entries), kept so no later step reads it again
    stored = A.nnz if one_pass and form != "scrambled" and form != "dense" else None
    assert validation.facts_of(checked) == Facts(finite=True, nonnegative=None, magnitudes=found, stored=stored)
    assert validation.stored_entries(checked) == A.nnz  # carried or read
    assert checked.has_canonical_format
    assert validation.facts_of(given_) is None and getattr(given_, "__dict__", {}) == before
    assert validation.is_nonnegative(checked) is False  # found once, kept with the others
    known = Facts(finite=True, nonnegative=False, magnitudes=found, stored=stored)
    assert validation.facts_of(checked) == known
    assert validation.facts_of(given_) is None and getattr(given_, "__dict__", {}) == before


def test_finiteness_is_what_the_check_found():
    A = sp.csr_matrix(np.array([[1.0, np.inf], [0.0, 2.0]]))
    assert validation.facts_of(validation.check_matrix(A, "X", allow_inf=True)) == Facts(finite=False)
    assert validation.facts_of(validation.check_matrix(A[1:], "X", allow_inf=True)) == Facts(finite=True)
    with pytest.raises(ValueError, match="X contains infinity; all stored values must be finite"):
        validation.check_matrix(A, "X")
    with pytest.raises(ValueError, match="X contains NaN; stored values must be numbers"):
        validation.check_matrix(sp.csr_matrix(np.array([[np.nan, 1.0]])), "X", allow_inf=True)
    # inf through semiring.pairwise (allow_inf): the same answer as SciPy's dense min_plus
    D = semiring.pairwise(A, A, semiring.min_plus, backend="cpu")
    Ad = A.toarray()
    want = np.array([[min(a + b for a, b, s, t in zip(x, y, x != 0, y != 0) if s and t) for y in Ad] for x in Ad])
    np.testing.assert_array_equal(D, want)


def test_a_part_keeps_only_what_holds_of_every_part():
    A = validation.check_matrix(sp.csr_matrix(np.array([[-1.0, np.inf], [1.0, 2.0]])), "X", allow_inf=True)
    validation.is_nonnegative(A)
    assert validation.facts_of(A) == Facts(finite=False, nonnegative=False)
    part = validation.row_slice(A, 1, 2)
    assert validation.facts_of(part) == Facts(finite=None, nonnegative=None)  # row 1 is finite and non-negative
    assert validation.is_nonnegative(part) and validation.facts_of(part).nonnegative is True
    B = validation.check_matrix(sp.csr_matrix(np.array([[1.0, 3.0], [1.0, 2.0]])), "X")
    validation.is_nonnegative(B)
    assert validation.facts_of(validation.row_slice(B, 0, 1)) == Facts(finite=True, nonnegative=True)
    assert validation.facts_of(ENGINE.row_slice(B, 1, 2)) == Facts(finite=True, nonnegative=True)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_narrower_copy_carries_nothing_a_wider_one_all():
    huge = validation.check_matrix(sp.csr_matrix(np.array([[1e300, -1e-300]])), "X")
    validation.is_nonnegative(huge)
    narrow = validation.carry_facts(huge.astype(np.float32), huge)  # inf and -0.0 in float32
    assert validation.facts_of(narrow) is None
    assert validation.proved(huge, "finite", huge.data.astype(np.float32)) is None
    small = validation.check_matrix(sp.csr_matrix(np.array([[1.0, -2.0]], np.float32)), "X")
    assert validation.facts_of(validation.carry_facts(small.astype(np.float64), small)) == Facts(finite=True)
    assert validation.proved(small, "finite", small.data.astype(np.float64)) is True


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_scaled_rows_carry_nothing_prepared_ones_what_follows():
    X = validation.check_matrix(sp.csr_matrix(np.array([[1e300, 1.0], [0.0, 2.0]])), "X")
    validation.is_nonnegative(X)
    spec, values = resolve_metric("cityblock", {})
    scaled = BoundMeasure(ENGINE, spec, values, np.float64, np.array([1e10, 1.0])).prepare(X)
    assert not np.isfinite(scaled.matrix.data).all() and validation.facts_of(scaled.matrix) is None
    spec, values = resolve_metric("jensenshannon", {})
    shares = BoundMeasure(ENGINE, spec, values, np.float64).prepare(X)  # each row divided by its sum
    assert validation.facts_of(shares.matrix) == Facts(finite=True, nonnegative=True, stored=X.nnz)
    assert np.isfinite(shares.matrix.data).all() and (shares.matrix.data >= 0).all()


def test_the_sign_and_finiteness_are_not_scanned_again(monkeypatch):
    """cityblock through the margin split (a plus-monoid union: its sign asked) and euclidean through BLAS (a dot
    product: its finiteness asked), in several tiles: on the public path validation's facts answer, each stored
    value's sign read once (Y's as its rows are prepared, X's a batch of rows at a time); a direct engine call,
    carrying none, scans."""
    signs = Calls(cpu_strategies._none_negative)
    finite = Calls(cpu_dense._finite_values)
    monkeypatch.setattr(cpu_strategies, "_none_negative", signs)
    monkeypatch.setattr(cpu_dense, "_finite_values", finite)
    read = []
    lowest_value = validation.lowest_value
    monkeypatch.setattr(validation, "lowest_value", lambda A: read.append(A.nnz) or lowest_value(A))
    rng = np.random.default_rng(3)
    X = sp.random(30, 12, density=0.4, format="csr", random_state=rng)
    Y = sp.random(20, 12, density=0.4, format="csr", random_state=rng)
    X.data -= 0.3
    monkeypatch.setenv("SEMIRING_CPU_UNION", "margins")
    for metric, dense_path, signs_read in (("cityblock", "never", X.nnz + Y.nnz), ("euclidean", "always", 0)):
        monkeypatch.setenv("SEMIRING_CPU_DENSE", dense_path)
        read.clear()
        got = pairwise_distances(X, Y, metric, backend="cpu", working_memory=0.002)  # 0.002 MiB: several tiles
        np.testing.assert_allclose(got, oracle(metric, X.toarray(), Y.toarray()), **tolerances(metric, got.dtype))
        assert (signs.count, finite.count, sum(read)) == (0, 0, signs_read), metric
        assert metric == "euclidean" or len(read) > 2  # X in several batches
    Xc, Yc = validation.check_pair(X, Y)
    monkeypatch.setenv("SEMIRING_CPU_DENSE", "never")
    ENGINE.pairwise(without_facts(Xc), without_facts(Yc), semiring.plus_absdiff, np.float64)
    monkeypatch.setenv("SEMIRING_CPU_DENSE", "always")
    ENGINE.pairwise(without_facts(Xc), without_facts(Yc), semiring.plus_times, np.float64)
    assert signs.count >= 1 and finite.count >= 1  # the counters count: without facts the engine scans


def engine_answers(X, Y, sr):
    """The CPU engine's plan and result for X and Y: checked (carrying facts), and the same arrays carrying none."""
    answers = []
    with call_density(X, Y):
        for A, B in ((X, Y), (without_facts(X), without_facts(Y))):
            A, B = _one_index_type(A, B)
            chosen = cpu_strategies.plan(cpu_strategies.Product(A, B, sr, "dense"))
            answers.append((chosen.strategy.name, ENGINE.pairwise(A, B, sr, np.float64)))
    return answers


@settings(max_examples=25, deadline=None)
@given(
    pair=sparse_pair(max_rows=8, max_cols=10),
    metric=st.sampled_from(["cityblock", "euclidean", "chebyshev", "braycurtis", "jensenshannon", "cosine"]),
    scramble=st.booleans(),
)
def test_results_unchanged_on_awkward_inputs(pair, metric, scramble):
    """Explicit zeros, empty rows, negative values, int32/int64 indices, float32, unsorted and repeated indices:
    cdist's answer in float64, and the engine's plan and result the same with and without the facts."""
    X, Y = pair
    if metric == "jensenshannon":  # non-negative data only: refused with the rule otherwise
        X, Y = abs(X), abs(Y)
    given_X, given_Y = (scrambled(X), scrambled(Y)) if scramble else (X, Y)
    products = []
    init = cpu_strategies.Product.__init__
    with mock.patch.object(cpu_strategies.Product, "__init__", lambda p, *a, **k: products.append(a) or init(p, *a)):
        got = pairwise_distances(given_X, given_Y, metric, backend="cpu")
    for A, B, *_ in products:  # what reached the engine's strategies: no fact claimed that is not so
        assert_true_facts(A), assert_true_facts(B)
    Xd, Yd = dense(X), dense(Y)
    want = oracle(metric, Xd, Yd)
    keep = ~ill_posed(metric, Xd, Yd) & ~(np.isnan(want) & np.isnan(got))
    np.testing.assert_allclose(got[keep], want[keep], **tolerances(metric, got.dtype))
    Xc, Yc = validation.check_pair(given_X, given_Y)
    validation.is_nonnegative(Xc), validation.is_nonnegative(Yc)  # every fact known
    assert_true_facts(Xc), assert_true_facts(Yc)
    for sr in (semiring.plus_absdiff, semiring.plus_times, semiring.max_absdiff):
        (with_name, with_facts), (without_name, without) = engine_answers(Xc, Yc, sr)
        assert with_name == without_name
        np.testing.assert_array_equal(with_facts, without)


def test_negative_values_refused_as_before():
    X = sp.csr_matrix(np.array([[1.0, -2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"X contains negative values \(min -2.0\); metric 'jensenshannon'"):
        pairwise_distances(X, metric="jensenshannon", backend="cpu")
    with pytest.raises(ValueError, match="X contains NaN"):
        pairwise_distances(sp.csr_matrix(np.array([[np.nan, 1.0]])), metric="cityblock", backend="cpu")


@pytest.mark.parametrize("metric", ["jensenshannon", "braycurtis", "cityblock"])
def test_a_fitted_index_reads_its_rows_sign_once(metric, monkeypatch):
    """Its fit finds the sign where the measure asks (a rule, a form on non-negative rows, a union's split), and
    its queries read the fitted rows' facts: each query call reads only its own rows' signs."""
    read = []
    lowest_value = validation.lowest_value
    monkeypatch.setattr(validation, "lowest_value", lambda A: read.append(A.nnz) or lowest_value(A))
    X = abs(sp.random(40, 12, density=0.4, format="csr", random_state=5))
    Q = abs(sp.random(9, 12, density=0.4, format="csr", random_state=6))
    nn = NearestNeighbors(n_neighbors=3, metric=metric, backend="cpu").fit(X)
    assert sum(read) == X.nnz
    for _ in range(2):
        dist, _ = nn.kneighbors(Q)
        np.testing.assert_allclose(dist, np.sort(oracle(metric, Q.toarray(), X.toarray()), axis=1)[:, :3], rtol=1e-9)
    assert sum(read) == X.nnz + 2 * Q.nnz


def test_a_checked_matrix_is_not_checked_again():
    """A matrix the check made comes back as it is (what the check proved holds: a Dask shard's rows, checked by
    its fit, asked by each pair of shards); one with an infinity it let through is refused where none may be."""
    from semiring.distances import neighbors

    A = validation.check_matrix(sp.csr_matrix(np.array([[1.0, 0.0, -2.0], [0.0, 0.5, 0.0]])), "X")
    assert validation.check_matrix(A, "X") is A
    infinite = validation.check_matrix(sp.csr_matrix(np.array([[1.0, np.inf]])), "X", allow_inf=True)
    assert validation.check_matrix(infinite, "X", allow_inf=True) is infinite
    with pytest.raises(ValueError, match="X contains infinity; all stored values must be finite"):
        validation.check_matrix(infinite, "X")
    # a fitted index's rows: their magnitudes found once, at fit (a row-scale-free measure's range check), and
    # kept with the facts every pair of Dask shards is given
    nn = NearestNeighbors(n_neighbors=1, metric="cosine").fit(A)
    rows = neighbors._shard_rows(nn)
    assert validation.facts_of(rows).magnitudes == (0.5, 2.0) and validation.check_matrix(rows, "X") is rows


def test_magnitudes_are_found_once_and_kept():
    """``magnitudes_of``: what the facts say, else found (a bounded chunk at a time) and kept in them; a matrix
    that carries no facts is read every time."""
    A = validation.check_matrix(sp.csr_matrix(np.array([[0.0, -4.0, 0.25], [0.0, 0.0, 0.0]])), "X")
    A.data[0] = 0.0  # an explicit zero: not the smallest nonzero
    A.data[1] = 0.25
    assert validation.facts_of(A).magnitudes is None
    assert validation.magnitudes_of(A) == (0.25, 0.25) == validation.facts_of(A).magnitudes
    A.data[1] = 8.0  # the kept bounds are what is answered now (facts are what the check proved)
    assert validation.magnitudes_of(A) == (0.25, 0.25)
    plain = sp.csr_matrix(np.array([[3.0, 0.0, -0.5]]))
    assert validation.magnitudes_of(plain) == (0.5, 3.0) and validation.facts_of(plain) is None
    assert validation.magnitudes_of(sp.csr_matrix((2, 2))) == (np.inf, 0.0)
