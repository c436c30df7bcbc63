"""The one module that talks to the CUDA toolchain: NVRTC (``cuda-bindings``) and CuPy.

Compiling needs no GPU: CI compiles every rendered kernel for ``sm_90`` here.
The GPU engine below loads the compiled kernels with CuPy and runs them; it has
the same interface as ``kernels.cpu``.  CuPy is imported only when a GPU is used.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semiring import expr as _expr

from . import cuda_source
from . import cuda_topk_source as topk_source
from .cuda_source import KernelSource

DEFAULT_ARCH = "sm_90"


class CompileError(RuntimeError):
    """NVRTC rejected a rendered kernel; the message holds the numbered source and the log."""


def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    _check(nvrtc, err, "nvrtcVersion")
    return major, minor


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {err}")


def compile_kernel(kernel: KernelSource, arch: str = DEFAULT_ARCH, options: tuple[str, ...] = ()) -> bytes:
    """Compile ``kernel`` with NVRTC to a cubin for ``arch``; raise :class:`CompileError` on failure."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise CompileError("NVRTC is not installed: pip install 'sparse-semirings[cuda]' or cuda-bindings") from exc
    err, prog = nvrtc.nvrtcCreateProgram(kernel.source.encode(), f"{kernel.name}.cu".encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", *(o.encode() for o in options)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CompileError(
                f"NVRTC could not compile {kernel.name} for {arch}:\n{log.decode(errors='replace').rstrip()}\n"
                f"--- source ---\n{kernel.numbered()}"
            )
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(nvrtc, err, "nvrtcGetCUBINSize")
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check(nvrtc, err, "nvrtcGetCUBIN")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


# --------------------------------------------------------------------------- the compile cache
#
# Compiled kernels are kept in memory and on disk, keyed by everything that
# changes the binary and nothing else: the rendered source, the architecture,
# the compiler options and NVRTC's version (so parameter values, which kernels
# read at run time, share one entry).  Disk writes are atomic (a temporary file
# in the same folder, then a rename), and each entry carries a digest of its
# contents: a damaged entry is compiled again and replaced, never loaded.

CACHE_ENV = "SEMIRING_CACHE_DIR"
_FORMAT = b"sparse-semirings cubin v1\n"
_MEMORY: dict[str, bytes] = {}
compile_count = 0  # compiles done by this process (the cache's tests read it)


def cache_dir() -> Path:
    """``$SEMIRING_CACHE_DIR``, else ``$XDG_CACHE_HOME/sparse-semirings/kernels`` (``~/.cache`` by default)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "sparse-semirings" / "kernels"


def cache_key(kernel: KernelSource, arch: str = DEFAULT_ARCH, options: tuple[str, ...] = ()) -> str:
    major, minor = nvrtc_version()
    parts = [kernel.source, arch, "\0".join(options), f"nvrtc {major}.{minor}", _FORMAT.decode()]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def compile_cached(kernel: KernelSource, arch: str = DEFAULT_ARCH, options: tuple[str, ...] = ()) -> bytes:
    """The cubin of ``kernel``: from memory, from the disk cache, or compiled (and then stored)."""
    global compile_count
    key = cache_key(kernel, arch, options)
    if key in _MEMORY:
        return _MEMORY[key]
    path = cache_dir() / f"{key}.cubin"
    cubin = _read_entry(path)
    if cubin is None:
        cubin = compile_kernel(kernel, arch, options)
        compile_count += 1
        _write_entry(path, cubin)
    _MEMORY[key] = cubin
    return cubin


def _read_entry(path: Path) -> bytes | None:
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head, digest, body = blob[: len(_FORMAT)], blob[len(_FORMAT) : len(_FORMAT) + 64], blob[len(_FORMAT) + 64 :]
    if head != _FORMAT or digest != hashlib.sha256(body).hexdigest().encode():
        return None  # damaged or foreign: compile again and replace it
    return body


def _write_entry(path: Path, cubin: bytes) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as tmp:
            tmp.write(_FORMAT + hashlib.sha256(cubin).hexdigest().encode() + cubin)
        os.replace(tmp.name, path)
    except OSError:  # a read-only or full cache only costs recompiling next time
        if tmp is not None and os.path.exists(tmp.name):
            os.unlink(tmp.name)


def clear_memory_cache() -> None:
    _MEMORY.clear()


# --------------------------------------------------------------------------- the GPU engine (CuPy)
#
# The same interface as ``kernels.cpu``: the distances driver and
# ``semiring.pairwise`` call these without knowing which engine runs.  Arrays
# stay on the device between steps; only ``to_host`` copies back.
EXPANSION_VARIABLES = tuple(cuda_source.EXPANSION_ARGS)
DEVICE_RESULTS = True  # results are CuPy arrays: CuPy callers get them without a host round trip
THREADS = 256

_FUNCTIONS: dict = {}


def unavailable_reason() -> str | None:
    """Why the GPU engine cannot run here, or None when it can."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'sparse-semirings[cuda]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError and driver errors alike
        return f"no usable CUDA device ({exc})"
    if count == 0:
        return "no CUDA device"
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return "NVRTC bindings are not installed (pip install cuda-bindings)"
    return None


