"""Suite ``dask``: one GPU against two on Dask: all-pairs k-NN on a movielens-like input, triangles and Jaccard
on R-MAT graphs.

For each number of GPUs (``--gpus 1,2``) a cluster of one worker per GPU is
started (``LocalCUDACluster(CUDA_VISIBLE_DEVICES=...)``, or with ``--cluster
nanny`` plain ``distributed`` nannies each given its own
``CUDA_VISIBLE_DEVICES``, which needs no dask-cuda), the input is persisted
on the workers (the data are on the cluster before the clock starts), and
these are timed, wall clock, the median of ``--repeats`` after a warm-up:

* k-NN: ``NearestNeighbors(k, metric, backend="cuda").fit(dX)`` (the index
  sharded by row blocks, ``--blocks-per-gpu`` per GPU) and ``kneighbors()``
  (all pairs, each point excluding itself), on ``make_dataset("movielens",
  scale=--knn-scale)``: 4 × the benchmark's 40,000 rows by default;
* graphs: ``triangle_count`` and ``jaccard`` of a Dask adjacency matrix of
  an R-MAT graph (``synthetic.rmat``, scales ``--rmat``), the row blocks on
  the workers.  The first call assembles the graph, checks it and holds it on
  each worker (``graph.hold``; ``first_call_s``, untimed warm-up otherwise; ``jaccard``'s
  first call finds the graph held by ``triangle_count``'s); the timed calls
  reuse it, as a session computing several measures of one graph does, and
  include bringing the result back; ``jaccard kept on the workers``
  (``compute=False``) is timed until every block of its Dask array is
  computed on its worker, and brought back only for the check.  The block
  tasks' own compute time (Dask's task stream) is reported beside it.

The single-GPU call without Dask is timed too, and every Dask result is
compared with it (equal indices, distances within 1e-5; equal triangle
counts; equal Jaccard pattern, values within 1e-12); the single-GPU results are themselves checked against
independent oracles (kNN on 64 sampled rows against scikit-learn in float64, up to ties; Jaccard at 2,000
sampled edges against set arithmetic; ``oracle_checks`` in the file).  Per-worker GPU memory
held by CuPy's pool after each run (about its peak) is recorded.

    python -m benchmarks dask --gpus 1,2 --seed 0 --json $OUT/dask_scaling.json

Results JSON: the commit (``$COMMIT`` or ``git rev-parse HEAD``), the command,
the devices, and one record per (input, GPUs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .record import RESULTS, check_rows, commit, engine_digest, engine_digests, machine, versions
from .reference import edge_check, knn_check, sample_edges
from .reference import knn_reference as knn_ref
from .synthetic import make_dataset, rmat


def start_cluster(gpus: int, kind: str):
    """One worker per GPU, one thread each; worker i sees GPU i first (as LocalCUDACluster arranges).

    ``kind="local"``: CPU worker processes instead, for a smoke run of this script without a GPU.
    """
    devices = list(range(gpus))
    if kind == "local":
        from distributed import LocalCluster

        return LocalCluster(n_workers=gpus, threads_per_worker=1, processes=True, dashboard_address=None)
    if kind == "dask-cuda":
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(map(str, devices)), dashboard_address=None)
    from distributed import Nanny, Scheduler, SpecCluster

    def visible(i: int) -> str:
        return ",".join(map(str, devices[i:] + devices[:i]))

    # Each worker may hold its share of the host's memory: distributed's default gives a one-thread worker
    # 1/cores of it (7.9 GiB of 256 on a 32-core host), and a worker given R-MAT 24's row blocks (5.9 GiB)
    # paused at 82 % and never resumed.
    import psutil

    share = psutil.virtual_memory().total // gpus
    workers = {
        i: {
            "cls": Nanny,
            "options": {"nthreads": 1, "memory_limit": share, "env": {"CUDA_VISIBLE_DEVICES": visible(i)}},
        }
        for i in devices
    }
    return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {"dashboard_address": None}})


def devices() -> list[str]:
    import cupy

    count = cupy.cuda.runtime.getDeviceCount()
    return [cupy.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(count)]


def _array_module(backend: str):
    """CuPy draws the R-MAT edges on the GPU (seconds at scale 23); NumPy for a CPU smoke run."""
    if backend == "cpu":
        return np
    import cupy

    return cupy


def _pool_reset() -> int | None:
    try:
        import cupy
    except ImportError:  # a CPU smoke run
        return None
    cupy.get_default_memory_pool().free_all_blocks()
    return cupy.get_default_memory_pool().total_bytes()


def _pool_bytes() -> int | None:
    try:
        import cupy
    except ImportError:
        return None
    return cupy.get_default_memory_pool().total_bytes()


def best(fn, repeats: int):
    """(median seconds, every time, the last result) after one untimed warm-up call."""
    result = fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def row_blocks(A, gpus: int, per_gpu: int):
    import dask.array as da
    from distributed import wait

    rows = math.ceil(A.shape[0] / (gpus * per_gpu))
    dA = da.from_array(A, chunks=(rows, -1), asarray=False).persist()
    wait(dA)
    return dA


def block_compute_seconds(stream, prefix: str, calls: int) -> dict:
    """Compute seconds per call of the tasks whose key starts with ``prefix``: in all, and on the busiest worker."""
    per_worker: dict[str, float] = {}
    for task in stream:
        key = task["key"][0] if isinstance(task["key"], tuple) else task["key"]
        if not str(key).startswith(prefix):
            continue
        for span in task["startstops"]:
            if span["action"] == "compute":
                per_worker[task["worker"]] = per_worker.get(task["worker"], 0.0) + span["stop"] - span["start"]
    return {
        "total_s": sum(per_worker.values()) / calls,
        "busiest_worker_s": max(per_worker.values(), default=0.0) / calls,
    }


def knn_case(client, X, gpus: int, args, reference) -> dict:
    import dask
    from distributed import get_task_stream

    from semiring.distances import NearestNeighbors

    dX = row_blocks(X, gpus, args.blocks_per_gpu)
    client.run(_pool_reset)

    def run():
        nn = NearestNeighbors(args.k, args.metric, backend=args.backend, verbose=False).fit(dX)
        start = time.perf_counter()
        dist, ind = dask.compute(*nn.kneighbors())
        return time.perf_counter() - start, dist, ind

    with get_task_stream(client) as stream:
        seconds, times, (query_s, dist, ind) = best(run, args.repeats)
    ref_d, ref_i = reference
    return {
        "case": f"movielens x{args.knn_scale:g} all-pairs {args.k}-NN {args.metric}",
        "gpus": gpus,
        "seconds": seconds,  # fit (shards prepared on their GPUs) + kneighbors, as the single-GPU record
        "times": times,
        "kneighbors_s_last": query_s,
        "shards": len(dX.chunks[0]),
        "shard_tasks": block_compute_seconds(stream.data, "_shard_kneighbors", args.repeats + 1),
        "equal_indices_fraction": float((ind == ref_i).mean()),
        # NaN (cosine of an empty row) on both sides is agreement, not a difference
        "max_abs_distance_difference": float(np.nanmax(np.abs(dist - ref_d), initial=0.0)),
        "nan_distances_agree": bool((np.isnan(dist) == np.isnan(ref_d)).all()),
        "matches_single_gpu": bool(np.allclose(dist, ref_d, atol=1e-5, equal_nan=True)),
        "pool_bytes_per_worker": client.run(_pool_bytes),
    }


def kept(result):
    """A Dask result whose blocks stay on the workers, once every block is computed there."""
    from distributed import futures_of, wait

    wait(futures_of(result))
    return result


GRAPH_CASES = ("triangle_count", "jaccard", "jaccard_kept")


def graph_case(client, A, scale: int, gpus: int, args, reference) -> list[dict]:
    from distributed import get_task_stream

    from semiring import graph

    dA = row_blocks(A, gpus, args.blocks_per_gpu)
    held = []

    def graph_of():
        """The graph held (``graph.hold``) by the first measure's first call, for every call after."""
        if not held:
            held.append(graph.hold(dA))
        return held[0]

    records = []
    cases = (  # (--graph-cases' name, the measure, the call, its block tasks' name in the task stream)
        (
            "triangle_count",
            "triangle_count",
            lambda: graph.triangle_count(graph_of(), backend=args.backend),
            "_block_triangles",
        ),
        ("jaccard", "jaccard", lambda: graph.jaccard(graph_of(), backend=args.backend), "_block_similarity"),
        # the result left on the workers (a Dask array of CSR row blocks): timed until every block is there
        (
            "jaccard_kept",
            "jaccard",
            lambda: kept(graph.jaccard(graph_of(), backend=args.backend, compute=False)),
            "_kept_sparse",
        ),
    )
    for _, name, fn, block_prefix in (c for c in cases if c[0] in args.graph_cases.split(",")):
        client.run(_pool_reset)
        start = time.perf_counter()
        fn()  # warm-up: kernels loaded on every worker; the graph assembled, checked and held (the first measure)
        first = time.perf_counter() - start
        with get_task_stream(client) as stream:
            seconds, times, result = best(fn, args.repeats)
        want = reference[name]
        label = name if block_prefix != "_kept_sparse" else f"{name} kept on the workers"
        if block_prefix == "_kept_sparse":
            result = result.compute()  # brought back for the check only, after the timing
        if name == "triangle_count":
            same = result == want
        else:
            same = bool(
                np.array_equal(result.indices, want.indices) and np.allclose(result.data, want.data, rtol=1e-12)
            )
        records.append(
            {
                "case": f"R-MAT {scale} {label}",
                "gpus": gpus,
                "seconds": seconds,
                "times": times,
                "first_call_s": first,
                "block_tasks": block_compute_seconds(stream.data, block_prefix, args.repeats + 1),  # best's warm-up too
                "matches_single_gpu": bool(same),
                "pool_bytes_per_worker": client.run(_pool_bytes),
            }
        )
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="1,2", help="cluster sizes to compare, GPUs 0..n-1")
    parser.add_argument("--cluster", choices=["dask-cuda", "nanny", "local"], default="dask-cuda")
    parser.add_argument("--backend", choices=["cuda", "cpu"], default="cuda", help="cpu: a smoke run without a GPU")
    parser.add_argument("--knn-scale", type=float, default=4.0, help="movielens-like rows × 40,000")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--metric", default="cosine")
    parser.add_argument("--rmat", default="22,23", help="R-MAT scales ('' for none)")
    parser.add_argument(
        "--graph-cases",
        default=",".join(GRAPH_CASES),
        help="of " + ", ".join(GRAPH_CASES) + " (jaccard: the result brought back to the client; jaccard_kept: left "
        "on the workers); the first one's first call holds the graph",
    )
    parser.add_argument("--blocks-per-gpu", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=RESULTS / "dask_scaling.json")
    args = parser.parse_args()
    if set(args.graph_cases.split(",")) - set(GRAPH_CASES):
        parser.error(f"--graph-cases: each of {', '.join(GRAPH_CASES)}")

    from distributed import Client

    from semiring import graph
    from semiring.distances import NearestNeighbors

    report = {
        "commit": commit(),
        "command": "python -m benchmarks dask " + " ".join(sys.argv[1:]),
        "engine_digest": engine_digest(),
        "engine_digests": engine_digests(),
        "seed": args.seed,
        "machine": machine(),
        "versions": versions(),
        "devices": devices() if args.backend == "cuda" else [],
        "host_cores": os.cpu_count(),
        "cluster": args.cluster,
        "backend": args.backend,
        "results": [],
    }

    def save():  # after every record: a run cut short keeps what it measured
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))

    gpu_counts = [int(g) for g in args.gpus.split(",")]
    X = make_dataset("movielens", args.knn_scale, seed=args.seed)
    one = NearestNeighbors(args.k, args.metric, backend=args.backend, verbose=False)
    seconds, times, knn_reference = best(lambda: one.fit(X).kneighbors(), args.repeats)
    # the single-machine results the Dask ones are compared with, checked themselves against independent oracles
    rng = np.random.default_rng(args.seed)
    qi = np.sort(rng.choice(X.shape[0], min(64, X.shape[0]), replace=False))
    want = knn_ref(args.metric, X[qi], X, args.k, self_index=qi)
    oracle = [knn_check(args.metric, X[qi], X, knn_reference[1][qi], "ours, one GPU, kNN", want)]
    report["oracle_checks"] = oracle
    report["results"].append(
        {
            "case": f"movielens x{args.knn_scale:g} all-pairs {args.k}-NN {args.metric}",
            "gpus": 1,
            "dask": False,
            "seconds": seconds,
            "times": times,
            "rows": X.shape[0],
            "nnz": X.nnz,
        }
    )
    graphs = {}
    for scale in [int(s) for s in args.rmat.split(",") if s]:
        indptr, indices, n = rmat(scale, seed=args.seed, xp=_array_module(args.backend))
        indptr, indices = (a.get() if hasattr(a, "get") else a for a in (indptr, indices))
        A = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
        reference = {}
        for name, fn in (("triangle_count", graph.triangle_count), ("jaccard", graph.jaccard)):
            seconds, times, reference[name] = best(lambda fn=fn, A=A: fn(A, backend=args.backend), args.repeats)
            report["results"].append(
                {
                    "case": f"R-MAT {scale} {name}",
                    "gpus": 1,
                    "dask": False,
                    "seconds": seconds,
                    "times": times,
                    "vertices": n,
                    "stored_entries": A.nnz,
                }
            )
        graphs[scale] = (A, reference)
        u, v = sample_edges(A, rng, 2000)
        oracle.append(edge_check(A, reference["jaccard"], u, v, "jaccard", f"ours, one GPU, R-MAT {scale} jaccard"))
        _pool_reset()
    report["checks"] = check_rows([{"case": "one GPU against the oracles", "checks": oracle}])
    save()
    for gpus in gpu_counts:
        with start_cluster(gpus, args.cluster) as cluster, Client(cluster) as client:
            report["results"].append({**knn_case(client, X, gpus, args, knn_reference), "dask": True})
            save()
            for scale, (A, reference) in graphs.items():
                report["results"] += [{**r, "dask": True} for r in graph_case(client, A, scale, gpus, args, reference)]
                save()
    for r in report["results"]:
        print(
            f"{r['case']:<45} gpus={r['gpus']} dask={r['dask']!s:<5} {r['seconds']:8.3f} s"
            + ("" if "matches_single_gpu" not in r else f"  equal={r['matches_single_gpu']}")
        )


if __name__ == "__main__":
    main()
