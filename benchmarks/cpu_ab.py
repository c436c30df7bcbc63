"""Two or more builds of an engine (and python-graphblas ``mxm``) timed call by call, interleaved.

On a shared machine the time a call takes moves with its neighbours' load by more than a kernel change moves
it (the 2-core development machine: ``mxm`` on the same input from 101 to 172 ms between runs a minute apart).
So each side runs in a process of its own, kept alive, with its data built once, and the sides are called in
turn, one call each, for ``--rounds`` rounds: load shifts fall on every side alike, and the figures are each
side's fastest and median call.  A side is ``NAME=PATH``, PATH a folder holding the package laid out as
installed (``semiring/`` with ``distances/`` and ``kernels/`` inside, as ``benchmarks/gpu_run.sh`` lays it
out; for a commit: ``git archive`` it and copy the three folders so), ``NAME=graphblas`` for ``mxm``, or
``NAME=sklearn`` for scikit-learn's ``pairwise_distances`` (``n_jobs=None``, BLAS at ``--threads``).
The measured call is ``semiring.pairwise(Q, X, plus_times, backend="cpu", sparse=True)`` (``--measure
sparse``) or ``distances.pairwise_distances(Q, X, metric=...)``, on ``benchmarks/synthetic.py``'s seeded
data, the first ``--queries`` rows against all (``--self``: every row against every row, ``pairwise_distances(X)``;
``--datasets tfidf``: the small call's 200 TF-IDF rows, ``dense``: 3,000 x 300 float32 rows); ``--knn K``:
``NearestNeighbors(K, metric=...).fit(X)`` and its ``kneighbors`` of those rows.  Every side's result is checked
against the first side's.  ``--backend cuda`` times the GPU engine on CuPy inputs, as its users pass them, each
call to the device's end.

    python -m benchmarks cpu-ab --side before=/tmp/before --side after=/tmp/after --side mxm=graphblas \\
        --scale 0.25 --queries 512 --threads 2 --rounds 15 --seed 0 --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
try:
    from .record import commit, machine
    from .synthetic import DATASETS
except ImportError:  # run as a script: a side's worker, which compare() starts so
    sys.path.insert(0, str(HERE.parent))
    from benchmarks.record import commit, machine
    from benchmarks.synthetic import DATASETS


# The graph measures a side may time, on a --datasets rmatN graph.
GRAPH_MEASURES = {
    "truss_decomposition": lambda graph, A, backend: graph.truss_decomposition(A, backend=backend),
    "ktruss5": lambda graph, A, backend: graph.ktruss(A, 5, backend=backend),
    "jaccard": lambda graph, A, backend: graph.jaccard(A, backend=backend),
}


def _host(a):
    """A result on the host (CuPy's copied back). Not ``semiring.arrays.on_host``: a side may be a build older
    than it."""
    return a.get() if hasattr(a, "get") else a


def worker(args) -> None:
    """One side: build the data, then time one call per line read from stdin, answering its ms on stdout."""
    os.environ["NUMBA_NUM_THREADS"] = str(max(args.threads, os.cpu_count() or 1))
    sys.path.insert(0, str(HERE.parent))
    if args.tree not in ("graphblas", "sklearn"):  # the tree's package before anything imports one
        sys.path.insert(0, args.tree)
    from benchmarks.synthetic import make_dataset

    if args.dataset == "tfidf":  # the small call's rows (benchmarks/small_call.py): TF-IDF of docstrings
        from benchmarks.small_call import tfidf

        X = tfidf(200, 3000)
    elif args.dataset.startswith("rmat"):  # an R-MAT graph of that scale (Graph500's, seeded) for a graph measure
        from benchmarks.synthetic import rmat_csr

        X = rmat_csr(int(args.dataset[4:]), seed=args.seed)
    elif args.dataset == "dense":  # dense float32 rows uniform in [0, 1), as benchmarks/dense_bench.py draws them
        X = np.random.default_rng(args.seed).random((3000, 300), dtype=np.float32)
    else:
        X = make_dataset(args.dataset, args.scale, args.seed)
    Q = X if args.self else X[: min(args.queries, X.shape[0])]
    sync, backend = (lambda: None), "cpu"
    if args.backend == "cuda" and args.tree not in ("graphblas", "sklearn"):
        import cupy
        import cupyx.scipy.sparse as csp

        on_device = cupy.asarray if isinstance(X, np.ndarray) else csp.csr_matrix
        X, Q = on_device(X), on_device(Q)
        sync, backend = cupy.cuda.Device().synchronize, "cuda"
    if args.tree == "graphblas":
        import graphblas as gb

        gb.ss.config["nthreads"] = args.threads
        A, B = gb.io.from_scipy_sparse(Q), gb.io.from_scipy_sparse(X)
        if args.measure != "sparse":
            raise SystemExit("graphblas is a side of --measure sparse only")

        def call():
            return A.mxm(B.T, gb.semiring.plus_times).new()

        def summary(C):
            _, cols, vals = C.to_coo()
            return [int(C.nvals), float(np.sum(vals, dtype=np.float64)), int(np.sum(cols, dtype=np.int64))]

    elif args.tree == "sklearn":  # scikit-learn's pairwise_distances, n_jobs=None (one thread; BLAS's own)
        from sklearn.metrics import pairwise_distances
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=args.threads)
        if args.measure == "sparse":
            raise SystemExit("sklearn is a side of a distance's --measure only")

        def call():
            return (
                pairwise_distances(X, metric=args.measure)
                if args.self
                else pairwise_distances(Q, X, metric=args.measure)
            )

        def summary(D):
            return [int(D.size), float(np.nansum(D, dtype=np.float64)), 0]

    else:
        import numba

        import semiring
        from semiring import distances

        numba.set_num_threads(args.threads)
        if args.measure == "sparse":

            def call():
                return semiring.pairwise(Q, X, semiring.plus_times, backend=backend, sparse=True)

            def summary(C):
                C = _host(C)
                return [int(C.nnz), float(np.sum(C.data, dtype=np.float64)), int(np.sum(C.indices, dtype=np.int64))]

        elif args.measure in GRAPH_MEASURES:
            from semiring.distances import graph  # the old name: a side may be a build from before semiring.graph

            def call():
                return GRAPH_MEASURES[args.measure](graph, X, backend)

            def summary(C):
                C = _host(C)
                return [int(C.nnz), float(np.sum(C.data, dtype=np.float64)), int(np.sum(C.indices, dtype=np.int64))]

        elif args.knn:

            def call():
                nn = distances.NearestNeighbors(n_neighbors=args.knn, metric=args.measure, backend=backend)
                return nn.fit(X).kneighbors(None if args.self else Q)

            def summary(found):  # the distances (tied neighbours may come in either order)
                dist = _host(found[0])
                return [int(dist.size), float(np.nansum(dist, dtype=np.float64)), 0]

        else:

            def call():
                if args.self:  # every row against every row, one object (the call's own rows)
                    return distances.pairwise_distances(X, metric=args.measure, backend=backend)
                return distances.pairwise_distances(Q, X, metric=args.measure, backend=backend)

            def summary(D):
                D = _host(D)
                return [int(D.size), float(np.nansum(D, dtype=np.float64)), 0]

    last = [call()]  # warm-up: compiles or loads the kernels
    print(json.dumps({"ready": True, "summary": summary(last[0])}), flush=True)
    for _line in sys.stdin:
        last.clear()  # the previous result freed before the next is made
        sync()
        t = time.perf_counter()
        last.append(call())
        sync()
        print(json.dumps({"ms": (time.perf_counter() - t) * 1e3}), flush=True)


def compare(dataset: str, sides: list[tuple[str, str]], args) -> dict:
    procs = {}
    for name, tree in sides:
        cmd = [sys.executable, __file__, "--worker", "--tree", tree, "--dataset", dataset]
        cmd += ["--scale", str(args.scale), "--queries", str(args.queries), "--seed", str(args.seed)]
        cmd += ["--threads", str(args.threads), "--measure", args.measure] + (["--self"] if args.self else [])
        cmd += ["--backend", args.backend] + (["--knn", str(args.knn)] if args.knn else [])
        # The worker's cwd is not the checkout, so that a tree's semiring is the one imported.
        procs[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    summaries = {name: json.loads(p.stdout.readline())["summary"] for name, p in procs.items()}
    times = {name: [] for name in procs}
    for r in range(args.rounds):
        order = list(procs) if r % 2 == 0 else list(reversed(procs))  # neither side always first
        for name in order:
            time.sleep(0.05)  # the previous side's threads done spinning (OpenMP waits busily after a region)
            procs[name].stdin.write("run\n")
            procs[name].stdin.flush()
            times[name].append(json.loads(procs[name].stdout.readline())["ms"])
    for p in procs.values():
        p.stdin.close()
        p.wait()
    first = sides[0][0]
    out = {"dataset": dataset, "sides": {}}
    for name, ms in times.items():
        s, ref = summaries[name], summaries[first]
        same = s[0] == ref[0] and np.isclose(s[1], ref[1], rtol=1e-6) and (s[2] == ref[2] or args.measure != "sparse")
        out["sides"][name] = {
            "best_ms": min(ms),
            "median_ms": float(np.median(ms)),
            "all_ms": ms,
            "summary": s,
            "check": "CORRECT" if same else "MISMATCH",
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--side", action="append", default=[], help="NAME=PATH (a laid-out package), NAME=graphblas or NAME=sklearn"
    )
    p.add_argument(
        "--datasets",
        nargs="+",
        choices=(*DATASETS, "tfidf", "dense", *(f"rmat{s}" for s in range(8, 27))),
        default=list(DATASETS),
        help="synthetic datasets (--scale), or tfidf (200 x 3,000 TF-IDF rows of docstrings: the small call) or "
        "dense (3,000 x 300 float32 rows, --seed), or rmatN (an R-MAT graph of scale N, --seed) for a graph "
        "--measure (truss_decomposition, ktruss5, jaccard)",
    )
    p.add_argument("--self", action="store_true", help="every row against every row: pairwise_distances(X)")
    p.add_argument("--measure", default="sparse", help="sparse (plus_times, sparse=True) or a distance's name")
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu", help="the engine timed (cuda: CuPy inputs)")
    p.add_argument("--knn", type=int, default=0, help="K: time NearestNeighbors' fit and kneighbors instead")
    p.add_argument("--scale", type=float, default=0.25)
    p.add_argument("--queries", type=int, default=512)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--seed", type=int)
    p.add_argument("--json", type=Path)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--tree", help=argparse.SUPPRESS)
    p.add_argument("--dataset", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    if args.seed is None or len(args.side) < 2:
        p.error("--seed and at least two --side are required")
    sides = [tuple(s.split("=", 1)) for s in args.side]
    results = []
    for dataset in args.datasets:
        found = compare(dataset, sides, args)
        results.append(found)
        line = ", ".join(
            f"{name} {v['best_ms']:.1f} (median {v['median_ms']:.1f}) ms {v['check']}"
            for name, v in found["sides"].items()
        )
        print(f"{dataset}: {line}", flush=True)
    if args.json:
        meta = {
            "command": " ".join(["python", *sys.argv]),
            "script_commit": commit(),
            "sides": dict(sides),
            "cores": os.cpu_count(),
            "backend": args.backend,
            "machine": machine(),
            "seed": args.seed,
        }
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
