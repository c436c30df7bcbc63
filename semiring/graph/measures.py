"""The graph measures' code: each public function checks the graph once (``_graph``), resolves a
``GraphEngine`` and calls its kernels, or on a Dask array hands ``semiring.dask`` the per-block work.

Users import them from the package, ``semiring.graph``, whose docstring gives the definitions, the input
rules and the result forms; networkx's and cuGraph's result shapes are made in ``labelled``.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from semiring import Semiring, arrays, binary_op, interop, monoid, tiling, validation
from semiring import backend as _backend
from semiring import dask as _sdask
from semiring import expr as _expr
from semiring.expr import root_of_product
from semiring.interfaces import GRAPH_EXPANSION_VARIABLES, GraphEngine, LastDerived
from semiring.ops import BUILTIN_SEMIRINGS

from . import labelled

ORDERS = ("degree", "id")
PER = ("total", "vertex", "edge")

# Weighted intersections: min(|x|, |y|) annihilates at zero (so only common
# neighbours are visited) and equals min(x, y) on the non-negative weights allowed.
plus_min = Semiring(monoid.plus, binary_op("min(abs(x), abs(y))", name="minabs"), name="plus_minabs")


@dataclass(frozen=True)
class Similarity:
    """A vertex-pair measure, one row of ``SIMILARITIES``: c, an intersection of N(u) and N(v) (a count, a
    weighted semiring's sum, or a sum of each common neighbour's weight), the vertices' norms, and an expansion.

    The rest reads the row: the public function's work on both engines and on Dask (``_similarity``),
    ``two_hop_similarity`` (``any_pair``), the ``semiring graph`` command (``title``, ``formula``,
    ``weighted_rule``: its help and its ``--weighted``), networkx's and cuGraph's forms of the result.
    """

    name: str
    title: str  # the measure in words, for the command's help
    formula: str  # in N(u), N(v), d(u), d(v)
    expansion: str  # of c, nu = d(u), nv = d(v)
    weighted_semiring: Semiring | None = None  # c for weighted=True; None: no weighted form
    weighted_norm: str = "x"  # d(u) for weighted=True, an expression of a stored weight x
    weighted_rule: str = ""  # what weighted=True computes, in words (the command's --weighted)
    neighbour_weight: str | None = None  # what each common neighbour w adds to c, of its degree d; None: 1
    # The weights' exact rescale where weighted sums could leave float64's range (``_summable``): "graph", one
    # power of two for every weight (c and the norms are sums of weights: the measure is unchanged by one
    # factor), or "rows", one for each vertex's row (c is bilinear in two rows, each norm quadratic in one).
    weighted_scale: str = "graph"
    any_pair: bool = True  # defined for any vertex pair (``pairs=``, ``two_hop_similarity``), not only at edges
    function: str = ""  # the public function's name, where it is not ``name``

    @cached_property
    def tree(self) -> _expr.Node:
        return _expr.parse(self.expansion, GRAPH_EXPANSION_VARIABLES)[0]

    @cached_property
    def norm_tree(self) -> _expr.Node:
        return _expr.parse(self.weighted_norm, ("x",))[0]

    @cached_property
    def weight_tree(self) -> _expr.Node:
        """The common neighbour's weight as an expansion of ``nv`` (its degree, read at each entry's column)."""
        tree = _expr.parse(self.neighbour_weight, ("d",))[0]
        return _expr.substitute(tree, {"d": _expr.Node("var", ("nv",))})


_plus_times = BUILTIN_SEMIRINGS["plus_times"]
SIMILARITIES = {
    s.name: s
    for s in (
        Similarity(
            "jaccard", "Jaccard similarity", "|N(u) ∩ N(v)| / |N(u) ∪ N(v)|",
            "c / (nu + nv - c) if nu + nv - c > 0 else 0.0", plus_min, weighted_rule="Σ min / Σ max of the weights",
        ),
        Similarity(
            "sorensen", "Sørensen–Dice similarity", "2 |N(u) ∩ N(v)| / (d(u) + d(v))",
            "2 * c / (nu + nv) if nu + nv > 0 else 0.0", plus_min, weighted_rule="sums of weights",
        ),
        Similarity(
            "overlap", "overlap similarity", "|N(u) ∩ N(v)| / min(d(u), d(v))",
            "c / min(nu, nv) if min(nu, nv) > 0 else 0.0", plus_min, weighted_rule="sums of weights",
        ),
        Similarity(
            "cosine", "cosine (Salton) similarity", "|N(u) ∩ N(v)| / sqrt(d(u) d(v))",
            f"q = nu * nv; c / {root_of_product('q', 'nu', 'nv')} if nu > 0.0 and nv > 0.0 else 0.0",
            _plus_times, "x * x", "Σ w(u,k) w(v,k) / norms", weighted_scale="rows",
        ),
        Similarity(
            "scan", "SCAN structural similarity", "(|N(u) ∩ N(v)| + 2) / sqrt((d(u) + 1)(d(v) + 1))",
            "(c + 2) / sqrt((nu + 1) * (nv + 1))", any_pair=False, function="scan_similarity",
        ),
        Similarity(
            "adamic_adar", "Adamic-Adar index", "Σ over w in N(u) ∩ N(v) of 1 / log d(w)", "c",
            neighbour_weight="1 / log(d)", function="adamic_adar_index",
        ),
        Similarity(
            "resource_allocation", "resource allocation index", "Σ over w in N(u) ∩ N(v) of 1 / d(w)", "c",
            neighbour_weight="1 / d", function="resource_allocation_index",
        ),
    )
}  # fmt: skip
DEGREE_TREE = _expr.parse("1", ("x",))[0]  # Σ 1 over stored entries: the degree, as a row norm


# --------------------------------------------------------------------------- input


@dataclass
class _Graph:
    """A validated graph on one engine, and how to give results back in the input's form."""

    engine: GraphEngine
    G: object  # a matrix on the engine's device: SciPy CSR (CPU) or DeviceCSR (GPU)
    kind: str  # "scipy-matrix", "scipy-array" or "cupy"
    nodes: list | None = None  # a networkx graph's nodes: vertex i is nodes[i]
    source: object = None  # the networkx graph itself

    @property
    def n(self) -> int:
        return self.G.shape[0]

    def sparse(self, values, G=None):
        """A CSR result with G's pattern (A's by default) in the input's form."""
        G = self.G if G is None else G
        if self.kind == "cupy":
            return arrays.cupy_csr(values, G.indices, G.indptr, G.shape)  # float64: CuPy's sparse hold floats only
        values, indices, indptr = (self.engine.to_host(a) for a in (values, G.indices, G.indptr))
        kind = sp.csr_array if self.kind == "scipy-array" else sp.csr_matrix
        out = kind((values, indices, indptr), shape=G.shape)
        out.indices, out.indptr = indices.copy(), indptr.copy()  # SciPy would narrow int64 indices that fit
        return out

    def dense(self, values):
        """A vector result in the input's form (NumPy, or CuPy for CuPy input)."""
        if self.kind == "cupy":
            return arrays.to_cupy(values)
        return self.engine.to_host(values)

    def vertex_ids(self, pairs) -> np.ndarray:
        """``pairs`` as vertex ids: a networkx graph's node labels looked up, other input as given."""
        if self.nodes is None or pairs is None:
            return pairs
        index = {node: i for i, node in enumerate(self.nodes)}
        try:
            return np.array([[index[u], index[v]] for u, v in pairs], dtype=np.int64).reshape(-1, 2)
        except KeyError as exc:
            raise ValueError(f"pairs: node {exc.args[0]!r} is not in the graph") from None
        except (TypeError, ValueError):
            raise TypeError("pairs must be a sequence of (u, v) node pairs of the networkx graph") from None

    def ids(self, vertices):
        """Vertex ids in the caller's terms: node labels (on the host) for a networkx graph, else int64 ids in
        the input's form."""
        vertices = vertices.astype(np.int64, copy=False)
        if self.nodes is not None:
            return labelled.labels(self.nodes, self.engine.to_host(vertices))
        return self.dense(vertices)

    def pairs(self, first, second, values) -> tuple:
        """``(first, second, value)`` in the input's form: node labels for a networkx graph."""
        return self.ids(first), self.ids(second), self.dense(values)

    def edges_once(self, values, G=None) -> tuple:
        """Each undirected edge of G (A by default) once, ``first < second``, in row order, with its value of
        ``values`` (in G's CSR order): ``(first, second, values)`` on the engine."""
        G = self.G if G is None else G
        rows, cols = self.engine.edge_rows(G), G.indices
        upper = rows < cols
        return rows[upper], cols[upper], values[upper]

    def frame(self, first, second, column: str, values):
        """The pairs as a DataFrame with cuGraph's columns ``first``, ``second`` and ``column``."""
        columns = {"first": self.ids(first), "second": self.ids(second), column: self.dense(values)}
        return labelled.frame(columns, self.kind == "cupy")

    def pair_list(self, first, second, values, column: str, as_pairs: bool, as_frame: bool):
        """Pairs and their values as asked: a DataFrame, three arrays, networkx's ``(u, v, value)`` triples for
        a networkx graph; None where none of these is asked (the caller's own form)."""
        if as_frame:
            return self.frame(first, second, column, values)
        if as_pairs:
            return self.pairs(first, second, values)
        if self.nodes is not None:
            return labelled.triples(self.ids(first), self.ids(second), self.engine.to_host(values))
        return None

    def per_vertex(self, values, column: str, as_frame: bool):
        """A value a vertex: a DataFrame ``(vertex, column)``, ``{node: value}`` for a networkx graph, else an
        array in the input's form."""
        if as_frame:
            vertices = self.engine.xp.arange(self.n, dtype=np.int64)
            return labelled.frame({"vertex": self.ids(vertices), column: self.dense(values)}, self.kind == "cupy")
        if self.nodes is not None:
            return labelled.vertex_dict(self.nodes, self.engine.to_host(values))
        return self.dense(values)

    def per_edge(self, values, column: str, as_frame: bool, G=None):
        """A value an edge (in G's CSR order, A's by default): a DataFrame ``(first, second, column)`` with each
        edge once, ``{(u, v): value}`` for a networkx graph, else a sparse matrix with G's pattern."""
        if not as_frame and self.nodes is None:
            return self.sparse(values, G)
        first, second, once = self.edges_once(values, G)
        if as_frame:
            return self.frame(first, second, column, once)
        return labelled.edge_dict(self.nodes, *(self.engine.to_host(a) for a in (first, second, once)))


