"""Independent references for the tests: each distance measure's float64 value on densified input, kNN, and
the findings of an engine's one-pass CSR check (``numpy_verdicts``).

``ORACLES`` has one entry per row of ``semiring.distances.specs.DISTANCES``
(``test_distances`` checks that the two tables name the same measures), so
adding a measure is one spec row and one entry here.  Where SciPy defines the
measure the entry is ``cdist`` through the row's ``scipy`` name; otherwise a
few lines of NumPy that state the definition of ``docs/measures.md``.  None of
it calls the code under test.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import cdist
from scipy.special import rel_entr

from semiring import graph
from semiring.distances.specs import DISTANCES, Distance, get_metric

Reference = Callable[..., np.ndarray]  # (spec, Xd, Yd, **params) -> float64 m × p


@dataclass(frozen=True)
class Oracle:
    """How a measure's reference is computed, and how closely ours must agree with it.

    ``atol``: where the reference itself is only that accurate. ``ill_posed(Xd, Yd)``:
    a boolean m × p mask of entries where the reference is rounding noise (left out).
    ``term_sizes(Xd, Yd)``: Σ |term| of each entry, for a measure whose terms grow
    past its values and cancel (a sum accumulated in float32 is then only within a
    few float32 ulps of that, not of the result); None where the terms are the
    values' own size.
    """

    reference: Reference
    atol: float = 0.0
    ill_posed: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    term_sizes: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None


def scipy_cdist(spec: Distance, Xd: np.ndarray, Yd: np.ndarray, **params) -> np.ndarray:
    """SciPy's ``cdist`` by the row's SciPy name; on the nonzero pattern for the boolean measures."""
    if spec.prepare == "binary":
        Xd, Yd = Xd != 0, Yd != 0
    return cdist(Xd, Yd, spec.scipy, **params)


def dice(spec: Distance, Xd, Yd) -> np.ndarray:
    """SciPy's, except that two empty rows are at distance 0 (documented; SciPy: NaN)."""
    ref = scipy_cdist(spec, Xd, Yd)
    ref[(~Xd.any(1))[:, None] & (~Yd.any(1))[None, :]] = 0.0
    return ref


def _distributions(Xd, Yd) -> tuple[np.ndarray, np.ndarray]:
    return Xd / Xd.sum(1, keepdims=True), Yd / Yd.sum(1, keepdims=True)


def jensenshannon(spec: Distance, Xd, Yd, base: float = math.e) -> np.ndarray:
    """SciPy's definition in float64, with its rounding below 0 clamped before the square root.

    cdist's loop returns NaN for e.g. [1, 0] against [843.5, 0] (true value 0)
    and inf for an all-zero row, where scipy's jensenshannon() and we return
    NaN (0/0 normalisation).
    """
    P, Q = _distributions(Xd, Yd)
    M = (P[:, None, :] + Q[None, :, :]) / 2
    js = rel_entr(P[:, None, :], M).sum(-1) + rel_entr(Q[None, :, :], M).sum(-1)
    return np.sqrt(np.maximum(js, 0) / 2 / np.log(base))


def kldivergence(spec: Distance, Xd, Yd) -> np.ndarray:
    """Σ x log(x/y) on the raw rows: 0 where x = 0, +inf where x > 0 = y."""
    return rel_entr(Xd[:, None, :], Yd[None, :, :]).sum(-1)


def _log_term_sizes(Xd, Yd) -> np.ndarray:
    """Σ over x > 0 of |x log x| + |x log y| (log 0 read as 0): the sizes of what both KL measures sum."""
    x, y = np.abs(Xd[:, None, :]), np.abs(Yd[None, :, :])
    logs = np.abs(np.log(np.where(x > 0, x, 1.0))) + np.abs(np.log(np.where(y > 0, y, 1.0)))
    return np.where(x > 0, x * logs, 0.0).sum(-1)


def kl_divergence(spec: Distance, Xd, Yd) -> np.ndarray:
    """cuML's (RAFT's): ½ Σ x (log x − log y) over x > 0, log y read as 0 where y = 0."""
    x, y = Xd[:, None, :], Yd[None, :, :]
    logy = np.where(y > 0, np.log(np.where(y > 0, y, 1.0)), 0.0)
    terms = np.where(x > 0, x * (np.log(np.where(x > 0, x, 1.0)) - logy), 0.0)
    return 0.5 * terms.sum(-1)


