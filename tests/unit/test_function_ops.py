"""``binary_op(function)``: compiled only where what is compiled provably is what the function computes.

A function op is read from its source; it is refused ("declare it as a string") where that source is not
what runs: a decorator's wrapper, a closure, a global name bound to a user's object, a file edited since
it was imported, a swapped ``__code__`` whose source cannot be found.  And ``with_params`` derives the
semantics again unless the caller declared one.
"""

from __future__ import annotations

import functools
import importlib
import math
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from semiring import Semiring, binary_op, monoid
from semiring.expr import ExpressionError

REFUSED = "declare it as a string"


def _negated(f):
    @functools.wraps(f)
    def wrapper(x, y):
        return -f(x, y)

    return wrapper


@_negated
def _wrapped_product(x, y):
    return x * y


def _registered(f):  # a decorator that returns the function itself: still refused, nothing proves it
    return f


@_registered
def _decorated_product(x, y):
    return x * y


def test_a_functools_wraps_decorator_is_refused():
    """The issue's reproduction: -6.0 from the function, 6.0 from the op compiled from the wrapped source."""
    assert _wrapped_product(2.0, 3.0) == -6.0
    with pytest.raises(ExpressionError, match=f"wraps another function.*{REFUSED}"):
        binary_op(_wrapped_product)


def test_any_decorated_def_is_refused():
    with pytest.raises(ExpressionError, match=REFUSED):
        binary_op(_decorated_product)


def test_a_closure_is_refused():
    def scaled(k):
        return lambda x, y: x * k

    with pytest.raises(ExpressionError, match=f"reads k from an enclosing function.*{REFUSED}"):
        binary_op(scaled(3.0))


_USER_GLOBALS = {
    "abs": "def abs(v):\n    return -v\n",
    "sqrt": "def sqrt(v):\n    return v\n",
    "max": "max = min\n",
    "np": "class np:\n    @staticmethod\n    def sqrt(v):\n        return v\n",
    "inf": "inf = 1.0\n",
}


@pytest.mark.parametrize(
    "name, body",
    [
        ("abs", "abs(x - y)"),
        ("sqrt", "sqrt(x) + y"),
        ("max", "max(x, y)"),
        ("np", "np.sqrt(x) + y"),
        ("inf", "x * inf"),
    ],
)
def test_a_global_bound_to_a_users_object_is_refused(tmp_path, monkeypatch, name, body):
    module = tmp_path / f"user_ops_{name}.py"
    module.write_text(_USER_GLOBALS[name] + f"\nop = lambda x, y: {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    user = importlib.import_module(module.stem)
    try:
        with pytest.raises(ExpressionError, match=f"{name}.*{REFUSED}"):
            binary_op(user.op)
    finally:
        sys.modules.pop(module.stem, None)


def test_a_replaced_module_function_is_refused(monkeypatch):
    monkeypatch.setattr(math, "sqrt", lambda v: -v)
    with pytest.raises(ExpressionError, match=f"math.sqrt.*replaced since import.*{REFUSED}"):
        binary_op(lambda x, y: math.sqrt(x) + y)


def test_a_numpy_reduction_is_not_the_languages_minimum():
    with pytest.raises(ExpressionError, match=f"np.min.*{REFUSED}"):
        binary_op(lambda x, y: np.min(x, y))


def test_a_source_file_edited_since_import_is_refused(tmp_path, monkeypatch):
    module = tmp_path / "edited_ops.py"
    module.write_text("def op(x, y):\n    return x * y\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    user = importlib.import_module("edited_ops")
    try:
        assert binary_op(user.op)(2.0, 3.0) == 6.0
        module.write_text("def op(x, y):\n    return x + y\n")  # same lines, another body: not what runs
        with pytest.raises(ExpressionError, match=f"changed since it was imported.*{REFUSED}"):
            binary_op(user.op)
    finally:
        sys.modules.pop("edited_ops", None)


def test_a_swapped_code_object_compiles_what_runs():
    op = lambda x, y: x + y
    op.__code__ = (lambda x, y: x * y).__code__
    assert binary_op(op)(2.0, 5.0) == op(2.0, 5.0) == 10.0


def test_language_names_and_their_real_objects_are_accepted():
    op = binary_op(lambda x, y: math.sqrt(abs(x)) + np.log(math.exp(y)) + max(x, y) + np.fmin(x, np.inf))
    assert op(4.0, 1.0) == pytest.approx(2.0 + 1.0 + 4.0 + 4.0)


_BODIES = ["x * y", "abs(x - y)", "x * y if x > y else -y", "max(x, y) - min(x, y)", "(x - y) ** 2.0"]


@functools.cache
def _functions() -> list:
    """Each body as a def in a module file (a function op needs a source to read)."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="function_ops_")
    with open(f"{folder}/many_ops.py", "w") as f:
        f.write("".join(f"def f{k}(x, y):\n    return {body}\n\n\n" for k, body in enumerate(_BODIES)))
    sys.path.insert(0, folder)
    try:
        module = importlib.import_module("many_ops")
    finally:
        sys.path.remove(folder)
        sys.modules.pop("many_ops", None)
    return [getattr(module, f"f{k}") for k in range(len(_BODIES))]


@given(k=st.integers(0, len(_BODIES) - 1), x=st.floats(-1e3, 1e3), y=st.floats(-1e3, 1e3))
def test_an_accepted_function_computes_what_its_op_computes(k, x, y):
    """Every function accepted computes, on finite values, what the compiled op computes."""
    f = _functions()[k]
    assert binary_op(f)(x, y) == pytest.approx(f(x, y), rel=1e-12, abs=1e-300)


# with_params: the semantics derived again for the new values, unless declared


@given(p=st.sampled_from([0.0, 1.0, -1.0, 2.5]), q=st.sampled_from([0.0, 1.0, -1.0, 2.5]))
def test_with_params_gives_the_semantics_of_a_fresh_declaration(p, q):
    for text in ("abs(x - y) + p", "x * y + p", "x * y * p", "(x - y) * p"):
        sr = Semiring(monoid.plus, binary_op(text, p=p))
        assert sr.with_params(p=q).semantics == Semiring(monoid.plus, binary_op(text, p=q)).semantics


def test_with_params_keeps_a_declared_semantics():
    sr = Semiring(monoid.plus, binary_op("abs(x - y) + p", p=0.0), semantics="structural")
    assert sr.with_params(p=1.0).semantics == "structural"
