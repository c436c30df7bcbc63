"""Reading matrices and graphs from files, writing results; every failure names the file and the problem.

Matrices: Matrix Market (``.mtx``, also ``.mtx.gz`` / ``.mtx.bz2``), SciPy
sparse ``.npz`` (``scipy.sparse.save_npz``) or a NumPy ``.npz`` holding one
array, NumPy ``.npy``.  Graphs: any of those as an adjacency matrix, or an edge
list (any other extension): one edge per line, ``source target [weight]``
separated by whitespace or commas, ``#`` or ``%`` comment lines.  An edge list
is an undirected graph: each edge may be listed once or in both directions.

Results: ``.npz``, ``.npy``, ``.csv`` (and ``.mtx`` for sparse matrices).  A
sparse result in ``.csv`` is written as a ``row,col,value`` edge list, so it
reads back as a graph.

Anything wrong raises :class:`FileError`, whose message starts with the path.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np
import scipy.io
import scipy.sparse as sp

MATRIX_SUFFIXES = (".mtx", ".mtx.gz", ".mtx.bz2", ".npz", ".npy")
RESULT_SUFFIXES = (".npz", ".npy", ".csv")


class FileError(ValueError):
    """A file that cannot be read or written as asked; the message names the file and the problem."""

    def __init__(self, path, problem: str):
        super().__init__(f"{os.fspath(path)}: {problem}")


def suffix(path) -> str:
    """The format-giving extension, lower case: ``.npz``, ``.mtx.gz``, ... ('' if none)."""
    name = os.path.basename(os.fspath(path)).lower()
    for compressed in (".mtx.gz", ".mtx.bz2"):
        if name.endswith(compressed):
            return compressed
    return os.path.splitext(name)[1]


def _check_readable(path) -> None:
    if not os.path.exists(path):
        raise FileError(path, "no such file")
    if os.path.isdir(path):
        raise FileError(path, "is a folder, not a file")
    if not os.access(path, os.R_OK):
        raise FileError(path, "not readable (permission denied)")


def _starts_with(path, magic: bytes) -> bool:
    with open(path, "rb") as f:
        return f.read(len(magic)) == magic


def _as_csr(path, M) -> sp.csr_matrix:
    """M as CSR with real values, or an error saying what it is instead."""
    shape = getattr(M, "shape", ())
    if len(shape) != 2:
        raise FileError(path, f"expected a 2-D matrix, found an array of shape {shape}")
    dtype = np.dtype(M.dtype)
    if dtype.kind not in "biuf":
        raise FileError(path, f"expected real numbers (bool, int or float), found dtype {dtype}")
    return sp.csr_matrix(M)


def read_matrix(path) -> sp.csr_matrix:
    """A matrix from ``.mtx`` (``.gz``/``.bz2``), ``.npz`` (SciPy sparse, or NumPy with one array) or ``.npy``."""
    path = os.fspath(path)
    kind = suffix(path)
    if kind not in MATRIX_SUFFIXES:
        raise FileError(
            path, f"unknown matrix format {kind or '(no extension)'!r}; expected {', '.join(MATRIX_SUFFIXES)}"
        )
    _check_readable(path)
    if kind.startswith(".mtx"):
        try:
            M = scipy.io.mmread(path)
        except (ValueError, OSError, EOFError, IndexError, UnicodeDecodeError) as exc:
            raise FileError(path, f"not a valid Matrix Market file ({exc})") from None
    elif kind == ".npz":
        M = _read_npz(path)
    else:
        if not _starts_with(path, b"\x93NUMPY"):
            raise FileError(path, "not a NumPy .npy file (its header is missing)")
        try:
            M = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise FileError(path, f"damaged or unsupported .npy file ({exc})") from None
    return _as_csr(path, M)


def _read_npz(path):
    if not _starts_with(path, b"PK"):
        raise FileError(path, "not a NumPy/SciPy .npz file (not a zip archive)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            if "format" in names:  # scipy.sparse.save_npz writes the format's name beside the arrays
                return sp.load_npz(path)
            if len(names) != 1:
                raise FileError(
                    path, f"a dense .npz must hold exactly one array, this one holds {len(names)}: {', '.join(names)}"
                )
            return archive[names[0]]
    except FileError:
        raise
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise FileError(path, f"damaged or unsupported .npz file ({exc})") from None


def read_edge_list(path, *, one_based: bool = False) -> sp.csr_matrix:
    """The symmetric adjacency matrix of an undirected edge list.

    Lines: ``source target`` or ``source target weight`` (every line the same),
    whitespace- or comma-separated; blank lines and lines starting with ``#`` or
    ``%`` are skipped.  Vertices are non-negative integers (``one_based``: from
    1) and the matrix has ``max id + 1`` rows.  An edge listed twice (in either
    direction) keeps its largest weight; self-loops are dropped (no graph
    measure here uses them).  Unweighted edges have weight 1.
    """
    path = os.fspath(path)
    _check_readable(path)
    rows = []
    width = None
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                text = line.strip()
                if not text or text[0] in "#%":
                    continue
                fields = text.replace(",", " ").split()
                if len(fields) not in (2, 3):
                    raise FileError(
                        path, f"line {number}: expected 'source target [weight]', found {len(fields)} fields"
                    )
                if width is None:
                    width = len(fields)
                elif len(fields) != width:
                    raise FileError(
                        path,
                        f"line {number}: {len(fields)} fields where the lines before have {width}; "
                        "either every edge has a weight or none does",
                    )
                try:
                    rows.append([float(x) for x in fields])
                except ValueError:
                    raise FileError(path, f"line {number}: not a number in {text!r}") from None
    except UnicodeDecodeError:
        raise FileError(path, "not a text edge list (not UTF-8 text)") from None
    except OSError as exc:
        raise FileError(path, f"cannot be read ({exc.strerror})") from None
    if not rows:
        raise FileError(path, "holds no edges")
    table = np.array(rows, dtype=np.float64)
    ends = table[:, :2]
    offset = 1 if one_based else 0
    if not np.all(np.isfinite(ends) & (ends == np.floor(ends))):
        raise FileError(path, "vertex ids must be integers")
    if ends.min() < offset:
        raise FileError(
            path, f"vertex ids must be >= {offset}{' (one-based ids)' if one_based else ''}, found {ends.min():g}"
        )
    weights = table[:, 2] if width == 3 else np.ones(len(table))
    if not np.all(np.isfinite(weights)):
        raise FileError(path, "weights must be finite numbers")
    source, target = (ends.astype(np.int64) - offset).T
    n = int(max(source.max(), target.max())) + 1
    keep = source != target
    return symmetric_adjacency(source[keep], target[keep], weights[keep], n)


def symmetric_adjacency(source, target, weights, n: int) -> sp.csr_matrix:
    """CSR of the undirected graph with these edges; a repeated edge keeps its largest weight."""
    lo, hi = np.minimum(source, target), np.maximum(source, target)
    order = np.lexsort((-weights, hi, lo))  # per edge, the largest weight first
    lo, hi, weights = lo[order], hi[order], weights[order]
    first = np.ones(lo.size, dtype=bool)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    lo, hi, weights = lo[first], hi[first], weights[first]
    rows = np.concatenate([lo, hi])
    cols = np.concatenate([hi, lo])
    return sp.csr_matrix((np.concatenate([weights, weights]), (rows, cols)), shape=(n, n))


def read_graph(path, *, one_based: bool = False) -> sp.csr_matrix:
    """A graph's adjacency matrix: a square matrix file, or an edge list (any other extension)."""
    path = os.fspath(path)
    if suffix(path) in MATRIX_SUFFIXES:
        if one_based:
            raise FileError(path, "--one-based applies to edge lists; matrix files carry their own indexing")
        A = read_matrix(path)
        if A.shape[0] != A.shape[1]:
            raise FileError(path, f"a graph's adjacency matrix must be square, found {A.shape[0]} x {A.shape[1]}")
        return A
    return read_edge_list(path, one_based=one_based)


