"""Suite ``graph``: graph measures on R-MAT graphs, ours on the GPU against cuSPARSE, cuGraph and
python-graphblas, each result checked.

R-MAT with the Graph500 parameters (``synthetic.rmat``: a=0.57, b=0.19, c=0.19, edge factor 16), undirected,
no self-loops or duplicates, seeded.  For each scale (``--scales``):

* **ours**, the public ``semiring.graph`` call on a device-resident CSR matrix (input checks
  included): ``triangle_count`` (degree order and vertex-id order), ``jaccard`` and ``common_neighbors`` at
  every edge, ``triangle_count(per="vertex")``, ``truss_decomposition`` and ``ktruss(k=5)``; CUDA events; the
  peak device memory of one call; the triangle count and Jaccard again by binary search
  (``SEMIRING_GRAPH_TRIANGLES=search``, rows ``triangles_search`` and ``jaccard_search``: the method the probe
  replaced, in the same run);
* **cuSPARSE** SpGEMM through cupyx: ``(L·L)∘L`` (triangles) and ``(A·A)∘A`` (triangles × 6 and the
  common neighbours), in float64, in row blocks CuPy computes right (``peers.spgemm_blocks``);
* **cuGraph** (``pylibcugraph``, where installed): ``triangle_count`` and ``jaccard_coefficients``;
* **python-graphblas** on every host core, in a subprocess cut off after ``--graphblas-timeout`` s:
  ``C⟨L⟩ = L plus.pair Uᵀ`` (triangles), ``C⟨A⟩ = A plus.pair Aᵀ`` (common neighbours) and Jaccard from it,
  and LAGraph's k-truss peeling (``C⟨C⟩ = C plus.pair C`` on the survivors until no edge drops: the 5-truss, and
  the truss decomposition as the k-truss of the (k − 1)-truss, k = 3, 4, …), each where ours ran (``--measures``);
  its L, U, degrees and pattern made outside the timing; one warm-up call, then the median of
  ``--host-repeats``.  Cut off, the row says how long the call it was in had run (``graphblas OP cut off``:
  a lower bound on one call's time).

Checks, in the same run: per-edge common neighbours and Jaccard of ours and each peer at ``--check-edges``
sampled edges against set arithmetic on the adjacency lists; ours per vertex at 200 sampled vertices against
set arithmetic (½ Σ over neighbours u of |N(u) ∩ N(v)|); every triangle total against python-graphblas's
(SuiteSparse, the project's semiring oracle) where it ran, and ours also against its own checked per-edge
counts (Σ = 6 × total); python-graphblas's truss numbers and 5-truss against ours; the truss numbers of every
edge against the CPU engine's (numba, its own peeling) up to
``--truss-check-scale``, and above it the 5-truss against the edges whose truss number is at least 5.

    python -m benchmarks graph --seed 1 --scales 18,20,22 --json benchmarks/results/graph_h200.json
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from . import peers
from .record import Results
from .reference import count_check, edge_check, sample_edges
from .synthetic import rmat
from .timing import PeakMemory, on_device, setting


def add_arguments(p) -> None:
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--scales", default="18,20,22")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--host-repeats", type=int, default=2)
    p.add_argument("--graphblas-timeout", type=float, default=60.0, help="seconds for its warm-up and repeats")
    p.add_argument("--check-edges", type=int, default=2000)
    p.add_argument("--truss-check-scale", type=int, default=18, help="the largest scale checked by the CPU engine")
    p.add_argument(
        "--measures",
        default=",".join(MEASURES),
        help="ours, comma-separated, of " + ", ".join(MEASURES) + " (default: all); the checks of those left out "
        "are left out (R-MAT 24 and 25 in one call: triangles,triangles_search,triangles_per_vertex,jaccard)",
    )
    p.add_argument(
        "--graphblas-max-scale",
        type=int,
        help="the largest scale python-graphblas runs at (default: all; above it the row says it was skipped)",
    )
    p.add_argument(
        "--cusparse-max-scale",
        type=int,
        help="the largest scale cuSPARSE's blocked products run at (default: all; its (A·A)∘A took 18 s a call "
        "at R-MAT 20, 16x that at 22); above it the row says it was skipped",
    )
    p.add_argument("--json", type=Path)


def vertex_triangles_reference(A: sp.csr_matrix, vertices) -> np.ndarray:
    """Triangles at each vertex by set arithmetic: ½ Σ over its neighbours u of |N(u) ∩ N(v)|, counted as the
    entries of N(v) among the neighbour lists of its neighbours (gathered at once: a hub costs one gather)."""
    out = np.empty(len(vertices), np.int64)
    mask = np.zeros(A.shape[0], bool)
    for i, v in enumerate(vertices):
        nv = A.indices[A.indptr[v] : A.indptr[v + 1]]
        mask[nv] = True
        starts, lengths = A.indptr[nv].astype(np.int64), np.diff(A.indptr)[nv].astype(np.int64)
        offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        out[i] = int(mask[A.indices[np.arange(lengths.sum()) + offsets]].sum()) // 2
        mask[nv] = False
    return out


def truss_check(Ah: sp.csr_matrix, truss, kept, scale: int, args) -> dict:
    """Our truss numbers (a CuPy CSR matrix) against the CPU engine's at every edge, up to
    ``--truss-check-scale``; above it, our 5-truss against the edges our truss numbers put in it."""
    from semiring import arrays, graph

    T = arrays.on_host(truss)
    if scale <= args.truss_check_scale:
        want = graph.truss_decomposition(Ah, backend="cpu")
        same = np.array_equal(T.indptr, want.indptr) and np.array_equal(T.indices, want.indices)
        off = int((T.data != want.data).sum()) if same else -1
        return {"subject": "ours", "against": "the CPU engine's truss numbers, every edge", "ok": off == 0,
                "edges_off": off}  # fmt: skip
    K = arrays.on_host(kept)
    n = T.shape[0]

    def keys(M, where=None):  # each stored entry as row * n + column (sorted in CSR order), as arrays: at scale 22
        rows = np.repeat(np.arange(M.shape[0], dtype=np.int64), np.diff(M.indptr))  # sets of tuples took minutes
        cols = M.indices.astype(np.int64)
        return (rows * n + cols) if where is None else (rows * n + cols)[where]

    mine, theirs = keys(T, T.data >= 5), keys(K)
    return {"subject": "ours", "against": "our truss numbers >= 5 (the CPU engine above scale "
            f"{args.truss_check_scale} takes too long)", "ok": bool(np.array_equal(mine, theirs)),
            "edges": int(theirs.size)}  # fmt: skip


MEASURES = (
    "triangles",
    "triangles_id_order",
    "triangles_search",
    "triangles_per_vertex",
    "jaccard",
    "jaccard_search",
    "common_neighbors",
    "truss_decomposition",
    "ktruss5",
)


def truss_peer_check(mine: sp.csr_matrix, theirs: sp.csr_matrix, op: str) -> dict:
    """python-graphblas's truss numbers (or 5-truss) against ours (checked above): the same edges, and for the
    decomposition the same number at every one."""
    theirs = sp.csr_matrix(theirs)
    theirs.sort_indices()
    mine = sp.csr_matrix(mine)
    mine.sort_indices()
    same = bool(np.array_equal(mine.indptr, theirs.indptr) and np.array_equal(mine.indices, theirs.indices))
    if same and op == "truss_decomposition":
        same = bool(np.array_equal(mine.data, theirs.data))
    what = "every edge's truss number" if op == "truss_decomposition" else "the 5-truss's edges"
    return {"subject": "python-graphblas", "against": f"ours (checked), {what}", "ok": same, "edges": int(theirs.nnz)}


def by_search(fn):
    """``fn`` with the GPU graph engine's lists intersected by binary search (``SEMIRING_GRAPH_TRIANGLES=search``,
    the method before the probe): both methods' times in one run."""
    from semiring import settings

    def call():
        with setting(settings.GRAPH_TRIANGLES.name, "search"):
            return fn()

    return call