def inner_product(spec: Distance, Xd, Yd) -> np.ndarray:
    return Xd @ Yd.T


def hellinger(spec: Distance, Xd, Yd) -> np.ndarray:
    """The stable form of √(1 − Σ√(pq)) for distributions p, q: √(½ Σ(√p − √q)²)."""
    P, Q = _distributions(Xd, Yd)
    return np.sqrt(0.5 * ((np.sqrt(P)[:, None, :] - np.sqrt(Q)[None, :, :]) ** 2).sum(-1))


def constant_rows(A: np.ndarray) -> np.ndarray:
    """Rows whose values are all equal: correlation is 0/0 there, and SciPy's answer is rounding noise."""
    return (A.max(1) == A.min(1)) if A.shape[1] else np.ones(A.shape[0], bool)


def _either_constant(Xd, Yd) -> np.ndarray:
    return constant_rows(Xd)[:, None] | constant_rows(Yd)[None, :]


# 1 − x·y/(‖x‖‖y‖) near 0 cancels in SciPy itself: its own error is ~1e-16 there.
_CANCELS = 1e-12

ORACLES: dict[str, Oracle] = {
    "braycurtis": Oracle(scipy_cdist),
    "canberra": Oracle(scipy_cdist),
    "chebyshev": Oracle(scipy_cdist),
    "cityblock": Oracle(scipy_cdist),
    "correlation": Oracle(scipy_cdist, atol=_CANCELS, ill_posed=_either_constant),
    "cosine": Oracle(scipy_cdist, atol=_CANCELS),
    "dice": Oracle(dice),
    "euclidean": Oracle(scipy_cdist),
    "hamming": Oracle(scipy_cdist),
    "hellinger": Oracle(hellinger),
    "inner_product": Oracle(inner_product),
    "jaccard": Oracle(scipy_cdist),
    "jensenshannon": Oracle(jensenshannon),
    "kldivergence": Oracle(kldivergence, term_sizes=_log_term_sizes),
    "kl_divergence": Oracle(kl_divergence, term_sizes=_log_term_sizes),
    "minkowski": Oracle(scipy_cdist),
    "rogerstanimoto": Oracle(scipy_cdist),
    "russellrao": Oracle(scipy_cdist),
    "seuclidean": Oracle(scipy_cdist),
    "sokalsneath": Oracle(scipy_cdist),
    "sqeuclidean": Oracle(scipy_cdist),
    "yule": Oracle(scipy_cdist),
}

NONNEGATIVE = {d.name for d in DISTANCES if d.nonnegative}
# Parameters a test of every measure gives so that each row runs its own kernels: minkowski's default p = 2 runs as
# euclidean (its row's rewrite, as SciPy's cdist), so its powers are taken at p = 3.
OWN_PATH_PARAMS = {"minkowski": {"p": 3.0}}


def oracle(name: str, Xd: np.ndarray, Yd: np.ndarray, **params) -> np.ndarray:
    """The reference value of measure ``name`` (or an alias), computed densely in float64 by SciPy or NumPy."""
    spec = get_metric(name)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return ORACLES[spec.name].reference(spec, np.asarray(Xd), np.asarray(Yd), **params)


def correlation_rows() -> sp.csr_matrix:
    """An ordinary row, a zero row, a constant row (every column stored alike: no spread), a mean large next to
    its spread (its centred sums cancel), a row of one value."""
    rng = np.random.default_rng(0)
    A = np.zeros((5, 40))
    A[0, ::3] = rng.random(14)
    A[2] = 3.0
    A[3] = 1e4 + rng.random(40)
    A[4, 7] = -2.5
    return sp.csr_matrix(A)


def tolerances(name: str, dtype) -> dict:
    """How closely our result must equal the oracle's, for a result of ``dtype``."""
    return {"rtol": 1e-4 if dtype == np.float32 else 1e-9, "atol": ORACLES[get_metric(name).name].atol}


