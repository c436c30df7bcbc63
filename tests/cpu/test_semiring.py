"""semiring.pairwise against python-graphblas (SuiteSparse:GraphBLAS) as the oracle.

Intersection semirings are checked against ``mxm`` (GraphBLAS's structural
semantics); union semirings against an independent formulation, per pair of
rows: ``ewise_union`` (a missing entry read as 0) then ``reduce`` with the add
monoid, plus the all-zero columns' contribution when the union leaves some out.
User-defined ops reach graphblas as numba UDFs built from the *original* Python
function, not from our parsed form.
"""

from __future__ import annotations

import functools
import math

import graphblas as gb
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from strategies import sparse_pair

import semiring
from semiring import Monoid, Semiring, binary_op, monoid

gb_monoids = {"plus": gb.monoid.plus, "min": gb.monoid.min, "max": gb.monoid.max, "times": gb.monoid.times}


def to_gb(A: sp.csr_matrix) -> gb.Matrix:
    coo = A.tocoo()
    return gb.Matrix.from_coo(
        coo.row, coo.col, coo.data.astype(np.float64), nrows=A.shape[0], ncols=A.shape[1], dtype=gb.dtypes.FP64
    )


@functools.cache
def gb_op(func):
    """A graphblas UDF, numba-compiled for the one dtype it is used with (FP64): ``is_udt=True`` asks graphblas
    to compile on use, not for all 13 of its dtypes up front (3.6 s of every run of this file)."""
    return gb.binary.register_anonymous(func, is_udt=True)


@functools.cache
def gb_semiring(add: str, mult):
    op = mult if isinstance(mult, gb.core.operator.BinaryOp) else gb_op(mult)
    return gb.semiring.register_anonymous(gb_monoids[add], op)


def gb_mxm(X, Y, add: str, mult) -> np.ndarray:
    sr = gb_semiring(add, mult)
    C = to_gb(X).mxm(to_gb(Y).T, sr[gb.dtypes.FP64]).new()
    return C


def gb_union(X, Y, add: str, mult, zero_zero: float) -> np.ndarray:
    """Per pair of rows: ewise_union with missing entries = 0, reduced by the add monoid."""
    op = gb_op(mult)
    GX, GY = to_gb(X), to_gb(Y)
    out = np.empty((X.shape[0], Y.shape[0]))
    for i in range(X.shape[0]):
        u = GX[i, :].new()
        for j in range(Y.shape[0]):
            v = GY[j, :].new()
            w = u.ewise_union(v, op[gb.dtypes.FP64], 0.0, 0.0).new()
            acc = w.reduce(gb_monoids[add]).new()
            terms = [] if acc.value is None else [acc.value]
            if w.nvals < X.shape[1]:  # columns stored in neither row contribute mult(0, 0)
                terms.append(zero_zero)
            out[i, j] = _fold(add, terms)
    return out


def _fold(add: str, terms):
    identity = {"plus": 0.0, "times": 1.0, "min": math.inf, "max": -math.inf}[add]
    f = {"plus": lambda a, b: a + b, "times": lambda a, b: a * b, "min": min, "max": max}[add]
    acc = identity
    for t in terms:
        acc = f(acc, t)
    return acc


def assert_matches_structural(ours: np.ndarray, C: gb.Matrix, identity: float, rtol: float):
    rows, cols, vals = C.to_coo()
    want = np.full(ours.shape, identity)
    want[rows, cols] = vals
    np.testing.assert_allclose(ours, want, rtol=rtol, atol=1e-300)


def rtol_for(X):
    return 1e-5 if X.dtype == np.float32 else 1e-12


# graphblas's any may return any of the values: any_first and any_second are checked against our documented choice.
ANY_CHOICE = ("any_first", "any_second")
BUILTIN_INTERSECTION = [
    name for name, s in semiring.BUILTIN_SEMIRINGS.items() if not s.is_union and name not in ANY_CHOICE
]


