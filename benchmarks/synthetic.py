"""Seeded synthetic inputs of every suite: sparse datasets shaped like the paper's, and R-MAT graphs.

``make_dataset(name, scale, seed)`` (float32 CSR), ``describe(X)`` (the shape statistics it controls),
``rmat(scale, edge_factor, seed, xp)`` (an undirected Graph500 R-MAT graph as ``indptr, indices, n``, drawn with
NumPy or CuPy) and ``rmat_csr(scale, seed)`` (the same as a SciPy CSR matrix of ones).

The real datasets (MovieLens, NY Times bag of words, a mouse-brain scRNA
atlas, SEC EDGAR access logs) are large downloads; what drives the cost of a
sparse pairwise kernel is their *shape*: rows × columns, how many nonzeros a
row has (and how much that varies), and how skewed column popularity is (a few
very popular columns make long column lists, i.e. many row pairs that
intersect).  ``make_dataset`` reproduces those four properties with a fixed
seed, so CPU and GPU benchmarks can share identical inputs.

>>> X = make_dataset("movielens", scale=0.01, seed=0)
>>> X.shape, X.dtype, X.has_canonical_format
((400, 20000), dtype('float32'), True)

Only the number of rows is scaled: columns, mean row degree and skew are kept,
so a scaled-down dataset has the same per-row sparsity structure (and, for
EDGAR, the same very wide, mostly unused column space).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    rows: int
    cols: int
    mean_nnz: float  # mean stored values per row
    zipf: float  # column popularity ∝ 1 / rank**zipf (0 = uniform)
    degree_sigma: float  # lognormal sigma of the row degrees (row-to-row spread)
    values: str  # how stored values are drawn, see _values
    about: str


SPECS: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        DatasetSpec(
            "movielens",
            40_000,
            20_000,
            100,
            1.1,
            1.0,
            "ratings",
            "users × movies, 1–5 star ratings; a few blockbusters rated by most users",
        ),
        DatasetSpec("nytimes", 40_000, 100_000, 200, 1.0, 0.6, "tfidf", "documents × vocabulary, L2-normalised tf-idf"),
        DatasetSpec(
            "scrna",
            16_000,
            26_000,
            1_600,
            0.5,
            0.4,
            "logcounts",
            "cells × genes, log1p(UMI counts), ~6 % dense, mild skew",
        ),
        DatasetSpec(
            "edgar",
            100_000,
            858_000,
            6,
            1.0,
            1.0,
            "counts",
            "users × documents, access counts; very wide and very sparse",
        ),
    )
}

DATASETS = tuple(SPECS)


def make_dataset(name: str, scale: float = 1.0, seed: int = 0) -> sp.csr_matrix:
    """A float32 canonical CSR matrix shaped like dataset ``name`` with ``scale`` × its rows.

    Deterministic for a given (name, scale, seed).  Row degrees are lognormal
    around the spec's mean (some rows may be empty); the columns of a row are
    distinct, drawn without replacement with Zipf popularity over a random
    permutation of the columns, and sorted.
    """
    if name not in SPECS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    spec = SPECS[name]
    # Each dataset gets its own stream, so adding one does not change the others.
    rng = np.random.default_rng([seed, DATASETS.index(name)])
    nrows = max(1, round(spec.rows * scale))

    degrees = _row_degrees(rng, nrows, spec)
    popularity = _column_popularity(rng, spec.cols, spec.zipf)
    keys = _sample_unique_columns(rng, degrees, popularity, spec.cols)

    rows, cols = np.divmod(keys, spec.cols)  # keys are sorted, so rows and each row's columns are too
    indptr = np.zeros(nrows + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=nrows), out=indptr[1:])
    data = _values(rng, spec.values, rows, cols, nrows)
    X = sp.csr_matrix((data, cols.astype(np.int32), indptr.astype(np.int32)), shape=(nrows, spec.cols))
    X.has_canonical_format = True  # sorted, unique by construction; spares scipy the check
    return X


def describe(X: sp.csr_matrix) -> dict:
    """The shape statistics the generator controls, to print next to timings."""
    deg = np.diff(X.indptr)
    col_counts = np.bincount(X.indices, minlength=X.shape[1])
    top = np.sort(col_counts)[::-1]
    return {
        "rows": int(X.shape[0]),
        "cols": int(X.shape[1]),
        "nnz": int(X.nnz),
        "mean_nnz_per_row": float(deg.mean()) if deg.size else 0.0,
        "max_nnz_per_row": int(deg.max()) if deg.size else 0,
        "empty_rows": int((deg == 0).sum()),
        "density": float(X.nnz / max(1, X.shape[0] * X.shape[1])),
        "used_cols": int((col_counts > 0).sum()),
        # share of all stored values in the 1 % most popular columns: the skew the kernels feel
        "top1pct_col_share": float(top[: max(1, X.shape[1] // 100)].sum() / max(1, X.nnz)),
    }


# --------------------------------------------------------------------------- pieces


def _row_degrees(rng, nrows: int, spec: DatasetSpec) -> np.ndarray:
    # Lognormal with the requested mean (mu = log(mean) - sigma²/2); stochastic
    # rounding keeps the mean unbiased for small degrees (EDGAR's mean is 6).
    sigma = spec.degree_sigma
    raw = rng.lognormal(np.log(spec.mean_nnz) - sigma**2 / 2, sigma, nrows)
    degrees = np.floor(raw + rng.random(nrows)).astype(np.int64)
    # At most half the columns, so that drawing distinct columns always terminates quickly.
    return np.clip(degrees, 0, spec.cols // 2)


def _column_popularity(rng, ncols: int, exponent: float) -> np.ndarray:
    """Cumulative sampling distribution over columns: Zipf by rank, ranks randomly placed."""
    weights = 1.0 / np.arange(1, ncols + 1, dtype=np.float64) ** exponent
    # Popular columns are scattered over the column space, as in real vocabularies,
    # not packed at low indices (which would flatter cache behaviour).
    weights = weights[rng.permutation(ncols)]
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def _sample_unique_columns(rng, degrees: np.ndarray, cdf: np.ndarray, ncols: int) -> np.ndarray:
    """Sorted keys ``row * ncols + col``: ``degrees[row]`` distinct columns per row.

    Weighted sampling without replacement, vectorised over all rows: draw with
    replacement, drop columns a row already has, keep at most the missing
    number per row (a random subset of the fresh ones), repeat for the rows
    still short.  Heavy rows of a skewed dataset keep re-drawing the popular
    columns they already hold, so each round draws more (``boost``).
    """
    keys = np.empty(0, np.int64)
    have = np.zeros(degrees.size, np.int64)
    boost = 1.25
    for _ in range(60):
        need = degrees - have
        short = np.flatnonzero(need > 0)
        if short.size == 0:
            break
        draws = np.ceil(need[short] * boost).astype(np.int64)
        rows = np.repeat(short, draws)
        cols = np.minimum(np.searchsorted(cdf, rng.random(rows.size), side="right"), ncols - 1)
        cand = _sorted_unique(rows * ncols + cols)
        if keys.size:
            pos = np.minimum(np.searchsorted(keys, cand), keys.size - 1)
            cand = cand[keys[pos] != cand]
        # Keep a random subset of at most need[row] fresh columns per row: order the
        # candidates by (row, random priority) and keep the first need[row] of each row.
        cand_rows = cand // ncols
        order = np.argsort((cand_rows << 24) | rng.integers(0, 1 << 24, cand.size))
        cand, cand_rows = cand[order], cand_rows[order]
        first = np.searchsorted(cand_rows, cand_rows, side="left")
        keep = (np.arange(cand.size) - first) < need[cand_rows]
        kept = cand[keep]
        have += np.bincount(kept // ncols, minlength=degrees.size)
        keys = np.sort(np.concatenate([keys, kept]))
        boost = min(boost * 2.0, 64.0)
    return keys


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    # np.unique on int64 goes through a hash table in NumPy ≥ 2.3, several times slower here
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


def _values(rng, kind: str, rows: np.ndarray, cols: np.ndarray, nrows: int) -> np.ndarray:
    """Positive float32 values of the stored entries (in CSR order)."""
    n = rows.size
    if kind == "ratings":
        # MovieLens' star distribution: most ratings are 3–4.
        return rng.choice(np.arange(1, 6, dtype=np.float32), size=n, p=[0.06, 0.11, 0.27, 0.34, 0.22])
    if kind == "counts":
        return rng.geometric(0.5, n).astype(np.float32)  # 1, 2, 3, ... (mostly single accesses)
    if kind == "logcounts":
        return np.log1p(rng.geometric(0.35, n)).astype(np.float32)  # log1p of UMI counts ≥ 1
    if kind == "tfidf":
        # Term frequency × smoothed idf from the generated document frequencies
        # (scikit-learn's TfidfVectorizer formula), then each row L2-normalised.
        tf = rng.geometric(0.55, n).astype(np.float64)
        df = np.bincount(cols, minlength=int(cols.max()) + 1 if n else 0)
        idf = np.log((1.0 + nrows) / (1.0 + df)) + 1.0
        v = tf * idf[cols]
        norms = np.sqrt(np.bincount(rows, weights=v * v, minlength=nrows))
        return (v / norms[rows]).astype(np.float32)
    raise ValueError(f"unknown value kind {kind!r}")


# --------------------------------------------------------------------------- graphs

GRAPH500 = {"a": 0.57, "b": 0.19, "c": 0.19}


def rmat(scale: int, edge_factor: int = 16, seed: int = 0, xp=np):
    """(indptr, indices, n) of an undirected R-MAT graph: symmetric, sorted rows, no self-loops or duplicates.

    Graph500's generator (a=0.57, b=0.19, c=0.19, ``edge_factor`` × 2**scale edges drawn), vertex labels
    permuted; ``xp`` is ``numpy`` or ``cupy`` (the draws are on the GPU there: seconds at scale 23).
    """
    n, m = 1 << scale, edge_factor << scale
    a, b, c = GRAPH500["a"], GRAPH500["b"], GRAPH500["c"]
    rs = xp.random.RandomState(seed)
    u = xp.zeros(m, np.int64)
    v = xp.zeros(m, np.int64)
    for bit in range(scale):  # one quadrant choice per bit
        row = rs.random_sample(m) > (a + b)
        col = rs.random_sample(m) > xp.where(row, c / (1 - a - b), a / (a + b))
        u |= row.astype(np.int64) << bit
        v |= col.astype(np.int64) << bit
    perm = rs.permutation(n).astype(np.int64)
    u, v = perm[u], perm[v]
    keep = u != v
    lo, hi = xp.minimum(u[keep], v[keep]), xp.maximum(u[keep], v[keep])
    key = xp.unique(lo * n + hi)
    lo, hi = key // n, key % n
    both = xp.sort(xp.concatenate([lo * n + hi, hi * n + lo]))
    rows, cols = both // n, both % n
    indptr = xp.searchsorted(rows, xp.arange(n + 1)).astype(np.int32)
    return indptr, cols.astype(np.int32), n


def rmat_csr(scale: int, seed: int = 0, edge_factor: int = 16) -> sp.csr_matrix:
    """``rmat`` drawn with NumPy, as a float64 SciPy CSR adjacency matrix of ones."""
    indptr, indices, n = rmat(scale, edge_factor, seed)
    return sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))


# --------------------------------------------------------------------------- learned sparse retrieval

# MS MARCO passages encoded by SPLADE (the anchor, arXiv 2606.26441): 8.8 M rows over BERT's 30,522
# word pieces, about 120 stored weights a passage, 20–40 a query.  The column skew is ours to choose (the
# anchor gives none): Zipf 1.0 over a random permutation, as the nytimes-like vocabulary.
RETRIEVAL = {"rows": 8_800_000, "cols": 30_522, "mean_nnz": 120, "query_nnz": (20, 40), "zipf": 1.0}


def retrieval_index(rows: int, seed: int = 0, xp=np, chunk: int = 1 << 20):
    """A float32 CSR matrix (SciPy's or CuPy's by ``xp``) shaped like SPLADE's MS MARCO index: ``rows`` rows,
    ``RETRIEVAL``'s columns, about its ``mean_nnz`` distinct columns a row (lognormal degrees, σ 0.4), Zipf
    popularity, positive weights (lognormal, median 1).  Drawn ``chunk`` rows at a time (on the GPU with CuPy:
    seconds for the 8.8 M rows)."""
    degrees_of = _unique_draws(RETRIEVAL["cols"], RETRIEVAL["zipf"], seed)
    rs = xp.random.RandomState(seed)
    sigma = 0.4
    parts = []
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        want = xp.clip(rs.lognormal(np.log(RETRIEVAL["mean_nnz"]) - sigma**2 / 2, sigma, n), 1, 1_000)
        parts.append(_rows_of(rs, want, degrees_of, xp))
    return _stacked(parts, rows, xp)


def retrieval_queries(count: int, seed: int = 0, xp=np):
    """``count`` queries for ``retrieval_index``: 20–40 distinct columns each (uniform), the index's column
    popularity (drawn with ``seed``), positive weights; a float32 CSR matrix of ``xp``."""
    degrees_of = _unique_draws(RETRIEVAL["cols"], RETRIEVAL["zipf"], seed)
    rs = xp.random.RandomState([seed, 1] if xp is np else seed + 7919)
    lo, hi = RETRIEVAL["query_nnz"]
    want = rs.randint(lo, hi + 1, count).astype(np.float64)
    return _stacked([_rows_of(rs, want, degrees_of, xp)], count, xp)


def _unique_draws(ncols: int, exponent: float, seed: int):
    """The column popularity (a host CDF, ranks placed by ``seed``) and a function from wanted distinct columns
    to the draws with replacement that give that many on average (Σ_c 1 − (1 − p_c)^draws, inverted)."""
    cdf = _column_popularity(np.random.default_rng([seed, len(SPECS)]), ncols, exponent)
    p = np.diff(cdf, prepend=0.0)
    draws = np.unique(np.round(np.geomspace(1, 40 * ncols, 400)))
    distinct = np.array([(1.0 - (1.0 - p) ** d).sum() for d in draws])

    def draws_for(want, xp):
        return xp.asarray(np.interp(xp.asnumpy(want) if xp is not np else want, distinct, draws))

    return cdf, draws_for


def _rows_of(rs, want, degrees_of, xp):
    """(indptr counts, columns, weights) of rows wanting ``want`` distinct columns each."""
    cdf, draws_for = degrees_of
    ncols = cdf.size
    draws = xp.maximum(1, xp.rint(draws_for(want, xp))).astype(np.int64)
    n = int(want.size)
    ends = xp.cumsum(draws)
    rows = xp.searchsorted(ends, xp.arange(int(ends[-1]), dtype=np.int64), side="right")  # repeat, on either
    cols = xp.minimum(xp.searchsorted(xp.asarray(cdf), rs.random_sample(rows.size), side="right"), ncols - 1)
    keys = xp.unique(rows * ncols + cols)
    rows, cols = keys // ncols, (keys % ncols).astype(np.int32)
    counts = xp.bincount(rows, minlength=n)
    weights = rs.lognormal(0.0, 0.6, cols.size).astype(np.float32)
    return counts, cols, weights


def _stacked(parts, nrows: int, xp):
    counts = xp.concatenate([p[0] for p in parts])
    indptr = xp.zeros(nrows + 1, np.int64)
    xp.cumsum(counts, out=indptr[1:])
    cols = xp.concatenate([p[1] for p in parts])
    data = xp.concatenate([p[2] for p in parts])
    index = np.int32 if cols.size < 2**31 else np.int64
    if xp is np:
        X = sp.csr_matrix((data, cols, indptr.astype(index)), shape=(nrows, RETRIEVAL["cols"]))
    else:
        import cupyx.scipy.sparse as cps

        X = cps.csr_matrix((data, cols, indptr.astype(index)), shape=(nrows, RETRIEVAL["cols"]))
    X.has_canonical_format = True  # sorted, unique by construction
    return X
