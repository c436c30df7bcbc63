"""Graph results in their users' terms: networkx-shaped results keyed by node, and cuGraph-style DataFrames.

``semiring.graph`` computes on vertex ids (rows of the adjacency
matrix); this module turns its arrays into what the caller's own library
returns:

* for a **networkx** graph, results keyed by its nodes — a dict per vertex
  (as ``networkx.triangles``), a dict per edge keyed by ``(u, v)`` in the
  orientation ``G.edges()`` gives, a list of ``(u, v, value)`` triples for
  vertex-pair similarities (as ``networkx.jaccard_coefficient``), a networkx
  graph for a k-truss (as ``networkx.k_truss``);
* for ``as_frame=True``, a DataFrame with cuGraph's column names
  (``first``, ``second``, ``jaccard_coeff``; ``vertex``, ``counts``): a pandas
  one, or a cuDF one where the input was CuPy and cuDF is installed.  pandas is
  imported only then (it is optional: ``pip install pandas``).
"""

from __future__ import annotations

import numbers

import numpy as np

from semiring import arrays

__all__ = ["edge_dict", "frame", "labels", "subgraph", "triples", "vertex_dict"]


def labels(nodes: list, ids) -> np.ndarray:
    """The node labels of vertex ids (host arrays): int64 where every label is an integer, else objects."""
    table = np.empty(len(nodes), dtype=object)
    table[:] = nodes
    if all(isinstance(v, numbers.Integral) for v in nodes):
        table = table.astype(np.int64)
    return table[np.asarray(ids, dtype=np.int64)]


def _python(values) -> list:
    """Host values as Python numbers (what networkx's dicts hold)."""
    return np.asarray(values).tolist()


def vertex_dict(nodes: list, values) -> dict:
    """``{node: value}`` over every node, as ``networkx.triangles``."""
    return dict(zip(nodes, _python(values)))


def edge_dict(nodes: list, first, second, values) -> dict:
    """``{(u, v): value}``, one key an edge, ``u`` before ``v`` in the graph's node order (as ``G.edges()``)."""
    return dict(zip(zip(labels(nodes, first).tolist(), labels(nodes, second).tolist()), _python(values)))


def triples(first, second, values) -> list:
    """``[(u, v, value), ...]`` from label (or id) arrays, as networkx's link-prediction functions yield them."""
    return list(zip(np.asarray(first).tolist(), np.asarray(second).tolist(), _python(values)))


def subgraph(G, nodes: list, first, second):
    """The graph of G's edges ``(first, second)`` (vertex ids), with G's attributes, as ``networkx.k_truss``
    returns it: G's type, the nodes of the kept edges only."""
    edges = list(zip(labels(nodes, first).tolist(), labels(nodes, second).tolist()))
    source = G.to_undirected(as_view=True) if G.is_directed() else G  # normalize=True read it undirected
    return source.edge_subgraph(edges).copy()


def frame(columns: dict, on_gpu: bool = False):
    """A DataFrame of ``columns`` (name: array): cuDF for device arrays where cuDF is installed, else pandas."""
    if on_gpu:
        try:
            import cudf
        except ImportError:
            cudf = None
        if cudf is not None:
            return cudf.DataFrame(columns)
    columns = {name: values.get() if arrays.is_cupy(values) else values for name, values in columns.items()}
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "as_frame=True needs pandas (pip install pandas; cuDF is used instead for CuPy input where it is "
            "installed); without it, pass as_frame=False and take the arrays (as_pairs=True gives (first, second, "
            "value))"
        ) from None
    return pandas.DataFrame(columns)