def _graph(
    A, backend: str, *, weighted: bool = False, normalize: bool = False, measure: str = "", weight="weight"
) -> _Graph:
    """Check ``A`` (square, symmetric, no self-loops; see ``semiring.graph``'s docstring) and place it on the engine.

    CuPy input on the GPU engine is checked, normalised and used where it is: nothing is copied to the host.
    """
    if interop.is_networkx(A):
        matrix, nodes = interop.from_networkx(A, weight)
        g = _graph(matrix, backend, weighted=weighted, normalize=normalize, measure=measure)
        g.nodes, g.source = nodes, A
        return g
    engine = _backend.graph_engine(backend)
    cupy_input = arrays.is_cupy(A)
    kind = "cupy" if cupy_input else ("scipy-array" if isinstance(A, sp.sparray) else "scipy-matrix")
    if cupy_input and arrays.backend_of(A) != engine.name:
        A = arrays.on_host(A)  # an engine of another device works on its own copy
    return _checked(engine, engine.to_device(_adjacency(A, normalize)), kind, weighted, measure)


def _adjacency(A, normalize: bool):
    """A checked as a matrix (on the host, or on the GPU for CuPy input), square, normalised when asked."""
    G = validation.check_matrix(A, "A")
    if G.shape[0] != G.shape[1]:
        raise ValueError(f"A must be square (an adjacency matrix: row and column i are vertex i), got shape {G.shape}")
    if normalize:
        G = _normalized(G)
    return G


def _normalized(G):
    """Self-loops removed, the pattern of A + Aᵀ, the larger weight where both directions differ.

    SciPy or CuPy CSR alike, computed where G lives.
    """
    xp = arrays.array_module(G)
    C = G.tocoo()
    rows = xp.concatenate([C.row, C.col]).astype(np.int64)
    cols = xp.concatenate([C.col, C.row]).astype(np.int64)
    vals = xp.concatenate([C.data, C.data])
    off = rows != cols
    rows, cols, vals = rows[off], cols[off], vals[off]
    # By row, then column, then weight descending: each (row, column)'s first entry holds its larger weight.
    order = xp.lexsort(xp.stack([-vals.astype(np.float64), cols.astype(np.float64), rows.astype(np.float64)]))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = xp.ones(rows.size, bool)
    first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    rows, cols, vals = rows[first], cols[first], vals[first]
    index = G.indices.dtype
    indptr = xp.zeros(G.shape[0] + 1, np.int64)
    indptr[1:] = xp.cumsum(xp.bincount(rows, minlength=G.shape[0]))
    return type(G)((vals, cols.astype(index), indptr.astype(index)), shape=G.shape)


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
                "and symmetrise (see semiring.graph)"
            )
    if weighted and G.data.size:
        low = float(G.data.min())  # a reduction where the graph lives: only the minimum comes back
        if low < 0:
            raise ValueError(
                f"A contains negative weights (min {low!r}); weighted {measure or 'measures'} "
                "sum non-negative edge weights"
            )
    return _Graph(engine, G, kind)


def _order(order: str) -> bool:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    return order == "degree"


