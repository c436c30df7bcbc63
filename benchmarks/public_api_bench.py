"""The GPU engine at the public call, as users call it, with its peers in the same run.

For each dataset shape (``datasets.make_dataset``, seeded by ``--seed``, float32),
``--queries`` rows against every row, for every measure:

* **ours, CuPy in** — ``semiring.distances.pairwise_distances(Qc, Xc, metric)`` on
  ``cupyx.scipy.sparse`` inputs, result a ``cupy.ndarray``: validation,
  preparation and product all counted (CUDA-event median);
* **ours, SciPy in** — the same call on SciPy inputs with a NumPy result: the
  transfers both ways counted (wall-clock median);
* **ours, kernel only** — ``BoundMeasure.block`` on rows prepared beforehand
  (what ``gpu_bench.py`` times);
* **peers** for the measures a product gives (cosine, euclidean): cuSPARSE
  ``Q @ X.T`` + the expansion in CuPy, and dense cuBLAS GEMM on rows densified
  beforehand (and with the densify counted), where X fits dense;
* **memory**: peak device bytes taken during the public call (CuPy input)
  beyond the inputs and the result, by a counting allocator with no pool,
  against the issue's budget max(10 % of the output, 256 MiB);
* **naive merge** for the union measures: the same public call with the engine's one-thread-per-pair
  merge kernel forced (``SEMIRING_GPU_STRATEGY=merge``, read at each call);
* **cuVS** (``--cuvs HARNESS``, else ``$CUVS_HARNESS`` or ``~/cuvs/root/cuvs_harness`` if built):
  ``cuvs::distance::pairwise_distance`` on ``raft::device_csr_matrix_view`` for every measure cuVS has,
  through ``benchmarks/cuvs/harness.cu`` on the same CSR matrices, written to files (CUDA-event medians,
  its output preallocated); its output on the sample rows is checked like ours;
* **check**: ours (and cuVS) against SciPy ``cdist`` (float64, densified) on a sample; where SciPy has
  no matching definition, cuVS against ours.

Then k-nearest neighbours, k = 10, all rows against all rows of the
movielens-like data (``--knn-datasets``): ``NearestNeighbors(metric).fit(Xc).kneighbors()``
on CuPy input, against cuSPARSE + ``argpartition`` in 8,192-row tiles and dense
cuBLAS + ``argpartition`` (where X fits dense), cosine only for those peers (no
product gives cityblock), and cuVS sparse brute-force kNN (``cuvs::neighbors::brute_force`` on a
sparse index, k + 1 neighbours since it counts each row its own); neighbours compared up to ties.

    python benchmarks/public_api_bench.py --seed 0 --json benchmarks/results/public_api_h200.json
    python benchmarks/public_api_bench.py --seed 0 --cuvs ~/cuvs/root/cuvs_harness --json ...  # cuVS too

Speed-ups in the report are the peer's time over ours (above 1: ours is faster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # benchmarks/datasets.py and measure.py; the library comes from its install

import numpy as np
from datasets import DATASETS, describe, make_dataset
from measure import MIB, PeakMemory, commit, timed, wall
from peers import (
    CuvsHarness,
    agrees,
    compare,
    expand_product,
    find_cuvs_harness,
    peer_norms,
    product_peers,
    sample,
    scipy_reference,
)

from semiring import distances
from semiring.distances.measure import BoundMeasure, prepare
from semiring.distances.specs import DISTANCES, get_metric
from semiring.kernels.cuda import ENGINE
from semiring.kernels.cuda.planner import STRATEGY_ENV

PRODUCT_PEERS = ("cosine", "euclidean")
K = 10
PEER_TILE = 8192


# --------------------------------------------------------------------------- pairwise at the public call


@contextlib.contextmanager
def gpu_strategy(strategy: str):
    """``$SEMIRING_GPU_STRATEGY`` set to ``strategy`` inside the block (the engine reads it at each call)."""
    before = os.environ.get(STRATEGY_ENV)
    os.environ[STRATEGY_ENV] = strategy
    try:
        yield
    finally:
        if before is None:
            del os.environ[STRATEGY_ENV]
        else:
            os.environ[STRATEGY_ENV] = before


def cuvs_columns(spec, result: dict | None, want, ours_sample, xi) -> dict:
    """cuVS's time and the check of its sample rows: against SciPy where SciPy defines the measure, else ours."""
    if result is None:
        return {}
    if "error" in result:
        return {"cuvs_metric": result["cuvs_metric"], "cuvs_error": result["error"]}
    theirs = result["sample"][:, xi]
    check = compare(theirs, ours_sample if want is None else want)
    check["against"] = "ours" if want is None else "scipy"
    return {"cuvs_metric": result["cuvs_metric"], "cuvs_ms": round(result["ms"], 2), "cuvs_check": check}


