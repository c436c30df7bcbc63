"""Graph measures on R-MAT graphs: ours on the GPU against cuSPARSE SpGEMM and python-graphblas.

R-MAT with the Graph500 parameters (a=0.57, b=0.19, c=0.19, edge factor 16),
vertex labels permuted, undirected, self-loops and duplicates removed; seeded.
For each scale it times (CUDA events, median of repeats, device-resident input,
the public ``distances.graph`` call including its input checks):

* ours: ``triangle_count`` (degree order, and vertex-id order), ``jaccard`` at
  every edge, ``common_neighbors``; peak GPU memory one call allocates, its
  result included (``measure.PeakMemory``);
* cuSPARSE SpGEMM through cupyx: ``(L·L)∘L`` (triangles) and ``(A·A)∘A``
  (triangles ×6 and per-edge common neighbours), their answers checked;
* python-graphblas (SuiteSparse) on all CPU cores, in a subprocess with a time
  limit: ``C⟨L⟩ = L plus.pair Uᵀ`` (triangles), ``C⟨A⟩ = A plus.pair Aᵀ``
  (common neighbours) and Jaccard from it.

    python benchmarks/graph_bench.py --scales 18,20,22

Writes ``graph_bench.json`` and ``graph_bench.md`` to ``$OUT`` when set, else
to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure
import numpy as np

GRAPH500 = {"a": 0.57, "b": 0.19, "c": 0.19}


def rmat(scale: int, edge_factor: int = 16, seed: int = 0, xp=np):
    """(indptr, indices) of an undirected R-MAT graph: symmetric, sorted rows, no self-loops or duplicates."""
    n, m = 1 << scale, edge_factor << scale
    a, b, c = GRAPH500["a"], GRAPH500["b"], GRAPH500["c"]
    rs = xp.random.RandomState(seed)
    u = xp.zeros(m, np.int64)
    v = xp.zeros(m, np.int64)
    for bit in range(scale):  # Graph500's generator: one quadrant choice per bit
        row = rs.random_sample(m) > (a + b)
        col = rs.random_sample(m) > xp.where(row, c / (1 - a - b), a / (a + b))
        u |= row.astype(np.int64) << bit
        v |= col.astype(np.int64) << bit
    perm = rs.permutation(n).astype(np.int64)
    u, v = perm[u], perm[v]
    keep = u != v
    lo, hi = xp.minimum(u[keep], v[keep]), xp.maximum(u[keep], v[keep])
    key = xp.unique(lo * n + hi)
    lo, hi = key // n, key % n
    both = xp.sort(xp.concatenate([lo * n + hi, hi * n + lo]))
    rows, cols = both // n, both % n
    indptr = xp.searchsorted(rows, xp.arange(n + 1)).astype(np.int32)
    return indptr, cols.astype(np.int32), n


def timed(fn, repeats: int):
    """(median ms between CUDA events after a warm-up, peak bytes one more call allocates, its result included,
    result): ``measure.timed`` and ``measure.PeakMemory``."""
    ms, result = measure.timed(fn, repeats)
    return ms, round(measure.PeakMemory().peak_mib(fn) * measure.MIB), result


def cusparse(name: str, fn, repeats: int):
    """Time a cuSPARSE product; a failure is recorded with its reason, not raised."""
    import cupy

    try:
        ms, peak, value = timed(fn, repeats)
        return {"ms": ms, "peak_bytes": peak, "value": value}
    except Exception as exc:  # noqa: BLE001 - cuSPARSE and the pool raise several kinds; the reason is the result
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    finally:
        cupy.get_default_memory_pool().free_all_blocks()


def run_gpu(scale: int, repeats: int, seed: int, gb_timeout: float) -> dict:
    import cupy
    import cupyx.scipy.sparse as csp

    from semiring.distances import graph
    from semiring.kernels.cuda import graph as cuda_graph

    t0 = time.perf_counter()
    indptr, indices, n = rmat(scale, seed=seed, xp=cupy)
    A = csp.csr_matrix((cupy.ones(indices.size, np.float32), indices, indptr), shape=(n, n))
    edges = int(indices.size) // 2
    res = {"scale": scale, "vertices": n, "edges": edges, "generate_s": time.perf_counter() - t0}
    deg = cupy.diff(indptr)
    res["max_degree"] = int(deg.max())
    print(f"scale {scale}: {n} vertices, {edges} undirected edges, max degree {res['max_degree']}", flush=True)

    ours = {}
    for label, strategy, fn in (
        ("triangles", "auto", lambda: graph.triangle_count(A)),
        ("triangles_id_order", "auto", lambda: graph.triangle_count(A, order="id")),
        ("jaccard", "oriented", lambda: graph.jaccard(A)),
        ("common_neighbors", "oriented", lambda: graph.common_neighbors(A)),
        ("jaccard_direct", "direct", lambda: graph.jaccard(A)),
        ("common_neighbors_direct", "direct", lambda: graph.common_neighbors(A)),
    ):
        os.environ[cuda_graph.EDGE_STRATEGY_ENV] = strategy
        ms, peak, value = timed(fn, repeats)
        ours[label] = {"ms": ms, "peak_bytes": peak, "peak_bytes_per_edge": peak / max(edges, 1)}
        if label.startswith("triangles"):
            ours[label]["value"] = int(value)
        print(f"  ours {label}: {ms:.2f} ms, peak {peak / 2**20:.0f} MiB", flush=True)
        if label.endswith("direct"):  # both ways give the same per-edge counts and the same Jaccard
            os.environ[cuda_graph.EDGE_STRATEGY_ENV] = "oriented"
            other = graph.jaccard(A) if label.startswith("jaccard") else graph.common_neighbors(A)
            ours[label]["same_as_oriented"] = bool(cupy.allclose(value.data, other.data, rtol=1e-14, atol=0))
    os.environ.pop(cuda_graph.EDGE_STRATEGY_ENV)
    triangles = ours["triangles"]["value"]
    assert ours["triangles_id_order"]["value"] == triangles
    cn = graph.common_neighbors(A).data
    assert int(cn.sum()) == 6 * triangles  # each triangle has three edges, each stored twice
    res["triangles"] = triangles
    jac = graph.jaccard(A)

    # the phases of the triangle count, from the engine (the public call = check + orient + count)
    G = cuda_graph.from_cupy(A)
    phases = {}
    for label, fn in (
        ("check", lambda: cuda_graph.check_graph(G, False)),
        ("orient", lambda: cuda_graph.orient(G, True)),
        ("count", None),
    ):
        if fn is None:
            lp, li, lr = cuda_graph.orient(G, True)
            total = cupy.zeros(1, np.uint64)

            def fn(lp=lp, li=li, lr=lr, total=total):
                total[...] = 0
                cuda_graph.intersect("total", lp, li, lr, total)

        phases[label] = measure.timed(fn, repeats)[0]
    ours["triangle_phases_ms"] = phases
    res["ours"] = ours

    peers = {}
    A64 = A.astype(np.float64)  # float64 products: float32 sums of ~1e9 counts would round
    try:
        L = csp.tril(A64, k=-1, format="csr")
        r = cusparse("cusparse_LL_L", lambda: float(((L @ L).multiply(L)).sum()), 2)
    except Exception as exc:  # noqa: BLE001 - recorded, as for the products
        r = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    if "value" in r:
        r["returned"] = r.pop("value")
        r["correct"] = round(r["returned"]) == triangles
    peers["cusparse (L·L)∘L triangles"] = r
    L = None

    def aaa():
        C = (A64 @ A64).multiply(A64).tocsr()
        C.sum_duplicates()
        return C

    r = cusparse("cusparse_AA_A", aaa, 2)
    if "value" in r:
        C = r.pop("value")
        r["returned"] = float(C.sum()) / 6
        r["correct"] = bool(round(r["returned"] * 6) == 6 * triangles)
        ours_cn = csp.csr_matrix((cn.astype(np.float64), A.indices, A.indptr), shape=A.shape)
        r["correct"] = r["correct"] and float(abs(C - ours_cn).sum()) == 0.0
        C = None
    peers["cusparse (A·A)∘A triangles / common neighbours"] = r
    cupy.get_default_memory_pool().free_all_blocks()
    for k, v in peers.items():
        print(f"  {k}: {v}", flush=True)

    # python-graphblas on the CPU cores, in a subprocess so that a slow run is cut off
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.npz"
        np.savez(path, indptr=indptr.get(), indices=indices.get())
        gb = {}
        for op in ("triangles", "common_neighbors"):
            cmd = [sys.executable, __file__, "--graphblas", str(path), "--op", op]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=gb_timeout, check=True)
                gb[op] = json.loads(out.stdout.strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                gb[op] = {"error": f"timed out after {gb_timeout:.0f} s", "ms_at_least": 1000 * gb_timeout}
            except subprocess.CalledProcessError as exc:
                gb[op] = {"error": exc.stderr.strip().splitlines()[-1][:200]}
            print(f"  graphblas {op}: {gb[op]}", flush=True)
    if "value" in gb.get("triangles", {}):
        gb["triangles"]["correct"] = gb["triangles"].pop("value") == triangles
    if "cn_sum" in gb.get("common_neighbors", {}):
        gb["common_neighbors"]["correct"] = gb["common_neighbors"].pop("cn_sum") == 6 * triangles
        want = float(jac.data.sum())
        gb["common_neighbors"]["jaccard_correct"] = abs(gb["common_neighbors"].pop("jaccard_sum") - want) < 1e-6 * want
    peers["python-graphblas"] = gb
    res["peers"] = peers
    return res


def run_graphblas(path: str, op: str) -> None:
    """Subprocess: one graphblas measurement on the saved graph; prints one JSON line."""
    import resource

    import graphblas as gb
    import scipy.sparse as sp

    f = np.load(path)
    n = f["indptr"].size - 1
    A = sp.csr_matrix((np.ones(f["indices"].size), f["indices"], f["indptr"]), shape=(n, n))
    M = gb.io.from_scipy_sparse(A)
    out = {"threads": gb.ss.config["nthreads"]}
    if op == "triangles":
        L, U = gb.select.tril(M, -1).new(), gb.select.triu(M, 1).new()
        t0 = time.perf_counter()
        C = gb.Matrix(gb.dtypes.INT64, n, n)
        C(L.S) << L.mxm(U.T, gb.semiring.plus_pair)
        out["value"] = int(C.reduce_scalar().value or 0)
        out["ms"] = 1000 * (time.perf_counter() - t0)
    else:
        t0 = time.perf_counter()
        C = gb.Matrix(gb.dtypes.INT64, n, n)
        C(M.S) << M.mxm(M.T, gb.semiring.plus_pair)
        out["ms"] = 1000 * (time.perf_counter() - t0)
        d = M.reduce_rowwise(gb.monoid.plus).new()
        D = d.diag()
        du = D.mxm(C, gb.semiring.any_first).new()
        dv = C.mxm(D, gb.semiring.any_second).new()
        union = (du + dv).new()
        union(accum=gb.binary.minus) << C
        J = (C / union).new()
        out["jaccard_ms"] = 1000 * (time.perf_counter() - t0)
        out["cn_sum"] = int(C.reduce_scalar().value or 0)
        out["jaccard_sum"] = float(J.reduce_scalar().value or 0)
    out["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


def markdown(results: list[dict], device: str, cpu_cores: int) -> str:
    lines = [
        (
            f"GPU: {device}; python-graphblas on {cpu_cores} CPU cores. Times in ms (median); "
            "memory: peak GPU allocation of one call (its result included) beyond the input graph."
        ),
        "",
        (
            "| scale | vertices | edges | triangles | ours TC (degree / id order) | ours Jaccard | ours CN "
            "| ours Jaccard / CN, direct "
            "| peak MiB TC / Jaccard / CN | cuSPARSE (L·L)∘L | cuSPARSE (A·A)∘A | graphblas TC "
            "| graphblas CN / Jaccard | TC speed-up vs graphblas |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|",
    ]

    def peer(r):
        if "error" in r:
            return f"fails: {r['error'][:60]}"
        if r.get("correct"):
            return f"{r['ms']:.1f} ms, right"
        return f"{r['ms']:.1f} ms, WRONG: {r['returned']:,.0f} triangles"

    for r in results:
        o, p = r["ours"], r["peers"]
        g = p["python-graphblas"]
        gtc, gcn = g.get("triangles", {}), g.get("common_neighbors", {})
        gtc_ms = gtc.get("ms", gtc.get("ms_at_least"))
        speedup = f"{gtc_ms / o['triangles']['ms']:.0f}x" if gtc_ms else "-"
        if "ms_at_least" in gtc:
            speedup = "≥ " + speedup
        gcn_text = f"{gcn['ms']:.0f} / {gcn['jaccard_ms']:.0f}" if "ms" in gcn else gcn.get("error", "-")[:40]
        mib = "/".join(f"{o[k]['peak_bytes'] / 2**20:.0f}" for k in ("triangles", "jaccard", "common_neighbors"))
        lines.append(
            f"| {r['scale']} | {r['vertices']:,} | {r['edges']:,} | {r['triangles']:,} "
            f"| {o['triangles']['ms']:.2f} / {o['triangles_id_order']['ms']:.2f} | {o['jaccard']['ms']:.2f} "
            f"| {o['common_neighbors']['ms']:.2f} | {o['jaccard_direct']['ms']:.2f} / "
            f"{o['common_neighbors_direct']['ms']:.2f} | {mib} "
            f"| {peer(p['cusparse (L·L)∘L triangles'])} | {peer(p['cusparse (A·A)∘A triangles / common neighbours'])} "
            f"| {gtc_ms:.0f}{' (cut off)' if 'ms_at_least' in gtc else ''} | {gcn_text} | {speedup} |"
        )
    lines.append("")
    lines.append(
        "Triangle count phases (ms): "
        + "; ".join(
            f"scale {r['scale']}: " + ", ".join(f"{k} {v:.2f}" for k, v in r["ours"]["triangle_phases_ms"].items())
            for r in results
        )
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default="18,20,22")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--graphblas-timeout", type=float, default=60.0)
    parser.add_argument("--graphblas", help=argparse.SUPPRESS)
    parser.add_argument("--op", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.graphblas:
        run_graphblas(args.graphblas, args.op)
        return
    import cupy

    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else HERE / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for scale in args.scales.split(","):
        results.append(run_gpu(int(scale), args.repeats, args.seed, args.graphblas_timeout))
        report = {"device": device, "cpu_cores": os.cpu_count(), "results": results}
        (out_dir / "graph_bench.json").write_text(
            json.dumps(report, indent=1)
        )  # after each scale: a cut-off run keeps its part
        table = markdown(results, device, os.cpu_count())
        (out_dir / "graph_bench.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