def _pairs(pairs, n: int, xp):
    """Vertex pairs as ``xp`` int64 arrays (unique rows, unique columns, inverse), ``xp`` being the engine's
    array module: NumPy, or CuPy (CuPy pairs then never leave the GPU)."""
    if arrays.is_cupy(pairs) and xp is np:
        pairs = pairs.get()  # the CPU engine's own copy
    try:
        P = xp.asarray(pairs)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"pairs must be a k × 2 array of vertex ids: {exc}") from None
    if P.size == 0:
        P = P.reshape(0, 2)
    if P.ndim != 2 or P.shape[1] != 2:
        raise ValueError(f"pairs must be a k × 2 array of vertex ids (u, v), got shape {P.shape}")
    if P.dtype.kind not in "iuf" and P.size:  # objects (ids beyond int64), strings: no vertex ids
        raise TypeError(f"pairs must hold integer vertex ids below {n}, got dtype {P.dtype}")
    if P.dtype.kind == "f" and P.size and not bool(xp.all(P == xp.round(P))):
        raise TypeError(f"pairs must hold integer vertex ids, got dtype {P.dtype} with fractions or NaN")
    if P.size:  # checked in the ids' own type, before int64 could wrap 2**63 or 1e300 around
        low, high = P.min().item(), P.max().item()
        if low < 0 or high >= n:
            raise ValueError(f"pairs must hold vertex ids in [0, {n}), found {low:g}..{high:g}")
    P = P.astype(np.int64, copy=False)
    # One int64 code per pair (u·n + v, ordered as (u, v) is) makes unique() one-dimensional, as CuPy's is.
    unique, inverse = xp.unique(P[:, 0] * n + P[:, 1], return_inverse=True)
    return unique // n, unique % n, inverse.reshape(-1)


# --------------------------------------------------------------------------- similarities


def _similarity(
    name: str,
    A,
    pairs,
    weighted: bool,
    backend: str,
    normalize: bool,
    as_pairs=False,
    weight="weight",
    as_frame=False,
    compute=True,
):
    _check_forms(as_pairs, as_frame)
    if _at_scale(A):  # row blocks on the workers, the graph held by each (docs/dask.md)
        if as_pairs or (as_frame and pairs is not None):
            raise NotImplementedError(
                "as_pairs=True, and as_frame=True with pairs, are not available for Dask input: without pairs, "
                "as_frame=True gives the (first, second, value) DataFrame (compute=False: a Dask DataFrame)"
            )
        return _similarity_by_blocks(name, A, pairs, weighted, backend, normalize, as_frame, compute)
    s = _similarity_row(name, weighted)
    g = _graph(A, backend, weighted=weighted, normalize=normalize, measure=name, weight=weight)
    eng = g.engine
    if pairs is None:
        values = _at_every_edge(eng, g.G, s, weighted)
    else:
        rows, cols, inverse = _pairs(g.vertex_ids(pairs), g.n, eng.xp)
        values = _values_at(eng, *_operands(eng, g.G, s, weighted), _pattern(g, rows, cols), s, weighted)[inverse]
        listed = g.pair_list(rows[inverse], cols[inverse], values, f"{name}_coeff", as_pairs, as_frame)
        return g.dense(values) if listed is None else listed
    listed = g.pair_list(*g.edges_once(values), f"{name}_coeff", as_pairs, as_frame)
    return g.sparse(values) if listed is None else listed


def _similarity_row(name: str, weighted: bool) -> Similarity:
    s = SIMILARITIES[name]
    if weighted and s.weighted_semiring is None:
        weighable = [t.name for t in SIMILARITIES.values() if t.weighted_semiring is not None]
        raise ValueError(f"{name} has no weighted form; weighted=True is for {', '.join(weighable)}")
    return s


def _check_forms(as_pairs: bool, as_frame: bool) -> None:
    if as_pairs and as_frame:
        raise ValueError("as_pairs=True and as_frame=True ask for two forms of one result: pass one of them")


def _pattern(g: _Graph, rows, cols):
    """The n × n pattern holding (rows[s], cols[s]) (rows sorted, columns sorted within a row), on the engine;
    built where the pairs are (NumPy or CuPy)."""
    xp = arrays.array_module(rows)
    indptr = xp.zeros(g.n + 1, np.int64)
    indptr[1:] = xp.cumsum(xp.bincount(rows, minlength=g.n))
    csr = arrays.csr_matrix_class(xp)
    return g.engine.to_device(csr((xp.ones(cols.size), cols, indptr), shape=(g.n, g.n)))


def _at_every_edge(eng: GraphEngine, G, s: Similarity, weighted: bool):
    """The similarity at every stored entry of the engine matrix G: the engine's specialised kernel unweighted
    (each edge once, mirrored), the masked product of the measure's semiring at G's own entries otherwise."""
    if not weighted and s.neighbour_weight is None:
        return eng.edge_measure(G, s.tree)
    return _values_at(eng, *_operands(eng, G, s, weighted), G, s, weighted)


def _operands(eng: GraphEngine, G, s: Similarity, weighted: bool) -> tuple:
    """``(G, norms)``: the graph the measure's sums read (weighted: G with its weights rescaled where their sums
    could leave float64's range, ``_summable``) and each vertex's d."""
    if weighted:
        G = _summable(eng, G, s)
    return G, eng.row_norm(G, s.norm_tree if weighted else DEGREE_TREE)


def _values_at(eng: GraphEngine, G, norms, P, s: Similarity, weighted: bool):
    """The similarity at each stored entry of the engine matrix P (in P's CSR order), of ``_operands``."""
    c = _intersection(eng, G, P, s, weighted) if eng.nnz(P) else eng.xp.zeros(0)
    return eng.expand(s.tree, eng.edge_rows(P), P.indices, c, norms)


# Weighted sums keep float64's accuracy while every sum and product stays in its normal range: jaccard's,
# sorensen's and overlap's sums of up to 2 d(u) weights overflowed from weights near 1e308 / (2 d) (jaccard 0,
# sorensen NaN), cosine's squares and products from 1e154 / √d (NaN) and lost bits below 2^-511 (1.5e-154; 0 from
# 1e-162).  Where they could, the weights are scaled by powers of two (exact, as long as a scaled weight stays
# normal), which leaves each measure as it is: by the least one factor for every weight (``weighted_scale``
# "graph"), or for cosine each row by its own, its largest weight in [0.5, 1).
SQUARES_LOWEST = 2.0**-511


