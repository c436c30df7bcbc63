"""Independent oracles: every result of every suite, ours and each peer's, is checked against one of these in
the same run.

* ``pairwise_reference(spec, Q, X, qi, xi)``: SciPy's distances in float64 between sampled rows (``sample``),
  densified on the columns they store; the boolean measures (dice, jaccard, russellrao, ...) on the nonzero
  pattern, as SciPy's boolean definitions; the measures SciPy lacks written out in float64.
* ``compare(got, want)``: a result against the oracle, as a check dict (``ok``, ``wrong_entries``, ...).
* ``knn_check(metric, Q, X, indices, distances, qi)``: neighbours up to ties, against scikit-learn's brute
  force in float64 on sampled query rows: the float64 distances of the neighbours given equal the true k best.
* ``edge_check(A, rows, cols, values, measure)``: per-edge common neighbours or Jaccard on sampled edges by set
  arithmetic on the adjacency lists; ``triangles_reference(A)``: SciPy's masked product in int64.

A check dict always has ``ok`` (bool), ``subject`` (ours or the peer) and ``against`` (the oracle), so
``record.check_rows`` finds it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist
from scipy.special import rel_entr

RTOL, ATOL = 1e-4, 1e-5  # float32 results against float64 truths
BOOLEAN = ("dice", "jaccard", "russellrao", "rogerstanimoto", "sokalsneath", "yule")


def sample(Q, X, rng, queries: int = 16, rows: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """The rows of Q and of X whose results are checked (sorted)."""
    qi = np.sort(rng.choice(Q.shape[0], min(queries, Q.shape[0]), replace=False))
    xi = np.sort(rng.choice(X.shape[0], min(rows, X.shape[0]), replace=False))
    return qi, xi


def _jensenshannon(p, r) -> float:
    """SciPy's definition on two distributions, its rounding below 0 clamped (as our docs say we do)."""
    m = (p + r) / 2
    return float(np.sqrt(max((rel_entr(p, m).sum() + rel_entr(r, m).sum()) / 2, 0.0)))


def pairwise_reference(name: str, scipy_name: str | None, Q, X, qi, xi):
    """Float64 distances between rows ``qi`` of Q and ``xi`` of X (or None where no oracle is written).

    Only the columns the sample stores are densified; the measures that count all n columns (hamming,
    correlation, russellrao, rogerstanimoto, yule) are corrected for the others, which add nothing else.
    hellinger √(1 − Σ√(p·r)) on L1-normalised rows (NaN for an empty row); kldivergence Σ rel_entr(x, y);
    kl_divergence ½ Σ over x > 0 of x (log x − log y), log 0 read as 0; jensenshannon as
    ``scipy.spatial.distance.jensenshannon`` (NaN for an empty row), not cdist's loop (inf there).
    """
    Qs, Xs = Q[qi], X[xi]
    n = X.shape[1]
    cols = np.union1d(Qs.indices, Xs.indices)
    Qd, Xd = Qs[:, cols].toarray().astype(np.float64), Xs[:, cols].toarray().astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "inner_product":
            return Qd @ Xd.T
        if name == "hamming":
            return cdist(Qd, Xd, "hamming") * cols.size / n
        if name == "correlation":  # centred over all n columns
            dot = Qd @ Xd.T - np.outer(Qd.sum(1), Xd.sum(1)) / n
            qn, xn = (np.sum(A * A, 1) - A.sum(1) ** 2 / n for A in (Qd, Xd))
            return 1.0 - dot / np.sqrt(np.outer(qn, xn))
        if name == "jensenshannon":
            P, R = Qd / Qd.sum(1, keepdims=True), Xd / Xd.sum(1, keepdims=True)
            return np.array([[_jensenshannon(p, r) for r in R] for p in P])
        if name == "kldivergence":
            return np.array([rel_entr(q[None, :], Xd).sum(1) for q in Qd])
        if name == "kl_divergence":
            logs = np.log(np.where(Xd > 0, Xd, 1.0))
            return np.array(
                [0.5 * np.where(q > 0, q * (np.log(np.where(q > 0, q, 1.0)) - logs), 0.0).sum(1) for q in Qd]
            )
        if name == "hellinger":
            P, R = Qd / Qd.sum(1, keepdims=True), Xd / Xd.sum(1, keepdims=True)
            return np.sqrt(np.maximum(1.0 - np.sqrt(P) @ np.sqrt(R).T, 0.0))
        if name in BOOLEAN:  # SciPy's boolean definitions on the nonzero pattern, over all n columns
            Qb, Xb = (Qd != 0).astype(np.float64), (Xd != 0).astype(np.float64)
            tt = Qb @ Xb.T
            tf, ft = Qb.sum(1)[:, None] - tt, Xb.sum(1)[None, :] - tt
            ff = n - tt - tf - ft
            if name == "jaccard":
                return np.where(tt + tf + ft > 0, (tf + ft) / (tt + tf + ft), 0.0)
            if name == "dice":  # 0 for two empty rows (docs/measures.md; SciPy: NaN)
                return np.where(2 * tt + tf + ft > 0, (tf + ft) / (2 * tt + tf + ft), 0.0)
            if name == "russellrao":
                return (n - tt) / n
            if name == "rogerstanimoto":
                return 2.0 * (tf + ft) / (tt + ff + 2.0 * (tf + ft))
            if name == "sokalsneath":
                return 2.0 * (tf + ft) / (tt + 2.0 * (tf + ft))
            return np.where(tf * ft > 0, 2.0 * tf * ft / (tt * ff + tf * ft), 0.0)  # yule
        if name == "seuclidean":  # V: column variances (ddof=1) of Q and X stacked, as ours defaults
            both = sp.vstack([Q, X]).tocsc()[:, cols].astype(np.float64)
            count = both.shape[0]
            mean = np.asarray(both.mean(0)).ravel()
            V = (np.asarray(both.multiply(both).sum(0)).ravel() - count * mean**2) / (count - 1)
            return cdist(Qd, Xd, "seuclidean", V=V)
        if scipy_name is None:
            return None
        return cdist(Qd, Xd, scipy_name)


