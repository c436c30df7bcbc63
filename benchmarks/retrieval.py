"""Exact inner-product retrieval over a learned-sparse index the size of MS MARCO, ours against cuVS (GPU).

The anchor (issue 30; arXiv 2606.26441): SPLADE vectors of the 8.8 M MS MARCO passages, 30,522 columns,
about 120 stored weights a passage and 20–40 a query, top-10 by inner product, batches of 500 queries: 787
queries a second on an H100.  The rows here are ``synthetic.retrieval_index``'s (drawn on the GPU with the seed
on the command line; the column skew is our choice, said there).  For each run this records:

* the time of ``NearestNeighbors(n_neighbors=k, metric="inner_product").fit(index)`` and of each
  ``kneighbors(batch)`` as a user calls them on CuPy input (the GPU synchronised at the end of each), after
  one warm-up batch (NVRTC compiles); queries a second = batch / the median batch time;
* the share of the device's memory bandwidth that reading the index once a batch would take at that rate
  (the index's CSR bytes × batches a second / the bandwidth the device reports): what a scan-bound method
  would be limited by;
* the peak device memory a batch took beyond the index and its answer;
* the check of every answer on ``--check-queries`` sampled queries against a float64 reference (cuSPARSE's
  product of the index in float64 with those queries): each returned neighbour's value, and the k-th best;
* cuVS's sparse brute-force kNN (``benchmarks/cuvs/harness.cu``, mode ``search``; ``--cuvs HARNESS``) on the
  same index and queries, ``--cuvs-batches`` batches of the same size, its first batch timed, its answers
  checked the same way.

    python -m benchmarks retrieval --seed 0 --rows 8800000 --json OUT.json [--cuvs HARNESS]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import record


def add_arguments(ap) -> None:
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--rows", type=int, default=8_800_000, help="rows of the index")
    ap.add_argument("--batch", type=int, default=500, help="queries a kneighbors call")
    ap.add_argument("--batches", type=int, default=6, help="timed batches (after one warm-up batch)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--working-memory", type=float, default=None, help="MiB, as NearestNeighbors takes it")
    ap.add_argument("--check-queries", type=int, default=64)
    ap.add_argument("--rtol", type=float, default=1e-4, help="float32 results against the float64 reference")
    ap.add_argument("--cuvs", default=None, help="the cuVS harness (benchmarks/cuvs/device_steps.md)")
    ap.add_argument("--cuvs-batches", type=int, default=1)
    ap.add_argument("--cuvs-timeout", type=float, default=300.0, help="seconds cuVS gets for all its batches")
    ap.add_argument("--model", action="store_true", help="print the split's work a batch by the generator's model")
    ap.add_argument("--json", help="the results file (required unless --model)")


def reference(index, queries, rows: np.ndarray):
    """Float64 inner products of the queries ``rows`` with every index row: ``len(rows) × n`` on the GPU."""
    import cupy
    import cupyx.scipy.sparse as cps

    X64 = cps.csr_matrix((index.data.astype(np.float64), index.indices, index.indptr), shape=index.shape)
    S = queries[cupy.asarray(rows)].astype(np.float64).toarray()
    out = (X64 @ S.T).T
    del X64
    return cupy.ascontiguousarray(out)


def check(dist, ind, ref, rows: np.ndarray, k: int, rtol: float) -> dict:
    """The answers of the sampled queries against the reference (largest first): each returned value is that
    pair's, and none is below the k-th best (ties allowed: any k of the equally near are right)."""
    import cupy

    kth = -cupy.sort(-ref, axis=1)[:, k - 1]
    got_d = cupy.asarray(dist[rows]).astype(np.float64)
    got_i = cupy.asarray(ind[rows]).astype(np.int64)
    at = cupy.take_along_axis(ref, got_i, axis=1)
    scale = cupy.maximum(1.0, cupy.abs(kth))[:, None]
    out = {
        "queries": int(rows.size),
        "max_value_error": float(cupy.max(cupy.abs(at - got_d) / scale)),
        "max_below_kth": float(cupy.max((kth[:, None] - at) / scale)),
        "distinct": bool((cupy.sort(got_i, axis=1)[:, 1:] != cupy.sort(got_i, axis=1)[:, :-1]).all()),
    }
    out["ok"] = bool(out["max_value_error"] <= rtol and out["max_below_kth"] <= rtol and out["distinct"])
    return out


def held_bytes(value) -> int:
    """The device bytes of the arrays in what a fitted index holds for its queries (its ``DerivedCache``:
    tuples, lists and dicts of arrays and matrices), each array counted once."""
    seen, total, stack = set(), 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif hasattr(item, "data") and hasattr(item.data, "ptr") and hasattr(item, "nbytes"):  # a CuPy array
            if id(item) not in seen:
                seen.add(id(item))
                total += int(item.nbytes)
        elif hasattr(item, "__dict__") and not isinstance(item, type):  # a DeviceCSR and its cached arrays
            stack.extend(vars(item).values())
    return total


