"""Hostile input through the API and the ``semiring`` command, on the CPU engine.

The standing suite of issue 12 (with ``tests/unit/test_hostile.py`` for what
runs no engine).  Each case is an input a careless or hostile user tried; the
test says what must happen instead: the right answer (SciPy's ``cdist`` on the
densified input is the oracle), or a clear error naming the argument or file
and the rule, with nothing the user had lost.  The command runs in-process
through ``main(argv)``.
"""

from __future__ import annotations

import argparse
import math
from fractions import Fraction
from io import StringIO

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist

import semiring
from semiring import validation
from semiring.cli import commands as cli
from semiring.cli import io as cli_io
from semiring.cli import main
from semiring.cli.commands import build_parser
from semiring.distances import pairwise_distances
from semiring.distances.specs import METRICS

# Inputs the validation must take or name


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("index", [np.uint64, np.uint32, np.int16])
def test_unusual_index_arrays_are_converted(fmt, index):
    A = sp.random(6, 5, density=0.5, format="csr", random_state=3)
    A = sp.vstack([A, A[:1]]).asformat(fmt)  # a repeated row: euclidean recomputes it exactly (the masked path)
    dense = A.toarray()
    attrs = ("row", "col") if fmt == "coo" else ("indptr", "indices")
    for attr in attrs:
        setattr(A, attr, getattr(A, attr).astype(index))
    given = {attr: getattr(A, attr).dtype for attr in attrs}
    np.testing.assert_allclose(
        pairwise_distances(A, metric="cityblock", backend="cpu"), cdist(dense, dense, "cityblock")
    )
    assert {attr: getattr(A, attr).dtype for attr in attrs} == given  # the caller's matrix is untouched


def test_uint64_indices_beyond_int64_name_the_argument():
    A = sp.random(4, 5, density=0.5, format="csr", random_state=3)
    A.indices = A.indices.astype(np.uint64)
    A.indices[0] = np.iinfo(np.uint64).max
    with pytest.raises(ValueError, match=r"^Y: index array indices \(uint64\) holds 18446744073709551615"):
        pairwise_distances(np.ones((2, 5)), A, backend="cpu")


def test_a_networkx_graph_as_a_matrix_is_named():
    with pytest.raises(TypeError, match="X is a networkx Graph, not a matrix; pass its adjacency matrix"):
        pairwise_distances(nx.karate_club_graph(), backend="cpu")


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0, -1])
def test_working_memory_must_be_finite_and_positive(value):
    with pytest.raises(ValueError, match="working_memory must be > 0 and finite"):
        pairwise_distances(np.eye(3), backend="cpu", working_memory=value)


# Memory: a dense result is checked against the memory available before it is allocated


def test_a_dense_result_larger_than_memory_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 1000 * 8)
    X = sp.random(101, 4, density=0.5, format="csr", random_state=0)
    for call in (
        lambda: pairwise_distances(X, backend="cpu"),
        lambda: semiring.pairwise(X, X, "plus_times", backend="cpu"),
    ):
        with pytest.raises(
            MemoryError,
            # the result, 79.7 KiB, and the rows BLAS densifies (dense enough inputs), 3.2 KiB
            match=r"the dense result \(101 x 101 float64\).* needs 82\.9 KiB of memory; 7\.8 KiB is available",
        ):
            call()
    np.testing.assert_allclose(pairwise_distances(X[:10], backend="cpu"), cdist(X[:10].toarray(), X[:10].toarray()))


@pytest.mark.parametrize(
    "dtype, metric, working_memory, need",
    [
        (np.float64, "braycurtis", None, "2.1 MiB"),  # one tile: two float64 terms and the result, per entry
        (np.float32, "euclidean", None, "1.0 MiB"),  # float64 temporaries for a float32 result
        (np.float64, "euclidean", 0.5, "1.2 MiB"),  # tiles: the result beside a budget's worth of them
    ],
)
def test_a_dense_result_is_checked_with_its_tiles(monkeypatch, dtype, metric, working_memory, need):
    """The result fits the memory available, the result and its tiles' temporaries do not: refused first."""
    X = (np.random.default_rng(4).random((300, 5)) - 0.5).astype(dtype)  # signed: braycurtis keeps two terms
    result = 300 * 300 * np.dtype(dtype).itemsize
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: result + 1000)
    with pytest.raises(MemoryError, match=f"with its tiles' temporaries.* needs {need} of memory"):
        pairwise_distances(X, metric=metric, backend="cpu", working_memory=working_memory)


