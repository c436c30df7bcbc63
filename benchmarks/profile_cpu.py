"""Where a CPU engine call's time goes, stage by stage, at a given thread count.

The stages of ``semiring.pairwise(Q, X, plus_times, backend="cpu", sparse=True)`` (the sparse product;
``--measures`` may add distances) are functions of ``semiring.kernels.cpu`` and of ``semiring.validation``,
wrapped for the profiled calls so that each records its wall time (inclusive of the stages it calls); the
generated kernels of the semiring are wrapped too.  Each call runs ``--repeats`` times after a warm-up and
the stages of the fastest are kept.  What the stages leave of the call is Python between them.  The point is
how the parts scale: run it at 1, 2 and all threads, and the parts that do not shrink are the serial ones.

    python -m benchmarks cpu-profile --scale 0.5 --queries 512 --threads 16 --repeats 5 --seed 0 \
        --json benchmarks/results/cpu_stage_profile_16threads.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

from .record import commit
from .synthetic import DATASETS, make_dataset

# module: the functions of it that are stages (module-level names, looked up at call time by their callers)
STAGES = {
    "semiring.validation": ("check_pair",),
    "semiring.kernels.cpu.strategies": ("product_sparse", "product", "product_expanded"),
    "semiring.kernels.cpu.pairwise": (
        "sparse_by_columns",
        "sparse_by_rows",
        "compact_columns",
        "_x_column_slots",
        "index_by_column",
        "_row_bitmaps",
        "_postings_met",
        "_fill_row_bitmaps",
        "dense_columns",
        "column_blocks",
        "_sparse_arrays",
        "count_row_index",
        "place_row_index",
    ),
}


def instrument(table: dict) -> callable:
    """Wrap every stage (and the generated kernels of each semiring) to add its wall time to ``table``; returns
    the function that undoes it."""
    import importlib

    undo = []

    def timed(name, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                calls, ms = table.get(name, (0, 0.0))
                table[name] = (calls + 1, ms + (time.perf_counter() - t) * 1e3)

        return run

    for module_name, names in STAGES.items():
        module = importlib.import_module(module_name)
        for name in names:
            fn = getattr(module, name)
            setattr(module, name, timed(name, fn))
            undo.append((module, name, fn))
    pairwise = importlib.import_module("semiring.kernels.cpu.pairwise")
    generated = pairwise._semiring_kernels

    class Kernels:  # the generated module of a semiring, its kernels timed
        def __init__(self, module):
            self._module = module

        def __getattr__(self, name):
            return timed(name, getattr(self._module, name))

    pairwise._semiring_kernels = lambda *a, **k: Kernels(generated(*a, **k))
    undo.append((pairwise, "_semiring_kernels", generated))

    def restore():
        for module, name, fn in reversed(undo):
            setattr(module, name, fn)

    return restore


def profile(call, repeats: int) -> dict:
    call()  # warm-up: compiles or loads the kernels
    best = None
    for _ in range(repeats):
        table: dict = {}
        restore = instrument(table)
        try:
            w, c = time.perf_counter(), time.process_time()
            call()
            wall, cpu = (time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3
        finally:
            restore()
        if best is None or wall < best["ms"]:
            best = {"ms": wall, "cpu_per_wall": cpu / wall, "stages": table}
    stages = [{"stage": k, "calls": v[0], "ms": round(v[1], 3)} for k, v in best["stages"].items()]
    stages.sort(key=lambda s: -s["ms"])
    return {"ms": round(best["ms"], 3), "cpu_per_wall": round(best["cpu_per_wall"], 2), "stages": stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--queries", type=int, default=512)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument(
        "--measures", nargs="+", default=["sparse"], help="sparse (plus_times, sparse=True) and/or distance names"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import numba

    import semiring
    from semiring import distances

    numba.set_num_threads(args.threads)
    results = []
    for name in args.datasets:
        X = make_dataset(name, args.scale, args.seed)
        Q = X[: min(args.queries, X.shape[0])]
        for measure in args.measures:
            if measure == "sparse":

                def call(Q=Q, X=X):
                    return semiring.pairwise(Q, X, semiring.plus_times, backend="cpu", sparse=True)

            else:

                def call(Q=Q, X=X, measure=measure):
                    return distances.pairwise_distances(Q, X, metric=measure, backend="cpu")

            found = profile(call, args.repeats)
            print(f"\n{name} {measure}, {args.threads} threads: {found['ms']:.2f} ms, cpu/wall {found['cpu_per_wall']}")
            for s in found["stages"]:
                print(f"  {s['stage']:<28} {s['calls']:>4} calls {s['ms']:>9.2f} ms")
            results.append({"dataset": name, "measure": measure, "threads": args.threads, **found})
    if args.json:
        meta = {
            "command": " ".join(["python", *sys.argv]),
            "commit": commit(),
            "cores": os.cpu_count(),
            "numba": numba.__version__,
        }
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
