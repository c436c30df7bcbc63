"""The GPU engine at the public call, as users call it, with its peers in the same run.

For each dataset shape (``datasets.make_dataset``, seeded by ``--seed``, float32),
``--queries`` rows against every row, for every measure:

* **ours, CuPy in** — ``semiring.distances.pairwise_distances(Qc, Xc, metric)`` on
  ``cupyx.scipy.sparse`` inputs, result a ``cupy.ndarray``: validation,
  preparation and product all counted (CUDA-event median);
* **ours, SciPy in** — the same call on SciPy inputs with a NumPy result: the
  transfers both ways counted (wall-clock median);
* **ours, kernel only** — ``BoundMeasure.block`` on rows prepared beforehand
  (what ``gpu_bench.py`` times);
* **peers** for the measures a product gives (cosine, euclidean): cuSPARSE
  ``Q @ X.T`` + the expansion in CuPy, and dense cuBLAS GEMM on rows densified
  beforehand (and with the densify counted), where X fits dense;
* **memory**: peak device bytes taken during the public call (CuPy input)
  beyond the inputs and the result, by a counting allocator with no pool,
  against the issue's budget max(10 % of the output, 256 MiB);
* **check**: ours against SciPy ``cdist`` (float64, densified) on a sample.

Then k-nearest neighbours, k = 10, all rows against all rows of the
movielens-like data (``--knn-datasets``): ``NearestNeighbors(metric).fit(Xc).kneighbors()``
on CuPy input, against cuSPARSE + ``argpartition`` in 8,192-row tiles and dense
cuBLAS + ``argpartition`` (where X fits dense), cosine only for the peers (no
product gives cityblock); neighbours compared up to ties.

    python benchmarks/public_api_bench.py --seed 0 --json benchmarks/results/public_api_h200.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # benchmarks/datasets.py and measure.py; the library comes from its install

import numpy as np
from datasets import DATASETS, describe, make_dataset
from measure import MIB, PeakMemory, timed, wall
from peers import expand_product, oracle_check, peer_norms, product_peers

from semiring import distances
from semiring.distances.measure import BoundMeasure, prepare
from semiring.distances.specs import DISTANCES, get_metric
from semiring.kernels.cuda import ENGINE

PRODUCT_PEERS = ("cosine", "euclidean")
K = 10
PEER_TILE = 8192


# --------------------------------------------------------------------------- pairwise at the public call


def run_metric(name, metric, Q, X, Qc, Xc, args, rng) -> dict:
    import cupy
    import cupyx.scipy.sparse as csp

    spec = get_metric(metric)
    out_mib = Q.shape[0] * X.shape[0] * 4 / MIB
    row = {"dataset": name, "metric": spec.name, "family": spec.family, "output_mib": round(out_mib, 1)}
    row["memory_budget_mib"] = round(max(0.1 * out_mib, 256.0), 1)

    def public():
        return distances.pairwise_distances(Qc, Xc, metric=metric)

    ms, got = timed(public, args.repeats)
    row["public_cupy_ms"] = round(ms, 2)
    row["check"] = oracle_check(spec, Q, X, got, rng)
    del got
    row["public_extra_mib"] = round(PeakMemory().extra_mib(public), 1)
    seconds, _ = wall(lambda: distances.pairwise_distances(Q, X, metric=metric), args.repeats)
    row["public_scipy_ms"] = round(1e3 * seconds, 2)

    bound = BoundMeasure(ENGINE, spec, {}, np.float32)
    Qr, Xr = bound.prepare(Q), bound.prepare(X)
    ms, _ = timed(lambda: bound.block(Qr, Xr), args.repeats)
    row["kernel_ms"] = round(ms, 2)

    if spec.name in PRODUCT_PEERS:
        Qs, Xs = csp.csr_matrix(prepare(Q, spec.prepare)), csp.csr_matrix(prepare(X, spec.prepare))
        row.update(product_peers(spec.name, Qs, Xs, distances.pairwise_distances(Qc, Xc, metric=metric), args.repeats))
    cupy.get_default_memory_pool().free_all_blocks()
    print(json.dumps(row), flush=True)
    return row


# --------------------------------------------------------------------------- kNN at the public call


def peer_knn(X, metric: str, dense: bool):
    """cuSPARSE (or dense cuBLAS) products in tiles of rows, expanded, each row's k best by argpartition."""
    import cupy
    import cupyx.scipy.sparse as csp

    Xs = csp.csr_matrix(X)
    nx = peer_norms(metric, Xs)
    Xd = Xs.toarray() if dense else None
    m = X.shape[0]
    dist, ind = cupy.empty((m, K), np.float32), cupy.empty((m, K), np.int64)
    for r0 in range(0, m, PEER_TILE):
        r1 = min(m, r0 + PEER_TILE)
        dot = Xd[r0:r1] @ Xd.T if dense else (Xs[r0:r1] @ Xs.T).toarray()
        D = expand_product(metric, dot, nx[r0:r1], nx)
        D[cupy.arange(r1 - r0), cupy.arange(r0, r1)] = cupy.inf  # not its own neighbour
        part = cupy.argpartition(D, K, axis=1)[:, :K]
        vals = cupy.take_along_axis(D, part, axis=1)
        order = cupy.argsort(vals, axis=1)
        dist[r0:r1], ind[r0:r1] = cupy.take_along_axis(vals, order, axis=1), cupy.take_along_axis(part, order, axis=1)
        del dot, D
    return dist, ind


