"""Other libraries' matrices at the public entry points: python-graphblas in and out, networkx graphs in.

Neither library is a dependency: each is imported only when an argument is one
of its objects (recognised by its type's module, so nothing is imported to ask).
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp


def is_graphblas(A) -> bool:
    """``A`` is a ``graphblas.Matrix`` (or a python-graphblas expression that gives one)."""
    return type(A).__module__.startswith("graphblas.")


def from_graphblas(A):
    """A ``graphblas.Matrix`` as a SciPy CSR matrix with the same stored entries (BOOL values as 0/1); else ``A``."""
    if not is_graphblas(A):
        return A
    import graphblas as gb

    if not isinstance(A, gb.Matrix):
        A = A.new() if hasattr(A, "new") else A  # a transpose or a delayed expression
    if not isinstance(A, gb.Matrix):
        raise TypeError(f"a graphblas argument must be a graphblas.Matrix, got {type(A).__name__}")
    indptr, indices, values = A.to_csr()
    return sp.csr_matrix((values, indices, indptr), shape=A.shape)


def to_graphblas(result):
    """A result (a NumPy array: every entry stored; a SciPy sparse matrix: its stored entries) as a ``graphblas.Matrix``."""
    import graphblas as gb

    if sp.issparse(result):
        return gb.io.from_scipy_sparse(result.tocsr())
    return gb.Matrix.from_dense(np.asarray(result))


def graphblas_in_out(func):
    """Let ``func(X, Y, ...)`` take ``graphblas.Matrix`` operands (and ``mask``), and give one back for them.

    The operands are converted to SciPy CSR on the way in (a copy of the stored
    entries); the result is converted back when X or Y was a ``graphblas.Matrix``.
    """

    @functools.wraps(func)
    def wrapper(X, Y, *args, **kwargs):
        graphblas_input = is_graphblas(X) or is_graphblas(Y)
        if "mask" in kwargs:
            kwargs["mask"] = from_graphblas(kwargs["mask"])
        result = func(from_graphblas(X), from_graphblas(Y), *args, **kwargs)
        return to_graphblas(result) if graphblas_input else result

    return wrapper


def is_networkx(G) -> bool:
    """``G`` is a networkx graph (``Graph``, ``DiGraph``, ``MultiGraph``...)."""
    return type(G).__module__.startswith("networkx.") and hasattr(G, "adj")


def from_networkx(G, weight: str | None) -> tuple[sp.csr_array, list]:
    """A networkx graph's adjacency matrix (a SciPy CSR array, rows in ``list(G)`` order) and that node list.

    Edge weights come from the edge attribute ``weight`` (1 where an edge lacks
    it), as networkx's own functions read them; ``weight=None``: every edge 1.
    A directed graph gives its (unsymmetric) adjacency matrix, for the caller's
    checks to refuse or symmetrise.
    """
    import networkx as nx

    nodes = list(G)
    if not nodes:  # networkx refuses to build the matrix of an empty graph
        return sp.csr_array((0, 0)), nodes
    return nx.to_scipy_sparse_array(G, nodelist=nodes, weight=weight, dtype=np.float64, format="csr"), nodes