# Writing


def check_output(path, allowed=RESULT_SUFFIXES) -> str:
    """The output's format, refused before any work when it is unknown or its folder is missing."""
    path = os.fspath(path)
    kind = suffix(path)
    if kind not in allowed:
        raise FileError(path, f"unknown output format {kind or '(no extension)'!r}; expected {', '.join(allowed)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileError(path, f"cannot write: folder {folder} does not exist")
    if os.path.isdir(path):
        raise FileError(path, "is a folder, not a file")
    return kind


def _writing(path, write) -> None:
    try:
        write()
    except OSError as exc:
        raise FileError(path, f"cannot write ({exc.strerror or exc})") from None


def write_array(path, values, name: str) -> None:
    """A result: dense (1-D or 2-D) or sparse.

    ``.npz``: sparse as ``scipy.sparse.save_npz``, dense as one array called
    ``name``; ``.npy``: the dense array (a sparse one is densified); ``.csv``:
    a 2-D dense array as a plain table, a 1-D one as ``index,<name>`` lines, a
    sparse one as ``row,col,<name>`` lines under a ``#`` header (an edge list);
    ``.mtx``: Matrix Market.
    """
    path = os.fspath(path)
    kind = check_output(path, RESULT_SUFFIXES + (".mtx",))
    sparse = sp.issparse(values)
    if kind == ".npz":
        _writing(path, lambda: sp.save_npz(path, values.tocsr()) if sparse else np.savez(path, **{name: values}))
    elif kind == ".npy":
        _writing(path, lambda: np.save(path, values.toarray() if sparse else np.asarray(values)))
    elif kind == ".mtx":
        _writing(path, lambda: scipy.io.mmwrite(path, values))
    elif sparse:
        C = values.tocoo()
        table = np.column_stack([C.row, C.col, C.data])
        _writing(
            path, lambda: np.savetxt(path, table, fmt=["%d", "%d", "%.17g"], delimiter=",", header=f"row,col,{name}")
        )
    elif np.ndim(values) == 1:
        table = np.column_stack([np.arange(len(values)), values])
        fmt = ["%d", "%d" if np.asarray(values).dtype.kind in "iub" else "%.17g"]
        _writing(path, lambda: np.savetxt(path, table, fmt=fmt, delimiter=",", header=f"index,{name}", comments=""))
    else:
        _writing(path, lambda: np.savetxt(path, np.asarray(values), fmt="%.17g", delimiter=","))


NEIGHBOR_DTYPE = np.dtype([("index", np.int64), ("distance", np.float64)])


def write_neighbors(path, distances: np.ndarray, indices: np.ndarray) -> None:
    """k-nearest-neighbour results (``n_queries x k`` each).

    ``.npz``: arrays ``indices`` and ``distances``; ``.npy``: one structured
    array with fields ``index`` and ``distance``; ``.csv``:
    ``query,rank,neighbor,distance`` lines (rank 1 is the nearest).
    """
    path = os.fspath(path)
    kind = check_output(path)
    if kind == ".npz":
        _writing(path, lambda: np.savez(path, indices=indices, distances=distances))
    elif kind == ".npy":
        table = np.empty(indices.shape, dtype=NEIGHBOR_DTYPE)
        table["index"], table["distance"] = indices, distances
        _writing(path, lambda: np.save(path, table))
    else:
        n, k = indices.shape
        query, rank = np.divmod(np.arange(n * k), k)
        lines = (
            f"{q},{r + 1},{j},{d!r}" for q, r, j, d in zip(query, rank, indices.ravel(), distances.ravel().tolist())
        )
        _writing(path, lambda: _write_lines(path, "query,rank,neighbor,distance", lines))


def _write_lines(path, header: str, lines) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(header + "\n")
        f.writelines(line + "\n" for line in lines)