def run_knn(name, metric, X, Xc, args) -> dict:
    import cupy

    row = {"dataset": name, "metric": metric, "k": K, "rows": X.shape[0]}

    def public():
        return distances.NearestNeighbors(n_neighbors=K, metric=metric).fit(Xc).kneighbors()

    ms, (d, i) = timed(public, args.repeats)
    row["public_cupy_ms"] = round(ms, 1)
    seconds, _ = wall(lambda: distances.NearestNeighbors(n_neighbors=K, metric=metric).fit(X).kneighbors(), 1)
    row["public_scipy_ms"] = round(1e3 * seconds, 1)
    row["public_extra_mib"] = round(PeakMemory().extra_mib(public), 1)
    if metric == "cosine":
        for peer, dense in (("cusparse", False), ("dense", True)):
            if dense and X.shape[0] * X.shape[1] * 4 > 0.3 * cupy.cuda.Device().mem_info[0]:
                row[f"{peer}_skipped"] = "X does not fit dense"
                continue
            ms, (pd, pi) = timed(lambda dense=dense: peer_knn(X, metric, dense), args.repeats)
            row[f"{peer}_argpartition_ms"] = round(ms, 1)
            # Up to ties: the k-th distances agree (float32 products differ in the last bits).
            row[f"{peer}_same_indices"] = float((pi == i).mean())
            row[f"{peer}_kth_distance_max_diff"] = float(cupy.abs(pd[:, -1] - d[:, -1]).max())
            del pd, pi
    cupy.get_default_memory_pool().free_all_blocks()
    print(json.dumps(row), flush=True)
    return row


# --------------------------------------------------------------------------- report


def _versus(peer: str, peer_ms, ours_ms: float, correct: bool, want: float | None) -> str:
    """``ours`` against one peer: the ratio, the target met or missed, or why the ratio does not count."""
    if peer_ms is None:
        return ""
    ratio = peer_ms / ours_ms
    if not correct:
        return f"; {peer} {peer_ms} ms but WRONG (disagrees with ours, which agree with SciPy): no target"
    text = f"; {ratio:.2f}x {peer}"
    return text + (f" ({'met' if ratio >= want else 'MISSED'} >= {want}x)" if want else "")


def summary(rows: list[dict], knn: list[dict]) -> list[str]:
    """The issue's targets, each met or missed with the figure; a peer that is wrong sets no target."""
    lines = []
    for r in rows:
        d, m, ours = r["dataset"], r["metric"], r["public_cupy_ms"]
        mem = r["public_extra_mib"] <= r["memory_budget_mib"]
        text = (
            f"{d} {m}: {ours} ms; memory {r['public_extra_mib']} MiB of {r['memory_budget_mib']} "
            f"{'met' if mem else 'MISSED'}"
        )
        dense_want = 1 if d == "scrna" else None
        text += _versus(
            "dense cuBLAS (pre-densified)", r.get("dense_ms"), ours, r.get("dense_agrees", False), dense_want
        )
        want = {"edgar": 1, "movielens": 5}.get(d)
        text += _versus("cuSPARSE", r.get("cusparse_ms"), ours, r.get("cusparse_agrees", False), want)
        if "cusparse_error" in r:
            text += f"; cuSPARSE fails ({r['cusparse_error'].split(':')[0]})"
        if r["check"].get("checked") and not r["check"]["ok"]:
            text += "; OURS WRONG"
        lines.append(text)
    for r in knn:
        text = f"kNN {r['dataset']} {r['metric']}: {r['public_cupy_ms']} ms"
        for peer, want in (("cusparse", 2), ("dense", 1)):
            correct = r.get(f"{peer}_kth_distance_max_diff", 1.0) <= 1e-3
            text += _versus(
                f"{peer} + argpartition", r.get(f"{peer}_argpartition_ms"), r["public_cupy_ms"], correct, want
            )
        lines.append(text)
    return lines


