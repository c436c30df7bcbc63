"""Reading matrices and graphs from files, writing results; every failure names the file and the problem.

Matrices: Matrix Market (``.mtx``, also ``.mtx.gz`` / ``.mtx.bz2``), SciPy
sparse ``.npz`` (``scipy.sparse.save_npz``) or a NumPy ``.npz`` holding one
array, NumPy ``.npy``.  Graphs: any of those as an adjacency matrix, or an edge
list (any other extension): one edge per line, ``source target [weight]``
separated by whitespace or commas, ``#`` or ``%`` comment lines.  An edge list
is an undirected graph: each edge may be listed once or in both directions.

Results: ``.npz``, ``.npy``, ``.csv`` (and ``.mtx`` for sparse matrices).  A
sparse result in ``.csv`` is written as a ``row,col,value`` edge list, so it
reads back as a graph.  Extensions are read case-insensitively (``OUT.NPY`` is
written as ``OUT.NPY``).

Nothing is lost: a result is written to a temporary file in the target's
folder and renamed over the target only once complete, so an interrupted or
failed write leaves the earlier file as it was.  Nothing is unbounded: what a
file declares (a Matrix Market header's sizes, an edge list's largest vertex
id) is checked against its actual size and the memory available before
anything is allocated.

Files are read exactly or refused: Matrix Market entries are parsed here, line by line in NumPy's C reader,
never truncated (``1,5`` is refused naming its line, not read as 1); big-endian and float16 arrays are
converted to native float32/float64 types; a FIFO or a device is refused before it is opened.

Anything wrong raises :class:`FileError`, whose message starts with the path
(``MemoryError`` where a file is valid but too large for the memory available).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io as _io
import os
import re
import signal
import stat
import tempfile
import warnings
import zipfile
from dataclasses import dataclass

import numpy as np
import scipy.io
import scipy.sparse as sp

from semiring import validation

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
    if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO, /dev/zero: no size to check, possibly no end
        raise FileError(path, "not a regular file (a device or a pipe); save the data to a file first")
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
    # Big-endian values are made native, float16 widened to float32 (exactly): the engines compute in
    # native float32/float64, and SciPy's sparse matrices take neither.
    native = _native(path, np.dtype(M.dtype))
    if sp.issparse(M):
        M = M.tocsr()
        if M.dtype != native:
            M = M.astype(native)
        return sp.csr_matrix(M)
    return sp.csr_matrix(np.asarray(M, dtype=native))


def _unknown_format(kind: str) -> str:
    return f"unknown matrix format {kind or '(no extension)'!r}; expected {', '.join(MATRIX_SUFFIXES)}"


def _matrix_file(path) -> tuple[str, str]:
    """``path`` as a string and its matrix format, the file checked to be one of them and readable."""
    path = os.fspath(path)
    kind = suffix(path)
    if kind not in MATRIX_SUFFIXES:
        raise FileError(path, _unknown_format(kind))
    _check_readable(path)
    return path, kind


def _npy_header(path: str):
    """A ``.npy`` file's header checked against the file (and memory): its ``_check_array_header`` fields."""
    if not _starts_with(path, b"\x93NUMPY"):
        raise FileError(path, "not a NumPy .npy file (its header is missing)")
    with open(path, "rb") as f:
        return _check_array_header(path, f, os.path.getsize(path))


def read_matrix(path) -> sp.csr_matrix:
    """A matrix from ``.mtx`` (``.gz``/``.bz2``), ``.npz`` (SciPy sparse, or NumPy with one array) or ``.npy``."""
    path, kind = _matrix_file(path)
    if kind.startswith(".mtx"):
        M = _read_matrix_market(path, kind)
    elif kind == ".npz":
        M = _read_npz(path)
    else:
        _npy_header(path)
        try:
            M = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise FileError(path, f"damaged or unsupported .npy file ({exc})") from None
    return _as_csr(path, M)


@dataclass(frozen=True)
class MatrixSize:
    """What a matrix file declares, read from its headers alone: its sizes, the values it stores (every value of
    a dense array; both triangles of a symmetric Matrix Market file) and the bytes of each value once read."""

    rows: int
    cols: int
    stored: int
    itemsize: int

    @property
    def csr_bytes(self) -> int:
        """Its CSR form at most: a value and an int64 column index per stored value, an int64 row pointer a row."""
        return self.stored * (self.itemsize + 8) + (self.rows + 1) * 8