@pytest.mark.parametrize(
    "call, oracle",
    [
        (lambda X: semiring.pairwise(X, None, "plus_times", backend="cpu"), lambda A: A @ A.T),  # BLAS
        (lambda X: semiring.pairwise(X, None, "plus_absdiff", backend="cpu"), lambda A: cdist(A, A, "cityblock")),
        (lambda X: pairwise_distances(X, metric="cosine", backend="cpu"), lambda A: cdist(A, A, "cosine")),
    ],
    ids=["blas", "union", "measure"],
)
def test_the_rows_a_dense_path_densifies_are_checked_with_the_result(monkeypatch, call, oracle):
    """Wide rows dense enough for the dense path: its densified blocks (60 x 3,000 values, 1.4 MiB in float64)
    dwarf the result (60 x 60) and are no tile entries' temporaries; refused where they do not fit, computed on
    the sparse kernels (which make none) in the same memory."""
    X = sp.random(60, 3000, density=0.5, format="csr", random_state=7)
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 3 * 60 * 60 * 8 + 1000)
    with pytest.raises(
        MemoryError,
        match=r"the dense result \(60 x 60 float64\) with its tiles' temporaries \(.* "
        r"densified rows a tile\) needs .* of memory",
    ):
        call(X)
    monkeypatch.setenv("SEMIRING_CPU_DENSE", "never")
    np.testing.assert_allclose(call(X), oracle(X.toarray()), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("search", ["kneighbors", "radius_neighbors"])
def test_the_rows_a_dense_path_densifies_for_a_query_tile_are_checked(monkeypatch, search):
    """kNN and radius queries of wide rows dense enough for the dense path: a tile's densified rows (60 + 60
    rows of 3,000 values in float64, 2.7 MiB) are no tile entries' temporaries; refused where they do not fit,
    answered on the sparse kernels (which make none) in the same memory."""
    X = sp.random(60, 3000, density=0.5, format="csr", random_state=7)
    nn = semiring.distances.NearestNeighbors(n_neighbors=3, metric="euclidean", backend="cpu").fit(X)
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**20)
    call = {"kneighbors": lambda: nn.kneighbors(), "radius_neighbors": lambda: nn.radius_neighbors(radius=1e9)}
    with pytest.raises(MemoryError, match=r"a tile of 60 queries x 60 fitted rows with the rows densified for it"):
        call[search]()
    monkeypatch.setenv("SEMIRING_CPU_DENSE", "never")
    D = cdist(X.toarray(), X.toarray())
    np.fill_diagonal(D, np.inf)
    if search == "kneighbors":
        dist, _ = call[search]()
        np.testing.assert_allclose(dist, np.sort(D, axis=1)[:, :3], rtol=1e-9)
    else:
        dist, ind = call[search]()
        assert all(np.array_equal(np.sort(i), np.delete(np.arange(60), r)) for r, i in enumerate(ind))


def test_the_k_nearest_are_checked_against_memory_before_any_tile(monkeypatch):
    X = sp.random(200, 6, density=0.5, format="csr", random_state=1)
    nn = semiring.distances.NearestNeighbors(n_neighbors=150, backend="cpu").fit(X)
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 200 * 150 * 16 - 1)
    with pytest.raises(MemoryError, match=r"the k nearest neighbours \(200 queries x 150 distances and int64 in"):
        nn.kneighbors(X)


@pytest.mark.parametrize("precomputed", [False, True], ids=["measure", "precomputed"])
def test_the_pairs_a_radius_finds_are_checked_against_memory(monkeypatch, precomputed):
    """Every pair within a radius taking in the whole index (300 x 300, 24 bytes each and their sort beside
    them) is refused with the count before it is kept; a radius finding few is answered in the same memory."""
    X = np.random.default_rng(5).random((300, 3))
    D = cdist(X, X)
    nn = semiring.distances.NearestNeighbors(metric="precomputed" if precomputed else "euclidean", backend="cpu")
    nn.fit(D if precomputed else X)
    queries = D if precomputed else X
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2 * 2**20)
    with pytest.raises(
        MemoryError, match=r"putting in order the 90,000 pairs within the radius of the first 300 of 300 queries needs"
    ):
        nn.radius_neighbors(queries, radius=10.0)
    dist, ind = nn.radius_neighbors(queries, radius=0.1)
    for i in range(300):
        expected = np.flatnonzero(D[i] <= 0.1)
        np.testing.assert_array_equal(ind[i], expected)
        np.testing.assert_allclose(dist[i], D[i, expected], atol=1e-12)