def device_arch() -> str:
    import cupy

    return "sm_" + cupy.cuda.Device().compute_capability  # e.g. "90"


def _function(kernel: cuda_source.KernelSource):
    """The loaded kernel (compiled through the cache), loaded once per process."""
    import cupy

    arch = device_arch()
    key = (hashlib.sha256(kernel.source.encode()).hexdigest(), arch)
    if key not in _FUNCTIONS:
        module = cupy.cuda.function.Module()
        module.load(compile_cached(kernel, arch))
        _FUNCTIONS[key] = (module, module.get_function(kernel.name))  # the module must outlive the function
    return _FUNCTIONS[key][1]


def _launch(kernel: cuda_source.KernelSource, count: int, args: tuple, threads: int = THREADS) -> None:
    """Run ``kernel`` on ``count`` threads, one-dimensional."""
    if count:
        _run(_function(kernel), ((count + threads - 1) // threads,), (threads,), args)


def _run(fn, grid: tuple, block: tuple, args: tuple, shared: int = 0) -> None:
    """Launch a loaded kernel; by convention its output is the last argument.

    A raw kernel receives only each array's data pointer, so every input goes in
    C-contiguous: views such as the rows and columns ``cupy.nonzero`` returns are
    strided, and a kernel indexing them as dense would read the wrong entries.
    The output is never copied (a copy would swallow the results), only checked.
    """
    import cupy

    *inputs, out = args
    if not out.flags.c_contiguous:
        raise ValueError("the output array of a kernel must be C-contiguous")
    inputs = [cupy.ascontiguousarray(a) if isinstance(a, cupy.ndarray) else a for a in inputs]
    fn(grid, block, (*inputs, out), shared_mem=shared)


@dataclass
class DeviceCSR:
    """A CSR matrix whose arrays live on the GPU."""

    indptr: object
    indices: object
    data: object
    shape: tuple[int, int]

    @property
    def dtype(self):
        return self.data.dtype


def to_device(A) -> DeviceCSR:
    import cupy

    nnz = int(A.indptr[-1])
    return DeviceCSR(cupy.asarray(A.indptr), cupy.asarray(A.indices[:nnz]), cupy.asarray(A.data[:nnz]), A.shape)


def to_host(a):
    return a.get()


def empty(shape, dtype):
    import cupy

    return cupy.empty(shape, dtype=dtype)


def batch_rows(m: int, p: int, bytes_per_entry: int, working_memory: float | None = None) -> int:
    """Rows of X per batch: the temporaries and the batch's result fit the working memory (MiB),
    by default half of the GPU memory free now."""
    import cupy

    if working_memory is None:
        cupy.get_default_memory_pool().free_all_blocks()
        budget = cupy.cuda.Device().mem_info[0] // 2
    else:
        budget = working_memory * 2**20
    return max(1, min(m, int(budget // max(1, p * bytes_per_entry))))


def accumulate_dtype(result_dtype) -> np.dtype:
    """The GPU accumulates in the result's type (float32 for float32 input)."""
    return np.dtype(result_dtype)


def _names(dtype) -> tuple[str, object]:
    return ("float32", np.float32) if np.dtype(dtype) == np.float32 else ("float64", np.float64)


def _indices(*arrays) -> tuple[str, list]:
    """One index type for every array of a launch: int32 when all are, else int64."""
    if all(a.dtype == np.int32 for a in arrays):
        return "int32", list(arrays)
    return "int64", [a.astype(np.int64, copy=False) for a in arrays]


def _params(values) -> object:
    import cupy

    values = np.asarray(values, dtype=np.float64)
    return cupy.asarray(values if values.size else np.zeros(1))


def plan(sr, X: DeviceCSR, Y: DeviceCSR, xv=None, yv=None, margins: bool = True, nonnegative=None) -> str:
    """The strategy of a dense product, all choices in one place (``docs/cuda.md`` explains each).

    ``"margins"`` (a plus-monoid union split into row margins and one
    intersection), ``"dense-gemm"``, ``"inverted"``, or :func:`choose_strategy`'s
    ``"rowvec"``/``"rowvec-compact"``/``"merge"``; ``$SEMIRING_GPU_STRATEGY``
    other than ``auto`` turns the first three off (``inverted`` forces the
    inverted kernel where it applies).  ``nonnegative`` (whether all values
    are), when the caller knows it, spares looking again.
    """
    xv = X.data if xv is None else xv
    yv = Y.data if yv is None else yv
    forced = os.environ.get(STRATEGY_ENV, "auto")
    auto = forced == "auto"
    if margins and auto and sr.is_union:
        nonnegative = _nonnegative(xv, yv) if nonnegative is None else nonnegative
        if sr.margin_split(nonnegative) is not None:
            return "margins"
    degree = X.indices.size / max(1, X.shape[0]) + Y.indices.size / max(1, Y.shape[0])
    strategy = choose_strategy(X.shape[1], _names(yv.dtype)[0], sr, degree)
    if sr.annihilates and not _finite(xv, yv):
        return "merge"  # rowvec skips zero entries, exact only where 0 ⊗ y is 0
    if auto and strategy != "merge" and _dense_pays(sr, Y):
        return "dense-gemm"
    if _inverted_applies(sr, Y) and (forced == "inverted" or (auto and _inverted_pays(X, Y))):
        return "inverted"
    return strategy


def pairwise(X: DeviceCSR, Y: DeviceCSR, sr, out_dtype, mask=None):
    """Dense ``(m, p)`` result, or the values at ``mask`` = (rows, cols) on the device."""
    import cupy

    value_type, T = _names(out_dtype)
    xv, yv = X.data.astype(T, copy=False), Y.data.astype(T, copy=False)
    start = T(sr.start(X.shape[1]))
    if mask is None:
        index_type, (xp, xi, yp, yi) = _indices(X.indptr, X.indices, Y.indptr, Y.indices)
        m, p = X.shape[0], Y.shape[0]
        nonnegative = sr.is_union and _nonnegative(xv, yv)  # only a union's margin split asks
        strategy = plan(sr, X, Y, xv, yv, nonnegative=nonnegative)
        if strategy == "margins":
            done = _union_by_margins(sr.margin_split(nonnegative), sr, X, Y, out_dtype)
            if done is not None:
                return done
            strategy = plan(sr, X, Y, xv, yv, margins=False)  # a margin is not finite
        out = cupy.empty((m, p), dtype=T)
        if strategy == "inverted":
            _inverted(sr, value_type, index_type, X, xv, Y, out)
        elif strategy == "dense-gemm":
            _dense_gemm(value_type, index_type, (xp, xi, xv), (yp, yi, yv), X.shape[1], out)
        elif strategy == "rowvec":
            _rowvec(sr, value_type, index_type, (xp, xi, xv), (yp, yi, yv), X.shape[1], start, out)
        elif strategy == "rowvec-compact":
            _rowvec_compact(sr, value_type, index_type, (xp, xi, xv), (yp, yi, yv), X.shape[1], start, out)
        else:
            _merge(sr, value_type, index_type, (xp, xi, xv), (yp, yi, yv), start, out)
        return out
    rows, cols = mask
    index_type, (xp, xi, yp, yi, rows, cols) = _indices(X.indptr, X.indices, Y.indptr, Y.indices, rows, cols)
    out = cupy.empty(rows.size, dtype=T)
    kernel = cuda_source.render_pairwise_merge(sr, value_type, index_type, masked=True)
    _launch(
        kernel, rows.size, (xp, xi, xv, yp, yi, yv, rows, cols, np.int64(rows.size), start, _params(sr.params), out)
    )
    return out


def _nonnegative(*values) -> bool:
    return all(v.size == 0 or float(v.min()) >= 0 for v in values)


def _finite(*values) -> bool:
    import cupy

    return all(bool(cupy.isfinite(v).all()) for v in values)


# A union split into margins (see Semiring.margin_split): the sum, and where it
# cancels to under 1/8 of the margins' magnitudes (relative error then at most
# ~8x the accumulation's, ~1e-5 in float32), the entries recomputed by merging.
_MARGIN_SUM = _expr.parse("c0 + nx0 + ny0", EXPANSION_VARIABLES)[0]
_MARGIN_CANCELS = _expr.parse("abs(c0) <= 0.125 * (nx1 + ny1) and nx1 + ny1 > 0.0", EXPANSION_VARIABLES)[0]


def _union_by_margins(split, sr, X: DeviceCSR, Y: DeviceCSR, out_dtype):
    """A plus-monoid union in one intersection pass; None where a margin is not finite."""
    import cupy

    T = _names(out_dtype)[1]
    norms = []
    for A, tree in ((X, split.x_margin), (Y, split.y_margin)):
        norms.append([row_norm(A, tree, T), row_norm(A, _expr.Node("call", ("abs", tree)), T)])
    (nx, ax), (ny, ay) = norms
    if not bool(cupy.isfinite(ax).all()) or not bool(cupy.isfinite(ay).all()):
        return None
    out = pairwise(X, Y, split.cross, out_dtype)
    none = np.zeros(0)
    expand(_MARGIN_SUM, (), none, [out], [nx, ax], [ny, ay], X.shape[1], out)
    flagged = select(_MARGIN_CANCELS, (), none, [out], [nx, ax], [ny, ay], X.shape[1], out.shape)
    if mask_size(flagged):
        scatter(out, flagged, pairwise(X, Y, sr, out_dtype, mask=flagged))
    return out


STRATEGIES = ("auto", "rowvec", "merge", "inverted")  # what $SEMIRING_GPU_STRATEGY may say
STRATEGY_ENV = "SEMIRING_GPU_STRATEGY"
ROWVEC_THREADS = 1024


def max_shared_bytes() -> int:
    """Dynamic shared memory one block may opt in to on this device (227 KiB on Hopper)."""
    import cupy

    return int(cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"])


# A union's second pass holds each Y row in shared memory; when rows are short
# (EDGAR-like, ~6 stored values) filling shared memory per row costs more than
# merging the pairs: measured on an H200, merge 8.1 ms against 17.3 ms there,
# while at ~100 values per row the shared-memory kernel is 2.6x faster.
UNION_MERGE_BELOW_DEGREE = 32


def choose_strategy(ncols: int, value_type: str, sr, mean_degree: float | None = None) -> str:
    """How a dense product runs; ``$SEMIRING_GPU_STRATEGY`` (``auto``/``rowvec``/``merge``) overrides.

    * ``"rowvec"`` — a row of the whole column space fits in shared memory (with
      the bitmap unions and structural semirings need);
    * ``"rowvec-compact"`` — it does not, so the columns are renumbered onto those
      a batch of X rows stores, batches sized to fit;
    * ``"merge"`` — forced, no columns at all, or a union whose rows are short
      (``mean_degree``, the two inputs' mean stored values per row added, below
      ``UNION_MERGE_BELOW_DEGREE``).
    """
    forced = os.environ.get(STRATEGY_ENV, "auto")
    if forced not in STRATEGIES:
        raise ValueError(f"{STRATEGY_ENV} must be one of {STRATEGIES}, got {forced!r}")
    if forced == "merge" or ncols == 0:
        return "merge"
    if forced == "auto" and sr.is_union and mean_degree is not None and mean_degree < UNION_MERGE_BELOW_DEGREE:
        return "merge"
    need = cuda_source.rowvec_shared_bytes(ncols, value_type, sr, second_pass=sr.is_union)
    return "rowvec" if need <= max_shared_bytes() else "rowvec-compact"


# plus_times on dense-ish rows is a dense matrix product: cuBLAS's GEMM (float32
# without TF32, so products are exact as in the sparse kernels) beats looking each
# stored value up once Y stores more than a few % of its columns.  Measured on an
# H200, 2048 rows against all: scRNA-like (6 %) GEMM 33 ms against rowvec 62 ms;
# movielens-like (0.5 %) GEMM 61 ms against rowvec 12 ms.
DENSE_GEMM_DENSITY = 0.03
# Dense copies are made a chunk of columns at a time, X's and Y's together within this.
DENSE_CHUNK_BYTES = 128 * 2**20


def _dense_pays(sr, Y: DeviceCSR) -> bool:
    plus_times = sr.add.op.text == "x + y" and sr.add.identity == 0.0 and sr.mult.text == "x * y"
    return plus_times and Y.indices.size >= DENSE_GEMM_DENSITY * Y.shape[0] * Y.shape[1] > 0


def _dense_gemm(value_type, index_type, held, streamed, ncols, out):
    """``out = X · Yᵀ`` by cuBLAS, over chunks of columns densified by a kernel (``render_densify``)."""
    import cupy
    from cupy import cublas

    (m, p), T = out.shape, out.dtype
    if m == 0:
        return
    chunk = max(1, min(ncols, DENSE_CHUNK_BYTES // (T.itemsize * (m + p))))
    kernel = cuda_source.render_densify(value_type, index_type)
    for c0 in range(0, ncols, chunk):
        c1 = min(ncols, c0 + chunk)
        A, B = cupy.zeros((m, c1 - c0), T), cupy.zeros((p, c1 - c0), T)
        _launch(kernel, m * 32, (*held, np.int64(m), np.int64(c0), np.int64(c1), A))
        _launch(kernel, p * 32, (*streamed, np.int64(p), np.int64(c0), np.int64(c1), B))
        cublas.gemm("N", "T", A, B, out=out, alpha=1.0, beta=0.0 if c0 == 0 else 1.0)
        del A, B


# Plus-monoid intersections of short rows over a wide space: walk, for each stored
# entry of X, the postings of its column in Y (``render_pairwise_inverted``).
# Its work is Σ over X's entries of their column's length in Y, each an atomic
# add; rowvec's is one shared-memory lookup per stored entry of Y per X row.
# The inverted kernel runs where its work, weighted by INVERTED_COST per atomic,
# is the smaller; its postings index the whole column space, so at most
# INVERTED_MAX_COLUMNS columns.
INVERTED_COST = 8
INVERTED_MAX_COLUMNS = 1 << 24


def _inverted_applies(sr, Y: DeviceCSR) -> bool:
    return sr.add.op.text == "x + y" and not sr.is_union and 0 < Y.shape[1] <= INVERTED_MAX_COLUMNS


def _inverted_pays(X: DeviceCSR, Y: DeviceCSR) -> bool:

    if X.indices.size == 0 or Y.indices.size == 0:
        return False
    work = int(_column_counts(Y)[X.indices].sum())
    return INVERTED_COST * work < X.shape[0] * Y.indices.size


def _column_counts(Y: DeviceCSR):
    """Stored entries per column of Y, counted once per device matrix (the cost model and the postings share it)."""
    import cupy

    if "_column_counts" not in Y.__dict__:
        Y.__dict__["_column_counts"] = cupy.bincount(Y.indices, minlength=Y.shape[1])
    return Y.__dict__["_column_counts"]


def _postings(Y: DeviceCSR, index_type: str, T):
    """Y in CSC form — (column pointers, row of each entry, value) — built once per device matrix."""
    import cupy

    cache = Y.__dict__.setdefault("_postings", {})
    key = (index_type, np.dtype(T).str)
    if key not in cache:
        I = np.int32 if index_type == "int32" else np.int64
        nnz = Y.indices.size
        order = cupy.argsort(Y.indices)
        rows = cupy.searchsorted(Y.indptr, cupy.arange(nnz), side="right") - 1
        colptr = cupy.zeros(Y.shape[1] + 1, dtype=I)
        colptr[1:] = cupy.cumsum(_column_counts(Y))
        cache[key] = (colptr, rows[order].astype(I), Y.data[order].astype(T))
    return cache[key]


def _inverted(sr, value_type, index_type, X: DeviceCSR, xv, Y: DeviceCSR, out):
    import cupy

    colptr, yrow, yv = _postings(Y, index_type, out.dtype)
    I = colptr.dtype
    nnz = X.indices.size
    xrow = (cupy.searchsorted(X.indptr, cupy.arange(nnz), side="right") - 1).astype(I)
    out.fill(0)
    kernel = cuda_source.render_pairwise_inverted(sr, value_type, index_type)
    args = (xrow, X.indices.astype(I, copy=False), xv, np.int64(nnz), colptr, yrow, yv)
    _launch(kernel, nnz * 32, (*args, np.int64(out.shape[1]), _params(sr.params), out))


def _shared_capacity(value_type: str, sr) -> int:
    """The most columns ``render_pairwise_rowvec`` can hold in shared memory."""
    budget, item = max_shared_bytes(), (4 if value_type == "float32" else 8)
    n = budget // item
    while n > 0 and cuda_source.rowvec_shared_bytes(n, value_type, sr, second_pass=sr.is_union) > budget:
        n -= max(1, n // 256)
    return n


def _merge(sr, value_type, index_type, held, streamed, start, out):
    m, p = out.shape
    kernel = cuda_source.render_pairwise_merge(sr, value_type, index_type, masked=False)
    _launch(kernel, m * p, (*held, *streamed, np.int64(m), np.int64(p), start, _params(sr.params), out))


def _rowvec_compact(sr, value_type, index_type, held, streamed, ncols, start, out):
    """``rowvec`` over a wide column space: batches of X rows whose stored columns fit in shared memory.

    A batch's columns U (sorted) become 0..|U|-1; every other column, in Y,
    becomes the sentinel |U|, a slot that holds 0 and is never marked stored,
    so it contributes exactly what a column the X row lacks contributes.  The
    renumbering is monotone, so rows stay sorted.
    """
    import cupy

    xp, xi, xv = held
    yp, yi, yv = streamed
    capacity = _shared_capacity(value_type, sr) - 1  # one slot for the sentinel
    m, r0, rows = out.shape[0], 0, out.shape[0]
    while r0 < m:
        r1 = min(m, r0 + rows)
        k0, k1 = int(xp[r0]), int(xp[r1])
        used = cupy.unique(xi[k0:k1])
        if used.size > capacity and r1 - r0 > 1:
            rows = max(1, (r1 - r0) // 2)  # fewer rows, fewer distinct columns
            continue
        if used.size > capacity:  # one row alone stores more columns than fit: merge it
            _merge(
                sr, value_type, index_type, (xp[r0 : r1 + 1] - k0, xi[k0:k1], xv[k0:k1]), streamed, start, out[r0:r1]
            )
        else:
            renumber = cupy.full(ncols, used.size, dtype=xi.dtype)
            renumber[used] = cupy.arange(used.size, dtype=xi.dtype)
            batch = (xp[r0 : r1 + 1] - k0, renumber[xi[k0:k1]], xv[k0:k1])
            _rowvec(sr, value_type, index_type, batch, (yp, renumber[yi], yv), int(used.size) + 1, start, out[r0:r1])
        r0 = r1


def _group_size(indptr, rows: int) -> int:
    """Lanes per streamed row: about one lane per 8 stored values, a power of two up to a warp."""
    mean = float(indptr[-1]) / max(1, rows)
    group = 1
    while group < 32 and group * 8 < mean:
        group *= 2
    return group


def _rowvec(sr, value_type, index_type, held, streamed, ncols, start, out, second_pass=False):
    """One pass of the shared-memory kernel: rows of ``held`` against all rows of ``streamed``."""
    import cupy

    m_a, m_b = held[0].size - 1, streamed[0].size - 1
    if m_a == 0 or m_b == 0:
        return
    group = _group_size(streamed[0], m_b)
    kernel = cuda_source.render_pairwise_rowvec(sr, value_type, index_type, group, second_pass)
    fn = _function(kernel)
    shared = cuda_source.rowvec_shared_bytes(ncols, value_type, sr, second_pass)
    _allow_shared(fn, shared)
    groups = ROWVEC_THREADS // group
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    grid_y = max(1, min((m_b + groups - 1) // groups, (8 * sms + m_a - 1) // m_a, 65535))
    stride_a, stride_b = (1, out.shape[1]) if second_pass else (out.shape[1], 1)
    args = (*held, *streamed, np.int64(m_b), np.int64(ncols), start, _params(sr.params))
    _run(fn, (m_a, grid_y), (ROWVEC_THREADS,), (*args, np.int64(stride_a), np.int64(stride_b), out), shared)
    if sr.is_union and not second_pass:  # the columns only X stores: Y's rows held, X's streamed
        _rowvec(sr, value_type, index_type, streamed, held, ncols, start, out, second_pass=True)


_SHARED_SET: dict = {}


def _allow_shared(fn, nbytes: int) -> None:
    """Let ``fn`` use more than the default 48 KiB of dynamic shared memory."""
    if nbytes <= 48 * 1024 or _SHARED_SET.get(fn.ptr, 0) >= nbytes:
        return
    from cuda.bindings import driver

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    (err,) = driver.cuFuncSetAttribute(driver.CUfunction(fn.ptr), attr, nbytes)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cannot give the kernel {nbytes} bytes of shared memory: {err}")
    _SHARED_SET[fn.ptr] = nbytes


def _label(tree) -> str:
    return "e" + hashlib.sha1(repr(tree).encode()).hexdigest()[:12]


def row_norm(A: DeviceCSR, tree, dtype=np.float64):
    import cupy

    value_type, T = _names(dtype)
    index_type, (indptr,) = _indices(A.indptr)
    out = cupy.zeros(A.shape[0], dtype=T)
    kernel = cuda_source.render_row_norm(tree, _label(tree), value_type, index_type)
    _launch(kernel, A.shape[0] * 32, (indptr, A.data.astype(T, copy=False), np.int64(A.shape[0]), out))
    return out


def expand(tree, param_names, params, terms, xnorms, ynorms, ncols: int, out):
    """``out[i, j] = f(c0[i,j], c1[i,j], nx*[i], ny*[j], n)`` on the device; ``out`` is 2-D."""
    value_type, T = _names(out.dtype)
    m, p = out.shape
    kernel = cuda_source.render_expansion(tree, tuple(param_names), _label(tree), value_type)
    args = (*_operands(T, terms, xnorms, ynorms), np.int64(m), np.int64(p), np.int64(ncols), _params(params), out)
    _launch(kernel, m * p, args)
    return out


def _operands(T, terms, xnorms, ynorms) -> list:
    """c0, c1, nx0, nx1, ny0, ny1 in type T; a dummy stands for each one the expression does not read."""
    dummy = empty(1, T)
    pad = [a.astype(T, copy=False) for a in terms] + [dummy] * (2 - len(terms))
    pad += [a.astype(T, copy=False) for a in xnorms] + [dummy] * (2 - len(xnorms))
    return pad + [a.astype(T, copy=False) for a in ynorms] + [dummy] * (2 - len(ynorms))


def select(tree, param_names, params, terms, xnorms, ynorms, ncols: int, shape: tuple[int, int]):
    """The entries where the condition holds, as (rows, cols) index arrays, in no particular order.

    Listed by a kernel with a counter (``render_expansion(select=True)``): the
    memory taken is that of the hits, never an m×p flag array.  The buffers
    start at 1/256 of the entries; if more hit, the kernel runs once more with
    buffers of the exact size it counted.
    """
    import cupy

    value_type, T = _names(terms[0].dtype)
    m, p = shape
    # int32 positions where they fit, so the merge that recomputes them keeps int32 row arrays too
    index_type, I = ("int32", np.int32) if max(m, p) < 2**31 else ("int64", np.int64)
    kernel = cuda_source.render_expansion(tree, tuple(param_names), _label(tree), value_type, True, index_type)
    args = (*_operands(T, terms, xnorms, ynorms), np.int64(m), np.int64(p), np.int64(ncols), _params(params))
    capacity = max(1024, m * p // 256)
    while True:
        rows, cols = cupy.empty(capacity, I), cupy.empty(capacity, I)
        count = cupy.zeros(1, np.uint64)
        _launch(kernel, m * p, (*args, np.int64(capacity), rows, cols, count))
        hits = int(count[0])
        if hits <= capacity:
            return rows[:hits], cols[:hits]
        capacity = hits


def mask_from_csr(M):
    import cupy

    rows = np.repeat(np.arange(M.shape[0], dtype=M.indices.dtype), np.diff(M.indptr))
    return cupy.asarray(rows), cupy.asarray(M.indices[: M.indptr[-1]])


def mask_size(mask) -> int:
    return int(mask[0].size)


def scatter(out, mask, values) -> None:
    rows, cols = mask
    out[rows, cols] = values


# --------------------------------------------------------------------------- k-nearest neighbours: top-k selection
#
# The running selection of m query rows is a pair of (m, k) device arrays,
# values and int64 indices, each row sorted best first; every distance block
# (queries × a tile of index rows) is merged into it by one warp per row (see
# kernels.cuda_topk_source), so only m × k pairs persist between tiles.  The
# same interface as kernels.cpu_topk.


def row_slice(A: DeviceCSR, r0: int, r1: int) -> DeviceCSR:
    """Rows r0..r1 of A as a DeviceCSR of views (the indptr rebased; no host round trip)."""
    k0, k1 = int(A.indptr[r0]), int(A.indptr[r1])
    return DeviceCSR(A.indptr[r0 : r1 + 1] - k0, A.indices[k0:k1], A.data[k0:k1], (r1 - r0, A.shape[1]))


def topk_init(m: int, k: int, dtype):
    import cupy

    return cupy.full((m, k), np.nan, dtype), cupy.full((m, k), topk_source.EMPTY, np.int64)


def topk_push(block, col0: int, self0: int, largest: bool, selection) -> None:
    """Merge ``block`` (query rows × index rows col0, col0 + 1, …) into ``selection`` in place.

    ``self0 >= 0``: the block's row r is index row self0 + r, which it does not select.
    """
    values, ids = selection
    m, p = block.shape
    k = values.shape[1]
    if m == 0 or p == 0:
        return
    value_type, _ = _names(values.dtype)
    capacity = topk_source.capacity_for(k)
    if capacity is None:
        _topk_by_sorting(block, col0, self0, largest, selection)
        return
    kernel = topk_source.render_topk(value_type, capacity, largest)
    threads = 32 * topk_source.WARPS_PER_BLOCK
    grid = ((m + topk_source.WARPS_PER_BLOCK - 1) // topk_source.WARPS_PER_BLOCK,)
    args = (block.astype(values.dtype, copy=False), np.int64(m), np.int64(p), np.int64(col0), np.int64(self0))
    _run(_function(kernel), grid, (threads,), (*args, np.int32(k), values, ids))


def topk_extra_bytes(k: int) -> int:
    """Temporaries per distance-block entry beyond the block: none for the kernel; the sort's for a large k
    (candidate values, indices and keys, their class, two orders)."""
    return 0 if topk_source.capacity_for(k) else 8 + 8 + 8 + 1 + 8 + 8


def _topk_by_sorting(block, col0, self0, largest, selection) -> None:
    """For k beyond the kernels' register lists: stable sorts of the running selection and the block.

    Candidates are laid out by index (the running pairs come from earlier tiles,
    so their indices are smaller, and they are sorted already), so a stable sort
    by value breaks ties by index.  NaN and excluded pairs (the query itself,
    empty slots) are ranked by a second stable sort on their class.
    """
    import cupy

    values, ids = selection
    m, p = block.shape
    k = values.shape[1]
    cand_v = cupy.concatenate([values, block.astype(values.dtype, copy=False)], axis=1)
    cand_i = cupy.concatenate([ids, cupy.broadcast_to(cupy.arange(col0, col0 + p, dtype=np.int64), (m, p))], axis=1)
    nan = cupy.isnan(cand_v)
    excluded = cand_i == topk_source.EMPTY
    if self0 >= 0:
        excluded |= cand_i == cupy.arange(self0, self0 + m, dtype=np.int64)[:, None]
    klass = nan.astype(np.int8) + 2 * excluded.astype(np.int8)  # 0 number, 1 NaN, 2 excluded (3: empty NaN)
    key = cupy.where(nan, 0, -cand_v if largest else cand_v)
    order = cupy.argsort(key, axis=1)
    order = cupy.take_along_axis(order, cupy.argsort(cupy.take_along_axis(klass, order, axis=1), axis=1), axis=1)
    keep = order[:, :k]
    values[...] = cupy.take_along_axis(cand_v, keep, axis=1)
    ids[...] = cupy.take_along_axis(cand_i, keep, axis=1)
    taken = cupy.take_along_axis(klass, keep, axis=1) >= 2
    values[taken], ids[taken] = np.nan, topk_source.EMPTY


def topk_finish(selection, largest: bool, dtype):
    """The selection as host arrays ``(values, indices)``, each row best first."""
    values, ids = selection
    return values.astype(dtype, copy=False).get(), ids.get()