def run_metric(name, metric, Q, X, Qc, Xc, args, qi, xi, cuvs: dict | None = None) -> dict:
    """One measure at the public call, with its peers; ``cuvs``: the harness's result for it, if run."""
    import cupy
    import cupyx.scipy.sparse as csp

    spec = get_metric(metric)
    out_mib = Q.shape[0] * X.shape[0] * 4 / MIB
    row = {"dataset": name, "metric": spec.name, "family": spec.family, "output_mib": round(out_mib, 1)}
    row["memory_budget_mib"] = round(max(0.1 * out_mib, 256.0), 1)

    def public():
        return distances.pairwise_distances(Qc, Xc, metric=metric)

    ms, got = timed(public, args.repeats)
    row["public_cupy_ms"] = round(ms, 2)
    want = scipy_reference(spec, Q, X, qi, xi)
    ours_sample = got[np.ix_(qi, xi)].get()
    row["check"] = {"checked": False} if want is None else compare(ours_sample, want)
    if spec.family == "union":  # the naive merge kernel, forced through the engine's setting
        with gpu_strategy("merge"):
            ms, merged = timed(public, args.repeats)
        row["merge_ms"], row["merge_agrees"] = round(ms, 2), agrees(merged, got)
        del merged
    del got
    row.update(cuvs_columns(spec, cuvs, want, ours_sample, xi))
    row["public_extra_mib"] = round(PeakMemory().extra_mib(public), 1)
    seconds, _ = wall(lambda: distances.pairwise_distances(Q, X, metric=metric), args.repeats)
    row["public_scipy_ms"] = round(1e3 * seconds, 2)

    bound = BoundMeasure(ENGINE, spec.for_rows(Q, X), {}, np.float32)  # the form the public call takes
    Qr, Xr = bound.prepare(Q), bound.prepare(X)
    ms, _ = timed(lambda: bound.block(Qr, Xr), args.repeats)
    row["kernel_ms"] = round(ms, 2)

    if spec.name in PRODUCT_PEERS:
        Qs, Xs = csp.csr_matrix(prepare(Q, spec.prepare)), csp.csr_matrix(prepare(X, spec.prepare))
        row.update(product_peers(spec.name, Qs, Xs, distances.pairwise_distances(Qc, Xc, metric=metric), args.repeats))
    cupy.get_default_memory_pool().free_all_blocks()
    print(json.dumps(row), flush=True)
    return row


# --------------------------------------------------------------------------- kNN at the public call


def peer_knn(X, metric: str, dense: bool):
    """cuSPARSE (or dense cuBLAS) products in tiles of rows, expanded, each row's k best by argpartition."""
    import cupy
    import cupyx.scipy.sparse as csp

    Xs = csp.csr_matrix(X)
    nx = peer_norms(metric, Xs)
    Xd = Xs.toarray() if dense else None
    m = X.shape[0]
    dist, ind = cupy.empty((m, K), np.float32), cupy.empty((m, K), np.int64)
    for r0 in range(0, m, PEER_TILE):
        r1 = min(m, r0 + PEER_TILE)
        dot = Xd[r0:r1] @ Xd.T if dense else (Xs[r0:r1] @ Xs.T).toarray()
        D = expand_product(metric, dot, nx[r0:r1], nx)
        D[cupy.arange(r1 - r0), cupy.arange(r0, r1)] = cupy.inf  # not its own neighbour
        part = cupy.argpartition(D, K, axis=1)[:, :K]
        vals = cupy.take_along_axis(D, part, axis=1)
        order = cupy.argsort(vals, axis=1)
        dist[r0:r1], ind[r0:r1] = cupy.take_along_axis(vals, order, axis=1), cupy.take_along_axis(part, order, axis=1)
        del dot, D
    return dist, ind


