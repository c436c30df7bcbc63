"""The peers' side of the GPU benchmarks, one definition for every script: a cupyx user's expansion of a
product into a measure, the checks of any result against SciPy in float64, and cuVS through its harness.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import scipy.sparse as sp
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


def sample(Q, X, rng, queries: int = 16, rows: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """The rows of Q and of X whose distances are checked (sorted, so a peer can write them back in order)."""
    qi = np.sort(rng.choice(Q.shape[0], min(queries, Q.shape[0]), replace=False))
    xi = np.sort(rng.choice(X.shape[0], min(rows, X.shape[0]), replace=False))
    return qi, xi


def scipy_reference(spec, Q, X, qi, xi):
    """SciPy's distances in float64 between rows ``qi`` of Q and ``xi`` of X on densified rows, or None where
    SciPy has no definition that matches ours (dice and russellrao are boolean there). Those SciPy lacks are
    written out in float64: hellinger √(1 − Σ√(p·r)) on L1-normalised rows (NaN for an empty row, as our docs
    define it), kldivergence Σ rel_entr(x, y), kl_divergence ½ Σ over x > 0 of x (log x − log y), log 0 read as 0.

    Only the columns the sample stores are densified (the others add nothing, or only n for hamming).
    jensenshannon follows ``scipy.spatial.distance.jensenshannon`` (NaN for an empty row), which the
    docs give as our definition, rather than cdist's loop (inf there).
    """
    Qs, Xs = Q[qi], X[xi]
    cols = np.union1d(Qs.indices, Xs.indices)
    Qd, Xd = Qs[:, cols].toarray().astype(np.float64), Xs[:, cols].toarray().astype(np.float64)
    with np.errstate(all="ignore"):
        if spec.name == "inner_product":
            return Qd @ Xd.T
        if spec.name == "hamming":
            return cdist(Qd, Xd, "hamming") * cols.size / X.shape[1]
        if spec.name == "correlation":  # centred over all n columns, not only the sampled ones
            n = X.shape[1]
            dot = Qd @ Xd.T - np.outer(Qd.sum(1), Xd.sum(1)) / n
            qn, xn = (np.sum(A * A, 1) - A.sum(1) ** 2 / n for A in (Qd, Xd))
            return 1.0 - dot / np.sqrt(np.outer(qn, xn))
        if spec.name == "jensenshannon":
            P, R = Qd / Qd.sum(1, keepdims=True), Xd / Xd.sum(1, keepdims=True)
            return np.array([[jensenshannon(p, r) for r in R] for p in P])
        if spec.name == "kldivergence":
            return np.array([rel_entr(q[None, :], Xd).sum(1) for q in Qd])
        if spec.name == "kl_divergence":  # log 0 read as 0, terms only where x > 0
            logs = np.log(np.where(Xd > 0, Xd, 1.0))
            return np.array(
                [0.5 * np.where(q > 0, q * (np.log(np.where(q > 0, q, 1.0)) - logs), 0.0).sum(1) for q in Qd]
            )
        if spec.name in ("rogerstanimoto", "yule"):  # boolean counts over all n columns, not the sampled ones
            Qb, Xb = (Qd != 0).astype(np.float64), (Xd != 0).astype(np.float64)
            tt = Qb @ Xb.T
            tf, ft = Qb.sum(1)[:, None] - tt, Xb.sum(1)[None, :] - tt
            ff = X.shape[1] - tt - tf - ft
            if spec.name == "rogerstanimoto":
                return 2.0 * (tf + ft) / (tt + ff + 2.0 * (tf + ft))
            return np.where(tf * ft > 0, 2.0 * tf * ft / (tt * ff + tf * ft), 0.0)
        if spec.name == "seuclidean":  # V: the column variances (ddof=1) of Q and X stacked, as ours defaults
            both = sp.vstack([Q, X]).tocsc()[:, cols].astype(np.float64)
            count = both.shape[0]
            mean = np.asarray(both.mean(0)).ravel()
            V = (np.asarray(both.multiply(both).sum(0)).ravel() - count * mean**2) / (count - 1)
            return cdist(Qd, Xd, "seuclidean", V=V)
        if spec.name == "hellinger":
            P, R = Qd / Qd.sum(1, keepdims=True), Xd / Xd.sum(1, keepdims=True)
            return np.sqrt(np.maximum(1.0 - np.sqrt(P) @ np.sqrt(R).T, 0.0))
        if spec.scipy is None or spec.name in ("dice", "russellrao"):
            return None
        return cdist(Qd, Xd, spec.scipy)


def compare(mine, want) -> dict:
    """``mine`` (float, any precision) against ``want`` (float64): NaN only where ``want`` is NaN.

    Besides the entries off: how many are NaN where ``want`` is a number, and how many are a number where
    ``want`` is NaN (an empty row, say), and the largest relative error over the entries both give a number.
    """
    mine = np.asarray(mine, dtype=np.float64)
    both = np.isnan(want) & np.isnan(mine)
    ok = np.isclose(mine, want, 1e-4, 1e-5) | both
    with np.errstate(invalid="ignore"):  # inf - inf where both are +inf (kldivergence)
        err = np.abs(mine - want) / (1e-5 + np.abs(want))
    err[both | (mine == want)] = 0.0
    return {
        "checked": True,
        "ok": bool(ok.all()),
        "wrong_entries": int((~ok).sum()),
        "nan_entries": int((np.isnan(mine) & ~np.isnan(want)).sum()),
        "number_where_nan": int((~np.isnan(mine) & np.isnan(want)).sum()),
        "entries": int(ok.size),
        "max_rel_err": float(np.nanmax(err)) if err.size else 0.0,
    }


def oracle_check(spec, Q, X, got, rng, queries: int = 16, rows: int = 2000) -> dict:
    """Ours (``got``, a CuPy array of every distance) against SciPy in float64 on a sample of queries × rows."""
    qi, xi = sample(Q, X, rng, queries, rows)
    want = scipy_reference(spec, Q, X, qi, xi)
    return {"checked": False} if want is None else compare(got[np.ix_(qi, xi)].get(), want)


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


# --------------------------------------------------------------------------- cuVS (benchmarks/cuvs/harness.cu)

# cuVS's sparse measures by our name: its cuvs::distance::DistanceType (and metric_arg after a colon). The
# expanded forms are the ones cuVS's own callers use where there are two (L2Expanded rather than L2Unexpanded).
CUVS_METRICS = {
    "sqeuclidean": "L2Expanded",
    "euclidean": "L2SqrtExpanded",
    "inner_product": "InnerProduct",
    "cosine": "CosineExpanded",
    "correlation": "CorrelationExpanded",
    "jaccard": "JaccardExpanded",
    "dice": "DiceExpanded",
    "hellinger": "HellingerExpanded",
    "russellrao": "RusselRaoExpanded",
    "cityblock": "L1",
    "chebyshev": "Linf",
    "canberra": "Canberra",
    "minkowski": "LpUnexpanded:2",  # our default p
    "hamming": "HammingUnexpanded",
    "jensenshannon": "JensenShannon",
    "kl_divergence": "KLDivergence",  # ½ Σ x (log x − log y), RAFT's definition, which ours of that name follows
}


class CuvsHarness:
    """The compiled cuVS harness, run as a subprocess on CSR matrices written to ``workdir``.

    Each call returns, by our metric name, the harness's median milliseconds (CUDA events, the output
    preallocated) and its output on the sample rows, or the error cuVS gave.
    """

    def __init__(self, binary: Path, workdir: Path, repeats: int):
        self.binary, self.workdir, self.repeats = Path(binary), Path(workdir), repeats
        self.workdir.mkdir(parents=True, exist_ok=True)

    def _write(self, name: str, A) -> None:
        A = A.tocsr().astype(np.float32)
        (self.workdir / f"{name}.shape").write_text(f"{A.shape[0]} {A.shape[1]} {A.nnz}\n")
        A.indptr.astype(np.int32).tofile(self.workdir / f"{name}.indptr")
        A.indices.astype(np.int32).tofile(self.workdir / f"{name}.indices")
        A.data.tofile(self.workdir / f"{name}.data")

    def _run(self, *args: str) -> dict[str, dict]:
        proc = subprocess.run([str(self.binary), *args], capture_output=True, text=True, check=False)
        lines = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                result = json.loads(line)
                lines[result["metric"]] = result
        if proc.returncode != 0:
            lines["_error"] = {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"}
        return lines

    def pairwise(self, Q, X, metrics: list[str], sample_rows: np.ndarray) -> dict[str, dict]:
        """cuVS's distances from every row of Q to every row of X, for each of ``metrics`` (our names) it has."""
        self._write("q", Q)
        self._write("x", X)
        sample_rows.astype(np.int32).tofile(self.workdir / "sample.rows")
        theirs = {m: CUVS_METRICS[m] for m in metrics if m in CUVS_METRICS}
        if not theirs:
            return {}
        lines = self._run("pairwise", str(self.workdir), str(self.repeats), ",".join(theirs.values()))
        out = {}
        for ours, spelled in theirs.items():
            cuvs_name = spelled.split(":")[0]
            result = dict(lines.get(cuvs_name) or lines.get("_error") or {"error": "no output"})
            result["cuvs_metric"] = spelled
            if "ms" in result:
                path = self.workdir / f"out_{cuvs_name}.f32"
                result["sample"] = np.fromfile(path, np.float32).reshape(sample_rows.size, X.shape[0])
            out[ours] = result
        return out

    def knn(self, X, metrics: list[str], k: int) -> dict[str, dict]:
        """cuVS sparse brute-force kNN of every row of X among all rows (itself included, so ask k + 1)."""
        self._write("x", X)
        theirs = {m: CUVS_METRICS[m] for m in metrics if m in CUVS_METRICS}
        if not theirs:
            return {}
        lines = self._run("knn", str(self.workdir), str(self.repeats), str(k), ",".join(theirs.values()))
        out = {}
        for ours, cuvs_name in theirs.items():
            result = dict(lines.get(cuvs_name) or lines.get("_error") or {"error": "no output"})
            result["cuvs_metric"] = cuvs_name
            if "ms" in result:
                stem = self.workdir / f"knn_{cuvs_name}"
                result["distances"] = np.fromfile(f"{stem}.f32", np.float32).reshape(X.shape[0], k)
                result["indices"] = np.fromfile(f"{stem}.i32", np.int32).reshape(X.shape[0], k)
            out[ours] = result
        return out


def find_cuvs_harness(given: str | None) -> Path | None:
    """The harness ``--cuvs`` names, else ``$CUVS_HARNESS``, else ``~/cuvs/root/cuvs_harness`` if it is there."""
    for candidate in (given, os.environ.get("CUVS_HARNESS"), str(Path.home() / "cuvs/root/cuvs_harness")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    if given:
        raise FileNotFoundError(f"--cuvs {given}: no such harness (benchmarks/cuvs/device_steps.md builds it)")
    return None