def matrix_size(path) -> MatrixSize:
    """A matrix file's :class:`MatrixSize`, from its headers: no data is read or inflated, so that a command can
    check its whole footprint against memory first.  A header that cannot be read is refused as ``read_matrix``
    refuses it."""
    path, kind = _matrix_file(path)
    if kind.startswith(".mtx"):
        h = _matrix_market_header(path, kind)
        mirrored = h.stored if h.symmetry == "general" else 2 * h.stored
        return MatrixSize(h.rows, h.cols, mirrored, 8)  # integer and pattern values are computed in float64
    if kind == ".npy":
        return _dense_size(path, *_npy_header(path))
    if not _starts_with(path, b"PK"):
        raise FileError(path, "not a NumPy/SciPy .npz file (not a zip archive)")
    _check_npz_members(path)  # every member's header against what holds it, and reading them against memory
    try:
        with zipfile.ZipFile(path) as archive:
            members = {m.filename.removesuffix(".npy"): m for m in archive.infolist() if m.filename.endswith(".npy")}
            if "format" not in members:
                if len(members) != 1:
                    raise FileError(path, _not_one_array(list(members)))
                with archive.open(next(iter(members.values()))) as f:
                    return _dense_size(path, *_header_of(path, f))
            if not {"shape", "data"} <= members.keys():
                raise FileError(path, "damaged .npz file (a sparse matrix's archive without its shape or data)")
            with archive.open(members["data"]) as f:
                data_shape, dtype = _header_of(path, f, "data.npy")
                stored = int(np.prod(data_shape, dtype=object))
            with archive.open(members["shape"]) as f:
                shape_shape, _ = _header_of(path, f, "shape.npy")
            if shape_shape != (2,):
                raise FileError(path, f"damaged .npz file (its shape array has shape {shape_shape})")
            with archive.open(members["shape"]) as f:  # two numbers: read whole
                rows, cols = (int(v) for v in np.lib.format.read_array(f, allow_pickle=False))
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, NotImplementedError) as exc:
        if isinstance(exc, FileError):
            raise
        raise FileError(path, f"damaged or unsupported .npz file ({_brief(exc)})") from None
    return MatrixSize(rows, cols, stored, _computed_itemsize(path, dtype))


def _header_of(path, f, member: str = ""):
    """(shape, dtype) of an array's header, refused naming the file where damaged or holding objects."""
    where = f"{path}{f' ({member})' if member else ''}"
    try:
        shape, dtype = _array_header(f)
    except (ValueError, OSError, EOFError) as exc:
        raise FileError(where, f"damaged or unsupported .npy header ({_brief(exc)})") from None
    if dtype.hasobject:
        raise FileError(where, "holds Python objects (pickles), which are never loaded; save numbers")
    return shape, dtype


def _dense_size(path, shape, dtype) -> MatrixSize:
    if len(shape) != 2:
        raise FileError(path, f"expected a 2-D matrix, found an array of shape {shape}")
    rows, cols = (int(v) for v in shape)
    return MatrixSize(rows, cols, rows * cols, _computed_itemsize(path, dtype))


def _computed_itemsize(path, dtype) -> int:
    """The bytes of a value as the engines compute it: float32 stays float32, the rest becomes float64."""
    return 4 if dtype is not None and _native(path, np.dtype(dtype)) == np.float32 else 8


_OPENERS = {".mtx": open, ".mtx.gz": gzip.open, ".mtx.bz2": bz2.open}
# The fewest bytes an entry takes in a file ("1 1\n"; a value in array format: "0\n"), and the most that
# gzip or bzip2 can shrink a file by: a header declaring more entries than that is not this file.
_MIN_ENTRY_BYTES = {"coordinate": 4, "array": 2}
_MAX_COMPRESSION = {".mtx": 1, ".mtx.gz": 1100, ".mtx.bz2": 1_500_000}
_FIELDS = ("real", "double", "integer", "pattern")
_SYMMETRIES = ("general", "symmetric", "skew-symmetric", "hermitian")  # hermitian: symmetric, for real values


@dataclass(frozen=True)
class _Header:
    rows: int
    cols: int
    stored: int  # entries (coordinate) or values (array) the file lists
    layout: str
    field: str
    symmetry: str


def _read_matrix_market(path, kind: str):
    """A Matrix Market file read exactly, or refused naming the line: its header's sizes checked against the
    file and the memory available before anything is allocated; every entry line parsed whole (number syntax,
    field count, indices within the sizes, integers within int64), no comment or CR-only line ending within the
    entries; symmetric, skew-symmetric and hermitian (real) files of either layout mirrored."""
    header = _matrix_market_header(path, kind)
    copies = 1 if header.symmetry == "general" else 2
    # The parsed table (int64 row and column, float64 value), the mirrored copy, then CSR's arrays.
    validation.check_allocation(
        copies * header.stored * 40 + (header.rows + 1) * 8,
        f"{path}: a {header.rows:,} x {header.cols:,} matrix with {header.stored:,} entries",
    )
    text, first_line = _matrix_market_entries(path, kind, header)
    if header.layout == "array":
        return _array_entries(path, header, text, first_line)
    return _coordinate_entries(path, header, text, first_line)