def _summable(eng: GraphEngine, G, s: Similarity):
    """G, or a copy with its weights scaled exactly so that the measure's weighted sums cannot over- or
    underflow (see above); the rare case where they could is found from the largest and smallest weights."""
    if not eng.nnz(G):
        return G
    xp = eng.xp
    top = math.frexp(float(G.data.max()))[1]  # every weight below 2**top
    grow = math.ceil(math.log2(2 * int(xp.diff(G.indptr).max())))  # bits a sum of 2 d(u) weights adds
    if s.weighted_scale == "graph":
        shift = top + grow - 1022
        if shift <= 0:
            return G
        data = G.data * 2.0**-shift
        return eng.to_device(arrays.csr_matrix_class(xp)((data, G.indices, G.indptr), shape=G.shape))
    low = float(xp.where(G.data > 0, G.data, xp.inf).min())
    if 2 * top + grow < 1022 and low >= SQUARES_LOWEST:
        return G
    indptr, indices, data = (eng.to_host(a) for a in (G.indptr, G.indices, G.data))
    counts = np.diff(indptr)
    row_max = np.zeros(G.shape[0])
    row_max[counts > 0] = np.maximum.reduceat(data, indptr[:-1][counts > 0])
    data = np.ldexp(data, -np.repeat(np.frexp(row_max)[1], counts))  # each row's largest in [0.5, 1)
    return eng.to_device(sp.csr_matrix((data, indices, indptr), shape=G.shape))


def _intersection(eng: GraphEngine, G, P, s: Similarity, weighted: bool):
    """c at P's entries: the masked product of the weighted semiring, of ``plus_pair`` (a count), or, where each
    common neighbour w adds its own weight, of ``plus_min`` over G holding w's weight in column w (min(w, w) =
    w, the weights being positive)."""
    if weighted:
        return eng.masked_product(G, P, s.weighted_semiring)
    if s.neighbour_weight is None:
        return eng.masked_product(G, P, BUILTIN_SEMIRINGS["plus_pair"])
    degree = eng.row_norm(G, DEGREE_TREE)
    w = eng.expand(s.weight_tree, eng.edge_rows(G), G.indices, eng.xp.zeros(G.indices.size), degree)
    csr = arrays.csr_matrix_class(eng.xp)
    return eng.masked_product(eng.to_device(csr((w, G.indices, G.indptr), shape=G.shape)), P, plus_min)


def _similarity_doc(name: str, formula: str, column: str) -> str:
    return f"""{name.capitalize()} similarity {formula} of vertex pairs (0 where the denominator is 0).

    Without ``pairs``: at every edge of A, a sparse matrix with A's pattern.
    With ``pairs`` (a k × 2 array of vertex ids, edges or not; node labels for a
    networkx graph): a NumPy array of k values.  ``as_pairs=True`` gives
    ``(first, second, value)`` arrays instead, as cuGraph does: the given pairs
    in their order, or each edge once (first < second) in row order;
    ``as_frame=True`` gives them as a DataFrame with cuGraph's columns
    ``first``, ``second``, ``{column}`` (pandas; cuDF for CuPy input where it is
    installed).  For a networkx graph the result is networkx's
    ``jaccard_coefficient`` shape, a list of ``(u, v, value)`` triples of node
    labels (the pairs in their order, or each edge once).
    ``weighted=True`` uses sums of edge weights instead of counts (see
    ``semiring.graph``'s docstring), read from a networkx graph's edge attribute ``weight``;
    ``normalize=True`` removes self-loops and symmetrises A first.
    For a Dask array of A's row blocks (``docs/dask.md``), ``compute=False``
    leaves the result at every edge on the workers: a Dask array of CSR row
    blocks, or with ``as_frame=True`` a Dask DataFrame; by default it is
    gathered into the single-machine result.
    """


def jaccard(
    A,
    pairs=None,
    *,
    weighted=False,
    normalize=False,
    as_pairs=False,
    as_frame=False,
    weight="weight",
    backend="auto",
    compute=True,
):
    return _similarity("jaccard", A, pairs, weighted, backend, normalize, as_pairs, weight, as_frame, compute)


def sorensen(
    A,
    pairs=None,
    *,
    weighted=False,
    normalize=False,
    as_pairs=False,
    as_frame=False,
    weight="weight",
    backend="auto",
    compute=True,
):
    return _similarity("sorensen", A, pairs, weighted, backend, normalize, as_pairs, weight, as_frame, compute)


def overlap(
    A,
    pairs=None,
    *,
    weighted=False,
    normalize=False,
    as_pairs=False,
    as_frame=False,
    weight="weight",
    backend="auto",
    compute=True,
):
    return _similarity("overlap", A, pairs, weighted, backend, normalize, as_pairs, weight, as_frame, compute)


def cosine(
    A,
    pairs=None,
    *,
    weighted=False,
    normalize=False,
    as_pairs=False,
    as_frame=False,
    weight="weight",
    backend="auto",
    compute=True,
):
    return _similarity("cosine", A, pairs, weighted, backend, normalize, as_pairs, weight, as_frame, compute)


jaccard.__doc__ = _similarity_doc("jaccard", "|N(u) ∩ N(v)| / |N(u) ∪ N(v)|", "jaccard_coeff")
sorensen.__doc__ = _similarity_doc("Sørensen–Dice", "2 |N(u) ∩ N(v)| / (d(u) + d(v))", "sorensen_coeff")
overlap.__doc__ = _similarity_doc("overlap", "|N(u) ∩ N(v)| / min(d(u), d(v))", "overlap_coeff")
cosine.__doc__ = _similarity_doc("cosine (Salton)", "|N(u) ∩ N(v)| / sqrt(d(u) d(v))", "cosine_coeff")


def adamic_adar_index(
    A, pairs=None, *, normalize=False, as_pairs=False, as_frame=False, weight="weight", backend="auto", compute=True
):
    """Adamic-Adar index of vertex pairs: Σ over their common neighbours w of 1 / log d(w), as networkx's
    ``adamic_adar_index`` (each common neighbour weighs less the more neighbours it has).

    Without ``pairs``: at every edge of A, a sparse matrix with A's pattern; with ``pairs`` (a k × 2 array of
    vertex ids, edges or not): an array of k values.  ``as_pairs``, ``as_frame`` (column ``adamic_adar_coeff``),
    networkx graphs and ``normalize`` as in :func:`jaccard`; no weighted form.  A pair (u, u) sums over N(u),
    where a neighbour of degree 1 adds 1 / log 1 = inf.  ``compute=False`` on Dask input as in :func:`jaccard`.

    >>> import numpy as np, scipy.sparse as sp
    >>> from semiring import graph
    >>> A = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]]))
    >>> graph.adamic_adar_index(A, pairs=[(0, 1), (0, 2), (0, 3)], backend="cpu").round(4)  # 1/log 3, 1/log 2
    array([0.9102, 1.4427, 0.9102])
    """
    return _similarity("adamic_adar", A, pairs, False, backend, normalize, as_pairs, weight, as_frame, compute)


