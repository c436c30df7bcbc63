"""The op language: declarations in every form, refusals, and the CPU and CUDA forms agreeing.

The CUDA form of every built-in op, distance op, norm and expansion is compiled
as host C++ (its math functions are the same C library functions) and evaluated
on the same inputs as the Python form the CPU engine compiles: one declaration,
two renderings, one answer.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from host_cpp import HAS_GXX, printed

from semiring import BINARY_OPS, binary_op
from semiring import expr as E
from semiring.distances.specs import DISTANCES, NORMS
from semiring.interfaces import EXPANSION_VARIABLES
from semiring.ops import PROBES


def test_forms_of_one_declaration_agree():
    def named(a, b):
        """Docstrings are allowed."""
        return a * b if a > b else -b

    forms = [
        binary_op("x * y if x > y else -y"),
        binary_op(lambda x, y: x * y if x > y else -y),
        binary_op(named),
        binary_op(lambda p, q: p * q if p > q else -q),  # argument names are free
    ]
    assert len({f.text for f in forms}) == 1
    assert forms[2].name == "named"


def test_two_lambdas_on_one_line_are_told_apart():
    ops = [binary_op(lambda x, y: x + y), binary_op(lambda x, y: x - y)]
    assert [op(5.0, 3.0) for op in ops] == [8.0, 2.0]


def test_math_spellings_and_constants():
    op = binary_op(lambda x, y: math.sqrt(abs(x)) + np.log(math.exp(y)) + max(x, y) + min(x, np.inf) + pow(2.0, 3.0))
    assert op(4.0, 1.0) == pytest.approx(2.0 + 1.0 + 4.0 + 4.0 + 8.0)


def test_ieee_semantics_no_exceptions():
    assert binary_op("x / y")(1.0, 0.0) == math.inf
    assert math.isnan(binary_op("sqrt(x)")(-1.0, 0.0))
    assert binary_op("log(x)")(0.0, 0.0) == -math.inf
    assert binary_op("min(x, y)")(math.nan, 2.0) == 2.0  # fmin ignores NaN, as CUDA's fmin


@pytest.mark.parametrize(
    "source, match",
    [
        ("x @ y", "unsupported syntax"),
        ("foo(x)", "unsupported function"),
        ("x < y < 1", "one comparison at a time"),
        ("z + 1", "unknown name 'z'"),
        ("x +", "cannot parse"),
        ("sqrt(x, y)", "takes 1 argument"),
        ("x.real", "unsupported syntax"),
        ("'a'", "unsupported syntax"),
    ],
)
def test_refused_expressions(source, match):
    with pytest.raises(E.ExpressionError, match=match):
        binary_op(source)


def test_refused_functions():
    def two_statements(x, y):
        z = x + y
        return z

    with pytest.raises(E.ExpressionError, match="single 'return <expression>'"):
        binary_op(two_statements)
    with pytest.raises(E.ExpressionError, match="must take 2 arguments"):
        binary_op(lambda x: x)
    with pytest.raises(TypeError, match="function or an expression string"):
        binary_op(3.0)


def test_bindings_substitute():
    _, text = E.parse("d = x - y; d * d", ("x", "y"))
    assert text == "(x - y) * (x - y)"


# ----------------------------------------------------------------- CPU form == CUDA form


def _cases():
    """(label, tree, variables, params, input rows, parameter values, a tree rendered in one scope with it or
    None) for every expression the kernels render."""
    grid = [0.0, *PROBES[::2]]
    pairs = list(itertools.product(grid, grid))
    cases = [
        (f"op {name}", op.tree, ("x", "y"), op.param_names, pairs, op.param_values) for name, op in BINARY_OPS.items()
    ]
    for d in DISTANCES:
        for k, sr in enumerate(d.terms):
            values = np.array([d.params.get(p, 2.0) for p in sr.mult.param_names])
            cases.append((f"{d.name} term {k}", sr.mult.tree, ("x", "y"), sr.mult.param_names, pairs, values))
        rng = np.random.default_rng(len(d.name))
        rows = [tuple(r) for r in rng.uniform(-1, 3, size=(40, len(EXPANSION_VARIABLES)))]
        rows += [tuple(0.0 for _ in EXPANSION_VARIABLES), tuple(1.0 for _ in EXPANSION_VARIABLES)]
        cases.append(
            (
                f"{d.name} expansion",
                d.expansion_tree,
                EXPANSION_VARIABLES,
                d.param_names,
                rows,
                np.array(list(d.params.values()) or [], dtype=float),
            )
        )
        if d.refine is not None:  # the test of where the expansion cancels, rendered in one scope with it
            when = E.parse(d.refine.when, EXPANSION_VARIABLES)[0]
            cases.append((f"{d.name} refinement", when, *cases[-1][2:], d.expansion_tree))
    for name, text in NORMS.items():
        cases.append((f"norm {name}", E.parse(text, ("x",))[0], ("x",), (), [(v,) for v in grid], np.zeros(0)))
    return [case if len(case) == 7 else (*case, None) for case in cases]


@pytest.mark.skipif(not HAS_GXX, reason="needs a host C++ compiler (g++)")
def test_cuda_form_equals_python_form(tmp_path):
    """Each expression as ``render_cuda`` writes it inline and as ``render_cuda_shared`` writes it (its repeated
    subexpressions declared once, a refinement test in one scope with its expansion), against the Python form."""
    cases = _cases()
    lines = []
    for k, (label, tree, variables, params, rows, values, beside) in enumerate(cases):
        names = {v: v for v in variables}
        names.update({p: f"T(params[{i}])" for i, p in enumerate(params)})
        body = E.render_cuda(tree, names, "T")
        locals_, (shared, *_) = E.render_cuda_shared([tree, *([] if beside is None else [beside])], names)
        lines.append(f"  {{ double params[] = {{{', '.join(repr(float(v)) for v in values) or '0'}}};")
        for row in rows:
            decl = " ".join(f"double {v} = {float(x)!r};" for v, x in zip(variables, row))
            lines.append(f'    {{ {decl} printf("%.17g\\n", (double)({body})); }}')
            lines.append(f'    {{ {decl} {locals_} printf("%.17g\\n", (double)({shared})); }}')
        lines.append("  }")
    out = iter(printed(tmp_path, lines))
    with np.errstate(all="ignore"):
        for label, tree, variables, params, rows, values, _ in cases:
            fn = E.compile_python(tree, variables, params)
            for row in rows:
                want = float(fn(*(np.float64(x) for x in row), values))
                for form in ("CUDA form", "CUDA form with shared locals"):
                    got = float(next(out))
                    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-13, abs=0), (
                        f"{label} at {row}: {form} {got!r}, Python form {want!r}"
                    )


def test_shared_locals_declare_each_repeated_subexpression_once():
    """Correlation's clip holds its value three times and its refinement test repeats the product of the row
    terms and the root: declared once each, 12 square roots and 3 divisions become 3 and 1."""
    d = next(d for d in DISTANCES if d.name == "correlation")
    when = E.parse(d.refine.when, EXPANSION_VARIABLES)[0]
    names = {v: v for v in EXPANSION_VARIABLES}
    inline = E.render_cuda(d.expansion_tree, names) + E.render_cuda(when, names)
    locals_, (value, test) = E.render_cuda_shared([d.expansion_tree, when], names)
    assert inline.count("sqrt(") == 12 and inline.count(" / ") == 3, (inline.count("sqrt("), inline.count(" / "))
    shared = locals_ + value + test
    assert shared.count("sqrt(") == 3  # √q, else √vx·√vy
    assert shared.count(" / ") == 1  # cov / root: the row terms hold the rest (Distance.row_terms)
    assert locals_.count("const T sr_e") == len(set(locals_.split("const T ")[1:]))


@pytest.mark.parametrize(
    "text, kind",
    [
        ("y * x", "times"),
        ("y + x", "plus"),
        ("max(y, x)", "max"),
        ("abs(y - x)", "absdiff"),
        ("(y - x) * (y - x)", "sqdiff"),
        ("y - x", None),  # not minus: the operands' order matters outside abs and squares
        ("abs(x + y) - 0", None),
        ("(x - y) * (y - x)", None),  # -(x - y)², not sqdiff
    ],
)
def test_builtin_ops_are_recognised_whatever_the_operand_order(text, kind):
    assert binary_op(text).kind == kind


def test_builtin_monoids_are_recognised_whatever_the_operand_order():
    from semiring import Monoid

    assert Monoid(binary_op("y + x"), 0.0).kind == "plus"
    assert Monoid(binary_op("y * x"), 1.0).kind == "times"
    assert Monoid(binary_op("x + y"), 0.0).kind == "plus"
