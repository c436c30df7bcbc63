"""Every reader reads exactly what a file says, or refuses it naming the file (and the line).

Matrix Market: number syntax, field counts, integers beyond int64, comments within the entries, bare CR
line endings, entries outside the declared sizes or triangle; symmetric, skew-symmetric and hermitian files
of both layouts read as SciPy reads them.  Non-regular files refused before they are opened; an ``.npz`` or
``.npy`` header checked against the bytes that hold it and the memory available before anything is inflated;
big-endian and float16 arrays converted.  A fuzzer compares the Matrix Market reader with Python's own number
parser on hostile tokens.
"""

from __future__ import annotations

import gzip
import os
import string
import tracemalloc

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semiring import validation
from semiring.cli import io

BANNER = "%%MatrixMarket matrix coordinate real general\n"


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_bytes(text.encode("ascii"))
    return path


@pytest.mark.parametrize(
    "name, text, match",
    [
        ("comma", BANNER + "2 2 2\n1 1 1,5\n2 2 7.0\n", r"line 3: not 'row column value'.*1,5"),
        ("underscore", BANNER + "2 2 2\n1 1 1_0\n2 2 7.0\n", "line 3: not"),
        ("hex", BANNER + "2 2 2\n1 1 0x10\n2 2 7.0\n", "line 3: not"),
        ("fields", BANNER + "2 2 2\n1 1 1.5 3\n2 2 7.0\n", "line 3: expected 'row column value' .*found 4 fields"),
        ("short", BANNER + "2 2 2\n1 1\n2 2 7.0\n", "line 3: expected .*found 2 fields"),
        ("comment", BANNER + "2 2 2\n1 1 1.5\n% later\n2 2 7.0\n", "line 4: a comment within the entries"),
        ("cr", BANNER.replace("\n", "\r") + "2 2 2\r1 1 1.5\r2 2 7\r", "line 1: .*bare carriage return"),
        ("cr-mid", BANNER + "2 2 2\n1 1 1.5\r2 2 7.0\n", "line 3: .*bare carriage return"),
        ("int64", BANNER.replace("real", "integer") + "2 2 2\n1 1 9223372036854775808\n2 2 7\n", "line 3: not"),
        ("int-float", BANNER.replace("real", "integer") + "2 2 2\n1 1 1.5\n2 2 7\n", "line 3: not"),
        ("index-int64", BANNER + "2 2 2\n99999999999999999999 1 1.5\n2 2 7\n", "line 3: not"),
        ("range", BANNER + "2 2 2\n1 3 1.5\n2 2 7\n", r"line 3: entry \(1, 3\) is not within 1..2 x 1..2"),
        ("zero-index", BANNER + "2 2 2\n0 1 1.5\n2 2 7\n", r"line 3: entry \(0, 1\)"),
        ("count", BANNER + "2 2 3\n1 1 1.5\n2 2 7\n", "declares 3 entries, the file lists 2"),
        ("upper", BANNER.replace("general", "symmetric") + "2 2 1\n1 2 1.5\n", "line 3: .*on or below the diagonal"),
        ("skew-diag", BANNER.replace("general", "skew-symmetric") + "2 2 1\n1 1 1.5\n", "below the diagonal"),
        ("complex", BANNER.replace("real", "complex") + "2 2 1\n1 1 1 2\n", "complex values are not supported"),
        ("not-square", BANNER.replace("general", "symmetric") + "2 3 1\n1 1 1\n", "must be square"),
        (
            "array-count",
            "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n",
            "declares 4 values, the file lists 3",
        ),
    ],
)
def test_matrix_market_refuses_what_it_cannot_read_exactly(tmp_path, name, text, match):
    path = _write(tmp_path, f"{name}.mtx", text)
    with pytest.raises(io.FileError, match=f"^{path}: .*{match}"):
        io.read_matrix(path)


