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