def cuvs_knn_columns(result: dict | None, d, i) -> dict:
    """cuVS's kNN time, and its neighbours against ours (``d``, ``i`` on the host), itself left out of each row."""
    if result is None:
        return {}
    if "error" in result:
        return {"cuvs_metric": result["cuvs_metric"], "cuvs_error": result["error"]}
    rows = np.arange(i.shape[0])
    own = result["indices"] == rows[:, None]
    # each row's K neighbours other than itself (its own index dropped, else the farthest of the K + 1)
    keep = ~own
    keep[~own.any(axis=1), -1] = False
    theirs_i = result["indices"][keep].reshape(i.shape)
    theirs_d = result["distances"][keep].reshape(d.shape)
    same = np.mean([np.intersect1d(a, b).size / K for a, b in zip(theirs_i, i, strict=True)])
    return {
        "cuvs_metric": result["cuvs_metric"],
        "cuvs_ms": round(result["ms"], 1),
        "cuvs_same_indices": float(same),
        "cuvs_kth_distance_max_diff": float(np.nanmax(np.abs(theirs_d[:, -1] - d[:, -1]))),
    }


def run_knn(name, metric, X, Xc, args, cuvs: dict | None = None) -> dict:
    import cupy

    row = {"dataset": name, "metric": metric, "k": K, "rows": X.shape[0]}

    def public():
        return distances.NearestNeighbors(n_neighbors=K, metric=metric).fit(Xc).kneighbors()

    ms, (d, i) = timed(public, args.repeats)
    row["public_cupy_ms"] = round(ms, 1)
    seconds, _ = wall(lambda: distances.NearestNeighbors(n_neighbors=K, metric=metric).fit(X).kneighbors(), 1)
    row["public_scipy_ms"] = round(1e3 * seconds, 1)
    row["public_extra_mib"] = round(PeakMemory().extra_mib(public), 1)
    if metric == "cosine":
        for peer, dense in (("cusparse", False), ("dense", True)):
            if dense and X.shape[0] * X.shape[1] * 4 > 0.3 * cupy.cuda.Device().mem_info[0]:
                row[f"{peer}_skipped"] = "X does not fit dense"
                continue
            ms, (pd, pi) = timed(lambda dense=dense: peer_knn(X, metric, dense), args.repeats)
            row[f"{peer}_argpartition_ms"] = round(ms, 1)
            # Up to ties: the k-th distances agree (float32 products differ in the last bits).
            row[f"{peer}_same_indices"] = float((pi == i).mean())
            row[f"{peer}_kth_distance_max_diff"] = float(cupy.abs(pd[:, -1] - d[:, -1]).max())
            del pd, pi
    row.update(cuvs_knn_columns(cuvs, d.get(), i.get()))
    cupy.get_default_memory_pool().free_all_blocks()
    print(json.dumps(row), flush=True)
    return row


# --------------------------------------------------------------------------- report


def _versus(peer: str, peer_ms, ours_ms: float, correct: bool, want: float | None) -> str:
    """``ours`` against one peer: the ratio, the target met or missed, or why the ratio does not count."""
    if peer_ms is None:
        return ""
    ratio = peer_ms / ours_ms
    if not correct:
        return (
            f"; {peer} {peer_ms} ms but WRONG (disagrees with SciPy, or with ours where SciPy has no match): no target"
        )
    text = f"; {ratio:.2f}x {peer}"
    return text + (f" ({'met' if ratio >= want else 'MISSED'} >= {want}x)" if want else "")