def compare(got, want, subject: str, against: str) -> dict:
    """``got`` (any float precision) against ``want`` (float64): close, and NaN exactly where ``want`` is NaN."""
    got = np.asarray(got, dtype=np.float64)
    if got.shape != want.shape:
        return {"subject": subject, "against": against, "ok": False, "error": f"shape {got.shape} vs {want.shape}"}
    both = np.isnan(want) & np.isnan(got)
    ok = np.isclose(got, want, RTOL, ATOL) | both
    with np.errstate(invalid="ignore"):  # inf - inf where both are +inf (kldivergence)
        err = np.abs(got - want) / (ATOL + np.abs(want))
    err[both | (got == want)] = 0.0
    return {
        "subject": subject,
        "against": against,
        "ok": bool(ok.all()),
        "entries": int(ok.size),
        "wrong_entries": int((~ok).sum()),
        "nan_where_number": int((np.isnan(got) & ~np.isnan(want)).sum()),
        "number_where_nan": int((~np.isnan(got) & np.isnan(want)).sum()),
        "max_rel_err": float(np.nanmax(err)) if err.size else 0.0,
    }


def sklearn_convention(metric: str, want, Q, X, qi, xi):
    """The oracle as scikit-learn defines it, and what differs: its cosine of an empty row is 1 where SciPy's
    (and ours) is NaN: a convention of its own (it normalises a zero row to zero), not an error."""
    if metric != "cosine":
        return want, None
    empty = (np.diff(Q.indptr)[qi] == 0)[:, None] | (np.diff(X.indptr)[xi] == 0)[None, :]
    if not empty.any():
        return want, None
    return np.where(empty, 1.0, want), f"{int(empty.sum())} entries of an empty row: scikit-learn's 1 for SciPy's NaN"


def no_oracle(subject: str, why: str) -> dict:
    """Where no oracle exists: stated, and counted as neither passed nor failed."""
    return {"subject": subject, "against": None, "ok": None, "unchecked": why}


# --------------------------------------------------------------------------- nearest neighbours


def true_distances(metric: str, Q, X, ind: np.ndarray) -> np.ndarray:
    """Float64 distances from each query row to its listed neighbours, recomputed from the rows."""
    Q, X = Q.astype(np.float64), X.astype(np.float64)
    rows = np.repeat(np.arange(Q.shape[0]), ind.shape[1])
    A, B = Q[rows], X[np.asarray(ind).ravel()]
    if metric in ("cityblock", "manhattan", "l1"):
        d = np.asarray(abs(A - B).sum(axis=1)).ravel()
    elif metric in ("euclidean", "l2"):
        d = np.sqrt(np.asarray((A - B).multiply(A - B).sum(axis=1)).ravel())
    elif metric == "inner_product":
        d = np.asarray(A.multiply(B).sum(axis=1)).ravel()
    elif metric == "cosine":
        dot = np.asarray(A.multiply(B).sum(axis=1)).ravel()
        na = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel())
        nb = np.sqrt(np.asarray(B.multiply(B).sum(axis=1)).ravel())
        with np.errstate(all="ignore"):
            d = 1.0 - dot / (na * nb)
    else:
        raise ValueError(f"no float64 recomputation of {metric!r} for the kNN check")
    return d.reshape(np.shape(ind))