# The ops see every value as float64 (the kernels convert it on load), so the input's value and index types are the
# kernels' skeleton's concern, the same for every semiring: every pair of types is checked on one built-in of each
# semantics, the others on float64 values and int32 indices (each pair of types is one more compile of a
# semiring's kernels: with every pair for every built-in, this test and the next took 123 s of a cold run on the
# 2-core development machine, 62 s like this).  The union semirings below likewise, plus_absdiff on every pair
# (38 s cold, 21 s like this).
EVERY_TYPE = ("plus_times", "plus_first", "plus_absdiff")


def builtin_pair(name, data, **shape):
    types = {} if name in EVERY_TYPE else {"dtype": np.float64, "index": np.int32}
    return data.draw(sparse_pair(**shape, **types))


@pytest.mark.parametrize("name", BUILTIN_INTERSECTION)
@given(data=st.data())
def test_builtin_intersection_semirings_match_graphblas(name, data):
    """Every built-in of python-graphblas's name computes what graphblas's semiring of that name does."""
    X, Y = builtin_pair(name, data)
    sr = getattr(semiring, name)
    ours = semiring.pairwise(X, Y, sr)
    C = to_gb(X).mxm(to_gb(Y).T, getattr(gb.semiring, name)).new()
    assert_matches_structural(ours, C, sr.add.identity, rtol_for(X))


@pytest.mark.parametrize("name", ANY_CHOICE)
@given(data=st.data())
def test_any_picks_the_value_of_largest_magnitude_where_graphblas_has_one(name, data):
    """Stored where graphblas's any_first/any_second store a value; the value is the documented choice among
    the candidates (largest magnitude, the positive one on a tie), computed here in float64 by brute force."""
    X, Y = builtin_pair(name, data)
    ours = semiring.pairwise(X, Y, getattr(semiring, name))
    rows, cols, _ = to_gb(X).mxm(to_gb(Y).T, getattr(gb.semiring, name)).new().to_coo()
    want = np.zeros(ours.shape)
    source = X if name == "any_first" else Y
    for i, j in zip(rows, cols):
        common = np.intersect1d(X[i].indices, Y[j].indices)
        row = source[i] if name == "any_first" else source[j]
        candidates = row.toarray()[0, common].astype(np.float64)
        want[i, j] = max(candidates, key=lambda v: (abs(v), v))
    np.testing.assert_array_equal(ours, want)


def test_logical_monoids_work_on_truth_values():
    assert monoid.lor.identity == 0.0 and monoid.land.identity == 1.0
    assert [monoid.lor.op(a, b) for a, b in ((0, 0), (0, -2.5), (3, 0))] == [0.0, 1.0, 1.0]
    assert [monoid.land.op(a, b) for a, b in ((1, 1), (-2.5, 4), (3, 0))] == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="not an identity"):
        Monoid(binary_op("x or y"), 1.0)
    # a value other than the identity reads as true: lor_times is "some common column with a nonzero product"
    X = sp.csr_matrix(np.array([[2.0, 0.0, -1.5], [0.0, 3.0, 0.0]]))
    np.testing.assert_array_equal(semiring.pairwise(X, X, Semiring(monoid.lor, binary_op("x * y"))), np.eye(2))


def test_structural_semantics_is_graphblas_meaning_by_declaration():
    # plus_first's dense meaning would be X's row sum; the structural one sums X's values where Y stores one
    X = sp.csr_matrix(np.array([[1.0, 2.0, 4.0]]))
    Y = sp.csr_matrix(np.array([[0.0, 5.0, 0.0]]))
    assert semiring.pairwise(X, Y, semiring.plus_first)[0, 0] == 2.0
    with pytest.raises(ValueError, match="semantics='structural' asks for GraphBLAS's meaning"):
        Semiring(monoid.plus, binary_op("x"), semantics="intersection")
    assert Semiring(monoid.plus, binary_op(absdiff), semantics="structural").semantics == "structural"


