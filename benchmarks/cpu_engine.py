"""CPU engine benchmark: our numba engine against scikit-learn and SuiteSparse:GraphBLAS.

Run from the repository root::

    python benchmarks/cpu_engine.py --scale 0.1
    python benchmarks/cpu_engine.py --scale 1 --threads 16 --json results.json
    python benchmarks/cpu_engine.py --scale 0.25 --queries 512 --threads 2 --measures sparse \
        --rmat-scales= --ktruss-scales= --seed 0      # the sparse product against mxm only

What it measures, on seeded synthetic datasets shaped like the paper's
(``benchmarks/datasets.py``: MovieLens, NY Times, scRNA, EDGAR), in the paper's
setting of the first ``--queries`` rows (2048 at scale 1) against every row:

* ``distances.pairwise_distances(Q, X, metric=m, backend="cpu")`` against
  ``sklearn.metrics.pairwise_distances(Q, X, metric=m, n_jobs=threads)`` for
  cosine, euclidean and manhattan;
* ``semiring.pairwise(Q, X, semiring.plus_times, backend="cpu")`` (dense result)
  against python-graphblas ``mxm(Q, X.T, plus_times)``, timed both with the
  conversion of its sparse result to a dense array (what ours returns) and
  without it;
* the same with ``sparse=True`` (only the entries produced, CSR) against
  ``mxm`` as is: both results sparse, checked for the same pattern and values;
* a call's input checks (``semiring.validation.check_pair``) by the CPU engine's
  one pass across threads against NumPy's reductions (``--measures checks``);
* ``semiring.distances.graph.triangle_count(A, backend="cpu")`` on R-MAT graphs
  (``--rmat-scales``, Graph500 parameters, seeded) against python-graphblas's
  masked ``plus_pair`` product, the counts compared: the total (``C⟨L⟩ = L
  plus.pair Uᵀ`` summed) and per edge (``per="edge"`` against ``C⟨A⟩ = A
  plus.pair Aᵀ``);
* ``graph.ktruss(A, k, backend="cpu")`` on R-MAT graphs (``--ktruss-scales``,
  ``--ktruss-k``) against ``networkx.k_truss``, one call in a subprocess cut
  off after ``--ktruss-timeout`` seconds (networkx is single-threaded, and
  recounts every support each round); the edge sets compared.

Every call is timed by wall clock, best of ``--repeats`` after one warm-up call;
the warm-up ("first call") time is reported separately because for our engine it
includes numba's compilation.  Both sides run with the same number of threads
(``--threads``, default all cores): numba's thread count, GraphBLAS' nthreads and
scikit-learn's n_jobs.  Core-ms (wall time × threads) compare the work per core;
a second table shows how many cores each side actually kept busy (process CPU
time / wall time) and how much CPU other processes took meanwhile: on a shared
machine, rerun when that is not near 0 %.

Each result of ours is checked against the peer's (np.isclose, rtol 1e-4, in
float64); where they disagree the entries are recomputed exactly in float64 to
say which side is off.  The JSON (``--json``) holds every timing, the checks,
the dataset statistics, the machine (cores, threads, library versions), the
command line and the commit it ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy

# The project is imported as installed (`pip install -e .`: one package, semiring, whose
# semiring.distances and semiring.kernels live in other folders); datasets.py sits next to this file.
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from datasets import DATASETS, describe, make_dataset
from measure import commit

METRICS = ("cosine", "euclidean", "manhattan")
# What --measures may name: the distances against scikit-learn, the dense and the sparse plus_times against mxm,
# and the input checks of a call (the CPU engine's one pass against NumPy's reductions).
MEASURES = (*METRICS, "plus_times", "sparse", "checks")

# Tolerances of the correctness checks.  Results are float32 (float32 inputs), so
# rtol 1e-4 leaves room for rounding; entries near zero (every query is also a
# row of X, so each query has a distance-0 partner) have no relative precision
# left in float32, hence an absolute tolerance relative to the largest entry.
RTOL = 1e-4
ATOL_REL = 1e-5


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--scale", type=float, default=0.1, help="fraction of each dataset's rows (default 0.1)")
    p.add_argument(
        "--queries",
        type=int,
        default=None,
        help="query rows, the first rows of the dataset (default 2048 × scale, at least 128)",
    )
    p.add_argument("--repeats", type=int, default=3, help="timed calls per measurement, best is reported (default 3)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every engine (default: all cores)")
    p.add_argument(
        "--datasets",
        nargs="*",
        choices=DATASETS,
        default=list(DATASETS),
        metavar="NAME",
        help=f"subset of {', '.join(DATASETS)} (none after --datasets: the graphs only)",
    )
    p.add_argument(
        "--measures",
        nargs="+",
        choices=MEASURES,
        default=list(MEASURES),
        metavar="NAME",
        help=f"the dataset rows to time, a subset of {', '.join(MEASURES)} (default all; sparse: plus_times "
        "with sparse=True against mxm; checks: a call's input checks)",
    )
    p.add_argument("--seed", type=int, default=0, help="dataset and graph seed (default 0)")
    p.add_argument(
        "--rmat-scales",
        default="16,18",
        help="R-MAT scales for the triangle count against python-graphblas, comma-separated; '' skips (default 16,18)",
    )
    p.add_argument(
        "--ktruss-scales",
        default="12",
        help="R-MAT scales for the k-truss against networkx, comma-separated; '' skips (default 12)",
    )
    p.add_argument("--ktruss-k", type=int, default=5, help="k of the k-truss against networkx (default 5)")
    p.add_argument(
        "--ktruss-timeout", type=float, default=60.0, help="seconds networkx's k_truss may take (default 60)"
    )
    p.add_argument("--json", type=Path, default=None, help="also write the results to this JSON file")
    args = p.parse_args(argv)
    if args.queries is None:
        args.queries = max(128, round(2048 * args.scale))
    if args.threads < 1 or args.repeats < 1 or args.queries < 1:
        p.error("--threads, --repeats and --queries must be at least 1")
    return args


# --------------------------------------------------------------------------- timing and checks


def _system_busy_s() -> float | None:
    """CPU seconds all processes have used (Linux /proc/stat), to detect competing load."""
    try:
        with open("/proc/stat") as f:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _others_share(busy0, busy1, own_s: float, wall_s: float) -> float | None:
    """Share of all cores used by other processes; None when unknown or the window is too
    short for /proc/stat's 10 ms ticks to say anything (under 0.25 s)."""
    if busy0 is None or busy1 is None or wall_s < 0.25:
        return None
    return min(1.0, max(0.0, (busy1 - busy0) - own_s) / (wall_s * (os.cpu_count() or 1)))


