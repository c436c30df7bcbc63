"""Timing and peak GPU memory, one definition for every benchmark script.

``timed`` (CUDA events, device work), ``wall`` (wall clock, host in and out)
and ``PeakMemory`` (a counting CuPy allocator with no pool: every allocation,
cuSPARSE's and cuBLAS's work buffers included); ``commit``, the code measured.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

MIB = 2**20


def commit() -> str:
    """The commit of the code measured, for a results file: ``$COMMIT`` where set (a copy of the tree whose git
    metadata is not its own: the lent GPU machine's, a ``git archive``), else this checkout's HEAD, with
    "+dirty" where the tree has uncommitted changes, or "unknown" outside a checkout."""
    if os.environ.get("COMMIT"):
        return os.environ["COMMIT"]

    def git(*args: str) -> str:
        try:
            out = subprocess.run(
                ["git", "-C", str(Path(__file__).resolve().parent), *args], check=False, capture_output=True, text=True
            )
        except OSError:
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    return (head + ("+dirty" if git("status", "--porcelain") else "")) if head else "unknown"


def timed(fn, repeats: int) -> tuple[float, object]:
    """Median milliseconds of ``fn()`` between CUDA events, after one warm-up call, and its last result."""
    import cupy

    result = fn()
    times = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        result = fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return float(np.median(times)), result


def wall(fn, repeats: int) -> tuple[float, object]:
    """Median seconds of ``fn()`` (host in, host out, so the GPU has finished), and its last result."""
    times, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def _nbytes(result) -> int:
    """Device bytes a result holds: an array, a cupyx sparse matrix, or a tuple of them."""
    if isinstance(result, tuple):
        return sum(_nbytes(r) for r in result)
    if hasattr(result, "indptr"):
        return result.data.nbytes + result.indices.nbytes + result.indptr.nbytes
    return getattr(result, "nbytes", 0)


class PeakMemory:
    """A CuPy allocator without a pool that counts live bytes and their peak."""

    def __init__(self):
        self.live = self.peak = 0
        self.sizes: dict[int, int] = {}

    def _malloc(self, size: int, device: int) -> int:
        import cupy

        ptr = cupy.cuda.runtime.malloc(size)
        self.sizes[ptr] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        return ptr

    def _free(self, ptr: int, device: int) -> None:
        import cupy

        cupy.cuda.runtime.free(ptr)
        self.live -= self.sizes.pop(ptr)

    def run(self, fn):
        """``fn()`` with every allocation counted from zero; its result."""
        import cupy

        pool = cupy.get_default_memory_pool()
        cupy.cuda.Device().synchronize()
        pool.free_all_blocks()
        cupy.cuda.set_allocator(cupy.cuda.PythonFunctionAllocator(self._malloc, self._free).malloc)
        try:
            self.live = self.peak = 0
            result = fn()
            cupy.cuda.Device().synchronize()
        finally:
            cupy.cuda.set_allocator(pool.malloc)
        return result

    def extra_mib(self, fn) -> float:
        """Peak MiB ``fn()`` held beyond what was live before it and the result it returns."""
        result = self.run(fn)
        kept = _nbytes(result)
        del result
        return (self.peak - kept) / MIB

    def peak_mib(self, fn) -> float:
        """Peak MiB held while ``fn()`` ran, its result included."""
        self.run(fn)
        return self.peak / MIB
