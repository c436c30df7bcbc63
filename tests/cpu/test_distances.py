"""Every metric against SciPy's cdist on the densified input (or a float64 NumPy oracle)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from oracles import NONNEGATIVE, ORACLES, OWN_PATH_PARAMS, constant_rows, ill_posed, oracle, tolerances  # noqa: F401 - re-exported
from scipy.spatial.distance import cdist
from strategies import dense, sparse_pair

from semiring import distances
from semiring.distances.specs import DISTANCES, METRICS, resolve_metric


def check_metric(name: str, X, Y, **params) -> None:
    ours = distances.pairwise_distances(X, Y, metric=name, backend="cpu", **params)
    Xd, Yd = dense(X), dense(Y)
    ref = oracle(name, Xd, Yd, **params)
    dtype = np.float32 if X.dtype == Y.dtype == np.float32 else np.float64
    assert ours.shape == ref.shape and ours.dtype == dtype
    ill = ill_posed(name, Xd, Yd)
    ours, ref = ours[~ill], ref[~ill]
    np.testing.assert_allclose(ours, ref, equal_nan=True, err_msg=name, **tolerances(name, dtype))


def test_every_measure_has_one_oracle():
    """Adding a measure is one spec row plus one entry in tests/oracles.py: the two tables name the same measures."""
    names = [d.name for d in DISTANCES]
    assert len(set(names)) == len(names)
    assert sorted(ORACLES) == sorted(names), "a spec row without an oracle, or an oracle without a row"


@pytest.mark.parametrize("spec", DISTANCES, ids=lambda d: d.name)
def test_scipy_names_are_cdist_measures(spec):
    """A row's SciPy name is one cdist knows; a row without one is a measure SciPy does not define."""
    a = np.array([[1.0, 0.0, 2.0]])
    if spec.scipy is None:
        with pytest.raises(ValueError):
            cdist(a, a, spec.name)
    else:
        assert cdist(a, a, spec.scipy, **resolve_metric(spec.name, {})[1]).shape == (1, 1)  # the values cdist gets


def test_declarations_are_consistent():
    """Aliases name one measure; rewrites turn a declared parameter into a known measure; one flag per parameter."""
    assert len(METRICS) == sum(1 + len(d.aliases) for d in DISTANCES)
    flags = {}
    for d in DISTANCES:
        for r in d.rewrites:
            assert r.param in d.param_names and r.to in METRICS, (d.name, r)
        for p in d.parameters:
            assert flags.setdefault(p.name, p.flag) == p.flag, f"parameter {p.name} has two command-line flags"
            assert p.check(p.default, p.name, d.rule(p)) == p.default, f"{d.name}'s default {p.name} breaks its rule"


def test_resolve_metric_checks_and_rewrites():
    assert resolve_metric("Minkowski", {"p": 3}) == (distances.get_metric("minkowski"), {"p": 3.0})
    assert resolve_metric("minkowski", {"p": 1}) == (distances.get_metric("cityblock"), {})
    assert resolve_metric("minkowski", {}) == (distances.get_metric("euclidean"), {})
    assert resolve_metric("minkowski", {"p": np.inf}) == (distances.get_metric("chebyshev"), {})
    with pytest.raises(
        ValueError,
        match=r"^p must be > 0 and <= 1024, or inf for minkowski \(p = 1 gives cityblock; p = 2 gives euclidean; p = inf gives chebyshev\), got -1\.0$",
    ):
        resolve_metric("minkowski", {"p": -1})
    with pytest.raises(TypeError, match=r"metric 'minkowski' got unexpected parameter\(s\) \['q'\]; it takes p$"):
        resolve_metric("minkowski", {"q": 1})
    with pytest.raises(ValueError, match="unknown metric 'nope'; known metrics: braycurtis, canberra"):
        resolve_metric("nope", {})


# The index type is the kernels' skeleton's concern, the same for every measure (the ops see values only): int64
# indices are drawn for one measure of each kernel path (inverted + expansion, margins, a max union, a refined
# one), the others on int32, each measure on float32 and float64 (its result type).  Each index type is one more
# numba compile of a measure's kernels: with both for every measure this test took 135 s of a cold run on the
# 2-core development machine.
EVERY_INDEX = ("cosine", "cityblock", "chebyshev", "euclidean")


@pytest.mark.parametrize("name", [d.name for d in DISTANCES])
@given(data=st.data())
def test_metric_matches_oracle(name, data):
    index = None if name in EVERY_INDEX else np.int32
    X, Y = data.draw(sparse_pair(nonnegative=name in NONNEGATIVE, index=index))
    # seuclidean's default V refuses constant columns (tests/cpu/test_scipy_parity.py): here V is given
    params = {"V": data.draw(st.lists(st.floats(0.1, 10), min_size=X.shape[1], max_size=X.shape[1]))}
    check_metric(name, X, Y, **(params if name == "seuclidean" else OWN_PATH_PARAMS.get(name, {})))