# IEEE magnitudes: the expanded forms must not hide an overflow (SciPy's cdist is the oracle)

HUGE_ROWS = {
    "overflowing-norms": np.array([[1e200, 0.0], [1e200, 1.0], [0.0, 1.0]]),
    "near-duplicates-1e160": np.array([[1e160, 0.0], [1e160 * (1 + 2**-52), 0.5], [1e160, 3.0]]),
    "opposite-signs": np.array([[1e200, 0.0], [-1e200, 0.0], [1.0, 1.0]]),
    "float32-norms-overflow": np.array([[1.5e19, 0.0], [1.5e19, 2.0], [0.0, 0.0]], dtype=np.float32),
}


@pytest.mark.parametrize("case", sorted(HUGE_ROWS))
@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean", "chebyshev", "cityblock"])
def test_huge_magnitudes_equal_scipy(case, metric):
    X = HUGE_ROWS[case]
    ref = cdist(X.astype(np.float64), X.astype(np.float64), metric)
    D = pairwise_distances(sp.csr_matrix(X), metric=metric, backend="cpu")
    np.testing.assert_allclose(D, ref, rtol=1e-6 if X.dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("one_pass", [False, True], ids=["numpy-check", "one-pass-check"])
@pytest.mark.parametrize("magnitude", [1e-300, 1e-200, 1e-120, 1e-80, 1e80, 1e150, 1e200, 1e300])
@pytest.mark.parametrize("metric", ["cosine", "correlation"])
def test_the_norms_products_and_squares_neither_overflow_nor_underflow(metric, magnitude, one_pass, monkeypatch):
    """Values of 1e77 and more, or 1e-77 and less: ‖x‖²·‖y‖² over- or underflows, each root taken apart does
    not (it gave 0, 1 or 2 for every pair); from about 1e154 (or below 1e-154) the squares themselves do, where
    SciPy gives NaN, and each row is scaled into range first (the measures are unchanged by a row's scale): the
    oracle is cdist of the same rows at magnitude 1.  ``one_pass``: the CPU engine's one-pass check, as for
    large matrices, whose magnitudes the range check then reads instead of the values."""
    if one_pass:
        from semiring.kernels.cpu import checks

        monkeypatch.setattr(checks, "VERDICTS_MIN_ENTRIES", 0)
    unit = np.random.default_rng(3).normal(size=(5, 4))
    unit[1] = -0.5 * unit[0]
    X = unit * magnitude
    ref = cdist(unit, unit, metric)
    for A in (X, sp.csr_matrix(X)):
        np.testing.assert_allclose(pairwise_distances(A, metric=metric, backend="cpu"), ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("metric", ["cosine", "correlation"])
def test_rows_of_every_magnitude_in_one_call_and_their_neighbours(metric):
    """Each row at its own magnitude, 1e-300 to 1e300, in one call: the values and the neighbours of the same
    rows at magnitude 1 (cdist), through pairwise_distances, a fitted index and a radius query."""
    rng = np.random.default_rng(8)
    unit = rng.normal(size=(12, 6))
    X = unit * np.array([1e-300, 1e-200, 1e-160, 1e-100, 1.0, 1e100, 1e160, 1e200, 1e300, 1.0, 1e-300, 1e300])[:, None]
    ref = cdist(unit, unit, metric)
    np.testing.assert_allclose(pairwise_distances(X, metric=metric, backend="cpu"), ref, rtol=1e-9, atol=1e-12)
    nn = semiring.distances.NearestNeighbors(n_neighbors=3, radius=0.5, metric=metric, backend="cpu").fit(X)
    dist, ind = nn.kneighbors(X[::-1])
    want = ref[::-1]
    np.testing.assert_allclose(dist, np.sort(want, axis=1)[:, :3], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.take_along_axis(want, ind, axis=1), dist, rtol=1e-9, atol=1e-12)
    for i, row in enumerate(nn.radius_neighbors(X, return_distance=False)):
        np.testing.assert_array_equal(np.sort(row), np.flatnonzero(ref[i] <= 0.5))


@pytest.mark.parametrize("scale", [1e-120, 1e80, 1e150])
def test_weighted_graph_cosine_at_extreme_weights(scale):
    """The graph's weighted cosine Σ w·w / (‖w_u‖‖w_v‖) is scale-free: weights of 1e±80 and more gave 0."""
    from semiring import graph
    from semiring.cli import io

    source, target = np.array([0, 0, 1, 1, 2]), np.array([1, 2, 2, 3, 3])
    unit = io.symmetric_adjacency(source, target, np.array([1.0, 2.0, 3.0, 1.5, 2.5]), 4)
    dense = unit.toarray()
    norms = np.linalg.norm(dense, axis=1)
    ref = (dense @ dense.T) / np.outer(norms, norms)
    got = graph.cosine(unit * scale, weighted=True, backend="cpu").toarray()
    np.testing.assert_allclose(got[dense != 0], ref[dense != 0], rtol=1e-12)


@pytest.mark.parametrize("dtype, magnitude", [(np.float64, 1.7e308), (np.float32, 3e38)])
def test_rows_whose_sums_overflow_are_normalised_exactly(dtype, magnitude):
    """jensenshannon and hellinger divide each row by its sum: a row summing beyond the type's range gave an
    infinite sum, zeros and NaN (SciPy's jensenshannon reads it as zeros: 0.589 for two rows of 1.7e308, not 0);
    each row scaled by its own largest value is the same distribution, computed by a float64 formula."""
    X = np.random.default_rng(6).random((5, 4)) + 0.1
    X[1] = 3 * X[0]  # the same distribution: distance 0
    big = (X / X.max(axis=1, keepdims=True) * magnitude).astype(dtype)
    P = X / X.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = P[:, None, :] * np.log(2 * P[:, None, :] / (P[:, None, :] + P[None, :, :]))
    want = {
        "jensenshannon": np.sqrt(np.maximum(terms.sum(-1) + terms.sum(-1).T, 0) / 2),
        "hellinger": np.sqrt(np.maximum(1 - np.sqrt(P[:, None, :] * P[None, :, :]).sum(-1), 0)),
    }
    for metric, reference in want.items():
        for A in (big, sp.csr_matrix(big)):
            got = pairwise_distances(A, metric=metric, backend="cpu")
            np.testing.assert_allclose(got, reference, atol=1e-6 if dtype == np.float32 else 1e-7, err_msg=metric)


GRAPH_MAGNITUDES = [1e-300, 1e-170, 1.0, 1e160, 1e300, 1.79e308]


def _exact_weighted_similarity(name: str, D: np.ndarray, u: int, v: int) -> float:
    """The weighted similarity of u and v in exact rational arithmetic on the float weights (sqrt last)."""
    x, y = [Fraction(float(a)) for a in D[u]], [Fraction(float(b)) for b in D[v]]
    common = [k for k in range(D.shape[0]) if D[u, k] and D[v, k]]
    if name == "cosine":
        c, nu, nv = sum(x[k] * y[k] for k in common), sum(a * a for a in x), sum(b * b for b in y)
        if not (nu and nv and c):
            return 0.0
        square = c * c / (nu * nv)  # its root taken at a scale where the float is normal, then scaled back
        k = (square.denominator.bit_length() - square.numerator.bit_length()) // 2
        return math.ldexp(math.sqrt(float(square * 4**k)), -k)
    c, nu, nv = sum(min(x[k], y[k]) for k in common), sum(x), sum(y)
    denominator = {"jaccard": nu + nv - c, "sorensen": nu + nv, "overlap": min(nu, nv)}[name]
    numerator = 2 * c if name == "sorensen" else c
    return float(numerator / denominator) if denominator else 0.0


@pytest.mark.parametrize("magnitude", [*GRAPH_MAGNITUDES, "mixed"])
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_weighted_graph_similarities_at_any_magnitude_are_the_exact_sums(magnitude, data):
    """Weighted jaccard, sorensen, overlap and cosine at every vertex pair against exact rational sums: weights
    near 1e308 overflowed the sums (jaccard 0, sorensen NaN), near 1e160 cosine's squares (NaN), and from 1e-162
    they vanished (cosine 0); "mixed": each edge of its own magnitude, within a row too."""
    from semiring import graph

    n = data.draw(st.integers(2, 7), label="n")
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    edges = data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=len(pairs), unique=True), label="edges")
    scales = data.draw(
        st.lists(
            st.sampled_from(GRAPH_MAGNITUDES) if magnitude == "mixed" else st.just(magnitude),
            min_size=len(edges),
            max_size=len(edges),
        )
    )
    mantissas = data.draw(st.lists(st.floats(0.5, 1.0), min_size=len(edges), max_size=len(edges)), label="mantissas")
    D = np.zeros((n, n))
    for (u, v), scale, mantissa in zip(edges, scales, mantissas):
        D[u, v] = D[v, u] = mantissa * scale
    A = sp.csr_matrix(D)
    everyone = [(u, v) for u in range(n) for v in range(u, n)]
    for name in ("jaccard", "sorensen", "overlap", "cosine"):
        got = getattr(graph, name)(A, pairs=everyone, weighted=True, backend="cpu")
        want = [_exact_weighted_similarity(name, D, u, v) for u, v in everyone]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-290, err_msg=name)


