"""Hostile input that runs no engine: expressions, parameter names, file readers and writers.

The standing suite of issue 12 (with ``tests/cpu/test_hostile.py`` for what
runs the CPU engine): each case is an input a careless or hostile user tried,
and the test says what must happen instead of a hang, a crash, a lost file or a
wrong answer.  Expected values come from NumPy float64 arithmetic, SciPy's
readers or the file system, never from the code under test.
"""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

from semiring import binary_op
from semiring import expr as E

# Expressions: bounded size and depth, no RecursionError, no exponential work


def _doubling(levels: int) -> str:
    return "a0 = x + y; " + "; ".join(f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, levels)) + f"; a{levels - 1}"


@pytest.mark.parametrize("levels", [12, 30, 200])
def test_doubled_bindings_are_refused_quickly(levels):
    start = time.perf_counter()
    with pytest.raises(E.ExpressionError, match=r"expands to [\d,]+ operations .* the limit is 2,000"):
        binary_op(_doubling(levels))
    assert time.perf_counter() - start < 1.0


def test_shared_bindings_within_the_limit_compute_the_expanded_value():
    op = binary_op(_doubling(8))  # 2^7 copies of x + y: 383 nodes
    assert op(1.0, 2.0) == 2**7 * 3.0
    tree, _ = E.parse(_doubling(8), ("x", "y"))
    assert E.expanded_size(tree) == (2**8 - 1 + 2**8, 9)


@pytest.mark.parametrize(
    "source",
    [
        "+".join(["x"] * 1000),
        "-" * 5000 + "x",
        "(" * 300 + "x" + ")" * 300,
        "a0 = x; " + "; ".join(f"a{i} = a{i - 1} * y" for i in range(1, 400)) + "; a399",
        "abs(" * 150 + "x" + ")" * 150,
        "x if y > 0 else " * 120 + "y",
    ],
    ids=["sum-chain", "unary-chain", "parentheses", "binding-chain", "calls", "conditionals"],
)
def test_deep_expressions_are_an_expression_error_not_a_recursion_error(source):
    with pytest.raises(E.ExpressionError, match="nested"):
        binary_op(source)


def test_huge_source_is_refused_before_parsing():
    with pytest.raises(E.ExpressionError, match="characters; the limit"):
        binary_op("x" + " + 0" * 100_000)


def test_a_long_flat_sum_within_the_limits_is_fine():
    assert binary_op("+".join(["x"] * 90))(1.0, 0.0) == 90.0


def test_function_declarations_are_bounded_too(tmp_path, monkeypatch):
    (tmp_path / "deep_op.py").write_text("def deep(x, y):\n    return " + "+".join(["x"] * 300) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from deep_op import deep

    with pytest.raises(E.ExpressionError, match="nested"):
        binary_op(deep)


# Names: a parameter or a binding never shadows an operand or a constant


@pytest.mark.parametrize("name", ["x", "y", "inf", "nan", "pi", "sqrt", "max", "np", "math"])
def test_parameter_named_like_an_operand_or_a_constant_is_refused(name):
    with pytest.raises(E.ExpressionError, match=f"parameter '{name}' has the name of"):
        binary_op("x * y", **{name: 2.0})


@pytest.mark.parametrize("binding", ["x = y; x * 2", "y = 1; x * y", "inf = 1; x + inf", "pi = 3; x * pi"])
def test_binding_named_like_an_operand_or_a_constant_is_refused(binding):
    with pytest.raises(E.ExpressionError, match="would hide the"):
        binary_op(binding)


def test_a_parameter_with_a_free_name_still_works():
    assert binary_op("x * y * w", w=2.0)(3.0, 5.0) == 30.0


# Constants: IEEE arithmetic (NumPy float64, errors ignored), never a Python exception


@pytest.mark.parametrize(
    "source, x, y",
    [
        ("x * (1/0)", 1.0, 2.0),
        ("x * y * 10.0 ** 400", 1.0, 2.0),
        ("x * y * (-8) ** (1/3)", 1.0, 2.0),
        ("x * y * (0.0 ** -1)", 1.0, 2.0),
        ("x + (1e308 * 10) - (1e308 * 10)", 1.0, 2.0),
        ("x * log(0) + y", 1.0, 2.0),
        ("sqrt(-1) + x", 1.0, 2.0),
    ],
)
def test_constant_arithmetic_is_ieee(source, x, y):
    with np.errstate(all="ignore"):
        expected = float(eval(_float64_literals(source), {"np": np, "x": np.float64(x), "y": np.float64(y)}))
    got = binary_op(source)(x, y)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


def _float64_literals(source: str) -> str:
    """``source`` with every number a NumPy float64, as the engines compute (an independent spelling)."""
    text = re.sub(r"(?<![\w.])(\d+\.?\d*(?:e\d+)?)", r"np.float64(\1)", source)
    return text.replace("log", "np.log").replace("sqrt", "np.sqrt")


def test_pow_keeps_its_operands_parentheses_in_the_text():
    op = binary_op("pow(x - 3, 2)")
    assert op.text == "(x - 3.0) ** 2.0"
    assert binary_op(op.text)(5.0, 0.0) == op(5.0, 0.0) == 4.0
