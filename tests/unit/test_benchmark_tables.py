"""The docs generator's tables read the results files the suites write now (not only the older layouts)."""

from __future__ import annotations

import importlib
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def bench(module: str):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{module}")


def ok(subject, good=True):
    return {"subject": subject, "against": "oracle", "ok": good}


def timing(ms):
    return {"clock": "cuda events", "median_ms": ms, "times_ms": [ms], "warmup_ms": [ms]}


def today(c):
    """Today's engine digest of every scope, all ``c``."""
    return dict.fromkeys(bench("record").SCOPES, c * 16)


META = {"suite": "x", "command": "python -m benchmarks x --seed 0", "commit": "abc1234", "engine_digest": "0" * 16}


def write(tmp_path, monkeypatch, name, payload):
    docs = bench("docs")
    monkeypatch.setattr(docs, "RESULTS", tmp_path)
    (tmp_path / name).write_text(json.dumps(payload))
    return docs


def test_distances_table_from_the_distances_suite(tmp_path, monkeypatch):
    row = {"dataset": "movielens", "metric": "jaccard", "family": "intersection", "public_cupy_ms": 10.0}
    row |= {"public_scipy_ms": 100.0, "kernel_ms": 9.0, "public_extra_mib": 3.0, "memory_budget_mib": 256.0}
    row |= {"check": ok("ours"), "cusparse_ms": 5.0, "cusparse_check": ok("cuSPARSE", False), "dense_ms": 30.0}
    row |= {"dense_check": ok("dense"), "densify_ms": 4.0, "cuvs_ms": 25.0, "cuvs_rows": "binary"}
    row |= {"cuvs_check": ok("cuVS"), "sklearn_ms": 400.0, "sklearn_check": ok("scikit-learn")}
    docs = write(tmp_path, monkeypatch, "d.json", {"meta": META, "rows": [row], "checks": {"passed": 5, "failed": 1}})
    fig = docs.Figure("distances-gpu", "benchmarks.md", ("d.json",), "distances", "distances")
    text = docs.render(fig, today("f"))
    assert "checks: 5 passed, 1 failed" in text and "From commit abc1234: the engine code has changed" in text
    assert "cuSPARSE wrong; dense cuBLAS 3.00×; cuVS 2.50×; scikit-learn 40.00×" in text
    assert "5.00 **wrong**" in text and "raw rows" not in text
    assert "cuVS was given binary rows for jaccard, as its definitions expect, prepared outside its timing" in text
    assert "From commit" not in docs.render(fig, today("0"))  # the engine as it ran
    # two runs in one figure: each cell names its run; a wrong peer is listed with what its check found
    kl = {"dataset": "movielens", "metric": "kl_divergence", "public_cupy_ms": 20.0, "cuvs_ms": 10.0}
    kl |= {"public_extra_mib": 0.0, "memory_budget_mib": 256.0, "check": ok("ours"), "cuvs_rows": "as given"}
    kl["cuvs_check"] = {**ok("cuVS", False), "entries": 100, "wrong_entries": 98, "nan_where_number": 98}
    (tmp_path / "e.json").write_text(json.dumps({"meta": {**META, "commit": "def5678"}, "rows": [kl]}))
    both = ("d.json", "e.json")
    text = docs.render(docs.Figure("distances-gpu", "benchmarks.md", both, "distances", "distances"), today("0"))
    assert "| jaccard | cuSPARSE wrong; dense cuBLAS 3.00×; cuVS 2.50×; scikit-learn 40.00× (abc1234) |" in text
    assert "- cuVS, movielens kl_divergence (def5678): 98 of 100 entries wrong; 98 NaN where the reference" in text
    cuvs = docs.render(docs.Figure("distances-cuvs", "scale.md", both, "distances_cuvs", "distances"), today("0"))
    assert "| jaccard | 10.00 / 25.00: **2.50×** (abc1234) |" in cuvs
    assert "| kl_divergence | 20.00 / 10.00: cuVS **wrong** (def5678) |" in cuvs