def test_huge_magnitudes_in_kneighbors():
    from semiring.distances import NearestNeighbors

    X = HUGE_ROWS["overflowing-norms"]
    distances, indices = NearestNeighbors(n_neighbors=1, backend="cpu").fit(X).kneighbors()
    ref = cdist(X, X)
    np.fill_diagonal(ref, np.inf)
    np.testing.assert_allclose(distances[:, 0], ref.min(axis=1))
    np.testing.assert_array_equal(indices[:, 0], ref.argmin(axis=1))


@pytest.mark.parametrize("metric", ["chebyshev", "linf", "cityblock", "euclidean", "minkowski"])
def test_zero_columns_give_scipys_value(metric):
    X, Y = np.zeros((3, 0)), np.zeros((2, 0))
    scipy_name = {"linf": "chebyshev"}.get(metric, metric)
    np.testing.assert_array_equal(pairwise_distances(X, Y, metric=metric, backend="cpu"), cdist(X, Y, scipy_name))


def test_an_empty_reduction_of_a_semiring_is_its_monoids_identity():
    """semiring.pairwise keeps GraphBLAS's meaning: no column, the add monoid's identity (the measure maps it)."""
    X = np.zeros((2, 0))
    assert (semiring.pairwise(X, X, "max_absdiff", backend="cpu") == -np.inf).all()
    assert (semiring.pairwise(X, X, "plus_absdiff", backend="cpu") == 0.0).all()