@pytest.mark.parametrize("masked", [False, True])
def test_graphblas_matrices_in_and_out(masked):
    X = sp.random(5, 7, density=0.4, format="csr", random_state=4)
    Y = sp.random(3, 7, density=0.4, format="csr", random_state=5)
    M = sp.random(5, 3, density=0.5, format="csr", random_state=6) if masked else None
    gM = None if M is None else to_gb(M)
    got = semiring.pairwise(to_gb(X), to_gb(Y), semiring.plus_times, mask=gM)
    assert isinstance(got, gb.Matrix) and got.shape == (5, 3)
    # the oracle: graphblas's own mxm (masked by M's structure), every other entry 0
    C = to_gb(X).mxm(to_gb(Y).T, gb.semiring.plus_times)
    want = gb.Matrix(gb.dtypes.FP64, 5, 3)
    want(mask=gM.S if masked else None) << C
    dense_want = gb.io.to_scipy_sparse(want).toarray()
    np.testing.assert_allclose(gb.io.to_scipy_sparse(got).toarray(), dense_want, rtol=1e-12)
    if masked:  # exactly the mask's pattern
        assert got.nvals == M.nnz
    assert isinstance(semiring.pairwise(X, to_gb(Y), semiring.plus_times), gb.Matrix)  # either operand


# A user-defined op in one line; its zero annihilates, so the intersection suffices.
def damped_product(x, y):
    return x * y / (1 + abs(x - y))


# A user's op sees float64 values whatever the input's types (see EVERY_TYPE): its semirings on one pair of types.
USER_OP_TYPES = {"dtype": np.float64, "index": np.int32}


@given(data=st.data())
def test_custom_one_line_semiring_matches_graphblas(data):
    X, Y = data.draw(sparse_pair(**USER_OP_TYPES))
    sr = Semiring(monoid.plus, binary_op(lambda x, y: x * y / (1 + abs(x - y))))
    assert sr.semantics == "intersection" and sr.annihilates
    ours = semiring.pairwise(X, Y, sr)
    C = gb_mxm(X, Y, "plus", damped_product)
    assert_matches_structural(ours, C, 0.0, rtol_for(X))


def shifted_max(x, y):
    return max(x, y) + 1.0 if x > y else y - x


@given(data=st.data())
def test_custom_structural_semiring_with_conditional_matches_graphblas(data):
    X, Y = data.draw(sparse_pair(**USER_OP_TYPES))
    sr = Semiring(monoid.min, binary_op(shifted_max))
    assert sr.semantics == "intersection" and not sr.annihilates  # mult(0, 0) = 0 is not neutral under min
    ours = semiring.pairwise(X, Y, sr)
    assert_matches_structural(ours, gb_mxm(X, Y, "min", shifted_max), math.inf, rtol_for(X))


def absdiff(x, y):
    return abs(x - y)


def sqdiff(x, y):
    return (x - y) * (x - y)


def clipped_gap(x, y):
    return min(abs(x - y), 2.0) if x != y else 0.0


UNION_CASES = [
    ("plus", absdiff, lambda: semiring.plus_absdiff),
    ("max", absdiff, lambda: semiring.max_absdiff),
    ("plus", sqdiff, lambda: semiring.plus_sqdiff),
    ("plus", clipped_gap, lambda: Semiring(monoid.plus, binary_op(clipped_gap))),
    ("max", clipped_gap, lambda: Semiring(monoid.max, binary_op(clipped_gap))),
]


@pytest.mark.parametrize(
    "add, func, make", UNION_CASES, ids=["plus_absdiff", "max_absdiff", "plus_sqdiff", "plus_custom", "max_custom"]
)
@given(data=st.data())
def test_union_semirings_match_graphblas_ewise_union(add, func, make, data):
    sr = make()
    X, Y = builtin_pair(sr.name, data, max_rows=5)
    assert sr.semantics == "union"
    ours = semiring.pairwise(X, Y, sr)
    want = gb_union(X, Y, add, func, zero_zero=func(0.0, 0.0))
    np.testing.assert_allclose(ours, want, rtol=rtol_for(X), atol=1e-300)


