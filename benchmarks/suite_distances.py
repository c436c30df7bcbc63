"""Suite ``distances``: every measure at the public call on the GPU, with every peer in the same run.

For each dataset shape (``synthetic.make_dataset``, seeded by ``--seed``, float32), the first ``--queries``
rows against every row, for every measure:

* **ours, CuPy in**: ``pairwise_distances(Qc, Xc, metric)`` on ``cupyx.scipy.sparse`` input, result a
  ``cupy.ndarray``: validation, preparation and product all counted (CUDA events);
* **ours, SciPy in**: the same call on SciPy input, NumPy result, the transfers both ways counted (wall clock);
* **kernel only**: ``BoundMeasure.block`` on rows prepared beforehand;
* **naive merge** (union measures): the same public call with the one-thread-per-pair merge kernel forced
  (``SEMIRING_GPU_STRATEGY=merge``), the paper's baseline;
* **cuSPARSE** ``Q @ X.T`` + the expansion in CuPy, and **dense cuBLAS** on rows densified beforehand (the
  densify timed apart), for the measures a product gives (``--product-metrics``), on the rows the measure
  needs (binary for jaccard), prepared outside the timing;
* **cuVS** (``--cuvs HARNESS``, else ``$CUVS_HARNESS`` or ``~/cuvs/root/cuvs_harness`` if built):
  ``cuvs::distance::pairwise_distance`` on CSR views, each measure given the rows its definition expects
  (``peers.CUVS_ROWS``: L1-normalised for jensenshannon and hellinger, binary for jaccard, dice, russellrao),
  prepared outside its timing, its output preallocated;
* **scikit-learn** ``pairwise_distances(n_jobs=host cores)`` on the same queries (``--sklearn-metrics``; the
  pairs in ``--sklearn-skip`` left out for time, stated), warmed up like ours;
* **memory**: peak device bytes of the public call beyond its inputs and result (a counting allocator, no
  pool), against max(10 % of the output, 256 MiB).

Every timing: one warm-up call, then the median of ``--repeats`` (``--host-repeats`` for scikit-learn).
Every result, ours and each peer's, is checked in the same run against SciPy ``cdist`` in float64 (or the
float64 definition of a measure SciPy lacks) on ``--check-queries`` × ``--check-rows`` sampled entries
(``reference.pairwise_reference``); a peer that disagrees is recorded wrong with its error, and no ratio
is drawn from it.

    python -m benchmarks distances --seed 0 --json benchmarks/results/distances_h200.json
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from . import peers
from .record import Results
from .reference import compare, no_oracle, pairwise_reference, sample, sklearn_convention
from .synthetic import DATASETS, describe, make_dataset
from .timing import MIB, PeakMemory, on_device, on_host, setting

PRODUCT_METRICS = ("cosine", "euclidean", "inner_product", "jaccard")
SKLEARN_METRICS = ("cosine", "euclidean", "cityblock")
SKLEARN_SKIP = ("scrna:cityblock",)  # minutes a call on 16 cores (1,600 values a row): stated, not run


def add_arguments(p) -> None:
    p.add_argument("--seed", type=int, required=True, help="seed of the generated datasets and of the sample")
    p.add_argument("--scale", type=float, default=1.0, help="fraction of each dataset's rows")
    p.add_argument("--queries", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=5, help="timed calls after the warm-up (device work)")
    p.add_argument("--host-repeats", type=int, default=3, help="timed calls after the warm-up (host calls)")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--metrics", default="all", help="comma-separated measures, or all")
    p.add_argument("--product-metrics", default=",".join(PRODUCT_METRICS))
    p.add_argument("--sklearn-metrics", default=",".join(SKLEARN_METRICS), help="'' runs no scikit-learn")
    p.add_argument("--sklearn-skip", default=",".join(SKLEARN_SKIP), help="dataset:metric pairs left out")
    p.add_argument("--check-queries", type=int, default=16)
    p.add_argument("--check-rows", type=int, default=2000)
    p.add_argument(
        "--cuvs", help="the cuVS harness (benchmarks/cuvs); default $CUVS_HARNESS or ~/cuvs/root/cuvs_harness"
    )
    p.add_argument("--cuvs-workdir", type=Path, help="where the CSR files for cuVS go (default: a temp folder)")
    p.add_argument("--json", type=Path, help="the results file")


def gpu_strategy(strategy: str):
    """``$SEMIRING_GPU_STRATEGY`` set to ``strategy`` inside the block (the engine reads it at each call)."""
    from semiring.kernels.cuda.planner import STRATEGY_ENV

    return setting(STRATEGY_ENV, strategy)


def _at(result, qi, xi) -> np.ndarray:
    """The sampled entries of a full result (CuPy or NumPy)."""
    part = result[np.ix_(qi, xi)]
    return part.get() if hasattr(part, "get") else np.asarray(part)


def _check(subject, got, want, qi, xi, against) -> dict:
    if want is None:
        return no_oracle(subject, "no float64 definition written for this measure")
    return compare(_at(got, qi, xi), want, subject, against)


def run_metric(name, metric, Q, X, Qc, Xc, args, qi, xi, cuvs: dict | None) -> dict:
    import cupy
    import cupyx.scipy.sparse as csp

    from semiring import distances
    from semiring.distances.bound import BoundMeasure, prepare
    from semiring.distances.specs import get_metric
    from semiring.kernels.cuda import ENGINE

    spec = get_metric(metric)
    out_mib = Q.shape[0] * X.shape[0] * 4 / MIB
    row = {"dataset": name, "metric": spec.name, "family": spec.family, "output_mib": round(out_mib, 1)}
    row["memory_budget_mib"] = round(max(0.1 * out_mib, 256.0), 1)
    against = f"SciPy float64 on {len(qi)} x {len(xi)} sampled entries"
    want = pairwise_reference(spec.name, spec.scipy, Q, X, qi, xi)
    timings = row["timings"] = {}

    def public():
        return distances.pairwise_distances(Qc, Xc, metric=metric)

    t, got = on_device(public, args.repeats)
    timings["ours"], row["public_cupy_ms"] = t.as_dict(), round(t.ms, 2)
    row["check"] = _check("ours", got, want, qi, xi, against)
    if spec.family == "union":
        with gpu_strategy("merge"):
            t, merged = on_device(public, args.repeats)
        timings["merge"], row["merge_ms"] = t.as_dict(), round(t.ms, 2)
        row["merge_check"] = _check("naive merge", merged, want, qi, xi, against)
        del merged
    del got
    if cuvs is not None:
        row.update(cuvs_columns(cuvs, want, xi, against))
    row["public_extra_mib"] = round(PeakMemory().extra_mib(public), 1)
    t, host = on_host(lambda: distances.pairwise_distances(Q, X, metric=metric), args.host_repeats)
    timings["ours_scipy_in"], row["public_scipy_ms"] = t.as_dict(), round(t.ms, 2)
    row["scipy_in_check"] = _check("ours, SciPy in", host, want, qi, xi, against)
    del host

    bound = BoundMeasure(ENGINE, spec.for_rows(Q, X), {}, np.float32)  # the form the public call takes
    Qr, Xr = bound.prepare(Q), bound.prepare(X)
    t, _ = on_device(lambda: bound.block(Qr, Xr), args.repeats)
    timings["kernel"], row["kernel_ms"] = t.as_dict(), round(t.ms, 2)

    if spec.name in args.product_metrics.split(","):
        Qs, Xs = csp.csr_matrix(prepare(Q, spec.prepare)), csp.csr_matrix(prepare(X, spec.prepare))
        products = peers.product_peers(spec.name, Qs, Xs, args.repeats)
        for peer, label in (("cusparse", "cuSPARSE"), ("dense", "dense cuBLAS")):
            r = products[peer]
            if "result" in r:
                timings[peer], row[f"{peer}_ms"] = r["timing"], round(r["timing"]["median_ms"], 2)
                row[f"{peer}_check"] = _check(label, r.pop("result"), want, qi, xi, against)
                if "densify" in r:
                    timings["densify"], row["densify_ms"] = r["densify"], round(r["densify"]["median_ms"], 2)
                if "extra_mib" in r:
                    row[f"{peer}_extra_mib"] = r["extra_mib"]
                if "row_blocks" in r:
                    row[f"{peer}_row_blocks"] = r["row_blocks"]
            else:
                row[f"{peer}_error" if "error" in r else f"{peer}_skipped"] = r.get("error") or r.get("skipped")
        del products, Qs, Xs
    if spec.name in args.sklearn_metrics.split(",") and f"{name}:{spec.name}" not in args.sklearn_skip.split(","):
        r = peers.sklearn_pairwise(Q, X, spec.name, os.cpu_count(), args.host_repeats)
        if "result" in r:
            timings["sklearn"], row["sklearn_ms"], row["sklearn_threads"] = (
                r["timing"],
                round(r["timing"]["median_ms"], 2),
                r["threads"],
            )
            want_peer, note = sklearn_convention(spec.name, want, Q, X, qi, xi)
            row["sklearn_check"] = _check("scikit-learn", r["result"], want_peer, qi, xi, against)
            if note:
                row["sklearn_check"]["note"] = note
        else:
            row["sklearn_error"] = r.get("error") or r.get("skipped")
    cupy.get_default_memory_pool().free_all_blocks()
    return row


def cuvs_columns(result: dict, want, xi, against) -> dict:
    """cuVS's time and the check of its sampled rows against the oracle, and the rows it was given."""
    if "error" in result:
        return {"cuvs_metric": result["cuvs_metric"], "cuvs_error": result["error"]}
    out = {"cuvs_metric": result["cuvs_metric"], "cuvs_rows": result.get("rows"), "cuvs_ms": round(result["ms"], 2)}
    theirs = result["sample"][:, xi]
    out["cuvs_check"] = no_oracle("cuVS", "no oracle") if want is None else compare(theirs, want, "cuVS", against)
    return out