# The command: nothing lost, conflicting options refused before any file is read, output where asked


def run(argv, capsys) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def matrix_file(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.uniform(0.5, 3.0, size=(30, 12)) * (rng.random((30, 12)) < 0.5)
    path = tmp_path / "x.npy"
    np.save(path, X)
    return path, X


@pytest.fixture
def graph_file(tmp_path):
    G = nx.karate_club_graph()
    path = tmp_path / "e.csv"
    path.write_text("# source,target\n" + "".join(f"{u},{v}\n" for u, v in G.edges))
    return path, G


def test_output_over_the_input_is_refused_and_the_input_kept(matrix_file, tmp_path, capsys, monkeypatch):
    path, _ = matrix_file
    before = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    for output in (path, "x.npy", "./sub/../x.npy", tmp_path / "link.npy"):
        if str(output).endswith("link.npy"):
            (tmp_path / "link.npy").symlink_to(path)
        (tmp_path / "sub").mkdir(exist_ok=True)
        for force in ([], ["--force"]):
            status, _, err = run(["pairwise", path, "-o", output, *force], capsys)
            assert status == 2 and "is an input" in err, err
    assert path.read_bytes() == before


def test_graph_output_over_its_edge_list_is_refused(graph_file, capsys):
    path, _ = graph_file
    before = path.read_bytes()
    status, _, err = run(["graph", "ktruss", path, "-k", 4, "-o", path, "--force"], capsys)
    assert status == 2 and f"{path}: is an input ({path})" in err
    assert path.read_bytes() == before


def test_an_existing_output_is_replaced_only_with_force(matrix_file, tmp_path, capsys):
    path, X = matrix_file
    out = tmp_path / "d.npy"
    out.write_bytes(b"an earlier result")
    status, _, err = run(["pairwise", path, "-o", out], capsys)
    assert status == 2 and f"{out}: exists; add --force to replace it" in err
    assert out.read_bytes() == b"an earlier result"
    status, _, err = run(["pairwise", path, "-o", out, "--force"], capsys)
    assert status == 0, err
    np.testing.assert_allclose(np.load(out), cdist(X, X))


def test_upper_case_output_names_are_written_as_named(matrix_file, tmp_path, capsys):
    path, X = matrix_file
    out = tmp_path / "OUT.NPY"
    status, text, err = run(["pairwise", path, "-o", out], capsys)
    assert status == 0, err
    assert f"wrote {out}" in text and sorted(p.name for p in tmp_path.iterdir()) == ["OUT.NPY", "x.npy"]
    np.testing.assert_allclose(np.load(out), cdist(X, X))


def test_output_to_standard_output_keeps_the_report_apart(matrix_file, capsys):
    path, X = matrix_file
    status, out, err = run(["pairwise", path, "-m", "cityblock", "-o", "-"], capsys)
    assert status == 0, err
    np.testing.assert_allclose(np.loadtxt(StringIO(out), delimiter=","), cdist(X, X, "cityblock"))
    assert "pairwise cityblock: 30 x 30" in err and "wrote standard output" in err
    status, out, err = run(["knn", path, "-k", 2, "-o", "-", "--quiet"], capsys)
    assert status == 0 and err == ""
    table = np.loadtxt(StringIO(out), delimiter=",", skiprows=1)
    assert table.shape == (60, 4) and out.startswith("query,rank,neighbor,distance\n")


def test_quiet_prints_nothing_but_writes(matrix_file, tmp_path, capsys):
    path, X = matrix_file
    out = tmp_path / "d.csv"
    status, text, err = run(["pairwise", path, "-o", out, "--quiet"], capsys)
    assert (status, text, err) == (0, "", "")
    np.testing.assert_allclose(np.loadtxt(out, delimiter=","), cdist(X, X))


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["pairwise", "absent.npy", "-m", "cosine", "-s", "plus_times"],
            "-m/--metric and -s/--semiring are alternatives",
        ),
        (["pairwise", "absent.npy", "-s", "plus_times", "--check"], "--check compares with SciPy's cdist"),
        (["pairwise", "absent.npy", "-s", "nope"], "-s 'nope' is not a built-in semiring; known: "),
        (["pairwise", "absent.npy", "-m", "nope"], "unknown metric 'nope'"),
        (["knn", "absent.npy", "-m", "cosine", "-p", "3"], "-p applies to --metric minkowski, not to cosine"),
        (["graph", "triangles", "absent.txt", "-o", "t.npy"], "--per total gives one number"),
        (["pairwise", "absent.npy", "-o", "out.xls"], "unknown output format '.xls'"),
    ],
)
def test_conflicting_options_are_refused_before_any_file_is_read(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = run(argv, capsys)
    assert status == 2 and message in err and "no such file" not in err, err


# A command's whole footprint (inputs, result, tiles, output copies) is checked from its files' headers, before
# any file is read: a Matrix Market header of 10^7 x 10^7 with three entries asks for a 10^14-entry result.
HUGE = "%%MatrixMarket matrix coordinate real general\n10000000 10000000 3\n1 1 1.0\n5 7 2.0\n9999999 3 1.5\n"
HUGE_GRAPH = "%%MatrixMarket matrix coordinate pattern symmetric\n50000000 50000000 1\n2 1\n"


def _huge_npz(path):  # a compressed SciPy archive: 10^7 x 10^7, three entries
    sp.save_npz(path, sp.coo_matrix(([1.0, 2.0, 3.0], ([0, 4, 9_999_998], [0, 6, 2])), shape=(10**7, 10**7)).tocsr())


@pytest.mark.parametrize(
    "argv, name, write, needs",
    [
        (["pairwise", "FILE"], "huge.mtx", HUGE, "semiring pairwise with the dense result of 10,000,000 x 10,000,000"),
        (["pairwise", "FILE"], "huge.npz", _huge_npz, "semiring pairwise with the dense result of 10,000,000 x 10,"),
        (["knn", "FILE", "-k", "3000"], "huge.mtx", HUGE, "semiring knn with the 10,000,000 x 3,000 neighbours"),
        (["graph", "jaccard", "FILE"], "g.mtx", HUGE_GRAPH, "semiring graph jaccard with the graph of 50,000,000 vert"),
    ],
    ids=["pairwise", "pairwise-npz", "knn", "graph"],
)
def test_a_commands_memory_is_checked_before_its_file_is_read(argv, name, write, needs, tmp_path, capsys, monkeypatch):
    path = tmp_path / name
    path.write_text(write) if isinstance(write, str) else write(path)
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**30)
    monkeypatch.setattr(cli_io, "read_matrix", lambda *a, **k: pytest.fail("the file was read"))
    status, _, err = run([path if a == "FILE" else a for a in argv], capsys)
    assert status == 2 and f"error: {path}: {needs}" in err, err
    assert "checked from the files' headers before reading them" in err and "1.0 GiB is available" in err


