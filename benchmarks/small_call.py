"""The fixed cost of a small call: cosine of 200 x 3,000 TF-IDF rows (installed packages' docstrings), ours on the
CPU engine against scikit-learn's ``pairwise_distances`` (``n_jobs`` the threads, and None), and ours with the small-call rule off
(``distances.pairwise.SMALL_CALL_WORK = 0``: every thread woken).  Best and median of ``--repeats`` calls, the four
sides called in turn (one call each a round, so that a shared machine's load falls on each alike); the answers
are compared.

    python -m benchmarks small-call --threads 2 --json benchmarks/results/small_call_2core_f21ca66.json
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.stats
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import pairwise_distances as sk_pairwise
from threadpoolctl import threadpool_limits

from benchmarks.record import commit
from semiring import distances
from semiring.distances import pairwise


def tfidf(rows: int, cols: int):
    docs = []
    for mod in (np, np.linalg, np.fft, np.random, scipy.linalg, scipy.stats, scipy.sparse):
        for _, obj in inspect.getmembers(mod):
            doc = inspect.getdoc(obj)
            if doc and len(doc) > 200:
                docs.append(doc)
    docs = list(dict.fromkeys(docs))[:rows]
    return TfidfVectorizer(max_features=cols).fit_transform(docs)  # unsorted indices, as users get them


def times(fns: dict, repeats: int) -> dict:
    """Each side's best and median of ``repeats`` calls, the sides called in turn, one call each a round (the
    order reversed every other round): a shared machine's load shifts fall on every side alike."""
    for fn in fns.values():
        fn()
    out = {name: [] for name in fns}
    for r in range(repeats):
        for name in list(fns) if r % 2 == 0 else list(reversed(fns)):
            t = time.perf_counter()
            fns[name]()
            out[name].append(time.perf_counter() - t)
    return {name: {"best_ms": 1e3 * min(v), "median_ms": 1e3 * float(np.median(v))} for name, v in out.items()}


def _all_threads(fn):
    """``fn`` with the small-call rule off (``distances.pairwise.SMALL_CALL_WORK = 0``: every thread woken)."""

    def call():
        small = pairwise.SMALL_CALL_WORK
        pairwise.SMALL_CALL_WORK = 0
        try:
            return fn()
        finally:
            pairwise.SMALL_CALL_WORK = small

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    X = tfidf(200, 3000)
    with threadpool_limits(limits=args.threads):
        result = {
            "commit": commit(),
            "command": " ".join(["python", *sys.argv]),
            "host_cores": os.cpu_count(),
        }
        result.update(
            {
                "threads": args.threads,
                "shape": list(X.shape),
                "nnz": int(X.nnz),
                "seed": "none: the installed packages' docstrings",
            }
        )

        def ours():
            return distances.pairwise_distances(X, metric="cosine", backend="cpu")

        result.update(
            times(
                {
                    "ours": ours,
                    "sklearn": lambda: sk_pairwise(X, metric="cosine", n_jobs=args.threads),
                    # n_jobs=None: one thread, no joblib (its threads cost more than they save here too)
                    "sklearn_n_jobs_none": lambda: sk_pairwise(X, metric="cosine"),
                    "ours_all_threads": _all_threads(ours),
                },
                args.repeats,
            )
        )
        result["max_abs_diff"] = float(np.abs(ours() - sk_pairwise(X, metric="cosine")).max())
    result["vs_sklearn_best"] = result["sklearn"]["best_ms"] / result["ours"]["best_ms"]
    result["vs_sklearn_n_jobs_none_best"] = result["sklearn_n_jobs_none"]["best_ms"] / result["ours"]["best_ms"]
    result["vs_sklearn_n_jobs_none_median"] = result["sklearn_n_jobs_none"]["median_ms"] / result["ours"]["median_ms"]
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
