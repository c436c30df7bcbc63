"""Where a public call's time and device memory go, stage by stage, on the GPU.

Each named function below is wrapped, for the profiled call only, so that it
synchronises the device before and after: its wall time then is its device
work (inclusive of the stages it calls), and a counting allocator without a
pool (``measure.PeakMemory``) gives the peak bytes it held beyond what was live
when it began.  The synchronisation makes the total slower than the real call
(timed separately, with CUDA events, as the ``distances`` suite does): read the
stages as shares, not as the call's figure.  ``--pool`` times the stages with
CuPy's memory pool instead (no memory figures): without the pool every
allocation is a ``cudaMalloc``, which inflates the stages that allocate much.

``--host N`` runs each job's call N times under ``cProfile`` (no stages, no
synchronisation added) and prints where the host's time goes: a call whose GPU
work is short is bound by the host launching kernels and waiting at each copy
back (``get``, ``int()`` of a device scalar), which these rows name.

``--allocations MIB`` lists every allocation of at least MIB during the
profiled call, with the live bytes after it and the library frames that asked.

``--kernels N`` runs each job's call N times and nothing else (no stages), for
a kernel profiler to read: ``ncu --csv --metrics gpu__time_duration.sum,...
python -m benchmarks profile --seed 0 --jobs edgar:cosine:pairwise --kernels 2``.

    python -m benchmarks profile --seed 0 --jobs movielens:cosine:knn,scrna:cityblock:pairwise \
        --json benchmarks/results/stage_profile_h200.json
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .record import commit
from .synthetic import make_dataset
from .timing import MIB, PeakMemory, on_device


def timed(fn, repeats: int):
    """(median ms between CUDA events after a warm-up, the last result)."""
    t, result = on_device(fn, repeats)
    return t.ms, result


# module: the functions of it that are stages
STAGES = {
    "semiring.validation": ("check_matrix", "check_pair"),
    "semiring.distances.bound": ("prepare",),
    "semiring.kernels.cuda.strategies": (
        "product",
        "product_expanded",
        "expanded_apart",
        "recompute_listed",
        "union_by_margins",
        "dense_gemm",
        "_postings",
        "_column_pointers",
        "inverted",
        "merge",
        "rowvec_compact",
        "rowvec",
        "split",
        "_split_layout",
        "_dense_columns",
        "_columns_of",
        "plan",
    ),
    "semiring.kernels.cuda.launch": ("common_index",),
    "cupy.cublas": ("gemm",),
    "semiring.kernels.cuda.elementwise": ("row_norm", "expand", "select", "scatter"),
    "semiring.kernels.cuda.topk": ("topk_init", "topk_push", "topk_finish"),
}


class StageMemory(PeakMemory):
    """PeakMemory that also keeps the peak since a mark (one per open stage)."""

    def __init__(self, large_mib: float = 0.0):
        super().__init__()
        self.marks: list[list[int]] = []
        self.large_mib, self.large = large_mib, []

    def _malloc(self, size: int, device: int) -> int:
        ptr = super()._malloc(size, device)
        for mark in self.marks:
            mark[1] = max(mark[1], self.live)
        if self.large_mib and size >= self.large_mib * MIB:  # who asked: the library's innermost frames
            frames = [f for f in traceback.extract_stack() if "/semiring/" in f.filename][-3:]
            site = " < ".join(f"{Path(f.filename).name}:{f.lineno}({f.name})" for f in reversed(frames))
            self.large.append({"mib": round(size / MIB, 1), "live_mib": round(self.live / MIB, 1), "site": site})
        return ptr


def instrument(memory: StageMemory, table: dict):
    """Wrap every stage; returns a function that puts the originals back."""
    import cupy

    originals = []

    def wrap(module, name, fn):
        @functools.wraps(fn)
        def staged(*args, **kwargs):
            cupy.cuda.Device().synchronize()
            mark = [memory.live, memory.live]
            memory.marks.append(mark)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                cupy.cuda.Device().synchronize()
                memory.marks.pop()  # stages nest: the last mark opened is this one
                row = table.setdefault(f"{module.__name__.split('.')[-1]}.{name}", [0, 0.0, 0.0])
                row[0] += 1
                row[1] += (time.perf_counter() - t) * 1e3
                row[2] = max(row[2], (mark[1] - mark[0]) / MIB)

        return staged

    for module_name, names in STAGES.items():
        module = importlib.import_module(module_name)
        for name in names:
            fn = getattr(module, name, None)
            if fn is None:
                continue
            originals.append((module, name, fn))
            setattr(module, name, wrap(module, name, fn))

    def restore():
        for module, name, fn in originals:
            setattr(module, name, fn)

    return restore


def job_call(dataset: str, metric: str, job: str, seed: int, queries: int, rows: int | None = None):
    """The public call of a job: ``pairwise`` (the first ``queries`` rows against all; for a dataset
    ``denseMxN``, a dense CuPy array of M uniform float32 rows of N columns, every row against all), ``knn`` (all rows' kNN),
    or ``search`` (dataset ``retrieval``: a batch of ``queries`` against a fitted index of ``rows`` rows, its
    layout made by an untimed first batch, as ``python -m benchmarks retrieval`` times it)."""
    import cupyx.scipy.sparse as cusp

    from semiring import distances

    if job == "search":
        import cupy

        from .synthetic import RETRIEVAL, retrieval_index, retrieval_queries

        index = retrieval_index(rows or RETRIEVAL["rows"], seed, xp=cupy)
        batch = retrieval_queries(queries, seed, xp=cupy)
        nn = distances.NearestNeighbors(n_neighbors=10, metric=metric).fit(index)
        del index
        nn.kneighbors(batch)
        return lambda: nn.kneighbors(batch)
    if dataset.startswith("dense"):  # denseMxN: M × N uniform float32 rows (dense-gpu's draw), every row against all
        import cupy

        m, n = (int(v) for v in dataset[len("dense") :].split("x"))
        Xd = cupy.asarray(np.random.default_rng(seed).random((m, n), dtype=np.float32))
        return lambda: distances.pairwise_distances(Xd, metric=metric)
    X = make_dataset(dataset, 1.0, seed).astype(np.float32)
    Xc = cusp.csr_matrix(X)
    if job == "knn":
        return lambda: distances.NearestNeighbors(n_neighbors=10, metric=metric).fit(Xc).kneighbors()
    Qc = cusp.csr_matrix(X[:queries])
    return lambda: distances.pairwise_distances(Qc, Xc, metric=metric)


def host_profile(call, n: int, top: int = 40) -> dict:
    """The call run ``n`` times under cProfile: wall ms per call, and the functions with the most own time."""
    import cProfile
    import pstats

    import cupy

    cupy.cuda.Device().synchronize()
    profiler = cProfile.Profile()
    t = time.perf_counter()
    profiler.enable()
    for _ in range(n):
        call()
    cupy.cuda.Device().synchronize()
    profiler.disable()
    wall = (time.perf_counter() - t) * 1e3 / n
    stats = pstats.Stats(profiler)
    rows = []
    for (path, line, name), (_, ncalls, own, cum, _) in stats.stats.items():
        where = f"{Path(path).name}:{line}({name})" if line else name
        rows.append({"function": where, "calls": ncalls / n, "own_ms": own * 1e3 / n, "cum_ms": cum * 1e3 / n})
    rows.sort(key=lambda r: -r["own_ms"])
    print(f"  host: {wall:.2f} ms a call under cProfile; own time per call:")
    for r in rows[:top]:
        print(f"    {r['own_ms']:8.3f} ms {r['calls']:7.1f} calls  (cum {r['cum_ms']:8.3f})  {r['function']}")
    return {
        "host_ms": round(wall, 3),
        "functions": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in rows[:top]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument(
        "--jobs",
        required=True,
        help="comma-separated dataset:metric:job (job: pairwise, knn, or search; dataset denseMxN: dense rows)",
    )
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--rows", type=int, default=None, help="the retrieval index's rows (job search)")
    parser.add_argument("--pool", action="store_true", help="stages timed with CuPy's pool, no memory figures")
    parser.add_argument("--kernels", type=int, default=0, help="only run each call this many times (for ncu)")
    parser.add_argument("--allocations", type=float, default=0.0, help="list allocations of at least this many MiB")
    parser.add_argument("--host", type=int, default=0, help="run each call this many times under cProfile")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    for spec in args.jobs.split(","):
        dataset, metric, job = spec.split(":")
        call = job_call(dataset, metric, job, args.seed, args.queries, args.rows)
        if args.kernels:
            for _ in range(args.kernels):
                call()
            continue
        ms, _ = timed(call, 2)
        if args.host:
            print(f"\n{dataset} {metric} {job}: {ms:.2f} ms (CUDA events)")
            results.append(
                {"dataset": dataset, "metric": metric, "job": job, "ms": round(ms, 2), **host_profile(call, args.host)}
            )
            continue
        memory, table = StageMemory(args.allocations), {}
        restore = instrument(memory, table)
        try:
            t = time.perf_counter()
            if args.pool:
                call()
                extra = float("nan")
            else:
                extra = memory.extra_mib(call)
            profiled = (time.perf_counter() - t) * 1e3
        finally:
            restore()
        stages = [
            {"stage": k, "calls": v[0], "ms": round(v[1], 2), "peak_extra_mib": round(v[2], 1)}
            for k, v in table.items()
        ]
        stages.sort(key=lambda s: -s["ms"])
        print(
            f"\n{dataset} {metric} {job}: {ms:.1f} ms (CUDA events), {profiled:.1f} ms profiled, {extra:.1f} MiB extra"
        )
        for s in stages:
            print(f"  {s['stage']:<32} {s['calls']:>5} calls {s['ms']:>9.2f} ms  peak +{s['peak_extra_mib']:.1f} MiB")
        for a in memory.large:
            print(f"  alloc {a['mib']:>8.1f} MiB, live {a['live_mib']:>8.1f}  {a['site']}")
        results.append(
            {
                "allocations": memory.large,
                "dataset": dataset,
                "metric": metric,
                "job": job,
                "ms": round(ms, 2),
                "profiled_ms": round(profiled, 1),
                "extra_mib": None if args.pool else round(extra, 1),
                "stages": stages,
            }
        )
    if args.json:
        meta = {"command": " ".join(["python", *sys.argv]), "commit": commit()}
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