def table(rows: list[dict], knn: list[dict]) -> list[str]:
    """The results as Markdown tables (docs/cuda.md is made from them)."""

    def peer(r, key, ok):
        if key not in r:
            return "fails" if key == "cusparse_ms" and "cusparse_error" in r else "—"
        return f"{r[key]:,}" + ("" if r.get(ok, False) else " **wrong**")

    out = [
        (
            "| dataset | metric | ours, CuPy in | ours, SciPy in | kernel only | cuSPARSE | dense cuBLAS (+ densify) "
            "| extra MiB (budget) |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        dense = peer(r, "dense_ms", "dense_agrees")
        if "densify_ms" in r:
            dense += f" (+ {r['densify_ms']:,})"
        over = "" if r["public_extra_mib"] <= r["memory_budget_mib"] else " **over**"
        out.append(
            f"| {r['dataset']} | {r['metric']} | {r['public_cupy_ms']:,} | {r['public_scipy_ms']:,} | {r['kernel_ms']:,} "
            f"| {peer(r, 'cusparse_ms', 'cusparse_agrees')} | {dense} "
            f"| {r['public_extra_mib']:,} ({r['memory_budget_mib']:,}){over} |"
        )
    out += [
        "",
        "| kNN, all rows, k = 10 | ours, CuPy in | ours, SciPy in | cuSPARSE + argpartition | dense cuBLAS + argpartition | extra MiB |",
    ]
    out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in knn:
        cells = []
        for p in ("cusparse", "dense"):
            if f"{p}_argpartition_ms" not in r:
                cells.append("—")
                continue
            wrong = r[f"{p}_kth_distance_max_diff"] > 1e-3
            cells.append(f"{r[f'{p}_argpartition_ms']:,}" + (" **wrong**" if wrong else ""))
        out.append(
            f"| {r['dataset']} {r['metric']} | {r['public_cupy_ms']:,} | {r['public_scipy_ms']:,} | {cells[0]} "
            f"| {cells[1]} | {r['public_extra_mib']:,} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, help="print the tables and summary of this results file, and stop")
    parser.add_argument("--seed", type=int, help="seed of the generated datasets (required for a run)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--metrics", default=",".join(d.name for d in DISTANCES))
    parser.add_argument("--knn-datasets", default="movielens")
    parser.add_argument("--knn-metrics", default="cosine,cityblock")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.report:
        results = json.loads(args.report.read_text())
        print("\n".join([*table(results["rows"], results["knn"]), "", *summary(results["rows"], results["knn"])]))
        return
    if args.seed is None:
        parser.error("--seed is required: the datasets are drawn with it")
    import cupy
    import cupyx.scipy.sparse as csp

    meta = {
        "command": "python benchmarks/public_api_bench.py " + " ".join(sys.argv[1:]),
        "commit": os.environ.get("COMMIT") or _git_commit(),
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "cupy": cupy.__version__,
    }
    print(json.dumps(meta), flush=True)
    rows, knn = [], []

    def save():
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"meta": meta, "rows": rows, "knn": knn, "summary": summary(rows, knn)}))

    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=args.seed)
        Q = X[: args.queries]
        Xc, Qc = csp.csr_matrix(X), csp.csr_matrix(Q)
        print(f"{name}: {describe(X)}", flush=True)
        rng = np.random.default_rng(args.seed)
        for metric in args.metrics.split(","):
            rows.append(run_metric(name, metric, Q, X, Qc, Xc, args, rng))
            save()
        del Xc, Qc
    for name in args.knn_datasets.split(","):
        X = make_dataset(name, args.scale, seed=args.seed)
        Xc = csp.csr_matrix(X)
        for metric in args.knn_metrics.split(","):
            knn.append(run_knn(name, metric, X, Xc, args))
            save()
    print("\n".join([*table(rows, knn), "", *summary(rows, knn)]))


def _git_commit() -> str:
    try:
        git = ["git", "-C", str(HERE), "rev-parse", "HEAD"]
        return subprocess.run(git, check=False, capture_output=True, text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
