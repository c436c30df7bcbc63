"""Loading compiled kernels with CuPy and launching them; device matrices and arrays.

The one module that talks to CuPy's module loader and the CUDA driver: every
other module launches through :func:`launch` or :func:`run` (on a kernel
:func:`function` loaded), and places data through :func:`to_device`,
:func:`to_host` and :func:`empty`.  CuPy is imported inside the functions, only
when a GPU is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semiring import validation
from semiring.interfaces import CALL_CACHE
from semiring.validation import Facts

from .compile import compile_cached
from .source import KernelSource, render_column_counts, render_csr_check, render_entry_rows

THREADS = 256  # threads per block of a one-dimensional launch

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


def max_shared_bytes() -> int:
    """Dynamic shared memory one block may opt in to on this device (227 KiB on Hopper)."""
    import cupy

    return int(cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"])


def free_bytes() -> int:
    """The device memory free now, counting the blocks CuPy's pool caches unused as free."""
    import cupy

    return cupy.cuda.Device().mem_info[0] + cupy.get_default_memory_pool().free_bytes()


def multiprocessor_count() -> int:
    import cupy

    return cupy.cuda.Device().attributes["MultiProcessorCount"]


def function(kernel: KernelSource):
    """The loaded kernel (compiled through the cache), loaded once per process."""
    import cupy

    arch = device_arch()
    key = (kernel.source, arch)  # a str keeps its hash: no digest of the source at every launch
    if key not in _FUNCTIONS:
        module = cupy.cuda.function.Module()
        module.load(compile_cached(kernel, arch))
        _FUNCTIONS[key] = (module, module.get_function(kernel.name))  # the module must outlive the function
    return _FUNCTIONS[key][1]