def timed(fn, repeats: int) -> tuple[dict, object]:
    """Warm-up call, then ``repeats`` timed calls; returns timings (ms) and the last result.

    ``others_cpu`` is the share of the machine's cores that *other* processes used
    during the timed calls: anything well above 0 means the timings are contended.
    """
    t0 = time.perf_counter()
    result = fn()
    first_ms = (time.perf_counter() - t0) * 1e3
    walls, cpus = [], []
    busy0, own0, wall0 = _system_busy_s(), time.process_time(), time.perf_counter()
    for _ in range(repeats):
        del result  # free the previous m×p result before allocating the next
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        walls.append((time.perf_counter() - w0) * 1e3)
        cpus.append((time.process_time() - c0) * 1e3)
    busy1, own1, wall1 = _system_busy_s(), time.process_time(), time.perf_counter()
    others = _others_share(busy0, busy1, own1 - own0, wall1 - wall0)
    best = int(np.argmin(walls))
    timing = {"best_ms": walls[best], "cpu_ms": cpus[best], "first_ms": first_ms, "all_ms": walls, "others_cpu": others}
    return timing, result


def compare(ours: np.ndarray, ref: np.ndarray, skip: np.ndarray | None = None) -> dict:
    """np.allclose in float64 (NaN equal to NaN), with the size of the worst disagreement.

    ``skip`` marks entries left out of the check (a broadcastable boolean mask).
    """
    a, b = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if a.shape != b.shape:
        return {"status": "MISMATCH", "detail": f"shape {a.shape} vs {b.shape}"}
    checked = np.ones(a.shape, bool) if skip is None else ~np.broadcast_to(skip, a.shape)
    finite = np.isfinite(b) & checked
    atol = ATOL_REL * (float(np.abs(b[finite]).max()) if finite.any() else 1.0)
    close = np.isclose(a, b, rtol=RTOL, atol=atol, equal_nan=True) | ~checked
    both = np.isfinite(a) & finite
    diff = np.where(both, np.abs(a - b), 0.0)
    # relative error only where it means something: entries well above the absolute tolerance
    big = both & (np.abs(b) > atol)
    rel = np.divide(diff, np.abs(b), out=np.zeros_like(diff), where=big)
    out = {
        "status": "CORRECT" if close.all() else "MISMATCH",
        "bad_entries": int((~close).sum()),
        "checked_entries": int(checked.sum()),
        "max_abs_diff": float(diff.max()) if diff.size else 0.0,
        "max_rel_diff": float(rel.max()) if rel.size else 0.0,
        "atol": atol,
        "rtol": RTOL,
    }
    if not close.all():
        i, j = np.argwhere(~close)[0]
        out["detail"] = f"first bad entry [{i}, {j}]: ours {a[i, j]!r} vs peer {b[i, j]!r}"
        out["_bad"] = np.argwhere(~close)[:MAX_ARBITRATED]
    return out


