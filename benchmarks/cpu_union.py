"""The CPU engine's union kernels, forced in turn, against scikit-learn's manhattan, then chebyshev's (the
max-monoid union) against cityblock's time and SciPy's values: the data behind the union entries of
``semiring.kernels.cpu.strategies.STRATEGIES`` (margins where the split holds, the extremum kernel for a max or min
monoid, else merge or scatter by ``MERGE_MIN_MEAN_ROW``).

Run from the repository root::

    python -m benchmarks cpu-union --seed 0 --threads 2 --json union.json

``semiring.pairwise(Q, X, plus_absdiff)`` (cityblock) with ``$SEMIRING_CPU_UNION`` set to ``margins``,
``merge`` then ``scatter``, the first ``--queries`` rows against all rows of seeded datasets shaped like the benchmark's
(``benchmarks/synthetic.py``), best of ``--repeats`` after a warm-up; scikit-learn ``pairwise_distances(...,
metric="manhattan", n_jobs=threads)`` in the same run (``--sections kernels``); chebyshev by each kernel against
cityblock (``chebyshev``); all-rows kNN, chebyshev against cityblock (``knn``)::

    python -m benchmarks cpu-union --seed 0 --threads 2 --sections knn chebyshev --datasets movielens nytimes

The JSON records the command, the commit and the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .record import commit
from .synthetic import make_dataset

SCALES = {"movielens": 0.02, "nytimes": 0.02, "scrna": 0.05, "edgar": 0.02}


def best_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * min(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0, help="dataset seed (default 0)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads on both sides (default: all cores)")
    p.add_argument("--queries", type=int, default=256, help="query rows (default 256)")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies each dataset's default scale (default 1)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls, best reported (default 3)")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument(
        "--sections",
        nargs="+",
        choices=("kernels", "chebyshev", "knn"),
        default=["kernels", "chebyshev"],
        help="kernels: cityblock's union kernels forced; chebyshev: its kernels and its time against cityblock's "
        "(semiring.pairwise, --queries rows against all); knn: all-rows kNN (NearestNeighbors.kneighbors of every "
        "row, k = --k), chebyshev against cityblock (default: kernels chebyshev)",
    )
    p.add_argument("--datasets", nargs="+", choices=tuple(SCALES), default=list(SCALES), help="(default: all)")
    p.add_argument("--k", type=int, default=10, help="neighbours a row in the knn section (default 10)")
    args = p.parse_args(argv)
    os.environ["NUMBA_NUM_THREADS"] = str(max(args.threads, os.cpu_count() or 1))
    import numba

    numba.set_num_threads(args.threads)
    rows = []
    scales = {name: SCALES[name] for name in args.datasets}
    if "kernels" in args.sections:
        _kernels(args, scales, rows)
    if "chebyshev" in args.sections:
        _chebyshev(args, scales, rows)
    if "knn" in args.sections:
        _knn(args, scales, rows)
    if args.json:
        payload = {
            "command": " ".join([sys.executable, *sys.argv]),
            "commit": commit(),
            "host_cores": os.cpu_count(),
            "args": {k: str(v) for k, v in vars(args).items()},
            "results": rows,
        }
        args.json.write_text(json.dumps(payload, indent=2, default=str))
    return 0 if all(r.get("agree_with_sklearn", r.get("agree_with_scipy")) for r in rows) else 1


def _kernels(args, scales, rows) -> None:
    import numpy as np
    from sklearn.metrics import pairwise_distances

    import semiring
    from semiring.kernels.cpu import strategies as cpu_strategies

    print(
        "| dataset | rows × cols | mean entries a row | margins ms | merge ms | scatter ms | scikit-learn ms "
        "| auto picks |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name, scale in scales.items():
        X = make_dataset(name, scale * args.scale, args.seed)
        Q = X[: args.queries]
        ms = {}
        results = {}
        for strategy in ("margins", "merge", "scatter"):
            os.environ[semiring.settings.CPU_UNION.name] = strategy
            ms[strategy] = best_ms(lambda Q=Q, X=X: semiring.pairwise(Q, X, semiring.plus_absdiff), args.repeats)
            results[strategy] = semiring.pairwise(Q, X, semiring.plus_absdiff)
        del os.environ[semiring.settings.CPU_UNION.name]
        ref = pairwise_distances(Q, X, metric="manhattan", n_jobs=args.threads)
        sk = best_ms(lambda Q=Q, X=X: pairwise_distances(Q, X, metric="manhattan", n_jobs=args.threads), args.repeats)
        agree = all(bool(np.allclose(r, ref, rtol=1e-4, atol=1e-3)) for r in results.values())
        mean = (Q.nnz + X.nnz) / (Q.shape[0] + X.shape[0])
        picks = cpu_strategies.plan(cpu_strategies.Product(Q, X, semiring.plus_absdiff, "dense")).strategy.name
        rows.append(
            {
                "dataset": name,
                "shape": X.shape,
                "mean_row": mean,
                **ms,
                "sklearn": sk,
                "auto": picks,
                "agree_with_sklearn": agree,
            }
        )
        print(
            f"| {name} | {X.shape[0]:,} × {X.shape[1]:,} | {mean:.0f} | {ms['margins']:.0f} | {ms['merge']:.0f} "
            f"| {ms['scatter']:.0f} "
            f"| {sk:.0f} | {picks} |{'' if agree else ' MISMATCH'}"
        )
    print()


def _chebyshev(args, scales, rows) -> None:
    import numpy as np
    from scipy.spatial.distance import chebyshev

    import semiring
    from semiring.kernels.cpu import strategies as cpu_strategies

    print("| dataset | extremum ms | merge ms | scatter ms | cityblock (auto) ms | chebyshev / cityblock | checked |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, scale in scales.items():
        X = make_dataset(name, scale * args.scale, args.seed)
        Q = X[: args.queries]
        ms, results = {}, {}
        for strategy in ("extremum", "merge", "scatter"):  # chebyshev: the max-monoid union's kernels
            os.environ[semiring.settings.CPU_UNION.name] = strategy
            ms[strategy] = best_ms(lambda Q=Q, X=X: semiring.pairwise(Q, X, semiring.max_absdiff), args.repeats)
            results[strategy] = semiring.pairwise(Q, X, semiring.max_absdiff)
        del os.environ[semiring.settings.CPU_UNION.name]
        cityblock = best_ms(lambda Q=Q, X=X: semiring.pairwise(Q, X, semiring.plus_absdiff), args.repeats)
        pick = cpu_strategies.plan(cpu_strategies.Product(Q, X, semiring.max_absdiff, "dense")).strategy.name
        # SciPy's chebyshev on sampled pairs, densified one pair at a time (EDGAR-like rows are 858,000 wide)
        rng = np.random.default_rng(args.seed)
        pairs = list(zip(rng.integers(0, Q.shape[0], 64), rng.integers(0, X.shape[0], 64)))
        want = [chebyshev(Q[i].toarray().ravel(), X[j].toarray().ravel()) if Q.shape[1] else 0.0 for i, j in pairs]
        checked = all(
            np.array_equal([r[i, j] for i, j in pairs], np.asarray(want, dtype=r.dtype)) for r in results.values()
        )
        rows.append(
            {
                "dataset": name,
                "measure": "chebyshev",
                "shape": X.shape,
                **ms,
                "cityblock_auto": cityblock,
                "auto": pick,
                "ratio_to_cityblock": ms[pick] / cityblock,
                "agree_with_scipy": checked,
            }
        )
        print(
            f"| {name} | {ms['extremum']:.0f} | {ms['merge']:.0f} | {ms['scatter']:.0f} | {cityblock:.0f} "
            f"| {ms[pick] / cityblock:.2f} ({pick}) | {'yes' if checked else '**no**'} |"
        )
    print()


def _knn(args, scales, rows) -> None:
    """Every row's k nearest among all rows (the fitted rows' own kNN), chebyshev against cityblock: the time of
    ``NearestNeighbors(metric=...).fit(X).kneighbors(X)`` on the CPU engine, best of the repeats; chebyshev's
    distances of 16 sampled rows checked against SciPy's ``cdist`` in float64 (distances, not indices: ties)."""
    import numpy as np
    from scipy.spatial.distance import cdist

    from semiring import distances

    print(
        f"| dataset | rows × cols | chebyshev kNN ms | cityblock kNN ms | chebyshev / cityblock | checked (k = {args.k}) |"
    )
    print("|---|---|---:|---:|---:|---|")
    for name, scale in scales.items():
        X = make_dataset(name, scale * args.scale, args.seed)
        ms, found = {}, {}
        for metric in ("chebyshev", "cityblock"):
            nn = distances.NearestNeighbors(n_neighbors=args.k, metric=metric, backend="cpu").fit(X)
            ms[metric] = best_ms(lambda nn=nn, X=X: nn.kneighbors(X), args.repeats)
            found[metric] = nn.kneighbors(X)[0]
        rng = np.random.default_rng(args.seed)
        sample = rng.choice(X.shape[0], min(16, X.shape[0]), replace=False)
        exact = cdist(X[sample].toarray().astype(np.float64), X.toarray().astype(np.float64), "chebyshev")
        want = np.sort(exact, axis=1)[:, : args.k]
        checked = bool(np.allclose(found["chebyshev"][sample], want, rtol=1e-6, atol=1e-6))
        rows.append(
            {
                "dataset": name,
                "measure": "knn all rows",
                "shape": X.shape,
                "k": args.k,
                "chebyshev_ms": ms["chebyshev"],
                "cityblock_ms": ms["cityblock"],
                "ratio_to_cityblock": ms["chebyshev"] / ms["cityblock"],
                "agree_with_scipy": checked,
            }
        )
        print(
            f"| {name} | {X.shape[0]:,} × {X.shape[1]:,} | {ms['chebyshev']:.0f} | {ms['cityblock']:.0f} "
            f"| {ms['chebyshev'] / ms['cityblock']:.2f} | {'yes' if checked else '**no**'} |"
        )


if __name__ == "__main__":
    sys.exit(main())
