"""All-pairs k-nearest neighbours at the paper's dataset sizes, ours against cuVS in the same run (GPU).

The seed paper (section 4) queries *the whole dataset against itself*; NYTimes has 300,000 documents.  For
each dataset and size, rows drawn like ``synthetic.make_dataset``'s (the seed on the command line), this
times ``NearestNeighbors(n_neighbors=k, metric=...).fit(X).kneighbors()`` as a user calls it, on CuPy input,
and records:

* the wall time of the call (the GPU synchronised at its end), after a warm-up call on a slice of the rows
  (so NVRTC compiles are not timed; the slice is planned as the whole is);
* the time per pair of rows (``time / rows²``), the figure that must hold as the rows grow;
* the peak device memory the call's allocations took beyond its inputs (a counting allocator over CuPy's
  pool: what the pool hands out, not what it caches);
* the check of our result against a float64 reference on sampled rows (cosine: cuSPARSE's product of the
  sampled rows, densified, with the whole matrix, in float64; cityblock: each sampled row against every
  stored entry, in float64): each returned neighbour's distance, and the k-th distance, against the
  reference's;
* with ``--distances-max-rows``, ``pairwise_distances`` of the same rows (every pair's distance, left on the
  GPU), so the share the top-k selection adds to the distances' own time is measured;
* cuVS's sparse brute-force kNN on the same rows (``benchmarks/cuvs/harness.cu``; ``--cuvs HARNESS``) up to
  ``--cuvs-max-rows``, with its k-th distances checked against the same reference.

    python -m benchmarks scale --seed 0 --datasets nytimes,movielens --rows 40000,300000 --json OUT.json
    python -m benchmarks scale --report RESULTS.json ...     # the Markdown table of docs/scale.md

``SEMIRING_GPU_STRATEGY`` (the planner's setting) and ``--working-memory`` are passed through as a user
would set them; both are recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import record


class PeakAllocations:
    """The most bytes CuPy's pool had handed out at once while active, counted per allocation."""

    def __enter__(self):
        import cupy

        self.pool = cupy.get_default_memory_pool()
        self.base = self.pool.used_bytes()
        self.peak = self.base
        pool = self.pool

        def malloc(size):
            block = pool.malloc(size)
            self.peak = max(self.peak, pool.used_bytes())
            return block

        cupy.cuda.set_allocator(malloc)
        return self

    def __exit__(self, *exc):
        import cupy

        cupy.cuda.set_allocator(self.pool.malloc)

    def extra_mib(self, result_bytes: int) -> float:
        return round((self.peak - self.base - result_bytes) / 2**20, 1)


def reference(X, rows: np.ndarray, metric: str):
    """Float64 distances of ``rows`` of X to every row of X (cuSPARSE in float64; an independent path)."""
    import cupy
    import cupyx.scipy.sparse as cps

    X64 = cps.csr_matrix(X.astype(np.float64))
    S = cupy.asarray(X[rows].astype(np.float64).toarray())
    dots = (X64 @ S.T).T  # len(rows) × n
    if metric in ("cosine", "inner_product"):
        if metric == "inner_product":
            return dots
        norms = cupy.sqrt(cupy.asarray(X.astype(np.float64).multiply(X).sum(axis=1)).ravel())
        denom = norms[rows][:, None] * norms[None, :]
        return cupy.where(denom > 0, 1.0 - dots / cupy.where(denom > 0, denom, 1.0), cupy.nan)
    if metric == "cityblock":  # Σ |x − y| = ‖x‖₁ + Σ over y's stored entries of (|y − x| − |x|), per sampled x
        cols, vals = cupy.asarray(X.indices), cupy.asarray(X.data.astype(np.float64))
        entry_row = cupy.asarray(np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)))
        out = cupy.empty((rows.size, X.shape[0]))
        for t, r in enumerate(rows):
            x = cupy.zeros(X.shape[1])
            x[cols[X.indptr[r] : X.indptr[r + 1]]] = vals[X.indptr[r] : X.indptr[r + 1]]
            at = x[cols]
            out[t] = cupy.abs(x).sum() + cupy.bincount(
                entry_row, weights=cupy.abs(vals - at) - cupy.abs(at), minlength=X.shape[0]
            )
        return out
    raise ValueError(f"no reference for {metric}")


