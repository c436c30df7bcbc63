"""Settings: every environment variable declared once in ``semiring.settings``, read nowhere else, documented."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

from semiring import settings

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE_FOLDERS = ("semiring", "kernels", "distances")  # what installs as the package `semiring`
SETTINGS_MODULE = ROOT / "semiring" / "settings.py"


def _package_files():
    for folder in PACKAGE_FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _environment_reads(source: str, label: str) -> list[str]:
    """``os.environ``, ``os.getenv`` / ``putenv`` / ``unsetenv``, ``environ`` imported from os: each where it stands."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_NAMES:
            found.append(f"{label}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            names = sorted({a.name for a in node.names} & set(ENVIRONMENT_NAMES))
            found.extend(f"{label}:{node.lineno}: from os import {n}" for n in names)
    return found


ENVIRONMENT_NAMES = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")


def test_only_the_settings_module_reads_the_environment():
    reads = [
        r
        for path in _package_files()
        if path != SETTINGS_MODULE
        for r in _environment_reads(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not reads, "read the environment through semiring.settings:\n" + "\n".join(reads)


def test_the_checker_sees_each_spelling_of_an_environment_read():
    code = "import os\nfrom os import getenv\na = os.environ.get('X')\nb = os.getenv('Y')\n"
    assert sorted(_environment_reads(code, "probe")) == [
        "probe:2: from os import getenv",
        "probe:3: .environ",
        "probe:4: .getenv",
    ]
    assert _environment_reads(SETTINGS_MODULE.read_text(), "settings"), "the settings module reads it itself"


def test_every_semiring_variable_named_anywhere_is_declared():
    """A SEMIRING_* name in the package, the tests, the benchmarks or the docs is one of the declared settings."""
    declared = {s.name for s in settings.SETTINGS}
    named = {}
    files = [*_package_files(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    files += [*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    for path in files:
        for name in re.findall(r"\bSEMIRING_[A-Z0-9_]*[A-Z0-9]", path.read_text(errors="replace")):
            named.setdefault(name, str(path.relative_to(ROOT)))
    undeclared = {n: where for n, where in named.items() if n not in declared}
    assert not undeclared, f"named but not declared in semiring/settings.py: {undeclared}"
    assert declared <= set(named)  # and the search does find them


def test_settings_table_in_docs_is_generated_from_the_declarations():
    text = (ROOT / "docs" / "settings.md").read_text()
    assert settings.settings_table() in text, "docs/settings.md is stale: regenerate with python -m semiring.settings"


@pytest.mark.parametrize("setting", [s for s in settings.SETTINGS if s.choices], ids=lambda s: s.name)
def test_each_rule_refuses_a_wrong_value_naming_the_variable(setting, monkeypatch):
    monkeypatch.delenv(setting.name, raising=False)
    assert setting.read() == setting.default and setting.default in setting.choices
    for value in setting.choices:
        monkeypatch.setenv(setting.name, value)
        assert setting.read() == value
    monkeypatch.setenv(setting.name, "no such value")
    with pytest.raises(ValueError, match=rf"^\${setting.name} must be one of 'auto', .*got 'no such value'; for ex"):
        setting.read()
    assert setting.raw() == "no such value"


def test_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("SEMIRING_CACHE_DIR", str(tmp_path / "here"))
    assert settings.cache_dir() == tmp_path / "here" and settings.CACHE_DIR.is_set()
    monkeypatch.setenv("SEMIRING_CACHE_DIR", "")  # empty counts as unset
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert settings.cache_dir() == tmp_path / "xdg" / "sparse-semirings" / "kernels"
    assert not settings.CACHE_DIR.is_set()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("SEMIRING_CACHE_DIR")
    assert settings.cache_dir() == pathlib.Path.home() / ".cache" / "sparse-semirings" / "kernels"


def test_both_engines_read_the_one_cache_folder(monkeypatch, tmp_path):
    """The CPU engine's generated modules and the GPU engine's cubins share the folder the settings name."""
    from semiring.kernels.cpu import jit
    from semiring.kernels.cuda import compile as cuda_compile

    assert jit.cache_dir is settings.cache_dir and cuda_compile.cache_dir is settings.cache_dir
