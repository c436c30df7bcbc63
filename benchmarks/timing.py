"""Timing and device memory, one definition for every suite.

Both clocks follow one rule: ``warmups`` untimed calls first (compilation, caches, thread pools: whatever a
first call pays), then ``repeats`` timed calls, and the **median** is the figure; every time is kept.

* ``on_device(fn, repeats)``: device work, between CUDA events on the current stream (the result is left on
  the device; the events bracket everything ``fn`` enqueued).
* ``on_host(fn, repeats)``: host calls (a CPU engine, scikit-learn, python-graphblas, host in and host out
  through the GPU), wall clock; besides the wall time it records the process CPU time of the median call (how
  many cores the call kept busy) and the share of the machine other processes used meanwhile (a shared
  machine: rerun when that is not near 0).
* ``PeakMemory``: a counting CuPy allocator with no pool: every allocation counted (cuSPARSE's and cuBLAS's
  work buffers too), for the peak a call holds beyond what was live before it.
* ``setting(name, value)``: an engine setting (``semiring.settings``) forced for the calls inside the block,
  as it was before restored after it (the engines read their settings at each call).

Each timer returns ``(Timing, last result)``; ``Timing.ms`` is the median, ``Timing.as_dict()`` what a results
file stores::

    t, D = on_device(lambda: pairwise_distances(Qc, Xc, metric="cosine"), repeats=5)
    row["ours"] = t.as_dict()          # {"clock": "cuda events", "median_ms": ..., "times_ms": [...], ...}
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from dataclasses import asdict, dataclass, field

MIB = 2**20


@dataclass
class Timing:
    """A timed call: the clock, the median and every timed call (ms), the warm-up calls' times (ms)."""

    clock: str
    median_ms: float
    times_ms: list[float]
    warmup_ms: list[float]
    cpu_ms: float | None = None  # process CPU time of the median call (host clock)
    others_cpu: float | None = None  # share of all cores other processes used while timing (host clock)
    extra: dict = field(default_factory=dict)

    @property
    def ms(self) -> float:
        return self.median_ms

    def as_dict(self) -> dict:
        out = asdict(self)
        out["median_ms"] = round(out["median_ms"], 3)
        out["times_ms"] = [round(t, 3) for t in out["times_ms"]]
        out["warmup_ms"] = [round(t, 3) for t in out["warmup_ms"]]
        return {k: v for k, v in out.items() if v is not None and v != {}}


def _check(repeats: int, warmups: int) -> None:
    if repeats < 1 or warmups < 0:
        raise ValueError(f"repeats must be >= 1 and warmups >= 0, got repeats={repeats}, warmups={warmups}")


def on_device(fn, repeats: int, warmups: int = 1) -> tuple[Timing, object]:
    """Median milliseconds of ``fn()`` between CUDA events after ``warmups`` untimed calls; its last result."""
    import cupy

    _check(repeats, warmups)

    def once():
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        result = fn()
        stop.record()
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop), result

    warm, result = [], None
    for _ in range(warmups):
        ms, result = once()
        warm.append(ms)
    times = []
    for _ in range(repeats):
        del result  # free the previous result before the next is allocated
        ms, result = once()
        times.append(ms)
    return Timing("cuda events", statistics.median(times), times, warm), result


def on_device_rounds(fns, repeats: int, warmups: int = 1) -> list[tuple[Timing, object]]:
    """``on_device`` of several calls taken in turns, one of each a round: a GPU's clocks drift over a run (a
    3,000 x 300 cosine's calls went from 0.70 to 0.23 ms over nine repeats on an H200), and timed one after the
    other the first call would take the slow repeats and its peer the fast ones."""
    import cupy

    _check(repeats, warmups)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    warm, times, results = [[] for _ in fns], [[] for _ in fns], [None for _ in fns]
    for r in range(warmups + repeats):
        for k, fn in enumerate(fns):
            results[k] = None  # free this call's previous result before it allocates the next
            start.record()
            results[k] = fn()
            stop.record()
            stop.synchronize()
            (warm if r < warmups else times)[k].append(cupy.cuda.get_elapsed_time(start, stop))
    return [
        (Timing("cuda events, in turns", statistics.median(t), t, w), result)
        for t, w, result in zip(times, warm, results)
    ]


def on_host(fn, repeats: int, warmups: int = 1) -> tuple[Timing, object]:
    """Median wall-clock milliseconds of ``fn()`` after ``warmups`` untimed calls; its last result."""
    _check(repeats, warmups)
    warm, result = [], None
    for _ in range(warmups):
        t = time.perf_counter()
        result = fn()
        warm.append(1e3 * (time.perf_counter() - t))
    walls, cpus = [], []
    busy0, own0, wall0 = _system_busy_s(), time.process_time(), time.perf_counter()
    for _ in range(repeats):
        del result
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(1e3 * (time.perf_counter() - w))
        cpus.append(1e3 * (time.process_time() - c))
    others = _others_share(busy0, _system_busy_s(), time.process_time() - own0, time.perf_counter() - wall0)
    middle = sorted(range(repeats), key=walls.__getitem__)[(repeats - 1) // 2]
    return Timing("wall", statistics.median(walls), walls, warm, cpu_ms=cpus[middle], others_cpu=others), result


def _system_busy_s() -> float | None:
    """CPU seconds all processes have used (Linux /proc/stat), to detect competing load."""
    try:
        with open("/proc/stat") as f:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _others_share(busy0, busy1, own_s: float, wall_s: float) -> float | None:
    """Share of all cores used by other processes; None when unknown or the window is too short for
    /proc/stat's 10 ms ticks to say anything (under 0.25 s)."""
    if busy0 is None or busy1 is None or wall_s < 0.25:
        return None
    return round(min(1.0, max(0.0, (busy1 - busy0) - own_s) / (wall_s * (os.cpu_count() or 1))), 3)


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


@contextlib.contextmanager
def setting(name: str, value: str):
    """``$name`` set to ``value`` inside the block, as it was before after it."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before