# Exact float64 values of single entries, to tell who is off when ours and the peer disagree.
TRUTH = {
    "cosine": lambda u, v: 1.0 - u @ v / np.sqrt((u @ u) * (v @ v)),
    "euclidean": lambda u, v: float(np.sqrt(((u - v) ** 2).sum())),
    "manhattan": lambda u, v: float(np.abs(u - v).sum()),
    "plus_times": lambda u, v: float(u @ v),
}
MAX_ARBITRATED = 1000


def arbitrate(cmp: dict, measure: str, Q, X, ours: np.ndarray, ref: np.ndarray) -> dict:
    """For entries where ours and the peer disagree, recompute the value in float64.

    Status becomes "CORRECT (peer off)" when ours matches the float64 value at every
    disagreeing entry (the peer's float32 rounding is what differs), else stays MISMATCH.
    """
    bad = cmp.pop("_bad", None)
    if bad is None:
        return cmp
    err_ours, err_peer, ours_ok = [], [], True
    for i, j in bad:
        u, v = (M[k].toarray().ravel().astype(np.float64) for M, k in ((Q, i), (X, j)))
        with np.errstate(all="ignore"):
            t = TRUTH[measure](u, v)
        err_ours.append(abs(float(ours[i, j]) - t))
        err_peer.append(abs(float(ref[i, j]) - t))
        ours_ok &= bool(np.isclose(float(ours[i, j]), t, rtol=RTOL, atol=cmp["atol"], equal_nan=True))
    cmp["arbitrated_entries"] = len(bad)
    cmp["max_err_vs_float64_ours"] = float(np.nanmax(err_ours))
    cmp["max_err_vs_float64_peer"] = float(np.nanmax(err_peer))
    if ours_ok and len(bad) == cmp["bad_entries"]:
        cmp["status"] = "CORRECT (peer off)"
    return cmp


def compare_sparse(ours, ref) -> dict:
    """Two sparse results: the same stored pattern, and values close (as ``compare``)."""
    ref = ref.tocsr()
    ref.sort_indices()
    same = (
        ours.shape == ref.shape
        and np.array_equal(ours.indptr, ref.indptr)
        and np.array_equal(ours.indices, ref.indices)
    )
    if not same:
        return {"status": "MISMATCH", "pattern": "differs", "ours_nnz": int(ours.nnz), "peer_nnz": int(ref.nnz)}
    cmp = compare(np.asarray(ours.data, np.float64)[None, :], np.asarray(ref.data, np.float64)[None, :])
    return {**cmp, "pattern": "same", "nnz": int(ours.nnz)}


