"""Suite ``cpu``: the CPU engine against scikit-learn, python-graphblas and networkx, the same threads on
every side, each result checked.

On seeded datasets shaped like the paper's (``synthetic.make_dataset``), the first ``--queries`` rows against
every row:

* ``distances.pairwise_distances(Q, X, metric, backend="cpu")`` against scikit-learn
  ``pairwise_distances(Q, X, metric, n_jobs=threads)`` (cosine, euclidean, manhattan);
* ``semiring.pairwise(Q, X, plus_times, backend="cpu")`` (dense result) against python-graphblas
  ``mxm(Q, X.T, plus_times)`` with its result made dense (what ours returns), and ``sparse=True`` against
  ``mxm`` as it is (both sparse);
* a call's input checks (``semiring.validation.check_pair``): the engine's one pass against NumPy's;
* ``graph.triangle_count(A, backend="cpu")`` (total, and ``per="edge"``) on R-MAT graphs against
  python-graphblas's masked ``plus_pair`` products; ``graph.ktruss(A, k)`` against ``networkx.k_truss``
  (one call in a subprocess with a time limit: networkx is single-threaded and slow).

Every side runs ``--threads`` threads (numba's, GraphBLAS's nthreads, scikit-learn's n_jobs, BLAS under
scikit-learn held to one thread so that it cannot use more); graphblas gets its matrices converted outside
the timing.  Every timing: one warm-up call (for ours, numba's compilation: reported apart), then the median
of ``--repeats``; the CPU time of the median call says how many cores a side kept busy, and the share other
processes took says whether the figure can be quoted (rerun when it is not near 0).

Checks, in the same run, of ours and each peer: distances against SciPy ``cdist`` in float64 on sampled
entries; the product against the float64 product of the sampled rows; the triangle counts against set
arithmetic at sampled vertices (per vertex) and per edge; the k-truss against networkx's edge set.

    python -m benchmarks cpu --seed 0 --scale 0.1 --threads 2 --json benchmarks/results/cpu_2threads.json
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from . import peers
from .record import Results
from .reference import compare, count_check, pairwise_reference, sample, sklearn_convention
from .synthetic import DATASETS, describe, make_dataset, rmat_csr
from .timing import _others_share, _system_busy_s, on_host

METRICS = ("cosine", "euclidean", "manhattan")
MEASURES = (*METRICS, "plus_times", "sparse", "checks")


def add_arguments(p) -> None:
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--scale", type=float, default=0.1, help="fraction of each dataset's rows")
    p.add_argument("--queries", type=int, help="query rows (default 2048 × scale, at least 128)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads of every side (default: all cores)")
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated; '' for the graphs only")
    p.add_argument("--measures", default=",".join(MEASURES), help=f"a subset of {', '.join(MEASURES)}")
    p.add_argument("--rmat-scales", default="16,18", help="R-MAT scales of the triangle counts ('' skips)")
    p.add_argument("--ktruss-scales", default="12", help="R-MAT scales of the k-truss ('' skips)")
    p.add_argument("--ktruss-k", type=int, default=5)
    p.add_argument("--ktruss-timeout", type=float, default=60.0)
    p.add_argument("--check-queries", type=int, default=16)
    p.add_argument("--check-rows", type=int, default=2000)
    p.add_argument("--json", type=Path)


def _row(results, dataset, measure, peer, ours_t, peer_t, checks: dict) -> None:
    results.add(
        {
            "dataset": dataset,
            "measure": measure,
            "peer": peer,
            "ours": ours_t.as_dict(),
            "peer_timing": peer_t.as_dict() if hasattr(peer_t, "as_dict") else peer_t,
            "checks": checks,
            "speedup": round((peer_t.ms if hasattr(peer_t, "ms") else peer_t["median_ms"]) / ours_t.ms, 3),
        }
    )


def bench_dataset(name: str, args, results) -> None:
    import graphblas as gb
    from sklearn.metrics import pairwise_distances as sk_pairwise

    import semiring
    from semiring import distances
    from semiring.distances.specs import get_metric

    X = make_dataset(name, args.scale, args.seed)
    Q = X[: min(args.queries, X.shape[0])]
    results.extra.setdefault("datasets", {})[name] = {"queries": Q.shape[0], **describe(X)}
    qi, xi = sample(Q, X, np.random.default_rng(args.seed), args.check_queries, args.check_rows)
    against = f"SciPy float64 on {len(qi)} x {len(xi)} sampled entries"
    measures = args.measures.split(",")

    for metric in [m for m in METRICS if m in measures]:
        spec = get_metric(metric)
        want = pairwise_reference(spec.name, spec.scipy, Q, X, qi, xi)
        ours_t, ours = on_host(
            lambda m=metric: distances.pairwise_distances(Q, X, metric=m, backend="cpu"), args.repeats
        )
        peer_t, ref = on_host(lambda m=metric: sk_pairwise(Q, X, metric=m, n_jobs=args.threads), args.repeats)
        checks = {"ours": compare(ours[np.ix_(qi, xi)], want, "ours", against)}
        want_peer, note = sklearn_convention(metric, want, Q, X, qi, xi)
        checks["peer"] = compare(ref[np.ix_(qi, xi)], want_peer, "scikit-learn", against)
        if note:
            checks["peer"]["note"] = note
        _row(results, name, metric, "scikit-learn", ours_t, peer_t, checks)
        del ours, ref

    A, B = gb.io.from_scipy_sparse(Q), gb.io.from_scipy_sparse(X)  # converted outside the timing
    want = (Q[qi].astype(np.float64) @ X[xi].astype(np.float64).T).toarray()
    against = f"float64 product of {len(qi)} x {len(xi)} sampled rows"
    if "plus_times" in measures:
        ours_t, ours = on_host(lambda: semiring.pairwise(Q, X, semiring.plus_times, backend="cpu"), args.repeats)
        peer_t, ref = on_host(lambda: A.mxm(B.T, gb.semiring.plus_times).new().to_dense(fill_value=0), args.repeats)
        checks = {"ours": compare(ours[np.ix_(qi, xi)], want, "ours", against)}
        checks["peer"] = compare(ref[np.ix_(qi, xi)], want, "python-graphblas", against)
        _row(results, name, "plus_times", "graphblas", ours_t, peer_t, checks)
        del ours, ref
    if "sparse" in measures:
        ours_t, ours = on_host(
            lambda: semiring.pairwise(Q, X, semiring.plus_times, backend="cpu", sparse=True), args.repeats
        )
        peer_t, ref = on_host(lambda: A.mxm(B.T, gb.semiring.plus_times).new(), args.repeats)
        ref = gb.io.to_scipy_sparse(ref).tocsr()
        checks = {"ours": compare(ours[qi][:, xi].toarray(), want, "ours", against)}
        checks["peer"] = compare(ref[qi][:, xi].toarray(), want, "python-graphblas", against)
        checks["ours"]["stored_entries"], checks["peer"]["stored_entries"] = int(ours.nnz), int(ref.nnz)
        _row(results, name, "plus_times sparse", "graphblas", ours_t, peer_t, checks)
        del ours, ref
    if "checks" in measures:
        from semiring import validation
        from semiring.kernels.cpu import checks as cpu_checks

        ours_t, ours = on_host(lambda: validation.check_pair(Q, X, verdicts=cpu_checks.csr_verdicts), args.repeats)
        peer_t, ref = on_host(lambda: validation.check_pair(Q, X), args.repeats)
        # valid inputs come back as checked matrices over the caller's own arrays: no copy, nothing changed
        same = all(
            all(getattr(a, part) is getattr(b, part) for part in ("data", "indices", "indptr"))
            for a, b in zip((*ours, *ref), (Q, X, Q, X))
        )
        check = {"subject": "ours", "against": "the inputs themselves (valid: their arrays given back)", "ok": same}
        _row(results, name, "input checks", "numpy", ours_t, peer_t, {"ours": check})


def bench_triangles(scale: int, args, results) -> None:
    import graphblas as gb

    from semiring import graph

    from .suite_graph import vertex_triangles_reference

    A = rmat_csr(scale, seed=args.seed)
    n = A.shape[0]
    M = gb.io.from_scipy_sparse(A)
    L, U = gb.select.tril(M, -1).new(), gb.select.triu(M, 1).new()

    def peer_total():
        C = gb.Matrix(gb.dtypes.INT64, n, n)
        C(L.S) << L.mxm(U.T, gb.semiring.plus_pair)
        return int(C.reduce_scalar().value or 0)

    def peer_edges():
        C = gb.Matrix(gb.dtypes.INT64, n, n)
        C(M.S) << M.mxm(M.T, gb.semiring.plus_pair)
        return C

    rng = np.random.default_rng(args.seed)
    vertices = np.sort(rng.choice(n, min(200, n), replace=False))
    want_v = vertex_triangles_reference(A, vertices)
    per_vertex = graph.triangle_count(A, per="vertex", backend="cpu")
    vertex_check = {
        "subject": "ours",
        "against": "set arithmetic at 200 sampled vertices",
        "ok": bool(np.array_equal(np.asarray(per_vertex)[vertices], want_v)),
    }
    ours_t, ours = on_host(lambda: graph.triangle_count(A, backend="cpu"), args.repeats)
    peer_t, ref = on_host(peer_total, args.repeats)
    checks = {
        "ours per vertex": vertex_check,
        "ours": count_check(
            int(ours), int(np.asarray(per_vertex).sum()) // 3, "ours", "its per-vertex counts (checked): Σ / 3"
        ),
        "peer": count_check(ref, int(ours), "python-graphblas", "ours (checked per vertex)"),
    }
    _row(results, f"rmat{scale}", "triangle count", "graphblas", ours_t, peer_t, checks)

    ours_t, ours = on_host(lambda: graph.triangle_count(A, per="edge", backend="cpu"), args.repeats)
    peer_t, ref = on_host(peer_edges, args.repeats)
    ref = gb.io.to_scipy_sparse(ref).tocsr()
    from .reference import edge_check, sample_edges

    u, v = sample_edges(A, rng)
    ours_edges = sp.csr_matrix(ours)
    # triangles at an edge = its common neighbours
    checks = {
        "ours": edge_check(A, ours_edges, u, v, "common_neighbors", "ours"),
        "peer": edge_check(A, ref, u, v, "common_neighbors", "python-graphblas"),
    }
    _row(results, f"rmat{scale}", "triangles per edge", "graphblas", ours_t, peer_t, checks)


def bench_ktruss(scale: int, args, results) -> None:
    from semiring import graph

    A = rmat_csr(scale, seed=args.seed)
    k = args.ktruss_k
    ours_t, ours = on_host(lambda: graph.ktruss(A, k, backend="cpu"), args.repeats)
    ours_edges = {(int(u), int(v)) for u, v in zip(*sp.triu(ours, 1).nonzero())}
    r = peers.networkx_ktruss(A, k, args.ktruss_timeout)
    if "result" in r:
        check = {
            "subject": "ours",
            "against": "networkx.k_truss's edge set",
            "ok": ours_edges == r["result"],
            "ours_edges": len(ours_edges),
            "networkx_edges": len(r["result"]),
        }
        peer_t = r["timing"]
    else:
        check = {"subject": "ours", "against": None, "ok": None, "unchecked": f"networkx: {r['error']}"}
        peer_t = {"clock": "wall", "median_ms": 1e3 * args.ktruss_timeout, "cut_off": True}
    _row(results, f"rmat{scale}", f"{k}-truss", "networkx", ours_t, peer_t, {"ours": check})


def main(args) -> int:
    if args.queries is None:
        args.queries = max(128, round(2048 * args.scale))
    # numba fixes its thread-pool ceiling at import: raise it first so that --threads is allowed above the cores
    os.environ["NUMBA_NUM_THREADS"] = str(max(args.threads, os.cpu_count() or 1))
    import graphblas as gb
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(args.threads)
    gb.ss.config["nthreads"] = args.threads
    threadpool_limits(limits=1, user_api="blas")  # scikit-learn's n_jobs threads, each on one BLAS thread
    results = Results("cpu", args, args.json)
    busy0, own0 = _system_busy_s(), time.process_time()
    time.sleep(1.0)
    results.meta["others_cpu_before"] = _others_share(busy0, _system_busy_s(), time.process_time() - own0, 1.0)
    start, busy_start, own_start = time.perf_counter(), _system_busy_s(), time.process_time()
    for name in filter(None, args.datasets.split(",")):
        bench_dataset(name, args, results)
    for scale in (int(x) for x in args.rmat_scales.split(",") if x.strip()):
        bench_triangles(scale, args, results)
    for scale in (int(x) for x in args.ktruss_scales.split(",") if x.strip()):
        bench_ktruss(scale, args, results)
    total = time.perf_counter() - start
    results.meta["total_s"] = round(total, 1)
    results.meta["others_cpu"] = _others_share(busy_start, _system_busy_s(), time.process_time() - own_start, total)
    results.meta["threads"] = args.threads
    return results.finish()