def test_an_edge_lists_graph_is_checked_before_the_measure_runs(tmp_path, capsys, monkeypatch):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n30000000 2\n")  # 30,000,001 vertices: their row pointers fit, the measure's copies not
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 2**30)
    monkeypatch.setattr(cli, "_interruptible", lambda *a, **k: pytest.fail("the measure ran"))
    status, _, err = run(["graph", "scan", path], capsys)
    assert status == 2 and f"{path}: semiring graph scan with the measure's temporaries" in err, err


def test_the_tiles_count_beside_the_result(tmp_path, capsys, monkeypatch):
    """A result that fits alone, but not with the tiles the CPU computes it in, is refused before the work; with
    a working memory that leaves room, it runs."""
    X = np.random.default_rng(2).random((300, 4))
    path, out = tmp_path / "x.npy", tmp_path / "d.npy"
    np.save(path, X)
    monkeypatch.setattr(validation, "available_memory_bytes", lambda: 300 * 300 * 8 + 200_000)
    status, _, err = run(["pairwise", path, "--backend", "cpu"], capsys)
    assert status == 2 and "and the tiles (1.4 MiB) needs" in err, err
    status, _, err = run(["pairwise", path, "--backend", "cpu", "--working-memory", "0.05", "-o", out], capsys)
    assert status == 0, err
    np.testing.assert_allclose(np.load(out), cdist(X, X), rtol=1e-12, atol=1e-12)