def check_line(label: str, cmp: dict) -> str:
    line = f"  {cmp['status']:8s} {label}: " + (
        f"max |diff| {cmp['max_abs_diff']:.3g}, max rel {cmp.get('max_rel_diff', float('nan')):.3g}"
        if "max_abs_diff" in cmp
        else cmp.get("detail", "")
    )
    if cmp["status"] != "CORRECT":
        line += (
            f"; {cmp.get('bad_entries', '?')} of {cmp.get('checked_entries', '?')} entries differ, "
            f"{cmp.get('detail', '')}"
        )
    if "arbitrated_entries" in cmp:
        line += (
            f"\n           against float64 recomputation of {cmp['arbitrated_entries']} of them: "
            f"ours max err {cmp['max_err_vs_float64_ours']:.3g}, peer max err {cmp['max_err_vs_float64_peer']:.3g}"
        )
    return line


# --------------------------------------------------------------------------- one dataset


def bench_dataset(name: str, args, engines) -> tuple[dict, list[dict]]:
    distances, semiring, sk_pairwise, gb = engines
    t0 = time.perf_counter()
    X = make_dataset(name, args.scale, args.seed)
    gen_s = time.perf_counter() - t0
    q = min(args.queries, X.shape[0])
    Q = X[:q]  # a canonical CSR copy of the first rows: the query set
    info = {"dataset": name, "queries": q, "generate_s": gen_s, **describe(X)}
    print(
        f"\n## {name}: {q} queries × {X.shape[0]} rows × {X.shape[1]} cols, nnz {X.nnz} "
        f"({info['mean_nnz_per_row']:.1f}/row, {info['empty_rows']} empty rows, "
        f"top 1 % of columns hold {100 * info['top1pct_col_share']:.0f} % of values); generated in {gen_s:.1f} s",
        flush=True,
    )

    rows: list[dict] = []

    def record(measure, peer, ours_t, peer_t, cmp):
        rows.append(
            {
                "dataset": name,
                "measure": measure,
                "peer": peer,
                "ours": ours_t,
                "peer_timing": peer_t,
                "check": cmp,
                "speedup": peer_t["best_ms"] / ours_t["best_ms"],
            }
        )
        print(
            f"  {measure:22s} ours {ours_t['best_ms']:9.1f} ms (first {ours_t['first_ms']:8.1f})   "
            f"{peer:12s} {peer_t['best_ms']:9.1f} ms (first {peer_t['first_ms']:8.1f})",
            flush=True,
        )
        print(check_line(f"{name}/{measure} vs {peer}", cmp), flush=True)

    # Rows with no stored value: ours follows SciPy (cosine is NaN, 0/0) where scikit-learn
    # normalises the zero vector to zero and reports distance 1.  A documented convention
    # difference, not an error: those entries are excluded from the check and reported apart.
    empty = (np.diff(Q.indptr) == 0)[:, None] | (np.diff(X.indptr) == 0)[None, :]

    for metric in [m for m in METRICS if m in args.measures]:
        ours_t, ours = timed(lambda m=metric: distances.pairwise_distances(Q, X, metric=m, backend="cpu"), args.repeats)
        peer_t, ref = timed(lambda m=metric: sk_pairwise(Q, X, metric=m, n_jobs=args.threads), args.repeats)
        skip = empty if metric == "cosine" and empty.any() else None
        cmp = arbitrate(compare(ours, ref, skip), metric, Q, X, ours, ref)
        if skip is not None:
            cmp["empty_row_entries"] = int(skip.sum())
            cmp["empty_row_convention"] = (
                f"ours NaN: {bool(np.isnan(ours[skip]).all())}, sklearn 1.0: {bool(np.all(ref[skip] == 1.0))}"
            )
        record(metric, "scikit-learn", ours_t, peer_t, cmp)
        if skip is not None:
            print(f"  note     {skip.sum()} entries with an empty row skipped ({cmp['empty_row_convention']})")
        del ours, ref

    # GraphBLAS gets its inputs converted once, outside the timing (ours reads SciPy CSR directly).
    A, B = gb.io.from_scipy_sparse(Q), gb.io.from_scipy_sparse(X)
    if "plus_times" in args.measures:
        ours_t, ours = timed(lambda: semiring.pairwise(Q, X, semiring.plus_times, backend="cpu"), args.repeats)
        sparse_t, _ = timed(lambda: A.mxm(B.T, gb.semiring.plus_times).new(), args.repeats)
        dense_t, ref = timed(lambda: A.mxm(B.T, gb.semiring.plus_times).new().to_dense(fill_value=0), args.repeats)
        cmp = arbitrate(compare(ours, ref), "plus_times", Q, X, ours, ref)
        record("plus_times", "graphblas", ours_t, dense_t, cmp)
        record("plus_times (no dense)", "graphblas", ours_t, sparse_t, {**cmp, "note": "same check as plus_times"})
        del ours, ref
    if "sparse" in args.measures:
        # Sparse results on both sides: ours with sparse=True (only the entries produced), GraphBLAS's mxm as is.
        ours_t, ours = timed(
            lambda: semiring.pairwise(Q, X, semiring.plus_times, backend="cpu", sparse=True), args.repeats
        )
        sparse_t, ref = timed(lambda: A.mxm(B.T, gb.semiring.plus_times).new(), args.repeats)
        record("plus_times sparse", "graphblas", ours_t, sparse_t, compare_sparse(ours, gb.io.to_scipy_sparse(ref)))
        del ours, ref
    if "checks" in args.measures:
        # A call's checks of its two inputs (semiring.validation): the CPU engine's one pass across threads, used
        # from its VERDICTS_MIN_ENTRIES entries, against NumPy's reductions (SciPy's canonical-order test is cached
        # on the matrices after the first call, so that side's figure leaves it out).  Both accept the inputs as
        # they are: the check is that each gives back the very matrices it was given.
        from semiring import validation
        from semiring.kernels.cpu import checks

        def one_pass():
            return validation.check_pair(Q, X, verdicts=checks.csr_verdicts)

        ours_t, ours = timed(one_pass, args.repeats)
        peer_t, ref = timed(lambda: validation.check_pair(Q, X), args.repeats)
        same = all(a is b for a, b in zip((*ours, *ref), (Q, X, Q, X)))
        verdict = "the same matrices given back" if same else "other matrices given back"
        record(
            "input checks", "numpy", ours_t, peer_t, {"status": "CORRECT" if same else "MISMATCH", "detail": verdict}
        )
    return info, rows


