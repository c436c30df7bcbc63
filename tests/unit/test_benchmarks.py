"""The benchmark tool's own parts that need no GPU: its oracles catch wrong answers, the rows each peer is
given are the rows its definition expects, results files count every check, the entry point names every suite."""

from __future__ import annotations

import importlib
import json
import pathlib
import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp

ROOT = pathlib.Path(__file__).resolve().parents[2]


def bench(module: str):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{module}")


def small(seed=0, rows=60, cols=40, density=0.2):
    rng = np.random.default_rng(seed)
    X = sp.random(rows, cols, density=density, format="csr", random_state=rng, dtype=np.float64)
    X.data = np.abs(X.data) + 0.1
    X.data[X.indptr[3] : X.indptr[4]] = 0  # an empty row
    X.eliminate_zeros()
    return X.astype(np.float32)


@pytest.mark.parametrize(
    "metric", ["cosine", "cityblock", "jaccard", "dice", "russellrao", "hellinger", "jensenshannon"]
)
def test_pairwise_oracle_accepts_ours_and_refuses_a_perturbed_result(metric):
    from semiring import distances
    from semiring.distances.specs import get_metric

    reference = bench("reference")
    X = small()
    spec = get_metric(metric)
    qi, xi = reference.sample(X, X, np.random.default_rng(1), 8, 30)
    want = reference.pairwise_reference(spec.name, spec.scipy, X, X, qi, xi)
    got = distances.pairwise_distances(X, metric=metric, backend="cpu")[np.ix_(qi, xi)]
    assert reference.compare(got, want, "ours", "scipy")["ok"]
    wrong = got.copy()
    wrong[0, 1] += 0.01
    check = reference.compare(wrong, want, "ours", "scipy")
    assert not check["ok"] and check["wrong_entries"] == 1


@pytest.mark.parametrize("metric", ["jensenshannon", "hellinger", "jaccard", "dice", "russellrao"])
def test_cuvs_is_given_rows_whose_answer_is_the_oracle(metric):
    """The rows prepared for cuVS have, under the measure's plain formula, the oracle's answer on the raw rows."""
    peers, reference = bench("peers"), bench("reference")
    X = small(2)
    how = peers.CUVS_ROWS[metric]
    P = peers.cuvs_rows(X, how).toarray().astype(np.float64)
    if how == "l1":
        nonempty = P.sum(1) > 0
        assert np.allclose(P[nonempty].sum(1), 1.0) and (P >= 0).all()
    else:
        assert set(np.unique(P)) <= {0.0, 1.0} and np.array_equal(P != 0, X.toarray() != 0)
    qi = xi = np.arange(X.shape[0])
    from semiring.distances.specs import get_metric

    spec = get_metric(metric)
    want = reference.pairwise_reference(spec.name, spec.scipy, X, X, qi, xi)
    again = reference.pairwise_reference(spec.name, spec.scipy, sp.csr_matrix(P), sp.csr_matrix(P), qi, xi)
    assert np.allclose(want, again, atol=1e-6, equal_nan=True)  # float32 rows normalised twice: rounding


def test_knn_check_up_to_ties_and_wrong_neighbours():
    from semiring import distances

    reference = bench("reference")
    X = small(3, rows=80)
    qi = np.arange(0, 80, 7)
    want = reference.knn_reference("cosine", X[qi], X, 5, self_index=qi)
    _, ind = distances.NearestNeighbors(n_neighbors=5, metric="cosine", backend="cpu").fit(X).kneighbors()
    assert reference.knn_check("cosine", X[qi], X, ind[qi], "ours", want)["ok"]
    wrong = ind[qi].copy()
    wrong[1, 0] = wrong[1, -1] = (wrong[1, 0] + 40) % 80  # someone else's neighbour
    check = reference.knn_check("cosine", X[qi], X, wrong, "peer", want)
    assert not check["ok"] and check["rows_off"] >= 1


def test_edge_and_vertex_oracles_by_set_arithmetic():
    import networkx as nx

    reference, synthetic, graph_suite = bench("reference"), bench("synthetic"), bench("suite_graph")
    A = synthetic.rmat_csr(7, seed=1)
    G = nx.from_scipy_sparse_array(A)
    u, v = reference.sample_edges(A, np.random.default_rng(0), 50)
    cn = reference.edge_values_reference(A, u, v, "common_neighbors")
    assert [len(list(nx.common_neighbors(G, a, b))) for a, b in zip(u, v)] == cn.tolist()
    jac = reference.edge_values_reference(A, u, v, "jaccard")
    assert np.allclose([p for _, _, p in nx.jaccard_coefficient(G, list(zip(u.tolist(), v.tolist())))], jac)
    vertices = np.arange(0, A.shape[0], 9)
    triangles = nx.triangles(G)
    assert graph_suite.vertex_triangles_reference(A, vertices).tolist() == [triangles[int(x)] for x in vertices]