def resource_allocation_index(
    A, pairs=None, *, normalize=False, as_pairs=False, as_frame=False, weight="weight", backend="auto", compute=True
):
    """Resource allocation index of vertex pairs: Σ over their common neighbours w of 1 / d(w), as networkx's
    ``resource_allocation_index`` (each common neighbour shares one unit among its neighbours).

    Forms and arguments as :func:`adamic_adar_index` (column ``resource_allocation_coeff``, ``compute``); no
    weighted form.

    >>> import numpy as np, scipy.sparse as sp
    >>> from semiring import graph
    >>> A = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]]))
    >>> graph.resource_allocation_index(A, pairs=[(0, 1), (0, 2), (0, 3)], backend="cpu").round(4)  # 1/3, 1/2
    array([0.3333, 0.5   , 0.3333])
    """
    return _similarity("resource_allocation", A, pairs, False, backend, normalize, as_pairs, weight, as_frame, compute)


TWO_HOP_MEASURES = tuple(s.name for s in SIMILARITIES.values() if s.any_pair)
_TWO_HOP_BYTES = 64  # host bytes per candidate pair of a block: pattern, counts, values, ids and top-k merging


def two_hop_similarity(
    A,
    measure: str = "jaccard",
    *,
    topk: int | None = None,
    weighted: bool = False,
    normalize: bool = False,
    weight="weight",
    backend: str = "auto",
    working_memory: float | None = None,
    as_frame: bool = False,
):
    """A similarity of every vertex pair at distance ≤ 2, or of the ``topk`` best: ``(first, second, value)``.

    The pairs are those joined by an edge or sharing a neighbour, each once
    (``first < second``) — cuGraph's ``all_pairs_jaccard`` (and friends) over
    two-hop neighbours.  Without ``topk``: every such pair, ordered by
    ``(first, second)``.  With ``topk``: the ``topk`` highest values over the
    whole graph (as cuGraph's ``topk``), highest first, ties by
    ``(first, second)``.  ``measure`` is one of ``TWO_HOP_MEASURES``
    (``"jaccard"``, ``"sorensen"``, ``"overlap"``, ``"cosine"``...); ``weighted``, ``normalize`` and ``weight``
    as in :func:`jaccard`.  ``as_frame=True`` gives a DataFrame of cuGraph's
    columns (``first``, ``second``, ``jaccard_coeff``...).  The vertices are
    node labels for a networkx graph.

    Memory is bounded: rows are taken in blocks whose candidate pairs (bounded
    by the sum of their neighbours' degrees) fit ``working_memory`` MiB
    (default 1024, as in ``semiring.pairwise``), and with ``topk`` only the
    best ``topk`` are kept between blocks.  The pairs of a block are found on
    the host; their values are computed on the engine.

    >>> import numpy as np, scipy.sparse as sp
    >>> from semiring import graph
    >>> path = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]))
    >>> graph.two_hop_similarity(path, backend="cpu")
    (array([0, 0, 1]), array([1, 2, 2]), array([0., 1., 0.]))
    """
    if measure not in TWO_HOP_MEASURES:
        raise ValueError(f"measure must be one of {TWO_HOP_MEASURES}, got {measure!r}")
    if topk is not None and (isinstance(topk, bool) or not isinstance(topk, numbers.Integral) or topk < 1):
        raise ValueError(f"topk must be a positive integer (the number of best pairs kept) or None, got {topk!r}")
    budget = tiling.check_working_memory(working_memory) or tiling.DEFAULT_WORKING_MEMORY_MIB  # > 0 and finite
    s = _similarity_row(measure, weighted)
    g = _graph(A, backend, weighted=weighted, normalize=normalize, measure=measure, weight=weight)
    eng = g.engine
    indptr, indices = eng.to_host(g.G.indptr).astype(np.int64), eng.to_host(g.G.indices).astype(np.int64)
    S = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(g.n, g.n))  # the pattern, on the host
    degree = np.diff(indptr)
    candidates = S.astype(np.int64) @ degree + degree  # per row: two-hop paths + edges, a bound on its pairs
    G, norms = _operands(eng, g.G, s, weighted)
    per_block = max(1, int(min(budget * 2**20 / _TWO_HOP_BYTES, 2**62)))  # 1e308 MiB: every row in one block
    found = [np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)]
    ends = np.cumsum(candidates)
    r0 = 0
    while r0 < g.n:
        before = ends[r0 - 1] if r0 else 0
        r1 = max(r0 + 1, int(np.searchsorted(ends, before + per_block, "right")))
        block = (S[r0:r1] @ S + S[r0:r1]).tocoo()  # rows sharing a neighbour, or adjacent
        rows, cols = block.row.astype(np.int64) + r0, block.col.astype(np.int64)
        upper = rows < cols
        rows, cols = rows[upper], cols[upper]
        order = np.lexsort((cols, rows))
        rows, cols = rows[order], cols[order]
        values = eng.to_host(_values_at(eng, G, norms, _pattern(g, rows, cols), s, weighted)).astype(np.float64)
        found = [np.concatenate([a, b]) for a, b in zip(found, (rows, cols, values))]
        if topk is not None and found[0].size > topk:
            found = _best(*found, topk)
        r0 = r1
    if topk is not None:
        found = _best(*found, topk)
    if as_frame:
        return labelled.frame({"first": g.ids(found[0]), "second": g.ids(found[1]), f"{measure}_coeff": found[2]})
    return g.pairs(*found)


def _best(rows, cols, values, k: int) -> list:
    """The ``k`` highest values, highest first, ties by (row, column)."""
    order = np.lexsort((cols, rows, -values))[:k]
    return [rows[order], cols[order], values[order]]


def scan_similarity(A, *, normalize: bool = False, as_frame: bool = False, backend: str = "auto", compute: bool = True):
    """SCAN structural similarity at every edge: (|N(u) ∩ N(v)| + 2) / sqrt((d(u) + 1)(d(v) + 1)).

    Closed neighbourhoods (each vertex counts itself), so adjacent u and v share
    at least themselves.  A sparse matrix with A's pattern; for a networkx
    graph, ``(u, v, value)`` triples, each edge once; ``as_frame=True``: a
    DataFrame ``(first, second, scan_coeff)``, each edge once.  ``compute=False`` on Dask input as in
    :func:`jaccard`.
    """
    return _similarity("scan", A, None, False, backend, normalize, as_frame=as_frame, compute=compute)


def common_neighbors(
    A, *, normalize: bool = False, as_frame: bool = False, backend: str = "auto", compute: bool = True
):
    """|N(u) ∩ N(v)| at every edge, a sparse matrix with A's pattern (int64 values; float64 for CuPy).

    For a networkx graph, ``{(u, v): count}``, each edge once (u before v in
    the graph's node order, as ``G.edges()``); ``as_frame=True``: a DataFrame
    ``(first, second, counts)``, each edge once.  ``compute=False`` on Dask
    input as in :func:`jaccard`.

    An edge's common neighbours are its triangles: each triangle is found once,
    on the degree-oriented graph, and counted at its three edges, so a hub's
    neighbour list is not walked once per neighbour.
    """
    if _at_scale(A):  # row blocks on the workers, the graph held by each (docs/dask.md)
        _sdask.check_call(backend, None)
        counts = functools.partial(_block_counts, backend=backend)
        return _per_edge_by_blocks(A, counts, "counts", np.int64, as_frame, compute, normalize=normalize)
    g = _graph(A, backend, normalize=normalize)
    return g.per_edge(g.engine.common_neighbor_counts(g.G), "counts", as_frame)


