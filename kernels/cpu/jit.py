"""The numba options of every CPU kernel, and the compile step that turns an op's expression into inlined code.

One place for the options, so that the kernels of every module are compiled
alike:

* ``nogil`` — kernels release the GIL, so callers' threads can overlap them;
* ``error_model="numpy"`` — x/0 gives inf or NaN as in NumPy (the semantics the
  ops are declared with), not a ZeroDivisionError, and divisions need no check;
* ``cache=False`` — kernels are closures over a semiring's compiled ops, which
  numba's disk cache cannot key; compiled kernels are memoised in-process instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from numba import njit

from semiring import expr as _expr

JIT = {"nogil": True, "error_model": "numpy", "cache": False}


def compile_scalar(tree: _expr.Node, variables: Sequence[str], params: Sequence[str] = ()):
    """``f(*variables, params)`` for ``tree`` as a numba function inlined into the kernels that call it.

    The expression is rendered to scalar Python (``semiring.expr.compile_python``)
    and compiled with ``inline="always"``, so a loop skeleton written once runs
    every op with no per-element call overhead.
    """
    return njit(inline="always", **JIT)(_expr.compile_python(tree, tuple(variables), tuple(params)))
