"""Every docstring example of the installed package runs, each module imported by its installed name.

pytest's own ``--doctest-modules`` imports files by their place in the checkout
(``distances/pairwise.py`` as ``distances.pairwise``), which is not a name that
installs: here each module is imported as users import it (``semiring.distances.pairwise``).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re

import pytest

import semiring


def _modules() -> list[str]:
    names = ["semiring"]
    for info in pkgutil.walk_packages(semiring.__path__, "semiring."):
        names.append(info.name)
    for sub in ("semiring.distances", "semiring.kernels"):  # mapped folders: walked from their own paths
        package = importlib.import_module(sub)
        names.append(sub)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, f"{sub}.")]
    return sorted(set(names))


MODULES = _modules()


def _needs_gpu_library(name: str) -> bool:
    return name.endswith("__main__")  # runs a job when imported


@pytest.mark.parametrize("name", [m for m in MODULES if not _needs_gpu_library(m)])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, name)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"


def test_the_examples_are_found():
    """The walk reaches the mapped folders: a regression to three top-level packages would show here."""
    rooms = {"semiring.graph", "semiring.graph.measures", "semiring.cli.commands", "semiring.cli.datasets"}
    assert {"semiring.ops", "semiring.distances.pairwise", "semiring.kernels", *rooms} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_examples_import_installed_names(name):
    """An example runs for an installed user only by the installed names: ``distances`` and ``kernels`` are folders
    of the checkout (importable from it, so the example would pass here and fail for a user), and other projects'
    names on the package index."""
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    for test in finder.find(module, name):
        for example in test.examples:
            assert not re.match(r"\s*(from|import)\s+(distances|kernels)\b", example.source), (
                f"{test.name}: {example.source.strip()!r} imports the checkout's folder; use semiring.distances or "
                "semiring.kernels"
            )
