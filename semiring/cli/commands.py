"""The ``semiring`` command: k-nearest neighbours, pairwise distances and graph measures on files.

``semiring knn`` with no input file runs on a bundled real dataset (TF-IDF of
the standard library's docstrings, see ``semiring.cli.datasets``).  Every command
picks the GPU when it is usable, else the CPU (``--backend`` overrides), and
says which one ran.  A bad file or argument ends with a one-line message naming
it and exit status 2, never a traceback (``--traceback`` shows one, with the
same exit status).

Nothing is lost: a result is written atomically (``semiring.cli.io``),
never over one of the command's inputs, and over an existing file only with
``--force``.  ``-o -`` writes CSV to standard output and the report to
standard error; ``--quiet`` keeps only errors.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import math
import os
import platform
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

import semiring
from semiring import backend as _backend
from semiring import graph, tiling, validation
from semiring.distances.neighbors import NearestNeighbors
from semiring.distances.pairwise import pairwise_distances
from semiring.distances.specs import DISTANCES, METRICS, Param, get_metric, resolve_metric, split_columns
from semiring.graph.measures import ORDERS, PER
from semiring.settings import cache_dir

from . import datasets, io

FEATURED_MODULES = ("json", "zipfile", "threading", "http.client", "argparse")
CHECK_ROWS = 64  # queries checked against SciPy by --check
CHECK_MAX_ENTRIES = 50_000_000  # densifying more than this for the check is refused
EXIT_ERROR = 2  # as argparse's usage errors
EXIT_CHECK_FAILED = 1  # the result differs from SciPy's
EXIT_BROKEN_PIPE = 141  # -o - into a reader that closed early (`| head`): 128 + SIGPIPE, as a shell tool killed by it


class UsageError(ValueError):
    """An argument that cannot work with the inputs given."""


# Helpers


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _seconds(t: float) -> str:
    return f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.2f} s"


def _preparing(seconds: float) -> str:
    """The time of the first call apart: the kernels are compiled on the machine's first run, loaded after."""
    return f"(+ {_seconds(seconds)} preparing the kernels: compiled once per machine, then loaded)"


def _describe(A, name: str) -> str:
    rows, cols = A.shape
    return f"{name}: {rows:,} x {cols:,} sparse, {A.nnz:,} stored values, {A.dtype}"


def _backend_line(name: str) -> str:
    if name == "cuda":
        return f"backend: cuda ({_gpu_name()})"
    reason = _backend.unavailable_reason("cuda")
    return f"backend: cpu ({'GPU not used: ' + reason if reason else 'chosen with --backend'})"


def _gpu_name() -> str:
    return _backend.engine("cuda").device_name()


@contextlib.contextmanager
def _naming(**files):
    """Library errors name arguments (X, Y, A); add which file each one came from."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        if isinstance(exc, (io.FileError, UsageError)):
            raise
        where = ", ".join(f"{arg} = {path}" for arg, path in files.items() if path)
        raise type(exc)(f"{exc} ({where})" if where else str(exc)) from None


def _flagged_params() -> dict[str, tuple[Param, tuple[str, ...]]]:
    """The measures' parameters that have a flag: by name, the declaration and the measures that take it."""
    flagged: dict[str, tuple[Param, tuple[str, ...]]] = {}
    for d in DISTANCES:
        for p in d.parameters:
            if p.flag:
                first, takers = flagged.get(p.name, (p, ()))
                flagged[p.name] = (first, takers + (d.name,))
    return flagged


FLAGGED_PARAMS = _flagged_params()


def _param_dest(name: str) -> str:
    return f"metric_param_{name}"  # apart from the commands' own options (-k, ...)


def _given_params(args, applies_to: str | None) -> dict:
    """The parameters given on the command line; one the measure (or a semiring: None) does not take is refused."""
    takes = get_metric(args.metric).params if applies_to is not None else {}
    given = {}
    for name, (param, takers) in FLAGGED_PARAMS.items():
        value = getattr(args, _param_dest(name), None)
        if value is None:
            continue
        if name not in takes:
            measures = " or ".join(takers)
            raise UsageError(f"{param.flag} applies to --metric {measures}, not to {applies_to or 'a semiring'}")
        given[name] = value
    return given


def _metric_params(args) -> dict:
    return _given_params(args, args.metric)


# Memory: a command's whole footprint, estimated from its files' headers and checked before any file is read, so
# that a header of huge sizes (or a result they imply) is refused in a moment, naming the file, never after a read
# or a compile, or half-way by the system's out-of-memory killer.

# The graph measures' temporaries beyond their input, over the CPU engine's: measured (peak resident memory, one
# call in a fresh process) at most 5x the row pointers on 4,000,000 vertices with 200 edges and 2.4x the entries
# (value and index) on 200,000 vertices with 4,000,000 entries; counted here with a margin and the summary line's
# sorts (the busiest vertices, the truss numbers' counts).
GRAPH_VERTEX_COPIES = 8
GRAPH_ENTRY_COPIES = 4


def _check_memory(command: str, files: str, parts: list[tuple[str, int]]) -> None:
    """Refuse a command whose parts (what it holds at once at its peak: inputs, result, tiles, output copies)
    need more memory than is available, before any of it is allocated; the message names the files and the
    parts that need it."""
    listed = [f"{what} ({validation.format_bytes(nbytes)})" for what, nbytes in parts if nbytes]
    listed = ", ".join(listed[:-1]) + " and " + listed[-1] if len(listed) > 1 else "".join(listed)
    validation.check_allocation(
        sum(nbytes for _, nbytes in parts),
        f"{files}: semiring {command} with {listed}",
        "checked from the files' headers before reading them; use fewer rows, or a machine with more memory",
    )