@pytest.mark.parametrize("p", [0.5, 1.0, 1.5, 2.0, 3.0, 7.0])
@given(data=st.data())
def test_minkowski_any_p(p, data):
    X, Y = data.draw(sparse_pair(dtype=np.float64))
    check_metric("minkowski", X, Y, p=p)


def test_minkowski_odd_p_takes_absolute_value():
    X = np.array([[0.0, 1.0, -2.0]])
    Y = np.array([[1.0, -1.0, 0.0]])
    got = distances.pairwise_distances(X, Y, metric="minkowski", p=3)
    assert got[0, 0] == pytest.approx((1 + 8 + 8) ** (1 / 3), rel=1e-12)


def test_minkowski_p_inf_is_chebyshev(rng):
    X = sp.random(6, 9, density=0.4, random_state=1, format="csr")
    np.testing.assert_array_equal(
        distances.pairwise_distances(X, metric="minkowski", p=np.inf),
        distances.pairwise_distances(X, metric="chebyshev"),
    )


@pytest.mark.parametrize(
    "alias, name",
    [
        ("manhattan", "cityblock"),
        ("l1", "cityblock"),
        ("l2", "euclidean"),
        ("linf", "chebyshev"),
        ("dot", "inner_product"),
        ("EUCLIDEAN", "euclidean"),
        ("taxicab", "cityblock"),
        ("lp", "minkowski"),
    ],
)
def test_aliases(alias, name):
    X = sp.random(5, 7, density=0.5, random_state=3, format="csr")
    np.testing.assert_array_equal(
        distances.pairwise_distances(X, metric=alias), distances.pairwise_distances(X, metric=name)
    )


def test_y_none_is_x_against_itself():
    X = sp.random(6, 5, density=0.5, random_state=4, format="csr")
    np.testing.assert_allclose(distances.pairwise_distances(X), cdist(X.toarray(), X.toarray()), rtol=1e-12)


@pytest.mark.parametrize("name", ["euclidean", "sqeuclidean"])
def test_near_duplicates_are_not_lost_to_cancellation(name):
    # d^2 = 1e-12 next to norms of 1: the expanded form alone leaves only rounding noise here.
    X = np.array([[1.0, 0.0, 1e-6, 3.0]])
    Y = np.array([[1.0, 0.0, 0.0, 3.0], [1.0, 0.0, 1e-6, 3.0]])
    np.testing.assert_allclose(distances.pairwise_distances(X, Y, metric=name), cdist(X, Y, name), rtol=1e-12, atol=0)


def test_hellinger_near_duplicates_exact():
    X = np.array([[1.0, 2.0, 3.0]])
    Y = np.array([[1.0, 2.0, 3.0 + 1e-7]])
    got = distances.pairwise_distances(X, Y, metric="hellinger")
    np.testing.assert_allclose(got, oracle("hellinger", X, Y), rtol=1e-9)


@pytest.mark.parametrize("name", [d.name for d in DISTANCES])
def test_huge_sparse_dimension(name):
    """2**40 columns, a few nonzeros: same answer as the same data on 8 columns (n-free metrics)."""
    small = sp.csr_matrix(np.array([[1.0, 0, 2, 0, 0, 3, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0], [0.5, 1, 0, 0, 4, 0, 0, 2]]))
    spread = np.array([0, 7, 1 << 20, 1 << 30, (1 << 40) - 9, 12345, 99, (1 << 40) - 1], dtype=np.int64)
    order = np.argsort(spread)  # keep columns sorted after spreading
    small = small[:, order]
    big = small.tocoo()
    big = sp.csr_matrix((big.data, (big.row, np.sort(spread)[big.col])), shape=(3, 1 << 40))
    if name == "seuclidean":  # the default V: the empty columns are constant, refused without 2**40 work
        with pytest.raises(ValueError, match="column [0-9]+ is constant"):
            distances.pairwise_distances(big, metric=name)
        return
    got = distances.pairwise_distances(big, metric=name)
    if name in ("hamming", "russellrao", "correlation", "rogerstanimoto", "yule"):
        n = 1 << 40
        c = small.toarray()
        b = (c != 0).astype(float)
        tt, nx = b @ b.T, b.sum(1)
        if name == "rogerstanimoto":
            u = nx[:, None] + nx[None, :] - 2 * tt
            want = 2 * u / (n + u)
        elif name == "yule":
            tf, ft = nx[:, None] - tt, nx[None, :] - tt
            ff, h = n - nx[:, None] - nx[None, :] + tt, (nx[:, None] - tt) * (nx[None, :] - tt)
            with np.errstate(all="ignore"):
                want = np.where(h > 0, 2 * tf * ft / (tt * ff + h), 0.0)
        elif name == "hamming":
            want = (c[:, None, :] != c[None, :, :]).sum(-1) / n
        elif name == "russellrao":
            want = (n - (c != 0).astype(float) @ (c != 0).T.astype(float)) / n
        else:
            s, q = c.sum(1), (c * c).sum(1)
            cov = c @ c.T - np.outer(s, s) / n
            var = q - s * s / n
            with np.errstate(all="ignore"):
                want = np.clip(1 - cov / np.sqrt(np.outer(var, var)), 0, 2)
        np.testing.assert_allclose(got, want, rtol=1e-9, equal_nan=True)
    else:
        want = distances.pairwise_distances(small, metric=name)
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