def knn_reference(metric: str, Q, X, k: int, self_index: np.ndarray | None = None):
    """scikit-learn's brute-force neighbours in float64, (indices, distances), of every row of Q among X; for
    inner_product the k largest products (no scikit-learn metric: the exact product, sorted).

    ``self_index``: where Q's rows are rows of X and each is not its own neighbour (all-pairs kNN without the
    point itself), their indices in X; k + 1 are asked and the row itself dropped.
    """
    from sklearn.neighbors import NearestNeighbors

    Q64, X64 = sp.csr_matrix(Q, dtype=np.float64), sp.csr_matrix(X, dtype=np.float64)
    extra = 0 if self_index is None else 1
    if metric == "inner_product":
        scores = (Q64 @ X64.T).toarray()
        if extra:
            scores[np.arange(Q.shape[0]), self_index] = -np.inf
        ind = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return ind, np.take_along_axis(scores, ind, axis=1)
    nn = NearestNeighbors(n_neighbors=k + extra, metric=metric, algorithm="brute").fit(X64)
    dist, ind = nn.kneighbors(Q64)
    if extra:
        own = ind == np.asarray(self_index)[:, None]
        keep = ~own
        keep[~own.any(axis=1), -1] = False  # itself not among them (a tie at distance 0): drop the farthest
        ind, dist = ind[keep].reshape(-1, k), dist[keep].reshape(-1, k)
    return ind, dist


def knn_check(metric: str, Q, X, indices, subject: str, want, tol: float = 1e-5) -> dict:
    """Neighbours up to ties: the float64 distances of the ``indices`` given, sorted, equal the oracle's
    (``want`` = ``knn_reference``'s (indices, distances)), within ``tol`` relative to max(1, |d|)."""
    want_ind, want_d = want
    indices = np.asarray(indices.get() if hasattr(indices, "get") else indices)  # CuPy's, or the host's
    if indices.shape != want_ind.shape:
        return {
            "subject": subject,
            "against": "scikit-learn brute force, float64",
            "ok": False,
            "error": f"shape {indices.shape} vs {want_ind.shape}",
        }
    got = true_distances(metric, Q, X, indices)
    if metric == "inner_product":
        got, want_d = -got, -np.asarray(want_d)
    got = np.sort(got, axis=1)
    want_d = np.sort(np.asarray(want_d, np.float64), axis=1)
    dev = np.abs(got - want_d) / np.maximum(1.0, np.abs(want_d))
    dev[np.isnan(got) & np.isnan(want_d)] = 0.0
    dev = np.where(np.isnan(dev), np.inf, dev)
    return {
        "subject": subject,
        "against": "scikit-learn brute force, float64 (up to ties)",
        "ok": bool((dev <= tol).all()),
        "queries": int(indices.shape[0]),
        "identical_indices": float((np.sort(indices, 1) == np.sort(want_ind, 1)).mean()),
        "rows_off": int((dev > tol).any(axis=1).sum()),
        "max_deviation": float(dev.max()) if dev.size else 0.0,
    }


# --------------------------------------------------------------------------- graphs


def sample_edges(A: sp.csr_matrix, rng, count: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """``count`` stored entries (u, v) of A drawn at random."""
    A = A.tocoo()
    pick = rng.choice(A.nnz, min(count, A.nnz), replace=False)
    return A.row[pick].astype(np.int64), A.col[pick].astype(np.int64)


def edge_values_reference(A: sp.csr_matrix, u, v, measure: str) -> np.ndarray:
    """Common neighbours |N(u) ∩ N(v)| or Jaccard |N(u) ∩ N(v)| / |N(u) ∪ N(v)| by set arithmetic."""
    out = np.empty(len(u), np.float64)
    for i, (a, b) in enumerate(zip(u, v)):
        na, nb = A.indices[A.indptr[a] : A.indptr[a + 1]], A.indices[A.indptr[b] : A.indptr[b + 1]]
        common = np.intersect1d(na, nb, assume_unique=True).size
        out[i] = common if measure == "common_neighbors" else common / (na.size + nb.size - common)
    return out


def edge_check(A: sp.csr_matrix, result, u, v, measure: str, subject: str) -> dict:
    """A per-edge result (a SciPy or CuPy sparse matrix on A's pattern) at the sampled edges, against set
    arithmetic on the adjacency lists."""
    if hasattr(result, "get"):  # cupyx
        result = result.get()
    result = sp.csr_matrix(result)
    got = np.asarray(result[u, v]).ravel().astype(np.float64)
    check = compare(got, edge_values_reference(A, u, v, measure), subject, "set arithmetic on sampled edges")
    check["edges"] = len(u)
    return check


def triangles_reference(A: sp.csr_matrix) -> int:
    """Triangles by SciPy in int64: Σ ((L·L) ∘ L), L the strictly lower triangle."""
    L = sp.tril(A, k=-1, format="csr").astype(np.int64)
    return int((L @ L).multiply(L).sum())


def count_check(got, want: int, subject: str, against: str) -> dict:
    ok = got is not None and round(float(got)) == int(want)
    return {"subject": subject, "against": against, "ok": bool(ok), "got": got, "want": int(want)}