def launch(kernel: KernelSource, count: int, args: tuple, threads: int = THREADS) -> None:
    """Run ``kernel`` on ``count`` threads, one-dimensional."""
    if count:
        run(function(kernel), ((count + threads - 1) // threads,), (threads,), args)


def run(fn, grid: tuple, block: tuple, args: tuple, shared: int = 0) -> None:
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


_SHARED_SET: dict = {}


def allow_shared(fn, nbytes: int) -> None:
    """Let ``fn`` use more than the default 48 KiB of dynamic shared memory."""
    if nbytes <= 48 * 1024 or _SHARED_SET.get(fn.ptr, 0) >= nbytes:
        return
    from cuda.bindings import driver

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    (err,) = driver.cuFuncSetAttribute(driver.CUfunction(fn.ptr), attr, nbytes)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cannot give the kernel {nbytes} bytes of shared memory: {err}")
    _SHARED_SET[fn.ptr] = nbytes


# --------------------------------------------------------------------------- data on the device


@dataclass
class DeviceCSR:
    """A CSR matrix whose arrays live on the GPU; ``facts``: what validation proved of the checked matrix it was
    made from (``semiring.validation.Facts``; None: nothing, as for a matrix an engine derives), read instead
    of a scan where a strategy asks (``validation.all_hold``)."""

    indptr: object
    indices: object
    data: object
    shape: tuple[int, int]
    facts: Facts | None = None

    @property
    def dtype(self):
        return self.data.dtype

    def column_counts(self):
        """Stored entries per column, counted once per device matrix, or once for every tile over the same
        memory in a call or a held index (``derived``); the inverted kernel's cost model and its postings share
        it.  Atomic adds on Zipf-popular columns: about 50 ms for a tile of the 8.8 M-row MS MARCO-shaped index
        on an H200."""
        import cupy

        def count():
            counts = cupy.zeros(self.shape[1], np.uint64)  # CUDA's 64-bit atomic add is unsigned
            index_type, (indices,) = common_index(self.indices)
            launch(render_column_counts(index_type), indices.size, (indices, np.int64(indices.size), counts))
            return counts.view(np.int64)  # counts < 2**63: the same bits

        if "_column_counts" not in self.__dict__:
            self.__dict__["_column_counts"] = derived(self, "column_counts", count)
        return self.__dict__["_column_counts"]


def derived(A: DeviceCSR, tag, make):
    """What ``make()`` derives from A, kept in the call's cache (``semiring.interfaces.CALL_CACHE``, which a fitted
    index holds across its queries) under ``tag``; made anew outside a call.

    The key is where A's entries live and its shape (a tile of a held index is a new view of the same memory
    at each query), with its row pointers compared on a hit: the same memory and structure are the same
    matrix, since the cache holds A (its memory cannot be reused while it is there), and what holds a cache
    across calls owns the rows it was made from (``NearestNeighbors`` copies what it fits).
    """
    cache = CALL_CACHE.get()
    if cache is None:
        return make()
    key = (tag, A.shape, A.indices.size, int(A.indices.data.ptr), int(A.data.data.ptr))
    if key in cache:
        held, value = cache[key]
        if held.indptr is A.indptr or bool((held.indptr == A.indptr).all()):
            return value
    value = make()
    cache[key] = (A, value)  # A held with it, so its memory names no other matrix while it is kept
    return value


def entry_rows(indptr, nnz: int, dtype):
    """The row of each of the first ``nnz`` stored entries (COO rows) of the CSR row pointers ``indptr``, as
    ``dtype`` (int32 or int64): one kernel, no temporaries."""
    import cupy

    index_type = "int32" if np.dtype(dtype) == np.int32 else "int64"
    indptr = indptr.astype(dtype, copy=False)
    rows = cupy.empty(nnz, dtype)
    if nnz:
        nrows = indptr.size - 1
        launch(render_entry_rows(index_type), 32 * nrows, (indptr, np.int64(nrows), rows))
    return rows


CHECK_BLOCKS = 2048  # the CSR check's grid: warps stride over the rows, one set of atomics per warp


_VERDICTS_START: dict = {}


def _verdicts_start():
    """The check's counters before it runs (none found; the lowest column and the smallest magnitude found
    so far the largest int64, the highest column the smallest, the largest magnitude 0), on this device."""
    import cupy

    device = cupy.cuda.Device().id
    if device not in _VERDICTS_START:
        _VERDICTS_START[device] = cupy.array([0, 2**63 - 1, -(2**63 - 1), 0, 0, 0, 0, 0, 2**63 - 1, 0], dtype=np.int64)
    return _VERDICTS_START[device]


def csr_verdicts(A) -> dict:
    """What ``render_csr_check`` finds in the CuPy CSR matrix A (its index arrays' types and indptr's length
    checked by the caller), with its first and last row pointers: one launch, one copy back.  Entries are
    read within the stored arrays only; the caller checks the pointers against their length.  Also
    ``"magnitudes"``: the smallest nonzero and the largest magnitude of the values (inf and 0 where none is
    nonzero), as the CPU engine's pass gives them; they mean something where the values are finite."""
    m = A.shape[0]
    out = _verdicts_start().copy()  # a copy on the device, not one from the host
    index_type, (indptr, indices) = common_index(A.indptr, A.indices)
    value_type = "float32" if A.data.dtype == np.float32 else "float64"
    blocks = max(1, min(CHECK_BLOCKS, (m + 7) // 8))  # one block at least: it reads the pointers
    kernel = function(render_csr_check(value_type, index_type))
    bound = min(indices.size, A.data.size)
    run(kernel, (blocks,), (THREADS,), (indptr, indices, A.data, np.int64(m), np.int64(bound), out))
    keys = ("decreasing rows", "lowest column", "highest column", "unsorted", "nan", "inf", "first", "last")
    found = out.get()
    verdict = dict(zip(keys, (int(x) for x in found[:8])))
    verdict["magnitudes"] = magnitudes_from_bits(None if found[8] == 2**63 - 1 else found[8], found[9], A.data.dtype)
    return verdict


def magnitudes_from_bits(smallest, largest, dtype) -> tuple[float, float]:
    """The magnitudes a check kernel found, from their bits (``source``'s ``sr_magnitude_bits``) back as values
    of ``dtype``: the smallest nonzero (inf where ``smallest`` is None: no value is nonzero) and the largest."""
    bits = np.uint64 if np.dtype(dtype) == np.float64 else np.uint32

    def value(b) -> float:
        return float(np.array(b, np.int64).astype(bits).view(dtype))

    return (np.inf if smallest is None else value(smallest)), value(largest)


def to_device(A) -> DeviceCSR:
    import cupy

    nnz = validation.stored_entries(A)  # read by the check where A carries its facts: no wait for the device
    data = cupy.asarray(A.data[:nnz])
    return DeviceCSR(cupy.asarray(A.indptr), cupy.asarray(A.indices[:nnz]), data, A.shape, validation.facts_of(A))


def to_host(a):
    return a.get()


def empty(shape, dtype):
    import cupy

    return cupy.empty(shape, dtype=dtype)


def row_slice(A: DeviceCSR, r0: int, r1: int) -> DeviceCSR:
    """Rows r0..r1 of A as a DeviceCSR of views (the indptr rebased; no host round trip)."""
    k0, k1 = int(A.indptr[r0]), int(A.indptr[r1])
    rows = DeviceCSR(A.indptr[r0 : r1 + 1] - k0, A.indices[k0:k1], A.data[k0:k1], (r1 - r0, A.shape[1]))
    return validation.carry_facts(rows, A, part=True)


# --------------------------------------------------------------------------- kernel arguments


def value_type(dtype) -> tuple[str, object]:
    """The rendered value type of ``dtype`` and its NumPy type: float32, else float64."""
    return ("float32", np.float32) if np.dtype(dtype) == np.float32 else ("float64", np.float64)


def common_index(*arrays) -> tuple[str, list]:
    """One index type for every array of a launch: int32 when all are, else int64."""
    if all(a.dtype == np.int32 for a in arrays):
        return "int32", list(arrays)
    return "int64", [a.astype(np.int64, copy=False) for a in arrays]


_PARAMS: dict = {}


def device_params(values) -> object:
    """Parameter values as a float64 device array (one dummy slot when there are none), made once per values
    and device: kernels read it as ``const``, and each host-to-device copy cost a launch's worth of host time
    (a dozen per EDGAR-like call)."""
    import cupy

    values = np.asarray(values, dtype=np.float64).ravel()
    key = (values.tobytes(), cupy.cuda.Device().id)
    if key not in _PARAMS:
        if len(_PARAMS) >= 1024:  # parameters swept over many values: keep the newest
            _PARAMS.clear()
        _PARAMS[key] = cupy.asarray(values if values.size else np.zeros(1))
    return _PARAMS[key]
