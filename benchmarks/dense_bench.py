"""Dense rows on the CPU engine: the dense paths (kernels/cpu/dense.py) against scikit-learn and SciPy's cdist.

Two parts, one results file (JSON):

* ``crossover`` — where a dense path pays: random sparse rows of growing
  density, the CPU engine's public call forced through the sparse kernels
  (``SEMIRING_CPU_DENSE=never``) and through the dense ones (``always``), for
  a dot-product measure (cosine) and a union (cityblock); the thresholds of
  ``kernels/cpu/dense.py`` come from these figures;
* ``peers`` — dense float32 rows, ``pairwise_distances(X)`` (every row against
  every row, or ``--union-rows`` query rows against all for the union
  measures, whose peers are slow) against scikit-learn's
  ``pairwise_distances(X, n_jobs=threads)`` and ``pairwise_distances(X)``
  (one job, BLAS on every thread), and SciPy's ``cdist`` (one thread:
  it has no other), same thread count for ours and scikit-learn's (numba's and
  BLAS's, set by threadpoolctl), each answer checked against the float64 cdist
  on sampled rows.

    python -m benchmarks dense-cpu --threads 2 --json benchmarks/results/dense_2core_0b8af6f.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from functools import partial

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist
from threadpoolctl import threadpool_limits

from benchmarks.record import commit
from semiring import distances
from semiring.kernels.cpu import dense as dense_path


def best_of(fn, repeats: int) -> tuple[float, object]:
    """Smallest wall-clock seconds of ``repeats`` calls (after a warm-up call), and the last result."""
    result, times = fn(), []
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def forced(mode: str, fn):
    def call():
        os.environ[dense_path.DENSE_ENV] = mode
        try:
            return fn()
        finally:
            del os.environ[dense_path.DENSE_ENV]

    return call


def crossover(rows: int, cols: int, densities, repeats: int) -> list[dict]:
    out = []
    rng = np.random.default_rng(0)
    for density in densities:
        X = sp.random(rows, cols, density=density, format="csr", random_state=rng, dtype=np.float64)
        for metric in ("cosine", "cityblock"):
            row = {"rows": rows, "cols": cols, "density": density, "metric": metric}
            for mode in ("never", "always"):
                call = forced(mode, partial(distances.pairwise_distances, X, metric=metric, backend="cpu"))
                row[f"{mode}_s"], _ = best_of(call, repeats)
            row["dense_speedup"] = row["never_s"] / row["always_s"]
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def check(D: np.ndarray, X: np.ndarray, metric: str, queries: int) -> float:
    """Max |ours − cdist float64| over the first rows (a sample: the whole float64 cdist would be the peer)."""
    rows = min(queries, 64)
    want = cdist(X[:rows].astype(np.float64), X.astype(np.float64), metric)
    return float(np.abs(D[:rows].astype(np.float64) - want).max())


def peers(shapes, metrics, union_rows: int, threads: int, repeats: int, large_repeats: int) -> list[dict]:
    from sklearn.metrics import pairwise_distances as sk_pairwise

    out = []
    rng = np.random.default_rng(1)
    for m, n in shapes:
        X = rng.random((m, n), dtype=np.float32)
        reps = repeats if m * m <= 10_000_000 else large_repeats
        for metric in metrics:
            union = metric in ("cityblock", "chebyshev")
            Q = X[:union_rows] if union and m > union_rows else X
            row = {"shape": [m, n], "dtype": "float32", "metric": metric, "queries": Q.shape[0], "threads": threads}
            ours_s, D = best_of(partial(distances.pairwise_distances, Q, X, metric=metric, backend="cpu"), reps)
            row["ours_s"], row["ours_max_abs_err"] = ours_s, check(D, X, metric, Q.shape[0])
            del D
            sk_s, D = best_of(partial(sk_pairwise, Q, X, metric=metric, n_jobs=threads), reps)
            row["sklearn_s"], row["sklearn_max_abs_err"] = sk_s, check(D, X, metric, Q.shape[0])
            del D
            # n_jobs=None: one job, its BLAS on every thread (threadpoolctl's limit): faster than n_jobs=threads
            # for the BLAS measures (cosine, euclidean), whose jobs' BLAS threads then share the cores
            sk1_s, D = best_of(partial(sk_pairwise, Q, X, metric=metric), reps)
            row["sklearn_one_job_s"], row["sklearn_one_job_max_abs_err"] = sk1_s, check(D, X, metric, Q.shape[0])
            del D
            row["vs_sklearn_one_job"] = sk1_s / ours_s
            if union or m * m <= 10_000_000:
                cd_s, D = best_of(partial(cdist, Q, X, metric), reps)
                row["cdist_s"], row["cdist_max_abs_err"] = cd_s, check(D, X, metric, Q.shape[0])
                del D
                row["vs_cdist"] = row["cdist_s"] / ours_s
            row["vs_sklearn"] = sk_s / ours_s
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--large-repeats", type=int, default=1)
    parser.add_argument("--shapes", default="3000x300,20000x768")
    parser.add_argument("--metrics", default="euclidean,cosine,cityblock,chebyshev")
    parser.add_argument("--union-rows", type=int, default=2000, help="query rows of the union measures on big shapes")
    parser.add_argument("--densities", default="0.05,0.1,0.15,0.2,0.3,0.5,1.0")
    parser.add_argument("--crossover-shape", default="2000x300")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s]
    cm, cn = (int(v) for v in args.crossover_shape.split("x"))
    with threadpool_limits(limits=args.threads):  # numba's (ours) and BLAS's, for both sides
        result = {
            "commit": commit(),
            "command": "python -m benchmarks dense-cpu " + " ".join(sys.argv[1:]),
            "seed": "fixed: the crossover's rows drawn with seed 0, the peers' with seed 1",
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "threads": args.threads,
            "crossover": crossover(cm, cn, [float(d) for d in args.densities.split(",") if d], args.repeats),
            "peers": peers(
                shapes, args.metrics.split(","), args.union_rows, args.threads, args.repeats, args.large_repeats
            ),
        }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
