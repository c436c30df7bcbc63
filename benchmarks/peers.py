"""The peers of every suite, called as a competent user of each would call it, in one place.

* GPU products (``product_peers``): cuSPARSE ``Q @ X.T`` through cupyx plus the expansion in CuPy, Q cut
  into row blocks of at most ``SPGEMM_BLOCK_PRODUCTS`` intermediate products (CuPy issue #10033: larger
  SpGEMMs fail or come back as zeros), and dense cuBLAS GEMM on rows densified beforehand (the densify timed
  apart), for the measures a product gives.
* cuVS (``CuvsHarness``): ``cuvs::distance::pairwise_distance`` on CSR views and sparse brute-force kNN,
  through ``benchmarks/cuvs/harness.cu``; each measure is given the rows its definition expects
  (``cuvs_rows``: L1-normalised for jensenshannon and hellinger, binary for jaccard, dice and russellrao),
  prepared before and outside its timing.
* scikit-learn (``sklearn_pairwise``, ``sklearn_knn``): on the host's cores (``n_jobs``), warmed up and timed
  like ours on the same queries.
* python-graphblas (``graphblas_graph``): SuiteSparse's masked ``plus_pair`` products on every thread it is
  given, in a subprocess with a time limit, warmed up and timed like ours.
* networkx (``networkx_ktruss``) and cuGraph (``cugraph_graph``, where ``pylibcugraph`` is installed).

Each returns its timing (``timing.Timing.as_dict()``) and its result, or ``{"error": ...}`` where the peer
failed: a failure is a result, recorded, never raised.  Checking a peer's result is the suite's job, against
``reference``'s oracles, like ours.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .timing import PeakMemory, on_device, on_host


def error_of(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


# --------------------------------------------------------------------------- GPU products (cuSPARSE, cuBLAS)


def expand_product(metric: str, dot, nq, nx):
    """A peer's expansion of Q·Xᵀ into the measure, with CuPy (as a user of cupyx would write it)."""
    import cupy

    if metric == "inner_product":
        return dot
    if metric == "cosine":
        return cupy.clip(1.0 - dot / cupy.sqrt(nq[:, None] * nx[None, :]), 0.0, 2.0)
    if metric == "euclidean":
        return cupy.sqrt(cupy.maximum(nq[:, None] + nx[None, :] - 2.0 * dot, 0.0))
    if metric == "jaccard":  # on binary rows
        union = nq[:, None] + nx[None, :] - dot
        return cupy.where(union > 0, (union - dot) / cupy.where(union > 0, union, 1), 0.0)
    raise ValueError(f"no product form of {metric!r}")


PRODUCT_METRICS = ("cosine", "euclidean", "inner_product", "jaccard")


def peer_norms(metric: str, A):
    """The row norms a peer's expansion needs (sums for jaccard on binary rows, else squares)."""
    import cupy

    data = A.multiply(A) if metric in ("cosine", "euclidean") else A
    return cupy.asarray(data.sum(axis=1)).ravel().astype(np.float32)


# cupyx's SpGEMM (cuSPARSE through CuPy 14.2, CUDA 13.0) gives CUSPARSE_STATUS_INSUFFICIENT_RESOURCES and then
# all-zero products as they grow (https://github.com/cupy/cupy/issues/10033, open).  Measured on an H200 with
# 2,048 query rows of each dataset shape against 40,000 (16,000, 100,000): every block of up to 7.05e8
# intermediate products (Σ over a block's entries of the column's count in X) came back right, every one of
# 1.12e9 or more failed or came back zero.  A user who met the bug cuts Q so; the blocks are planned before
# the timing, from the column counts.
SPGEMM_BLOCK_PRODUCTS = 2**29