def ill_posed(name: str, Xd: np.ndarray, Yd: np.ndarray) -> np.ndarray:
    """The entries where the oracle's value is rounding noise, not a reference (none for most measures)."""
    entry = ORACLES[get_metric(name).name]
    if entry.ill_posed is None:
        return np.zeros((Xd.shape[0], Yd.shape[0]), bool)
    return entry.ill_posed(Xd, Yd)


# rows far from the origin (cancellation), shared by the CPU and GPU tiers


def offset_rows(seed: int, m: int, n: int, offset: float, spread: float, dtype, nonnegative: bool):
    """m rows: the first half dense, ``offset + spread·u``; the rest sparse values of size ``spread``."""
    rng = np.random.default_rng(seed)
    A = spread * rng.random((m, n))
    if not nonnegative:
        A -= spread / 2
    dense = m - m // 2
    A[:dense] += offset
    A[dense:][rng.random((m - dense, n)) < 0.6] = 0.0
    return sp.csr_matrix(A.astype(dtype))


def offset_tolerance(name: str, offset: float, spread: float) -> float:
    """SciPy's own error on these rows: correlation centres values of size offset (its error ε·offset/spread
    relative), jensenshannon's near-uniform rows cancel in its per-column terms (an error of √ε)."""
    if name == "correlation":
        return 1e-12 + 1e-15 * (offset / spread)
    if name == "seuclidean":  # the default V, each column's variance, is as ill-conditioned in both: ε·offset/spread
        return 1e-14 * (offset / spread)
    if name in ("jensenshannon", "cosine"):
        return 1e-7 if name == "jensenshannon" else 1e-12
    return 0.0


# k nearest neighbours


def reference_knn(D: np.ndarray, k: int, *, largest: bool = False, exclude_self: bool = False):
    """The documented order, by brute force in float64: best value first (largest for a similarity),
    NaN after every number, equal values by index; a query never selects itself when exclude_self."""
    dist, ind = [], []
    for i, row in enumerate(np.asarray(D, dtype=np.float64)):
        cand = [j for j in range(row.size) if not (exclude_self and j == i)]
        cand.sort(key=lambda j: (np.isnan(row[j]), 0.0 if np.isnan(row[j]) else (-row[j] if largest else row[j]), j))
        ind.append(cand[:k])
        dist.append(row[cand[:k]])
    return np.array(dist).reshape(len(D), k), np.array(ind, dtype=np.int64).reshape(len(D), k)


def assert_neighbors_up_to_ties(dist, ind, D, k, *, largest=False, exclude_self=False, rtol=1e-9, atol=1e-12):
    """``(dist, ind)`` are a correct k-nearest answer against the float64 matrix D, up to ties.

    Each row's indices are distinct (and not the query itself when excluded);
    the reported distances are D's values at them, sorted; every candidate left
    out is no better than the k-th one; equal reported values come in index order.
    """
    assert ind.shape == dist.shape == (D.shape[0], k) and ind.dtype == np.int64
    sign = -1.0 if largest else 1.0
    for i in range(D.shape[0]):
        row, chosen = D[i], ind[i]
        assert len(set(chosen.tolist())) == k, f"row {i}: repeated index {chosen}"
        if exclude_self:
            assert i not in chosen, f"row {i} selected itself"
        np.testing.assert_allclose(dist[i], row[chosen], rtol=rtol, atol=atol, equal_nan=True, err_msg=f"row {i}")
        finite = ~np.isnan(dist[i])
        assert finite[: finite.sum()].all(), f"row {i}: NaN before a number"
        keys = sign * dist[i][finite]
        assert (keys[1:] >= keys[:-1]).all(), f"row {i}: not sorted {dist[i]}"
        same = keys[1:] == keys[:-1]
        assert (np.diff(chosen[finite])[same] > 0).all(), f"row {i}: equal values not in index order"
        rest = np.setdiff1d(np.arange(row.size), np.r_[chosen, [i] if exclude_self else []])
        if finite.all() and rest.size:
            worst = keys[-1]
            tol = atol + rtol * abs(worst) if np.isfinite(worst) else 0.0
            assert (np.isnan(row[rest]) | (sign * row[rest] >= worst - tol)).all(), f"row {i}: a better one left out"


