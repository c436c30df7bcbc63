"""Hostile input that runs no engine: expressions, parameter names, file readers and writers.

The standing suite of issue 12 (with ``tests/cpu/test_hostile.py`` for what
runs the CPU engine): each case is an input a careless or hostile user tried,
and the test says what must happen instead of a hang, a crash, a lost file or a
wrong answer.  Expected values come from NumPy float64 arithmetic, SciPy's
readers or the file system, never from the code under test.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import stat
import subprocess
import sys
import time
import tracemalloc
from io import BytesIO

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from host_cpp import HAS_GXX, printed

from semiring import binary_op, validation
from semiring import expr as E
from semiring.cli import io

# Expressions: bounded size and depth, no RecursionError, no exponential work


def _doubling(levels: int) -> str:
    return "a0 = x + y; " + "; ".join(f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, levels)) + f"; a{levels - 1}"


@pytest.mark.parametrize("levels", [12, 30, 200])
def test_doubled_bindings_are_refused_quickly(levels):
    start = time.perf_counter()
    with pytest.raises(E.ExpressionError, match=r"expands to [\d,]+ operations .* the limit is 2,000"):
        binary_op(_doubling(levels))
    # A hang guard only: expanding 2**200 terms would never end; the refusal takes microseconds.
    assert time.perf_counter() - start < 120.0


def test_shared_bindings_within_the_limit_compute_the_expanded_value():
    op = binary_op(_doubling(8))  # 2^7 copies of x + y: 383 nodes
    assert op(1.0, 2.0) == 2**7 * 3.0
    tree, _ = E.parse(_doubling(8), ("x", "y"))
    assert E.expanded_size(tree) == (2**8 - 1 + 2**8, 9)


@pytest.mark.parametrize(
    "source",
    [
        "+".join(["x"] * 1000),
        "-" * 5000 + "x",
        "(" * 300 + "x" + ")" * 300,
        "a0 = x; " + "; ".join(f"a{i} = a{i - 1} * y" for i in range(1, 400)) + "; a399",
        "abs(" * 150 + "x" + ")" * 150,
        "x if y > 0 else " * 120 + "y",
    ],
    ids=["sum-chain", "unary-chain", "parentheses", "binding-chain", "calls", "conditionals"],
)
def test_deep_expressions_are_an_expression_error_not_a_recursion_error(source):
    with pytest.raises(E.ExpressionError, match="nested"):
        binary_op(source)


def test_huge_source_is_refused_before_parsing():
    with pytest.raises(E.ExpressionError, match="characters; the limit"):
        binary_op("x" + " + 0" * 100_000)


def test_a_long_flat_sum_within_the_limits_is_fine():
    assert binary_op("+".join(["x"] * 90))(1.0, 0.0) == 90.0


def test_function_declarations_are_bounded_too(tmp_path, monkeypatch):
    (tmp_path / "deep_op.py").write_text("def deep(x, y):\n    return " + "+".join(["x"] * 300) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from deep_op import deep

    with pytest.raises(E.ExpressionError, match="nested"):
        binary_op(deep)


# Names: a parameter or a binding never shadows an operand or a constant


@pytest.mark.parametrize("name", ["x", "y", "inf", "nan", "pi", "sqrt", "max", "np", "math"])
def test_parameter_named_like_an_operand_or_a_constant_is_refused(name):
    with pytest.raises(E.ExpressionError, match=f"parameter '{name}' has the name of"):
        binary_op("x * y", **{name: 2.0})


@pytest.mark.parametrize("binding", ["x = y; x * 2", "y = 1; x * y", "inf = 1; x + inf", "pi = 3; x * pi"])
def test_binding_named_like_an_operand_or_a_constant_is_refused(binding):
    with pytest.raises(E.ExpressionError, match="would hide the"):
        binary_op(binding)


def test_a_parameter_with_a_free_name_still_works():
    assert binary_op("x * y * w", w=2.0)(3.0, 5.0) == 30.0


# Constants: IEEE arithmetic (NumPy float64, errors ignored), never a Python exception


@pytest.mark.parametrize(
    "source, x, y",
    [
        ("x * (1/0)", 1.0, 2.0),
        ("x * y * 10.0 ** 400", 1.0, 2.0),
        ("x * y * (-8) ** (1/3)", 1.0, 2.0),
        ("x * y * (0.0 ** -1)", 1.0, 2.0),
        ("x + (1e308 * 10) - (1e308 * 10)", 1.0, 2.0),
        ("x * log(0) + y", 1.0, 2.0),
        ("sqrt(-1) + x", 1.0, 2.0),
    ],
)
def test_constant_arithmetic_is_ieee(source, x, y):
    with np.errstate(all="ignore"):
        expected = float(eval(_float64_literals(source), {"np": np, "x": np.float64(x), "y": np.float64(y)}))
    got = binary_op(source)(x, y)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


CONSTANT_SOURCES = [
    "x * (1/0)",
    "x * y * 10.0 ** 400",
    "x * y * (-8) ** (1/3)",
    "x * y * (0.0 ** -1)",
    "x + (1e308 * 10) - (1e308 * 10)",
    "x * log(0) + y",
    "sqrt(-1) + x",
]


@pytest.mark.skipif(not HAS_GXX, reason="needs a host C++ compiler (g++)")
def test_constant_arithmetic_in_the_cuda_form_is_the_same(tmp_path):
    """The CUDA rendering (compiled as host C++: the same C math library) agrees with NumPy float64."""
    body = ["  double x = 1.0, y = 2.0;"]
    body += [f'  printf("%.17g\\n", (double)({binary_op(text).cuda()}));' for text in CONSTANT_SOURCES]
    for text, got in zip(CONSTANT_SOURCES, printed(tmp_path, body), strict=True):
        with np.errstate(all="ignore"):
            want = float(eval(_float64_literals(text), {"np": np, "x": np.float64(1.0), "y": np.float64(2.0)}))
        assert float(got) == want or (math.isnan(float(got)) and math.isnan(want)), (text, got, want)


def _float64_literals(source: str) -> str:
    """``source`` with every number a NumPy float64, as the engines compute (an independent spelling)."""
    text = re.sub(r"(?<![\w.])(\d+\.?\d*(?:e\d+)?)", r"np.float64(\1)", source)
    return text.replace("log", "np.log").replace("sqrt", "np.sqrt")


def test_pow_keeps_its_operands_parentheses_in_the_text():
    op = binary_op("pow(x - 3, 2)")
    assert op.text == "(x - 3.0) ** 2.0"
    assert binary_op(op.text)(5.0, 0.0) == op(5.0, 0.0) == 4.0


# Files: nothing lost (atomic writes), names honoured, declared sizes checked, edge lists read strictly and fast


def test_an_interrupted_write_leaves_the_earlier_file(tmp_path, monkeypatch):
    out = tmp_path / "d.csv"
    out.write_text("the earlier result\n")

    def cut_short(f, table, *args, **kwargs):
        f.write("0,1,2\n" * 100)  # part of the table, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savetxt", cut_short)
    with pytest.raises(KeyboardInterrupt):
        io.write_array(out, np.ones((3000, 3)), "distance")
    assert out.read_text() == "the earlier result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]  # no temporary file left behind


def test_a_write_over_the_file_size_limit_leaves_the_earlier_file(tmp_path):
    """A real file-size limit (RLIMIT_FSIZE, as ulimit -f): the write fails, the earlier file stays."""
    out = tmp_path / "d.csv"
    out.write_text("the earlier result\n")
    script = (
        "import resource, signal, sys\n"
        "import numpy as np\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
        "from semiring.distances import io\n"
        "try:\n"
        f"    io.write_array({str(out)!r}, np.ones((3000, 10)), 'distance')\n"
        "except io.FileError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 3, result.stderr
    assert result.stdout.startswith(f"{out}: cannot write (File too large")
    assert out.read_text() == "the earlier result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]


def test_written_files_have_ordinary_permissions(tmp_path):
    out = tmp_path / "d.npy"
    io.write_array(out, np.eye(2), "distance")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("name", ["OUT.NPY", "OUT.NPZ", "OUT.MTX", "OUT.CSV", "Out.Npy"])
def test_upper_case_extensions_write_the_file_named(tmp_path, name):
    M = sp.csr_matrix(np.array([[0.0, 1.5], [2.0, 0.0]]))
    io.write_array(tmp_path / name, M, "value")
    assert [p.name for p in tmp_path.iterdir()] == [name]
    kind = name.lower().rsplit(".", 1)[1]
    path = tmp_path / name
    if kind == "npy":
        back = np.load(path)
    elif kind == "npz":
        back = sp.load_npz(path).toarray()
    elif kind == "mtx":
        with open(path, "rb") as f:
            back = scipy.io.mmread(f).toarray()
    else:
        rows, cols, values = np.loadtxt(path, delimiter=",").T
        back = sp.csr_matrix((values, (rows.astype(int), cols.astype(int))), shape=(2, 2)).toarray()
    np.testing.assert_array_equal(back, M.toarray())


@pytest.mark.parametrize("name", ["X.NPY", "X.MTX", "X.MTX.GZ", "X.NPZ"])
def test_upper_case_extensions_are_read(tmp_path, name):
    M = sp.csr_matrix(np.array([[0.0, 1.5, 0.0], [2.0, 0.0, 3.0]]))
    path = tmp_path / name
    if name.endswith(".NPY"):
        with open(path, "wb") as f:
            np.save(f, M.toarray())
    elif name.endswith(".NPZ"):
        with open(path, "wb") as f:
            sp.save_npz(f, M)
    else:
        buffer = BytesIO()
        scipy.io.mmwrite(buffer, M)
        path.write_bytes(gzip.compress(buffer.getvalue()) if name.endswith(".GZ") else buffer.getvalue())
    np.testing.assert_array_equal(io.read_matrix(path).toarray(), M.toarray())


HUGE_HEADERS = {
    "entries": "%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 1000000000\n1 1 1.0\n",
    "array": "%%MatrixMarket matrix array real general\n100000 100000\n1.0\n",
    "symmetric": "%%MatrixMarket matrix coordinate pattern symmetric\n%\n70000 70000 500000000\n1 1\n",
}


@pytest.mark.parametrize("case", sorted(HUGE_HEADERS))
def test_a_header_declaring_more_than_the_file_holds_is_refused_before_allocating(tmp_path, case):
    path = tmp_path / "huge.mtx"
    path.write_text(HUGE_HEADERS[case])
    tracemalloc.start()
    try:
        with pytest.raises(io.FileError, match=r"huge.mtx: the header declares .* the file has \d+: not a valid"):
            io.read_matrix(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_a_compressed_header_is_checked_against_the_largest_ratio(tmp_path):
    path = tmp_path / "huge.mtx.gz"
    path.write_bytes(gzip.compress(HUGE_HEADERS["entries"].encode()))
    with pytest.raises(io.FileError, match="the header declares"):
        io.read_matrix(path)


def test_a_matrix_larger_than_memory_is_refused_before_reading(tmp_path, monkeypatch):
    """10^9 rows and one entry: the file is honest, but CSR row pointers need 7.5 GiB."""
    path = tmp_path / "tall.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n1000000000 3 1\n1 1 1.0\n")
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**30)
    with pytest.raises(
        MemoryError, match=r"tall.mtx: a 1,000,000,000 x 3 matrix .* needs 7\.5 GiB .* 1\.0 GiB is avai"
    ):
        io.read_matrix(path)


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"0 1\n1_0 2\n", "line 2: not a number in '1_0 2'"),
        (b"0 1\n0x10 2\n", "line 2: not a number in '0x10 2'"),
        (b"0 1\n1 2 3 4\n", "line 2: expected 'source target [weight]', found 4 fields"),
        (b"0\n", "line 1: expected 'source target [weight]', found 1 fields"),
        (b"# c\n\n0 1 2\n% c\n1 2\n", "line 5: 2 fields where the lines before have 3"),
        (b"0 1\n1e300 2\n", "vertex id 1e+300 is too large"),
        (b"0 1\ninf 2\n", "vertex ids must be integers"),
        (b"0 1\nnan 2\n", "vertex ids must be integers"),
        (b"0 1 nan\n", "weights must be finite numbers"),
        (b"\x00" * 5000, "it holds NUL bytes"),
        (b"0 1\n\xc3\x28\n", "not UTF-8 text"),
        (b"\n\n   \n", "holds no edges"),
        (b"0 1\n" + b"a" * 100_000 + b" 1\n", "line 2: not a number in 'aaaa"),
        (b"0 1\n" + b"9" * 400 + b" 1\n", "vertex ids must be integers"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_edge_list_refusals_name_the_line_and_rule(tmp_path, content, problem):
    path = tmp_path / "g.txt"
    path.write_bytes(content)
    with pytest.raises(io.FileError) as info:
        io.read_edge_list(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message
    assert len(message) < 400  # a hostile line is quoted in part only


def test_an_edge_list_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "g.txt"
    path.write_bytes("\ufeff# exported by a spreadsheet\n0,1\n1,2\n".encode())
    A = io.read_edge_list(path)
    expected = np.zeros((3, 3))
    expected[0, 1] = expected[1, 0] = expected[1, 2] = expected[2, 1] = 1
    np.testing.assert_array_equal(A.toarray(), expected)


def test_a_device_is_not_read_as_an_edge_list():
    tracemalloc.start()
    try:
        with pytest.raises(io.FileError, match="/dev/zero: not a regular file"):
            io.read_edge_list("/dev/zero")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_a_huge_vertex_id_is_refused_before_allocating(tmp_path, monkeypatch):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n900000000 2\n")  # 30 bytes naming 9e8 vertices
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**30)
    with pytest.raises(MemoryError, match=r"largest vertex id 900,000,000 means 900,000,001 vertices.* renumber"):
        io.read_edge_list(path)


def test_edge_list_reader_reads_what_numpy_loadtxt_reads(tmp_path):
    """The reader is numpy.loadtxt's C parser plus the graph build: the same file gives the same edges.
    (Its speed is a benchmark's business: a timed assertion here failed on a loaded 2-core machine.)"""
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 5_000, size=(20_000, 2))
    path = tmp_path / "g.txt"
    np.savetxt(path, edges, fmt="%d")
    A = io.read_edge_list(path)
    pairs = {(int(u), int(v)) for u, v in np.loadtxt(path, dtype=np.int64) if u != v}
    pairs |= {(v, u) for u, v in pairs}
    rows, cols = A.nonzero()
    assert set(zip(rows.tolist(), cols.tolist())) == pairs
