"""Shared hypothesis strategies: sparse matrices with the awkward corners built in.

Matrices come with empty rows, explicitly stored zeros, a single column, skewed
row degrees, float32/float64 values and int32/int64 indices, in every input
form users pass (CSR/CSC/COO matrices and arrays, dense NumPy).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

# Magnitudes 1e-3..1e3: the awkward cases here are structural, not float extremes.
_MAGNITUDES = st.one_of(st.sampled_from([1.0, 0.5, 2.0, 3.0]), st.floats(1e-3, 1e3, allow_nan=False))


@st.composite
def sparse_pair(draw, *, nonnegative: bool = False, max_rows: int = 7, max_cols: int = 9, dtype=None, index=None):
    """(X, Y) canonical CSR matrices of one width, plus their dense float64 forms."""
    n = draw(st.integers(1, max_cols))
    dtype = dtype or draw(st.sampled_from([np.float64, np.float32]))
    index = index or draw(st.sampled_from([np.int32, np.int64]))
    mats = [draw(_csr(n, max_rows, nonnegative, dtype, index)) for _ in range(2)]
    if draw(st.booleans()) and mats[0].shape[0] and mats[1].shape[0]:
        # share a row so that identical rows (distance 0) are always exercised
        k = draw(st.integers(0, mats[0].shape[0] - 1))
        mats[1] = _with_index(sp.vstack([mats[1], mats[0][k]], format="csr").astype(dtype), index)
    return tuple(mats)


@st.composite
def _csr(draw, n, max_rows, nonnegative, dtype, index):
    m = draw(st.integers(0, max_rows))
    density = draw(st.sampled_from([0.0, 0.15, 0.4, 0.8, 1.0]))
    stored = np.array(draw(st.lists(st.booleans(), min_size=m * n, max_size=m * n)), dtype=bool).reshape(m, n)
    if density < 1.0:
        keep = np.array(draw(st.lists(st.floats(0, 1), min_size=m * n, max_size=m * n))).reshape(m, n) < density
        stored &= keep
    rows, cols = np.nonzero(stored)
    signs = [] if nonnegative else draw(st.lists(st.booleans(), min_size=rows.size, max_size=rows.size))
    values = np.array(draw(st.lists(_MAGNITUDES, min_size=rows.size, max_size=rows.size)), dtype=np.float64)
    if not nonnegative:
        values[np.array(signs, dtype=bool)] *= -1
    zeros = np.array(draw(st.lists(st.booleans(), min_size=rows.size, max_size=rows.size)), dtype=bool)
    values[zeros & (np.arange(rows.size) % 3 == 0)] = 0.0  # explicitly stored zeros
    A = sp.csr_matrix((values.astype(dtype), (rows, cols)), shape=(m, n))
    return _with_index(A, index)


def _with_index(A: sp.csr_matrix, index) -> sp.csr_matrix:
    """A copy of A with index arrays of dtype ``index`` (SciPy would downcast int64 if we let it)."""
    A = A.copy()
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def dense(A) -> np.ndarray:
    return np.asarray(A.toarray(), dtype=np.float64)


# --------------------------------------------------------------------------- graphs


def adjacency(G: nx.Graph, index=np.int32, form="csr_matrix", weight=None) -> tuple:
    """(A, nodes): the adjacency in ``form`` with ``index`` dtype, rows in the order of ``nodes``."""
    nodes = list(G)
    if nodes:
        A = sp.csr_matrix(nx.to_scipy_sparse_array(G, nodelist=nodes, weight=weight, format="csr", dtype=np.float64))
    else:
        A = sp.csr_matrix((0, 0))
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    if form == "csr_array":
        A = sp.csr_array(A)
    elif form == "coo":
        A = A.tocoo()
    elif form == "dense":
        A = A.toarray()
    return A, nodes


@st.composite
def graphs(draw, max_n: int = 24):
    """A networkx graph with isolated vertices, hubs and cliques, and its adjacency in some input form."""
    n = draw(st.integers(0, max_n))
    G = nx.Graph()
    G.add_nodes_from(range(n))
    if n >= 2:
        pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1])
        G.add_edges_from(draw(st.lists(pairs, max_size=4 * n)))
        if draw(st.booleans()):  # a clique, so that trusses go deep
            members = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=7, unique=True))
            G.add_edges_from((u, v) for i, u in enumerate(members) for v in members[i + 1 :])
    index = draw(st.sampled_from([np.int32, np.int64]))
    form = draw(st.sampled_from(["csr_matrix", "csr_array", "coo", "dense"]))
    return G, *adjacency(G, index, form)


def random_graph(n: int, m: int, seed: int, index=np.int32) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    hub = rng.integers(0, n, m // 4)  # a few high-degree vertices: degree skew
    u = np.concatenate([u, hub % 5])
    v = np.concatenate([v, hub])
    A = sp.csr_matrix((np.ones(u.size), (u, v)), shape=(n, n))
    A = ((A + A.T) > 0).astype(np.float64)
    A.setdiag(0)
    A.eliminate_zeros()
    A = sp.csr_matrix(A)
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def star_graph(n: int, m: int, seed: int, index=np.int32) -> sp.csr_matrix:
    """``random_graph`` with vertex 0 joined to every other vertex: a hub whose list is far longer than the
    others' (the search branch of the intersection kernels)."""
    A = sp.lil_matrix(random_graph(n, m, seed))
    A[0, 1:] = 1
    A[1:, 0] = 1
    A = sp.csr_matrix(A)
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def weighted_graph(n: int, m: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    A = sp.random(n, n, density=m / n**2, random_state=seed, format="csr")
    A = sp.triu(A, 1)
    A = sp.csr_matrix(A + A.T)
    A.data = rng.uniform(0.1, 3.0, A.nnz)
    A = sp.csr_matrix(sp.triu(A, 1))
    return sp.csr_matrix(A + A.T)


@st.composite
def raw_csr(draw):
    """(data, indices, indptr, shape) of a CSR matrix built from raw arrays, breaking at most one rule: a row out
    of order or repeated, a column index out of range, a decreasing or overlong indptr, NaN or infinity (also made
    by summing repeats); empty rows and matrices, float32/float64 values, int32/int64 indices."""
    m, n = draw(st.integers(0, 6)), draw(st.integers(1, 8))
    counts = draw(st.lists(st.integers(0, 5), min_size=m, max_size=m))
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    nnz = int(indptr[-1])
    rows = [sorted(draw(st.lists(st.integers(0, n - 1), min_size=c, max_size=c, unique=c <= n))) for c in counts]
    indices = np.array([c for r in rows for c in r], dtype=np.int64)
    # no subnormals: CuPy's sum_duplicates flushes float32 ones to 0 (the GPU's arithmetic), SciPy keeps them
    floats = st.floats(-3, 3, width=32, allow_subnormal=False)
    data = np.array(draw(st.lists(floats, min_size=nnz, max_size=nnz)), dtype=np.float64)
    fault = draw(st.sampled_from(["none", "unsorted", "range", "negative", "indptr", "nan", "inf", "big"]))
    if nnz and fault == "unsorted":
        indices = indices[::-1].copy()
    elif nnz and fault == "range":
        indices[draw(st.integers(0, nnz - 1))] = n + draw(st.integers(0, 3))
    elif nnz and fault == "negative":
        indices[draw(st.integers(0, nnz - 1))] = -1
    elif m >= 2 and fault == "indptr":
        indptr[1], indptr[2] = indptr[2] + 1, indptr[1]  # decreasing (or beyond the entries at the end)
    elif nnz and fault in ("nan", "inf"):
        data[draw(st.integers(0, nnz - 1))] = np.nan if fault == "nan" else -np.inf
    elif nnz and fault == "big":  # finite values whose repeats sum to infinity in float32
        indices[:] = 0
        data[:] = 3e38
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    index = draw(st.sampled_from([np.int32, np.int64]))
    return data.astype(dtype), indices.astype(index), indptr.astype(index), (m, n)


def check_outcome(A, allow_inf: bool, verdicts=None):
    """``validation.check_matrix``'s checked matrix as host (indptr, indices, data, dtype), or its error's type
    and message."""
    from semiring import validation

    try:
        B = validation.check_matrix(A, "X", allow_inf=allow_inf, verdicts=verdicts)
    except (ValueError, TypeError) as exc:
        return type(exc).__name__, str(exc)
    get = (lambda a: a.get()) if validation.is_cupy(B) else np.asarray
    return get(B.indptr), get(B.indices), get(B.data), B.dtype
