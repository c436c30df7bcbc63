"""benchmarks/plots.py draws a PNG for each result file that exists, in the layouts the benchmark scripts write."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil

import pytest

pytest.importorskip("matplotlib", reason="the bench or docs extra is not installed")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def plots_module():
    spec = importlib.util.spec_from_file_location("plots", ROOT / "benchmarks" / "plots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def knn_result() -> dict:
    agree = {"identical_indices": 1.0, "equal_up_to_ties": True}
    row = {"dataset": "movielens", "metric": "cosine", "gpu_all_s": 0.5, "gpu_subset_s": 0.02, "cpu_subset_s": 0.3}
    row |= {"sklearn_subset_s": 2.0, "subset_queries": 1024, "gpu_vs_sklearn": agree, "cpu_vs_sklearn": agree}
    return {"meta": {"device": "GPU", "k": 10}, "rows": [row, row | {"gpu_vs_sklearn": {"equal_up_to_ties": False}}]}


def graph_result() -> dict:
    ours = {k: {"ms": 1.0} for k in ("triangles", "triangles_id_order", "jaccard", "common_neighbors")}
    peers = {
        "cusparse (L·L)∘L triangles": {"error": "out of memory"},
        "cusparse (A·A)∘A triangles / common neighbours": {"ms": 9.0, "correct": False},
        "python-graphblas": {"triangles": {"ms_at_least": 6e4}, "common_neighbors": {"ms": 30.0, "jaccard_ms": 40.0}},
    }
    return {
        "device": "GPU",
        "cpu_cores": 16,
        "results": [{"scale": 18, "vertices": 9, "edges": 99, "ours": ours, "peers": peers}],
    }


def test_plots_for_what_exists(tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "img"
    results.mkdir()
    for path in (ROOT / "benchmarks" / "results").glob("cpu_engine_*.json"):
        shutil.copy(path, results)
    (results / "knn_bench.json").write_text(json.dumps(knn_result()))
    (results / "graph_bench.json").write_text(json.dumps(graph_result()))
    (results / "gpu_bench_broken.json").write_text(json.dumps({"rows": [{"dataset": "x"}]}))
    assert plots_module().main(["--results", str(results), "--out", str(out)]) == 0
    made = sorted(p.name for p in out.glob("*.png"))
    expected = [p.with_suffix(".png").name for p in results.glob("*.json") if "broken" not in p.name]
    assert made == sorted(expected) and len(made) >= 2
    assert all((out / name).read_bytes().startswith(b"\x89PNG") for name in made)
    assert "gpu_bench_broken.json: not plotted (KeyError" in capsys.readouterr().out
