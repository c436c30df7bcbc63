"""k-nearest neighbours, all rows against all rows, k = 10: ours (GPU and CPU engines) against scikit-learn.

For each paper-shaped dataset (``datasets.make_dataset``, seeded, float32) and
metric (cosine, manhattan):

* **ours, GPU** — ``distances.NearestNeighbors(backend="cuda")``, every row
  queried against every row (``kneighbors(X)``), host input to host output,
  wall clock, median of ``--repeats`` after a warm-up (compiles) on a few rows;
* **scikit-learn** — ``NearestNeighbors(algorithm="brute", n_jobs=-1)`` on the
  host's cores, timed on the first ``--sk-queries`` rows (all rows would take
  minutes), and **ours** (GPU and CPU engines) timed on the same subset, so the
  speed-ups compare like with like; the all-rows figure for scikit-learn is
  that time scaled by rows, and is marked as an estimate;
* **peak GPU memory** of the all-rows GPU run, with a counting allocator
  (``measure.PeakMemory``: no pool, every CuPy allocation counted), against
  ``working_memory`` plus the inputs (the CSR matrix) and the outputs
  (``n × k`` distances and int64 indices); with ``--budget-mib`` (512) the
  nytimes-like rows are run again under that budget;
* **agreement** — on the subset, our GPU neighbours against scikit-learn's:
  the fraction of identical indices, and "up to ties": the true float64
  distances (recomputed from the rows) of our k neighbours equal those of
  scikit-learn's, position by position.

    python benchmarks/knn_bench.py --scale 1.0 --json benchmarks/results/knn_bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # benchmarks/datasets.py; the library comes from its install

import numpy as np
import scipy.sparse as sp
from datasets import DATASETS, make_dataset
from measure import MIB, PeakMemory, wall

from semiring import distances, driver

K = 10


def true_distances(metric: str, Q: sp.csr_matrix, X: sp.csr_matrix, ind: np.ndarray) -> np.ndarray:
    """Float64 distances from each query row to its listed neighbours, from the rows themselves."""
    Q, X = Q.astype(np.float64), X.astype(np.float64)
    rows = np.repeat(np.arange(Q.shape[0]), ind.shape[1])
    A, B = Q[rows], X[ind.ravel()]
    if metric == "manhattan":
        d = np.asarray(abs(A - B).sum(axis=1)).ravel()
    else:  # cosine
        dot = np.asarray(A.multiply(B).sum(axis=1)).ravel()
        na = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel())
        nb = np.sqrt(np.asarray(B.multiply(B).sum(axis=1)).ravel())
        with np.errstate(all="ignore"):
            d = 1.0 - dot / (na * nb)
    return d.reshape(ind.shape)


def agreement(metric, Q, X, ours, theirs) -> dict:
    (_, i_ours), (_, i_sk) = ours, theirs
    d_ours, d_sk = true_distances(metric, Q, X, i_ours), true_distances(metric, Q, X, i_sk)
    scale = np.maximum(1.0, np.abs(d_sk))
    deviation = np.nanmax(np.abs(d_ours - d_sk) / scale) if d_sk.size else 0.0
    return {
        "identical_indices": float((i_ours == i_sk).mean()),
        "max_true_distance_deviation": float(deviation),
        "equal_up_to_ties": bool(deviation <= 1e-5 and (np.isnan(d_ours) == np.isnan(d_sk)).all()),
    }


def run(name: str, metric: str, X, args) -> dict:
    from sklearn.neighbors import NearestNeighbors as SkNN

    m = X.shape[0]
    sub = X[: min(args.sk_queries, m)]
    row = {"dataset": name, "shape": list(X.shape), "nnz": int(X.nnz), "metric": metric, "k": K}
    gpu = distances.NearestNeighbors(K, metric, backend="cuda", verbose=False).fit(X)
    gpu.kneighbors(X[:64])  # compile
    gpu.kneighbors(sub)  # and what the subset's shape compiles (another strategy may serve 1,024 rows), untimed
    row["gpu_all_s"], full = wall(lambda: gpu.kneighbors(X), args.repeats)
    row["gpu_subset_s"], ours_sub = wall(lambda: gpu.kneighbors(sub), args.repeats)
    np.testing.assert_array_equal(ours_sub[1], full[1][: sub.shape[0]])  # batching does not change the answer
    cpu = distances.NearestNeighbors(K, metric, backend="cpu", verbose=False).fit(X)
    cpu.kneighbors(X[:64])
    row["cpu_subset_s"], cpu_sub = wall(lambda: cpu.kneighbors(sub), 1)
    sk = SkNN(n_neighbors=K, metric=metric, algorithm="brute", n_jobs=-1).fit(X)
    row["sklearn_subset_s"], sk_sub = wall(lambda: sk.kneighbors(sub), 1)
    row["subset_queries"] = sub.shape[0]
    row["sklearn_all_s_estimated"] = row["sklearn_subset_s"] * m / sub.shape[0]
    row["speedup_gpu_vs_sklearn_subset"] = row["sklearn_subset_s"] / row["gpu_subset_s"]
    row["speedup_gpu_all_vs_sklearn_all_estimated"] = row["sklearn_all_s_estimated"] / row["gpu_all_s"]
    row["speedup_cpu_vs_sklearn_subset"] = row["sklearn_subset_s"] / row["cpu_subset_s"]
    row["gpu_vs_sklearn"] = agreement(metric, sub, X, ours_sub, sk_sub)
    row["cpu_vs_sklearn"] = agreement(metric, sub, X, cpu_sub, sk_sub)
    inputs = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / MIB
    outputs = m * K * (X.dtype.itemsize + 8) / MIB
    row["inputs_mib"], row["outputs_mib"] = inputs, outputs
    budgets = [None] + ([args.budget_mib] if name == "nytimes" else [])
    row["memory"] = []
    for budget in budgets:
        est = distances.NearestNeighbors(K, metric, backend="cuda", verbose=False, working_memory=budget).fit(X)
        t, _ = wall(lambda est=est: est.kneighbors(X), 1)
        peak = PeakMemory().peak_mib(lambda est=est: est.kneighbors(X))
        wm = budget or driver.DEFAULT_WORKING_MEMORY_MIB
        row["memory"].append(
            {
                "working_memory_mib": wm,
                "peak_gpu_mib": peak,
                "bound_mib": wm + inputs + outputs,
                "within": peak <= wm + inputs + outputs,
                "all_rows_s": t,
            }
        )
    print(json.dumps(row), flush=True)
    return row


def table(rows: list[dict]) -> list[str]:
    out = [
        (
            "| dataset | metric | ours GPU, all rows | ours GPU, subset | ours CPU, subset | scikit-learn, subset "
            "| GPU speed-up (subset) | GPU speed-up (all rows, est.) | peak GPU MiB (working_memory + in + out) "
            "| same as scikit-learn |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        mem = "; ".join(
            f"{e['peak_gpu_mib']:.0f} ≤ {e['working_memory_mib']:.0f} + {r['inputs_mib']:.0f} + {r['outputs_mib']:.0f}"
            + ("" if e["within"] else " **exceeded**")
            for e in r["memory"]
        )
        agree = r["gpu_vs_sklearn"]
        same = f"{agree['identical_indices']:.4f} identical; " + (
            "equal up to ties" if agree["equal_up_to_ties"] else "**differs**"
        )
        out.append(
            f"| {r['dataset']} {r['shape'][0]:,} × {r['shape'][1]:,} | {r['metric']} | {r['gpu_all_s'] * 1e3:,.0f} ms "
            f"| {r['gpu_subset_s'] * 1e3:,.1f} ms | {r['cpu_subset_s'] * 1e3:,.0f} ms "
            f"| {r['sklearn_subset_s'] * 1e3:,.0f} ms ({r['subset_queries']:,} queries) "
            f"| {r['speedup_gpu_vs_sklearn_subset']:,.0f}× | {r['speedup_gpu_all_vs_sklearn_all_estimated']:,.0f}× "
            f"| {mem} | {same} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--metrics", default="cosine,manhattan")
    parser.add_argument("--sk-queries", type=int, default=1024, help="queries timed for scikit-learn and subsets")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-mib", type=float, default=512, help="working_memory shown on nytimes-like")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    meta, rows = _meta(args), []
    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=0)
        for metric in args.metrics.split(","):
            rows.append(run(name, metric, X, args))
            if args.json:  # after every row: a run cut short keeps what it measured
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print("\n".join(table(rows)))


def _meta(args) -> dict:
    import cupy
    import sklearn

    return {
        "scikit_learn": sklearn.__version__,
        "host_cores": os.cpu_count(),
        "python": platform.python_version(),
        "scale": args.scale,
        "k": K,
        "command": "python benchmarks/knn_bench.py " + " ".join(sys.argv[1:]),
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
    }


if __name__ == "__main__":
    main()