def _tiles_bytes(engine: str, working_memory, entries: int) -> int:
    """Host memory the tiles take at most: the working memory (or what all the entries need, if less) on the
    CPU; none on the GPU, whose tiles are in device memory."""
    if engine != "cpu":
        return 0
    budget = int(min(working_memory or tiling.DEFAULT_WORKING_MEMORY_MIB, tiling.WORKING_MEMORY_CAP_MIB) * 2**20)
    return min(budget, entries * 16)


def _columns_bytes(metric: str | None, cols: int) -> int:
    """A default computed per column from every row (seuclidean's V): its sums, counts and values, float64."""
    spec = get_metric(metric) if metric else None
    return 4 * cols * 8 if spec is not None and spec.columns is not None and spec.columns.default is not None else 0


def _check_bytes(checked: bool, queries: int, others: int, cols: int) -> int:
    """--check's densified rows (float64, and a boolean copy) and SciPy's values beside them, at most."""
    return 3 * 8 * min(CHECK_MAX_ENTRIES, (min(CHECK_ROWS, queries) + others) * cols) if checked else 0


def _result_itemsize(*sizes: io.MatrixSize) -> int:
    return 4 if all(s.itemsize == 4 for s in sizes) else 8


def _inputs_part(what: str, copies: int, *sizes: io.MatrixSize) -> tuple[str, int]:
    return what, copies * sum(s.csr_bytes for s in sizes)


# knn


def knn(X, Q, k: int, metric: str, params: dict, engine: str, working_memory, progress: bool):
    """(distances, indices, seconds, compile seconds): the k nearest rows of X to each row of Q.

    Q None: every row of X, which is not its own neighbour.  The kernels are
    compiled first on two rows, so that the time of the real run is its own.
    """
    n = X.shape[0]
    limit = n - 1 if Q is None else n
    if limit < 1:  # no k can work: said so, not as "between 1 and -1"
        least = "2 rows when every row is a query (a row is not its own neighbour)" if Q is None else "1 row"
        raise UsageError(f"knn needs data of at least {least}; the data have {n:,}")
    if not 1 <= k <= limit:
        every = " when every row is a query (a row is not its own neighbour)" if Q is None else ""
        raise UsageError(f"-k must be between 1 and {limit} for {n:,} rows{every}, got {k}")
    params, columns = split_columns(metric, params)  # w, V: the estimator takes them in metric_params
    options = {"metric": metric, "backend": engine, "working_memory": working_memory, **params}
    if columns is not None:
        options["metric_params"] = {get_metric(metric).columns.name: columns}
    start = time.perf_counter()
    NearestNeighbors(n_neighbors=1, verbose=False, **options).fit(X[:2]).kneighbors((X if Q is None else Q)[:1])
    compiling = time.perf_counter() - start
    start = time.perf_counter()
    distances, indices = NearestNeighbors(n_neighbors=k, verbose=progress, **options).fit(X).kneighbors(Q)
    return np.asarray(distances), np.asarray(indices), time.perf_counter() - start, compiling


def scipy_reference(metric: str, params: dict, A, B):
    """SciPy's cdist between the rows of A and B (densified, float64), or None where SciPy lacks the measure.

    The measure's row names it for SciPy (``Distance.scipy``); the boolean
    measures compare the nonzero patterns, as SciPy defines them.
    """
    from scipy.spatial.distance import cdist  # scipy.spatial costs a tenth of a second: imported only to check

    params, columns = split_columns(metric, params)
    spec, values = resolve_metric(metric, params)
    if spec.scipy is None:
        return None
    if columns is not None:  # w, V: SciPy takes them by the same name
        values = {**values, spec.columns.name: np.asarray(columns, dtype=np.float64)}
    a = np.asarray(A.toarray(), dtype=np.float64)
    b = np.asarray(B.toarray(), dtype=np.float64)
    if spec.prepare == "binary":
        a, b = a != 0, b != 0
    return cdist(a, b, spec.scipy, **values)


# The documented differences from SciPy (docs/measures.md), as SciPy's values are read by --check: where the
# docs say the result is another value, that value is expected.  ``(a, b, ref) -> ref``, a and b dense float64.
def _empty_rows(a, b):
    return (~a.any(1))[:, None] & (~b.any(1))[None, :]


def _either_empty(a, b):
    return (~a.any(1))[:, None] | (~b.any(1))[None, :]


DOCUMENTED_DIFFERENCES: dict[str, Callable] = {
    "dice": lambda a, b, ref: np.where(_empty_rows(a, b), 0.0, ref),  # 0 for two empty rows; SciPy NaN
    "jensenshannon": lambda a, b, ref: np.where(_either_empty(a, b), np.nan, ref),  # NaN for an all-zero row; cdist inf
}


def _reference(metric: str, params: dict, A, B):
    """SciPy's values with the documented differences applied, or None where SciPy lacks the measure."""
    ref = scipy_reference(metric, params, A, B)
    differs = DOCUMENTED_DIFFERENCES.get(get_metric(metric).name)
    if ref is None or differs is None:
        return ref
    a, b = (np.asarray(M.toarray(), dtype=np.float64) for M in (A, B))
    return differs(a, b, ref)


