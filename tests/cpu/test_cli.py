"""The ``semiring`` command, its file formats and the bundled dataset, against independent oracles.

kNN against scikit-learn's brute-force ``NearestNeighbors``, distances against
SciPy's ``cdist``, graph measures against networkx, TF-IDF against
scikit-learn's ``TfidfVectorizer``.  The CLI runs in-process through
``main(argv)``, once as the installed console script.
"""

from __future__ import annotations

import gzip
import pathlib
import re
import shutil
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.distance import cdist
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.neighbors import NearestNeighbors as SkNearestNeighbors

from semiring.cli import datasets, io, main


def run(argv, capsys) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def data():
    """Rows without ties: 60 x 25, about 30 % dense, no empty row."""
    rng = np.random.default_rng(7)
    X = sp.random(60, 25, density=0.3, format="csr", random_state=rng, data_rvs=lambda n: rng.uniform(0.5, 5.0, n))
    X = X + sp.csr_matrix((np.ones(60), (np.arange(60), rng.integers(0, 25, 60))), shape=X.shape)
    Q = sp.random(7, 25, density=0.4, format="csr", random_state=rng) + sp.eye(7, 25, format="csr")
    return X.tocsr(), Q.tocsr()


def save(M, path):
    """M in the format the path's extension names, written by SciPy/NumPy, not by the code under test."""
    name = str(path)
    if name.endswith(".mtx.gz"):
        with gzip.open(name, "wb") as f:
            scipy.io.mmwrite(f, M)
    elif name.endswith(".mtx"):
        scipy.io.mmwrite(name, M)
    elif name.endswith(".sparse.npz"):
        sp.save_npz(name, M)
    elif name.endswith(".npz"):
        np.savez(name, matrix=M.toarray())
    else:
        np.save(name, M.toarray())
    return path


# The bundled dataset


def test_tfidf_equals_scikit_learn():
    docs = [["graph", "edge", "edge", "vertex"], ["edge", "weight"], ["graph", "vertex", "vertex", "vertex"], ["solo"]]
    X, vocabulary = datasets.tfidf(docs, min_df=1, max_df=1.0)
    ref = TfidfVectorizer(analyzer=lambda d: d, vocabulary=vocabulary, sublinear_tf=True).fit_transform(docs)
    assert vocabulary == sorted({w for d in docs for w in d})
    np.testing.assert_allclose(X.toarray(), ref.toarray(), rtol=1e-12)


def test_tfidf_vocabulary_bounds():
    docs = [["a1", "common"], ["b1", "common", "pair"], ["c1", "common", "pair"]]
    X, vocabulary = datasets.tfidf(docs, min_df=2, max_df=0.7)
    assert vocabulary == ["pair"]  # "common" is in 3 of 3 (> 70 %), the others in one
    assert X.shape == (3, 1) and X[0].nnz == 0


