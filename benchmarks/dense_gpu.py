"""Dense rows on the GPU: ``pairwise_distances`` of dense CuPy arrays against CuPy's own ``X @ Y.T`` formulation.

Issue 27's GPU target: dense euclidean and cosine (3,000 × 300 and 20,000 × 768 float32, every row against
every row) at least as fast as the formulation a CuPy user writes by hand, which is cuBLAS's product and two
elementwise passes (euclidean: ``√max(‖x‖² + ‖y‖² − 2 x·y, 0)``; cosine: ``1 − x̂·ŷ`` of rows scaled to unit
length). Ours is the public call, CuPy in and out, with its exact recomputation of cancelling entries. The
union measures (cityblock, chebyshev) have no such formulation: ours alone, ``--union-rows`` query rows against
all. Every answer, ours and the peer's, is checked against SciPy's float64 ``cdist`` on 64 sampled rows;
times are CUDA-event medians after ``--warmups`` untimed calls, ours and the peer's taken in turns.

    python -m benchmarks dense-gpu --seed 0 --json benchmarks/results/dense_gpu_h200_<commit>.json
"""

from __future__ import annotations

import json
import sys
from functools import partial

import numpy as np

from . import record
from .timing import on_device, on_device_rounds

CHECK_ROWS = 64


def add_arguments(p) -> None:
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--shapes", default="3000x300,20000x768")
    p.add_argument("--metrics", default="euclidean,cosine,cityblock,chebyshev")
    p.add_argument("--union-rows", type=int, default=2000, help="query rows of the union measures")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmups", type=int, default=1, help="untimed calls of each before its timed ones")
    p.add_argument("--rtol", type=float, default=1e-4, help="float32 answers against the float64 reference")
    p.add_argument("--json", required=True)


def cupy_formulation(metric: str):
    """The hand-written CuPy formulation of ``metric`` (None where there is none)."""
    import cupy

    def euclidean(Q, X):
        D = -2.0 * (Q @ X.T)
        D += (Q * Q).sum(axis=1)[:, None]
        D += (X * X).sum(axis=1)[None, :]
        return cupy.sqrt(cupy.maximum(D, 0, out=D), out=D)

    def cosine(Q, X):
        Qn = Q / cupy.linalg.norm(Q, axis=1, keepdims=True)
        Xn = Qn if X is Q else X / cupy.linalg.norm(X, axis=1, keepdims=True)
        return 1.0 - Qn @ Xn.T

    return {"euclidean": euclidean, "cosine": cosine}.get(metric)


def check(D, Q: np.ndarray, X: np.ndarray, metric: str, rows: np.ndarray, rtol: float) -> dict:
    """``D`` (a CuPy array) against SciPy's float64 cdist at the sampled rows: the largest error relative to
    the row's largest distance, and whether it is within ``rtol``."""
    from scipy.spatial.distance import cdist

    want = cdist(Q[rows].astype(np.float64), X.astype(np.float64), metric)
    got = D[rows].get().astype(np.float64)
    scale = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1e-30)
    err = float(np.nanmax(np.abs(got - want) / scale)) if want.size else 0.0
    same_nan = bool((np.isnan(got) == np.isnan(want)).all())
    return {"rows": int(rows.size), "max_rel_error": err, "ok": bool(err <= rtol and same_nan)}


def main(args) -> int:
    import cupy

    from semiring import distances

    meta = {
        "benchmark": "dense-gpu",
        "commit": record.commit(),
        "engine_digest": record.engine_digest(),
        "engine_digests": record.engine_digests(),
        "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
        "machine": record.machine(),
        "versions": record.versions(),
        "seed": args.seed,
        "results": [],
    }
    rng = np.random.default_rng(args.seed)
    ok = True
    for shape in args.shapes.split(","):
        m, n = (int(v) for v in shape.split("x"))
        X = rng.random((m, n), dtype=np.float32)
        Xc = cupy.asarray(X)
        for metric in args.metrics.split(","):
            peer = cupy_formulation(metric)
            Q = X if peer is not None else X[: args.union_rows]
            Qc = Xc if peer is not None else Xc[: args.union_rows]
            rows = np.sort(rng.choice(Q.shape[0], size=min(CHECK_ROWS, Q.shape[0]), replace=False))
            row = {"shape": [m, n], "dtype": "float32", "metric": metric, "queries": int(Q.shape[0])}
            X_arg = None if Qc is Xc else Xc
            ours = partial(distances.pairwise_distances, Qc, X_arg, metric=metric)
            if peer is None:
                t, D = on_device(ours, args.repeats, args.warmups)
                row["ours"] = {**t.as_dict(), "check": check(D, Q, X, metric, rows, args.rtol)}
                del D
            else:  # in turns: the clocks' drift over the run shared alike (timing.on_device_rounds)
                theirs = partial(peer, Qc, Qc if Qc is Xc else Xc)
                timed = on_device_rounds([ours, theirs], args.repeats, args.warmups)
                for key, (t, D) in zip(("ours", "cupy"), timed):
                    row[key] = {**t.as_dict(), "check": check(D, Q, X, metric, rows, args.rtol)}
                del timed, D
                if row["cupy"]["check"]["ok"]:
                    row["vs_cupy"] = round(row["cupy"]["median_ms"] / row["ours"]["median_ms"], 3)
            ok &= row["ours"]["check"]["ok"]
            print(json.dumps(row), flush=True)
            meta["results"].append(row)
            cupy.get_default_memory_pool().free_all_blocks()
    with open(args.json, "w") as f:
        json.dump(meta, f, indent=1)
    return 0 if ok else 1