def test_graph_work_counts_the_out_wedges_of_the_degree_order():
    """The probe's work (``graph-work``): each vertex's pairs of out-neighbours in the degree order, against a
    loop over every vertex's neighbours ordered by (degree, id)."""
    work, synthetic = bench("graph_work"), bench("synthetic")
    indptr, indices, n = synthetic.rmat(8, seed=4)
    degree = np.diff(indptr)
    want = 0
    for u in range(n):
        later = [w for w in indices[indptr[u] : indptr[u + 1]] if (degree[u], u) < (degree[w], w)]
        want += len(later) * (len(later) - 1) // 2
    assert want > 0
    assert work.out_wedges(work.out_degrees(indptr, indices)) == want


def test_graphblas_truss_peer_agrees_with_the_cpu_engine():
    """The graph suite's python-graphblas k-truss (LAGraph's peeling, in its subprocess) gives every edge of a
    small R-MAT graph the truss number the CPU engine gives it, and the same 5-truss; a wrong number fails
    the suite's check."""
    peers, synthetic, graph_suite = bench("peers"), bench("synthetic"), bench("suite_graph")
    from semiring import graph

    A = synthetic.rmat_csr(9, seed=2)
    mine = graph.truss_decomposition(A, backend="cpu")
    assert mine.data.max() >= 5  # the 5-truss is not empty
    for op, ours in (("truss_decomposition", mine), ("ktruss5", graph.ktruss(A, 5, backend="cpu"))):
        r = peers.graphblas_graph(A, op, 1, 1, 120.0)
        assert r["timing"]["median_ms"] > 0
        assert graph_suite.truss_peer_check(ours, r["result"], op)["ok"], op
    wrong = mine.copy()
    wrong.data[0] += 1
    theirs = peers.graphblas_graph(A, "truss_decomposition", 1, 1, 120.0)["result"]
    assert not graph_suite.truss_peer_check(wrong, theirs, "truss_decomposition")["ok"]


def test_a_peer_cut_off_gives_how_long_its_call_had_run():
    """What a cut-off child printed: the calls it finished are kept, and the call it was in counts as at least
    the time from its start to the cut; a child cut off before its first call gives no bound."""
    peers = bench("peers")
    printed = b'{"call_starts": 100.0}\n{"call_ms": 50.0}\n{"call_starts": 100.25}\n'
    r = peers.cut_off(printed, 2.0, now=101.75)
    assert r["calls_ms"] == [50.0] and r["cut_off_s"] == 2.0 and r["ms_at_least"] == 1500.0
    assert r["error"] == "cut off at 2 s in call 2 (the warm-up is call 1); calls done: 0.1 s"
    first = peers.cut_off(b'{"call_starts": 100.0}\n', 2.0, now=101.5)
    assert first["calls_ms"] == [] and first["error"] == "cut off at 2 s: its first call had run 1.5 s"
    assert "ms_at_least" not in peers.cut_off(b"", 2.0, now=101.5)


def test_the_graph_peers_child_prints_its_calls_as_they_end():
    """A child cut off by ``subprocess.run`` leaves what it printed before the cut in the exception (bytes): the
    calls it finished reach ``cut_off``."""
    import subprocess

    peers = bench("peers")
    child = (
        "import json, time\n"
        "print(json.dumps({'call_starts': time.time()}), flush=True)\n"
        "print(json.dumps({'call_ms': 50.0}), flush=True)\n"
        "print(json.dumps({'call_starts': time.time()}), flush=True); time.sleep(60)\n"
    )
    with pytest.raises(subprocess.TimeoutExpired) as cut:
        subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=5.0, check=True)
    r = peers.cut_off(cut.value.stdout, 5.0, time.time())
    assert r["calls_ms"] == [50.0] and r["ms_at_least"] > 0


def test_results_file_counts_every_check(tmp_path, monkeypatch):
    record = bench("record")
    args = type("Args", (), {"seed": 3})()
    path = tmp_path / "r.json"
    results = record.Results("test", args, path)
    ok = {"subject": "ours", "against": "x", "ok": True}
    results.add({"dataset": "d", "metric": "m", "check": ok, "peer_check": {**ok, "subject": "peer", "ok": False}})
    assert results.finish() == 0  # a peer's failure is a result, not a failure of the run
    saved = json.loads(path.read_text())
    assert saved["checks"]["passed"] == 1 and saved["checks"]["failed"] == 1
    assert saved["meta"]["seed"] == 3 and saved["meta"]["engine_digest"] == record.engine_digest()
    assert saved["meta"]["commit"] and saved["meta"]["versions"]["numpy"] == np.__version__
    results.add({"dataset": "d", "metric": "n", "check": {**ok, "ok": False}})
    assert results.finish() == 1