def check(dist, ind, ref, rows: np.ndarray, k: int, largest: bool, rtol: float) -> dict:
    """Our (or a peer's) neighbours of ``rows`` against the reference: the distance of each returned neighbour,
    and the k-th best distance (ties allowed: any k of the equally near are right)."""
    import cupy

    ref = ref.copy()
    ref[cupy.arange(rows.size), cupy.asarray(rows)] = cupy.nan  # a row is not its own neighbour
    key = -ref if largest else ref
    key = cupy.where(cupy.isnan(key), cupy.inf, key)
    kth = cupy.sort(key, axis=1)[:, k - 1]
    got_d = cupy.asarray(dist[rows]).astype(np.float64)
    got_i = cupy.asarray(ind[rows]).astype(np.int64)
    at = cupy.take_along_axis(key, got_i, axis=1)
    scale = cupy.maximum(1.0, cupy.abs(kth))[:, None]
    own = cupy.abs(at - (-got_d if largest else got_d)) / scale  # each returned distance is that pair's
    worse = (at - kth[:, None]) / scale  # no returned neighbour farther than the k-th best
    out = {
        "rows": int(rows.size),
        "max_distance_error": float(cupy.nanmax(own)),
        "max_beyond_kth": float(cupy.max(worse)),
    }
    out["ok"] = bool(out["max_distance_error"] <= rtol and out["max_beyond_kth"] <= rtol)
    return out


def ours(Xc, metric: str, k: int, working_memory):
    import cupy

    from semiring import distances

    t0 = time.perf_counter()
    nn = distances.NearestNeighbors(n_neighbors=k, metric=metric, working_memory=working_memory).fit(Xc)
    dist, ind = nn.kneighbors()
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - t0, dist, ind


def run_one(name: str, rows: int, metric: str, args, harness) -> dict:
    import cupy
    import cupyx.scipy.sparse as cps

    from .synthetic import SPECS, describe, make_dataset

    t0 = time.perf_counter()
    X = make_dataset(name, scale=rows / SPECS[name].rows, seed=args.seed)
    row = {"dataset": name, "rows": X.shape[0], "metric": metric, "k": args.k, "shape": describe(X)}
    row["generate_s"] = round(time.perf_counter() - t0, 1)
    Xc = cps.csr_matrix(X)
    warm = cps.csr_matrix(X[: min(X.shape[0], args.warmup_rows)])
    ours(warm, metric, args.k, args.working_memory)  # compiles, on a slice planned as the whole is
    del warm
    cupy.get_default_memory_pool().free_all_blocks()
    times = []
    for _ in range(args.repeats):
        with PeakAllocations() as peak:
            seconds, dist, ind = ours(Xc, metric, args.k, args.working_memory)
        times.append(seconds)
    n = X.shape[0]
    best = float(np.median(times))
    row.update(
        {
            "ours_s": round(best, 3),
            "ours_all_s": [round(t, 3) for t in times],
            "ours_ps_per_pair": round(1e12 * best / n**2, 2),
            "ours_extra_mib": peak.extra_mib(dist.nbytes + ind.nbytes),
        }
    )
    if n <= args.distances_max_rows:  # the same pairs' distances alone: what the selection adds to them
        from semiring import distances

        def all_distances(Xc=Xc):
            t0 = time.perf_counter()
            D = distances.pairwise_distances(Xc, metric=metric, working_memory=args.working_memory)
            cupy.cuda.Device().synchronize()
            return time.perf_counter() - t0, D

        all_distances()  # compiles the dense path's kernels
        seconds = float(np.median([all_distances()[0] for _ in range(args.repeats)]))
        row["distances_s"] = round(seconds, 3)
        row["selection_share"] = round(best / seconds - 1.0, 3)
        cupy.get_default_memory_pool().free_all_blocks()
    sample = np.random.default_rng(args.seed).choice(n, min(n, args.check_rows), replace=False)
    sample.sort()
    ref = reference(X, sample, metric)
    largest = metric == "inner_product"
    row["ours_check"] = check(dist, ind, ref, sample, args.k, largest, args.rtol)
    print(json.dumps({k: v for k, v in row.items() if k != "shape"}), flush=True)
    if harness is not None and n <= args.cuvs_max_rows:
        result = harness.knn(X, [metric], args.k + 1).get(metric, {"error": "cuVS has no such measure"})
        if "error" in result:
            row["cuvs_error"] = result["error"][:400]
        else:
            own = result["indices"] == np.arange(n)[:, None]  # cuVS returns the row itself: drop it
            keep = ~own
            keep[~own.any(axis=1), -1] = False
            cd = result["distances"][keep].reshape(n, args.k)
            ci = result["indices"][keep].reshape(n, args.k)
            row["cuvs_s"] = round(result["ms"] / 1e3, 3)
            row["cuvs_ps_per_pair"] = round(1e9 * result["ms"] / n**2, 2)
            row["cuvs_check"] = check(cd, ci, ref, sample, args.k, largest, args.rtol)
            row["speedup_vs_cuvs"] = round(row["cuvs_s"] / best, 2)
        print(json.dumps({k: v for k, v in row.items() if k != "shape"}), flush=True)
    del Xc, dist, ind, ref
    cupy.get_default_memory_pool().free_all_blocks()
    return row