# --------------------------------------------------------------------------- triangles


def bench_triangles(scale: int, args, engines) -> list[dict]:
    """The public ``graph.triangle_count(A, backend="cpu")`` (input checks and orientation included) against
    python-graphblas ``C⟨L⟩ = L plus.pair Uᵀ`` summed (its L and U made outside the timing), and
    ``per="edge"`` against ``C⟨A⟩ = A plus.pair Aᵀ``, on R-MAT."""
    import scipy.sparse as sp
    from graph_bench import rmat

    from semiring.distances import graph

    gb = engines[3]
    indptr, indices, n = rmat(scale, seed=args.seed)
    A = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
    print(f"\n## R-MAT {scale}: {n} vertices, {A.nnz // 2} undirected edges", flush=True)
    M = gb.io.from_scipy_sparse(A)
    L, U = gb.select.tril(M, -1).new(), gb.select.triu(M, 1).new()

    def peer():
        C = gb.Matrix(gb.dtypes.INT64, n, n)
        C(L.S) << L.mxm(U.T, gb.semiring.plus_pair)
        return int(C.reduce_scalar().value or 0)

    def peer_edges():
        C = gb.Matrix(gb.dtypes.INT64, n, n)
        C(M.S) << M.mxm(M.T, gb.semiring.plus_pair)
        return C

    rows = []
    ours_t, ours = timed(lambda: graph.triangle_count(A, backend="cpu"), args.repeats)
    peer_t, ref = timed(peer, args.repeats)
    status = "CORRECT" if int(ours) == ref else "MISMATCH"
    print(
        f"  triangles ours {ours_t['best_ms']:9.1f} ms   graphblas {peer_t['best_ms']:9.1f} ms   {status}: {ours} vs {ref}"
    )
    check = {"status": status, "ours": int(ours), "peer": ref}
    row = {"dataset": f"rmat{scale}", "measure": "triangle count", "peer": "graphblas", "ours": ours_t}
    rows.append({**row, "peer_timing": peer_t, "check": check, "speedup": peer_t["best_ms"] / ours_t["best_ms"]})

    ours_t, ours = timed(lambda: graph.triangle_count(A, per="edge", backend="cpu"), args.repeats)
    peer_t, ref = timed(peer_edges, args.repeats)
    ours = ours.copy()
    ours.eliminate_zeros()  # the peer stores no entry where the count is 0
    check = compare_sparse(ours, gb.io.to_scipy_sparse(ref))
    print(f"  triangles per edge ours {ours_t['best_ms']:9.1f} ms   graphblas {peer_t['best_ms']:9.1f} ms   {check}")
    row = {"dataset": f"rmat{scale}", "measure": "triangles per edge", "peer": "graphblas", "ours": ours_t}
    rows.append({**row, "peer_timing": peer_t, "check": check, "speedup": peer_t["best_ms"] / ours_t["best_ms"]})
    return rows