def test_the_summary_and_a_neighbours_csv_are_made_a_slice_at_a_time(monkeypatch):
    """Sliced (2 entries, 1 query row a slice), they give what NumPy gives on the whole arrays."""
    D = np.array([[np.inf, 3.0, 1.0], [np.nan, 7.0, -2.0], [5.0, 0.5, 4.0]])
    finite = D[np.isfinite(D)]
    assert cli._summary(D) == f"min -2, median {np.median(finite):.4g}, max 7"
    monkeypatch.setattr(cli, "SUMMARY_ENTRIES", 4)  # 9 entries: every 3rd is the median's sample (inf, nan: not)
    assert cli._summary(D) == f"min -2, median {np.median([5.0]):.4g} (a sample: one entry in 3), max 7"
    assert cli._summary(np.full((2, 2), np.nan)) == ""
    distances, indices = np.array([[0.5, 1.25], [2.0, 3.0], [0.1, 0.2]]), np.array([[2, 1], [0, 2], [1, 0]])
    monkeypatch.setattr(cli_io, "CSV_ROWS", 2)
    out = StringIO()
    cli_io._csv_neighbors(out, distances, indices)
    expected = [f"{q},{r + 1},{indices[q, r]},{float(distances[q, r])!r}" for q in range(3) for r in range(2)]
    assert out.getvalue().splitlines() == ["query,rank,neighbor,distance", *expected]


@pytest.mark.parametrize("rows, need", [(0, "at least 2 rows when every row is a query"), (1, "at least 2 rows")])
def test_knn_on_too_few_rows_says_so(tmp_path, capsys, rows, need):
    path = tmp_path / "x.npy"
    np.save(path, np.ones((rows, 3)))
    status, _, err = run(["knn", path], capsys)
    assert status == 2 and f"knn needs data of {need}" in err and f"the data have {rows}" in err, err


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-3", "lots"])
def test_working_memory_on_the_command_line_must_be_finite(matrix_file, value, capsys):
    path, _ = matrix_file
    with pytest.raises(SystemExit) as exit_:
        main(["pairwise", str(path), "--working-memory", value])
    assert exit_.value.code == 2 and "--working-memory" in capsys.readouterr().err


def test_traceback_keeps_the_exit_status_of_an_error(tmp_path, capsys):
    status, _, err = run(["--traceback", "pairwise", tmp_path / "absent.npy"], capsys)
    assert status == 2  # not 1, the status of a failed --check
    assert "Traceback (most recent call last)" in err and err.rstrip().endswith("absent.npy: no such file")


def test_check_does_not_count_scipys_own_nan_as_a_difference(tmp_path, capsys):
    X = np.array([[1.0, 0.0], [843.5, 0.0], [1.0, 2.0], [0.5, 3.0]])
    assert np.isnan(cdist(X, X, "jensenshannon")).any()  # SciPy: rounding below 0 under its square root
    path = tmp_path / "p.npy"
    np.save(path, X)
    status, out, err = run(["pairwise", path, "-m", "jensenshannon", "--check"], capsys)
    assert status == 0, out + err
    assert "yes (2 entries not compared: SciPy gives NaN where the result is a number)" in out
    status, out, err = run(["knn", path, "-k", 1, "-m", "jensenshannon", "--check"], capsys)
    assert status == 0, out + err
    assert "yes (2 rows not compared" in out


