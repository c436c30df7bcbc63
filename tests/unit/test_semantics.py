"""Intersection or union, proved from the expression tree (semiring/semantics.py, ops._derive_semantics).

The oracle everywhere is the dense float64 fold over ALL columns,
``C[i, j] = ⊕_k mult(X[i, k], Y[j, k])`` with a missing entry read as 0,
evaluated with the op's own scalar Python evaluator: never our engine.  The
property: whatever semantics is derived, computing with it gives that fold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import semiring
from semiring import BinaryOp, Semiring, binary_op, monoid
from semiring import semantics as S
from semiring.distances.specs import DISTANCES
from semiring.expr import Node, parse, substitute
from semiring.graph.measures import plus_min

X_NONZERO = {Node("var", ("x",)): S.NONZERO}


def reduce(text: str, zero: str = "y", facts=None, **params: float) -> Node:
    tree, _ = parse(text, ("x", "y", *params))
    return S.simplify(S.at_zero(tree, zero, params), facts)


# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    "text, value",
    [
        ("1 / 0", math.inf),  # constants fold with IEEE semantics, as the engines compute
        ("sqrt(-1)", math.nan),
        ("0 * inf", math.nan),
        ("min(nan, 1)", 1.0),  # fmin: a NaN argument is ignored
        ("max(0.3, -2) ** 2", 0.09),
        ("(1 < 2) + (2 == 2) + (not 0.0) + (0.3 and 0.0)", 3.0),
        ("2 if 0.3 > 1 else -2", -2.0),
    ],
)
def test_constants_fold_as_the_engine_evaluates_them(text, value):
    got = reduce(text)
    assert got.kind == "num"
    assert (math.isnan(got.args[0]) and math.isnan(value)) or got.args[0] == value


@pytest.mark.parametrize(
    "text",
    [
        "x * y",  # a factor 0 with a finite co-factor
        "x * y * (x - 0.3)",
        "y / (1 + abs(x))",  # 0 / e with e provably nonzero
        "sqrt(x * y)",
        "abs(x * y)",
        "min(abs(x), abs(y))",  # min(|x|, 0) = 0 from the signs
        "y ** 2 * x",
        "pow(y, 0.5)",
        "x * y / (1 + abs(x - y))",
        "(abs(x - y) - abs(x - 0)) - abs(0 - y)",  # margin_split's cross op: e - e = 0
        "((x - y) * (x - y) - (x - 0) * (x - 0)) - (0 - y) * (0 - y)",
        "x * y if x > 0.3 else 0.0",  # every branch reduces to 0
        "2 if 0.3 > 1 else x * y",  # a test that folds takes its branch
        "(x * y != 0) * x",
        "0.0 if x != 0 else 1.0",  # x is nonzero here (mult(0, 0) is evaluated apart)
        "x * (x * y if abs(x) > 0 else 1 / x)",
        "0 * (y / x)",  # y / x is finite where x is nonzero
    ],
)
def test_proved_zero_at_y_zero(text):
    assert S.proves_value(S.at_zero(parse(text, ("x", "y"))[0], "y"), 0.0, X_NONZERO)


@pytest.mark.parametrize(
    "text, why",
    [
        ("x * y + (1.0 if x == 0.3 else 0.0)", "one value of x is special"),
        ("0 * (1 / (x - 1))", "0 * inf at x = 1"),
        ("y / (x - 1)", "0 / 0 at x = 1"),
        ("y / abs(x - 0.3)", "0 / 0 at x = 0.3"),
        ("log(x) * y", "log of a negative x is NaN"),
        ("sqrt(x) * y", "sqrt of a negative x is NaN"),
        ("min(x, abs(y))", "min(x, 0) is x for negative x"),
        ("max(abs(x), abs(y))", "|x|"),
        ("y ** x", "0 ** x is inf for negative x"),
        ("abs(x - y)", "|x|"),
        ("x * log(x / y) if x > 0 else 0.0", "x log(x / 0) = inf"),
        ("1.0 if x != y else 0.0", "1 for every nonzero x"),
        ("x * y if x > 0.3 else x", "one branch is 0, the other x"),
    ],
)
def test_not_proved_at_y_zero(text, why):
    assert not S.proves_value(S.at_zero(parse(text, ("x", "y"))[0], "y"), 0.0, X_NONZERO), why


def test_identical_subtrees_cancel_only_when_finite():
    assert S.proves_value(parse("abs(x) - abs(x)", ("x",))[0], 0.0)
    assert not S.proves_value(parse("log(x) - log(x)", ("x",))[0], 0.0)  # -inf - -inf at x = 0
    assert not S.proves_value(parse("(x + 1) - x", ("x",))[0], 1.0)  # not exact in floating point: not a rule


def test_a_quotient_of_equal_subtrees_is_one_only_where_finite_and_nonzero():
    one = S.simplify(parse("abs(x) / abs(x) if abs(x) > 0 else 0.0", ("x",))[0])
    assert S.render(one) == "1.0 if (abs(x) > 0.0) else 0.0"
    for text in ("x / x", "log(x) / log(x)", "(x * x) / (x * x)"):  # 0/0, -inf/-inf, x·x = 0: NaN, not 1
        tree = parse(text, ("x",))[0]
        assert S.simplify(tree) == tree, text


def _calls(node, name: str) -> int:
    own = int(node.kind == "call" and node.args[0] == name)
    return own + sum(_calls(a, name) for a in node.args if isinstance(a, Node))


_EDGES = [0.0, -0.0, 1e-30, 1e-6, 0.25, 1.0, 3.0, 1e6, -1e-6, -0.5, -2.0, -1e6]


@pytest.mark.parametrize(
    "term, nonnegative",
    [(t, d.nonnegative) for d in DISTANCES for t in d.terms if t.margin_split(d.nonnegative) is not None],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_a_simplified_cross_op_is_its_definition(term, nonnegative):
    """The cross op, its margins simplified, against f(x, y) − f(x, 0) − f(0, y) by the op's own evaluator,
    at every pair of edge values the data may hold (nonnegative ones only where the measure takes only those)."""
    cross, f = term.margin_split(nonnegative).cross.mult, term.mult
    values = [v for v in _EDGES if v >= 0.0] if nonnegative else _EDGES
    with np.errstate(all="ignore"):
        for a in values:
            for b in values:
                want = f(a, b) - f(a, 0.0) - f(0.0, b)
                assert cross(a, b) == pytest.approx(want, nan_ok=True, rel=0, abs=0), (a, b)


def test_jensenshannon_cross_op_takes_two_logarithms():
    (term,) = next(d for d in DISTANCES if d.name == "jensenshannon").terms
    assert _calls(term.margin_split(True).cross.mult.tree, "log") == 2


def test_a_conditional_learns_from_its_test():
    # |x| / |x| is NaN at x = 0, but the branch runs only where |x| > 0
    tree = parse("(abs(x) / abs(x) - abs(x) / abs(x)) if abs(x) > 0 else 0.0", ("x",))[0]
    assert S.proves_value(tree, 0.0)
    assert S.value_range(parse("x / abs(x) if abs(x) > 0 else 0.0", ("x",))[0]).finite
    assert not S.value_range(parse("x / abs(x) if abs(x) >= 0 else 0.0", ("x",))[0]).finite


def test_value_range_signs():
    def signs(text):
        r = S.value_range(parse(text, ("x", "y"))[0])
        return set(r.signs), r.finite

    assert signs("abs(x - y)") == ({0, 1}, True)
    assert signs("(y - x) * (y - x)") == ({0, 1}, True)
    assert signs("1 + abs(x)") == ({1}, True)
    assert signs("-exp(x)") == ({-1}, True)
    assert signs("x / y") == ({-1, 0, 1}, False)
    assert signs("min(abs(x), -1)") == ({-1}, True)


# --------------------------------------------------------------------------- derived semantics

ADVERSARIAL = "x * y + (1.0 if x == 0.3 else 0.0)"


def dense_fold(X, Y, add, mult) -> np.ndarray:
    """The oracle: ⊕ over ALL columns of mult(X[i, k], Y[j, k]), missing entries read as 0, float64."""
    Xd, Yd = X.toarray().astype(np.float64), Y.toarray().astype(np.float64)
    out = np.full((Xd.shape[0], Yd.shape[0]), add.identity)
    for i in range(Xd.shape[0]):
        for j in range(Yd.shape[0]):
            acc = add.identity
            for k in range(Xd.shape[1]):
                acc = add.op(acc, mult(Xd[i, k], Yd[j, k]))
            out[i, j] = acc
    return out


def test_the_adversarial_op_is_a_union_and_computes_the_dense_fold():
    sr = Semiring(monoid.plus, binary_op(ADVERSARIAL))
    assert sr.semantics == "union" and not sr.annihilates  # the probe guess said "intersection"
    X = sp.csr_matrix(np.array([[0.3, 0.0, 2.0], [0.0, 0.0, 0.0], [0.3, 0.3, 0.0]]))
    Y = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    want = dense_fold(X, Y, sr.add, sr.mult)
    assert want[0, 0] == 1.0 and want[2, 1] == 2.0  # the columns an intersection would drop
    np.testing.assert_array_equal(semiring.pairwise(X, Y, sr, backend="cpu"), want)
    with pytest.raises(ValueError, match=r"semantics='intersection' contradicts its ops.*mult\(0.3, 0.0\) = 1.0"):
        Semiring(monoid.plus, binary_op(ADVERSARIAL), semantics="intersection")


def test_an_unproved_annihilation_is_a_union_even_without_a_counterexample():
    # 1 / (x * x - 0.09) is infinite at x = ±0.3, a value no probe holds: nothing refutes, nothing proves
    sr = Semiring(monoid.plus, binary_op("y * (1 / (x * x - 0.09))"))
    assert sr.semantics == "union"
    with pytest.raises(ValueError, match="not proved to annihilate"):
        Semiring(sr.add, sr.mult, semantics="intersection")


def test_neutrality_of_zero_times_zero():
    # equal to the identity: neutral
    assert Semiring(monoid.plus, binary_op("x * y")).annihilates
    # proved neutral over the products' range: |0 - 0| = 0 changes no max of absolute values
    assert semiring.max_absdiff.semantics == "union"
    # refuted by a concrete product: max(0, mult(-1, 1) = -2) = 0
    sr = Semiring(monoid.max, binary_op("x - y"))
    assert sr.semantics == "intersection" and not sr.annihilates
    with pytest.raises(ValueError, match=r"semantics='union' contradicts its ops: mult\(0, 0\) = 0.0 changes"):
        Semiring(monoid.max, binary_op("x - y"), semantics="union")


def test_undecided_neutrality_asks_for_an_explicit_semantics():
    # max(0, v) = v unless v < 0, which happens only at x = ±0.3: neither proved nor refuted
    op = binary_op("abs(x - y) - (1.0 if x * x == 0.09 else 0.0)")
    with pytest.raises(ValueError, match="neither proved nor refuted.*semantics='intersection'"):
        Semiring(monoid.max, op)
    assert Semiring(monoid.max, op, semantics="intersection").semantics == "intersection"
    assert Semiring(monoid.max, op, semantics="union").semantics == "union"


# Every built-in and every distance term, with the semantics it must keep (not read from the code under test).
EXPECTED_BUILTINS = {
    "plus_times": ("intersection", True),
    "plus_pair": ("intersection", False),
    "min_plus": ("intersection", False),
    "max_plus": ("intersection", False),
    "min_times": ("intersection", False),
    "max_times": ("intersection", False),
    "min_max": ("intersection", False),
    "max_min": ("intersection", False),
    "min_first": ("intersection", False),
    "max_second": ("intersection", False),
    "plus_absdiff": ("union", False),
    "max_absdiff": ("union", False),
    "plus_sqdiff": ("union", False),
    "max_first": ("intersection", False),
    "min_second": ("intersection", False),
    "lor_land": ("intersection", True),
    "land_lor": ("intersection", False),
    "plus_first": ("structural", False),
    "plus_second": ("structural", False),
    "plus_min": ("structural", False),
    "any_pair": ("structural", False),
    "any_first": ("structural", False),
    "any_second": ("structural", False),
}
EXPECTED_DISTANCE_TERMS = {
    "plus_absdiff": "union",
    "plus_abssum": "union",
    "plus_canberra": "union",
    "max_absdiff": "union",
    "plus_times": "intersection",
    "plus_sqdiff": "union",
    "plus_ne": "union",
    "plus_js": "union",
    "plus_rel_entr": "union",
    "plus_powdiff": "union",
    "plus_kl_raft": "union",  # cuML's kl_divergence: x log x − x log y, log 0 read as 0; nonzero where y = 0 < x
}


def test_every_builtin_keeps_its_semantics():
    assert set(semiring.BUILTIN_SEMIRINGS) == set(EXPECTED_BUILTINS)
    for name, sr in semiring.BUILTIN_SEMIRINGS.items():
        assert (sr.semantics, sr.annihilates) == EXPECTED_BUILTINS[name], name
    assert (plus_min.semantics, plus_min.annihilates) == ("intersection", True)  # graph similarities


def test_every_distance_term_keeps_its_semantics():
    seen = set()
    for d in DISTANCES:
        for sr in (*d.terms, *((d.refine.semiring,) if d.refine and d.refine.semiring else ())):
            assert sr.semantics == EXPECTED_DISTANCE_TERMS[sr.name], (d.name, sr.name)
            seen.add(sr.name)
    assert seen == set(EXPECTED_DISTANCE_TERMS)


# --------------------------------------------------------------------------- the property

LEAVES = st.sampled_from(
    [Node("var", ("x",)), Node("var", ("y",))] + [Node("num", (v,)) for v in (0.0, 1.0, 0.3, -2.0)]
)


def _extend(children):
    binary = st.tuples(st.sampled_from(["+", "-", "*", "/"]), children, children)
    call = st.tuples(st.sampled_from(["min", "max"]), children, children)
    test = st.tuples(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), children, children)
    return st.one_of(
        binary.map(lambda t: Node("bin", t)),
        children.map(lambda c: Node("neg", (c,))),
        children.map(lambda c: Node("call", ("abs", c))),
        call.map(lambda t: Node("call", t)),
        test.map(lambda t: Node("cmp", t)),
        st.tuples(test, children, children).map(lambda t: Node("if", (Node("cmp", t[0]), t[1], t[2]))),
    )


RANDOM_TREES = st.recursive(LEAVES, _extend, max_leaves=8)
_X, _Y = Node("var", ("x",)), Node("var", ("y",))
CORES = st.sampled_from(  # ops that annihilate: the boundary worth probing is next to them
    [Node("bin", ("*", _X, _Y)), Node("call", ("min", Node("call", ("abs", _X)), Node("call", ("abs", _Y))))]
)
COMPARISONS = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])


def _near(core, other, op, a, b):
    """An annihilating core perturbed by a random tree: summed, multiplied, or behind a test.

    The perturbation is shifted to vanish at (0, 0) (``other - other(0, 0)``), so
    ``0 ⊗ 0`` stays neutral under plus and the semiring is not merely structural.
    """
    zero = Node("num", (0.0,))
    other = Node("bin", ("-", other, substitute(other, {"x": zero, "y": zero})))
    test = Node("cmp", (op, a, b))
    return st.sampled_from(
        [
            Node("bin", ("+", core, other)),
            Node("bin", ("*", core, other)),
            Node("if", (test, core, other)),
            Node("if", (test, other, core)),
            Node("bin", ("-", core, Node("if", (test, other, Node("num", (0.0,)))))),
        ]
    )


OPERANDS = st.one_of(LEAVES, RANDOM_TREES)  # x or y alone are the likeliest to matter
NEAR_ANNIHILATING = st.tuples(CORES, OPERANDS, COMPARISONS, OPERANDS, OPERANDS).flatmap(lambda t: _near(*t))
TREES = st.one_of(RANDOM_TREES, NEAR_ANNIHILATING)
# Data values include the trees' constants, so an op that is special at 0.3 or -2 meets them.
VALUES = st.sampled_from([0.0, 0.3, 1.0, -2.0, 0.5, -0.3, 2.5])


@st.composite
def small_pair(draw):
    """X and Y with a shared width (1 to 4 columns), empty rows and explicitly stored zeros."""
    n = draw(st.integers(1, 4))

    def matrix():
        m = draw(st.integers(0, 3))
        cells = draw(st.lists(st.one_of(st.none(), VALUES), min_size=m * n, max_size=m * n))
        stored = [(k // n, k % n, v) for k, v in enumerate(cells) if v is not None]
        rows, cols, vals = zip(*stored) if stored else ((), (), ())
        return sp.csr_matrix((np.array(vals, dtype=np.float64), (rows, cols)), shape=(m, n))

    return matrix(), matrix()


def derived_fold(X, Y, sr: Semiring) -> np.ndarray:
    """What the derived semantics computes: ⊕ over the intersection, or over the union started at mult(0, 0)."""
    out = np.empty((X.shape[0], Y.shape[0]))
    for i in range(X.shape[0]):
        xi = dict(zip(X.indices[X.indptr[i] : X.indptr[i + 1]], X.data[X.indptr[i] : X.indptr[i + 1]]))
        for j in range(Y.shape[0]):
            yj = dict(zip(Y.indices[Y.indptr[j] : Y.indptr[j + 1]], Y.data[Y.indptr[j] : Y.indptr[j + 1]]))
            if sr.semantics == "intersection":
                cols, acc = sorted(xi.keys() & yj.keys()), sr.add.identity
            else:  # the columns stored in neither row contribute mult(0, 0), neutral by derivation
                cols, acc = sorted(xi.keys() | yj.keys()), sr.mult(0.0, 0.0)
            for k in cols:
                acc = sr.add.op(acc, sr.mult(xi.get(k, 0.0), yj.get(k, 0.0)))
            out[i, j] = acc
    return out


@settings(max_examples=200)  # pure Python, no compile: cheap
@given(tree=TREES, add=st.sampled_from(["plus", "max"]), data=st.data())
def test_derived_semantics_computes_the_dense_fold(tree, add, data):
    op = BinaryOp(name="random", text=S.render(tree), tree=tree)
    try:
        sr = Semiring(getattr(monoid, add), op)
    except ValueError:  # 0 ⊗ 0's neutrality undecided: refused, so nothing to compute
        return
    if sr.semantics == "intersection" and not sr.annihilates:  # structural: the union is undefined
        return
    X, Y = data.draw(small_pair())
    # Exact: the dropped terms are proved to be exactly the identity (or a neutral mult(0, 0)).
    np.testing.assert_array_equal(derived_fold(X, Y, sr), dense_fold(X, Y, sr.add, sr.mult))


# A few fixed ops through the real CPU engine (each distinct op costs a numba compile).
ENGINE_CASES = [
    ("plus", ADVERSARIAL, "union"),
    ("plus", "x * y / (1 + abs(x - y))", "intersection"),
    ("plus", "min(abs(x), abs(y))", "intersection"),
    ("plus", "x * y if x > 0.3 else 0.0", "intersection"),
    ("max", "abs(x - y) if x != -2 else 0.0", "union"),
    ("plus", "y * (1 / (x * x - 0.09))", "union"),
]


@pytest.mark.parametrize("add, text, semantics", ENGINE_CASES)
@settings(max_examples=15)
@given(data=st.data())
def test_cpu_engine_computes_the_dense_fold(add, text, semantics, data):
    sr = Semiring(getattr(monoid, add), binary_op(text))
    assert sr.semantics == semantics
    X, Y = data.draw(small_pair())
    np.testing.assert_allclose(
        semiring.pairwise(X, Y, sr, backend="cpu"), dense_fold(X, Y, sr.add, sr.mult), rtol=1e-12, atol=1e-300
    )