def main(args) -> int:
    import cupyx.scipy.sparse as csp

    from semiring.distances.specs import DISTANCES, get_metric

    results = Results("distances", args, args.json)
    harness_path = peers.find_cuvs_harness(args.cuvs)
    harness = None
    if harness_path:
        version = harness_path.parent / "CUVS_VERSION"
        results.meta["versions"]["cuvs"] = version.read_text().split() if version.is_file() else "unknown"
        harness = peers.CuvsHarness(
            harness_path, args.cuvs_workdir or Path(tempfile.mkdtemp(prefix="cuvs-")), args.repeats
        )
    else:
        results.meta["versions"]["cuvs"] = None
    metrics = [d.name for d in DISTANCES] if args.metrics == "all" else args.metrics.split(",")
    results.extra["refused"] = []
    results.extra["datasets"] = {}
    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=args.seed)
        Q = X[: args.queries]
        results.extra["datasets"][name] = describe(X)
        qi, xi = sample(Q, X, np.random.default_rng(args.seed), args.check_queries, args.check_rows)
        cuvs = harness.pairwise(Q, X, [get_metric(m).name for m in metrics], qi) if harness else {}
        Xc, Qc = csp.csr_matrix(X), csp.csr_matrix(Q)
        for metric in metrics:
            try:
                results.add(run_metric(name, metric, Q, X, Qc, Xc, args, qi, xi, cuvs.get(get_metric(metric).name)))
            except ValueError as exc:  # our input rules refuse it here (seuclidean's V on constant columns)
                results.extra["refused"].append({"dataset": name, "metric": metric, "refused": str(exc)})
                results.save()
        del Xc, Qc, cuvs
    return results.finish()
