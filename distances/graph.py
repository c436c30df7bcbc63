"""Graph measures on the semiring primitive: similarities, common neighbours, triangles, k-truss.

Every function takes the adjacency matrix ``A`` of an undirected graph (a
SciPy sparse matrix or array, a dense array, or a CuPy sparse matrix) and a
``backend`` (``"cpu"``, ``"cuda"``, ``"auto"``, as in ``semiring.pairwise``;
``"auto"`` keeps CuPy input on the GPU).  Results follow the input: SciPy in,
SciPy out (a matrix or an array, as given); CuPy in, CuPy out.

Definitions (N(u) the neighbours of u, d(u) = |N(u)|, c = |N(u) ∩ N(v)|):

* similarities of a vertex pair — ``jaccard`` c / (d(u) + d(v) − c),
  ``sorensen`` 2c / (d(u) + d(v)), ``overlap`` c / min(d(u), d(v)), ``cosine``
  c / sqrt(d(u) d(v)); 0 where the denominator is 0.  Through the primitive,
  c is the masked product ``C⟨M⟩ = A plus.pair Aᵀ`` and d a row norm; at the
  edges of A (the default) a specialised kernel counts c once per undirected
  edge.  ``weighted=True`` replaces counts by sums of (non-negative) weights:
  c = Σ_k min(w(u,k), w(v,k)) and d(u) = Σ_k w(u,k) (so Jaccard becomes
  Σ min / Σ max), and for ``cosine`` c = Σ_k w(u,k) w(v,k), d(u) = Σ_k w(u,k)².
* ``scan_similarity`` — SCAN's structural similarity on closed
  neighbourhoods at each edge: (c + 2) / sqrt((d(u) + 1)(d(v) + 1)).
* ``common_neighbors`` — c at every edge.
* ``triangle_count`` — each triangle counted once: the edges are oriented
  u → v when u precedes v in a total order (``order="degree"``: by degree,
  ties by id; ``order="id"``), and Σ over u → v of |N⁺(u) ∩ N⁺(v)| counts each
  triangle at its two lowest vertices.
* ``ktruss`` / ``truss_decomposition`` — support counting on the surviving
  edges, removing those in fewer than k − 2 triangles until none is removed.

Input rules: ``A`` must be square and symmetric (structurally; also in its
values for ``weighted=True``) without self-loops; otherwise a ``ValueError``
says which rule and how many entries break it.  ``normalize=True`` instead
removes self-loops and symmetrises (the pattern of A + Aᵀ; an edge stored in
both directions with different weights keeps the larger).  The stored pattern
is the graph: an explicitly stored 0 is an edge (of weight 0).  Isolated
vertices, empty graphs and int64 indices are supported.

>>> import numpy as np, scipy.sparse as sp
>>> from distances import graph
>>> A = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]]))
>>> graph.triangle_count(A, backend="cpu")
1
>>> graph.triangle_count(A, per="vertex", backend="cpu")
array([1, 1, 1, 0])
>>> graph.jaccard(A, backend="cpu").toarray().round(3)
array([[0.   , 0.333, 0.25 , 0.   ],
       [0.333, 0.   , 0.25 , 0.   ],
       [0.25 , 0.25 , 0.   , 0.   ],
       [0.   , 0.   , 0.   , 0.   ]])
>>> graph.jaccard(A, pairs=[(0, 3), (1, 1)], backend="cpu")
array([0.5, 1. ])
>>> graph.truss_decomposition(A, backend="cpu").toarray()
array([[0, 3, 3, 0],
       [3, 0, 3, 0],
       [3, 3, 0, 2],
       [0, 0, 2, 0]])
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from semiring import Semiring, binary_op, monoid, validation
from semiring import backend as _backend
from semiring import dask as _sdask
from semiring import expr as _expr
from semiring.engine import GRAPH_EXPANSION_VARIABLES, GraphEngine
from semiring.ops import BUILTIN_SEMIRINGS

ORDERS = ("degree", "id")
PER = ("total", "vertex", "edge")

# Weighted intersections: min(|x|, |y|) annihilates at zero (so only common
# neighbours are visited) and equals min(x, y) on the non-negative weights allowed.
plus_min = Semiring(monoid.plus, binary_op("min(abs(x), abs(y))", name="minabs"), name="plus_minabs")


@dataclass(frozen=True)
class Similarity:
    """A vertex-pair measure: an intersection (counted, or a weighted semiring), a row norm and an expansion."""

    name: str
    weighted_semiring: Semiring  # c for weighted=True; unweighted c is the masked plus_pair
    weighted_norm: str  # d(u) for weighted=True, an expression of a stored weight x; unweighted d(u) = degree
    expansion: str  # of c, nu = d(u), nv = d(v)

    @cached_property
    def tree(self) -> _expr.Node:
        return _expr.parse(self.expansion, GRAPH_EXPANSION_VARIABLES)[0]

    @cached_property
    def norm_tree(self) -> _expr.Node:
        return _expr.parse(self.weighted_norm, ("x",))[0]


SIMILARITIES = {
    s.name: s
    for s in (
        Similarity("jaccard", plus_min, "x", "c / (nu + nv - c) if nu + nv - c > 0 else 0.0"),
        Similarity("sorensen", plus_min, "x", "2 * c / (nu + nv) if nu + nv > 0 else 0.0"),
        Similarity("overlap", plus_min, "x", "c / min(nu, nv) if min(nu, nv) > 0 else 0.0"),
        Similarity("cosine", BUILTIN_SEMIRINGS["plus_times"], "x * x", "c / sqrt(nu * nv) if nu * nv > 0 else 0.0"),
        Similarity("scan", plus_min, "x", "(c + 2) / sqrt((nu + 1) * (nv + 1))"),
    )
}
DEGREE_TREE = _expr.parse("1", ("x",))[0]  # Σ 1 over stored entries: the degree, as a row norm


# --------------------------------------------------------------------------- input


def _is_cupy_sparse(A) -> bool:
    mod = type(A).__module__
    return mod.startswith("cupyx.scipy.sparse")


@dataclass
class _Graph:
    """A validated graph on one engine, and how to give results back in the input's form."""

    engine: GraphEngine
    G: object  # a matrix on the engine's device: SciPy CSR (CPU) or DeviceCSR (GPU)
    kind: str  # "scipy-matrix", "scipy-array" or "cupy"

    @property
    def n(self) -> int:
        return self.G.shape[0]

    def sparse(self, values, G=None):
        """A CSR result with G's pattern (A's by default) in the input's form."""
        G = self.G if G is None else G
        if self.kind == "cupy":
            import cupy
            import cupyx.scipy.sparse as csp

            data = cupy.asarray(values, dtype=np.float64)  # CuPy's sparse matrices hold floats only
            return csp.csr_matrix((data, cupy.asarray(G.indices), cupy.asarray(G.indptr)), shape=G.shape)
        values, indices, indptr = (self.engine.to_host(a) for a in (values, G.indices, G.indptr))
        kind = sp.csr_array if self.kind == "scipy-array" else sp.csr_matrix
        out = kind((values, indices, indptr), shape=G.shape)
        out.indices, out.indptr = indices.copy(), indptr.copy()  # SciPy would narrow int64 indices that fit
        return out

    def dense(self, values):
        """A vector result in the input's form (NumPy, or CuPy for CuPy input)."""
        if self.kind == "cupy":
            import cupy

            return cupy.asarray(values)
        return self.engine.to_host(values)