def test_empty_matrices_and_zero_columns():
    empty = sp.csr_matrix((0, 4))
    X = sp.random(3, 4, density=0.5, random_state=0, format="csr")
    assert distances.pairwise_distances(empty, X).shape == (0, 3)
    assert distances.pairwise_distances(X, empty).shape == (3, 0)
    no_cols = sp.csr_matrix((3, 0))
    np.testing.assert_array_equal(distances.pairwise_distances(no_cols, metric="euclidean"), np.zeros((3, 3)))
    np.testing.assert_array_equal(distances.pairwise_distances(no_cols, metric="cityblock"), np.zeros((3, 3)))


@pytest.mark.parametrize(
    "convert",
    [
        lambda A: A,
        lambda A: A.tocsc(),
        lambda A: A.tocoo(),
        lambda A: sp.csr_array(A),
        lambda A: sp.coo_array(A),
        lambda A: A.toarray(),
        lambda A: A.toarray().tolist(),
        lambda A: A.astype(np.int64),
        lambda A: A != 0,
    ],
    ids=["csr", "csc", "coo", "csr_array", "coo_array", "ndarray", "list", "int64 values", "bool values"],
)
def test_input_forms(convert):
    A = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 0], [3, 4, 0]]))
    got = distances.pairwise_distances(convert(A), metric="cityblock")
    ref_input = np.asarray(convert(A).toarray() if sp.issparse(convert(A)) else convert(A), dtype=float)
    np.testing.assert_allclose(got, cdist(ref_input, ref_input, "cityblock"))


@pytest.mark.parametrize("name", ["euclidean", "cosine", "braycurtis", "jensenshannon", "hellinger", "minkowski"])
@given(data=st.data(), rows_per_batch=st.integers(1, 3), dense_paths=st.sampled_from(["never", "auto"]))
def test_batches_give_the_one_pass_result(name, data, rows_per_batch, dense_paths, monkeypatch):
    """Bit for bit on the sparse kernels, which sum each pair's products in column order whatever the batch; where
    the call's density takes the BLAS path, BLAS sums in an order that depends on the block's shape (seen: hellinger
    0.42801911304718515 against 0.428019113047185 for a row alone and within five), so to a few ulps there."""
    monkeypatch.setenv("SEMIRING_CPU_DENSE", dense_paths)
    X, Y = data.draw(sparse_pair(nonnegative=name in NONNEGATIVE, dtype=np.float64))
    whole = distances.pairwise_distances(X, Y, metric=name)
    spec = distances.get_metric(name)
    per_row = max(1, Y.shape[0]) * (8 * len(spec.terms) + 8)
    batched = distances.pairwise_distances(X, Y, metric=name, working_memory=rows_per_batch * per_row / 2**20)
    if dense_paths == "never":
        np.testing.assert_array_equal(batched, whole)
    else:  # cosine's 1 − c/(‖x‖‖y‖) near 0 keeps an ulp of 1; the refined measures' amplification is below 1e3
        np.testing.assert_allclose(batched, whole, rtol=1e-12, atol=1e-14)


def test_working_memory_must_be_positive():
    with pytest.raises(ValueError, match="working_memory must be > 0"):
        distances.pairwise_distances(np.eye(2), working_memory=0)


@pytest.mark.parametrize("chunk", [1, 5, 1 << 20])
@pytest.mark.parametrize("metric", ["jensenshannon", "seuclidean"])
def test_values_in_chunks_equal_cdist(monkeypatch, chunk, metric):
    """Rows divided by their sums, seuclidean's column variances and its scaled columns, a chunk of entries at
    a time (chunks ending inside rows, and an empty row)."""
    from semiring import validation

    monkeypatch.setattr(validation, "ENTRY_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    X = sp.random(40, 30, density=0.2, format="csr", random_state=rng, dtype=np.float64)
    X[3] = 0  # an empty row: its sum is 0
    X = (X + sp.eye(40, 30, k=-10) * 0.5).tocsr()  # every column stored somewhere: V has no 0
    X.eliminate_zeros()
    check_metric(metric, X, X[:7])