def summary(rows: list[dict], knn: list[dict]) -> list[str]:
    """The issue's targets, each met or missed with the figure; a peer that is wrong sets no target."""
    lines = []
    for r in rows:
        d, m, ours = r["dataset"], r["metric"], r["public_cupy_ms"]
        mem = r["public_extra_mib"] <= r["memory_budget_mib"]
        text = (
            f"{d} {m}: {ours} ms; memory {r['public_extra_mib']} MiB of {r['memory_budget_mib']} "
            f"{'met' if mem else 'MISSED'}"
        )
        dense_want = 1 if d == "scrna" else None
        text += _versus(
            "dense cuBLAS (pre-densified)", r.get("dense_ms"), ours, r.get("dense_agrees", False), dense_want
        )
        want = {"edgar": 1, "movielens": 5}.get(d)
        text += _versus("cuSPARSE", r.get("cusparse_ms"), ours, r.get("cusparse_agrees", False), want)
        if "cusparse_error" in r:
            text += f"; cuSPARSE fails ({r['cusparse_error'].split(':')[0]})"
        text += _versus("naive merge", r.get("merge_ms"), ours, r.get("merge_agrees", False), 4)
        text += _versus("cuVS", r.get("cuvs_ms"), ours, r.get("cuvs_check", {}).get("ok", False), 2)
        if r.get("cuvs_check", {}).get("ok") is False:
            c = r["cuvs_check"]
            text += f" (cuVS: {c['wrong_entries']} of {c['entries']} checked entries off {c['against']}"
            text += f", {c['nan_entries']} NaN" if c.get("nan_entries") else ""
            text += (
                f", {c['number_where_nan']} a number where {c['against']} is NaN" if c.get("number_where_nan") else ""
            )
            text += ")"
        if "cuvs_error" in r:
            text += f"; cuVS fails ({r['cuvs_error'][:80]})"
        if r["check"].get("checked") and not r["check"]["ok"]:
            text += "; OURS WRONG"
        lines.append(text)
    for r in knn:
        text = f"kNN {r['dataset']} {r['metric']}: {r['public_cupy_ms']} ms"
        for peer, want in (("cusparse", 2), ("dense", 1)):
            correct = r.get(f"{peer}_kth_distance_max_diff", 1.0) <= 1e-3
            text += _versus(
                f"{peer} + argpartition", r.get(f"{peer}_argpartition_ms"), r["public_cupy_ms"], correct, want
            )
        correct = r.get("cuvs_kth_distance_max_diff", 1.0) <= 1e-3
        text += _versus("cuVS brute-force", r.get("cuvs_ms"), r["public_cupy_ms"], correct, 4)
        if "cuvs_error" in r:
            text += f"; cuVS fails ({r['cuvs_error'][:80]})"
        lines.append(text)
    return lines


