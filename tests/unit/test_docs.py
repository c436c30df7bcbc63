"""The docs stay true: README's example runs, the measures table matches the specs."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from semiring.distances.measures_table import measures_table

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
    assert measures_table() in text, (
        "docs/measures.md is stale: regenerate with python -m semiring.distances.measures_table"
    )


def test_readme_counts_the_measures_there_are():
    from semiring.distances.specs import DISTANCES

    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"**{len(DISTANCES)} sparse distance measures**" in text


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


def test_benchmark_figures_in_docs_are_made_from_the_results_files():
    """Every generated block of docs/ equals what ``python -m benchmarks docs`` makes from benchmarks/results/
    (and says "from commit X" wherever the engine code has changed since X)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks import docs, record

    if record.git("rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone: the commits of older results files are not in its history")
    stale = [str(path.relative_to(ROOT)) for path, (now, made) in docs.pages().items() if now != made]
    assert not stale, f"{', '.join(stale)}: stale benchmark figures; make them again with python -m benchmarks docs"


def test_api_reference_renders_roles_and_examples():
    """The API reference's griffe extension: Sphinx roles as code, doctest examples fenced as pycon blocks."""
    import importlib.util

    pytest.importorskip("griffe")  # the docs extra's (mkdocstrings')
    spec = importlib.util.spec_from_file_location("griffe_doctest", ROOT / "docs" / "griffe_doctest.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    text = "See :meth:`kneighbors`, :class:`~semiring.Semiring` and :func:`binary_op`.\n\n>>> 1 + 1\n2\n"
    rendered = ext.fence_examples(ext.plain_roles(text))
    assert ":meth:" not in rendered and ":class:" not in rendered and ":func:" not in rendered
    assert "`kneighbors`" in rendered and "`semiring.Semiring`" in rendered
    assert "```pycon\n>>> 1 + 1\n2\n```" in rendered
