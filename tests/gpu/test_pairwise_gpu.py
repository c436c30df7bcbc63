"""The GPU engine against the CPU engine and the float64 oracles (marked ``gpu``; skipped without a GPU).

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_pairwise_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from oracles import NONNEGATIVE, ORACLES, OWN_PATH_PARAMS, constant_rows, oracle, tolerances
from strategies import dense, sparse_pair

import semiring
from semiring import Monoid, Semiring, binary_op, distances, monoid
from semiring.distances.specs import DISTANCES

STRATEGIES = (
    "auto",
    "rowvec",
    "rowvec-compact",
    "merge",
    "inverted",
    "ranges",
    "dense-gemm",
    "split",
    "margins",
    "ranked",
    "extrema",
    "coo",
    "hash",
)


@pytest.fixture(params=STRATEGIES)
def strategy(request, monkeypatch):
    """Run a test under each GPU strategy: ``auto`` and every executor forced (the engine reads the setting at each call).

    ``auto`` picks dense GEMM or rowvec for these small column spaces (tiny
    inputs are dense-ish), and splits plus-monoid unions into margins + an
    intersection (``Semiring.margin_split``); a forced strategy runs wherever it
    applies, whatever the shapes: ``rowvec`` (unions in two passes),
    ``rowvec-compact`` (columns renumbered per batch), ``merge``, ``inverted``
    (Y's postings, plus-monoid intersections), ``dense-gemm`` (plus_times), ``split`` (plus_times: heavy
    columns by cuBLAS, the rest by the inverted kernel),
    ``margins`` (plus-monoid unions), ``coo``/``hash`` (the CSR + COO kernel, rows
    held dense or hashed; masked products too); elsewhere as under ``rowvec``.
    """
    from semiring.kernels.cuda import planner

    assert STRATEGIES == planner.STRATEGIES  # every setting the planner allows is tested
    monkeypatch.setenv(planner.STRATEGY_ENV, request.param)
    return request.param


def gpu_tolerances(name: str, dtype) -> dict:
    if dtype == np.float32:  # the GPU accumulates float32 input in float32
        return {"rtol": 2e-4, "atol": 2e-5}
    return tolerances(name, dtype)


@pytest.mark.parametrize("name", list(semiring.BUILTIN_SEMIRINGS))
@given(data=st.data())
def test_builtin_semirings_match_cpu_engine(name, data, strategy):
    X, Y = data.draw(sparse_pair())
    sr = getattr(semiring, name)
    want = semiring.pairwise(X, Y, sr, backend="cpu")
    got = semiring.pairwise(X, Y, sr, backend="cuda")
    assert got.dtype == want.dtype and isinstance(got, np.ndarray)
    rtol = 1e-4 if X.dtype == np.float32 else 1e-12  # float32 accumulates in float32 on the GPU
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-30)
    M = sp.random(X.shape[0], Y.shape[0], density=0.4, format="csr", random_state=1)
    got_m = semiring.pairwise(X, Y, sr, mask=M, backend="cuda")
    np.testing.assert_array_equal(got_m.indices, M.indices)
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    np.testing.assert_allclose(got_m.data, want[rows, M.indices], rtol=rtol, atol=1e-30)


@given(data=st.data())
def test_user_defined_semiring_on_gpu(data, strategy):
    X, Y = data.draw(sparse_pair())
    for sr in (
        Semiring(monoid.plus, binary_op(lambda x, y: x * y / (1 + abs(x - y)))),
        Semiring(monoid.max, binary_op("min(abs(x - y), c) if x != y else 0.0", c=1.5)),
    ):
        np.testing.assert_allclose(
            semiring.pairwise(X, Y, sr, backend="cuda"),
            semiring.pairwise(X, Y, sr, backend="cpu"),
            rtol=1e-4 if X.dtype == np.float32 else 1e-12,
            atol=1e-30,
        )


@pytest.mark.parametrize("name", [d.name for d in DISTANCES])
@given(data=st.data())
def test_metric_on_gpu_matches_oracle(name, data, strategy):
    X, Y = data.draw(sparse_pair(nonnegative=name in NONNEGATIVE))
    # seuclidean's default V refuses constant columns (tests/cpu/test_scipy_parity.py): here V is given
    V = data.draw(st.lists(st.floats(0.1, 10), min_size=X.shape[1], max_size=X.shape[1]))
    params = {"V": V} if name == "seuclidean" else OWN_PATH_PARAMS.get(name, {})
    got = distances.pairwise_distances(X, Y, metric=name, backend="cuda", **params)
    Xd, Yd = dense(X), dense(Y)
    ref = oracle(name, Xd, Yd, **params)
    dtype = np.float32 if X.dtype == Y.dtype == np.float32 else np.float64
    assert got.dtype == dtype
    if name == "correlation":
        ill = constant_rows(Xd)[:, None] | constant_rows(Yd)[None, :]
        got, ref = got[~ill], ref[~ill]
    tol = gpu_tolerances(name, dtype)
    sizes = ORACLES[name].term_sizes
    if sizes is not None:  # terms that cancel: a few ulps of theirs (float64 too: kldivergence's 2.2e-19 against
        # 2.17e-19, its terms 6.9e-3, under Hypothesis on an H200)
        bound = tol["atol"] + tol["rtol"] * np.abs(ref) + 16 * np.finfo(dtype).eps * sizes(Xd, Yd)
        finite = np.isfinite(ref)
        assert np.array_equal(np.isfinite(got), finite) and (got[~finite] == ref[~finite]).all(), name
        assert (np.abs(got[finite] - ref[finite]) <= bound[finite]).all(), (name, got, ref)
    else:
        np.testing.assert_allclose(got, ref, equal_nan=True, err_msg=name, **tol)


def test_larger_inputs_and_skewed_rows(strategy):
    rng = np.random.default_rng(0)
    X = sp.random(300, 5000, density=0.01, format="csr", random_state=2)
    X = sp.vstack([X, sp.csr_matrix(rng.random((2, 5000)))], format="csr")  # two dense rows
    for metric in ("cosine", "euclidean", "cityblock", "jensenshannon", "chebyshev"):
        got = distances.pairwise_distances(X, metric=metric, backend="cuda")
        want = distances.pairwise_distances(X, metric=metric, backend="cpu")
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=metric)


def test_auto_picks_the_gpu():
    assert semiring.available_backends() == ["cpu", "cuda"]
    from semiring.backend import resolve

    assert resolve("auto") == "cuda"


def test_gpu_batches_give_the_one_pass_result():
    X = sp.random(257, 300, density=0.05, format="csr", random_state=5)
    for metric in ("cosine", "euclidean", "cityblock"):
        whole = distances.pairwise_distances(X, metric=metric, backend="cuda")
        batched = distances.pairwise_distances(X, metric=metric, backend="cuda", working_memory=0.05)  # ~20 rows
        # a batch's mean row degree sets the lane-group size, hence the summation order: equal to rounding
        np.testing.assert_allclose(batched, whole, rtol=1e-13, atol=1e-15)  # cosine's diagonal: 0 or 1e-16


def planned(sr, X, Y, settings) -> str:
    """The strategy the table chooses for the product of device matrices X and Y (of X's value type)."""
    from semiring.kernels.cuda import strategies

    return strategies.plan(strategies.Product(X, Y, sr, X.data.dtype, settings=settings)).strategy.name


def test_strategy_choice_follows_shared_memory():
    """A dense row of the column space fits this device's shared memory or not, a union's with its bitmap; forced
    rowvec runs rowvec-compact where it does not (merge without columns: tests/unit/test_cuda_planner.py)."""
    from semiring.kernels.cuda import ENGINE, launch, planner, strategies

    limit = launch.max_shared_bytes()
    assert planner.rowvec_fits(semiring.plus_times, 20_000, "float32")
    assert not planner.rowvec_fits(semiring.plus_times, limit // 4 + 1, "float32")
    assert not planner.rowvec_fits(semiring.plus_absdiff, limit // 8, "float64")  # + a bitmap
    for ncols, want in ((20_000, "rowvec"), (limit // 4 + 1, "rowvec-compact")):
        X = ENGINE.to_device(sp.random(6, ncols, density=0.01, format="csr", random_state=1, dtype=np.float32))
        product = strategies.Product(X, X, semiring.plus_times, np.float32, settings=planner.Settings("rowvec"))
        assert strategies.plan(product).strategy.name == want


@pytest.mark.parametrize("forced", STRATEGIES[1:])
def test_each_forced_strategy_is_the_plan_where_it_applies(forced):
    """On data like the hypothesis inputs (a few rows, a few columns), each forced setting is the plan."""
    from semiring.kernels.cuda import ENGINE, planner

    X = ENGINE.to_device(sp.random(6, 9, density=0.4, format="csr", random_state=1))
    unions = {"margins": semiring.plus_absdiff, "extrema": semiring.max_absdiff, "ranked": semiring.max_absdiff}
    sr = unions.get(forced, semiring.plus_times)
    assert planned(sr, X, X, planner.Settings(forced)) == forced


def test_plus_written_y_plus_x_gets_the_same_plan_and_result():
    """``y + x`` is plus (``Monoid.kind``): the planner takes the same fast paths as for ``x + y``."""
    from semiring.kernels.cuda import ENGINE, planner

    flipped = Semiring(Monoid(binary_op("y + x"), 0.0), binary_op("x * y"))
    dense_ish = sp.random(50, 200, density=0.2, format="csr", random_state=2)
    wide_short = sp.random(200, 400_000, density=0.00002, format="csr", random_state=3)
    for A in (dense_ish, wide_short):
        X = ENGINE.to_device(A)
        want = planned(semiring.plus_times, X, X, planner.Settings())
        assert planned(flipped, X, X, planner.Settings()) == want
        np.testing.assert_allclose(
            semiring.pairwise(A, A, flipped, backend="cuda"),
            semiring.pairwise(A, A, semiring.plus_times, backend="cpu"),
            rtol=1e-12,
        )
    assert planned(flipped, ENGINE.to_device(dense_ish), ENGINE.to_device(dense_ish), None) == "dense-gemm"


@pytest.mark.parametrize("metric", ["cosine", "cityblock", "jaccard", "chebyshev"])
def test_wide_space_is_compacted_and_agrees(metric):
    X = sp.random(40, 300_000, density=0.0005, format="csr", random_state=9)
    got = distances.pairwise_distances(X, metric=metric, backend="cuda")
    want = distances.pairwise_distances(X, metric=metric, backend="cpu")
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("degree", [1, 5, 40, 300, 3000])
def test_rowvec_group_sizes(degree, monkeypatch):
    from semiring.kernels.cuda import planner

    monkeypatch.setenv(planner.STRATEGY_ENV, "rowvec")
    X = sp.random(64, 4000, density=degree / 4000, format="csr", random_state=degree)
    for sr in (semiring.plus_times, semiring.plus_absdiff, semiring.plus_pair):
        np.testing.assert_allclose(
            semiring.pairwise(X, X, sr, backend="cuda"), semiring.pairwise(X, X, sr, backend="cpu"), rtol=1e-12
        )


@pytest.mark.parametrize("name", ["plus_times", "plus_pair", "plus_absdiff", "max_absdiff", "min_plus"])
def test_compacted_batches_and_oversized_rows(name, monkeypatch):
    """Shared memory cut to 2 KiB: batches shrink, and rows storing more columns than fit are merged."""
    from semiring.kernels.cuda import launch, planner

    monkeypatch.setattr(launch, "max_shared_bytes", lambda: 2048)
    rng = np.random.default_rng(3)
    X = sp.random(60, 50_000, density=0.002, format="csr", random_state=4)
    heavy = sp.csr_matrix(
        (rng.random(900), (np.zeros(900, int), rng.choice(50_000, 900, replace=False))), shape=(1, 50_000)
    )
    X = sp.vstack([X[:30], heavy, X[30:]], format="csr")  # one row with more columns than 2 KiB holds
    sr = getattr(semiring, name)
    assert not planner.rowvec_fits(sr, X.shape[1], "float64")  # forced rowvec, or auto's kernels: rowvec-compact
    np.testing.assert_allclose(
        semiring.pairwise(X, X, sr, backend="cuda"), semiring.pairwise(X, X, sr, backend="cpu"), rtol=1e-12
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_margin_split_recomputes_cancelling_entries(dtype):
    """Near-duplicate rows: Σ|x − y| is tiny next to the margins, so the split's sum cancels and
    those entries must come from the exact merge, not from margins − margins."""
    rng = np.random.default_rng(3)
    X = sp.random(60, 400, density=0.2, format="csr", random_state=4, dtype=np.float64) * 100
    Y = X.copy()
    Y.data = Y.data + rng.choice([0.0, 1e-3], Y.data.size)  # equal rows, up to a few small changes
    X, Y = X.astype(dtype), sp.vstack([Y, X[:5] * 2]).tocsr().astype(dtype)
    got = semiring.pairwise(X, Y, semiring.plus_absdiff, backend="cuda")
    want = np.abs(dense(X)[:, None, :] - dense(Y)[None, :, :]).sum(-1)
    rtol = 2e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3)
    assert semiring.plus_absdiff.margin_split() is not None  # the split path ran under auto


def test_infinite_values_follow_the_cpu_engine():
    """rowvec skips zero entries of an annihilating op; with ±inf stored the engine merges instead,
    so a stored zero times inf is NaN, as on the CPU engine and in GraphBLAS."""
    X = sp.csr_matrix((np.array([0.0, 2.0, 1.0, np.inf]), np.array([0, 1, 0, 2]), np.array([0, 2, 4])), shape=(2, 3))
    assert X.nnz == 4  # X[0, 0] is an explicitly stored zero
    Y = sp.csr_matrix(np.array([[np.inf, 1.0, 0.0], [0.0, 3.0, -np.inf]]))
    for sr in (semiring.plus_times, semiring.min_plus, semiring.plus_absdiff):
        np.testing.assert_array_equal(
            semiring.pairwise(X, Y, sr, backend="cuda"), semiring.pairwise(X, Y, sr, backend="cpu")
        )


@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_cupy_inputs_give_cupy_results(backend):
    """CuPy in, CuPy out (dense and masked), equal to the SciPy route; a SciPy input beside a CuPy one counts as CuPy."""
    import cupy
    import cupyx.scipy.sparse as csp

    X = sp.random(30, 50, density=0.2, format="csr", random_state=5)
    Y = sp.random(20, 50, density=0.3, format="csr", random_state=6)
    Xg, Yg = csp.csr_matrix(X), csp.csr_matrix(Y)
    want = semiring.pairwise(X, Y, semiring.plus_absdiff, backend="cpu")
    got = semiring.pairwise(Xg, Yg, semiring.plus_absdiff, backend=backend)
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(got.get(), want, rtol=1e-12)
    M = sp.random(30, 20, density=0.3, format="csr", random_state=7)
    got_m = semiring.pairwise(Xg, Y, semiring.plus_times, mask=csp.csr_matrix(M), backend=backend)
    assert isinstance(got_m, csp.csr_matrix)
    want_m = semiring.pairwise(X, Y, semiring.plus_times, mask=M, backend="cpu")
    np.testing.assert_allclose(got_m.toarray().get(), want_m.toarray(), rtol=1e-12)
    D = distances.pairwise_distances(cupy.asarray(X.toarray()), Yg, metric="cosine", backend=backend)
    assert isinstance(D, cupy.ndarray)
    np.testing.assert_allclose(D.get(), distances.pairwise_distances(X, Y, metric="cosine", backend="cpu"), rtol=1e-9)
    D = distances.pairwise_distances(Xg, metric="euclidean", backend=backend, working_memory=0.001)  # batches
    assert isinstance(D, cupy.ndarray)
    np.testing.assert_allclose(D.get(), distances.pairwise_distances(X, metric="euclidean"), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("metric", ["cosine", "euclidean", "inner_product", "sqeuclidean"])
@pytest.mark.parametrize("m, n", [(1, 3), (45, 7), (77, 40), (300, 65)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunk_bytes", [None, 512])  # 512 bytes: the columns in several chunks, SYRK accumulating
def test_dense_rows_against_themselves_by_syrk(metric, m, n, dtype, chunk_bytes, monkeypatch):
    """Dense CuPy rows against themselves (Y None), forced to the CSR route (a forced strategy is the rows'
    conversion's: ``test_dense_cupy_rows_stay_dense`` has the dense path): made CSR on the device, the dense GEMM path's upper triangle
    by SYRK and its mirror below; against SciPy's float64 cdist, with a zero row, zeros anywhere and tile sizes
    that are no multiple of the mirror's; the result exactly symmetric."""
    import cupy

    from semiring.kernels.cuda import planner, strategies

    monkeypatch.setenv(planner.STRATEGY_ENV, "dense-gemm")
    if chunk_bytes is not None:
        monkeypatch.setattr(strategies, "DENSE_CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(m * 1000 + n)
    X = rng.standard_normal((m, n)) * (rng.random((m, n)) < 0.7)
    X[m // 2] = 0.0
    X = X.astype(dtype)
    got = distances.pairwise_distances(cupy.asarray(X), metric=metric)
    assert isinstance(got, cupy.ndarray) and got.dtype == dtype
    got = got.get()
    np.testing.assert_array_equal(got, got.T)
    ref = oracle(metric, X.astype(np.float64), X.astype(np.float64))
    np.testing.assert_allclose(got, ref, equal_nan=True, err_msg=metric, **gpu_tolerances(metric, dtype))


DENSE_MEASURES = ["cosine", "euclidean", "inner_product", "sqeuclidean"]


@pytest.fixture
def dense_calls(monkeypatch):
    """The dense rows' path spied on: its measures computed (``kernels.cuda.dense.measure``) and the dense rows
    converted to CSR (``validation._dense_to_csr``), counted."""
    from spies import Calls

    from semiring import validation
    from semiring.kernels.cuda import dense as dense_path

    measured, converted = Calls(dense_path.measure), Calls(validation._dense_to_csr)
    monkeypatch.setattr(dense_path, "measure", measured)
    monkeypatch.setattr(validation, "_dense_to_csr", converted)
    return measured, converted


@pytest.mark.parametrize("metric", DENSE_MEASURES)
@pytest.mark.parametrize("m, p, n", [(1, 1, 3), (45, 45, 7), (77, 30, 40), (300, 300, 65)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("against_itself", [True, False])
def test_dense_cupy_rows_stay_dense(metric, m, p, n, dtype, against_itself, dense_calls):
    """Dense CuPy rows never made CSR: cuBLAS's product (SYRK against themselves), the measure written in place,
    against SciPy's float64 cdist; with a zero row, zeros anywhere, a near-duplicate pair that the expansion
    cancels on (recomputed exactly from the rows) and tile sizes that are no multiple of 32.  Against
    themselves the result is exactly symmetric and euclidean's diagonal exactly 0."""
    import cupy

    measured, converted = dense_calls
    rng = np.random.default_rng(m * 1000 + n)
    X = (rng.standard_normal((m, n)) * 10 * (rng.random((m, n)) < 0.7)).astype(dtype)
    X[m // 2] = 0.0
    if m > 2:
        X[1] = X[0] + dtype(1e-3) * (X[0] != 0)  # at a distance 1e-4 of their norms: the expansion loses it all
    Y = X if against_itself else (rng.standard_normal((p, n)) * (rng.random((p, n)) < 0.5)).astype(dtype)
    if not against_itself and p > 3:
        Y[3] = X[0] + dtype(1e-3) * (X[0] != 0)
    got = distances.pairwise_distances(cupy.asarray(X), None if against_itself else cupy.asarray(Y), metric=metric)
    assert isinstance(got, cupy.ndarray) and got.dtype == dtype and got.shape == (m, Y.shape[0])
    assert measured.count == 1 and converted.count == 0
    got = got.get()
    ref = oracle(metric, X.astype(np.float64), Y.astype(np.float64))
    if metric == "inner_product":  # a sum of terms that cancel: within the product's own rounding, n ulps of Σ|x·y|
        sizes = np.abs(X.astype(np.float64)) @ np.abs(Y.astype(np.float64)).T
        bound = 2e-5 + 2e-4 * np.abs(ref) + n * np.finfo(dtype).eps * sizes
        assert (np.abs(got - ref) <= bound).all(), (got, ref)
    else:
        np.testing.assert_allclose(got, ref, equal_nan=True, err_msg=metric, **gpu_tolerances(metric, dtype))
    if against_itself:
        np.testing.assert_array_equal(got, got.T)
        if metric in ("euclidean", "sqeuclidean"):
            assert (np.diag(got) == 0).all()
    if metric == "euclidean" and m > 2:  # the refined pair: to the float type's own precision, not the norms'
        pair = (0, 1) if against_itself else (0, 3) if p > 3 else None
        if pair is not None:
            np.testing.assert_allclose(got[pair], ref[pair], rtol=1e-4 if dtype == np.float32 else 1e-10)


_DENSE_TYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("metric", DENSE_MEASURES)
@given(data=st.data())
def test_dense_cupy_rows_of_any_type_order_and_shape(metric, data, dense_calls):
    """Awkward dense CuPy input on the dense path: every value type (integers and bools as float64, float16 as
    float32), mixed types (float64 wins), Fortran order and strided views, one column, zero rows; against the
    float64 oracle, the result's type as the CSR route gives it."""
    import cupy

    measured, _ = dense_calls  # one spy for every example (a function-scoped fixture): counted from here
    before = measured.count
    n = data.draw(st.integers(1, 9))
    shapes = [(data.draw(st.integers(1, 12)), n), (data.draw(st.integers(1, 12)), n)]
    types = [data.draw(st.sampled_from(_DENSE_TYPES)) for _ in shapes]
    values = st.sampled_from([0.0, 0.0, 1.0, -2.0, 3.0, 0.5])
    mats = [np.array(data.draw(st.lists(values, min_size=a * b, max_size=a * b))).reshape(a, b) for a, b in shapes]
    mats = [A.astype(t) for A, t in zip(mats, types)]
    layout = data.draw(st.sampled_from(["C", "F", "strided"]))
    device = []
    for A in mats:
        if layout == "strided":  # every other column of a wider array: a view CuPy's kernels may not read as dense
            wide = cupy.zeros((A.shape[0], 2 * n), A.dtype)
            wide[:, ::2] = cupy.asarray(A)
            device.append(wide[:, ::2])
        else:
            device.append(cupy.asarray(A, order=layout))
    same = data.draw(st.booleans())
    got = distances.pairwise_distances(device[0], None if same else device[1], metric=metric)
    Yd = mats[0] if same else mats[1]
    want_type = distances.pairwise_distances(mats[0], None if same else mats[1], metric=metric).dtype
    assert got.dtype == want_type and measured.count == before + 1
    ref = oracle(metric, mats[0].astype(np.float64), Yd.astype(np.float64))
    np.testing.assert_allclose(got.get(), ref, equal_nan=True, err_msg=metric, **gpu_tolerances(metric, got.dtype))


def test_dense_cupy_rows_are_refused_as_the_csr_route_refuses_them(dense_calls):
    """NaN and infinity named with the argument (found by the rows' pass, read before anything is returned), a
    3-D array, unequal widths, complex values, a bad working_memory and n_jobs refused (before any product)."""
    import cupy

    measured, converted = dense_calls
    X = cupy.ones((4, 3), np.float32)
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        distances.pairwise_distances(bad, metric="cosine")
    bad[2, 1] = np.inf
    with pytest.raises(ValueError, match="Y contains infinity"):
        distances.pairwise_distances(X, bad, metric="euclidean")
    with pytest.raises(ValueError, match="X must be 2-D"):
        distances.pairwise_distances(cupy.ones((2, 2, 2)), metric="cosine")
    assert measured.count == 2 and converted.count == 0  # the two refused above: their products dropped
    with pytest.raises(ValueError, match="X has 3 columns but Y has 2"):
        distances.pairwise_distances(X, cupy.ones((2, 2)), metric="cosine")
    with pytest.raises(TypeError, match="X has dtype complex128"):
        distances.pairwise_distances(cupy.ones((2, 2), complex), metric="cosine")
    with pytest.raises(ValueError, match="working_memory"):
        distances.pairwise_distances(X, metric="cosine", working_memory=-1)
    with pytest.raises(ValueError, match="n_jobs"):
        distances.pairwise_distances(X, metric="cosine", n_jobs=0)
    assert measured.count == 2 and converted.count == 0


def test_dense_cupy_rows_beyond_the_range_or_forced_take_the_csr_route(dense_calls, monkeypatch):
    """Cosine of float32 rows at 1e30 and 1e-30 (their squares leave float32): the CSR route, which rescales each
    row first, right against the oracle (the dense product, queued before the rows' range was read, dropped); a
    forced strategy and a per-column weight take that route from the start."""
    import cupy

    from semiring.kernels.cuda import planner

    measured, converted = dense_calls
    rng = np.random.default_rng(3)
    base = rng.standard_normal((20, 6))
    for scale in (1e30, 1e-30):
        X = (base * scale).astype(np.float32)
        got = distances.pairwise_distances(cupy.asarray(X), metric="cosine").get()
        np.testing.assert_allclose(got, oracle("cosine", base, base), rtol=2e-4, atol=2e-5)
    assert measured.count == 2 and converted.count == 2
    w = rng.random(6)
    got = distances.pairwise_distances(cupy.asarray(base), metric="euclidean", w=w).get()
    np.testing.assert_allclose(got, oracle("euclidean", base, base, w=w), rtol=1e-9, atol=1e-12)
    monkeypatch.setenv(planner.STRATEGY_ENV, "dense-gemm")
    got = distances.pairwise_distances(cupy.asarray(base), metric="euclidean").get()
    np.testing.assert_allclose(got, oracle("euclidean", base, base), rtol=1e-9, atol=1e-12)
    assert measured.count == 2 and converted.count == 4


@given(data=st.data())
def test_dense_cupy_rows_become_the_csr_scipy_makes(data):
    """The device's conversion of dense rows (one mask: values, columns and row pointers from it) against
    SciPy's CSR of the same array: zero rows, zeros anywhere, one column, Fortran order."""
    import cupy

    from semiring import validation

    m, n = data.draw(st.integers(0, 12)), data.draw(st.integers(1, 9))
    D = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.0, 1.5, -2.0, 3e-8]), min_size=m * n, max_size=m * n)))
    D = D.reshape(m, n).astype(np.float32)
    order = data.draw(st.sampled_from(["C", "F"]))
    A, B = validation._dense_to_csr(cupy.asarray(D, order=order)), sp.csr_matrix(D)
    assert A.shape == B.shape and A.has_canonical_format
    np.testing.assert_array_equal(A.indptr.get(), B.indptr)
    np.testing.assert_array_equal(A.indices.get(), B.indices)
    np.testing.assert_array_equal(A.data.get(), B.data)


def test_gpu_engine_implements_the_interface():
    from semiring.interfaces import PairwiseEngine, missing_methods
    from semiring.kernels.cuda import ENGINE

    assert not missing_methods(ENGINE, PairwiseEngine) and isinstance(ENGINE, PairwiseEngine)
    assert ENGINE.name == "cuda" and ENGINE.device_results
    assert 0 < ENGINE.memory_limit_bytes()


def test_memory_limit_counts_the_pools_cached_blocks_and_keeps_them():
    """The limit counts what CuPy's pool caches unused as free, without emptying the pool (which would
    synchronise the device and send the call's buffers back to cudaMalloc)."""
    import cupy

    from semiring.kernels.cuda import ENGINE

    pool = cupy.get_default_memory_pool()
    block = cupy.empty(256 * 2**20, dtype=np.uint8)
    del block  # cached by the pool, not in use
    cached = pool.free_bytes()
    assert cached >= 256 * 2**20
    free_before = cupy.cuda.Device().mem_info[0]
    limit = ENGINE.memory_limit_bytes()
    assert pool.free_bytes() == cached  # nothing given back
    # another process (a test worker) may allocate meanwhile: the device's free memory only bounds it
    assert cached // 2 <= limit <= (max(free_before, cupy.cuda.Device().mem_info[0]) + cached) // 2


@pytest.mark.parametrize("forced", ["auto", "extrema"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chebyshev_by_ranks_or_extrema_matches_cdist_where_few_rows_share_a_column(dtype, forced, monkeypatch):
    """Wide, very sparse signed rows (EDGAR-like), some empty, some explicit zeros: auto holds X's short rows
    ranked (``ranked``); forced, the rows' extrema (few pairs share a column) with the pairs that share one
    recomputed; every entry against SciPy in float64."""
    from scipy.spatial.distance import cdist

    from semiring.kernels.cuda import planner

    rng = np.random.default_rng(7)
    wide = sp.random(300, 20_000, density=3e-4, format="csr", random_state=rng, dtype=dtype)
    popular = sp.random(300, 3, density=0.05, format="csr", random_state=rng, dtype=dtype)  # some pairs share
    X = sp.hstack([popular, wide], format="csr", dtype=dtype)
    empty = sp.csr_matrix((1, X.shape[1]), dtype=dtype)
    X = sp.vstack([empty, X[:150], empty, X[150:298]], format="csr")  # two empty rows
    X.data = (X.data - 0.5).astype(dtype)
    X.data[::7] = 0  # explicit zeros
    monkeypatch.setenv(planner.STRATEGY_ENV, forced)
    calls = count_runs(monkeypatch, "union_by_ranks" if forced == "auto" else "union_by_extrema")
    got = distances.pairwise_distances(X[:120], X, metric="chebyshev", backend="cuda")
    assert calls, f"{forced} did not take its strategy"
    ref = cdist(X[:120].toarray().astype(np.float64), X.toarray().astype(np.float64), "chebyshev")
    tol = {"rtol": 1e-6 if dtype == np.float32 else 1e-12, "atol": 0}
    np.testing.assert_allclose(got, ref, **tol)
    # a scratch budget of a few entries: Y's postings do not fit in one piece, and the merge kernel computes it
    banded = distances.pairwise_distances(X[:120], X, metric="chebyshev", backend="cuda", working_memory=0.001)
    np.testing.assert_allclose(banded, ref, **tol)


def count_runs(monkeypatch, runner: str = "union_by_extrema") -> list:
    """The calls of a strategy's runner (``strategies.union_by_extrema``, ``union_by_ranks``) from now on, one
    entry each."""
    from semiring.kernels.cuda import strategies

    calls, real = [], getattr(strategies, runner)
    monkeypatch.setattr(strategies, runner, lambda *args: calls.append(1) or real(*args))
    return calls


@pytest.mark.parametrize("rows", [1, 8])  # X's rows held a block
@pytest.mark.parametrize("dtype, index", [(np.float32, np.int32), (np.float64, np.int64)])
def test_ranked_kernel_matches_cdist_with_long_rows_and_shared_columns(rows, dtype, index, monkeypatch):
    """The ranked kernel forced: most pairs sharing popular columns, some X rows longer than it holds (merged
    from global memory, beside held rows in one block), rows of exactly RANKED_ROW entries, empty rows, explicit
    zeros, ties in |x| (the rank's tie-break), int32 and int64 indices: chebyshev through the measure (its
    expansion written by the kernel) against SciPy in float64; a max-union and a min-union product
    (``semiring.pairwise``, no expansion) against the CPU engine."""
    from semiring.kernels.cuda import planner, source

    rng = np.random.default_rng(rows)
    wide = sp.random(700, 3000, density=2e-3, format="csr", random_state=rng, dtype=dtype)
    popular = sp.random(700, 3, density=0.6, format="csr", random_state=rng, dtype=dtype)
    Y = sp.hstack([popular, wide], format="csr", dtype=dtype).tolil()
    held = source.RANKED_ROW
    for r, length in ((5, held + 1), (6, held), (9, 3 * held), (40, held - 1)):  # about and beyond what is held
        Y[r, :] = 0
        Y[r, rng.choice(Y.shape[1], size=length, replace=False)] = rng.integers(1, 4, size=length)  # ties
    Y = Y.tocsr()
    Y.eliminate_zeros()
    empty = sp.csr_matrix((1, Y.shape[1]), dtype=dtype)
    Y = sp.vstack([empty, Y[:300], empty, Y[300:]], format="csr")
    Y.data = (Y.data - 0.5).astype(dtype)
    Y.data[::11] = 0  # explicit zeros
    Y.indices, Y.indptr = Y.indices.astype(index), Y.indptr.astype(index)
    X = Y[:45]  # the long rows among them, and the first empty row
    monkeypatch.setattr(source, "RANKED_ROWS", rows)
    monkeypatch.setenv(planner.STRATEGY_ENV, "ranked")
    _check_max_and_min_unions(X, Y, dtype, count_runs(monkeypatch, "union_by_ranks"))


@pytest.mark.parametrize("room", [64, 1024])  # bytes of shares: ranges of 512 rows of Y; one range of all
@pytest.mark.parametrize("dtype, index", [(np.float32, np.int32), (np.float64, np.int64)])
def test_extrema_kernel_writes_the_unshared_pairs_and_merges_the_queued_ones(room, dtype, index, monkeypatch):
    """The extrema kernel forced, most pairs sharing a popular column (queued and merged) and the rest not,
    ranges of Y's rows and a queue of a few entries a chunk (several chunks a range): chebyshev through the measure (its expansion written by the kernel)
    against SciPy in float64; a max-union and a min-union product (``semiring.pairwise``, no expansion) against
    the CPU engine.  Signed values, empty rows, explicit zeros, int32 and int64 indices."""
    from semiring.kernels.cuda import planner, source

    rng = np.random.default_rng(room)
    wide = sp.random(3000, 4000, density=1e-3, format="csr", random_state=rng, dtype=dtype)
    popular = sp.random(3000, 2, density=0.6, format="csr", random_state=rng, dtype=dtype)
    Y = sp.hstack([popular, wide], format="csr", dtype=dtype)
    empty = sp.csr_matrix((1, Y.shape[1]), dtype=dtype)
    Y = sp.vstack([empty, Y[:1500], empty, Y[1500:]], format="csr")
    Y.data = (Y.data - 0.5).astype(dtype)
    Y.data[::7] = 0  # explicit zeros
    Y.indices, Y.indptr = Y.indices.astype(index), Y.indptr.astype(index)
    X = Y[::37]
    monkeypatch.setattr(planner, "RANGE_SHARED_BYTES", room)
    monkeypatch.setattr(source, "EXTREMA_QUEUE", 96)  # read when the kernel is rendered
    monkeypatch.setenv(planner.STRATEGY_ENV, "extrema")
    _check_max_and_min_unions(X, Y, dtype, count_runs(monkeypatch))


def _check_max_and_min_unions(X, Y, dtype, calls: list) -> None:
    """A forced max- or min-union kernel's answers: chebyshev through the measure (its expansion written by the
    kernel) against SciPy in float64, a max-union and a min-union product (``semiring.pairwise``, no expansion)
    against the CPU engine; ``calls`` (``count_runs``'s) shows the kernel ran in each of the three calls (a
    call may take more than one tile)."""
    from scipy.spatial.distance import cdist

    got = distances.pairwise_distances(X, Y, metric="chebyshev", backend="cuda")
    ref = cdist(X.toarray().astype(np.float64), Y.toarray().astype(np.float64), "chebyshev")
    tol = {"rtol": 1e-6 if dtype == np.float32 else 1e-12, "atol": 0}
    np.testing.assert_allclose(got, ref, **tol)
    lowest = Semiring(monoid.min, binary_op("-abs(x - y)"))
    for sr in (semiring.max_absdiff, lowest):
        np.testing.assert_allclose(
            semiring.pairwise(X, Y, sr, backend="cuda"), semiring.pairwise(X, Y, sr, backend="cpu"), **tol
        )
    assert len(calls) >= 3


def test_the_gpu_engines_mirror_is_the_transpose_into_a_view_of_the_result():
    """``mirror_into`` on device arrays: a tile above the diagonal (a strided view) copied transposed into its
    place below, nothing else written (the tiling takes it only where an engine states its extra bytes, which
    the GPU engine does not: a protocol method held to its contract)."""
    import cupy

    from semiring.kernels.cuda import ENGINE

    rows, cols = 70, 45
    m = rows + cols + 3
    result = cupy.full((m, m), -1.0, cupy.float32)
    upper = result[:rows, rows + 3 :]
    upper[...] = cupy.arange(rows * cols, dtype=cupy.float32).reshape(rows, cols)
    below = result[rows + 3 :, :rows]
    ENGINE.mirror_into(below, upper)
    np.testing.assert_array_equal(below.get(), upper.get().T)
    outside = np.ones((m, m), bool)
    outside[:rows, rows + 3 :] = outside[rows + 3 :, :rows] = False
    assert (result.get()[outside] == -1.0).all()