@given(data=st.data())
def test_union_counts_an_explicit_zero_once(data):
    """A stored zero is a stored column: |x - 0| is added once, not twice (once per pass)."""
    X = sp.csr_matrix((np.array([0.0, 2.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 3))
    Y = sp.csr_matrix((np.array([0.0, 5.0]), np.array([0, 2]), np.array([0, 2])), shape=(1, 3))
    # dense: |0-0| + |2-0| + |0-5| = 7; with a double-counted stored zero a hit would be added twice
    assert semiring.pairwise(X, Y, semiring.plus_absdiff)[0, 0] == 7.0
    counted = Semiring(monoid.plus, binary_op("1.0 if x != y else 0.0"))  # hamming numerator
    assert semiring.pairwise(X, Y, counted)[0, 0] == 2.0
    X2, Y2 = data.draw(sparse_pair())
    dense = np.abs(X2.toarray()[:, None, :].astype(float) - Y2.toarray()[None, :, :]).sum(-1)
    np.testing.assert_allclose(semiring.pairwise(X2, Y2, semiring.plus_absdiff), dense, rtol=rtol_for(X2))


@given(data=st.data(), density=st.sampled_from([0.0, 0.3, 1.0]))
def test_mask_computes_only_its_pattern(data, density):
    # int32 indices: the masked kernel's int64 form is tests/cpu/test_cpu_engine.py's
    X, Y = data.draw(sparse_pair(dtype=np.float64, index=np.int32))
    M = sp.random(X.shape[0], Y.shape[0], density=density, format="csr", random_state=7)
    for sr in (semiring.plus_times, semiring.plus_absdiff, semiring.min_plus):
        full = semiring.pairwise(X, Y, sr)
        got = semiring.pairwise(X, Y, sr, mask=M)
        assert isinstance(got, sp.csr_matrix) and got.shape == full.shape
        np.testing.assert_array_equal(got.indptr, M.indptr)
        np.testing.assert_array_equal(got.indices, M.indices)
        rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
        # masked entries merge the two rows; the dense kernels sum in another order
        np.testing.assert_allclose(got.data, full[rows, M.indices], rtol=1e-13, atol=1e-300)


def test_mask_kind_follows_the_mask():
    X = sp.random(4, 5, density=0.5, format="csr", random_state=1)
    M = sp.csr_array(np.eye(4))
    assert isinstance(semiring.pairwise(X, X, semiring.plus_times, mask=M), sp.csr_array)


def test_semantics_derived_from_ops():
    assert semiring.plus_times.semantics == "intersection" and semiring.plus_times.annihilates
    assert semiring.plus_pair.semantics == "intersection" and not semiring.plus_pair.annihilates
    assert semiring.min_plus.semantics == "intersection"
    assert semiring.plus_absdiff.semantics == "union"
    assert Semiring(monoid.plus, binary_op("abs(x - y) ** p", p=3.0)).semantics == "union"
    assert Semiring(monoid.plus, binary_op("sqrt(x * y)")).semantics == "intersection"


def test_override_that_agrees_is_accepted():
    forced = Semiring(monoid.plus, binary_op("x * y"), semantics="union")  # annihilating: same result, slower
    X = sp.random(5, 6, density=0.5, format="csr", random_state=2)
    np.testing.assert_allclose(semiring.pairwise(X, X, forced), semiring.pairwise(X, X, semiring.plus_times))


def test_override_that_contradicts_the_ops_is_refused():
    with pytest.raises(ValueError, match="contradicts its ops.*zero does not annihilate"):
        Semiring(monoid.plus, binary_op(absdiff), semantics="intersection")
    with pytest.raises(ValueError, match="contradicts its ops.*mult\\(0, 0\\)"):
        Semiring(monoid.min, binary_op("x + y"), semantics="union")
    with pytest.raises(ValueError, match="semantics must be one of"):
        Semiring(monoid.plus, binary_op("x * y"), semantics="outer")


def test_monoid_identity_is_checked():
    with pytest.raises(ValueError, match="not an identity"):
        Monoid(binary_op("x + y"), 1.0)
    with pytest.raises(ValueError, match="not commutative"):
        Monoid(binary_op("x if y == 0 else y"), 0.0)
    assert Monoid(binary_op(lambda a, b: max(a, b)), -math.inf).identity == -math.inf


def test_params_are_runtime_values():
    powdiff = Semiring(monoid.plus, binary_op("abs(x - y) ** p", p=1.0))
    X = sp.csr_matrix(np.array([[0.0, 2.0, -1.0]]))
    Y = sp.csr_matrix(np.array([[1.0, 0.0, 1.0]]))
    assert semiring.pairwise(X, Y, powdiff)[0, 0] == 5.0
    assert semiring.pairwise(X, Y, powdiff.with_params(p=2.0))[0, 0] == 9.0
    assert powdiff.key == powdiff.with_params(p=2.0).key  # one kernel for every p
    with pytest.raises(TypeError, match="has no parameter"):
        powdiff.with_params(q=1.0)


def test_semiring_by_name_and_bad_semiring():
    X = sp.random(3, 4, density=0.5, format="csr", random_state=3)
    np.testing.assert_array_equal(semiring.pairwise(X, X, "plus_times"), semiring.pairwise(X, X, semiring.plus_times))
    with pytest.raises(TypeError, match="sr must be a Semiring.*plus_times"):
        semiring.pairwise(X, X, "plus_nothing")


def test_empty_intersection_holds_the_identity():
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]))
    Y = sp.csr_matrix(np.array([[0.0, 2.0]]))
    np.testing.assert_array_equal(semiring.pairwise(X, Y, semiring.min_plus), [[np.inf], [np.inf]])
    np.testing.assert_array_equal(semiring.pairwise(X, Y, semiring.plus_times), [[0.0], [0.0]])


