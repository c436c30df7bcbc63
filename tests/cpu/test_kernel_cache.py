"""CPU kernels are compiled once per machine: a second process loads them from the disk cache (numba's cache
statistics, not wall-clock time, say so); generated kernel files are content-addressed and written once; importing
the package and the command's module loads no engine and no library a call may not need."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import semiring
from semiring import expr, settings
from semiring.interfaces import EXPANSION_VARIABLES
from semiring.kernels.cpu import elementwise, jit

# One process: a semiring of its own (so the kernel is compiled in the test's cache folder, not found elsewhere),
# its product checked against NumPy, and the cache statistics of the kernel that ran.
CHILD = """
import json, numpy as np, scipy.sparse as sp, semiring
from semiring.kernels.cpu import pairwise
sr = semiring.Semiring(semiring.monoid.plus, semiring.binary_op("x * y + 0.25 * x * y", name="cache_probe"))
X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]]))
got = semiring.pairwise(X, X, sr)
want = 1.25 * (X @ X.T).toarray()
kernel = pairwise._semiring_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names).row_kernel  # few products an entry: the row kernel
print(json.dumps({"ok": bool(np.allclose(got, want)), "hits": sum(kernel.stats.cache_hits.values()),
                  "misses": sum(kernel.stats.cache_misses.values()), "file": kernel.py_func.__code__.co_filename}))
"""


def run_child(cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env[settings.CACHE_DIR.name] = cache
    out = subprocess.run(
        [sys.executable, "-c", CHILD], check=False, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_compiled_kernel_from_disk(tmp_path):
    first = run_child(str(tmp_path))
    assert first["ok"] and first["misses"] == 1 and first["hits"] == 0  # compiled here, and stored
    assert first["file"].startswith(str(tmp_path / "cpu"))
    second = run_child(str(tmp_path))
    assert second["ok"] and second["hits"] == 1 and second["misses"] == 0  # loaded, not compiled
    assert second["file"] == first["file"]


def test_generated_files_are_content_addressed_and_written_once(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.CACHE_DIR.name, str(tmp_path))
    ops = {"f": jit.scalar_source("f", semiring.binary_op("x - y").tree, ("x", "y"))}
    a = jit.generate("expansion_template", ops)
    path = a.__file__
    stamp = os.stat(path).st_mtime_ns
    b = jit.generate("expansion_template", ops)
    assert b is a and os.stat(path).st_mtime_ns == stamp  # same text: same file, not rewritten
    text = Path(path).read_text()
    assert "return (x - y)" in text and jit.OPS_BEGIN in text
    other = jit.generate("expansion_template", {"f": jit.scalar_source("f", semiring.binary_op("x + y").tree, "xy")})
    assert other.__file__ != path
    leftovers = [p for p in os.listdir(tmp_path / "cpu") if p.startswith(".tmp-")]
    assert leftovers == []


def test_generated_names_cover_the_engine_files_the_kernels_reach_and_no_others(tmp_path, monkeypatch):
    """numba's cache of a generated module is keyed by that file alone: its name must change with every engine
    file its code imports (and theirs), and only with those, so that editing the graph kernels or the engine
    classes recompiles no semiring."""
    assert jit._dependencies("semiring_template") == {"semiring_template", "pairwise", "jit"}
    assert jit._dependencies("expansion_template") == {"expansion_template", "jit"}
    assert {"graph", "elementwise", "topk", "pairwise"} <= jit._dependencies("engine")  # ``from . import x as _x``

    copy = tmp_path / "cpu"
    shutil.copytree(jit._HERE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(jit, "_HERE", copy)

    def digests():
        jit._dependencies.cache_clear()
        jit._engine_digest.cache_clear()
        return {t: jit._engine_digest(t) for t in ("semiring_template", "expansion_template")}

    try:
        before = digests()
        for name in ("graph", "topk", "engine"):
            (copy / f"{name}.py").write_text((copy / f"{name}.py").read_text() + "\n# edited\n")
        assert digests() == before
        (copy / "pairwise.py").write_text((copy / "pairwise.py").read_text() + "\n# edited\n")
        after = digests()
        assert after["semiring_template"] != before["semiring_template"]
        assert after["expansion_template"] == before["expansion_template"]
        (copy / "jit.py").write_text((copy / "jit.py").read_text() + "\n# edited\n")
        assert all(digests()[t] != after[t] for t in after)
    finally:
        monkeypatch.undo()
        digests()  # the real files' again


def test_constants_keep_numpy_semantics_in_generated_kernels(tmp_path, monkeypatch):
    """1/0 in an op is inf, as NumPy (and the ops' declared semantics) say, not a ZeroDivisionError."""
    monkeypatch.setenv(settings.CACHE_DIR.name, str(tmp_path))
    sr = semiring.Semiring(semiring.monoid.plus, semiring.binary_op("x * y * (1 / 0)", name="inf_probe"))
    X = sp.csr_matrix(np.array([[1.0, 2.0]]))
    np.testing.assert_array_equal(semiring.pairwise(X, X, sr), [[np.inf]])


# What a new process must not pay for before a call needs it: numba (the CPU engine, loaded by the first CPU call),
# GPU libraries, and the peers and plotting libraries (oracles, benchmarks).  scipy.spatial comes with cdist, which
# the command imports only to check a result.
NOT_AT_IMPORT = ("numba", "semiring.kernels.cpu", "cupy", "scipy.spatial", "sklearn", "pandas", "matplotlib", "dask")


def test_importing_the_package_and_the_command_loads_no_engine():
    code = (
        "import json, sys, semiring, semiring.distances, semiring.cli\n"
        f"print(json.dumps([m for m in {NOT_AT_IMPORT!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout) == []


def test_an_expansion_is_compiled_once_whatever_the_output_shape(tmp_path, monkeypatch):
    """A measure of one term gets a zero view for its second, of one numba type whatever the output's shape (a 1 x 1
    view was typed apart: one more compile of every expansion, for every small input)."""
    monkeypatch.setenv(settings.CACHE_DIR.name, str(tmp_path))
    tree, _ = expr.parse("nx0 + ny0 - 2.0 * c0 + c1 + 0.125", EXPANSION_VARIABLES)
    rng = np.random.default_rng(0)
    for m, p in ((3, 4), (1, 1), (1, 5), (4, 1)):
        c0, nx, ny = rng.random((m, p)), rng.random(m), rng.random(p)
        out = elementwise.expand(tree, (), np.zeros(0), [c0], [nx], [ny], 7, np.empty((m, p)))
        np.testing.assert_allclose(out, nx[:, None] + ny[None, :] - 2.0 * c0 + 0.125, rtol=1e-15)
    assert len(elementwise.expression_kernels(tree, EXPANSION_VARIABLES, ()).expand.signatures) == 1