# --------------------------------------------------------------------------- triangles and trusses


def triangle_count(
    A,
    per: str = "total",
    *,
    order: str = "degree",
    normalize: bool = False,
    as_frame: bool = False,
    backend: str = "auto",
    compute: bool = True,
):
    """Triangles of the graph: ``per="total"`` an int, ``"vertex"`` a length-n array (triangles at each
    vertex), ``"edge"`` a sparse matrix with A's pattern (triangles through each edge, its support).

    For a networkx graph, per vertex ``{node: count}`` (as ``networkx.triangles``)
    and per edge ``{(u, v): count}``, each edge once.  ``as_frame=True``: cuGraph's
    DataFrame ``(vertex, counts)`` per vertex, ``(first, second, counts)`` per edge
    (each edge once); the total stays an int.  On Dask input the total is summed on the workers and the
    per-vertex counts on the worker of each block; ``compute=False`` leaves the per-edge result there, as in
    :func:`jaccard`.

    Each triangle is found once, at its two lowest vertices in the total order
    ``order`` (``"degree"``: by degree, ties by vertex id — it bounds every
    vertex's out-degree by O(sqrt(edges)); ``"id"``: by vertex id).  The counts
    do not depend on the order, only the work does.  Both engines scatter each
    oriented triangle to its three edges or vertices (atomics where another
    thread owns the entry).
    """
    if _at_scale(A):  # row blocks of the oriented graph on the workers (docs/dask.md)
        return _triangle_count_by_blocks(A, per, order, normalize, backend, as_frame, compute)
    if per not in PER:
        raise ValueError(f"per must be one of {PER}, got {per!r}")
    by_degree = _order(order)
    g = _graph(A, backend, normalize=normalize)
    if per == "total":
        return g.engine.triangle_count_total(g.G, by_degree)
    if per == "vertex":
        return g.per_vertex(g.engine.vertex_triangles(g.G, by_degree), "counts", as_frame)
    return g.per_edge(g.engine.edge_triangles(g.G, by_degree), "counts", as_frame)


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k must be an integer (each kept edge lies in at least k - 2 triangles), got {k!r}")
    if k < 2:
        raise ValueError(f"k must be >= 2 (the 2-truss is the whole graph), got {k}")
    # An edge lies in at most n - 2 triangles of n vertices, so every k above 2**62 (more vertices than any
    # memory holds) gives the empty graph, as 2**62 does: capped there, within the kernels' int64.
    return min(int(k), 2**62)


def ktruss(A, k: int, *, normalize: bool = False, as_frame: bool = False, backend: str = "auto"):
    """The k-truss: the largest subgraph in which every edge lies in at least k − 2 of its triangles.

    The edges in fewer than k − 2 triangles are removed, and with them their
    triangles, until none is left to remove.  The CPU engine counts the supports
    once and peels them, updating the supports of the edges that lose a
    triangle; the GPU engine recounts the supports of the surviving edges each
    round (the masked ``C⟨S⟩ = S plus.pair Sᵀ`` loop).  A sparse matrix of A's
    shape holding A's values at the surviving edges; vertices keep their ids.
    For a networkx graph, the k-truss as a networkx graph, as
    ``networkx.k_truss`` returns it (the graph's type and attributes, only the
    nodes of surviving edges).  ``as_frame=True``: a DataFrame ``(first,
    second, weight)`` of the surviving edges, each once.
    """
    if _at_scale(A):
        _not_at_scale("ktruss")
    k = _check_k(k)
    g = _graph(A, backend, normalize=normalize)
    S = g.G
    if g.engine.nnz(S):  # an empty graph is its own k-truss
        S, _ = g.engine.compact_graph(S, g.engine.ktruss_keep(S, k))
    if as_frame:
        first, second, weights = g.edges_once(S.data, S)
        return g.frame(first, second, "weight", weights)
    if g.source is not None:
        first, second, _ = (g.engine.to_host(a) for a in g.edges_once(S.data, S))
        return labelled.subgraph(g.source, g.nodes, first, second)
    return g.sparse(S.data, S)


def truss_decomposition(A, *, normalize: bool = False, as_frame: bool = False, backend: str = "auto"):
    """Each edge's truss number: the largest k whose k-truss holds it (2 for an edge in no triangle).

    Peeling by levels: at level k the edges of the (k−1)-truss with support
    below k − 2 are removed, repeatedly, and get truss number k − 1; once none
    is, the survivors form the k-truss and the smallest support s among them
    makes it the (s + 2)-truss too, so the next level tried is s + 3.  The CPU
    engine counts supports once and updates them as edges go (each removed edge
    takes its surviving triangles from the other two edges, a level's removals in
    parallel rounds); the GPU engine recounts them on the surviving edges.  A
    sparse matrix with A's pattern (int64 values; float64 for CuPy); for a
    networkx graph ``{(u, v): truss number}``, each edge once; ``as_frame=True``:
    a DataFrame ``(first, second, truss)``, each edge once.
    """
    if _at_scale(A):
        _not_at_scale("truss_decomposition")
    g = _graph(A, backend, normalize=normalize)
    return g.per_edge(g.engine.truss_numbers(g.G), "truss", as_frame)


# --------------------------------------------------------------------------- row blocks, for the Dask layer
#
# A Dask adjacency matrix is given to ``semiring.dask`` with the functions below: ``_made`` assembles and checks
# the graph once (the single-machine checks), each ``_block_*`` computes one row block of a measure on the worker
# holding the graph (a ``semiring.dask.Held`` of ``(G, kind)``, its device copies kept beside it).  Then either
# ``by_blocks`` gathers the blocks' values and an ``_as_*`` assembles them into the single-machine call's result,
# or ``kept_blocks`` leaves them on the workers: ``_kept_*`` makes a block's value a block of the result (CSR
# rows, a DataFrame), ``_layout`` gives the client their shapes, and the layer makes them one Dask collection
# (``compute=False``), or reduces them there (the triangle total).


def _made(matrix, weighted: bool, normalize: bool, measure: str) -> tuple:
    """The whole graph as host CSR, checked (and normalised) as the single-machine call does, and its form."""
    g = _graph(matrix, "cpu", weighted=weighted, normalize=normalize, measure=measure)
    return g.G, g.kind


def _on_device(engine, held):
    """The held graph on the engine's device: copied there once per worker (the CPU engine computes on G)."""
    G = held.value[0]
    return held.derived(engine.name, lambda: engine.to_device(G))