def spgemm_blocks(Qs, per_column, budget: int = SPGEMM_BLOCK_PRODUCTS) -> list[tuple[int, int]]:
    """Row ranges of Q, consecutive, each of at most ``budget`` intermediate products (one row alone where its
    own products exceed it); ``per_column``: the products an entry of Q in each column brings — for ``Q @ X.T``
    X's column counts (``column_counts``), for ``Q @ B`` B's row lengths."""
    import cupy

    met = cupy.concatenate([per_column[Qs.indices], cupy.zeros(1, per_column.dtype)])  # 0: trailing rows empty
    rows = cupy.asnumpy(cupy.add.reduceat(met, Qs.indptr[:-1]))
    rows[np.diff(cupy.asnumpy(Qs.indptr)) == 0] = 0  # reduceat gives an empty row its next entry's count
    blocks, start, total = [], 0, 0
    for i, products in enumerate(rows.tolist()):
        if i > start and total + products > budget:
            blocks.append((start, i))
            start, total = i, 0
        total += products
    blocks.append((start, Qs.shape[0]))
    return blocks


def column_counts(Xs):
    """Stored entries per column of a cupyx CSR matrix."""
    import cupy

    return cupy.bincount(Xs.indices, minlength=Xs.shape[1])


def spgemm_dense(Qs, XT, blocks: list[tuple[int, int]], r0: int = 0, r1: int | None = None):
    """``(Q[r0:r1] @ XT).toarray()`` through cupyx, one SpGEMM per part of ``blocks`` (``spgemm_blocks``) in
    rows r0 to r1."""
    import cupy

    r1 = Qs.shape[0] if r1 is None else r1
    out = cupy.empty((r1 - r0, XT.shape[1]), dtype=Qs.dtype)
    for b0, b1 in blocks:
        lo, hi = max(b0, r0), min(b1, r1)
        if lo < hi:
            out[lo - r0 : hi - r0] = (Qs[lo:hi] @ XT).toarray()
    return out


def product_peers(metric: str, Qs, Xs, repeats: int, fits_dense: float = 0.4) -> dict:
    """cuSPARSE ``Q @ X.T`` + the expansion, and dense cuBLAS on rows densified beforehand, where Q and X
    fit dense in ``fits_dense`` of free memory.  ``Qs``, ``Xs``: the rows as the measure needs them
    (``cupyx.scipy.sparse`` CSR, prepared outside the timing).

    Returns ``{"cusparse": {...}, "dense": {...}}``, each with ``timing`` and ``result`` (the m × p CuPy
    array), or ``error``/``skipped``; cuSPARSE's extra memory beside.
    """
    import cupy

    out: dict = {}
    nq, nx = peer_norms(metric, Qs), peer_norms(metric, Xs)
    blocks = spgemm_blocks(Qs, column_counts(Xs))

    def cusparse():
        return expand_product(metric, spgemm_dense(Qs, Xs.T.tocsr(), blocks), nq, nx)

    try:
        t, result = on_device(cusparse, repeats)
        out["cusparse"] = {"timing": t.as_dict(), "result": result, "row_blocks": len(blocks)}
        del result
        out["cusparse"]["extra_mib"] = round(PeakMemory().extra_mib(cusparse), 1)
    except Exception as exc:  # noqa: BLE001 - the peer's failure is a result
        out["cusparse"] = {"error": error_of(exc)}
    cupy.get_default_memory_pool().free_all_blocks()
    dense_bytes = (Xs.shape[0] + Qs.shape[0]) * Xs.shape[1] * 4
    if dense_bytes >= fits_dense * cupy.cuda.Device().mem_info[0]:
        out["dense"] = {
            "skipped": f"Q and X dense are {dense_bytes / 2**30:.1f} GiB, over {fits_dense:.0%} of free memory"
        }
        return out
    t_densify, (Qd, Xd) = on_device(lambda: (Qs.toarray(), Xs.toarray()), repeats)

    def dense():
        return expand_product(metric, Qd @ Xd.T, nq, nx)

    t, result = on_device(dense, repeats)
    out["dense"] = {"timing": t.as_dict(), "densify": t_densify.as_dict(), "result": result}
    return out


# --------------------------------------------------------------------------- scikit-learn