# --------------------------------------------------------------------------- graph measures: networkx and sets

BUNDLED = {
    "karate": nx.karate_club_graph,
    "florentine": nx.florentine_families_graph,
    "les_miserables": nx.les_miserables_graph,
    "davis": nx.davis_southern_women_graph,  # bipartite: no triangles
    "petersen": nx.petersen_graph,
    "k6": lambda: nx.complete_graph(6),
}


def edge_values(S) -> dict:
    """{(u, v): value} of a sparse result, explicit zeros included."""
    S = sp.csr_matrix(S)
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    return {(int(u), int(v)): S.data[k] for k, (u, v) in enumerate(zip(rows, S.indices))}


def set_similarity(name: str, Nu: set, Nv: set) -> float:
    c, du, dv = len(Nu & Nv), len(Nu), len(Nv)
    den = {"jaccard": du + dv - c, "sorensen": (du + dv) / 2, "overlap": min(du, dv), "cosine": math.sqrt(du * dv)}
    return c / den[name] if den[name] > 0 else 0.0


def check_against_networkx(G: nx.Graph, A, nodes, backend: str = "cpu") -> None:
    index = {u: i for i, u in enumerate(nodes)}
    N = {index[u]: {index[w] for w in G[u]} for u in G}
    edges = [(index[u], index[v]) for u, v in G.edges()]
    both = edges + [(v, u) for u, v in edges]

    tri = nx.triangles(G)
    assert graph.triangle_count(A, backend=backend) == sum(tri.values()) // 3
    assert graph.triangle_count(A, order="id", backend=backend) == sum(tri.values()) // 3
    np.testing.assert_array_equal(graph.triangle_count(A, per="vertex", backend=backend), [tri[u] for u in nodes])

    per_edge = edge_values(graph.triangle_count(A, per="edge", backend=backend))
    cn = edge_values(graph.common_neighbors(A, backend=backend))
    assert set(cn) == set(both) == set(per_edge)
    for u, v in both:
        want = len(list(nx.common_neighbors(G, nodes[u], nodes[v])))
        assert cn[u, v] == want and per_edge[u, v] == want

    jac = edge_values(graph.jaccard(A, backend=backend))
    for u, v, p in nx.jaccard_coefficient(G, [(nodes[u], nodes[v]) for u, v in both]):
        assert jac[index[u], index[v]] == pytest.approx(p, rel=1e-12)
    for name in ("sorensen", "overlap", "cosine"):
        got = edge_values(getattr(graph, name)(A, backend=backend))
        for u, v in both:
            assert got[u, v] == pytest.approx(set_similarity(name, N[u], N[v]), rel=1e-12)
    scan = edge_values(graph.scan_similarity(A, backend=backend))
    for u, v in both:
        closed_u, closed_v = N[u] | {u}, N[v] | {v}
        want = len(closed_u & closed_v) / math.sqrt(len(closed_u) * len(closed_v))
        assert scan[u, v] == pytest.approx(want, rel=1e-12)

    truss = edge_values(graph.truss_decomposition(A, backend=backend))
    assert set(truss) == set(both)
    k = 2
    while True:
        want = {(index[u], index[v]) for u, v in nx.k_truss(G, k).edges()}
        want |= {(v, u) for u, v in want}
        got = set(edge_values(graph.ktruss(A, k, backend=backend)))
        assert got == want, k
        assert {e for e, t in truss.items() if t >= k} == want, k
        if not want:
            break
        k += 1


def check_parts_on_graphs(engine, index) -> None:
    """``check_parts`` on random graphs cut in 1, 3 and 7 parts, a hub among short lists (parts of unequal
    work), and more parts than vertices (empty parts)."""
    from strategies import random_graph, star_graph

    for nparts in (1, 3, 7):
        check_parts(random_graph(90, 400, seed=nparts, index=index), engine, nparts)
    check_parts(star_graph(300, 300, seed=1, index=index), engine, 4)
    check_parts(random_graph(4, 6, seed=0, index=index), engine, 9)