def table(rows: list[dict], knn: list[dict]) -> list[str]:
    """The results as Markdown tables (docs/cuda.md is made from them)."""

    def peer(r, key, ok):
        if key not in r:
            failed = {"cusparse_ms": "cusparse_error", "cuvs_ms": "cuvs_error"}.get(key) in r
            return "fails" if failed else "—"
        right = r[ok].get("ok", False) if isinstance(r.get(ok), dict) else r.get(ok, False)
        return f"{r[key]:,}" + ("" if right else " **wrong**")

    def speedup(r, key):
        return f"{r[key] / r['public_cupy_ms']:.2f}×" if key in r else "—"

    out = [
        (
            "| dataset | metric | ours, CuPy in | ours, SciPy in | kernel only | cuSPARSE | dense cuBLAS (+ densify) "
            "| naive merge | cuVS | extra MiB (budget) |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        dense = peer(r, "dense_ms", "dense_agrees")
        if "densify_ms" in r:
            dense += f" (+ {r['densify_ms']:,})"
        over = "" if r["public_extra_mib"] <= r["memory_budget_mib"] else " **over**"
        out.append(
            f"| {r['dataset']} | {r['metric']} | {r['public_cupy_ms']:,} | {r['public_scipy_ms']:,} | {r['kernel_ms']:,} "
            f"| {peer(r, 'cusparse_ms', 'cusparse_agrees')} | {dense} | {peer(r, 'merge_ms', 'merge_agrees')} "
            f"| {peer(r, 'cuvs_ms', 'cuvs_check')} | {r['public_extra_mib']:,} ({r['memory_budget_mib']:,}){over} |"
        )
    out += [
        "",
        "Speed-up of ours at the public call (CuPy in): the peer's milliseconds over ours.",
        "",
        "| dataset | metric | over cuSPARSE | over naive merge | over cuVS |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r['dataset']} | {r['metric']} | {speedup(r, 'cusparse_ms')} | {speedup(r, 'merge_ms')} "
            f"| {speedup(r, 'cuvs_ms')} |"
        )
    out += [
        "",
        (
            "| kNN, all rows, k = 10 | ours, CuPy in | ours, SciPy in | cuSPARSE + argpartition "
            "| dense cuBLAS + argpartition | cuVS brute-force | extra MiB |"
        ),
    ]
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in knn:
        cells = []
        for key in ("cusparse_argpartition", "dense_argpartition", "cuvs"):
            peer_name = key.split("_")[0]
            if f"{key}_ms" not in r:
                cells.append("fails" if f"{peer_name}_error" in r else "—")
                continue
            wrong = r[f"{peer_name}_kth_distance_max_diff"] > 1e-3
            cells.append(f"{r[f'{key}_ms']:,}" + (" **wrong**" if wrong else ""))
        out.append(
            f"| {r['dataset']} {r['metric']} | {r['public_cupy_ms']:,} | {r['public_scipy_ms']:,} | {cells[0]} "
            f"| {cells[1]} | {cells[2]} | {r['public_extra_mib']:,} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--report",
        type=Path,
        nargs="+",
        help="print the tables and summary of these results files, and stop (a run in parts: a later file's row "
        "of a dataset and measure replaces an earlier one's)",
    )
    parser.add_argument("--seed", type=int, help="seed of the generated datasets (required for a run)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--metrics", default=",".join(d.name for d in DISTANCES))
    parser.add_argument("--knn-datasets", default="movielens")
    parser.add_argument("--knn-metrics", default="cosine,cityblock")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--cuvs", help="the cuVS harness (benchmarks/cuvs); default $CUVS_HARNESS or ~/cuvs/root/cuvs_harness if built"
    )
    parser.add_argument("--cuvs-workdir", type=Path, help="where the CSR files for cuVS go (default: a temp folder)")
    args = parser.parse_args()
    if args.report:
        rows, knn, runs = {}, {}, []
        for path in args.report:
            results = json.loads(path.read_text())
            meta = results["meta"]
            runs.append(f"- `{path.name}`: commit {meta['commit']}, {meta['device']}, `{meta['command']}`")
            rows.update({(r["dataset"], r["metric"]): r for r in results["rows"]})
            knn.update({(r["dataset"], r["metric"]): r for r in results["knn"]})
        rows, knn = list(rows.values()), list(knn.values())
        print("\n".join([*runs, "", *table(rows, knn), "", *summary(rows, knn)]))
        return
    if args.seed is None:
        parser.error("--seed is required: the datasets are drawn with it")
    import cupy
    import cupyx.scipy.sparse as csp

    meta = {
        "command": "python benchmarks/public_api_bench.py " + " ".join(sys.argv[1:]),
        "commit": commit(),
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "cupy": cupy.__version__,
    }
    harness_path = find_cuvs_harness(args.cuvs)
    harness = None
    if harness_path:
        version = harness_path.parent / "CUVS_VERSION"
        meta["cuvs"] = {
            "harness": str(harness_path),
            "version": version.read_text().split() if version.is_file() else None,
        }
        workdir = args.cuvs_workdir or Path(tempfile.mkdtemp(prefix="cuvs-"))
        harness = CuvsHarness(harness_path, workdir, args.repeats)
    print(json.dumps(meta), flush=True)
    rows, knn, refused = [], [], []

    def save():
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            results = {"meta": meta, "rows": rows, "knn": knn, "refused": refused, "summary": summary(rows, knn)}
            args.json.write_text(json.dumps(results))

    metrics = args.metrics.split(",")
    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=args.seed)
        Q = X[: args.queries]
        print(f"{name}: {describe(X)}", flush=True)
        qi, xi = sample(Q, X, np.random.default_rng(args.seed))
        cupy.get_default_memory_pool().free_all_blocks()
        cuvs = harness.pairwise(Q, X, [get_metric(m).name for m in metrics], qi) if harness else {}
        Xc, Qc = csp.csr_matrix(X), csp.csr_matrix(Q)
        for metric in metrics:
            try:
                rows.append(run_metric(name, metric, Q, X, Qc, Xc, args, qi, xi, cuvs.get(get_metric(metric).name)))
            except ValueError as exc:  # our input rules refuse it here (seuclidean's V on constant columns): noted
                print(f"{name} {metric}: refused: {exc}", flush=True)
                refused.append({"dataset": name, "metric": metric, "refused": str(exc)})
            save()
        del Xc, Qc, cuvs
    knn_metrics = args.knn_metrics.split(",")
    for name in filter(None, args.knn_datasets.split(",")):  # --knn-datasets "" runs no kNN
        X = make_dataset(name, args.scale, seed=args.seed)
        cupy.get_default_memory_pool().free_all_blocks()
        cuvs = harness.knn(X, knn_metrics, K + 1) if harness else {}
        Xc = csp.csr_matrix(X)
        for metric in knn_metrics:
            knn.append(run_knn(name, metric, X, Xc, args, cuvs.get(metric)))
            save()
        del Xc, cuvs
    print("\n".join([*table(rows, knn), "", *summary(rows, knn)]))


if __name__ == "__main__":
    main()