def networkx_ktruss(path: str, k: int) -> None:
    """Subprocess: ``networkx.k_truss`` of the saved graph, timed; its edges and seconds saved next to it."""
    import networkx as nx
    import scipy.sparse as sp

    A = sp.load_npz(path)
    G = nx.from_scipy_sparse_array(A)
    t0 = time.perf_counter()
    H = nx.k_truss(G, k)
    seconds = time.perf_counter() - t0
    edges = np.array(list(H.edges()), dtype=np.int64).reshape(-1, 2)
    np.savez(path + ".out.npz", edges=edges, seconds=seconds)


def bench_ktruss(scale: int, args, engines) -> list[dict]:
    """The public ``graph.ktruss(A, k, backend="cpu")`` against ``networkx.k_truss(G, k)`` (its graph made
    outside the timing; one call, in a subprocess cut off after ``--ktruss-timeout`` s), on R-MAT."""
    import subprocess
    import tempfile

    import scipy.sparse as sp
    from graph_bench import rmat

    from semiring.distances import graph

    k = args.ktruss_k
    indptr, indices, n = rmat(scale, seed=args.seed)
    A = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
    print(f"\n## R-MAT {scale}: {n} vertices, {A.nnz // 2} undirected edges; the {k}-truss", flush=True)
    ours_t, ours = timed(lambda: graph.ktruss(A, k, backend="cpu"), args.repeats)
    ours_edges = {(int(u), int(v)) for u, v in zip(*sp.triu(ours, 1).nonzero())}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "graph.npz")
        sp.save_npz(path, A)
        code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import cpu_engine; cpu_engine.networkx_ktruss({path!r}, {k})"
        try:
            subprocess.run([sys.executable, "-c", code], check=True, timeout=args.ktruss_timeout)
            with np.load(path + ".out.npz") as out:
                peer_ms, peer_edges = 1e3 * float(out["seconds"]), out["edges"]
        except subprocess.TimeoutExpired:
            peer_ms, peer_edges = None, None
    if peer_edges is None:
        print(f"  {k}-truss ours {ours_t['best_ms']:9.1f} ms   networkx: over {args.ktruss_timeout:.0f} s, cut off")
        check = {"status": "PEER TIMED OUT", "ours_edges": len(ours_edges)}
        peer_ms = 1e3 * args.ktruss_timeout  # at least: the speedup is a lower bound
        peer_t = {"best_ms": peer_ms, "cpu_ms": peer_ms, "first_ms": peer_ms, "all_ms": [], "others_cpu": None}
    else:
        want = {(int(min(u, v)), int(max(u, v))) for u, v in peer_edges}
        status = "CORRECT" if ours_edges == want else "MISMATCH"
        check = {"status": status, "ours_edges": len(ours_edges), "peer_edges": len(want)}
        print(
            f"  {k}-truss ours {ours_t['best_ms']:9.1f} ms   networkx {peer_ms:9.1f} ms   {status}: {len(want)} edges"
        )
        peer_t = {"best_ms": peer_ms, "cpu_ms": peer_ms, "first_ms": peer_ms, "all_ms": [peer_ms], "others_cpu": None}
    row = {"dataset": f"rmat{scale}", "measure": f"{k}-truss", "peer": "networkx", "ours": ours_t}
    return [{**row, "peer_timing": peer_t, "check": check, "speedup": peer_t["best_ms"] / ours_t["best_ms"]}]