def _matrix_market_header(path, kind: str) -> _Header:
    """The banner and size line, read without the entries; sizes the file cannot hold refused."""
    try:
        with _OPENERS[kind](path, "rb") as f:
            first = f.readline(1024)
            banner = first.decode("ascii", "replace").split()
            line = b"%"
            while line.startswith(b"%") or not line.strip():
                line = f.readline(1024)
                if not line:
                    break
    except (OSError, EOFError) as exc:
        raise FileError(path, f"not a valid Matrix Market file ({_brief(exc)})") from None
    if re.search(b"\r(?!\n)", first):
        raise FileError(path, "line 1: a line ends in a bare carriage return (CR); convert it to LF (dos2unix)")
    if len(banner) != 5 or banner[0].lower() != "%%matrixmarket" or banner[1].lower() != "matrix":
        raise FileError(path, "not a valid Matrix Market file (no '%%MatrixMarket matrix ...' banner on line 1)")
    layout, field, symmetry = (b.lower() for b in banner[2:])
    if layout not in _MIN_ENTRY_BYTES:
        raise FileError(path, f"not a valid Matrix Market file (layout {banner[2]!r}: coordinate or array)")
    if field not in _FIELDS:
        reason = "complex values are not supported" if field == "complex" else f"unknown field {banner[3]!r}"
        raise FileError(path, f"{reason}; expected {', '.join(_FIELDS)}")
    if symmetry not in _SYMMETRIES:
        raise FileError(path, f"unknown symmetry {banner[4]!r}; expected {', '.join(_SYMMETRIES)}")
    if layout == "array" and field == "pattern":
        raise FileError(path, "not a valid Matrix Market file (a pattern has no array layout)")
    sizes = line.split()
    want = 3 if layout == "coordinate" else 2
    if len(sizes) != want or not all(x.isdigit() and len(x) <= 18 for x in sizes):
        raise FileError(path, f"not a valid Matrix Market file (expected {want} sizes after the banner, each < 10**18)")
    rows, cols, *entries = map(int, sizes)
    if symmetry != "general" and rows != cols:
        raise FileError(path, f"a {symmetry} matrix must be square, the header declares {rows:,} x {cols:,}")
    if layout == "coordinate":
        stored = entries[0]
    elif symmetry == "general":
        stored = rows * cols
    else:  # the lower triangle, column by column; a skew-symmetric one without its (zero) diagonal
        stored = rows * (rows + 1) // 2 if symmetry != "skew-symmetric" else rows * (rows - 1) // 2
    least = stored * _MIN_ENTRY_BYTES[layout]
    size = os.path.getsize(path)
    if least > size * _MAX_COMPRESSION[kind]:
        raise FileError(
            path,
            f"the header declares {rows:,} x {cols:,} with {stored:,} entries, which need at least {least:,} bytes; "
            f"the file has {size:,}: not a valid Matrix Market file (truncated, or a wrong header)",
        )
    return _Header(rows, cols, stored, layout, "real" if field == "double" else field, symmetry)


def _matrix_market_entries(path, kind: str, header: _Header) -> tuple[str, int]:
    """The text after the size line, and the line number it starts at; decompressed a block at a time, each
    checked against the memory available (the text, and the parser's table beside it)."""
    blocks, total = [], 0
    try:
        with _OPENERS[kind](path, "rb") as f:
            while block := f.read(1 << 24):
                total += len(block)
                validation.check_allocation(3 * total, f"{path}: the text of a Matrix Market file, decompressed")
                blocks.append(block)
    except (OSError, EOFError) as exc:
        raise FileError(path, f"not a valid Matrix Market file ({_brief(exc)})") from None
    try:
        text = b"".join(blocks).decode("ascii")
    except UnicodeDecodeError as exc:
        line = b"".join(blocks)[: exc.start].count(b"\n") + 1
        raise FileError(path, f"line {line}: not ASCII text (byte {exc.object[exc.start]:#04x})") from None
    del blocks
    lone_cr = re.search("\r(?!\n)", text)
    if lone_cr:
        line = text.count("\n", 0, lone_cr.start()) + 1
        raise FileError(path, f"line {line}: a line ends in a bare carriage return (CR); convert it to LF (dos2unix)")
    text = text.replace("\r\n", "\n") if "\r" in text else text
    # Skip the banner, the comments and blank lines before the size line, and the size line itself.
    position, line = 0, 1
    seen_sizes = False
    while not seen_sizes and position <= len(text):
        end = text.find("\n", position)
        end = len(text) if end < 0 else end
        current = text[position:end].strip()
        seen_sizes = line > 1 and bool(current) and not current.startswith("%")
        position, line = end + 1, line + 1
    return text[position:], line