def _graph(A, backend: str, *, weighted: bool = False, normalize: bool = False, measure: str = "") -> _Graph:
    """Check ``A`` (square, symmetric, no self-loops; see the module docstring) and place it on the engine."""
    engine = _backend.graph_engine(backend)
    cupy_input = _is_cupy_sparse(A)
    kind = "cupy" if cupy_input else ("scipy-array" if isinstance(A, sp.sparray) else "scipy-matrix")
    if cupy_input and engine.name == "cuda" and not normalize:
        G = engine.from_cupy(A)  # stays on the GPU: no host round trip
    else:
        G = engine.to_device(_host_graph(A.get() if cupy_input else A, normalize, kind))
    return _checked(engine, G, kind, weighted, measure)


def _host_graph(A, normalize: bool, kind: str) -> sp.csr_matrix:
    G = validation.check_matrix(A, "A")
    if G.shape[0] != G.shape[1]:
        raise ValueError(f"A must be square (an adjacency matrix: row and column i are vertex i), got shape {G.shape}")
    if normalize:
        G = _normalized(G)
    return G


def _normalized(G: sp.csr_matrix) -> sp.csr_matrix:
    """Self-loops removed, the pattern of A + Aᵀ, the larger weight where both directions differ."""
    C = G.tocoo()
    rows = np.concatenate([C.row, C.col]).astype(np.int64)
    cols = np.concatenate([C.col, C.row]).astype(np.int64)
    vals = np.concatenate([C.data, C.data])
    off = rows != cols
    rows, cols, vals = rows[off], cols[off], vals[off]
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.ones(rows.size, bool)
    first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    starts = np.flatnonzero(first)
    vals = np.maximum.reduceat(vals, starts) if vals.size else vals
    index = G.indices.dtype
    indptr = np.zeros(G.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows[starts], minlength=G.shape[0]), out=indptr[1:])
    return sp.csr_matrix((vals, cols[starts].astype(index), indptr.astype(index)), shape=G.shape)


