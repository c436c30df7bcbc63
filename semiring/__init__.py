"""GraphBLAS-style semirings defined in Python, run on sparse matrices.

>>> import numpy as np, scipy.sparse as sp, semiring
>>> X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))
>>> semiring.pairwise(X, X, semiring.plus_times)
array([[5., 0.],
       [0., 9.]])
>>> l1 = semiring.Semiring(semiring.monoid.plus, semiring.binary_op(lambda x, y: abs(x - y)))
>>> semiring.pairwise(X, X, l1)
array([[0., 6.],
       [6., 0.]])
"""

from .api import pairwise
from .backend import available_backends
from .ops import BINARY_OPS, BUILTIN_SEMIRINGS, BinaryOp, Monoid, Semiring, binary_op, monoid

globals().update(BUILTIN_SEMIRINGS)


def __getattr__(name: str):
    # importlib.metadata reads the installed distributions: paid only by a caller asking for the version.
    if name == "__version__":
        from importlib import metadata

        try:
            return metadata.version("sparse-semirings")
        except metadata.PackageNotFoundError:  # imported from a source tree that is not installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [  # noqa: PLE0604 - the built-in semirings' names are strings
    "__version__",
    "BinaryOp",
    "Monoid",
    "Semiring",
    "binary_op",
    "monoid",
    "pairwise",
    "available_backends",
    "BINARY_OPS",
    "BUILTIN_SEMIRINGS",
    *BUILTIN_SEMIRINGS,
]