@pytest.mark.parametrize("layout", ["coordinate", "array"])
@pytest.mark.parametrize("symmetry", ["general", "symmetric", "skew-symmetric", "hermitian"])
@pytest.mark.parametrize("field", ["real", "integer"])
def test_every_symmetry_and_layout_reads_as_scipy_writes_it(tmp_path, layout, symmetry, field):
    rng = np.random.default_rng(7)
    A = rng.integers(-5, 6, size=(5, 5)).astype(np.float64)
    A[rng.random((5, 5)) < 0.4] = 0.0
    if symmetry in ("symmetric", "hermitian"):
        A = np.tril(A) + np.tril(A, -1).T
    elif symmetry == "skew-symmetric":
        A = np.tril(A, -1) - np.tril(A, -1).T
    # The file as the format defines it: the lower triangle for the symmetric kinds, column by column for arrays.
    lines = []
    if layout == "array":
        for j in range(5):
            start = {"general": 0, "skew-symmetric": j + 1}.get(symmetry, j)
            lines += [f"{A[i, j]:g}" for i in range(start, 5)]
        head = "5 5"
    else:
        keep = (A != 0) & (
            np.ones_like(A, bool)
            if symmetry == "general"
            else np.tri(5, k=-1 if symmetry == "skew-symmetric" else 0, dtype=bool)
        )
        rows, cols = np.nonzero(keep)
        lines = [f"{i + 1} {j + 1} {A[i, j]:g}" for i, j in zip(rows, cols)]
        head = f"5 5 {len(lines)}"
    text = f"%%MatrixMarket matrix {layout} {field} {symmetry}\n% a comment\n{head}\n" + "\n".join(lines) + "\n"
    path = _write(tmp_path, "m.mtx", text)
    np.testing.assert_array_equal(io.read_matrix(path).toarray(), A)
    reference = scipy.io.mmread(path)
    np.testing.assert_array_equal(reference.toarray() if sp.issparse(reference) else reference, A)


@pytest.mark.parametrize("name", ["sym.mtx", "sym.mtx.gz", "a.npy", "big-endian.npz", "csr.npz", "coo.npz"])
def test_a_files_declared_size_bounds_what_reading_it_makes(tmp_path, name):
    """``matrix_size`` reads headers only; the matrix read has its shape and at most its values and CSR bytes."""
    A = sp.random(9, 6, density=0.4, format="csr", random_state=3, dtype=np.float32)
    path = tmp_path / name
    if name.startswith("sym"):
        S = sp.tril(A[:6] + A[:6].T).tocoo()
        head = f"%%MatrixMarket matrix coordinate real symmetric\n6 6 {S.nnz}\n"
        text = head + "".join(f"{i + 1} {j + 1} {v!r}\n" for i, j, v in zip(S.row, S.col, S.data.tolist()))
        with (gzip.open if name.endswith(".gz") else open)(path, "wt") as f:
            f.write(text)
    elif name == "a.npy":
        np.save(path, A.toarray())
    elif name == "big-endian.npz":
        np.savez(path, x=A.toarray().astype(">f8"))
    else:
        sp.save_npz(path, A if name == "csr.npz" else A.tocoo())
    size, M = io.matrix_size(path), io.read_matrix(path)
    assert (size.rows, size.cols) == M.shape and size.stored >= M.nnz
    assert size.csr_bytes >= M.data.nbytes + M.indices.nbytes + M.indptr.nbytes
    assert size.itemsize == M.dtype.itemsize  # float32 kept, the rest read as float64


def test_a_zip_without_arrays_is_not_read_as_an_npz(tmp_path):
    """NumPy returns a non-.npy member's raw bytes as if an array: the size from headers crashed on them."""
    import zipfile

    path = tmp_path / "notes.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "not an array")
    for read in (io.matrix_size, io.read_matrix):
        with pytest.raises(io.FileError, match=f"^{path}: not a NumPy/SciPy .npz file .*members: notes.txt"):
            read(path)


def test_crlf_line_endings_and_blank_lines_are_read(tmp_path):
    path = _write(tmp_path, "w.mtx", (BANNER + "2 2 2\n\n1 1 1.5\n\n2 2 7.0\n").replace("\n", "\r\n"))
    np.testing.assert_array_equal(io.read_matrix(path).toarray(), [[1.5, 0.0], [0.0, 7.0]])


def test_the_issues_comma_file_is_refused_by_the_command(tmp_path, capsys):
    from semiring.cli import commands as cli

    path = _write(tmp_path, "comma.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1,5\n2 2 7.0\n")
    assert cli.main(["pairwise", str(path), "-m", "euclidean"]) == 2
    assert f"{path}: line 3" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["g.mtx", "g.npz", "g.npy", "g.txt"])
def test_a_fifo_is_refused_before_it_is_opened(tmp_path, name):
    path = tmp_path / name
    os.mkfifo(path)  # opening it to read would wait for a writer for ever
    reader = io.read_edge_list if name.endswith(".txt") else io.read_matrix
    with pytest.raises(io.FileError, match=f"{path}: not a regular file"):
        reader(path)