def _entry_lines(text: str, first_line: int):
    """(line number, text) of each non-blank line of the entries."""
    for number, content in enumerate(text.split("\n"), first_line):
        if content.strip():
            yield number, content


def _parse_table(path, text: str, first_line: int, dtype, width: int, what: str) -> np.ndarray:
    """The entries as a structured table, or the first line that is not exactly ``width`` numbers of the field's
    syntax (a comment, a decimal comma, ``1_0``, an integer beyond int64) named."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": counted by the caller
            return np.loadtxt(_io.StringIO(text), dtype=dtype, comments=None, ndmin=1)
    except ValueError:
        pass
    for number, content in _entry_lines(text, first_line):
        fields = content.split()
        if content.lstrip().startswith("%"):
            raise FileError(path, f"line {number}: a comment within the entries (comments belong before the sizes)")
        if len(fields) != width:
            raise FileError(path, f"line {number}: expected {what}, found {len(fields)} fields")
        try:
            np.loadtxt(_io.StringIO(content), dtype=dtype, comments=None, ndmin=1)
        except ValueError:
            raise FileError(path, f"line {number}: not {what} ({_brief(content.strip(), 80)!r})") from None
    raise FileError(path, "not a valid Matrix Market file (its entries cannot be read)")


def _values_type(header: _Header):
    return np.int64 if header.field == "integer" else np.float64


def _coordinate_entries(path, header: _Header, text: str, first_line: int) -> sp.coo_matrix:
    pattern = header.field == "pattern"
    names = [("i", np.int64), ("j", np.int64)] + ([] if pattern else [("v", _values_type(header))])
    what = "'row column'" if pattern else f"'row column value' ({header.field})"
    table = _parse_table(path, text, first_line, np.dtype(names), len(names), what)
    if table.size != header.stored:
        raise FileError(path, f"the header declares {header.stored:,} entries, the file lists {table.size:,}")
    i, j = table["i"], table["j"]
    values = np.ones(table.size) if pattern else table["v"]
    bad = (i < 1) | (i > header.rows) | (j < 1) | (j > header.cols)
    if header.symmetry != "general":  # the lower triangle only (a skew-symmetric diagonal is 0, not listed)
        bad |= (i < j) | ((i == j) & (header.symmetry == "skew-symmetric"))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        number = next(n for m, (n, _) in enumerate(_entry_lines(text, first_line)) if m == k)
        rule = f"within 1..{header.rows} x 1..{header.cols}"
        if header.symmetry != "general":
            rule += ", on or below the diagonal" if header.symmetry != "skew-symmetric" else ", below the diagonal"
        raise FileError(path, f"line {number}: entry ({int(i[k])}, {int(j[k])}) is not {rule}")
    return _mirrored(header, i - 1, j - 1, values)


def _array_entries(path, header: _Header, text: str, first_line: int) -> np.ndarray:
    what = f"one {header.field} value"
    values = _parse_table(path, text, first_line, np.dtype(_values_type(header)), 1, what)
    if values.size != header.stored:
        raise FileError(path, f"the header declares {header.stored:,} values, the file lists {values.size:,}")
    n = header.rows
    if header.symmetry == "general":
        return values.reshape(header.cols, header.rows).T  # column by column
    strict = header.symmetry == "skew-symmetric"
    rows, cols = np.tril_indices(n, -1 if strict else 0)
    order = np.lexsort((rows, cols))  # the file lists the lower triangle column by column
    return _mirrored(header, rows[order], cols[order], values).toarray()


def _mirrored(header: _Header, i, j, values) -> sp.coo_matrix:
    """The entries of the lower triangle with their mirror images: negated for skew-symmetric."""
    if header.symmetry != "general":
        off = i != j
        sign = -1 if header.symmetry == "skew-symmetric" else 1
        i, j, values = (
            np.concatenate([i, j[off]]),
            np.concatenate([j, i[off]]),
            np.concatenate([values, sign * values[off]]),
        )
    return sp.coo_matrix((values, (i, j)), shape=(header.rows, header.cols))


def _brief(exc: BaseException, limit: int = 200) -> str:
    """An exception's message, cut short: a parser's message may quote a whole (hostile) line."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + " ..."