def test_infinite_values_are_semiring_values():
    X = sp.csr_matrix(np.array([[np.inf, 1.0]]))
    assert semiring.pairwise(X, X, semiring.min_plus)[0, 0] == 2.0


SPLIT_UNIONS = {
    "plus_absdiff": lambda: semiring.plus_absdiff,
    "canberra": lambda: Semiring(
        monoid.plus, binary_op("abs(x - y) / (abs(x) + abs(y)) if abs(x) + abs(y) > 0 else 0")
    ),
    "hamming": lambda: Semiring(monoid.plus, binary_op("x != y")),
    "powdiff_p3": lambda: Semiring(monoid.plus, binary_op("abs(x - y) ** p", p=3.0)),
}


@pytest.mark.parametrize("name", SPLIT_UNIONS)
@given(data=st.data())
def test_margin_split_reassembles_the_union(name, data):
    """margins + the cross intersection = the union, against a dense float64 evaluation of the op."""
    sr = SPLIT_UNIONS[name]()
    nonnegative = data.draw(st.booleans())
    split = sr.margin_split(nonnegative=nonnegative)
    if split is None:  # only |x - y|**3 on signed data may exceed its margins
        assert name == "powdiff_p3" and not nonnegative
        return
    assert split.cross.semantics == "intersection" and split.cross.annihilates
    X, Y = data.draw(sparse_pair(nonnegative=nonnegative, **USER_OP_TYPES))  # the cross op is a user op
    f = np.vectorize(sr.mult.__call__, otypes=[float])
    Xd, Yd = X.toarray(), Y.toarray()
    want = f(Xd[:, None, :], Yd[None, :, :]).sum(-1)
    margin = [np.vectorize(_margin(t), otypes=[float]) for t in (split.x_margin, split.y_margin)]
    nx = np.array([margin[0](X[i].data).sum() for i in range(X.shape[0])])
    ny = np.array([margin[1](Y[j].data).sum() for j in range(Y.shape[0])])
    got = semiring.pairwise(X, Y, split.cross, backend="cpu") + nx[:, None] + ny[None, :]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * (1 + np.abs(want).max(initial=0)))


def _margin(tree):
    fn = semiring.expr.compile_python(tree, ("x",))
    return lambda v: fn(np.float64(v), np.zeros(1))


def test_margin_split_refuses_what_it_cannot_bound():
    assert semiring.max_absdiff.margin_split() is None  # not a plus monoid
    assert semiring.plus_times.margin_split() is None  # not a union
    assert semiring.plus_sqdiff.margin_split() is None  # (1 - (-1))² = 4 > 1 + 1 on signed data
    assert semiring.plus_sqdiff.margin_split(nonnegative=True) is not None
    kl = Semiring(monoid.plus, binary_op("x * log(x / y) if x > 0 else 0.0"))
    assert kl.margin_split(nonnegative=True) is None  # f(x, 0) = inf