def test_a_compressed_npz_is_checked_against_memory_before_inflating(tmp_path, monkeypatch):
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, x=np.zeros((4000, 4000)))  # 128 MB of zeros in ~125 kB
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**26)
    tracemalloc.start()
    try:
        with pytest.raises(MemoryError, match=f"{path}: the arrays of this .npz, inflated needs"):
            io.read_matrix(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_a_sparse_npz_with_a_huge_declared_shape_is_refused_before_allocating(tmp_path, monkeypatch):
    path = tmp_path / "wide.npz"
    A = sp.csr_matrix(np.eye(3))
    np.savez(path, data=A.data, indices=A.indices, indptr=A.indptr, format=np.array(b"csr"), shape=np.array(A.shape))
    member = tmp_path / "lie.npy"  # a member whose header claims 10**12 values in 24 bytes
    np.save(member, A.data)
    raw = member.read_bytes().replace(b"(3,)", b"(1000000000000,)")
    import zipfile

    with zipfile.ZipFile(path, "a") as z:
        z.writestr("extra.npy", raw)
    with pytest.raises(io.FileError, match=r"extra.npy\): its header declares shape \(1000000000000,\)"):
        io.read_matrix(path)


def test_a_npy_header_larger_than_its_file_is_refused(tmp_path):
    path = tmp_path / "lie.npy"
    np.save(path, np.arange(6.0).reshape(2, 3))
    path.write_bytes(path.read_bytes().replace(b"(2, 3)", b"(9999999, 3)"))
    with pytest.raises(io.FileError, match=f"{path}: its header declares shape \\(9999999, 3\\)"):
        io.read_matrix(path)


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">i4", "<f2", ">f2"])
def test_big_endian_and_float16_arrays_are_converted(tmp_path, dtype):
    A = np.array([[0.0, 1.5, 2.0], [3.0, 0.0, -4.0]]).astype(dtype)
    for name, save in (("a.npy", np.save), ("a.npz", lambda p, a: np.savez(p, a=a))):
        save(tmp_path / name, A)
        M = io.read_matrix(tmp_path / name)
        assert M.dtype.isnative and M.dtype != np.float16
        np.testing.assert_array_equal(M.toarray(), A.astype(np.float64))
    path = tmp_path / "s.npz"
    S = sp.csr_matrix(A.astype(np.float64))
    np.savez(
        path,
        data=S.data.astype(dtype),
        indices=S.indices,
        indptr=S.indptr,
        format=np.array(b"csr"),
        shape=np.array(S.shape),
    )
    np.testing.assert_array_equal(io.read_matrix(path).toarray(), A.astype(np.float64))


def test_an_edge_list_with_bare_cr_endings_is_refused(tmp_path):
    path = tmp_path / "g.txt"
    path.write_bytes(b"0 1\r1 2\r")  # numpy would read the CR as a space: one line '0 1 1 2'
    with pytest.raises(io.FileError, match=f"{path}: line 1: .*bare carriage return"):
        io.read_edge_list(path)


# The fuzzer: one token of a valid file replaced by a hostile one; Python's own parser is the oracle.

_TOKEN = st.text(alphabet=string.digits + ".,eE+-_xXabinfINF %\t", min_size=0, max_size=8)


def _python_reads(token: str, integer: bool):
    """The token's value as Python parses a number (no underscores, ASCII), or None where it is not one."""
    fields = token.split()  # spaces and tabs around it separate fields; within it, they make more fields
    if len(fields) != 1 or "_" in fields[0]:
        return None
    try:
        value = int(fields[0]) if integer else float(fields[0])
    except ValueError:
        return None
    if integer and not (-(2**63) <= value < 2**63):
        return None
    return value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=_TOKEN, where=st.sampled_from(["value", "row"]), field=st.sampled_from(["real", "integer"]))
def test_fuzzed_tokens_are_read_as_python_reads_them_or_refused_naming_the_line(tmp_path, token, where, field):
    entries = [(1, 1, "3"), (2, 3, "4"), (3, 2, "5")]
    k = 1
    row, col, value = entries[k]
    entries[k] = (token, col, value) if where == "row" else (row, col, token)
    text = f"%%MatrixMarket matrix coordinate {field} general\n3 3 3\n" + "".join(
        f"{i} {j} {v}\n" for i, j, v in entries
    )
    path = tmp_path / "fuzz.mtx"
    path.write_bytes(text.encode("ascii"))
    expected = _python_reads(token, integer=(where == "row" or field == "integer"))
    if where == "row" and expected is not None and not 1 <= expected <= 3:
        expected = None  # a number, but no row of this matrix
    if expected is None:
        with pytest.raises(io.FileError, match=f"^{path}: "):
            io.read_matrix(path)
        return
    M = io.read_matrix(path).toarray()
    if where == "row":
        assert M[expected - 1, 2] == 4.0
    else:
        got = M[1, 2]
        assert got == expected or (np.isnan(got) and np.isnan(expected))