def run_scale(scale: int, args, threads: int) -> dict:
    import cupy
    import cupyx.scipy.sparse as csp

    from semiring import graph

    indptr, indices, n = rmat(scale, seed=args.seed, xp=cupy)
    A = csp.csr_matrix((cupy.ones(indices.size, np.float32), indices, indptr), shape=(n, n))
    host_indptr, host_indices = (a.get() if hasattr(a, "get") else a for a in (indptr, indices))
    Ah = sp.csr_matrix((np.ones(indices.size), host_indices, host_indptr), shape=(n, n))
    edges = int(indices.size) // 2
    row = {
        "graph": f"rmat{scale}",
        "scale": scale,
        "vertices": n,
        "edges": edges,
        "max_degree": int(cupy.diff(indptr).max()),
    }
    rng = np.random.default_rng(args.seed)
    u, v = sample_edges(Ah, rng, args.check_edges)
    timings, checks, memory = {}, {}, {}
    row.update(timings=timings, checks=checks, peak_mib=memory)

    ours, chosen = {}, set(args.measures.split(","))

    def asked(op: str) -> bool:  # a peer's op runs where one of ours of that name ran
        return any(m.startswith(op) for m in chosen)

    calls = (
        ("triangles", lambda: graph.triangle_count(A)),
        ("triangles_id_order", lambda: graph.triangle_count(A, order="id")),
        ("triangles_search", by_search(lambda: graph.triangle_count(A))),
        ("triangles_per_vertex", lambda: graph.triangle_count(A, per="vertex")),
        ("jaccard", lambda: graph.jaccard(A)),
        ("jaccard_search", by_search(lambda: graph.jaccard(A))),
        ("common_neighbors", lambda: graph.common_neighbors(A)),
        ("truss_decomposition", lambda: graph.truss_decomposition(A)),
        ("ktruss5", lambda: graph.ktruss(A, 5)),
    )
    assert tuple(label for label, _ in calls) == MEASURES  # --measures names them
    for label, fn in (call for call in calls if call[0] in chosen):
        t, ours[label] = on_device(fn, args.repeats)
        timings[f"ours {label}"] = t.as_dict()
        memory[f"ours {label}"] = round(PeakMemory().peak_mib(fn), 1)
    for label in ("jaccard", "common_neighbors"):
        if label in ours:
            checks[f"ours {label}"] = edge_check(Ah, ours[label], u, v, label, "ours")
    vertices = np.sort(rng.choice(n, min(200, n), replace=False))
    total = None
    if "triangles_per_vertex" in ours:
        per_vertex = ours["triangles_per_vertex"]
        per_vertex = per_vertex.get() if hasattr(per_vertex, "get") else np.asarray(per_vertex)
        want_v = vertex_triangles_reference(Ah, vertices)
        checks["ours triangles per vertex"] = {
            "subject": "ours",
            "against": "set arithmetic at 200 sampled vertices",
            "ok": bool(np.array_equal(per_vertex[vertices], want_v)),
            "vertices_off": int((per_vertex[vertices] != want_v).sum()),
        }
        total = int(per_vertex.sum()) // 3
    if "triangles" in ours:
        if total is not None:
            checks["ours triangles (per-vertex sum)"] = count_check(
                int(ours["triangles"]), total, "ours", "its checked per-vertex counts: Σ / 3"
            )
        total = int(ours["triangles"])
    row["triangles"] = total
    if "common_neighbors" in ours and total is not None:
        cn_sum = float(ours["common_neighbors"].data.sum())
        checks["ours triangles (per-edge sum)"] = count_check(
            cn_sum / 6, total, "ours", "its checked per-edge counts: Σ / 6"
        )
    for label, name, against in (
        ("triangles_id_order", "ours triangles, id order", "ours, degree order"),
        ("triangles_search", "ours triangles, search", "ours, probe"),
    ):
        if label in ours and total is not None:
            checks[name] = count_check(int(ours[label]), total, "ours", against)
    if "jaccard" in ours and "jaccard_search" in ours:
        same = bool(cupy.array_equal(ours["jaccard_search"].data, ours["jaccard"].data))
        checks["ours jaccard, search"] = {"subject": "ours", "against": "ours, probe (every entry equal)", "ok": same}
    if "truss_decomposition" in ours and "ktruss5" in ours:
        checks["ours truss numbers and ktruss5"] = truss_check(
            Ah, ours["truss_decomposition"], ours["ktruss5"], scale, args
        )
        row["max_truss"] = int(ours["truss_decomposition"].data.max()) if ours["truss_decomposition"].nnz else 2
    # host copies of our truss results, for python-graphblas's (LAGraph's k-truss) to be checked against
    from semiring import arrays

    truss = {label: arrays.on_host(ours[label]) for label in ("truss_decomposition", "ktruss5") if label in ours}
    del ours

    # cuSPARSE through cupyx, in float64 (float32 sums of ~1e9 counts would round)
    A64 = A.astype(np.float64)
    L = csp.tril(A64, k=-1, format="csr")  # made outside the timing, as graphblas's L and U
    # in row blocks of at most peers.SPGEMM_BLOCK_PRODUCTS products, planned outside the timing: larger SpGEMMs
    # through CuPy fail or come back as zeros (CuPy issue #10033)
    blocks_l = peers.spgemm_blocks(L, cupy.diff(L.indptr))
    blocks_a = peers.spgemm_blocks(A64, cupy.diff(A64.indptr))
    row["cusparse row blocks"] = {"(L·L)∘L": len(blocks_l), "(A·A)∘A": len(blocks_a)}
    products = {}
    cusparse = (
        ("cusparse (L·L)∘L", lambda: sum(float((L[a:b] @ L).multiply(L[a:b]).sum()) for a, b in blocks_l)),
        ("cusparse (A·A)∘A", lambda: csp.vstack([(A64[a:b] @ A64).multiply(A64[a:b]) for a, b in blocks_a]).tocsr()),
    )
    if args.cusparse_max_scale is not None and scale > args.cusparse_max_scale:
        row["cusparse skipped"] = f"above --cusparse-max-scale {args.cusparse_max_scale}"
        cusparse = ()
    for label, fn in cusparse:
        try:
            t, products[label] = on_device(fn, 2)
            timings[label] = t.as_dict()
        except Exception as exc:  # noqa: BLE001 - the peer's failure is a result
            row[f"{label} error"] = peers.error_of(exc)
        cupy.get_default_memory_pool().free_all_blocks()
    graphblas = {}
    # the peer's ops where ours ran: LAGraph's k-truss takes minutes where ours takes a fraction of a second
    ops = (
        *filter(asked, ("triangles", "common_neighbors", "jaccard")),
        *truss,
    )
    if args.graphblas_max_scale is not None and scale > args.graphblas_max_scale:
        row["graphblas skipped"] = f"above --graphblas-max-scale {args.graphblas_max_scale}"
        ops = ()
    for op in ops:
        r = peers.graphblas_graph(Ah, op, threads, args.host_repeats, args.graphblas_timeout)
        if "timing" in r:
            timings[f"graphblas {op}"], graphblas[op] = r["timing"], r["result"]
            row["graphblas_threads"] = r["threads"]
        else:
            row[f"graphblas {op} error"] = r["error"]
            if "ms_at_least" in r:  # cut off in a call: how long that call had run, a lower bound on its time
                row[f"graphblas {op} cut off"] = {k: r[k] for k in ("cut_off_s", "calls_ms", "ms_at_least")}
    want_total = graphblas.get("triangles")
    against = "python-graphblas C⟨L⟩ = L plus.pair Uᵀ"
    if want_total is not None and total is not None:
        checks["ours triangles"] = count_check(total, want_total, "ours", against)
    for op in ("common_neighbors", "jaccard"):
        if op in graphblas:
            checks[f"graphblas {op}"] = edge_check(Ah, graphblas[op], u, v, op, f"python-graphblas {op}")
    for op, mine in truss.items():
        if op in graphblas:
            checks[f"graphblas {op}"] = truss_peer_check(mine, graphblas[op], op)
    if "triangles" in graphblas and total is not None:
        checks["graphblas triangles"] = count_check(
            want_total, total, "python-graphblas", "ours (checked per vertex and per edge)"
        )
    if "cusparse (L·L)∘L" in products and total is not None:
        checks["cusparse (L·L)∘L"] = count_check(
            products["cusparse (L·L)∘L"], total, "cuSPARSE (L·L)∘L", "ours (checked)"
        )
    if "cusparse (A·A)∘A" in products:
        C = products.pop("cusparse (A·A)∘A")
        if total is not None:
            checks["cusparse (A·A)∘A triangles"] = count_check(
                float(C.sum()) / 6, total, "cuSPARSE (A·A)∘A", "ours (checked)"
            )
        checks["cusparse (A·A)∘A common_neighbors"] = edge_check(Ah, C, u, v, "common_neighbors", "cuSPARSE (A·A)∘A")
        del C
    del products
    for op in filter(asked, ("triangles", "jaccard")):
        r = peers.cugraph_graph(indptr, indices, n, op, args.repeats)
        if "timing" not in r:
            row[f"cugraph {op} " + ("error" if "error" in r else "skipped")] = r.get("error") or r.get("skipped")
            continue
        timings[f"cugraph {op}"] = r["timing"]
        if op == "triangles":
            row["cugraph triangles"] = int(r["result"])
            if total is not None:
                checks["cugraph triangles"] = count_check(r["result"], total, "cuGraph", "ours (checked)")
        else:
            first, second, values = (x.get() for x in r["result"])
            J = sp.csr_matrix((values.astype(np.float64), (first, second)), shape=(n, n))
            checks["cugraph jaccard"] = edge_check(Ah, J, u, v, "jaccard", "cuGraph")
    cupy.get_default_memory_pool().free_all_blocks()
    return row


def main(args) -> int:
    unknown = set(args.measures.split(",")) - set(MEASURES)
    if unknown:
        raise SystemExit(f"--measures: {', '.join(sorted(unknown))} not among {', '.join(MEASURES)}")
    results = Results("graph", args, args.json)
    threads = os.cpu_count()
    for scale in (int(s) for s in args.scales.split(",") if s):
        results.add(run_scale(scale, args, threads))
    return results.finish()