def bandwidth_bytes_per_s() -> float:
    """The device's memory bandwidth as its properties give it (memory clock × bus width, double data rate)."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    return 2.0 * props["memoryClockRate"] * 1e3 * props["memoryBusWidth"] / 8


def split_work(rows: int, batch: int, rooms, seed: int = 0) -> list[dict]:
    """The split strategy's work for a batch of queries against ``retrieval_index(rows)``, by the generator's
    model (no GPU): each column's expected stored count and query entries (``synthetic._unique_draws``), and
    for each ``room`` (the heavy columns in the dense copy, the most stored first) the scatter-adds of the rest
    and the GEMM's multiply-adds."""
    from .synthetic import RETRIEVAL, _unique_draws

    cdf, draws_for = _unique_draws(RETRIEVAL["cols"], RETRIEVAL["zipf"], seed)
    p = np.diff(cdf, prepend=0.0)
    rng = np.random.default_rng(seed)

    def stored_share(wanted) -> np.ndarray:  # the chance that a row of these degrees stores each column
        draws = np.maximum(1, np.rint(draws_for(wanted, np)))
        values, counts = np.unique(draws, return_counts=True)
        return sum(c * (1.0 - (1.0 - p) ** d) for d, c in zip(values, counts)) / draws.size

    sigma = 0.4
    degrees = np.clip(rng.lognormal(np.log(RETRIEVAL["mean_nnz"]) - sigma**2 / 2, sigma, 20_000), 1, 1_000)
    column = rows * stored_share(degrees)
    lo, hi = RETRIEVAL["query_nnz"]
    query = stored_share(rng.integers(lo, hi + 1, 20_000).astype(float))
    order = np.argsort(-column)
    out = []
    for room in rooms:
        light = np.ones(p.size, bool)
        light[order[:room]] = False
        out.append(
            {
                "dense_columns": int(room),
                "scatter_adds_g": round(float(batch * (query * column)[light].sum()) / 1e9, 2),
                "gemm_fma_t": round(batch * rows * room / 1e12, 2),
            }
        )
    return out