def test_knn_tables_from_the_knn_suite(tmp_path, monkeypatch):
    pairs = {"dataset": "nytimes", "metric": "cosine", "k": 10, "rows": 40000, "part": "all pairs"}
    pairs |= {"public_cupy_ms": 800.0, "public_scipy_ms": 820.0, "public_extra_mib": 100.0, "check": ok("ours")}
    pairs |= {"cusparse_argpartition_ms": 150.0, "cusparse_check": ok("cuSPARSE", False), "cuvs_ms": 1700.0}
    pairs |= {"cuvs_check": ok("cuVS"), "dense_skipped": "X does not fit dense"}
    subset = {"dataset": "nytimes", "metric": "cosine", "k": 10, "rows": 40000, "part": "subset", "queries": 1024}
    subset |= {"threads": 16, "ours_cuda_ms": 20.0, "ours_cpu_ms": 200.0, "sklearn_ms": 1500.0}
    subset |= {"ours_cuda_check": ok("ours"), "ours_cpu_check": ok("ours"), "sklearn_check": ok("scikit-learn")}
    docs = write(tmp_path, monkeypatch, "k.json", {"meta": META, "rows": [pairs, subset]})
    gpu = docs.render(docs.Figure("knn-gpu", "benchmarks.md", ("k.json",), "knn_gpu", "knn"), today("0"))
    assert "| nytimes cosine | 800.0 | 820.0 | 150.0 **wrong** | — | 1,700.0 | 100.0 |" in gpu
    host = docs.render(docs.Figure("knn-host", "neighbors.md", ("k.json",), "knn_host", "knn"), today("0"))
    assert "| nytimes | cosine | 1,024 | 20.0 | 200.0 | 1,500.0 | 16 | yes |" in host


def test_graph_and_cpu_tables_from_their_suites(tmp_path, monkeypatch):
    row = {"graph": "rmat18", "scale": 18, "vertices": 262144, "edges": 3805913, "triangles": 82934318}
    row |= {"timings": {"ours triangles": timing(4.0), "graphblas triangles": timing(400.0)}}
    row |= {"checks": {"ours triangles": ok("ours"), "graphblas triangles": ok("python-graphblas")}}
    row |= {"cugraph triangles skipped": "pylibcugraph not installed"}
    docs = write(tmp_path, monkeypatch, "g.json", {"meta": META, "rows": [row]})
    text = docs.render(docs.Figure("graph-gpu", "graph.md", ("g.json",), "graph", "graph"), today("0"))
    assert "| rmat18 | 262,144 | 3,805,913 | 82,934,318 | ours | triangles | 4.00 | yes |" in text
    assert "pylibcugraph not installed" in text
    # a later run of some measures joins the graph's row: its timings replace those of the same name, its peer
    # errors are added, and a peer it skipped keeps the earlier run's timings
    later = {"graph": "rmat18", "scale": 18, "vertices": 262144, "edges": 3805913, "triangles": None}
    later |= {"timings": {"ours ktruss5": timing(9.0)}, "checks": {}, "graphblas skipped": "above 17"}
    later |= {"graphblas ktruss5 error": "cut off at 60 s: its first call had run 58.0 s"}
    (tmp_path / "h.json").write_text(json.dumps({"meta": META, "rows": [later]}))
    text = docs.render(docs.Figure("graph-gpu", "graph.md", ("g.json", "h.json"), "graph", "graph"), today("0"))
    assert "| rmat18 | 262,144 | 3,805,913 | 82,934,318 | ours | triangles | 4.00 | yes |" in text
    assert "| rmat18 | 262,144 | 3,805,913 | 82,934,318 | ours | ktruss5 | 9.00 | — |" in text
    assert "| graphblas | triangles | 400.00 | yes |" in text and "above 17" not in text
    assert "| rmat18 | | | | graphblas ktruss5 | | error | cut off at 60 s: its first call had run 58.0 s |" in text
    # a run on a machine without a peer says nothing of it: the earlier run's timings and errors stand
    absent = {**later, "timings": {"ours triangles": timing(3.0)}, "graphblas skipped": None}
    absent |= {"graphblas triangles error": "ModuleNotFoundError: No module named 'graphblas'"}
    absent |= {"cugraph triangles skipped": "pylibcugraph not installed (No module named 'pylibcugraph')"}
    absent.pop("graphblas ktruss5 error")
    (tmp_path / "i.json").write_text(json.dumps({"meta": META, "rows": [absent]}))
    files = ("g.json", "h.json", "i.json")
    text = docs.render(docs.Figure("graph-gpu", "graph.md", files, "graph", "graph"), today("0"))
    assert "| rmat18 | 262,144 | 3,805,913 | 82,934,318 | ours | triangles | 3.00 | yes |" in text
    assert "| graphblas | triangles | 400.00 | yes |" in text and "No module named" not in text
    assert "| rmat18 | | | | graphblas ktruss5 | | error | cut off at 60 s: its first call had run 58.0 s |" in text
    assert text.count("pylibcugraph not installed") == 1  # the first run's own word, once
    cpu = {"dataset": "movielens", "measure": "cosine", "peer": "scikit-learn", "ours": timing(10.0)}
    cpu |= {"peer_timing": {**timing(50.0), "others_cpu": 0.5}}  # other processes took half the cores meanwhile
    cpu |= {"checks": {"ours": ok("ours"), "peer": ok("scikit-learn", False)}}
    docs = write(tmp_path, monkeypatch, "c.json", {"meta": {**META, "threads": 2}, "rows": [cpu]})
    text = docs.render(docs.Figure("cpu", "cpu-engine.md", ("c.json",), "cpu", "cpu"), today("0"))
    assert "| movielens | cosine | scikit-learn | 10.0 | 50.0 | 5.00× | peer **wrong** | — / 50 % |" in text
    assert "a contended machine" in text