def test_engine_digest_from_git_equals_the_working_trees_at_a_clean_head():
    record = bench("record")
    if not record.git("rev-parse", "HEAD") or record.git("status", "--porcelain", "--", *record.ENGINE_FOLDERS):
        pytest.skip("no git metadata, or engine files changed in the working tree")
    assert record.engine_digest_at("HEAD") == record.engine_digest()


def test_suite_time_parses_pytest_summaries():
    suite_time = bench("suite_time")
    parsed = suite_time.parse("....\n===== 1317 passed, 27 skipped, 2 warnings in 344.91s (0:05:44) =====\n")
    assert parsed["counts"] == {"passed": 1317, "skipped": 27, "warning": 2} and parsed["pytest_seconds"] == 344.91
    assert suite_time.parse("1 failed, 3 passed in 2.00s")["counts"] == {}  # not a summary line
    failed = suite_time.parse("FAILED tests/a.py::t - AssertionError: x\n==== 1 failed, 3 passed in 2.00s ====")
    assert failed["counts"] == {"failed": 1, "passed": 3} and failed["failing"] == ["FAILED tests/a.py::t"]


def test_entry_point_lists_every_suite(capsys):
    main = bench("__main__")
    assert main.main([]) == 0
    out = capsys.readouterr().out
    for suite in ("distances", "knn", "scale", "graph", "cpu", "dask", "startup", "suite-time", "docs"):
        assert f"  {suite} " in out
    assert main.main(["no-such-suite"]) == 2


def test_a_figure_says_from_which_commit_when_the_engine_changed(tmp_path):
    docs, record = bench("docs"), bench("record")
    current = {scope: record.engine_digest(scope=scope) for scope in record.SCOPES}
    path = record.RESULTS / "x.json"
    assert docs.freshness({"commit": "abc1234", "engine_digest": current["all"]}, path, current) is None
    stale = docs.freshness({"commit": "abc1234", "engine_digest": "0" * 16}, path, current)
    assert stale.startswith("from commit abc1234")
    assert "uncommitted" in docs.freshness({"commit": "abc1234+dirty"}, path, current)
    # a CPU figure's file with the CPU scope's digest of today is of today whatever the whole engine's says
    meta = {"commit": "abc1234", "engine_digest": "0" * 16, "engine_digests": {"cpu": current["cpu"]}}
    assert docs.freshness(meta, path, current, "cpu") is None
    assert docs.freshness(meta, path, current, "all").startswith("from commit abc1234")


def test_a_hand_edited_figure_differs_from_what_the_generator_makes(tmp_path):
    import shutil

    docs = bench("docs")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    page = tmp_path / "docs" / "benchmarks.md"
    assert all(now == made for now, made in docs.pages(tmp_path / "docs").values())
    text = page.read_text()
    start = text.index("<!-- figure: knn-gpu -->")
    page.write_text(text[:start] + text[start:].replace("| movielens cosine |", "| movielens cosine (edited) |", 1))
    now, made = docs.pages(tmp_path / "docs")[page]
    assert now != made and "(edited)" not in made


def test_stamp_finds_the_commit_of_the_engine_that_ran(tmp_path):
    record, stamp = bench("record"), bench("stamp")
    if not record.git("rev-parse", "HEAD") or record.git("rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("no git history here")
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"meta": {"commit": "unknown", "engine_digest": record.engine_digest_at("HEAD")}}))
    args = type("Args", (), {"files": [path], "depth": 50})()
    assert stamp.main(args) == 0
    meta = json.loads(path.read_text())["meta"]
    assert record.engine_digest_at(meta["commit"]) == record.engine_digest_at("HEAD")
    assert meta["commit_recorded"] == "unknown" and "engine digest" in meta["commit_note"]
    path.write_text(json.dumps({"meta": {"commit": "x", "engine_digest": "no such digest"}}))
    assert stamp.main(args) == 1 and json.loads(path.read_text())["meta"]["commit"] == "x"


def test_every_command_imports_without_a_gpu_and_states_its_options(capsys):
    main = bench("__main__")
    for name in main.COMMANDS:
        with pytest.raises(SystemExit) as stop:
            main.main([name, "--help"])
        assert stop.value.code == 0, name
        assert "usage:" in capsys.readouterr().out, name