def main(args) -> int:
    if args.model:
        heavy = [0, 64, 128, 240, 400]
        for row in split_work(args.rows, args.batch, heavy, args.seed):
            print(json.dumps(row))
        return 0
    if not args.json:
        raise SystemExit("python -m benchmarks retrieval: --json is required (or --model)")
    import cupy

    from semiring import distances

    from .scale import PeakAllocations
    from .synthetic import RETRIEVAL, retrieval_index, retrieval_queries

    meta = {
        "benchmark": "retrieval",
        "commit": record.commit(),
        "engine_digest": record.engine_digest(),
        "engine_digests": record.engine_digests(),
        "command": "python -m benchmarks " + " ".join(sys.argv[1:]),  # argv[1] is the suite's name
        "machine": record.machine(),
        "seed": args.seed,
        "batch": args.batch,
        "k": args.k,
        "strategy": os.environ.get("SEMIRING_GPU_STRATEGY", "auto"),
        "working_memory": args.working_memory,
        "spec": RETRIEVAL,
    }
    t0 = time.perf_counter()
    index = retrieval_index(args.rows, seed=args.seed, xp=cupy)
    queries = retrieval_queries(args.batch * (args.batches + 1), seed=args.seed, xp=cupy)
    cupy.cuda.Device().synchronize()
    index_bytes = index.data.nbytes + index.indices.nbytes + index.indptr.nbytes
    meta["generate_s"] = round(time.perf_counter() - t0, 1)
    meta["index"] = {
        "rows": index.shape[0],
        "cols": index.shape[1],
        "nnz": int(index.nnz),
        "gb": round(index_bytes / 1e9, 2),
        "mean_nnz_per_row": round(index.nnz / index.shape[0], 1),
    }
    meta["queries"] = {"count": queries.shape[0], "mean_nnz": round(queries.nnz / queries.shape[0], 1)}
    counts = cupy.bincount(index.indices, minlength=index.shape[1])
    meta["index"]["postings_per_query_entry"] = round(float(counts[queries.indices].mean()), 1)
    print(json.dumps(meta, default=str), flush=True)

    t0 = time.perf_counter()
    nn = distances.NearestNeighbors(n_neighbors=args.k, metric="inner_product", working_memory=args.working_memory)
    nn.fit(index)
    cupy.cuda.Device().synchronize()
    meta["fit_s"] = round(time.perf_counter() - t0, 3)

    def batch(b: int):
        return queries[b * args.batch : (b + 1) * args.batch]

    def one(b: int):
        t0 = time.perf_counter()
        d, i = nn.kneighbors(batch(b))
        cupy.cuda.Device().synchronize()
        return time.perf_counter() - t0, d, i

    meta["first_batch_s"] = round(one(0)[0], 3)  # NVRTC compiles, and what the index derives for its queries
    meta["held_mib"] = round(held_bytes(nn._index.derived) / 2**20, 1)  # kept beside the index after it
    times, dists, inds = [], [], []
    with PeakAllocations() as peak:
        for b in range(1, args.batches + 1):
            seconds, d, i = one(b)
            times.append(seconds)
            dists.append(d)
            inds.append(i)
            print(json.dumps({"batch": b, "s": round(seconds, 4)}), flush=True)
    dist, ind = cupy.concatenate(dists), cupy.concatenate(inds)
    median = float(np.median(times))
    qps = args.batch / median
    meta["ours"] = {
        "batch_s": [round(t, 4) for t in times],
        "median_batch_s": round(median, 4),
        "queries_per_s": round(qps, 1),
        "pairs_per_s": round(qps * index.shape[0], 1),
        "index_scan_bandwidth_share": round(index_bytes / median / bandwidth_bytes_per_s(), 4),
        "extra_mib": peak.extra_mib(0),
    }
    print(json.dumps(meta["ours"]), flush=True)

    timed = queries[args.batch :]
    sample = np.sort(np.random.default_rng(args.seed).choice(timed.shape[0], args.check_queries, replace=False))
    ref = reference(index, timed, sample)
    meta["ours"]["check"] = check(dist, ind, ref, sample, args.k, args.rtol)
    print(json.dumps(meta["ours"]["check"]), flush=True)
    nn = dist = ind = dists = inds = None  # the index's device copies and the answers freed before cuVS runs
    cupy.get_default_memory_pool().free_all_blocks()

    if args.cuvs:
        from .peers import CuvsHarness

        harness = CuvsHarness(Path(args.cuvs), Path(tempfile.mkdtemp(prefix="cuvs-retrieval-")), repeats=1)
        host_index = index.get()
        del index, counts
        cupy.get_default_memory_pool().free_all_blocks()
        cq = timed[: args.batch * args.cuvs_batches].get()
        result = harness.search(cq, host_index, "inner_product", args.k, args.batch, timeout_s=args.cuvs_timeout)
        if "error" in result:
            meta["cuvs"] = {"error": result["error"], "cuvs_metric": result["cuvs_metric"]}
        else:
            ms = result["ms"]
            meta["cuvs"] = {
                "cuvs_metric": result["cuvs_metric"],
                "batch_s": round(ms / 1e3, 4),
                "queries_per_s": round(args.batch / (ms / 1e3), 1),
            }
            mine = sample[sample < cq.shape[0]]
            if mine.size:
                meta["cuvs"]["check"] = check(
                    cupy.asarray(result["distances"]),
                    cupy.asarray(result["indices"]),
                    ref[: mine.size],
                    mine,
                    args.k,
                    args.rtol,
                )
            if meta["cuvs"].get("check", {}).get("ok"):  # a wrong peer is shown wrong, never as a time to beat
                meta["speedup_vs_cuvs"] = round(meta["ours"]["queries_per_s"] / meta["cuvs"]["queries_per_s"], 2)
        print(json.dumps(meta["cuvs"]), flush=True)
    Path(args.json).write_text(json.dumps(meta, indent=1, default=str))
    return 0 if meta["ours"]["check"]["ok"] else 1


def report(paths: list[str]) -> str:
    """The Markdown table of retrieval results files (``docs/scale.md`` holds it, made by ``python -m benchmarks
    docs``); a ratio to cuVS only where cuVS's answers passed their check."""

    def verdict(check):
        if check is None:
            return "—"
        return "yes" if check["ok"] else f"**no** ({check['max_below_kth']:.2g} below the k-th best)"

    lines = [
        (
            "| index rows | index GB | strategy | batch | ours q/s | batch s (first) | extra MiB | checked "
            "| cuVS q/s | cuVS checked | vs cuVS | commit | results file |"
        ),
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | --- | --- |",
    ]
    for path in paths:
        r = json.loads(Path(path).read_text())
        ours, cuvs = r["ours"], r.get("cuvs")
        batch = r.get("batch") or round(ours["queries_per_s"] * ours["median_batch_s"])  # early files lack it
        theirs = "—" if cuvs is None else ("fails" if "error" in cuvs else f"{cuvs['queries_per_s']:,.1f}")
        ratio = f"{r['speedup_vs_cuvs']:.1f}×" if "speedup_vs_cuvs" in r and cuvs.get("check", {}).get("ok") else "—"
        lines.append(
            f"| {r['index']['rows']:,} | {r['index']['gb']:.2f} | {r['strategy']} | {batch} "
            f"| {ours['queries_per_s']:,.1f} | {ours['median_batch_s']:.3f} ({r['first_batch_s']:.2f}) "
            f"| {ours['extra_mib']:,.0f} | {verdict(ours.get('check'))} | {theirs} "
            f"| {verdict(None if cuvs is None else cuvs.get('check'))} | {ratio} | {r['commit']} | `{Path(path).name}` |"
        )
    return "\n".join(lines) + "\n"
