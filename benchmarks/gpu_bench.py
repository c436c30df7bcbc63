"""The GPU engine against its peers, in one run: time, peak GPU memory and correctness.

For each paper-shaped dataset (``datasets.make_dataset``, seeded), 2048 query
rows against every row, float32, for the intersection family (cosine,
euclidean, inner_product, jaccard) and the union family (manhattan,
chebyshev, canberra, jensenshannon, hamming):

* **ours** — ``distances`` on the GPU engine, strategy ``auto``;
* **naive union** (union family) — the same pipeline forced onto the
  one-thread-per-pair merge kernel (``SEMIRING_GPU_STRATEGY=merge``), the
  paper's baseline for union measures;
* **cuSPARSE** (intersection family) — ``cupyx.scipy.sparse``: ``Q @ X.T``,
  densify, expand with CuPy;
* **dense cuBLAS** (intersection family, where X fits dense) — GEMM of the
  densified rows, then the same expansion; timed on inputs already dense
  (the densify time is reported beside it);
* **scikit-learn** ``pairwise_distances(n_jobs=-1)`` on the host's cores, for
  the metrics it takes sparse (cosine, euclidean, manhattan), timed on
  ``--sk-queries`` rows and scaled to all queries (stated in the output).

GPU times are CUDA-event medians with inputs and result on the device; row
preparation (normalising, binarising — once per matrix) is done beforehand for
every GPU contender alike.  Peak GPU memory is measured with a counting
allocator (every CuPy allocation, cuSPARSE's and cuBLAS's work buffers
included) and reported beyond the inputs and the m×p float32 result.
Every result is checked: ours against SciPy ``cdist`` (float64, densified) on a
sample of entries, each peer against ours.

    python benchmarks/gpu_bench.py --scale 1.0 --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # benchmarks/datasets.py; the library comes from its install

import numpy as np
from datasets import DATASETS, describe, make_dataset
from measure import MIB, PeakMemory, timed
from peers import agrees, oracle_check, product_peers

from semiring.distances.measure import BoundMeasure, prepare
from semiring.distances.specs import get_metric
from semiring.kernels.cuda import ENGINE, planner

INTERSECTION = ("cosine", "euclidean", "inner_product", "jaccard")
UNION = ("manhattan", "chebyshev", "canberra", "jensenshannon", "hamming")
SKLEARN = {"cosine": "cosine", "euclidean": "euclidean", "manhattan": "manhattan"}


# --------------------------------------------------------------------------- contenders


def ours(bound, Qr, Xr):
    return bound.block(Qr, Xr)


# --------------------------------------------------------------------------- the run


def run_metric(name, metric, Q, X, args, rng) -> dict:
    import cupy
    import cupyx.scipy.sparse as csp
    from sklearn.metrics import pairwise_distances as sk_pairwise

    spec = get_metric(metric)
    bound = BoundMeasure(ENGINE, spec, {}, np.float32)  # the GPU accumulates float32 results in float32
    Qr, Xr = bound.prepare(Q), bound.prepare(X)
    out_mib = Q.shape[0] * X.shape[0] * 4 / MIB
    row = {"dataset": name, "metric": metric, "family": spec.family, "output_mib": round(out_mib, 1)}
    row["memory_limit_mib"] = round(max(0.1 * out_mib, 256.0), 1)

    ms, got = timed(lambda: ours(bound, Qr, Xr), args.repeats)
    row["ours_ms"], row["ours_strategy"] = round(ms, 2), planner.plan(spec.terms[0], Qr.matrix, Xr.matrix)
    row["ours_extra_mib"] = round(PeakMemory().extra_mib(lambda: ours(bound, Qr, Xr)), 1)
    row["ours_vs_scipy"] = oracle_check(spec, Q, X, got, rng)

    if spec.family == "union":
        os.environ[planner.STRATEGY_ENV] = "merge"
        try:
            ms, naive = timed(lambda: ours(bound, Qr, Xr), args.repeats)
        finally:
            os.environ.pop(planner.STRATEGY_ENV, None)
        row["naive_ms"], row["naive_agrees"] = round(ms, 2), agrees(naive, got)
        del naive
    else:
        Qh, Xh = prepare(Q, spec.prepare), prepare(X, spec.prepare)
        row.update(product_peers(metric, csp.csr_matrix(Qh), csp.csr_matrix(Xh), got, args.repeats))
    if metric in SKLEARN and args.sk_queries:
        k = min(args.sk_queries, Q.shape[0])
        start = time.perf_counter()
        theirs = sk_pairwise(Q[:k], X, metric=SKLEARN[metric], n_jobs=-1)
        seconds = time.perf_counter() - start
        row["sklearn_queries"] = k
        row["sklearn_ms_all_queries"] = round(1e3 * seconds * Q.shape[0] / k, 1)
        row["sklearn_agrees"] = bool(np.allclose(theirs, got[:k].get(), rtol=1e-3, atol=1e-3))
    del got
    cupy.get_default_memory_pool().free_all_blocks()
    return row


def summarise(rows: list[dict]) -> list[str]:
    """The issue's targets, each as met/missed with the figure."""
    lines = []
    for r in rows:
        d, m = r["dataset"], r["metric"]
        mem = f"memory {r['ours_extra_mib']} MiB (limit {r['memory_limit_mib']})"
        mem += " ok" if r["ours_extra_mib"] <= r["memory_limit_mib"] else " OVER"
        if r["family"] == "union":
            speed = r["naive_ms"] / r["ours_ms"]
            lines.append(f"{d} {m}: {speed:.1f}x naive union ({'met' if speed >= 4 else 'MISSED'} 4x); {mem}")
        else:
            peers = {}
            if "cusparse_ms" in r and r["cusparse_agrees"]:
                peers["cuSPARSE"] = r["cusparse_ms"]
            if "dense_ms" in r:
                peers["dense cuBLAS"] = r["dense_ms"]
            best = min(peers.items(), key=lambda kv: kv[1]) if peers else None
            text = f"{d} {m}: "
            if best:
                ratio = best[1] / r["ours_ms"]
                text += f"{ratio:.2f}x best correct peer ({best[0]}) ({'met' if ratio >= 1 else 'MISSED'} >= 1x)"
            else:
                text += "no correct peer"
            if "cusparse_error" in r:
                text += "; cuSPARSE failed"
            elif "cusparse_ms" in r:
                text += f"; {r['cusparse_ms'] / r['ours_ms']:.1f}x cuSPARSE"
                text += "" if r["cusparse_agrees"] else " (cuSPARSE WRONG)"
            lines.append(text + f"; {mem}")
        if "sklearn_ms_all_queries" in r:
            lines[-1] += f"; {r['sklearn_ms_all_queries'] / r['ours_ms']:.0f}x scikit-learn"
        lines[-1] += "; correct" if r["ours_vs_scipy"].get("ok", True) else "; OURS WRONG"
    return lines