def _array_header(f):
    """(shape, dtype) of a ``.npy`` stream, read without its data."""
    version = np.lib.format.read_magic(f)
    reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = reader(f, max_header_size=10_000)
    return shape, dtype


def _check_array_header(path, f, stored_bytes: int, member: str = ""):
    """An array's (shape, dtype) from its header, the bytes its data take checked against what holds them (the
    file, or the archive member's declared size) and against the memory its reading and its CSR form need,
    before any of it is read or inflated."""
    where = f"{path}{f' ({member})' if member else ''}"
    shape, dtype = _header_of(path, f, member)
    count = int(np.prod(shape, dtype=object)) if shape else 1
    nbytes = count * dtype.itemsize
    if nbytes > stored_bytes:
        raise FileError(
            where,
            f"its header declares shape {shape} of {dtype} ({nbytes:,} bytes), more than the "
            f"{stored_bytes:,} bytes it holds: truncated, or a wrong header",
        )
    # The array, then as CSR at most every value stored: an int64 column index and a float64 value each.
    rows = shape[0] if len(shape) == 2 else 1
    validation.check_allocation(
        nbytes + count * 16 + (int(rows) + 1) * 8, f"{where}: an array of shape {shape} ({dtype}) read as a matrix"
    )
    return shape, dtype


