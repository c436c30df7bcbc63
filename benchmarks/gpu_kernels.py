"""GPU kernel timings (device arrays in, device result out), CUDA events, median of repeats.

A first step towards the full GPU benchmark: for each paper-shaped dataset,
2048 query rows against all rows, it times our pairwise kernel for
``plus_times`` (the product under cosine/euclidean/inner_product/jaccard) and
``plus_absdiff`` (manhattan) under each strategy, and cuSPARSE's SpGEMM
(``cupyx.scipy.sparse``: ``Q @ X.T`` then densify) for ``plus_times``, checking
every result against ours.

    python benchmarks/gpu_kernels.py --scale 1.0
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import numpy as np
from datasets import make_dataset

import semiring
from kernels import cuda


def timed(fn, repeats: int) -> tuple[float, object]:
    import cupy

    result = fn()  # warm-up: compiles, fills caches
    times = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        result = fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return float(np.median(times)), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--datasets", default="movielens,nytimes,scrna,edgar")
    args = parser.parse_args()
    import cupy
    import cupyx.scipy.sparse as csp

    print("| dataset | product | strategy | ms | check |")
    print("|---|---|---|---:|---|")
    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=0)
        Q = X[: args.queries]
        Xd, Qd = cuda.to_device(X), cuda.to_device(Q)
        for sr in (semiring.plus_times, semiring.plus_absdiff):
            results = {}
            for strategy in ("auto", "merge"):
                os.environ[cuda.STRATEGY_ENV] = strategy
                degree = Q.nnz / Q.shape[0] + X.nnz / X.shape[0]
                label = cuda.choose_strategy(X.shape[1], "float32", sr, degree) if strategy == "auto" else "merge"
                if strategy == "auto" and label == "merge":
                    continue
                ms, out = timed(lambda q=Qd, x=Xd, s=sr: cuda.pairwise(q, x, s, np.float32), args.repeats)
                results[label] = out
                ref = next(iter(results.values()))  # the first strategy timed is the reference
                ok = bool(cupy.allclose(out, ref, rtol=1e-4, atol=1e-4))
                print(f"| {name} | {sr.name} | {label} | {ms:.1f} | {'ok' if ok else 'MISMATCH'} |", flush=True)
            os.environ.pop(cuda.STRATEGY_ENV, None)
            if sr is semiring.plus_times:
                Qs, Xs = csp.csr_matrix(Q), csp.csr_matrix(X)
                try:
                    ms, dense = timed(lambda q=Qs, x=Xs: (q @ x.T).toarray(), args.repeats)
                    ours = next(iter(results.values()))
                    ok = bool(cupy.allclose(dense, ours, rtol=1e-4, atol=1e-4))
                    print(
                        f"| {name} | plus_times | cuSPARSE SpGEMM + densify | {ms:.1f} | {'ok' if ok else 'WRONG'} |",
                        flush=True,
                    )
                except Exception as exc:  # noqa: BLE001 - report the peer's failure, keep going
                    print(f"| {name} | plus_times | cuSPARSE SpGEMM + densify | failed | {type(exc).__name__} |")
                cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
