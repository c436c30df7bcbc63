"""The peers' side of the GPU benchmarks, one definition for every script: a cupyx user's expansion of a
product into a measure, and the checks of any result against SciPy in float64.
"""

from __future__ import annotations

import numpy as np
from measure import PeakMemory, timed
from scipy.spatial.distance import cdist
from scipy.special import rel_entr


def expand_product(metric: str, dot, nq, nx):
    """A peer's expansion of Q·Xᵀ into the measure, with CuPy (as a user of cupyx would write it)."""
    import cupy

    if metric == "inner_product":
        return dot
    if metric == "cosine":
        return cupy.clip(1.0 - dot / cupy.sqrt(nq[:, None] * nx[None, :]), 0.0, 2.0)
    if metric == "euclidean":
        return cupy.sqrt(cupy.maximum(nq[:, None] + nx[None, :] - 2.0 * dot, 0.0))
    if metric == "jaccard":
        union = nq[:, None] + nx[None, :] - dot
        return cupy.where(union > 0, (union - dot) / cupy.where(union > 0, union, 1), 0.0)
    raise ValueError(metric)


def peer_norms(metric: str, A):
    """The row norms a peer's expansion needs (sums for jaccard on binary rows, else squares)."""
    import cupy

    data = A.multiply(A) if metric in ("cosine", "euclidean") else A
    return cupy.asarray(data.sum(axis=1)).ravel().astype(np.float32)


def agrees(a, b) -> bool:
    import cupy

    return bool(cupy.allclose(a, b, rtol=1e-3, atol=1e-4, equal_nan=True))


def oracle_check(spec, Q, X, got, rng, queries: int = 16, rows: int = 2000) -> dict:
    """Ours against SciPy in float64 on densified rows: a sample of queries × rows.

    Only the columns the sample stores are densified (the others add nothing, or only n for hamming).
    jensenshannon follows ``scipy.spatial.distance.jensenshannon`` (NaN for an empty row), which the
    docs give as our definition, rather than cdist's loop (inf there).
    """
    qi = rng.choice(Q.shape[0], min(queries, Q.shape[0]), replace=False)
    xi = rng.choice(X.shape[0], min(rows, X.shape[0]), replace=False)
    Qs, Xs = Q[qi], X[xi]
    cols = np.union1d(Qs.indices, Xs.indices)
    Qd, Xd = Qs[:, cols].toarray().astype(np.float64), Xs[:, cols].toarray().astype(np.float64)
    with np.errstate(all="ignore"):
        if spec.name == "inner_product":
            want = Qd @ Xd.T
        elif spec.name == "hamming":
            want = cdist(Qd, Xd, "hamming") * cols.size / X.shape[1]
        elif spec.name == "correlation":  # centred over all n columns, not only the sampled ones
            n = X.shape[1]
            dot = Qd @ Xd.T - np.outer(Qd.sum(1), Xd.sum(1)) / n
            qn, xn = (np.sum(A * A, 1) - A.sum(1) ** 2 / n for A in (Qd, Xd))
            want = 1.0 - dot / np.sqrt(np.outer(qn, xn))
        elif spec.name == "jensenshannon":
            P, R = Qd / Qd.sum(1, keepdims=True), Xd / Xd.sum(1, keepdims=True)
            want = np.array([[jensenshannon(p, r) for r in R] for p in P])
        elif spec.scipy is None or spec.name in ("dice", "russellrao"):
            return {"checked": False}
        else:
            want = cdist(Qd, Xd, spec.scipy)
    mine = got[np.ix_(qi, xi)].get().astype(np.float64)
    both = np.isnan(want) & np.isnan(mine)
    ok = np.isclose(mine, want, 1e-4, 1e-5) | both
    err = np.abs(mine - want) / (1e-5 + np.abs(want))
    err[both] = 0.0
    return {
        "checked": True,
        "ok": bool(ok.all()),
        "wrong_entries": int((~ok).sum()),
        "max_rel_err": float(np.nanmax(err)),
    }


def jensenshannon(p, r) -> float:
    """SciPy's definition on two distributions, with its rounding below 0 clamped (as the docs say we do)."""
    m = (p + r) / 2
    return float(np.sqrt(max((rel_entr(p, m).sum() + rel_entr(r, m).sum()) / 2, 0.0)))


def product_peers(metric: str, Qs, Xs, reference, repeats: int) -> dict:
    """The product peers against ``reference`` (ours): cuSPARSE ``Q @ X.T`` plus the expansion, and dense
    cuBLAS on rows densified beforehand (the densify timed apart), where X fits in 40 % of free memory.

    ``Qs``, ``Xs``: the prepared rows as ``cupyx.scipy.sparse`` CSR.  Times (CUDA-event medians), whether
    each agrees with ``reference``, cuSPARSE's extra memory, or why a peer did not run.
    """
    import cupy

    row: dict = {}
    nq, nx = peer_norms(metric, Qs), peer_norms(metric, Xs)

    def cusparse():
        return expand_product(metric, (Qs @ Xs.T).toarray(), nq, nx)

    try:
        ms, theirs = timed(cusparse, repeats)
        row["cusparse_ms"], row["cusparse_agrees"] = round(ms, 2), agrees(theirs, reference)
        del theirs
        row["cusparse_extra_mib"] = round(PeakMemory().extra_mib(cusparse), 1)
    except Exception as exc:  # noqa: BLE001 - the peer's failure is a result
        row["cusparse_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    cupy.get_default_memory_pool().free_all_blocks()
    dense_bytes = (Xs.shape[0] + Qs.shape[0]) * Xs.shape[1] * 4
    if dense_bytes >= 0.4 * cupy.cuda.Device().mem_info[0]:
        row["dense_skipped"] = f"X dense is {dense_bytes / 2**30:.1f} GiB, over 40 % of free GPU memory"
        return row
    ms_densify, (Qd, Xd) = timed(lambda: (Qs.toarray(), Xs.toarray()), repeats)

    def dense():
        return expand_product(metric, Qd @ Xd.T, nq, nx)

    ms, theirs = timed(dense, repeats)
    row["dense_ms"], row["dense_agrees"], row["densify_ms"] = (
        round(ms, 2),
        agrees(theirs, reference),
        round(ms_densify, 2),
    )
    row["dense_extra_mib"] = round(PeakMemory().extra_mib(dense), 1)
    return row