def _check_npz_members(path) -> None:
    """Every member's uncompressed size (what the archive declares, and what reading it is bounded by) and each
    array's header checked against memory before anything is inflated."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.infolist() if m.filename.endswith(".npy")]
            if not members:  # NumPy would return another member's raw bytes as the "array"
                names = ", ".join(m.filename for m in archive.infolist()[:5]) or "none"
                raise FileError(path, f"not a NumPy/SciPy .npz file (it holds no .npy array; its members: {names})")
            validation.check_allocation(
                2 * sum(m.file_size for m in members), f"{path}: the arrays of this .npz, inflated"
            )
            for m in members:
                with archive.open(m) as f:
                    _check_array_header(path, f, m.file_size, m.filename)
    except (OSError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
        raise FileError(path, f"damaged or unsupported .npz file ({_brief(exc)})") from None


def _read_npz(path):
    if not _starts_with(path, b"PK"):
        raise FileError(path, "not a NumPy/SciPy .npz file (not a zip archive)")
    _check_npz_members(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            if "format" in names:  # scipy.sparse.save_npz writes the format's name beside the arrays
                return _sparse_from_archive(path, archive)
            if len(names) != 1:
                raise FileError(path, _not_one_array(names))
            return archive[names[0]]
    except FileError:
        raise
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise FileError(path, f"damaged or unsupported .npz file ({exc})") from None


def _not_one_array(names: list[str]) -> str:
    return f"a dense .npz must hold exactly one array, this one holds {len(names)}: {', '.join(names)}"


def _sparse_from_archive(path, archive):
    """A ``scipy.sparse.save_npz`` archive's matrix, its values in a native type first (SciPy refuses a
    big-endian or float16 ``data`` array)."""
    layout = archive["format"].item()
    layout = layout.decode("ascii") if isinstance(layout, bytes) else str(layout)
    shape = tuple(int(v) for v in archive["shape"])
    data = archive["data"]
    data = data.astype(_native(path, data.dtype), copy=False)
    if layout in ("csr", "csc"):
        kind = sp.csr_matrix if layout == "csr" else sp.csc_matrix
        return kind((data, archive["indices"], archive["indptr"]), shape=shape)
    if layout == "coo":
        return sp.coo_matrix((data, (archive["row"], archive["col"])), shape=shape)
    raise FileError(path, f"sparse format {layout!r} is not read; save it as CSR (scipy.sparse.save_npz(f, A.tocsr()))")


def _native(path, dtype: np.dtype) -> np.dtype:
    """The native type values of ``dtype`` are computed in: native byte order, float16 widened to float32."""
    if dtype.kind not in "biuf":
        raise FileError(path, f"expected real numbers (bool, int or float), found dtype {dtype}")
    return np.dtype(np.float32) if dtype.kind == "f" and dtype.itemsize == 2 else dtype.newbyteorder("=")


def read_edge_list(path, *, one_based: bool = False) -> sp.csr_matrix:
    """The symmetric adjacency matrix of an undirected edge list.

    Lines: ``source target`` or ``source target weight`` (every line the same),
    whitespace- or comma-separated; blank lines and lines starting with ``#`` or
    ``%`` are skipped; a UTF-8 byte-order mark is allowed.  Vertices are
    non-negative integers (``one_based``: from 1) and the matrix has ``max id +
    1`` rows.  An edge listed twice (in either direction) keeps its largest
    weight; self-loops are dropped (no graph measure here uses them).
    Unweighted edges have weight 1.

    Parsed by ``numpy.loadtxt`` (its C reader); numbers are written as Python
    and C write them (``1_0`` and ``0x10`` are not numbers).
    """
    path = os.fspath(path)
    _check_readable(path)
    info = os.stat(path)
    validation.check_allocation(4 * info.st_size, f"{path}: reading an edge list of {info.st_size:,} bytes")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise FileError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
        # Whitespace or commas, mixed as the lines like; '%' comments as '#' ones: numpy's reader runs in C with
        # one comment character, a Python function per line with two.
        text = text.replace(",", " ") if "," in text else text
        text = text.replace("%", "#") if "%" in text else text
    except UnicodeDecodeError:
        raise FileError(path, "not a text edge list (not UTF-8 text)") from None
    if "\0" in text:
        raise FileError(path, "not a text edge list (it holds NUL bytes)")
    lone_cr = re.search("\r(?!\n)", text)
    if lone_cr:  # numpy reads a bare CR as a space: '0\r1' would be the edge 0-1
        line = text.count("\n", 0, lone_cr.start()) + 1
        raise FileError(path, f"line {line}: a line ends in a bare carriage return (CR); convert it to LF (dos2unix)")
    del raw
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": reported below
            table = np.loadtxt(_io.StringIO(text), dtype=np.float64, comments="#", ndmin=2)
    except ValueError as exc:
        raise FileError(path, _edge_list_problem(text, str(exc))) from None
    if table.size == 0:
        raise FileError(path, "holds no edges")
    width = table.shape[1]
    if width not in (2, 3):
        raise FileError(path, f"line {_line_of_row(text, 0)}: expected 'source target [weight]', found {width} fields")
    ends = table[:, :2]
    offset = 1 if one_based else 0
    if not np.all(np.isfinite(ends) & (ends == np.floor(ends))):
        raise FileError(path, "vertex ids must be integers")
    if ends.min() < offset:
        raise FileError(
            path, f"vertex ids must be >= {offset}{' (one-based ids)' if one_based else ''}, found {ends.min():g}"
        )
    largest = ends.max()
    if largest >= 2**53:  # beyond exact float64 integers, and far beyond any memory
        raise FileError(path, f"vertex id {largest:g} is too large (ids must be below 2**53)")
    n = int(largest) - offset + 1
    # A vertex id is a row of the adjacency matrix: its row pointers (int64) are allocated for every id up to the
    # largest, whatever the number of edges, so 30 bytes naming vertex 9e8 would take 7 GiB.
    validation.check_allocation(
        (n + 1) * 8 + len(table) * 48,
        f"{path}: the largest vertex id {int(largest):,} means {n:,} vertices, whose adjacency matrix",
        "renumber the vertices 0..n-1, e.g. with numpy.unique(ids, return_inverse=True)",
    )
    weights = table[:, 2] if width == 3 else np.ones(len(table))
    if not np.all(np.isfinite(weights)):
        raise FileError(path, "weights must be finite numbers")
    source, target = (ends.astype(np.int64) - offset).T
    keep = source != target
    return symmetric_adjacency(source[keep], target[keep], weights[keep], n)


def _data_lines(text: str):
    """(line number, text) of each line that is not blank or a comment."""
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and line[0] not in "#%":
            yield number, line


def _line_of_row(text: str, row: int) -> int:
    """The line number of data row ``row`` (0-based, comments and blank lines skipped, as loadtxt counts)."""
    for k, (number, _) in enumerate(_data_lines(text)):
        if k == row:
            return number
    return row + 1


def _edge_list_problem(text: str, message: str) -> str:
    """numpy.loadtxt's message in the reader's words, with the file's line number."""
    changed = re.search(r"number of columns changed from (\d+) to (\d+) at row (\d+)", message)
    if changed:
        before, now, row = map(int, changed.groups())
        number = _line_of_row(text, row - 1)  # numpy counts this row from 1, the one below from 0
        if before not in (2, 3) or now not in (2, 3):
            return f"line {number}: expected 'source target [weight]', found {now} fields"
        return (
            f"line {number}: {now} fields where the lines before have {before}; "
            "either every edge has a weight or none does"
        )
    bad = re.search(r"at row (\d+), column \d+", message)
    if bad:
        row = int(bad.group(1))
        number, line = next(((n, t) for k, (n, t) in enumerate(_data_lines(text)) if k == row), (row + 1, ""))
        return f"line {number}: not a number in {_brief(line, 80)!r}"
    return f"not an edge list ({_brief(message)})"


