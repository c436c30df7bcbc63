"""The docs stay true: README's example runs, the measures table matches the specs."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

from semiring.distances.describe import measures_table

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_readme_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert blocks, "README.md has no python example"
    script = tmp_path / "readme_example.py"  # a file, so that lambdas have source to read
    script.write_text("\n".join(blocks) + "\nprint('README example ran')\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
    assert "README example ran" in result.stdout and "union" in result.stdout


def test_measures_table_in_docs_is_generated_from_specs():
    text = (ROOT / "docs" / "measures.md").read_text()
    assert measures_table() in text, "docs/measures.md is stale: regenerate with python -m semiring.distances.describe"


def test_version_and_license_ship_with_the_package():
    from importlib import metadata

    import semiring

    assert semiring.__version__ == metadata.version("sparse-semirings")
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert "(next)" not in metadata.metadata("sparse-semirings")["Summary"]


def test_readme_quick_start_is_two_self_contained_commands():
    text = (ROOT / "README.md").read_text()
    assert "python -m pip install -e . && semiring knn" in text
    assert 'python -m pip install -e ".[test]" && python -m pytest' in text