SKLEARN_METRICS = {"cosine": "cosine", "euclidean": "euclidean", "cityblock": "manhattan", "manhattan": "manhattan"}


def sklearn_pairwise(Q, X, metric: str, threads: int, repeats: int, warmups: int = 1) -> dict:
    """``sklearn.metrics.pairwise_distances(Q, X, metric, n_jobs=threads)`` on the same SciPy rows as ours,
    warmed up and timed (wall clock, median) like ours."""
    try:
        from sklearn.metrics import pairwise_distances
    except ImportError as exc:
        return {"error": error_of(exc)}
    name = SKLEARN_METRICS.get(metric)
    if name is None:
        return {"skipped": f"scikit-learn takes no sparse {metric!r}"}
    try:
        t, result = on_host(lambda: pairwise_distances(Q, X, metric=name, n_jobs=threads), repeats, warmups)
    except Exception as exc:  # noqa: BLE001
        return {"error": error_of(exc)}
    return {"timing": t.as_dict(), "threads": threads, "result": result}


def sklearn_knn(X, Q, metric: str, k: int, threads: int, repeats: int, warmups: int = 1) -> dict:
    """scikit-learn's brute-force ``NearestNeighbors(k, metric, n_jobs=threads).fit(X).kneighbors(Q)``, warmed
    up and timed like ours on the same queries; ``result`` is (distances, indices)."""
    try:
        from sklearn.neighbors import NearestNeighbors
    except ImportError as exc:
        return {"error": error_of(exc)}
    nn = NearestNeighbors(n_neighbors=k, metric=SKLEARN_METRICS.get(metric, metric), algorithm="brute", n_jobs=threads)
    nn.fit(X)
    try:
        t, result = on_host(lambda: nn.kneighbors(Q), repeats, warmups)
    except Exception as exc:  # noqa: BLE001
        return {"error": error_of(exc)}
    return {"timing": t.as_dict(), "threads": threads, "result": result}


# --------------------------------------------------------------------------- python-graphblas and networkx

GRAPHBLAS_CHILD = """
import json, sys, time, statistics
import numpy as np, scipy.sparse as sp, graphblas as gb
path, op, threads, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
gb.ss.config["nthreads"] = threads
f = np.load(path)
n = f["indptr"].size - 1
M = gb.io.from_scipy_sparse(sp.csr_matrix((np.ones(f["indices"].size), f["indices"], f["indptr"]), shape=(n, n)))
L, U = gb.select.tril(M, -1).new(), gb.select.triu(M, 1).new()
d = M.reduce_rowwise(gb.monoid.plus).new()
D = d.diag()
P = gb.Matrix(gb.dtypes.INT64, n, n)  # the pattern, ones
P(M.S) << 1

def triangles():
    C = gb.Matrix(gb.dtypes.INT64, n, n)
    C(L.S) << L.mxm(U.T, gb.semiring.plus_pair)
    return int(C.reduce_scalar().value or 0)

def common_neighbors():
    C = gb.Matrix(gb.dtypes.INT64, n, n)
    C(M.S) << M.mxm(M.T, gb.semiring.plus_pair)
    return C

def jaccard():
    C = common_neighbors()
    union = (D.mxm(C, gb.semiring.any_first).new() + C.mxm(D, gb.semiring.any_second).new()).new()
    union(accum=gb.binary.minus) << C
    return (C / union).new()

def ktruss_from(C, k):  # LAGraph's k-truss: supports C<C> = C plus.pair C, edges under k - 2 dropped, until none is
    while True:
        S = gb.Matrix(gb.dtypes.INT64, n, n)
        S(C.S) << C.mxm(C, gb.semiring.plus_pair)  # an edge in no triangle has no entry: dropped with the rest
        kept = gb.select.value(S >= k - 2).new()
        if kept.nvals == C.nvals:
            return kept
        C = kept

def ktruss5():
    return ktruss_from(P, 5)

def truss_decomposition():  # LAGraph's all-k-truss: the k-truss from the (k-1)-truss, k = 3, 4, ...; an edge of
    T = gb.Matrix(gb.dtypes.INT64, n, n)  # the (k-1)-truss not in the k-truss has truss number k - 1
    C, k = P, 3
    while C.nvals:
        K = ktruss_from(C, k)
        gone = gb.Matrix(gb.dtypes.INT64, n, n)
        gone(~K.S) << C
        T(gone.S) << k - 1
        C, k = K, k + 1
    return T

fn = {"triangles": triangles, "common_neighbors": common_neighbors, "jaccard": jaccard, "ktruss5": ktruss5,
      "truss_decomposition": truss_decomposition}[op]
def timed():  # each call's start and time printed at once: a parent that cuts the child off still reads them
    print(json.dumps({"call_starts": time.time()}), flush=True)
    t = time.perf_counter(); result = fn(); ms = 1e3 * (time.perf_counter() - t)
    print(json.dumps({"call_ms": ms}), flush=True)
    return result, ms
result, warm = timed()
times = []
for _ in range(repeats):
    result, ms = timed(); times.append(ms)
out = {"timing": {"clock": "wall", "median_ms": statistics.median(times), "times_ms": times, "warmup_ms": [warm]},
       "threads": gb.ss.config["nthreads"]}
if op == "triangles":
    out["result"] = result
else:
    r, c, v = result.to_coo()
    np.savez(path + "." + op + ".npz", rows=r, cols=c, values=v)
    out["result_file"] = path + "." + op + ".npz"
print(json.dumps(out))
"""