def _checked(engine, G, kind: str, weighted: bool, measure: str) -> _Graph:
    broken = engine.check_graph(G, weighted)
    rules = {
        "unsorted": "column indices must lie in [0, n) and be sorted and unique within each row (canonical CSR)",
        "self-loops": "an undirected simple graph has no self-loops (diagonal entries)",
        "missing reverse": "A must be symmetric: every stored (u, v) needs a stored (v, u)",
        "unequal reverse weight": "weights must be symmetric: A[u, v] == A[v, u]",
    }
    for what, rule in rules.items():
        if broken[what]:
            raise ValueError(
                f"A: {rule}; {broken[what]} stored entries break it. Pass normalize=True to remove self-loops "
                "and symmetrise (see distances.graph)"
            )
    if weighted:
        data = engine.to_host(G.data)
        if data.size and data.min() < 0:
            raise ValueError(
                f"A contains negative weights (min {data.min()!r}); weighted {measure or 'measures'} "
                "sum non-negative edge weights"
            )
    return _Graph(engine, G, kind)


def _order(order: str) -> bool:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    return order == "degree"


def _pairs(pairs, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertex pairs as a k × 2 int64 array: (unique rows, unique columns, inverse)."""
    try:
        P = np.asarray(pairs)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"pairs must be a k × 2 array of vertex ids: {exc}") from None
    if P.size == 0:
        P = P.reshape(0, 2)
    if P.ndim != 2 or P.shape[1] != 2:
        raise ValueError(f"pairs must be a k × 2 array of vertex ids (u, v), got shape {P.shape}")
    if P.dtype.kind not in "iu":
        if P.dtype.kind == "f" and P.size and np.all(P == np.round(P)):
            P = P.astype(np.int64)
        elif P.size:
            raise TypeError(f"pairs must hold integer vertex ids, got dtype {P.dtype}")
    P = P.astype(np.int64, copy=False)
    if P.size and (P.min() < 0 or P.max() >= n):
        raise ValueError(f"pairs must hold vertex ids in [0, {n}), found {P.min()}..{P.max()}")
    unique, inverse = np.unique(P, axis=0, return_inverse=True)
    return unique[:, 0], unique[:, 1], inverse.reshape(-1)


# --------------------------------------------------------------------------- similarities


def _similarity(name: str, A, pairs, weighted: bool, backend: str, normalize: bool):
    if _sdask.is_dask(A):  # row blocks on the workers, the graph held by each (docs/dask.md)
        from . import dask as _dask

        return _dask.similarity(name, A, pairs, weighted, backend, normalize)
    s = SIMILARITIES[name]
    g = _graph(A, backend, weighted=weighted, normalize=normalize, measure=name)
    eng = g.engine
    if pairs is None and not weighted:
        return g.sparse(eng.edge_measure(g.G, s.tree))  # the specialised kernel: each edge once, mirrored
    if pairs is None:
        P, inverse = g.G, None
    else:
        rows, cols, inverse = _pairs(pairs, g.n)
        indptr = np.zeros(g.n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=g.n), out=indptr[1:])
        P = sp.csr_matrix((np.ones(cols.size), cols, indptr), shape=(g.n, g.n))
        P = eng.to_device(P)
    sr, norm = (s.weighted_semiring, s.norm_tree) if weighted else (BUILTIN_SEMIRINGS["plus_pair"], DEGREE_TREE)
    c = eng.masked_product(g.G, P, sr) if eng.nnz(P) else eng.xp.zeros(0)
    values = eng.expand(s.tree, eng.edge_rows(P), P.indices, c, eng.row_norm(g.G, norm))
    if inverse is None:
        return g.sparse(values)
    return eng.to_host(values)[inverse]


def _similarity_doc(name: str, formula: str) -> str:
    return f"""{name.capitalize()} similarity {formula} of vertex pairs (0 where the denominator is 0).

    Without ``pairs``: at every edge of A, a sparse matrix with A's pattern.
    With ``pairs`` (a k × 2 array of vertex ids, edges or not): a NumPy array
    of k values.  ``weighted=True`` uses sums of edge weights instead of counts
    (see the module docstring); ``normalize=True`` removes self-loops and
    symmetrises A first.
    """


def jaccard(A, pairs=None, *, weighted: bool = False, normalize: bool = False, backend: str = "auto"):
    return _similarity("jaccard", A, pairs, weighted, backend, normalize)


def sorensen(A, pairs=None, *, weighted: bool = False, normalize: bool = False, backend: str = "auto"):
    return _similarity("sorensen", A, pairs, weighted, backend, normalize)


def overlap(A, pairs=None, *, weighted: bool = False, normalize: bool = False, backend: str = "auto"):
    return _similarity("overlap", A, pairs, weighted, backend, normalize)


def cosine(A, pairs=None, *, weighted: bool = False, normalize: bool = False, backend: str = "auto"):
    return _similarity("cosine", A, pairs, weighted, backend, normalize)


jaccard.__doc__ = _similarity_doc("jaccard", "|N(u) ∩ N(v)| / |N(u) ∪ N(v)|")
sorensen.__doc__ = _similarity_doc("Sørensen–Dice", "2 |N(u) ∩ N(v)| / (d(u) + d(v))")
overlap.__doc__ = _similarity_doc("overlap", "|N(u) ∩ N(v)| / min(d(u), d(v))")
cosine.__doc__ = _similarity_doc("cosine (Salton)", "|N(u) ∩ N(v)| / sqrt(d(u) d(v))")


def scan_similarity(A, *, normalize: bool = False, backend: str = "auto"):
    """SCAN structural similarity at every edge: (|N(u) ∩ N(v)| + 2) / sqrt((d(u) + 1)(d(v) + 1)).

    Closed neighbourhoods (each vertex counts itself), so adjacent u and v share
    at least themselves.  A sparse matrix with A's pattern.
    """
    return _similarity("scan", A, None, False, backend, normalize)


def common_neighbors(A, *, normalize: bool = False, backend: str = "auto"):
    """|N(u) ∩ N(v)| at every edge, a sparse matrix with A's pattern (int64 values; float64 for CuPy).

    Each undirected edge is intersected once (at u < v) and the count written to
    both of its entries; the intersection merges lists of similar length and
    searches the longer list otherwise, so a hub's neighbour list is not walked
    once per neighbour.
    """
    if _sdask.is_dask(A):  # row blocks on the workers, the graph held by each (docs/dask.md)
        from . import dask as _dask

        return _dask.common_neighbors(A, normalize, backend)
    g = _graph(A, backend, normalize=normalize)
    return g.sparse(g.engine.common_neighbor_counts(g.G))


# --------------------------------------------------------------------------- triangles and trusses


def triangle_count(A, per: str = "total", *, order: str = "degree", normalize: bool = False, backend: str = "auto"):
    """Triangles of the graph: ``per="total"`` an int, ``"vertex"`` a length-n array (triangles at each
    vertex), ``"edge"`` a sparse matrix with A's pattern (triangles through each edge, its support).

    Each triangle is found once, at its two lowest vertices in the total order
    ``order`` (``"degree"``: by degree, ties by vertex id — it bounds every
    vertex's out-degree by O(sqrt(edges)); ``"id"``: by vertex id).  The counts
    do not depend on the order, only the work does.  The CPU engine derives the
    per-edge and per-vertex counts from the common-neighbour counts (an edge's
    support is |N(u) ∩ N(v)|); the GPU engine scatters each oriented triangle to
    its three edges or vertices with atomics.
    """
    if _sdask.is_dask(A):  # row blocks of the oriented graph on the workers (docs/dask.md)
        from . import dask as _dask

        return _dask.triangle_count(A, per, order, normalize, backend)
    if per not in PER:
        raise ValueError(f"per must be one of {PER}, got {per!r}")
    by_degree = _order(order)
    g = _graph(A, backend, normalize=normalize)
    if per == "total":
        return g.engine.triangle_count_total(g.G, by_degree)
    if per == "vertex":
        return g.dense(g.engine.vertex_triangles(g.G, by_degree))
    return g.sparse(g.engine.edge_triangles(g.G, by_degree))


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k must be an integer (each kept edge lies in at least k - 2 triangles), got {k!r}")
    if k < 2:
        raise ValueError(f"k must be >= 2 (the 2-truss is the whole graph), got {k}")
    return int(k)


def ktruss(A, k: int, *, normalize: bool = False, backend: str = "auto"):
    """The k-truss: the largest subgraph in which every edge lies in at least k − 2 of its triangles.

    Support counting on the surviving edges, removing those below k − 2, until
    none is removed (the masked ``C⟨S⟩ = S plus.pair Sᵀ`` loop).  A sparse
    matrix of A's shape holding A's values at the surviving edges; vertices
    keep their ids.
    """
    if _sdask.is_dask(A):
        from . import dask as _dask

        _dask.not_at_scale("ktruss")
    k = _check_k(k)
    g = _graph(A, backend, normalize=normalize)
    eng, S = g.engine, g.G
    while eng.nnz(S):
        support = eng.edge_triangles(S, True)
        keep = support >= k - 2
        if bool(keep.all()):
            break
        S, _ = eng.compact_graph(S, keep)
    return g.sparse(S.data, S)


def truss_decomposition(A, *, normalize: bool = False, backend: str = "auto"):
    """Each edge's truss number: the largest k whose k-truss holds it (2 for an edge in no triangle).

    Peeling by levels: at level k the edges of the (k−1)-truss with support
    below k − 2 are removed, repeatedly, and get truss number k − 1; once none
    is, the survivors form the k-truss and the smallest support s among them
    makes it the (s + 2)-truss too, so the next level tried is s + 3.  A sparse
    matrix with A's pattern (int64 values; float64 for CuPy).
    """
    if _sdask.is_dask(A):
        from . import dask as _dask

        _dask.not_at_scale("truss_decomposition")
    g = _graph(A, backend, normalize=normalize)
    eng, S = g.engine, g.G
    xp = eng.xp
    truss = xp.full(eng.nnz(S), 2, dtype=xp.int64)
    where = xp.arange(eng.nnz(S))  # the entries of S in A
    k = 3
    while eng.nnz(S):
        support = eng.edge_triangles(S, True)
        low = support < k - 2
        if bool(low.any()):
            truss[where[low]] = k - 1
            S, kept = eng.compact_graph(S, ~low)
            where = where[kept]
        else:
            k = int(support.min()) + 3
    return g.sparse(truss)


__all__ = [
    "SIMILARITIES",
    "common_neighbors",
    "cosine",
    "jaccard",
    "ktruss",
    "overlap",
    "scan_similarity",
    "sorensen",
    "triangle_count",
    "truss_decomposition",
]
