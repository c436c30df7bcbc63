"""The fixed cost of a small call: cosine of 200 x 3,000 TF-IDF rows (installed packages' docstrings), ours on the
CPU engine against scikit-learn's ``pairwise_distances`` (``n_jobs`` the threads, and None), and ours with the small-call rule off
(``distances.pairwise.SMALL_CALL_WORK = 0``: every thread woken).  Best and median of ``--repeats`` calls; the
answers are compared.

    python -m benchmarks small-call --threads 2 --json benchmarks/results/small_call_2core_f21ca66.json
"""

from __future__ import annotations

import argparse
import inspect
import json
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


def times(fn, repeats: int) -> dict:
    fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return {"best_ms": 1e3 * min(out), "median_ms": 1e3 * float(np.median(out))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    X = tfidf(200, 3000)
    with threadpool_limits(limits=args.threads):
        result = {"commit": commit(), "threads": args.threads, "shape": list(X.shape), "nnz": int(X.nnz)}
        result["ours"] = times(lambda: distances.pairwise_distances(X, metric="cosine", backend="cpu"), args.repeats)
        result["sklearn"] = times(lambda: sk_pairwise(X, metric="cosine", n_jobs=args.threads), args.repeats)
        # n_jobs=None: one thread, no joblib (its threads cost more than they save here too)
        result["sklearn_n_jobs_none"] = times(lambda: sk_pairwise(X, metric="cosine"), args.repeats)
        small = pairwise.SMALL_CALL_WORK
        pairwise.SMALL_CALL_WORK = 0
        result["ours_all_threads"] = times(
            lambda: distances.pairwise_distances(X, metric="cosine", backend="cpu"), args.repeats
        )
        pairwise.SMALL_CALL_WORK = small
        ours = distances.pairwise_distances(X, metric="cosine", backend="cpu")
        result["max_abs_diff"] = float(np.abs(ours - sk_pairwise(X, metric="cosine")).max())
    result["vs_sklearn_best"] = result["sklearn"]["best_ms"] / result["ours"]["best_ms"]
    result["vs_sklearn_n_jobs_none_best"] = result["sklearn_n_jobs_none"]["best_ms"] / result["ours"]["best_ms"]
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
