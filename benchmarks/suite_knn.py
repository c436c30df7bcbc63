"""Suite ``knn``: k-nearest neighbours, k = 10, ours against every peer, each result checked.

For each dataset (``--datasets``) and metric (``--metrics``):

* **all pairs on the GPU**: every row against every row, each point not its own neighbour:
  ``NearestNeighbors(k, metric).fit(Xc).kneighbors()`` on CuPy input (CUDA events) and on SciPy input (wall
  clock, host to host); its peak device memory beyond inputs and outputs; against cuVS sparse brute force
  (``cuvs::neighbors::brute_force`` on a sparse index, k + 1 asked since it counts each row its own), and,
  for the measures a product gives (cosine, inner_product), cuSPARSE ``X @ X.T`` and dense cuBLAS (where X
  fits dense) + ``argpartition`` in tiles of 8,192 rows, as a cupyx user would write them;
* **the same queries on the host** (``--subset`` first rows as queries, each its own nearest): ours on the
  GPU (host in and out), ours on the CPU engine, and scikit-learn's brute force, both on all host cores, each
  warmed up and the median of ``--host-repeats`` (no extrapolation: the figure is the subset's).

Every result, ours and each peer's, is checked in the same run on ``--check-queries`` sampled query rows
against scikit-learn's brute force in float64 (``reference.knn_reference``): the neighbours given are right
up to ties when their float64 distances equal the true k best.

    python -m benchmarks knn --seed 0 --json benchmarks/results/knn_h200.json
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from . import peers
from .record import Results
from .reference import knn_check, knn_reference
from .synthetic import describe, make_dataset
from .timing import PeakMemory, on_device, on_host

K = 10
PEER_TILE = 8192
PRODUCT_KNN = ("cosine", "inner_product")


def add_arguments(p) -> None:
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--datasets", default="movielens,nytimes")
    p.add_argument("--metrics", default="cosine,cityblock")
    p.add_argument("--repeats", type=int, default=3, help="timed calls after the warm-up (device work)")
    p.add_argument("--host-repeats", type=int, default=1, help="timed calls after the warm-up (host calls)")
    p.add_argument("--subset", type=int, default=1024, help="queries of the host comparison ('0': none)")
    p.add_argument("--check-queries", type=int, default=64)
    p.add_argument("--cuvs", help="the cuVS harness; default $CUVS_HARNESS or ~/cuvs/root/cuvs_harness if built")
    p.add_argument("--json", type=Path)


def product_knn(X, metric: str, dense: bool):
    """cuSPARSE (or dense cuBLAS) products in tiles of rows, expanded, each row's k best by argpartition,
    each row not its own neighbour."""
    import cupy
    import cupyx.scipy.sparse as csp

    Xs = csp.csr_matrix(X)
    nx = peers.peer_norms(metric, Xs)
    Xd = Xs.toarray() if dense else None
    m = X.shape[0]
    sign = -1.0 if metric == "inner_product" else 1.0  # largest products first
    dist, ind = cupy.empty((m, K), np.float32), cupy.empty((m, K), np.int64)
    if not dense:  # SpGEMMs in row blocks CuPy computes right (peers.SPGEMM_BLOCK_PRODUCTS)
        XT, blocks = Xs.T.tocsr(), peers.spgemm_blocks(Xs, peers.column_counts(Xs))
    for r0 in range(0, m, PEER_TILE):
        r1 = min(m, r0 + PEER_TILE)
        dot = Xd[r0:r1] @ Xd.T if dense else peers.spgemm_dense(Xs, XT, blocks, r0, r1)
        D = sign * peers.expand_product(metric, dot, nx[r0:r1], nx)
        D[cupy.arange(r1 - r0), cupy.arange(r0, r1)] = cupy.inf
        part = cupy.argpartition(D, K, axis=1)[:, :K]
        vals = cupy.take_along_axis(D, part, axis=1)
        order = cupy.argsort(vals, axis=1)
        dist[r0:r1] = sign * cupy.take_along_axis(vals, order, axis=1)
        ind[r0:r1] = cupy.take_along_axis(part, order, axis=1)
        del dot, D
    return dist, ind


def cuvs_without_self(result: dict, m: int) -> np.ndarray:
    """cuVS's k + 1 neighbours of each row with the row itself dropped (else the farthest)."""
    own = result["indices"] == np.arange(m)[:, None]
    keep = ~own
    keep[~own.any(axis=1), -1] = False
    return result["indices"][keep].reshape(m, K)