def test_stdlib_reading_without_imports(tmp_path):
    """Names, skipped folders and private modules, docstrings at every depth, broken files tolerated."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "test").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('"""Package doc."""\nraise SystemExit("imported!")\n')
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "mod.py").write_text(
        '"""Module doc."""\nif True:\n    class C:\n        """Class doc."""\n'
        '        async def m(self):\n            """Method doc."""\n'
        "try:\n    pass\nexcept Exception:\n    def f():\n        'Handler doc.'\n"
    )
    (tmp_path / "nopkg").mkdir()  # no __init__.py: not a package
    (tmp_path / "nopkg" / "x.py").write_text('"""Hidden."""')
    (tmp_path / "test" / "__init__.py").write_text('"""Tests."""')
    (tmp_path / "_private.py").write_text('"""Private."""')
    (tmp_path / "broken.py").write_text("def (:\n")
    files = datasets.module_files(str(tmp_path))
    assert list(files) == ["broken", "pkg", "pkg.sub", "pkg.sub.mod"]
    assert datasets.docstrings(files["pkg.sub.mod"]).split("\n") == [
        "Module doc.",
        "Class doc.",
        "Method doc.",
        "Handler doc.",
    ]
    assert datasets.docstrings(files["broken"]) == ""
    assert datasets.tokens("The JSON encoder, for the 2 x3 json.dumps") == ["json", "encoder", "x3", "json", "dumps"]


@pytest.fixture(scope="module")
def corpus_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("corpus")


@pytest.fixture(scope="module")
def corpus(corpus_cache):
    return datasets.stdlib_tfidf(cache=corpus_cache)  # built, and kept in the folder


def same_corpus(a, b) -> bool:
    return a.names == b.names and a.vocabulary == b.vocabulary and a.X.shape == b.X.shape and (a.X != b.X).nnz == 0


def test_stdlib_corpus_is_deterministic_and_normalised(corpus, corpus_cache, monkeypatch):
    assert same_corpus(corpus, datasets.stdlib_tfidf())  # built again, without the cache
    assert len(corpus.names) > 100 and "json" in corpus.names and not any(n.startswith("test") for n in corpus.names)
    np.testing.assert_allclose(sp.linalg.norm(corpus.X, axis=1)[corpus.X.getnnz(axis=1) > 0], 1.0)
    monkeypatch.setattr(datasets, "docstrings", None)  # a second call reads the kept corpus: no file is parsed
    again = datasets.stdlib_tfidf(cache=corpus_cache)
    assert same_corpus(corpus, again) and again.X.dtype == np.float64 and again.X.indices.dtype == np.int32


def test_stdlib_corpus_cache_follows_the_sources(tmp_path):
    """A changed source file makes a new corpus; the cache folder holds whole files only (written atomically)."""
    root, cache = tmp_path / "lib", tmp_path / "cache"
    root.mkdir()
    texts = {"a": "red", "b": "red", "c": "", "d": "", "e": "blue"}  # a word is a column when in 2 of 5 documents

    def write(name, extra):
        (root / f"{name}.py").write_text(f'"""{extra} {" ".join(f"{name}word{i}" for i in range(25))}"""\n')

    for name, extra in texts.items():
        write(name, extra)
    first = datasets.stdlib_tfidf(str(root), cache=cache)
    assert first.vocabulary == ["red"] and same_corpus(first, datasets.stdlib_tfidf(str(root), cache=cache))
    write("c", "blue")
    changed = datasets.stdlib_tfidf(str(root), cache=cache)
    assert changed.vocabulary == ["blue", "red"]
    assert same_corpus(changed, datasets.stdlib_tfidf(str(root)))  # as built without the cache
    kept = sorted(cache.iterdir())
    assert len(kept) == 2 and all(p.name.startswith("stdlib_tfidf_") and p.suffix == ".npz" for p in kept)
    for p in kept:
        p.write_bytes(p.read_bytes()[:100])  # a damaged file is built again, not an error
    assert same_corpus(changed, datasets.stdlib_tfidf(str(root), cache=cache))


def test_stdlib_corpus_refuses_an_empty_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no standard library sources"):
        datasets.stdlib_tfidf(str(tmp_path))


# knn


def test_knn_bundled_default(corpus, tmp_path, capsys, monkeypatch):
    """The README's first command: neighbours from the bundled data, equal to scikit-learn's brute force."""
    monkeypatch.setattr(datasets, "stdlib_tfidf", lambda **_: corpus)  # built once for the module (and tested above)
    out = tmp_path / "nn.npz"
    status, text, err = run(["knn", "-o", out], capsys)
    assert status == 0, err
    assert "standard library" in text and "backend: cpu" in text and "check against scipy cdist" in text
    assert "json.encoder" in text.split("json ")[1].split("\n")[0]  # json's nearest modules are its own parts
    assert text.count(": yes") == 1
    ref_dist, _ = SkNearestNeighbors(n_neighbors=5, metric="cosine", algorithm="brute").fit(corpus.X).kneighbors()
    with np.load(out) as saved:
        np.testing.assert_allclose(saved["distances"], ref_dist, rtol=1e-6, atol=1e-9)
        got = cdist(corpus.X.toarray(), corpus.X.toarray(), "cosine")[
            np.arange(len(corpus.names))[:, None], saved["indices"]
        ]
        np.testing.assert_allclose(got, ref_dist, rtol=1e-6, atol=1e-9)  # each index is at the distance given


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz", ".sparse.npz", ".npz", ".npy"])
def test_knn_reads_every_format(data, tmp_path, capsys, suffix):
    X, _ = data
    path = save(X, tmp_path / f"data{suffix}")
    out = tmp_path / "nn.npz"
    status, text, err = run(["knn", path, "-k", 4, "-o", out, "--check"], capsys)
    assert status == 0, err
    ref_dist, ref_ind = SkNearestNeighbors(n_neighbors=4, metric="cosine", algorithm="brute").fit(X).kneighbors()
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["indices"], ref_ind)
        np.testing.assert_allclose(saved["distances"], ref_dist, rtol=1e-9, atol=1e-12)
    assert "check against scipy cdist (float64, brute force) for the first rows: yes" in text


@pytest.mark.parametrize("suffix", [".npz", ".npy", ".csv"])
def test_knn_queries_and_every_output(data, tmp_path, capsys, suffix):
    X, Q = data
    out = tmp_path / f"nn{suffix}"
    args = ["knn", save(X, tmp_path / "x.mtx"), "-q", save(Q, tmp_path / "q.npy"), "-k", 3, "-m", "euclidean"]
    status, _, err = run(args + ["-o", out], capsys)
    assert status == 0, err
    ref_dist, ref_ind = SkNearestNeighbors(n_neighbors=3, algorithm="brute").fit(X).kneighbors(Q)
    if suffix == ".npz":
        with np.load(out) as saved:
            dist, ind = saved["distances"], saved["indices"]
    elif suffix == ".npy":
        table = np.load(out)
        dist, ind = table["distance"], table["index"]
    else:
        table = np.loadtxt(out, delimiter=",", skiprows=1)
        assert out.read_text().startswith("query,rank,neighbor,distance\n")
        np.testing.assert_array_equal(table[:, :2], [[q, r] for q in range(len(ref_ind)) for r in (1, 2, 3)])
        ind, dist = table[:, 2].reshape(-1, 3), table[:, 3].reshape(-1, 3)
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-12)


def test_knn_empty_rows_and_explicit_zeros(tmp_path, capsys):
    """An empty row (cosine NaN to everything) and a stored zero; the check and scikit-learn agree with the output."""
    X = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 0], [3, 1, 0], [0, 2, 2], [1, 1, 1]]))
    X.data[X.data == 2] = 0  # stored zeros: the pattern stays, the values go
    out = tmp_path / "nn.npz"
    status, text, err = run(["knn", save(X, tmp_path / "x.sparse.npz"), "-k", 2, "--check", "-o", out], capsys)
    assert status == 0, err
    assert "for the first rows: yes" in text
    ref = cdist(X.toarray(), X.toarray(), "cosine")[~np.eye(5, dtype=bool)].reshape(5, 4)  # not its own neighbour
    with np.load(out) as saved:
        np.testing.assert_allclose(saved["distances"], np.sort(ref, axis=1)[:, :2], rtol=1e-12, equal_nan=True)


# pairwise


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv"])
def test_pairwise_metric_and_outputs(data, tmp_path, capsys, suffix):
    X, Q = data
    out = tmp_path / f"d{suffix}"
    argv = ["pairwise", save(Q, tmp_path / "q.npz"), save(X, tmp_path / "x.sparse.npz"), "-m", "minkowski", "-p", 3]
    status, text, err = run(argv + ["-o", out, "--check"], capsys)
    assert status == 0, err
    D = {".npy": np.load, ".npz": lambda p: np.load(p)["distance"], ".csv": lambda p: np.loadtxt(p, delimiter=",")}[
        suffix
    ](out)
    np.testing.assert_allclose(D, cdist(Q.toarray(), X.toarray(), "minkowski", p=3), rtol=1e-10)
    assert "pairwise minkowski: 7 x 60" in text and "first 7 rows: yes" in text


@pytest.mark.parametrize(
    "argv, verdict",
    [
        (["-m", "manhattan"], "yes"),  # an alias: SciPy's name comes from the measure's row
        (["-m", "dice"], "yes"),  # a boolean measure: SciPy compares the nonzero patterns
        (["-m", "minkowski", "-p", "inf"], "yes"),  # the row's rewrite: chebyshev
        (["-m", "dot"], "not compared (SciPy has no dot)"),
        (["-m", "seuclidean"], "yes"),  # the default V from all rows, not from the one-row warm-up
    ],
)
def test_pairwise_check_uses_the_rows_scipy_name(data, tmp_path, capsys, argv, verdict):
    X, Q = data
    files = [save(Q, tmp_path / "q.npz"), save(X, tmp_path / "x.npz")]
    status, text, err = run(["pairwise", *files, *argv, "--check"], capsys)
    assert status == 0, err
    assert text.rstrip().endswith(f"on the first 7 rows: {verdict}")


def test_knn_seuclidean_default_v_is_the_fitted_rows_and_checks(data, tmp_path, capsys):
    """The estimator's default V (the fitted rows' variances) is the one SciPy is given by --check."""
    X, _ = data
    status, text, err = run(["knn", save(X, tmp_path / "x.npz"), "-m", "seuclidean", "-k", "3", "--check"], capsys)
    assert status == 0, err
    assert "check against scipy cdist (float64, brute force) for the first rows: yes" in text


def test_options_come_from_the_declarations():
    """-p is minkowski's declared parameter; the graph options are the library's vocabularies."""
    from semiring.cli.commands import FLAGGED_PARAMS, build_parser
    from semiring.graph import measures as graph

    assert {name: (p.flag, takers) for name, (p, takers) in FLAGGED_PARAMS.items()} == {"p": ("-p", ("minkowski",))}
    args = build_parser().parse_args(["pairwise", "x.npz", "-p", "3"])
    assert args.metric_param_p == 3.0
    subcommands = build_parser()._subparsers._group_actions[0].choices
    triangles = subcommands["graph"]._subparsers._group_actions[0].choices["triangles"]
    choices = {a.dest: a.choices for a in triangles._actions if a.choices}
    assert tuple(choices["per"]) == graph.PER and tuple(choices["order"]) == graph.ORDERS


def test_pairwise_semiring_of_one_matrix(data, tmp_path, capsys):
    X, _ = data
    out = tmp_path / "c.npy"
    status, _, err = run(["pairwise", save(X, tmp_path / "x.mtx"), "-s", "plus_times", "-o", out], capsys)
    assert status == 0, err
    np.testing.assert_allclose(np.load(out), (X @ X.T).toarray(), rtol=1e-12)


# graph

EDGES = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 2), (1, 3), (5, 6), (6, 7)]


@pytest.fixture
def edge_file(tmp_path):
    """EDGES, one-based, mixed separators, comments, a duplicate in the other direction and a self-loop."""
    lines = ["% a small graph", "# source target"] + [
        f"{u + 1},{v + 1}" if u % 2 else f"{u + 1}\t {v + 1}" for u, v in EDGES
    ]
    path = tmp_path / "g.edges"
    path.write_text("\n".join(lines + ["2 1", "4 4", ""]))
    return path


def nx_graph():
    G = nx.Graph(EDGES)
    return G


def sparse_of(values: dict, n: int) -> np.ndarray:
    M = np.zeros((n, n))
    for (u, v), x in values.items():
        M[u, v] = M[v, u] = x
    return M


def test_graph_triangles(edge_file, tmp_path, capsys):
    G = nx_graph()
    status, text, err = run(["graph", "triangles", edge_file, "--one-based"], capsys)
    assert status == 0, err
    assert f"triangles: {sum(nx.triangles(G).values()) // 3} triangles in" in text
    out = tmp_path / "tv.csv"
    status, _, err = run(["graph", "triangles", edge_file, "--one-based", "--per", "vertex", "-o", out], capsys)
    assert status == 0, err
    table = np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.int64)
    assert dict(table.tolist()) == nx.triangles(G)
    out = tmp_path / "te.npz"
    status, _, err = run(
        ["graph", "triangles", edge_file, "--one-based", "--per", "edge", "--order", "id", "-o", out], capsys
    )
    assert status == 0, err
    per_edge = {(u, v): len(set(G[u]) & set(G[v])) for u, v in G.edges}
    np.testing.assert_array_equal(sp.load_npz(out).toarray(), sparse_of(per_edge, 8))


def test_graph_jaccard_as_edge_list(edge_file, tmp_path, capsys):
    out = tmp_path / "j.csv"
    status, _, err = run(["graph", "jaccard", edge_file, "--one-based", "-o", out], capsys)
    assert status == 0, err
    ref = {(u, v): j for u, v, j in nx.jaccard_coefficient(nx_graph(), list(nx_graph().edges))}
    J = io.read_edge_list(out)  # a sparse result in .csv is an edge list; a 0 weight stays an edge
    np.testing.assert_allclose(J.toarray(), sparse_of(ref, 8), rtol=1e-15)
    assert J.nnz == 2 * len(EDGES)


def test_graph_ktruss_and_truss_numbers(edge_file, tmp_path, capsys):
    G = nx_graph()
    A = nx.to_scipy_sparse_array(G, nodelist=range(8), format="csr")
    path = save(sp.csr_matrix(A), tmp_path / "g.mtx")
    out = tmp_path / "k.mtx"
    status, text, err = run(["graph", "ktruss", path, "-k", 3, "-o", out], capsys)
    assert status == 0, err
    truss3 = nx.k_truss(G, 3)
    assert set(zip(*sp.triu(scipy.io.mmread(out)).nonzero())) == {tuple(sorted(e)) for e in truss3.edges}
    assert f"keeps {truss3.number_of_edges()} edges on {truss3.number_of_nodes()} vertices" in text
    out = tmp_path / "t.npy"
    status, _, err = run(["graph", "truss", edge_file, "--one-based", "-o", out], capsys)
    assert status == 0, err
    number = {tuple(sorted(e)): max(k for k in range(2, 6) if nx.k_truss(G, k).has_edge(*e)) for e in G.edges}
    np.testing.assert_array_equal(np.load(out), sparse_of(number, 8))


def test_graph_weighted_jaccard_normalizes_a_matrix(tmp_path, capsys):
    """A directed, weighted matrix with a self-loop: --normalize symmetrises it (larger weight) and drops the loop."""
    W = np.array([[5.0, 2, 0], [0, 0, 3], [1, 0, 0]])
    path = save(sp.csr_matrix(W), tmp_path / "w.npy")
    status, _, err = run(["graph", "jaccard", path], capsys)
    assert status == 2 and "w.npy" in err and "Traceback" not in err
    out = tmp_path / "j.npz"
    status, _, err = run(["graph", "jaccard", path, "--normalize", "--weighted", "-o", out], capsys)
    assert status == 0, err
    S = np.maximum(W, W.T) * (1 - np.eye(3))  # [[0,2,1],[2,0,3],[1,3,0]]
    ref = {(u, v): np.minimum(S[u], S[v]).sum() / np.maximum(S[u], S[v]).sum() for u, v in [(0, 1), (1, 2), (0, 2)]}
    np.testing.assert_allclose(sp.load_npz(out).toarray(), sparse_of(ref, 3), rtol=1e-12)


# io


@st.composite
def edge_lists(draw):
    n = draw(st.integers(1, 6))
    vertex = st.integers(0, n - 1)
    edges = draw(st.lists(st.tuples(vertex, vertex, st.integers(0, 9)), min_size=1, max_size=12))
    weighted = draw(st.booleans())
    separator = draw(st.sampled_from([" ", "\t", ",", " , ", "  "]))
    one_based = draw(st.booleans())
    return edges, weighted, separator, one_based


@given(edge_lists())
def test_edge_list_reading(tmp_path_factory, case):
    edges, weighted, separator, one_based = case
    offset = int(one_based)
    lines = [separator.join(map(str, (u + offset, v + offset) + ((w,) if weighted else ()))) for u, v, w in edges]
    path = tmp_path_factory.mktemp("edges") / "g.txt"
    path.write_text("# comment\n" + "\n".join(lines) + "\n")
    n = max(max(u, v) for u, v, _ in edges) + 1
    expected = np.zeros((n, n))
    stored = np.zeros((n, n), dtype=bool)
    for u, v, w in edges:  # the rule, one edge at a time: undirected, largest weight, no self-loops
        if u != v:
            value = w if weighted else 1
            expected[u, v] = expected[v, u] = max(expected[u, v], value) if stored[u, v] else value
            stored[u, v] = stored[v, u] = True
    A = io.read_edge_list(path, one_based=one_based)
    assert A.shape == (n, n)
    np.testing.assert_array_equal(A.toarray(), expected)
    assert A.nnz == stored.sum()  # a weight of 0 is still an edge


@pytest.mark.parametrize("suffix", [".npz", ".npy", ".mtx", ".csv"])
def test_write_array_round_trips(tmp_path, suffix):
    M = sp.csr_matrix(np.array([[0.0, 1.5, 0.0], [2.0, 0.0, 1e-300], [0.0, 0.0, 0.0]]))
    path = tmp_path / f"m{suffix}"
    io.write_array(path, M, "value")
    if suffix == ".csv":  # row,col,value lines under a '#' header
        assert path.read_text().startswith("# row,col,value\n")
        rows, cols, values = np.loadtxt(path, delimiter=",").T
        back = sp.csr_matrix((values, (rows.astype(int), cols.astype(int))), shape=M.shape)
    else:
        back = io.read_matrix(path)
    np.testing.assert_array_equal(back.toarray(), M.toarray())


def test_write_dense_vectors_and_matrices(tmp_path):
    v = np.array([3, 0, 7])
    io.write_array(tmp_path / "v.csv", v, "triangles")
    assert (tmp_path / "v.csv").read_text() == "index,triangles\n0,3\n1,0\n2,7\n"
    D = np.array([[0.1, 1 / 3], [np.nan, np.inf]])
    io.write_array(tmp_path / "d.csv", D, "distance")
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "d.csv", delimiter=","), D)
    io.write_array(tmp_path / "d.npz", D, "distance")
    np.testing.assert_array_equal(np.load(tmp_path / "d.npz")["distance"], D)
    np.testing.assert_array_equal(io.read_matrix(tmp_path / "d.npz").toarray(), D)


BAD_FILES = {
    "missing.mtx": (None, "no such file"),
    "data.xyz": ("1 2\n", "unknown matrix format '.xyz'"),
    "banner.mtx": ("1 2 3\n", "not a valid Matrix Market file"),
    "bounds.mtx": ("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n", "line 3: entry (3, 1) is not"),
    "short.mtx": ("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n", "declares 2 entries, the file"),
    "complex.mtx": ("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 2\n", "complex values are not"),
    "text.npz": ("not a zip", "not a NumPy/SciPy .npz file"),
    "text.npy": ("not numpy", "not a NumPy .npy file"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_matrix_files_name_the_file(tmp_path, capsys, name):
    content, problem = BAD_FILES[name]
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    status, out, err = run(["knn", path], capsys)
    assert status == 2
    assert err.startswith(f"semiring: error: {path}: ") and problem in err and err.count("\n") == 1
    assert out == ""


def test_bad_arrays_name_the_file(tmp_path, capsys):
    cases = {
        "vector.npy": (lambda p: np.save(p, np.ones(3)), "expected a 2-D matrix, found an array of shape (3,)"),
        "strings.npy": (lambda p: np.save(p, np.array([["a"]])), "expected real numbers"),
        "objects.npy": (
            lambda p: np.save(p, np.array([[{}]], dtype=object), allow_pickle=True),
            "holds Python objects (pickles), which are never loaded",
        ),
        "two.npz": (lambda p: np.savez(p, a=np.ones((2, 2)), b=np.ones((2, 2))), "holds 2: a, b"),
        "cut.npz": (lambda p: p.write_bytes(b"PK\x03\x04 truncated"), "damaged or unsupported .npz"),
    }
    for name, (make, problem) in cases.items():
        path = tmp_path / name
        make(path)
        status, _, err = run(["pairwise", path], capsys)
        assert status == 2 and err.startswith(f"semiring: error: {path}: ") and problem in err, (name, err)


def test_bad_graph_files_name_the_file(tmp_path, capsys):
    cases = {
        "rect.mtx": ("%%MatrixMarket matrix coordinate pattern general\n2 3 1\n1 3\n", "must be square, found 2 x 3"),
        "letters.txt": ("0 1\n1 b\n", "line 2: not a number in '1 b'"),
        "four.txt": ("0 1 1 1\n", "line 1: expected 'source target [weight]', found 4 fields"),
        "mixed.txt": ("0 1\n1 2 5\n", "line 2: 3 fields where the lines before have 2"),
        "float.txt": ("0 1.5\n", "vertex ids must be integers"),
        "negative.txt": ("0 -1\n", "vertex ids must be >= 0"),
        "empty.txt": ("# nothing\n\n", "holds no edges"),
        "binary.txt": (b"\xff\xfe\x00", "not UTF-8 text"),
        "asym.mtx": ("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n", "symmetric"),
    }
    for name, (content, problem) in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        status, _, err = run(["graph", "triangles", path], capsys)
        assert status == 2 and str(path) in err and problem in err and "Traceback" not in err, (name, err)
    status, _, err = run(["graph", "triangles", tmp_path / "negative.txt", "--one-based"], capsys)
    assert status == 2 and "vertex ids must be >= 1 (one-based ids)" in err


def test_bad_arguments_are_refused_before_work(data, tmp_path, capsys):
    X, Q = data
    x = save(X, tmp_path / "x.npz")
    q = save(Q[:, :5], tmp_path / "narrow.npz")
    cases = [
        (["knn", x, "-o", tmp_path / "out.xls"], f"{tmp_path / 'out.xls'}: unknown output format '.xls'"),
        (["knn", x, "-o", tmp_path / "nowhere" / "o.npz"], "cannot write: folder"),
        (["knn", x, "-k", 60], "-k must be between 1 and 59 for 60 rows"),
        (["knn", x, "-m", "nope"], "unknown metric 'nope'"),
        (["knn", x, "-m", "cosine", "-p", 3], "-p applies to --metric minkowski, not to cosine"),
        (["pairwise", x, "-s", "plus_times", "-p", 3], "-p applies to --metric minkowski, not to a semiring"),
        (
            ["pairwise", x, "-m", "minkowski", "-p", -1],
            "p must be > 0 and <= 1024, or inf for minkowski (p = 1 gives cityblock; p = 2 gives euclidean; p = inf gives chebyshev)",
        ),
        (["knn", "-q", x], "--queries needs a data file"),
        (["knn", x, "-q", q], f"(data = {x}, queries = {q})"),
        (["knn", x, "--backend", "cuda"], "backend='cuda' cannot run"),
        (["pairwise", x, "-s", "no_such"], "built-in"),
        (["graph", "triangles", x, "-o", tmp_path / "t.npy"], "--per total gives one number"),
        (["graph", "ktruss", tmp_path / "none.txt", "-k", 3], "none.txt: no such file"),
    ]
    for argv, message in cases:
        status, _, err = run(argv, capsys)
        assert status == 2 and message in err and err.count("\n") == 1, (argv, err)


def test_info(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEMIRING_CACHE_DIR", str(tmp_path))
    (tmp_path / "abc.cubin").write_bytes(b"x" * 2048)
    status, out, _ = run(["info"], capsys)
    assert status == 0
    assert "backend='auto' runs on: cpu" in out or "backend='auto' runs on: cuda" in out
    assert f"kernel cache: {tmp_path} (1 compiled kernels" in out and "$SEMIRING_CACHE_DIR" in out


def test_console_script_reports_errors_without_traceback(tmp_path):
    """The installed entry point: exit status 2 and one line on stderr."""
    script = shutil.which("semiring")
    assert script, "the console script is missing: python -m pip install -e ."
    bad = tmp_path / "corrupt.mtx"
    bad.write_text("%%MatrixMarket matrix coordinate real general\n2 2 5\n1 1 1\n")
    result = subprocess.run([script, "knn", str(bad)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith(f"semiring: error: {bad}: the header declares 5 entries, the file lists 1")
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_failed_check_exits_1(data, tmp_path, capsys, monkeypatch):
    """The check compares with SciPy; an oracle that disagrees must fail the command."""
    from semiring.cli import commands

    X, _ = data
    x = save(X, tmp_path / "x.npz")
    honest = commands.scipy_reference
    monkeypatch.setattr(commands, "scipy_reference", lambda *a: honest(*a) + 0.5)
    status, out, _ = run(["knn", x, "--check"], capsys)
    assert status == 1 and f"for the first rows: NO ({min(64, X.shape[0])} of" in out
    status, out, _ = run(["pairwise", x, "-m", "cosine", "--check"], capsys)
    assert status == 1 and "first 60 rows: NO (60 of 60 rows differ)" in out


# The documentation site

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_quickstart_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "quickstart.md").read_text(), re.DOTALL)
    assert blocks
    namespace = {}
    exec(compile("\n".join(blocks), "quickstart.md", "exec"), namespace)  # noqa: S102 - our own docs
    G = nx.from_scipy_sparse_array(namespace["A"])
    assert namespace["triangles"] == sum(nx.triangles(G).values()) // 3
    assert namespace["dist"].shape == (100, 10) and namespace["D"].shape == (100, 2000)


def test_docs_site_pages_and_images_exist():
    """Every page in mkdocs.yml exists, every docs page is in it, every image a page shows exists."""
    config = (ROOT / "mkdocs.yml").read_text()
    nav = re.findall(r":\s*([\w-]+\.md)\s*$", config, re.MULTILINE)
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(nav) == pages
    for page in pages:
        for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (ROOT / "docs" / page).read_text()):
            assert (ROOT / "docs" / image).is_file(), (page, image)


def test_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="the docs extra is not installed: pip install -e '.[docs]'")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "cli" / "index.html").is_file()
