"""docs/scale.md's table is what ``benchmarks/scale.py --report`` makes of the results files it names."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scale_table_is_generated_from_its_results_files():
    spec = importlib.util.spec_from_file_location("scale_bench", ROOT / "benchmarks" / "scale.py")
    scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scale)
    text = (ROOT / "docs" / "scale.md").read_text()
    table = re.search(r"<!-- scale-table:.*?-->\n(.*?)<!-- /scale-table -->", text, re.DOTALL).group(1)
    files = list(dict.fromkeys(re.findall(r"`(scale_h200_[^`]+\.json)`", table)))
    assert files, "the table names no results file"
    results = ROOT / "benchmarks" / "results"
    assert table == scale.report([str(results / name) for name in files])