def all_pairs(name, metric, X, args, cuvs: dict | None, qi) -> dict:
    import cupy
    import cupyx.scipy.sparse as csp

    from semiring import distances

    Xc = csp.csr_matrix(X)
    row = {"dataset": name, "metric": metric, "k": K, "rows": X.shape[0], "part": "all pairs"}
    timings = row["timings"] = {}
    want = knn_reference(metric, X[qi], X, K, self_index=qi)

    def public():
        return distances.NearestNeighbors(n_neighbors=K, metric=metric, verbose=False).fit(Xc).kneighbors()

    t, (_, i) = on_device(public, args.repeats)
    timings["ours"], row["public_cupy_ms"] = t.as_dict(), round(t.ms, 1)
    row["check"] = knn_check(metric, X[qi], X, i[qi], "ours", want)
    del i
    t, (_, i) = on_host(
        lambda: distances.NearestNeighbors(n_neighbors=K, metric=metric, verbose=False).fit(X).kneighbors(), 1
    )
    timings["ours_scipy_in"], row["public_scipy_ms"] = t.as_dict(), round(t.ms, 1)
    row["scipy_in_check"] = knn_check(metric, X[qi], X, i[qi], "ours, SciPy in", want)
    row["public_extra_mib"] = round(PeakMemory().extra_mib(public), 1)
    if metric in PRODUCT_KNN:
        for peer, dense, label in (
            ("cusparse", False, "cuSPARSE + argpartition"),
            ("dense", True, "dense cuBLAS + argpartition"),
        ):
            if dense and X.shape[0] * X.shape[1] * 4 > 0.3 * cupy.cuda.Device().mem_info[0]:
                row[f"{peer}_skipped"] = "X does not fit dense in 30 % of free memory"
                continue
            try:
                t, (_, pi) = on_device(lambda dense=dense: product_knn(X, metric, dense), args.repeats)
            except Exception as exc:  # noqa: BLE001 - the peer's failure is a result
                row[f"{peer}_error"] = peers.error_of(exc)
                continue
            timings[peer], row[f"{peer}_argpartition_ms"] = t.as_dict(), round(t.ms, 1)
            row[f"{peer}_check"] = knn_check(metric, X[qi], X, pi[qi], label, want)
            del pi
    if cuvs is not None:
        if "error" in cuvs:
            row["cuvs_error"] = cuvs["error"]
        else:
            row["cuvs_metric"], row["cuvs_ms"] = cuvs["cuvs_metric"], round(cuvs["ms"], 1)
            theirs = cuvs_without_self(cuvs, X.shape[0])
            row["cuvs_check"] = knn_check(metric, X[qi], X, theirs[qi], "cuVS brute force", want)
    cupy.get_default_memory_pool().free_all_blocks()
    return row


def host_subset(name, metric, X, args, rng) -> dict:
    """The first ``--subset`` rows as queries (each its own nearest), ours on the GPU and CPU engines and
    scikit-learn, on every host core, warmed up, the median of ``--host-repeats``."""
    import numba

    from semiring import distances

    threads = os.cpu_count()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    Q = X[: args.subset]
    qi = np.sort(rng.choice(Q.shape[0], min(args.check_queries, Q.shape[0]), replace=False))
    want = knn_reference(metric, Q[qi], X, K)
    row = {"dataset": name, "metric": metric, "k": K, "rows": X.shape[0], "part": "subset", "queries": Q.shape[0]}
    row["threads"] = threads
    timings = row["timings"] = {}
    for engine in ("cuda", "cpu"):
        nn = distances.NearestNeighbors(n_neighbors=K, metric=metric, backend=engine, verbose=False).fit(X)
        t, (_, i) = on_host(lambda nn=nn: nn.kneighbors(Q), args.host_repeats)
        timings[f"ours_{engine}"], row[f"ours_{engine}_ms"] = t.as_dict(), round(t.ms, 1)
        row[f"ours_{engine}_check"] = knn_check(metric, Q[qi], X, i[qi], f"ours ({engine})", want)
    r = peers.sklearn_knn(X, Q, metric, K, threads, args.host_repeats)
    if "result" in r:
        timings["sklearn"], row["sklearn_ms"] = r["timing"], round(r["timing"]["median_ms"], 1)
        row["sklearn_check"] = knn_check(metric, Q[qi], X, r["result"][1][qi], "scikit-learn", want)
    else:
        row["sklearn_error"] = r.get("error") or r.get("skipped")
    return row


def main(args) -> int:
    results = Results("knn", args, args.json)
    harness_path = peers.find_cuvs_harness(args.cuvs)
    harness = None
    if harness_path:
        version = harness_path.parent / "CUVS_VERSION"
        results.meta["versions"]["cuvs"] = version.read_text().split() if version.is_file() else "unknown"
        harness = peers.CuvsHarness(harness_path, Path(tempfile.mkdtemp(prefix="cuvs-")), args.repeats)
    results.extra["datasets"] = {}
    metrics = args.metrics.split(",")
    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=args.seed)
        results.extra["datasets"][name] = describe(X)
        rng = np.random.default_rng(args.seed)
        qi = np.sort(rng.choice(X.shape[0], min(args.check_queries, X.shape[0]), replace=False))
        cuvs = harness.knn(X, metrics, K + 1) if harness else {}
        for metric in metrics:
            results.add(all_pairs(name, metric, X, args, cuvs.get(metric) if harness else None, qi))
        if args.subset:
            for metric in metrics:
                results.add(host_subset(name, metric, X, args, rng))
    return results.finish()