def symmetric_adjacency(source, target, weights, n: int) -> sp.csr_matrix:
    """CSR of the undirected graph with these edges; a repeated edge keeps its largest weight."""
    lo, hi = np.minimum(source, target), np.maximum(source, target)
    edge = lo * np.int64(n) + hi  # one key per undirected edge (n² < 2^63: n is bounded by memory)
    order = np.lexsort((-weights, edge))  # per edge, the largest weight first
    edge, weights = edge[order], weights[order]
    first = np.ones(edge.size, dtype=bool)
    first[1:] = edge[1:] != edge[:-1]
    lo, hi, weights = np.divmod(edge[first], np.int64(n)) + (weights[first],)
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

STDOUT = "-"  # as an output path: CSV text on standard output


def check_output(path, allowed=RESULT_SUFFIXES, *, inputs=(), replace: bool = True) -> str:
    """The output's format, refused before any work when it cannot be written as asked.

    Refused: an unknown format, a missing folder, a folder, one of the
    ``inputs`` (the same file under any name: a result never replaces what it
    was computed from, even with ``replace``), and an existing file unless
    ``replace``.  ``"-"`` is standard output (CSV).
    """
    path = os.fspath(path)
    if path == STDOUT:
        return ".csv"
    kind = suffix(path)
    if kind not in allowed:
        raise FileError(path, f"unknown output format {kind or '(no extension)'!r}; expected {', '.join(allowed)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileError(path, f"cannot write: folder {folder} does not exist")
    if os.path.isdir(path):
        raise FileError(path, "is a folder, not a file")
    if os.path.exists(path):
        for given in inputs:
            if given is not None and os.path.exists(given) and os.path.samefile(path, given):
                raise FileError(path, f"is an input ({os.fspath(given)}); write the result to another file")
        if not replace:
            raise FileError(path, "exists; add --force to replace it, or choose another name")
    return kind


# Signals that would end the process between creating a temporary file and removing it: held back while the
# file is created and while it is published, so that neither step is ever left half done.
_HELD_SIGNALS = {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)}


@contextlib.contextmanager
def _signals_held():
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextlib.contextmanager
def atomic(path, mode: str = "wb", *, replace: bool = True):
    """A file object writing to a temporary file beside ``path``, published as ``path`` only when complete.

    An error or an interruption (Ctrl-C, SIGTERM where the command turns it into an exception, a full disk, a
    file-size limit) removes the temporary file and leaves whatever ``path`` held before.  ``replace``
    False: ``path`` is created exclusively (a hard link, which fails if the name exists), so a file that
    appeared meanwhile, another run's included, is never replaced (``FileExistsError``); True: it is replaced
    and keeps its permission bits.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    with _signals_held():
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".partial")
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        with _signals_held():
            _publish(temporary, path, replace)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _publish(temporary: str, path: str, replace: bool) -> None:
    """``temporary`` renamed to ``path``: over it (keeping its mode) when ``replace``, else only if it does not
    exist, atomically."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode) if replace else None
    except FileNotFoundError:
        mode = None
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # mkstemp's file is private (0600); a result is an ordinary file
    os.chmod(temporary, mode)
    if replace:
        os.replace(temporary, path)
        return
    try:
        os.link(temporary, path)  # fails with FileExistsError if the name exists, whoever made it
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: claim the name exclusively, then rename onto the claim
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.replace(temporary, path)
        return
    os.unlink(temporary)


def _writing(path, mode: str, write, replace: bool = True) -> None:
    """``write(f)`` into ``path`` atomically; an OS error names the file."""
    try:
        with atomic(path, mode, replace=replace) as f:
            write(f)
    except FileExistsError:
        raise FileError(
            path, "appeared while the command ran; add --force to replace it, or choose another name"
        ) from None
    except OSError as exc:
        raise FileError(path, f"cannot write ({exc.strerror or exc})") from None


# A sparse result is written densified (``.npy``, or a dense ``.csv`` table) only up to this many entries: a
# graph of 10**6 vertices would be 8 TB dense.  Above it the sparse formats (``.npz``, ``.mtx``, a ``.csv``
# edge list) hold it.
DENSE_SPARSE_LIMIT = 10**8


def check_dense_size(path, shape: tuple[int, int]) -> None:
    """Refuse writing a sparse result of ``shape`` densified into ``path`` above ``DENSE_SPARSE_LIMIT`` entries."""
    rows, cols = shape
    if os.fspath(path) != STDOUT and suffix(path) == ".npy" and rows * cols > DENSE_SPARSE_LIMIT:
        raise FileError(
            path,
            f"a sparse result of {rows:,} x {cols:,} would be written dense ({rows * cols:,} entries, more than "
            f"{DENSE_SPARSE_LIMIT:,}); write .npz, .mtx or .csv, which keep it sparse",
        )