GRAPH_ORACLES = {
    "jaccard": lambda c, du, dv: c / (du + dv - c),
    "sorensen": lambda c, du, dv: 2 * c / (du + dv),
    "overlap": lambda c, du, dv: c / min(du, dv),
    "cosine": lambda c, du, dv: c / np.sqrt(du * dv),
    "scan": lambda c, du, dv: (c + 2) / np.sqrt((du + 1) * (dv + 1)),
    "common-neighbors": lambda c, du, dv: c,
}


@pytest.mark.parametrize("measure", sorted(GRAPH_ORACLES))
def test_every_graph_similarity_on_the_command_line_equals_networkx_sets(measure, graph_file, tmp_path, capsys):
    path, G = graph_file
    out = tmp_path / "s.npz"
    status, _, err = run(["graph", measure, path, "-o", out], capsys)
    assert status == 0, err
    S = sp.load_npz(out).toarray()
    expected = np.zeros_like(S)
    for u, v in G.edges:
        c = len(set(G[u]) & set(G[v]))
        expected[u, v] = expected[v, u] = GRAPH_ORACLES[measure](c, G.degree(u), G.degree(v))
    np.testing.assert_allclose(S, expected, rtol=1e-12)


def test_every_subcommand_and_option_has_help():
    parser = build_parser()
    metric_help = None
    pending = [("semiring", parser)]
    while pending:
        name, p = pending.pop()
        assert p.description or name == "semiring", f"{name} has no description"
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice, sub in action.choices.items():
                    pending.append((f"{name} {choice}", sub))
                    assert any(c.dest == choice for c in action._choices_actions), f"{name} {choice} has no help"
                continue
            assert action.help and action.help != argparse.SUPPRESS, f"{name} {action.option_strings} has no help"
            if "--metric" in action.option_strings:
                metric_help = action.help
    assert metric_help is not None
    assert all(m in metric_help for m in METRICS), "the -m help lists every metric name"


# Constants in IEEE arithmetic: the numba form the CPU engine runs agrees with NumPy float64


def test_constant_arithmetic_in_the_numba_form_is_ieee():
    from numba import njit

    from semiring.kernels.cpu import jit

    sources = ["x * (1/0)", "x * y * 10.0 ** 400", "x * y * (-8) ** (1/3)", "x * (0.0 ** -1)", "x * log(0) + y"]
    expected = [np.inf, np.inf, np.nan, np.inf, -np.inf]  # NumPy float64: 1/0, overflow, (-8)**(1/3), 0**-1, log 0
    for source, want in zip(sources, expected, strict=True):
        # the CPU engine's rendering of the op, as its kernel modules embed it (jit.generate)
        namespace = {"njit": njit, "np": np, "JIT": {**jit.JIT, "cache": False}}
        exec(jit.scalar_source("op", semiring.binary_op(source).tree, ("x", "y")), namespace)  # noqa: S102 - our own text
        f = namespace["op"]

        @njit
        def call(x, y, f=f):
            return f(x, y, np.zeros(0))

        got = call(1.0, 2.0)
        assert got == want or (np.isnan(got) and np.isnan(want)), (source, got)


def test_an_error_without_a_message_still_says_what_it_was(matrix_file, capsys, monkeypatch):
    from semiring.cli import commands as cli

    path, _ = matrix_file

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(cli, "pairwise_distances", exhausted)
    status, _, err = run(["pairwise", path], capsys)
    assert status == 2 and err == "semiring: error: MemoryError (no message)\n"


# Thread safety: calls from several threads at once, kernels compiled concurrently on first use


def test_concurrent_calls_from_threads_each_get_their_own_right_answer():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    jobs = []
    for k, metric in enumerate(["canberra", "braycurtis", "canberra", "braycurtis", "cityblock", "cosine"] * 2):
        X = sp.random(40 + k, 9, density=0.4, format="csr", random_state=rng)
        Y = sp.random(17, 9, density=0.4, format="csr", random_state=rng)
        jobs.append((X, Y, metric))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: pairwise_distances(job[0], job[1], metric=job[2], backend="cpu"), jobs))
    for (X, Y, metric), D in zip(jobs, results, strict=True):
        np.testing.assert_allclose(D, cdist(X.toarray(), Y.toarray(), metric), rtol=1e-10, atol=1e-12)