def table(rows: list[dict]) -> list[str]:
    def cell(r, key, ok=None):
        if key not in r:
            return "—"
        text = f"{r[key]:,}"
        return text if ok is None or r.get(ok, True) else f"{text} **wrong**"

    out = [
        (
            "| dataset | metric | ours ms (strategy) | naive union ms | cuSPARSE ms | dense cuBLAS ms (densify) "
            "| scikit-learn ms | ours extra MiB | cuSPARSE extra MiB | ours vs SciPy |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        cus = "fails" if "cusparse_error" in r else cell(r, "cusparse_ms", "cusparse_agrees")
        dense = cell(r, "dense_ms", "dense_agrees")
        if "densify_ms" in r:
            dense += f" ({r['densify_ms']:,})"
        sk = cell(r, "sklearn_ms_all_queries", "sklearn_agrees")
        check = "ok" if r["ours_vs_scipy"].get("ok", True) else "**WRONG**"
        check += f" ({r['ours_vs_scipy'].get('max_rel_err', 0.0):.1e})"
        out.append(
            f"| {r['dataset']} | {r['metric']} | {r['ours_ms']:,} ({r['ours_strategy']}) | {cell(r, 'naive_ms', 'naive_agrees')} | {cus} "
            f"| {dense} | {sk} | {r['ours_extra_mib']:,} | {cell(r, 'cusparse_extra_mib')} | {check} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sk-queries", type=int, default=128, help="query rows timed for scikit-learn (0: skip)")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--metrics", default=",".join(INTERSECTION + UNION))
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    args = parser.parse_args()
    import cupy

    rows = []
    print(f"device: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, host cores: {os.cpu_count()}")
    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=0)
        Q = X[: args.queries]
        print(f"{name}: {describe(X)}", flush=True)
        rng = np.random.default_rng(0)
        for metric in args.metrics.split(","):
            rows.append(run_metric(name, metric, Q, X, args, rng))
            print(json.dumps(rows[-1]), flush=True)
    print("\n".join(["", *table(rows), "", *summarise(rows)]))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summarise(rows)}, indent=1))


if __name__ == "__main__":
    main()