def cut_off(stdout, timeout_s: float, now: float) -> dict:
    """What a child cut off after ``timeout_s`` (at ``now``, ``time.time()``) had done: the times of the calls it
    finished (its ``call_ms`` lines) and ``ms_at_least``, how long the call it was in had run (from its last
    ``call_starts`` line): a lower bound on that call's time.  No call started: no bound."""
    text = stdout.decode() if isinstance(stdout, bytes) else (stdout or "")
    lines = [json.loads(line) for line in text.splitlines() if line.startswith('{"call_')]
    done = [line["call_ms"] for line in lines if "call_ms" in line]
    starts = [line["call_starts"] for line in lines if "call_starts" in line]
    out = {"cut_off_s": timeout_s, "calls_ms": done}
    if len(starts) > len(done):
        out["ms_at_least"] = 1e3 * (now - starts[-1])
    out["error"] = cut_off_text(out)
    return out


def cut_off_text(cut: dict) -> str:
    """What ``cut_off`` found, in words: the calls done and their times, how long the one cut off had run."""
    text = f"cut off at {cut['cut_off_s']:.0f} s"
    if "ms_at_least" not in cut:
        return text + ", before its first call"
    done = cut["calls_ms"]
    if not done:
        return text + f": its first call had run {cut['ms_at_least'] / 1e3:.1f} s"
    times = ", ".join(f"{ms / 1e3:.1f}" for ms in done)
    return text + f" in call {len(done) + 1} (the warm-up is call 1); calls done: {times} s"