def check_parts(A: sp.csr_matrix, engine, nparts: int) -> None:
    """A graph engine's triangle count in ``nparts`` parts (the Dask path's pieces), by degree order and by
    vertex id, against SciPy: the parts sum to ``trace(A³) / 6``."""
    B = sp.csr_matrix(A, dtype=np.float64)
    G = engine.to_device(A)
    total = round((B @ B @ B).diagonal().sum() / 6)
    for by_degree in (True, False):
        parts = [engine.triangle_count_total(G, by_degree, part=(b, nparts)) for b in range(nparts)]
        assert sum(parts) == total, (by_degree, parts, total)


# --------------------------------------------------------------------------- the CSR check


def numpy_verdicts(indptr, indices, data) -> dict[str, int]:
    """The findings of an engine's ``csr_verdicts`` by NumPy, row by row (rows read within the stored arrays)."""
    bound = min(indices.size, data.size)
    cols, unsorted = [], 0
    values = []
    for i in range(indptr.size - 1):
        lo, hi = max(int(indptr[i]), 0), min(int(indptr[i + 1]), bound)
        row = indices[lo:hi].astype(np.int64)
        cols.append(row)
        values.append(data[lo:hi])
        unsorted += int(np.count_nonzero(row[1:] <= row[:-1]))
    cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    values = np.concatenate(values) if values else np.zeros(0)
    magnitudes = np.abs(values.astype(np.float64))
    nonzero = magnitudes[magnitudes > 0]
    return {
        "decreasing rows": int(np.count_nonzero(np.diff(indptr.astype(np.int64)) < 0)),
        "lowest column": int(cols.min()) if cols.size else None,
        "highest column": int(cols.max()) if cols.size else None,
        "unsorted": unsorted,
        "nan": int(np.isnan(values).sum()),
        "inf": int(np.isinf(values).sum()),
        "first": int(indptr[0]),
        "last": int(indptr[-1]),
        "magnitudes": (float(nonzero.min()) if nonzero.size else np.inf, float(magnitudes.max(initial=0.0))),
    }


def agree(got: dict, want: dict, bound: int) -> None:
    """The same findings; where indptr breaks a rule (validation then refuses the matrix on that alone) only
    the pointers' findings count."""
    if want["decreasing rows"] or want["first"] != 0 or want["last"] > bound:
        keys = ("decreasing rows", "first", "last")
        assert {k: got[k] for k in keys} == {k: want[k] for k in keys}
        return
    if want["lowest column"] is None:  # no entry read: the extremes are not findings
        got = {**got, "lowest column": None, "highest column": None}
    if want["nan"] or want["inf"]:  # the magnitudes of values not all finite mean nothing (validation reads none)
        got, want = {**got, "magnitudes": None}, {**want, "magnitudes": None}
    assert got == want


def share_rows(dtype=np.float64) -> sp.csr_matrix:
    """Rows for ``row_shares`` in ``dtype``: ordinary ones, an empty row, a row of zeros stored, and a row whose
    float32 sum overflows (ten values of 1e38); in float64 also one whose float64 sum does (three of 1e308)."""
    A = sp.random(40, 30, density=0.2, format="csr", random_state=7, dtype=np.float64)
    dense_rows = A.toarray()
    dense_rows[3] = 0.0
    dense_rows[5, :10] = 1e38
    dense_rows[6, :3] = 1e308
    B = sp.csr_matrix(dense_rows)
    B.data[B.indptr[8] : B.indptr[9]] = 0.0  # row 8: zeros stored explicitly
    if dtype == np.float32:
        B = B[[i for i in range(B.shape[0]) if i != 6]]  # 1e308 is not a float32
    return B.astype(dtype)


def shares_reference(A: sp.csr_matrix, root: bool) -> np.ndarray:
    """Each stored value of A over its row's sum, in float64 from values scaled by 2^-20 (exact: sums of 1e308s
    fit), 0 where the sum is 0; their square roots with ``root``."""
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    scaled = A.data.astype(np.float64) * 2.0**-20
    sums = np.bincount(rows, weights=scaled, minlength=A.shape[0])[rows]
    with np.errstate(all="ignore"):
        want = np.where(sums > 0, scaled / sums, 0.0)
    return np.sqrt(want) if root else want