def _block_rows(G, b: int, nblocks: int) -> tuple[int, int]:
    """The rows of block b of G (``semiring.dask.row_blocks``: blocks of about equal stored entries)."""
    r0, r1 = _sdask.row_blocks(G.indptr, nblocks)[b : b + 2]
    return int(r0), int(r1)


_EDGE_VALUES = LastDerived()  # a worker's measure at every edge of the held graph whose blocks are being asked


def _edge_block(held, b: int, nblocks: int, engine, key, whole):
    """Block b's entries of ``whole(G on the engine's device)``, a measure at every entry of the graph by the
    single-machine call's path (unweighted, the oriented graph's triangles, each found once): made once a worker
    for all its blocks and kept while they ask (``_EDGE_VALUES``: one value a worker, as large as the graph's
    values, dropped with its graph or when another measure or graph replaces it).
    With each block's entries from their own two lists instead, R-MAT 24's Jaccard blocks took 10.3 s of tasks
    on one H200's worker (2.27 s this way, the blocks made on the host included)."""
    values = _EDGE_VALUES.get(held, (engine.name, key), lambda: whole(_on_device(engine, held)))
    G = held.value[0]
    r0, r1 = _block_rows(G, b, nblocks)
    return engine.to_host(values[int(G.indptr[r0]) : int(G.indptr[r1])])


def _block_similarity(held, b: int, nblocks: int, name: str, weighted: bool, backend: str) -> np.ndarray:
    """The similarity at the entries of block b's rows, from the single-machine call's values."""
    engine, s = _backend.graph_engine(backend), SIMILARITIES[name]
    return _edge_block(held, b, nblocks, engine, (name, weighted), lambda Gd: _at_every_edge(engine, Gd, s, weighted))


def _block_counts(held, b: int, nblocks: int, backend: str) -> np.ndarray:
    """The common-neighbour counts at the entries of block b's rows."""
    engine = _backend.graph_engine(backend)
    return _edge_block(held, b, nblocks, engine, "counts", engine.common_neighbor_counts).astype(np.int64)


def _block_triangles(held, b: int, nblocks: int, by_degree: bool, backend: str) -> int:
    """The triangles of part b of the engine's work (the parts' counts sum to the total)."""
    engine = _backend.graph_engine(backend)
    return engine.triangle_count_total(_on_device(engine, held), by_degree, part=(b, nblocks))


def _block_pairs(held, b: int, nblocks: int, pairs, name: str, weighted: bool, backend: str) -> np.ndarray:
    """Share b of the pairs through the single-machine call (its checks too)."""
    part = np.array_split(pairs, nblocks)[b] if pairs.ndim == 2 else pairs
    return _similarity(name, held.value[0], part, weighted=weighted, backend=backend, normalize=False)


def _block_vertex_triangles(held, b: int, nblocks: int, backend: str) -> np.ndarray:
    """The triangles at each vertex of block b's rows: half the sum of its entries' common-neighbour counts,
    summed on the worker (only the block's vector leaves it)."""
    counts = _block_counts(held, b, nblocks, backend)
    G = held.value[0]
    r0, r1 = _block_rows(G, b, nblocks)
    local = (G.indptr[r0 : r1 + 1] - G.indptr[r0]).astype(np.int64)
    running = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    return (running[local[1:]] - running[local[:-1]]) // 2


def _block_csr(G, r0: int, r1: int, values):
    """Rows r0 to r1 - 1 of G's pattern holding ``values`` (host CSR of shape (r1 - r0, n), G's index types)."""
    s0, s1 = int(G.indptr[r0]), int(G.indptr[r1])
    indptr = (G.indptr[r0 : r1 + 1] - s0).astype(G.indptr.dtype)
    B = sp.csr_matrix((values, G.indices[s0:s1], indptr), shape=(r1 - r0, G.shape[1]))
    B.indices, B.indptr = G.indices[s0:s1], indptr  # SciPy would narrow int64 indices that fit
    return B


def _kept_sparse(held, b: int, nblocks: int, values):
    """Block b of a per-edge result kept on its worker: ``values`` at the entries of its rows, as a CSR matrix
    of those rows and every column in the input's form (SciPy matrix or array, CuPy)."""
    G, kind = held.value
    r0, r1 = _block_rows(G, b, nblocks)
    block_values = values(held, b, nblocks)
    return _Graph(_backend.graph_engine("cpu"), G, kind).sparse(block_values, _block_csr(G, r0, r1, block_values))


def _kept_frame(held, b: int, nblocks: int, values, column: str, starts):
    """Block b of a per-edge result kept on its worker as a DataFrame ``(first, second, column)``: each edge of
    its rows once (first < second), in row order, indexed from ``starts[b]`` (the edges of the blocks before),
    so the blocks together are the single-machine frame."""
    G, kind = held.value
    r0, r1 = _block_rows(G, b, nblocks)
    B = _block_csr(G, r0, r1, np.asarray(values(held, b, nblocks)))
    rows = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(B.indptr))
    upper = rows < B.indices
    frame = _Graph(_backend.graph_engine("cpu"), G, kind).frame(rows[upper], B.indices[upper], column, B.data[upper])
    frame.index = frame.index + int(starts[b])
    return frame


def _layout(H, nblocks: int, edges: bool) -> tuple:
    """``(kind, n, rows a block, edges before each block)`` of a held graph: what the client needs to put the
    kept blocks together (their shapes, their frames' index), computed where the graph is; the edges (a pass
    over the graph) only where asked, else None."""
    G, kind = H.value
    bounds = _sdask.row_blocks(G.indptr, nblocks)
    if not edges:
        return kind, G.shape[0], np.diff(bounds).tolist(), None
    upper = []
    for r0, r1 in itertools.pairwise(bounds):  # each edge once (u < v), block by block: memory of one block
        cols = G.indices[G.indptr[r0] : G.indptr[r1]]
        rows = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(G.indptr[r0 : r1 + 1]))
        upper.append(int(np.count_nonzero(rows < cols)))
    return kind, G.shape[0], np.diff(bounds).tolist(), np.concatenate([[0], np.cumsum(upper)]).tolist()


def hold(A, *, weighted: bool = False, normalize: bool = False):
    """A Dask adjacency matrix made into the graph once, for several measures: its row blocks assembled and
    checked (with ``weighted`` and ``normalize`` as the measures' own) and the graph copied to every worker of
    the current cluster (or kept for Dask's local scheduler).  Pass the result in place of ``A`` to the measures
    that take Dask arrays, with the same ``weighted`` and ``normalize``; a Dask array itself is made into the
    graph anew at each call.  The caller holds it: its memory on the workers is freed when it is dropped.

    >>> import dask.array as da, scipy.sparse as sp
    >>> from semiring import graph
    >>> A = sp.csr_matrix(([1.0] * 6, ([0, 1, 0, 2, 1, 2], [1, 0, 2, 0, 2, 1])), shape=(3, 3))
    >>> G = graph.hold(da.from_array(A, chunks=(2, 3), asarray=False))
    >>> graph.triangle_count(G), graph.common_neighbors(G).toarray().tolist()
    (1, [[0, 1, 1], [1, 0, 1], [1, 1, 0]])
    """
    if not _sdask.is_dask(A):
        raise TypeError(f"hold takes a Dask array of the adjacency matrix's row blocks, got {type(A).__name__}")
    make = functools.partial(_made, weighted=weighted, normalize=normalize, measure="")
    return _sdask.hold(A, make, (weighted, normalize))