def graphblas_graph(A: sp.csr_matrix, op: str, threads: int, repeats: int, timeout_s: float) -> dict:
    """python-graphblas on the graph ``A`` in a subprocess cut off after ``timeout_s``: ``op`` = "triangles"
    (``C⟨L⟩ = L plus.pair Uᵀ`` summed), "common_neighbors" (``C⟨A⟩ = A plus.pair Aᵀ``), "jaccard" (from it,
    with the degrees), "ktruss5" or "truss_decomposition" (LAGraph's k-truss: the supports ``C⟨C⟩ = C plus.pair
    C`` counted again on the survivors until no edge drops; the decomposition takes the k-truss from the
    (k − 1)-truss, k = 3, 4, …); one warm-up call, then the median of ``repeats``, its L, U, degrees and
    pattern made outside.  ``result``: the triangle count, or the per-edge values (the supports of the 5-truss's
    edges, each edge's truss number) as a SciPy CSR matrix."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "graph.npz")
        np.savez(path, indptr=A.indptr, indices=A.indices)
        cmd = [sys.executable, "-c", GRAPHBLAS_CHILD, path, op, str(threads), str(repeats)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=True)
        except subprocess.TimeoutExpired as exc:
            return cut_off(exc.stdout, timeout_s, time.time())
        except subprocess.CalledProcessError as exc:
            return {"error": (exc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
        res = json.loads(out.stdout.strip().splitlines()[-1])
        if "result_file" in res:
            with np.load(res.pop("result_file")) as f:
                res["result"] = sp.csr_matrix((f["values"].astype(np.float64), (f["rows"], f["cols"])), shape=A.shape)
        return res


NETWORKX_CHILD = """
import sys, time, numpy as np, scipy.sparse as sp, networkx as nx
path, k = sys.argv[1], int(sys.argv[2])
G = nx.from_scipy_sparse_array(sp.load_npz(path))
t = time.perf_counter(); H = nx.k_truss(G, k); seconds = time.perf_counter() - t
np.savez(path + ".out.npz", edges=np.array(list(H.edges()), dtype=np.int64).reshape(-1, 2), seconds=seconds)
"""


def networkx_ktruss(A: sp.csr_matrix, k: int, timeout_s: float) -> dict:
    """``networkx.k_truss(G, k)`` once (single-threaded, seconds to minutes: no repeats), its graph made
    outside the timing, in a subprocess cut off after ``timeout_s``; ``result`` is its set of edges (u < v)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "graph.npz")
        sp.save_npz(path, A)
        try:
            subprocess.run(
                [sys.executable, "-c", NETWORKX_CHILD, path, str(k)],
                check=True,
                timeout=timeout_s,
                capture_output=True,
                text=True,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"cut off after {timeout_s:.0f} s", "cut_off_s": timeout_s}
        except subprocess.CalledProcessError as exc:
            return {"error": (exc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
        with np.load(path + ".out.npz") as out:
            ms = 1e3 * float(out["seconds"])
            edges = {(int(min(u, v)), int(max(u, v))) for u, v in out["edges"]}
    timing = {"clock": "wall", "median_ms": ms, "times_ms": [ms], "warmup_ms": [], "note": "one call, no warm-up"}
    return {"timing": timing, "result": edges}


# --------------------------------------------------------------------------- cuGraph


def cugraph_graph(indptr, indices, n: int, op: str, repeats: int) -> dict:
    """cuGraph through ``pylibcugraph`` (where installed) on the device CSR graph: ``op`` = "triangles" (the
    per-vertex counts summed / 3) or "jaccard" (at every stored edge); CUDA-event median after a warm-up;
    ``result``: the count, or (first, second, values) device arrays."""
    try:
        import cupy
        import pylibcugraph as plc
    except ImportError as exc:
        return {"skipped": f"pylibcugraph not installed ({exc})"}
    try:
        handle = plc.ResourceHandle()
        props = plc.GraphProperties(is_symmetric=True, is_multigraph=False)
        weights = cupy.ones(indices.size, np.float32)
        G = plc.SGGraph(
            handle,
            props,
            indptr,
            indices,
            weights,
            store_transposed=False,
            renumber=False,
            do_expensive_check=False,
            input_array_format="CSR",
        )
        if op == "triangles":

            def call():
                _, counts = plc.triangle_count(handle, G, None, False)
                return int(counts.sum()) // 3
        else:
            rows = cupy.repeat(cupy.arange(n, dtype=indices.dtype), cupy.diff(indptr).astype(np.int64))

            def call():
                return plc.jaccard_coefficients(handle, G, rows, indices, False, False)

        t, result = on_device(call, repeats)
        return {"timing": t.as_dict(), "result": result, "version": getattr(plc, "__version__", None)}
    except Exception as exc:  # noqa: BLE001 - an API or runtime failure of the peer is a result
        return {"error": error_of(exc)}


# --------------------------------------------------------------------------- cuVS (benchmarks/cuvs/harness.cu)

# cuVS's sparse measures by our name: its cuvs::distance::DistanceType (and metric_arg after a colon). The
# expanded forms are the ones cuVS's own callers use where there are two (L2Expanded rather than L2Unexpanded).
CUVS_METRICS = {
    "sqeuclidean": "L2Expanded",
    "euclidean": "L2SqrtExpanded",
    "inner_product": "InnerProduct",
    "cosine": "CosineExpanded",
    "correlation": "CorrelationExpanded",
    "jaccard": "JaccardExpanded",
    "dice": "DiceExpanded",
    "hellinger": "HellingerExpanded",
    "russellrao": "RusselRaoExpanded",
    "cityblock": "L1",
    "chebyshev": "Linf",
    "canberra": "Canberra",
    "minkowski": "LpUnexpanded:2",  # our default p
    "hamming": "HammingUnexpanded",
    "jensenshannon": "JensenShannon",
    "kl_divergence": "KLDivergence",  # ½ Σ x (log x − log y), RAFT's definition, which ours of that name follows
}


# What a competent cuVS user gives each measure: its definitions of jensenshannon and hellinger take
# probability distributions (L1-normalised rows), those of jaccard, dice and russellrao binary rows.
CUVS_ROWS = {"jensenshannon": "l1", "hellinger": "l1", "jaccard": "binary", "dice": "binary", "russellrao": "binary"}


def cuvs_rows(A: sp.csr_matrix, how: str | None) -> sp.csr_matrix:
    """A as cuVS's definition of a measure expects it: ``"l1"`` rows divided by their sums (empty rows left
    empty), ``"binary"`` 1 at every stored nonzero, ``None`` as it is."""
    A = sp.csr_matrix(A, dtype=np.float32, copy=True)
    if how == "l1":
        sums = np.asarray(A.sum(axis=1)).ravel()
        A.data /= np.repeat(np.where(sums > 0, sums, 1.0), np.diff(A.indptr)).astype(np.float32)
    elif how == "binary":
        A.data = (A.data != 0).astype(np.float32)
        A.eliminate_zeros()
    elif how is not None:
        raise ValueError(f"unknown row preparation {how!r}")
    return A


class CuvsHarness:
    """The compiled cuVS harness, run as a subprocess on CSR matrices written to ``workdir``.

    Each call returns, by our metric name, the harness's median milliseconds (CUDA events, the output
    preallocated) and its output on the sample rows, or the error cuVS gave.
    """

    def __init__(self, binary: Path, workdir: Path, repeats: int):
        self.binary, self.workdir, self.repeats = Path(binary), Path(workdir), repeats
        self.workdir.mkdir(parents=True, exist_ok=True)

    def _write(self, name: str, A) -> None:
        A = A.tocsr().astype(np.float32)
        (self.workdir / f"{name}.shape").write_text(f"{A.shape[0]} {A.shape[1]} {A.nnz}\n")
        A.indptr.astype(np.int32).tofile(self.workdir / f"{name}.indptr")
        A.indices.astype(np.int32).tofile(self.workdir / f"{name}.indices")
        A.data.tofile(self.workdir / f"{name}.data")

    def _run(self, *args: str, timeout_s: float | None = None) -> dict[str, dict]:
        """The harness's result lines by metric; ``_error`` where it failed or gave no answer within ``timeout_s``."""
        try:
            proc = subprocess.run(
                [str(self.binary), *args], capture_output=True, text=True, check=False, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return {"_error": {"error": f"no answer within {timeout_s:.0f} s"}}
        lines = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                result = json.loads(line)
                lines[result["metric"]] = result
        if proc.returncode != 0:
            lines["_error"] = {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"}
        return lines

    def pairwise(self, Q, X, metrics: list[str], sample_rows: np.ndarray) -> dict[str, dict]:
        """cuVS's distances from every row of Q to every row of X, for each of ``metrics`` (our names) it has,
        each given the rows its definition expects (``CUVS_ROWS``; prepared here, before the harness runs and
        outside its timing); ``rows`` in each result says how."""
        out = {}
        groups: dict[str | None, list[str]] = {}
        for m in metrics:
            if m in CUVS_METRICS:
                groups.setdefault(CUVS_ROWS.get(m), []).append(m)
        for how, group in groups.items():
            for ours, result in self._pairwise(cuvs_rows(Q, how), cuvs_rows(X, how), group, sample_rows).items():
                out[ours] = {**result, "rows": how or "as given"}
        return out

    def _pairwise(self, Q, X, metrics: list[str], sample_rows: np.ndarray) -> dict[str, dict]:
        self._write("q", Q)
        self._write("x", X)
        sample_rows.astype(np.int32).tofile(self.workdir / "sample.rows")
        theirs = {m: CUVS_METRICS[m] for m in metrics}
        lines = self._run("pairwise", str(self.workdir), str(self.repeats), ",".join(theirs.values()))
        out = {}
        for ours, spelled in theirs.items():
            cuvs_name = spelled.split(":")[0]
            result = dict(lines.get(cuvs_name) or lines.get("_error") or {"error": "no output"})
            result["cuvs_metric"] = spelled
            if "ms" in result:
                path = self.workdir / f"out_{cuvs_name}.f32"
                result["sample"] = np.fromfile(path, np.float32).reshape(sample_rows.size, X.shape[0])
            out[ours] = result
        return out

    def knn(self, X, metrics: list[str], k: int) -> dict[str, dict]:
        """cuVS sparse brute-force kNN of every row of X among all rows (itself included, so ask k + 1)."""
        self._write("x", X)
        theirs = {m: CUVS_METRICS[m] for m in metrics if m in CUVS_METRICS}
        if not theirs:
            return {}
        lines = self._run("knn", str(self.workdir), str(self.repeats), str(k), ",".join(theirs.values()))
        out = {}
        for ours, cuvs_name in theirs.items():
            result = dict(lines.get(cuvs_name) or lines.get("_error") or {"error": "no output"})
            result["cuvs_metric"] = cuvs_name
            if "ms" in result:
                result.update(self._neighbors(f"knn_{cuvs_name}", X.shape[0], k))
            out[ours] = result
        return out

    def search(self, Q, X, metric: str, k: int, batch: int, timeout_s: float | None = None) -> dict:
        """cuVS sparse brute-force kNN of Q's rows among X's (the index built once, untimed), ``batch`` query
        rows a call: the median milliseconds of the first batch (``ms``), and every query's answer."""
        self._write("q", Q)
        self._write("x", X)
        name = CUVS_METRICS[metric]
        args = ("search", str(self.workdir), str(self.repeats), str(k), str(batch), name)
        lines = self._run(*args, timeout_s=timeout_s)
        result = dict(lines.get("_error") or lines.get(name) or {"error": "no output"})
        result["cuvs_metric"] = name
        if "ms" in result:
            result.update(self._neighbors(f"search_{name}", Q.shape[0], k))
        return result

    def _neighbors(self, stem: str, rows: int, k: int) -> dict:
        """The distances and indices the harness wrote for ``rows`` queries (``STEM.f32``, ``STEM.i32``)."""
        path = self.workdir / stem
        return {
            "distances": np.fromfile(f"{path}.f32", np.float32).reshape(rows, k),
            "indices": np.fromfile(f"{path}.i32", np.int32).reshape(rows, k),
        }


def find_cuvs_harness(given: str | None) -> Path | None:
    """The harness ``--cuvs`` names, else ``$CUVS_HARNESS``, else ``~/cuvs/root/cuvs_harness`` if it is there."""
    for candidate in (given, os.environ.get("CUVS_HARNESS"), str(Path.home() / "cuvs/root/cuvs_harness")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    if given:
        raise FileNotFoundError(f"--cuvs {given}: no such harness (benchmarks/cuvs/device_steps.md builds it)")
    return None
