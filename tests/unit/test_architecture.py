"""The architecture holds: one import package, imports that run one way, engines that implement the interfaces.

Layers, lowest first: core (``semiring/``) ← engines (``kernels/``, installed as
``semiring.kernels``) ← measures (``distances/``, installed as
``semiring.distances``) ← command line (``distances/cli.py``, ``__main__``).
A module may import from its own layer and those below, never above.  The
resolver (``semiring.backend``) reaches the engines by module name at call
time, so importing the core loads no engine.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import subprocess
import sys

import pytest

from semiring.engine import GraphEngine, PairwiseEngine

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = {"semiring": "semiring", "kernels": "semiring.kernels", "distances": "semiring.distances"}
LAYERS = ("core", "engines", "measures", "command line")


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    package = FOLDERS[parts[0]]
    rest = [p for p in parts[1:] if p != "__init__"]
    return ".".join([package, *rest])


def _layer(module: str) -> str | None:
    if not module.startswith("semiring"):
        return None  # not ours
    if module.startswith("semiring.distances"):
        tail = module.removeprefix("semiring.distances")
        return "command line" if tail in (".cli", ".__main__") else "measures"
    if module.startswith("semiring.kernels"):
        return "engines"
    return "core"


def _sources():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path, _module_name(path)


def _imports(path: pathlib.Path, module: str):
    """Every module an ``import`` statement of the file names, wherever it stands (functions too)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            yield target
            for alias in node.names:  # "from semiring import distances" names a module too
                yield f"{target}.{alias.name}"


def test_no_import_runs_back_up_the_layers():
    upward = []
    for path, module in _sources():
        own = LAYERS.index(_layer(module))
        for target in _imports(path, module):
            layer = _layer(target)
            if layer is not None and LAYERS.index(layer) > own:
                upward.append(f"{module} ({LAYERS[own]}) imports {target} ({layer})")
    assert not upward, "\n".join(upward)


def test_the_layer_rule_is_checked_on_real_imports():
    """The checker sees the imports it must: a measure module imports the core and the driver."""
    found = {t for path, m in _sources() if m == "semiring.distances.pairwise" for t in _imports(path, m)}
    assert {"semiring.backend", "semiring.driver", "semiring.distances.measure"} <= found


def test_one_import_package():
    """From outside the checkout: semiring and its subpackages import, no top-level distances or kernels."""
    code = (
        "import importlib.util, semiring, semiring.distances, semiring.kernels\n"
        "assert importlib.util.find_spec('distances') is None, 'a top-level distances is importable'\n"
        "assert importlib.util.find_spec('kernels') is None, 'a top-level kernels is importable'\n"
        "print(semiring.distances.pairwise_distances([[1.0, 0.0], [0.0, 1.0]], metric='cityblock').tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[0.0, 2.0], [2.0, 0.0]]"


def test_importing_the_library_loads_no_engine():
    """Nor Dask: its paths (semiring.dask, semiring.distances.dask) import it only when given a Dask array."""
    code = (
        "import sys, semiring, semiring.distances, semiring.distances.graph, semiring.dask, semiring.distances.dask\n"
        "import numpy, scipy.sparse\n"
        "assert not semiring.dask.is_dask(numpy.ones((2, 2)), None, scipy.sparse.eye(2))\n"
        "heavy = ('cupy', 'dask', 'distributed')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('semiring.kernels.') or m.split('.')[0] in heavy)\n"
        "assert not loaded, loaded\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


GPU_LIBRARIES = ("cupy", "cupyx", "cuda", "cuda.bindings", "numba.cuda")


@pytest.mark.parametrize(
    "code",
    [
        "import semiring, semiring.kernels.cuda.source as s; s.render_pairwise_merge(semiring.plus_times)",
        "import semiring.distances.graph, semiring.kernels.cuda.graph_source as s; s.render_intersect('total')",
        "import semiring.kernels.cuda.topk_source as s; s.render_topk('float64', 32, True)",
        "import semiring.kernels.cuda as c; c.ENGINE.name; c.GRAPH_ENGINE.name",
    ],
    ids=["pairwise source", "graph source", "top-k source", "the GPU engine itself"],
)
def test_rendering_and_the_gpu_engine_import_no_gpu_library(code):
    """Rendering is pure, so CI renders and compiles every kernel without a GPU; the engine loads CuPy only to run."""
    check = f"import sys\n{code}\nbad = [m for m in {GPU_LIBRARIES!r} if m in sys.modules]\nassert not bad, bad\n"
    out = subprocess.run([sys.executable, "-c", check], cwd="/", capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_the_gpu_engine_is_a_package_split_by_concern():
    spec = importlib.util.find_spec("semiring.kernels.cuda")
    assert spec.submodule_search_locations, "semiring.kernels.cuda must be a package, not one module"
    assert not (ROOT / "kernels" / "cuda.py").exists()


ENGINE_MODULES = ("semiring.kernels.cpu", "semiring.kernels.cuda")


def _protocol_methods(protocol) -> list[str]:
    return [n for n, v in vars(protocol).items() if not n.startswith("_") and callable(v)]


@pytest.mark.parametrize("module", ENGINE_MODULES)
@pytest.mark.parametrize(("attribute", "protocol"), [("ENGINE", PairwiseEngine), ("GRAPH_ENGINE", GraphEngine)])
def test_engines_implement_the_interfaces(module, attribute, protocol):
    """Every method of the interface, with the interface's parameter names, on both engines (no GPU needed)."""
    from semiring.engine import missing_methods

    engine = getattr(importlib.import_module(module), attribute)
    assert missing_methods(engine, protocol) == []  # read statically: the GPU engine's xp imports CuPy
    assert engine.name == module.rpartition(".")[2]
    for name in _protocol_methods(protocol):
        want = list(inspect.signature(getattr(protocol, name)).parameters)[1:]  # without self
        got = list(inspect.signature(getattr(engine, name)).parameters)
        assert got == want, f"{module}.{attribute}.{name}{tuple(got)} differs from {protocol.__name__}{tuple(want)}"


def test_the_resolver_names_the_reason():
    from semiring import backend

    with pytest.raises(ValueError, match="backend must be one of 'auto', 'cpu', 'cuda', got 'tpu'"):
        backend.resolve("tpu")
    assert backend.engine("cpu").name == "cpu" and backend.graph_engine("cpu").name == "cpu"
    reason = backend.unavailable_reason("cuda")
    if reason is not None:
        with pytest.raises(RuntimeError, match="backend='cuda' cannot run: "):
            backend.resolve("cuda")
        assert backend.resolve("auto") == "cpu"