def test_a_dry_runs_file_makes_no_figure(tmp_path, monkeypatch):
    meta = {**META, "command": "python -m benchmarks dry-run knn --seed 0 --scale 0.01"}
    docs = write(tmp_path, monkeypatch, "k.json", {"meta": meta, "rows": []})
    with pytest.raises(ValueError, match="dry run"):
        docs.render(docs.Figure("knn-gpu", "benchmarks.md", ("k.json",), "knn_gpu", "knn"), today("0"))


def test_a_figure_is_of_today_by_its_scope(tmp_path, monkeypatch):
    """A CPU figure depends on the engine but the GPU kernels (``kernels/cuda/``), a GPU figure on all but the CPU
    kernels: a change to one engine's kernels leaves the other's figures of today, and the file's scoped digest
    decides where it has one."""
    record = bench("record")
    entries = [("semiring/a.py", "1"), ("kernels/cpu/b.py", "2"), ("kernels/cuda/c.py", "3")]
    cuda_changed = [("semiring/a.py", "1"), ("kernels/cpu/b.py", "2"), ("kernels/cuda/c.py", "4")]
    assert record.digest_of(entries, "cpu") == record.digest_of(cuda_changed, "cpu")
    assert record.digest_of(entries, "cuda") != record.digest_of(cuda_changed, "cuda")
    assert record.digest_of(entries) != record.digest_of(cuda_changed)
    shared_changed = [("semiring/a.py", "9"), ("kernels/cpu/b.py", "2"), ("kernels/cuda/c.py", "3")]
    assert all(record.digest_of(entries, s) != record.digest_of(shared_changed, s) for s in record.SCOPES)

    meta = {**META, "engine_digests": {"cpu": "c" * 16, "cuda": "g" * 16}}
    row = {"dataset": "movielens", "measure": "cosine", "peer": "scikit-learn", "ours": timing(1.0)}
    row |= {"peer_timing": timing(2.0), "checks": {"ours": ok("ours"), "peer": ok("scikit-learn")}}
    docs = write(tmp_path, monkeypatch, "c.json", {"meta": {**meta, "threads": 2}, "rows": [row]})
    now = {"all": "1" * 16, "cpu": "c" * 16, "cuda": "2" * 16}  # the whole engine and the GPU's changed
    for scope, stale in (("cpu", False), ("cuda", True), ("all", True)):
        text = docs.render(docs.Figure("cpu", "cpu-engine.md", ("c.json",), "cpu", "cpu", scope=scope), now)
        assert ("From commit abc1234: the engine code has changed" in text) is stale, scope