def report(paths: list[str]) -> str:
    """The Markdown table of results files (``docs/scale.md`` holds it, and a test keeps the two equal)."""
    lines = [
        (
            "| dataset | rows | metric | ours (s) | ps a pair | extra MiB | checked | cuVS (s) | cuVS checked "
            "| vs cuVS | commit | results file |"
        ),
        "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | --- | ---: | --- | --- |",
    ]
    for path in paths:
        meta = json.loads(Path(path).read_text())
        for r in meta["results"]:
            if "error" in r:
                lines.append(f"| {r['dataset']} | {r['rows']:,} | {r['metric']} | fails: {r['error'][:60]} |")
                continue

            def verdict(check):
                return "—" if check is None else ("yes" if check["ok"] else f"**no** ({check['max_beyond_kth']:.2g})")

            cuvs = f"{r['cuvs_s']:,.2f}" if "cuvs_s" in r else ("fails" if "cuvs_error" in r else "—")
            speed = f"{r['speedup_vs_cuvs']:.1f}×" if "speedup_vs_cuvs" in r else "—"
            lines.append(
                f"| {r['dataset']}-like | {r['rows']:,} | {r['metric']} | {r['ours_s']:,.3f} | {r['ours_ps_per_pair']:.1f} "
                f"| {r['ours_extra_mib']:,.0f} | {verdict(r.get('ours_check'))} | {cuvs} "
                f"| {verdict(r.get('cuvs_check'))} | {speed} | {meta['commit']} | `{Path(path).name}` |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--report":
        print(report(argv[1:]), end="")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--datasets", default="nytimes,movielens")
    ap.add_argument("--rows", default="40000,300000", help="comma-separated row counts")
    ap.add_argument("--metrics", default="cosine")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--warmup-rows", type=int, default=20_000)
    ap.add_argument("--working-memory", type=float, default=None, help="MiB, as NearestNeighbors takes it")
    ap.add_argument("--check-rows", type=int, default=256)
    ap.add_argument("--rtol", type=float, default=1e-4, help="float32 results against the float64 reference")
    ap.add_argument("--cuvs", default=None, help="the cuVS harness (benchmarks/cuvs/device_steps.md)")
    ap.add_argument("--cuvs-max-rows", type=int, default=400_000)
    ap.add_argument(
        "--distances-max-rows", type=int, default=0, help="also time all the distances, up to this many rows"
    )
    ap.add_argument(
        "--all-pairs-once",
        choices=("default", "on", "off"),
        default="default",
        help="the GPU engine's all_pairs_once for this run (each pair of a symmetric all-pairs kNN computed once)",
    )
    ap.add_argument("--json", required=True)
    args = ap.parse_args(argv)

    import cupy

    from semiring.kernels.cuda import ENGINE

    if args.all_pairs_once != "default":  # an experiment's switch: the engine's declaration, for this process
        type(ENGINE).all_pairs_once = args.all_pairs_once == "on"

    harness = None
    if args.cuvs:
        from .peers import CuvsHarness

        harness = CuvsHarness(Path(args.cuvs), Path(tempfile.mkdtemp(prefix="cuvs-scale-")), repeats=1)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    meta = {
        "benchmark": "scale",
        "commit": record.commit(),
        "engine_digest": record.engine_digest(),  # `python -m benchmarks stamp` tells the commit from it
        "engine_digests": record.engine_digests(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": {
            "gpu": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "gpu_memory_gib": round(cupy.cuda.Device().mem_info[1] / 2**30, 1),
            "host": platform.node(),
            "cpus": os.cpu_count(),
        },
        "versions": {"python": platform.python_version(), "cupy": cupy.__version__, "numpy": np.__version__},
        "seed": args.seed,
        "strategy": os.environ.get("SEMIRING_GPU_STRATEGY", "auto"),
        "working_memory": args.working_memory,
        "all_pairs_once": type(ENGINE).all_pairs_once,
        "results": [],
    }
    for name in args.datasets.split(","):
        for rows in (int(r) for r in args.rows.split(",")):
            for metric in args.metrics.split(","):
                try:
                    meta["results"].append(run_one(name, rows, metric, args, harness))
                except Exception as err:  # noqa: BLE001 - a size that does not fit is reported, and the next one runs
                    meta["results"].append({"dataset": name, "rows": rows, "metric": metric, "error": repr(err)})
                    print(json.dumps(meta["results"][-1]), flush=True)
                Path(args.json).write_text(json.dumps(meta, indent=1))
    return 0 if all(r.get("ours_check", {}).get("ok") for r in meta["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
