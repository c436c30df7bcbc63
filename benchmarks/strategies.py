"""Every GPU strategy of the sparse product forced in turn, on the four paper-shaped datasets, in one run.

For each dataset (``datasets.make_dataset``, seeded by ``--seed``) and measure, ``--queries`` rows against
every row, float32, the kernel-level call (``BoundMeasure.block`` on prepared device rows, as
the ``distances`` suite times as "kernel only") under ``SEMIRING_GPU_STRATEGY`` = each of ``--strategies``: CUDA-event
medians of ``--repeats``, the plan each setting gives (a forced setting runs where it applies: ``coo`` is
``hash`` where no dense row fits), and agreement with the ``merge`` result (the naive one-thread-per-pair
kernel, the union family's baseline) and, on a sample, with SciPy ``cdist``.  Under ``auto`` a union
measure runs its margin split when one applies; the plan of the split's intersection is recorded too.
The results file records the commit (``$COMMIT`` or ``git rev-parse``) and the command line.

    python -m benchmarks strategies --seed 0 --json benchmarks/results/strategy_bench_h200.json
    python -m benchmarks strategies --report benchmarks/results/strategy_bench_h200.json  # the table again

``--report`` also reads a run's log (one JSON row a line), for a run stopped before it wrote its file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from semiring.distances.bound import BoundMeasure
from semiring.distances.specs import get_metric
from semiring.kernels.cuda import ENGINE, planner, strategies

from .record import commit
from .reference import compare, pairwise_reference, sample
from .synthetic import DATASETS, describe, make_dataset
from .timing import on_device

METRICS = ("cosine", "cityblock", "chebyshev", "canberra", "jensenshannon", "hamming")
STRATEGIES = ("auto", "merge", "rowvec", "coo", "hash")


def plan_of(spec, Qr, Xr, strategy: str) -> str:
    sr = spec.terms[0]
    settings = planner.Settings(strategy)
    product = strategies.Product(Qr.matrix, Xr.matrix, sr, np.float32, settings=settings)
    chosen = strategies.plan(product).strategy.name
    if chosen == "margins":
        split = product.margin_split
        cross = strategies.Product(
            Qr.matrix, Xr.matrix, split.cross, np.float32, settings=settings, split_of=(sr, split)
        )
        chosen += " + " + strategies.plan(cross).strategy.name
    return chosen


def run_metric(name: str, metric: str, Q, X, args, rng) -> list[dict]:
    import cupy

    spec = get_metric(metric)
    bound = BoundMeasure(ENGINE, spec, {}, np.float32)
    Qr, Xr = bound.prepare(Q), bound.prepare(X)
    rows, reference = [], None
    for strategy in args.strategies.split(","):
        os.environ[planner.STRATEGY_ENV] = strategy
        try:
            t, got = on_device(lambda: bound.block(Qr, Xr), args.repeats)
            ms = t.ms
            row = {"dataset": name, "metric": metric, "family": spec.family, "setting": strategy}
            row["plan"], row["ms"] = plan_of(spec, Qr, Xr, strategy), round(ms, 3)
        finally:
            os.environ.pop(planner.STRATEGY_ENV, None)
        if strategy == "merge":
            reference = got
        elif reference is not None:
            row["agrees_with_merge"] = bool(cupy.allclose(got, reference, rtol=1e-3, atol=1e-4, equal_nan=True))
        qi, xi = sample(Q, X, rng)
        want = pairwise_reference(spec.name, spec.scipy, Q, X, qi, xi)
        row["vs_scipy"] = (
            {"checked": False} if want is None else compare(got[np.ix_(qi, xi)].get(), want, "ours", "SciPy float64")
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
        del got
    del reference
    cupy.get_default_memory_pool().free_all_blocks()
    return rows


def table(rows: list[dict]) -> list[str]:
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    out = ["| dataset | metric | " + " | ".join(f"{s} ms (plan)" for s in settings) + " | merge / auto |"]
    out.append("|---|---|" + "---:|" * (len(settings) + 1))
    for key in dict.fromkeys((r["dataset"], r["metric"]) for r in rows):
        by = {r["setting"]: r for r in rows if (r["dataset"], r["metric"]) == key}
        cells = []
        for s in settings:
            r = by.get(s)
            ok = r is not None and r["vs_scipy"].get("ok", True) and r.get("agrees_with_merge", True)
            cells.append("—" if r is None else f"{r['ms']:,} ({r['plan']})" + ("" if ok else " **wrong**"))
        ratio = by["merge"]["ms"] / by["auto"]["ms"] if "merge" in by and "auto" in by else float("nan")
        out.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {ratio:.1f}× |")
    return out


def read_rows(path: Path) -> list[dict]:
    """The rows of a results file, or of a run's log (its JSON lines)."""
    text = path.read_text()
    if text.lstrip().startswith("{") and '"rows"' in text[:2000]:
        return json.loads(text)["rows"]
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, help="print the table of a results file or log, and stop")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--metrics", default=",".join(METRICS))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--json", type=Path, help="write the rows, the table, the commit and the command here")
    args = parser.parse_args()
    if args.report:
        print("\n".join(table(read_rows(args.report))))
        return
    if args.seed is None:
        parser.error("--seed is required for a run (for example --seed 0)")
    import cupy

    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"device: {device}; commit {commit()}; command: {' '.join(sys.argv)}", flush=True)
    rows = []
    for name in args.datasets.split(","):
        X = make_dataset(name, args.scale, seed=args.seed)
        Q = X[: args.queries]
        print(f"{name}: {describe(X)}", flush=True)
        rng = np.random.default_rng(args.seed)
        for metric in args.metrics.split(","):
            rows.extend(run_metric(name, metric, Q, X, args, rng))
    lines = table(rows)
    print("\n".join(["", *lines]))
    if args.json:
        record = {"device": device, "commit": commit(), "command": " ".join(["python", *sys.argv]), "rows": rows}
        args.json.write_text(json.dumps({**record, "table": lines}, indent=1))


if __name__ == "__main__":
    main()