def write_array(path, values, name: str, *, stdout=None, replace: bool = True) -> None:
    """A result: dense (1-D or 2-D) or sparse.

    ``.npz``: sparse as ``scipy.sparse.save_npz``, dense as one array called
    ``name``; ``.npy``: the dense array (a sparse one is densified, up to
    ``DENSE_SPARSE_LIMIT`` entries); ``.csv``: a 2-D dense array as a plain
    table, a 1-D one as ``index,<name>`` lines, a sparse one as
    ``row,col,<name>`` lines under a ``#`` header (an edge list); ``.mtx``:
    Matrix Market.  ``path`` ``"-"``: the CSV form on ``stdout`` (default
    ``sys.stdout``).  ``replace`` False: an existing ``path`` is never replaced
    (see ``atomic``).
    """
    path = os.fspath(path)
    kind = check_output(path, RESULT_SUFFIXES + (".mtx",))
    sparse = sp.issparse(values)
    if sparse:
        check_dense_size(path, values.shape)
    if path == STDOUT:
        _csv_array(_standard_output(stdout), values, name)
    elif kind == ".npz":
        save = (lambda f: sp.save_npz(f, values.tocsr())) if sparse else (lambda f: np.savez(f, **{name: values}))
        _writing(path, "wb", save, replace)
    elif kind == ".npy":
        _writing(path, "wb", lambda f: np.save(f, values.toarray() if sparse else np.asarray(values)), replace)
    elif kind == ".mtx":
        _writing(path, "wb", lambda f: scipy.io.mmwrite(f, values), replace)
    else:
        _writing(path, "w", lambda f: _csv_array(f, values, name), replace)


def _standard_output(stdout):
    import sys

    return sys.stdout if stdout is None else stdout


def _csv_array(f, values, name: str) -> None:
    if sp.issparse(values):
        C = values.tocoo()
        table = np.column_stack([C.row, C.col, C.data])
        np.savetxt(f, table, fmt=["%d", "%d", "%.17g"], delimiter=",", header=f"row,col,{name}")
    elif np.ndim(values) == 1:
        table = np.column_stack([np.arange(len(values)), values])
        fmt = ["%d", "%d" if np.asarray(values).dtype.kind in "iub" else "%.17g"]
        np.savetxt(f, table, fmt=fmt, delimiter=",", header=f"index,{name}", comments="")
    else:
        np.savetxt(f, np.asarray(values), fmt="%.17g", delimiter=",")


NEIGHBOR_DTYPE = np.dtype([("index", np.int64), ("distance", np.float64)])


def write_neighbors(path, distances: np.ndarray, indices: np.ndarray, *, stdout=None, replace: bool = True) -> None:
    """k-nearest-neighbour results (``n_queries x k`` each).

    ``.npz``: arrays ``indices`` and ``distances``; ``.npy``: one structured
    array with fields ``index`` and ``distance``; ``.csv``:
    ``query,rank,neighbor,distance`` lines (rank 1 is the nearest); ``"-"``:
    those lines on ``stdout`` (default ``sys.stdout``).
    """
    path = os.fspath(path)
    kind = check_output(path)
    if path == STDOUT:
        _csv_neighbors(_standard_output(stdout), distances, indices)
    elif kind == ".npz":
        _writing(path, "wb", lambda f: np.savez(f, indices=indices, distances=distances), replace)
    elif kind == ".npy":
        table = np.empty(indices.shape, dtype=NEIGHBOR_DTYPE)
        table["index"], table["distance"] = indices, distances
        _writing(path, "wb", lambda f: np.save(f, table), replace)
    else:
        _writing(path, "w", lambda f: _csv_neighbors(f, distances, indices), replace)


CSV_ROWS = 1 << 16  # query rows formatted at once: the lines of all of them would be tens of bytes a neighbour


def _csv_neighbors(f, distances: np.ndarray, indices: np.ndarray) -> None:
    n, k = indices.shape
    f.write("query,rank,neighbor,distance\n")
    step = max(1, CSV_ROWS // max(1, k))
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        query, rank = np.divmod(np.arange(r0 * k, r1 * k), k)
        f.writelines(
            f"{q},{r + 1},{j},{d!r}\n"
            for q, r, j, d in zip(
                query.tolist(), rank.tolist(), indices[r0:r1].ravel().tolist(), distances[r0:r1].ravel().tolist()
            )
        )