# --------------------------------------------------------------------------- report


def markdown_table(rows: list[dict], threads: int) -> str:
    head = (
        "| dataset | measure | peer | ours ms | peer ms | speedup | ours core·ms | peer core·ms | check |\n"
        "|---|---|---|---:|---:|---:|---:|---:|---|"
    )
    lines = [head]
    for r in rows:
        o, p = r["ours"]["best_ms"], r["peer_timing"]["best_ms"]
        lines.append(
            f"| {r['dataset']} | {r['measure']} | {r['peer']} | {o:.1f} | {p:.1f} | {p / o:.2f}× "
            f"| {o * threads:.0f} | {p * threads:.0f} | {r['check']['status']} |"
        )
    return "\n".join(lines)


def first_call_table(rows: list[dict]) -> str:
    """Warm-up times (ours: numba compile on first use of a kernel) and CPU use.

    cpu/wall is the process CPU time over the wall time of the best call: how many
    cores a side kept busy (ideally --threads).  "others" is the share of the
    machine used by other processes meanwhile (ideally 0 %).
    """

    def pct(x):
        return "n/a" if x is None else f"{100 * x:.0f} %"

    lines = [
        (
            "| dataset | measure | ours first ms | ours best ms | ours cpu/wall | ours: others | "
            "peer first ms | peer cpu/wall | peer: others |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        o, p = r["ours"], r["peer_timing"]
        lines.append(
            f"| {r['dataset']} | {r['measure']} | {o['first_ms']:.1f} | {o['best_ms']:.1f} "
            f"| {o['cpu_ms'] / o['best_ms']:.2f} | {pct(o['others_cpu'])} | {p['first_ms']:.1f} "
            f"| {p['cpu_ms'] / p['best_ms']:.2f} | {pct(p['others_cpu'])} |"
        )
    return "\n".join(lines)


def machine_info(threads: int) -> dict:
    import graphblas
    import numba
    import sklearn

    model = platform.processor()
    try:  # platform.processor() is often empty or just the architecture on Linux
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import suitesparse_graphblas

        ssgb = suitesparse_graphblas.__version__
    except ImportError:
        ssgb = None
    try:
        layer = numba.threading_layer()  # only known after a parallel kernel has run
    except ValueError:
        layer = None
    return {
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "processor": platform.processor(),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "numba_threading_layer": layer,
        "numba_threads": numba.get_num_threads(),
        "sklearn": sklearn.__version__,
        "graphblas": graphblas.__version__,
        "suitesparse_graphblas": ssgb,
        "graphblas_nthreads": graphblas.ss.config["nthreads"],
    }


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    args = parse_args(argv)
    # numba fixes its thread-pool ceiling (NUMBA_NUM_THREADS) at import; raise it first
    # so that set_num_threads(--threads) is allowed even above the core count.
    os.environ["NUMBA_NUM_THREADS"] = str(max(args.threads, os.cpu_count() or 1))
    import graphblas as gb
    import numba
    from sklearn.metrics import pairwise_distances as sk_pairwise
    from threadpoolctl import threadpool_limits

    import semiring
    from semiring import distances

    numba.set_num_threads(args.threads)
    gb.ss.config["nthreads"] = args.threads
    # scikit-learn parallelises over n_jobs threads itself; keep any BLAS under it single-threaded
    # so it cannot use more than --threads cores in total.
    threadpool_limits(limits=1, user_api="blas")

    print(
        f"# CPU engine benchmark: scale {args.scale}, {args.queries} queries, {args.threads} threads "
        f"(of {os.cpu_count()} cores), best of {args.repeats}"
    )
    # Other busy processes take cores from both sides and make multi-threaded timings meaningless:
    # look at the machine for a second before starting, and per measurement below.
    load_before = os.getloadavg()
    busy0, own0 = _system_busy_s(), time.process_time()
    time.sleep(1.0)
    idle_check = _others_share(busy0, _system_busy_s(), time.process_time() - own0, 1.0)
    if idle_check is not None and idle_check > 0.1:
        print(
            f"WARNING: other processes are using {100 * idle_check:.0f} % of the CPU; timings will be "
            "unreliable (see the 'others' columns below)"
        )
    start, busy_start, own_start = time.perf_counter(), _system_busy_s(), time.process_time()
    infos, rows = [], []
    engines = (distances, semiring, sk_pairwise, gb)
    for name in args.datasets:
        info, r = bench_dataset(name, args, engines)
        infos.append(info)
        rows.extend(r)
    for scale in [int(x) for x in args.rmat_scales.split(",") if x.strip()]:
        rows.extend(bench_triangles(scale, args, engines))
    for scale in [int(x) for x in args.ktruss_scales.split(",") if x.strip()]:
        rows.extend(bench_ktruss(scale, args, engines))
    total_s = time.perf_counter() - start
    others_total = _others_share(busy_start, _system_busy_s(), time.process_time() - own_start, total_s)

    print(
        f"\n## Results ({args.threads} threads; speedup = peer ms / ours ms, > 1 means ours is faster; "
        f"core·ms = ms × threads)\n"
    )
    print(markdown_table(rows, args.threads))
    print("\n## First calls (ours: includes numba compilation) and CPU use\n")
    print(first_call_table(rows))
    bad = [r for r in rows if r["check"]["status"] == "MISMATCH"]
    print(
        f"\nchecks: {len(rows) - len(bad)} CORRECT, {len(bad)} MISMATCH; total {total_s:.0f} s, "
        f"other processes used {'n/a' if others_total is None else f'{100 * others_total:.0f} %'} of the CPU"
    )
    contended = [
        f"{r['dataset']}/{r['measure']}"
        for r in rows
        if max(r["ours"]["others_cpu"] or 0, r["peer_timing"]["others_cpu"] or 0) > 0.1
    ]
    if others_total is not None and others_total > 0.1 and not contended:
        print(
            "WARNING: other processes used over 10 % of the CPU during the run; rerun on an idle machine "
            "for numbers to quote"
        )
    if contended:
        print(
            f"WARNING: other processes used over 10 % of the CPU while timing {len(contended)} measurement(s) "
            f"({', '.join(contended)}); rerun on an idle machine for numbers to quote"
        )

    if args.json:
        machine = {
            **machine_info(args.threads),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
            "others_cpu_share_before": idle_check,
            "others_cpu_share": others_total,
        }
        payload = {
            "command": " ".join([sys.executable, *sys.argv]),
            "commit": commit(),
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "machine": machine,
            "datasets": infos,
            "results": rows,
            "total_s": total_s,
        }
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.json}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
