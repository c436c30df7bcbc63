"""A first look at the GPU engine's speed: the merge kernel on the paper-shaped datasets.

Not the issue-3 benchmark (that compares strategies and peers); this times the
always-applicable one-thread-per-pair merge kernel, end to end through
``distances.pairwise_distances`` (host input, host output), with CUDA events.

    python benchmarks/gpu_smoke.py --scale 1.0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # benchmarks/datasets.py; the library comes from its install

import numpy as np
from datasets import make_dataset

from semiring import distances


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--metrics", default="cosine,euclidean,cityblock,jensenshannon")
    parser.add_argument("--datasets", default="movielens,nytimes,scrna,edgar")
    args = parser.parse_args()
    import cupy

    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=0)
        Q = X[: args.queries]
        for metric in args.metrics.split(","):
            distances.pairwise_distances(Q[:4], X[:4], metric=metric, backend="cuda")  # compile
            cupy.cuda.Device().synchronize()
            times = []
            for _ in range(3):
                t = time.perf_counter()
                D = distances.pairwise_distances(Q, X, metric=metric, backend="cuda")
                cupy.cuda.Device().synchronize()
                times.append(time.perf_counter() - t)
            cpu_sample = distances.pairwise_distances(Q[:16], X, metric=metric, backend="cpu")
            ok = np.allclose(D[:16], cpu_sample, rtol=2e-4, atol=2e-5, equal_nan=True)
            print(
                f"{name:10s} {X.shape} nnz={X.nnz:>10,} {metric:14s} {min(times) * 1e3:9.1f} ms (host to host) "
                f"agrees with CPU engine on 16 rows: {ok}",
                flush=True,
            )


if __name__ == "__main__":
    main()