def _at_scale(A) -> bool:
    """Whether A is a Dask array or a graph held on Dask (``hold``): the measure runs by row blocks."""
    return _sdask.is_dask(A) or isinstance(A, _sdask.HeldGraph)


def _by_blocks(A, block, assemble, *, weighted: bool = False, normalize: bool = False, measure: str = ""):
    """A measure of a Dask adjacency matrix (or a held one), computed by the Dask layer from the functions
    above."""
    make = functools.partial(_made, weighted=weighted, normalize=normalize, measure=measure)
    return _sdask.by_blocks(A, make, (weighted, normalize), block, assemble)


def _not_at_scale(name: str):
    raise NotImplementedError(
        f"{name} on a Dask array is not supported (its peeling rounds need the whole graph at once); "
        f"compute the graph first: {name}(A.compute(), ...)"
    )


def _kept(A, block, *, weighted: bool = False, normalize: bool = False, measure: str = ""):
    """A measure's blocks of a Dask adjacency matrix (or a held one) left on the workers
    (``semiring.dask.KeptBlocks``)."""
    make = functools.partial(_made, weighted=weighted, normalize=normalize, measure=measure)
    return _sdask.kept_blocks(A, make, (weighted, normalize), block)


def _per_edge_by_blocks(
    A, values, column: str, dtype, as_frame: bool, compute: bool, *, weighted=False, normalize=False, measure=""
):
    """A per-edge measure of a Dask adjacency matrix, ``values(held, b, nblocks)`` at the entries of block b's
    rows, in the form asked.  ``compute=True`` without ``as_frame``: the single-machine result (the blocks'
    values gathered into one sparse matrix on the client).  Otherwise the blocks stay on the workers: CSR row
    blocks as a Dask array, or DataFrames ``(first, second, column)`` as a Dask DataFrame (cuGraph's ``dask``
    form); ``as_frame=True`` with ``compute=True`` computes that frame, the single-machine one."""
    if compute and not as_frame:
        return _by_blocks(A, values, _as_sparse, weighted=weighted, normalize=normalize, measure=measure)
    make = functools.partial(_made, weighted=weighted, normalize=normalize, measure=measure)
    held, (kind, n, rows, starts) = _sdask.ask_held(A, make, (weighted, normalize), _layout_of(A, as_frame))
    dtype = np.dtype(np.float64 if kind == "cupy" else dtype)  # CuPy's sparse matrices hold floats only
    engine = _backend.graph_engine("cpu")
    if as_frame:
        block = functools.partial(_kept_frame, values=values, column=column, starts=starts)
        empty = np.zeros(0, np.int64)
        meta = _Graph(engine, None, kind).frame(empty, empty, column, np.zeros(0, dtype))
        frame = _kept(held, block, weighted=weighted, normalize=normalize, measure=measure).frame(meta)
        return frame.compute() if compute else frame
    block = functools.partial(_kept_sparse, values=values)
    meta = _Graph(engine, sp.csr_matrix((0, n)), kind).sparse(np.zeros(0, dtype))
    kept = _kept(held, block, weighted=weighted, normalize=normalize, measure=measure)
    return kept.array([(r, n) for r in rows], dtype, meta)


def _layout_of(A, edges: bool):
    """``_layout`` for A's blocks (a Dask array's row blocks, or a held graph's)."""
    nblocks = A.nblocks if isinstance(A, _sdask.HeldGraph) else _sdask.as_row_blocks(A, "A").numblocks[0]
    return functools.partial(_layout, nblocks=nblocks, edges=edges)


def _as_sparse(made, *values):
    G, kind = made
    return _Graph(_backend.graph_engine("cpu"), G, kind).sparse(np.concatenate(values))


def _as_concatenated(made, *values) -> np.ndarray:
    return np.concatenate(values)


def _similarity_by_blocks(
    name: str, A, pairs, weighted: bool, backend: str, normalize: bool, as_frame: bool, compute: bool
):
    _sdask.check_call(backend, None)
    if pairs is None:
        block = functools.partial(_block_similarity, name=name, weighted=weighted, backend=backend)
        column = f"{name}_coeff"
        return _per_edge_by_blocks(
            A, block, column, np.float64, as_frame, compute, weighted=weighted, normalize=normalize, measure=name
        )
    block = functools.partial(_block_pairs, pairs=np.asarray(pairs), name=name, weighted=weighted, backend=backend)
    return _by_blocks(A, block, _as_concatenated, weighted=weighted, normalize=normalize, measure=name)


def _triangle_count_by_blocks(A, per: str, order: str, normalize: bool, backend: str, as_frame: bool, compute: bool):
    """``per="total"``: the triangles of the parts of the oriented graph's work, summed on the workers (a tree).
    ``"vertex"``: half the sum of each vertex's entries' common-neighbour counts, summed on the worker of its
    block, the blocks' vectors put together on the client.  ``"edge"``: an edge's support is its
    common-neighbour count, in the per-edge measures' forms."""
    if per not in PER:
        raise ValueError(f"per must be one of {PER}, got {per!r}")
    by_degree = _order(order)
    _sdask.check_call(backend, None)
    if per == "edge":
        counts = functools.partial(_block_counts, backend=backend)
        return _per_edge_by_blocks(A, counts, "counts", np.int64, as_frame, compute, normalize=normalize)
    if per == "total":
        block = functools.partial(_block_triangles, by_degree=by_degree, backend=backend)
        return _kept(A, block, normalize=normalize).reduce(sum)
    make = functools.partial(_made, weighted=False, normalize=normalize, measure="")
    held, (kind, n, _, _) = _sdask.ask_held(A, make, (False, normalize), _layout_of(A, edges=False))
    counts = np.concatenate(_kept(held, functools.partial(_block_vertex_triangles, backend=backend)).gather())
    g = _Graph(_backend.graph_engine("cpu"), None, kind)
    if as_frame:
        return labelled.frame(
            {"vertex": g.ids(np.arange(n, dtype=np.int64)), "counts": g.dense(counts)}, kind == "cupy"
        )
    return g.dense(counts)


__all__ = [
    "SIMILARITIES",
    "adamic_adar_index",
    "common_neighbors",
    "cosine",
    "hold",
    "jaccard",
    "ktruss",
    "overlap",
    "resource_allocation_index",
    "scan_similarity",
    "sorensen",
    "triangle_count",
    "truss_decomposition",
    "two_hop_similarity",
]