def _sample(total: int, most: int, seed: int = 0) -> np.ndarray:
    """Up to ``most`` of ``range(total)``, sorted; all of them where they fit."""
    if total <= most:
        return np.arange(total)
    return np.sort(np.random.default_rng(seed).choice(total, size=most, replace=False))


def _fit_rows(rows: int, width: int) -> tuple[int, int]:
    """(query rows, other rows) whose dense copies of ``width`` columns fit CHECK_MAX_ENTRIES, the other rows
    at least as many as the queries; (0, 0) where not even one of each does."""
    if 2 * width > CHECK_MAX_ENTRIES:
        return 0, 0
    queries = max(1, min(rows, CHECK_MAX_ENTRIES // (2 * width)))
    return queries, CHECK_MAX_ENTRIES // width - queries


def _check_knn(X, Q, rows, metric, params, distances, indices) -> str:
    """Whether the neighbours of the given query rows are the nearest by SciPy's cdist (with the documented
    differences); above the densifying limit, on a sample, said so."""
    n, width = X.shape
    queries = X if Q is None else Q
    most_queries, most_rows = _fit_rows(len(rows), width)
    if not _scipy_has(metric, params):
        return f"not compared (SciPy has no {metric})"
    if most_queries == 0:
        return f"not compared (rows of {width:,} columns are too wide to densify for SciPy)"
    rows = np.asarray(rows)[_sample(len(rows), most_queries)]
    found, k = distances[rows], indices.shape[1]
    if most_rows >= n:
        full = _reference(metric, params, queries[rows], X)
        ref = full if Q is not None else np.array([np.delete(r, i) for r, i in zip(full, rows)])  # not its own
        expected = np.sort(ref, axis=1)[:, :k]  # NaN sorts last, as in the estimator; tied indices may differ
        at_indices = np.take_along_axis(full, indices[rows], axis=1)
        scope = ""
    else:  # a sample: the distances at the neighbours found, and no sampled row nearer than the k-th of them
        others = _sample(n, max(1, most_rows - k * len(rows)))
        at_indices = np.array([_reference(metric, params, queries[[i]], X[indices[i]])[0] for i in rows])
        sampled = _reference(metric, params, queries[rows], X[others])
        if Q is None:
            sampled[others[None, :] == rows[:, None]] = np.nan  # a row is not its own neighbour
        kth = found[:, -1:]
        nearer = sampled < kth - (1e-4 * np.abs(kth) + 1e-6)
        expected = np.where(nearer.any(axis=1, keepdims=True), -np.inf, found)  # a nearer row: a difference
        ref = np.concatenate([at_indices, sampled], axis=1)
        scope = (
            f" (a sample: {len(rows)} queries, their neighbours' distances and {len(others):,} of {n:,} rows; "
            "the data are larger than --check densifies)"
        )
    tol = {"rtol": 1e-4, "atol": 1e-6, "equal_nan": True}
    wrong = ~(np.isclose(found, expected, **tol) & np.isclose(found, at_indices, **tol)).all(axis=1)
    # SciPy's own NaN (jensenshannon of [1, 0] and [843.5, 0]: rounding below 0 under a square root) orders
    # nothing: a row where SciPy has NaN and we a number is not compared, and the verdict says so.
    undefined = np.isnan(ref).any(axis=1) & ~np.isnan(found).all(axis=1)
    compared = int((~undefined).sum())
    return _verdict(wrong & ~undefined, len(rows), "rows", int(undefined.sum()), "rows", compared) + scope


def _scipy_has(metric: str, params: dict) -> bool:
    """Whether SciPy's cdist defines the measure as resolved (minkowski with p = inf is chebyshev)."""
    return resolve_metric(metric, split_columns(metric, params)[0])[0].scipy is not None


def _verdict(wrong, total: int, unit: str, skipped: int, skipped_unit: str, compared: int) -> str:
    """'yes', or 'NO (...)', and how many were not compared because SciPy gives NaN there; 'nothing compared'
    where that is everything: never 'yes' for what was not compared."""
    if wrong.any():
        verdict = f"NO ({wrong.sum()} of {total} {unit} differ)"
    else:
        verdict = "yes" if compared else "nothing compared"
    if skipped:
        verdict += f" ({skipped} {skipped_unit} not compared: SciPy gives NaN where the result is a number)"
    return verdict


def _check_metric(args) -> None:
    """An unknown metric, a parameter it does not take or a value its rule refuses is named before any file is read."""
    resolve_metric(args.metric, _metric_params(args))


def _column_defaults(metric: str, params: dict, X, Y) -> dict:
    """``params`` with the measure's default per-column values (seuclidean's ``V``) computed once from all the
    rows, as the call itself would: the compile warm-up on a row or two and ``--check``'s SciPy then use them too
    (a row alone has no variance, and cdist's default would come from the checked rows only)."""
    spec = get_metric(metric)
    cp = spec.columns
    if cp is None or cp.default is None or cp.name in params:
        return params
    X = validation.check_matrix(X, "X")
    Y = X if Y is None else validation.check_matrix(Y, "Y")
    return {**params, cp.name: cp.default_values(X, Y, spec.name)}


def _check_output(args, inputs, allowed=io.RESULT_SUFFIXES) -> None:
    """The output: a known format, a folder that exists, not an input, not an existing file without --force."""
    if args.output:
        io.check_output(args.output, allowed, inputs=inputs, replace=args.force)


def run_knn(args) -> int:
    _check_metric(args)
    params = _metric_params(args)
    if args.queries and not args.data:
        raise UsageError("--queries needs a data file")
    _check_output(args, (args.data, args.queries))
    engine = _backend.resolve(args.backend)
    if args.data:
        _check_knn_memory(args, engine)
        X = io.read_matrix(args.data)
        Q = io.read_matrix(args.queries) if args.queries else None
        print(_describe(X, f"data {args.data}"))
        if Q is not None:
            print(_describe(Q, f"queries {args.queries}"))
        names = None
    else:
        X, Q, names = _bundled()
    print(_backend_line(engine))
    with _naming(data=args.data, queries=args.queries):
        params = _column_defaults(args.metric, params, X, None)  # the estimator's: the fitted rows'
        distances, indices, seconds, compiling = _interruptible(
            knn, X, Q, args.k, args.metric, params, engine, args.working_memory, args.progress
        )
    queries = X.shape[0] if Q is None else Q.shape[0]
    print(
        f"knn: the {args.k} nearest of {queries:,} {'rows' if names is None else 'modules'} by {args.metric} "
        f"in {_seconds(seconds)} on {engine} {_preparing(compiling)}"
    )
    if names is None:
        shown = np.arange(min(args.show, queries))
        for i in shown:
            pairs = "  ".join(f"{j} ({d:.4g})" for j, d in zip(indices[i], distances[i]))
            print(f"  row {i}: {pairs}")
    else:
        shown = np.array([names.index(m) for m in FEATURED_MODULES if m in names] or range(min(5, queries)))
        print(f"modules most similar to ({args.metric} distance):")
        width = max(len(names[i]) for i in shown)
        for i in shown:
            near = "  ".join(f"{names[j]} {d:.2f}" for j, d in zip(indices[i], distances[i]))
            print(f"  {names[i]:<{width}}  {near}")
    verdict = ""
    if args.check or names is not None:
        rows, which = (shown, "the modules shown") if names else (np.arange(min(CHECK_ROWS, queries)), "the first rows")
        verdict = _check_knn(X, Q, rows, args.metric, params, distances, indices)
        print(f"check against scipy cdist (float64, brute force) for {which}: {verdict}")
    if args.output:
        io.write_neighbors(args.output, distances, indices, stdout=args.data_stream, replace=args.force)
        print(f"wrote {_output_name(args.output)}")
    if names is not None:
        print("your own data: semiring knn data.mtx -k 10 --metric cosine -o neighbours.npz   (semiring knn --help)")
    return EXIT_CHECK_FAILED if verdict.startswith("NO") else 0


def _check_knn_memory(args, engine: str) -> None:
    """The data (read, the index's own copy, prepared), the queries (read, prepared), the neighbours (a
    distance and an int64 index each, copied once more into a .npy table), the tiles, the per-column defaults
    and --check."""
    data = io.matrix_size(args.data)
    queries = io.matrix_size(args.queries) if args.queries else None
    q = (queries or data).rows
    k = max(0, min(args.k, data.rows))  # a k beyond the rows is refused by its own rule, after
    per_neighbour = _result_itemsize(data, *([queries] if queries else [])) + 8
    table = q * k * 16 if args.output and io.suffix(args.output) == ".npy" else 0
    _check_memory(
        "knn",
        args.data + (f" and {args.queries}" if args.queries else ""),
        [
            (f"the {q:,} x {k:,} neighbours", q * k * per_neighbour + table),
            _inputs_part("the data read, copied by the index and prepared", 3, data),
            _inputs_part("the queries read and prepared", 2, *([queries] if queries else [])),
            ("the tiles", _tiles_bytes(engine, args.working_memory, q * data.rows)),
            ("the per-column values", _columns_bytes(args.metric, data.cols)),
            ("--check", _check_bytes(args.check, q, data.rows, data.cols)),
        ],
    )


def _bundled():
    start = time.perf_counter()
    corpus = datasets.stdlib_tfidf(cache=cache_dir() / "datasets")  # parsed once per machine, then read back
    X = corpus.X
    print(
        f"data: the docstrings of {X.shape[0]:,} modules of Python {platform.python_version()}'s standard library "
        f"({datasets.stdlib_root()}), read without importing them,\n"
        f"      as TF-IDF rows: {X.shape[0]:,} x {X.shape[1]:,} sparse, {X.nnz:,} stored values "
        f"(ready in {_seconds(time.perf_counter() - start)}, nothing downloaded)"
    )
    return X, None, corpus.names


# pairwise


def _check_pairwise(X, Y, metric: str, params: dict, D) -> str:
    """Whether the first rows of D equal SciPy's cdist (with the documented differences); above the densifying
    limit, on a sample of those rows against a sample of the columns, said so."""
    B = X if Y is None else Y
    most_rows, most_columns = _fit_rows(min(CHECK_ROWS, D.shape[0]), X.shape[1])
    if not _scipy_has(metric, params):
        return f"not compared (SciPy has no {metric})"
    if most_rows == 0:
        return f"not compared (rows of {X.shape[1]:,} columns are too wide to densify for SciPy)"
    rows, columns = np.arange(most_rows), _sample(B.shape[0], most_columns)
    ref = _reference(metric, params, X[rows], B[columns])
    found = D[rows][:, columns]
    undefined = np.isnan(ref) & ~np.isnan(found)  # SciPy's own NaN: not a difference (see _check_knn)
    differs = ~np.isclose(found, ref, rtol=1e-4, atol=1e-6, equal_nan=True) & ~undefined
    compared = int((~undefined).sum())
    verdict = _verdict(differs.any(axis=1), len(rows), "rows", int(undefined.sum()), "entries", compared)
    if len(columns) < B.shape[0]:
        verdict += (
            f" (a sample: {len(rows)} rows against {len(columns):,} of {B.shape[0]:,} columns; the data are larger "
            "than --check densifies)"
        )
    return verdict


SUMMARY_ENTRIES = 1 << 22  # entries of the result read at once for its summary line (32 MiB of float64)


def _summary(D) -> str:
    """The smallest, median and largest finite values of D, '' where none is: read a slice at a time (a mask and
    a copy of the finite values would hold another result's worth), the median of every s-th entry where there
    are more than SUMMARY_ENTRIES, said so."""
    flat = np.asarray(D).reshape(-1)  # a view of the result, which is C-contiguous
    lo, hi = np.inf, -np.inf
    for start in range(0, flat.size, SUMMARY_ENTRIES):
        chunk = flat[start : start + SUMMARY_ENTRIES]
        finite = chunk[np.isfinite(chunk)]
        if finite.size:
            lo, hi = min(lo, finite.min()), max(hi, finite.max())
    if lo > hi:
        return ""
    stride = -(-flat.size // SUMMARY_ENTRIES)
    sample = flat[::stride]
    sample = sample[np.isfinite(sample)]
    median = f"{np.median(sample):.4g}" if sample.size else "n/a"
    sampled = f" (a sample: one entry in {stride:,})" if stride > 1 else ""
    return f"min {lo:.4g}, median {median}{sampled}, max {hi:.4g}"


def _check_pairwise_memory(args, engine: str) -> None:
    """The dense result, the inputs (read and prepared), the tiles and --check."""
    x = io.matrix_size(args.x)
    y = io.matrix_size(args.y) if args.y else x
    m, n, itemsize = x.rows, y.rows, _result_itemsize(x, y)
    _check_memory(
        "pairwise",
        args.x + (f" and {args.y}" if args.y else ""),
        [
            (f"the dense result of {m:,} x {n:,} float{8 * itemsize}", m * n * itemsize),
            _inputs_part("the inputs read and prepared", 2, *((x, y) if args.y else (x,))),
            ("the tiles", _tiles_bytes(engine, args.working_memory, m * n)),
            ("the per-column values", _columns_bytes(args.metric, x.cols)),
            ("--check", _check_bytes(args.check, m, n, x.cols)),
        ],
    )


def run_pairwise(args) -> int:
    if args.semiring:
        if args.metric is not None:
            raise UsageError("-m/--metric and -s/--semiring are alternatives; give one of them")
        if args.check:
            raise UsageError("--check compares with SciPy's cdist, which has no semirings; use --metric")
        if args.semiring not in semiring.BUILTIN_SEMIRINGS:
            known = ", ".join(sorted(semiring.BUILTIN_SEMIRINGS))
            raise UsageError(f"-s {args.semiring!r} is not a built-in semiring; known: {known}")
        _given_params(args, None)
    else:
        args.metric = args.metric or PAIRWISE_DEFAULT_METRIC
        _check_metric(args)
    _check_output(args, (args.x, args.y))
    engine = _backend.resolve(args.backend)
    _check_pairwise_memory(args, engine)
    X = io.read_matrix(args.x)
    Y = io.read_matrix(args.y) if args.y else None
    print(_describe(X, f"X {args.x}"))
    if Y is not None:
        print(_describe(Y, f"Y {args.y}"))
    print(_backend_line(engine))
    params = _metric_params(args)
    if args.semiring:

        def compute(A, B):
            return semiring.pairwise(
                A, A if B is None else B, args.semiring, backend=engine, working_memory=args.working_memory
            )
    else:
        with _naming(X=args.x, Y=args.y):
            params = _column_defaults(args.metric, params, X, Y)  # SciPy's default: X and Y stacked

        def compute(A, B):
            return pairwise_distances(
                A, B, metric=args.metric, backend=engine, working_memory=args.working_memory, **params
            )

    with _naming(X=args.x, Y=args.y):
        start = time.perf_counter()
        _interruptible(compute, X[:1], None if Y is None else Y[:1])  # compiles the kernels, outside the timing
        compiling = time.perf_counter() - start
        start = time.perf_counter()
        with _progress(X.shape[0], args.progress, "pairwise") as bar:
            D = _interruptible(compute, X, Y, progress=bar)
        seconds = time.perf_counter() - start
    stats = _summary(D)
    print(
        f"pairwise {args.semiring or args.metric}: {D.shape[0]:,} x {D.shape[1]:,} in {_seconds(seconds)} on {engine} "
        f"{_preparing(compiling)}; {stats or 'no finite values'}"
    )
    verdict = ""
    if args.check:
        verdict = _check_pairwise(X, Y, args.metric, params, D)
        print(f"check against scipy cdist (float64) on the first {min(CHECK_ROWS, D.shape[0])} rows: {verdict}")
    if args.output:
        io.write_array(args.output, D, "distance", stdout=args.data_stream, replace=args.force)
        print(f"wrote {_output_name(args.output)}")
    return EXIT_CHECK_FAILED if verdict.startswith("NO") else 0


# graph


def run_graph(args) -> int:
    if args.output and args.measure == "triangles" and args.per == "total":
        raise UsageError("--per total gives one number; write --per vertex or --per edge to a file")
    _check_output(args, (args.graph,), io.RESULT_SUFFIXES + (".mtx",))
    engine = _backend.resolve(args.backend)
    if io.suffix(args.graph) in io.MATRIX_SUFFIXES:  # its sizes are in its header: checked before it is read
        size = io.matrix_size(args.graph)
        _check_graph_memory(args, size.rows, size.stored, size.csr_bytes)
    A = io.read_graph(args.graph, one_based=args.one_based)
    if io.suffix(args.graph) not in io.MATRIX_SUFFIXES:  # an edge list's vertices are known once it is read
        _check_graph_memory(args, A.shape[0], A.nnz, 0)
    if args.output and not (args.measure == "triangles" and args.per != "edge"):  # an n x n sparse result
        io.check_dense_size(args.output, A.shape)  # refused before the work, not after it
    print(
        f"graph {args.graph}: {A.shape[0]:,} vertices, {A.nnz:,} stored entries ({A.nnz // 2:,} undirected edges if symmetric)"
    )
    print(_backend_line(engine))
    options = {"backend": engine, "normalize": args.normalize}
    measure = GRAPH_MEASURES[args.measure]

    def compute(G):
        return measure.compute(G, args, options)

    with _naming(A=args.graph):
        start = time.perf_counter()
        _interruptible(compute, _triangle_like(A))  # compiles the kernels for A's types, outside the timing
        compiling = time.perf_counter() - start
        start = time.perf_counter()
        result = _interruptible(compute, A)
        seconds = time.perf_counter() - start
    print(
        f"{args.measure}: {measure.summarize(args, result)} in {_seconds(seconds)} on {engine} {_preparing(compiling)}"
    )
    if args.output:
        io.write_array(args.output, result, measure.result, stdout=args.data_stream, replace=args.force)
        print(f"wrote {_output_name(args.output)}")
    return 0


# How often the command looks up from a computation for Ctrl-C or SIGTERM (seconds).
INTERRUPT_POLL_S = 0.1


def _interruptible(fn, *args, progress=None):
    """``fn(*args)`` in a worker thread while the main thread waits, so that Ctrl-C (or SIGTERM) ends the
    command within ``INTERRUPT_POLL_S``: Python handles signals in the main thread, between bytecodes, and a
    compiled kernel holds a tile for as long as it takes (seconds, on a large budget).  The abandoned worker
    writes nothing (outputs are written by the main thread, after) and ends with the process.  ``progress``:
    a bar the driver advances (``semiring.tiling.PROGRESS``) in the worker's context."""
    from semiring import tiling

    outcome: dict = {}
    context = contextvars.copy_context()
    context.run(tiling.PROGRESS.set, progress)

    def work():
        try:
            outcome["value"] = context.run(fn, *args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="semiring-compute", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(INTERRUPT_POLL_S)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextlib.contextmanager
def _progress(total: int, shown: bool, desc: str):
    """A tqdm bar over result rows on a terminal's standard error for runs longer than half a second (as
    ``knn``'s); None otherwise."""
    if not (shown and sys.stderr.isatty()):
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit="rows", delay=0.5, leave=False, file=sys.stderr) as bar:
        yield bar


def _output_name(path) -> str:
    return "standard output" if path == io.STDOUT else str(path)


def _triangle_like(A):
    """A triangle stored with A's value and index types."""
    index = A.indices.dtype
    indices, indptr = np.array([1, 2, 0, 2, 0, 1], dtype=index), np.array([0, 2, 4, 6], dtype=index)
    return sp.csr_matrix((np.ones(6, dtype=A.dtype), indices, indptr), shape=(3, 3))


def _check_graph_memory(args, n: int, entries: int, graph_bytes: int) -> None:
    """The graph (``graph_bytes``: 0 once read), the measure's temporaries and the output's copies (a CSV edge
    list: coordinates and values stacked, beside the coordinate form)."""
    written = entries * 40 if args.output and io.suffix(args.output) in (".csv", ".mtx") or args.output == "-" else 0
    _check_memory(
        f"graph {args.measure}",
        args.graph,
        [
            (f"the graph of {n:,} vertices and {entries:,} stored entries", graph_bytes),
            ("the measure's temporaries", GRAPH_VERTEX_COPIES * (n + 1) * 8 + GRAPH_ENTRY_COPIES * entries * 16),
            ("the output's copies", written),
        ],
    )


def _triangles_options(m: argparse.ArgumentParser) -> None:
    m.add_argument(
        "--per", default="total", choices=PER, help="one total, a count per vertex or per edge (default total)"
    )
    m.add_argument(
        "--order",
        default="degree",
        choices=ORDERS,
        help="the total order orienting the edges: by degree (ties by id) or by id (default degree)",
    )


def _triangles_summary(args, result) -> str:
    if args.per == "total":
        return _count(int(result), "triangle")
    if args.per == "vertex":
        counts = np.asarray(result)
        top = np.argsort(-counts, kind="stable")[:5]
        return f"{_count(int(counts.sum()) // 3, 'triangle')}; most at vertices " + ", ".join(
            f"{v} ({counts[v]})" for v in top
        )
    return (
        f"{_count(int(result.sum()) // 6, 'triangle')} over {result.nnz // 2:,} edges (each stored in both directions)"
    )


def _edge_values_summary(args, result) -> str:
    values = result.data
    return f"{values.size // 2:,} edges, mean {values.mean():.4g}" if values.size else "no edges"


def _ktruss_summary(args, result) -> str:
    vertices = np.count_nonzero(np.diff(result.tocsr().indptr))
    return f"the {args.k}-truss keeps {result.nnz // 2:,} edges on {vertices:,} vertices"


def _truss_summary(args, result) -> str:
    numbers, counts = np.unique(result.data, return_counts=True)
    spread = ", ".join(f"{int(k)}: {c // 2:,}" for k, c in zip(numbers, counts))
    return f"edges per truss number {{{spread}}}" if numbers.size else "no edges"


@dataclass(frozen=True)
class GraphMeasure:
    """A ``semiring graph`` subcommand: its help, its own options, the call, and its result's name and summary."""

    help: str
    result: str  # the values' name in an output file
    compute: Callable  # (G, args, options) -> result; options: backend and normalize
    summarize: Callable[[argparse.Namespace, object], str]
    add_options: Callable[[argparse.ArgumentParser], None] = lambda m: None


def _similarity_command(s) -> GraphMeasure:
    """The subcommand of a row of ``graph.SIMILARITIES``: its values at every edge, ``--weighted`` where it has a
    weighted form."""
    function = getattr(graph, s.function or s.name)
    if s.weighted_semiring is None:
        return GraphMeasure(
            f"{s.title} of the endpoints of every edge: {s.formula}",
            s.name,
            lambda G, args, options: function(G, **options),
            _edge_values_summary,
        )
    return GraphMeasure(
        f"{s.title} of the endpoints of every edge: {s.formula} (--weighted: {s.weighted_rule})",
        s.name,
        lambda G, args, options: function(G, weighted=args.weighted, **options),
        _edge_values_summary,
        lambda m: m.add_argument("--weighted", action="store_true", help=f"use the edge weights: {s.weighted_rule}"),
    )


GRAPH_MEASURES = {
    "triangles": GraphMeasure(
        "count triangles (total, per vertex or per edge)",
        "triangles",
        lambda G, args, options: graph.triangle_count(G, per=args.per, order=args.order, **options),
        _triangles_summary,
        _triangles_options,
    ),
    **{s.name: _similarity_command(s) for s in graph.SIMILARITIES.values()},
    "common-neighbors": GraphMeasure(
        "the number of common neighbours |N(u) ∩ N(v)| of the endpoints of every edge",
        "common_neighbors",
        lambda G, args, options: graph.common_neighbors(G, **options),
        _edge_values_summary,
    ),
    "ktruss": GraphMeasure(
        "the k-truss subgraph",
        "weight",
        lambda G, args, options: graph.ktruss(G, args.k, **options),
        _ktruss_summary,
        lambda m: m.add_argument("-k", type=int, required=True, help="k >= 2"),
    ),
    "truss": GraphMeasure(
        "each edge's truss number (the truss decomposition)",
        "truss",
        lambda G, args, options: graph.truss_decomposition(G, **options),
        _truss_summary,
    ),
}


# info


def run_info(args) -> int:
    import numba
    import scipy

    from semiring import settings

    print(f"sparse-semirings {_version()} on Python {platform.python_version()} ({platform.platform()})")
    print(f"numpy {np.__version__}, scipy {scipy.__version__}, numba {numba.__version__}")
    print(f"cpu: {os.cpu_count()} cores, numba threads {numba.get_num_threads()}")
    reason = _backend.unavailable_reason("cuda")
    print(f"gpu: {_gpu_name()}" if reason is None else f"gpu: not usable: {reason}")
    print(f"backend='auto' runs on: {_backend.resolve('auto')}")
    folder = settings.cache_dir()
    entries = sorted(folder.glob("*.cubin")) if folder.is_dir() else []
    size = sum(e.stat().st_size for e in entries)
    env = settings.CACHE_DIR.name
    source = f"${env}" if settings.CACHE_DIR.is_set() else f"default; set ${env} to move it"
    print(f"kernel cache: {folder} ({len(entries)} compiled kernels, {size / 2**20:.1f} MiB; {source})")
    print(f"gpu strategy: {settings.GPU_STRATEGY.raw()} (${settings.GPU_STRATEGY.name})")
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparse-semirings")
    except PackageNotFoundError:
        return "(not installed)"


# parser

PAIRWISE_DEFAULT_METRIC = "euclidean"


def _finite_mib(text: str) -> float:
    """``--working-memory``: a finite number of MiB > 0, refused by the parser otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of MiB > 0, got {text!r}")
    return value


def _add_compute_options(p: argparse.ArgumentParser, formats: str = ".npz, .npy or .csv") -> None:
    p.add_argument(
        "--backend", default="auto", choices=_backend.BACKENDS, help="default: the GPU if usable, else the CPU"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help=f"write the result: {formats} by its extension (any case); '-' writes CSV to standard output and "
        "the report to standard error. Written atomically, never over an input",
    )
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="replace OUT if it exists, keeping its permissions (refused otherwise, also if OUT appears while the "
        "command runs)",
    )
    p.add_argument("--quiet", action="store_true", help="print nothing but errors (and the data of -o -)")


def _add_metric_options(p: argparse.ArgumentParser, default: str, *, explicit_default: bool = True) -> None:
    p.add_argument(
        "-m",
        "--metric",
        default=default if explicit_default else None,
        help=f"the distance or similarity (default {default}): {', '.join(sorted(METRICS))}",
    )
    for name, (param, _) in FLAGGED_PARAMS.items():
        p.add_argument(param.flag, dest=_param_dest(name), type=float, metavar=name.upper(), help=param.help)
    p.add_argument(
        "--working-memory",
        type=_finite_mib,
        metavar="MiB",
        help="bound on the engine's temporaries per tile (default 1024, as scikit-learn's working_memory)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help=f"compare {CHECK_ROWS} rows with scipy cdist (densifies); exit 1 if they differ",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="semiring",
        description="k-nearest neighbours, pairwise distances and graph measures of sparse matrices and graphs "
        "in files, on the GPU when one is usable, else on the CPU.",
        epilog="Start with: semiring knn (no file: the bundled dataset). Exit status: 0 done, 1 a --check "
        "found a difference from SciPy, 2 a bad file or argument (also with --traceback), 130 interrupted "
        "(Ctrl-C), 143 terminated (SIGTERM; 129 SIGHUP), 141 the reader of -o - closed the pipe.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}", help="print the version")
    parser.add_argument(
        "--traceback", action="store_true", help="also show the traceback of an error (for bug reports)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = commands.add_parser(
        "knn",
        help="k nearest rows (no file: the bundled standard-library TF-IDF)",
        description="The k nearest rows of DATA to each query row. Without QUERIES every row of DATA is a query and "
        "is not its own neighbour. Without DATA: modules of the standard library nearest to a few well-known ones, "
        "by the TF-IDF of their docstrings.",
    )
    p.add_argument("data", nargs="?", help="matrix file (.mtx, .npz, .npy); omitted: the bundled dataset")
    p.add_argument("-q", "--queries", help="matrix file of query rows (same columns as DATA)")
    p.add_argument("-k", type=int, default=5, help="neighbours per query (default 5)")
    p.add_argument("--show", type=int, default=3, help="query rows to print (default 3)")
    p.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress bar (shown on a terminal for long runs)",
    )
    _add_metric_options(p, "cosine")
    _add_compute_options(p)
    p.set_defaults(run=run_knn)

    p = commands.add_parser(
        "pairwise",
        help="all distances between the rows of X and of Y (dense result)",
        description="All distances between the rows of X and the rows of Y (X itself when Y is omitted), a dense "
        "matrix; or, with -s, a built-in semiring's product C[i, j] = ⊕_k X[i, k] ⊗ Y[j, k].",
    )
    p.add_argument("x", metavar="X", help="matrix file (.mtx, .npz, .npy)")
    p.add_argument("y", metavar="Y", nargs="?", help="matrix file; omitted: X")
    p.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress bar (shown on a terminal for long runs)",
    )
    _add_metric_options(p, PAIRWISE_DEFAULT_METRIC, explicit_default=False)
    p.add_argument(
        "-s",
        "--semiring",
        metavar="SEMIRING",
        help=f"a built-in semiring instead of a metric: {', '.join(sorted(semiring.BUILTIN_SEMIRINGS))}",
    )
    _add_compute_options(p)
    p.set_defaults(run=run_pairwise)

    p = commands.add_parser(
        "graph",
        help=f"graph measures: {', '.join(GRAPH_MEASURES)}",
        description="Similarities, common neighbours, triangles and trusses of an undirected graph given as an "
        "edge list or an adjacency matrix file.",
    )
    measures = p.add_subparsers(dest="measure", required=True, metavar="MEASURE")
    for name, measure in GRAPH_MEASURES.items():
        m = measures.add_parser(name, help=measure.help, description=measure.help)
        m.add_argument("graph", help="edge list (source target [weight] per line) or matrix file (.mtx, .npz, .npy)")
        m.add_argument("--one-based", action="store_true", help="edge list vertex ids start at 1")
        m.add_argument(
            "--normalize", action="store_true", help="symmetrise a matrix and drop self-loops instead of refusing them"
        )
        measure.add_options(m)
        _add_compute_options(m, ".npz, .npy, .csv or .mtx")
        m.set_defaults(run=run_graph)

    p = commands.add_parser(
        "info",
        help="versions, backend, GPU, kernel cache",
        description="Versions, CPU cores and threads, whether the GPU engine can run (and why not), where "
        "backend='auto' runs, the compiled-kernel cache and the GPU strategy setting.",
    )
    p.set_defaults(run=run_info)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    args.data_stream = sys.stdout  # the data of -o -; the report goes elsewhere then
    quiet = getattr(args, "quiet", False)
    if quiet:
        args.progress = False
    with contextlib.ExitStack() as stack:
        if quiet:
            stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w"))))
        elif getattr(args, "output", None) == io.STDOUT:
            stack.enter_context(contextlib.redirect_stdout(sys.stderr))
        stack.enter_context(_signals_raise())
        try:
            return args.run(args)
        except (ValueError, TypeError, RuntimeError, MemoryError) as exc:
            if args.traceback:
                traceback.print_exc()
            print(f"semiring: error: {str(exc) or type(exc).__name__ + ' (no message)'}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt:
            print("semiring: interrupted", file=sys.stderr)
            return 130
        except Terminated as exc:
            print(f"semiring: terminated ({signal.Signals(exc.signum).name})", file=sys.stderr)
            return 128 + exc.signum
        except BrokenPipeError:
            # The reader of -o - stopped reading: nothing more to say to it.  Standard output is pointed at
            # /dev/null, so that Python's own flush at exit does not fail on the closed pipe a second time.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), args.data_stream.fileno())
            return EXIT_BROKEN_PIPE


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised as an exception (a BaseException, like KeyboardInterrupt) so that a write in
    progress removes its temporary file on the way out, which the signals' default action would not."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_raise():
    """SIGTERM and SIGHUP raise ``Terminated`` while the command runs (the main thread only: elsewhere Python
    cannot set handlers, and the caller's own are kept); the previous handlers are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated(signum)

    names = [name for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    before = {name: signal.signal(getattr(signal, name), raise_terminated) for name in names}
    try:
        yield
    finally:
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)


if __name__ == "__main__":
    raise SystemExit(main())
