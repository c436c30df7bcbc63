"""The architecture holds: one import package, imports that run one way and never in a circle, engines that
implement the interfaces.

Layers, lowest first: core (``semiring/``) ← engines (``kernels/``, installed as
``semiring.kernels``) ← measures, two rooms side by side (``distances/``,
installed as ``semiring.distances``, and ``semiring/graph/``) ← command line
(``semiring/cli/``: the ``semiring`` command and its file IO).  A module may
import from its own layer and those below, never above; the rooms of one layer
import nothing of each other.  The resolver (``semiring.backend``) reaches the
engines by module name at call time, so importing the core loads no engine.

The modules left in ``distances/`` under the names they had before the rooms
(``OLD_NAMES``) only hand on their new module's names: each stands in that
module's layer, and no module of the package imports one but the package that
holds it.

The import graph is drawn from the installed package's files: an arrow from a
module to each module of the package one of its ``import`` statements names,
wherever the statement stands (inside a function too: a lazy import is still a
dependency).  ``from semiring import expr`` names the module ``semiring.expr``;
``from semiring import monoid`` names the package ``semiring`` itself.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pathlib
import re
import subprocess
import sys

import pytest

from semiring.interfaces import GraphEngine, PairwiseEngine

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAYERS = ("core", "engines", "measures", "command line")

# The rooms, by installed name, and their layers; a module of the package in none of them is core.
ROOMS = {
    "semiring.kernels": "engines",
    "semiring.distances": "measures",
    "semiring.graph": "measures",
    "semiring.cli": "command line",
}

# The names modules had before the graph measures and the command line moved to rooms of their own, each to the
# module now holding what it held; the old name only hands on the new module's names.
OLD_NAMES = {
    "semiring.distances.graph": "semiring.graph.measures",
    "semiring.distances.labelled": "semiring.graph.labelled",
    "semiring.distances.cli": "semiring.cli.commands",
    "semiring.distances.io": "semiring.cli.io",
    "semiring.distances.datasets": "semiring.cli.datasets",
    "semiring.distances.__main__": "semiring.cli.demo",
}


def _room(module: str) -> str | None:
    """The room a module of the package is in (``semiring`` for the core); an old name is in its new module's."""
    module = OLD_NAMES.get(module, module)
    if module != "semiring" and not module.startswith("semiring."):
        return None  # not ours
    return next((room for room in ROOMS if module == room or module.startswith(room + ".")), "semiring")


def _layer(module: str) -> str | None:
    room = _room(module)
    return None if room is None else ROOMS.get(room, "core")


def declared_packages() -> list[str]:
    """The packages ``pyproject.toml`` installs (``[tool.setuptools] packages``): each maps a folder of its own."""
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^packages = \[(.*?)\]", text, re.MULTILINE | re.DOTALL)
    return re.findall(r'"([\w.]+)"', block.group(1))


def installed_modules() -> dict[str, pathlib.Path]:
    """Every module of the installed package, by its installed name: each declared package's folder as the
    import system finds it (``semiring.distances`` in ``distances/``), and the modules in it."""
    modules = {}
    for package in declared_packages():
        spec = importlib.util.find_spec(package)
        modules[package] = pathlib.Path(spec.origin)
        for folder in spec.submodule_search_locations:
            for path in sorted(pathlib.Path(folder).glob("*.py")):
                if path.name != "__init__.py":
                    modules[f"{package}.{path.stem}"] = path
    return modules


def _named_imports(path: pathlib.Path, module: str):
    """``(name, line)`` for every module name an ``import`` statement of the file gives, wherever it stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:  # "from semiring import distances" names a module, "import monoid" a name
                yield f"{target}.{alias.name}", node.lineno


def import_graph(modules: dict[str, pathlib.Path] | None = None) -> dict[str, dict[str, int]]:
    """``{module: {imported module: line}}`` over the package's own modules (others' are left out)."""
    modules = installed_modules() if modules is None else modules
    graph = {}
    for module, path in modules.items():
        arrows = graph.setdefault(module, {})
        for name, line in _named_imports(path, module):
            while name and name not in modules:  # a name of a module's namespace: the module
                name = name.rpartition(".")[0]
            if name and name != module:
                arrows.setdefault(name, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's), each sorted: every import cycle's
    modules are in one of them."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while not part or part[-1] != v:
                part.append(stack.pop())
                on_stack.discard(part[-1])
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


GRAPH = import_graph()


def _describe(part: list[str]) -> str:
    inside = set(part)
    return "; ".join(f"{a} -> {b} (line {line})" for a in part for b, line in GRAPH[a].items() if b in inside)


def test_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, "import cycles:\n" + "\n".join(_describe(part) for part in found)


def upward_arrows(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each import from a module to one of a higher layer, as a sentence."""
    upward = []
    for module, arrows in graph.items():
        own = LAYERS.index(_layer(module))
        for target, line in arrows.items():
            if LAYERS.index(_layer(target)) > own:
                upward.append(f"{module} ({LAYERS[own]}) imports {target} ({_layer(target)}) at line {line}")
    return upward


def test_no_import_runs_back_up_the_layers():
    upward = upward_arrows(GRAPH)
    assert not upward, "\n".join(upward)


def rooms_crossed(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each import from one room into another of the same layer, as a sentence (an old name, imported or
    importing, excepted: it hands on its new room's names, and ``old_names_used`` checks it)."""
    crossed = []
    for module, arrows in graph.items():
        for target, line in arrows.items():
            if module in OLD_NAMES or target in OLD_NAMES:
                continue
            room, other = _room(module), _room(target)
            if room != other and _layer(module) == _layer(target) != "core":
                crossed.append(f"{module} ({room}) imports {target} ({other}) at line {line}")
    return crossed


def test_the_rooms_of_a_layer_stand_apart():
    """The graph measures stand on the core and the engines, not on the distance measures (an expression idiom
    both write, ``root_of_product``, is the core's: ``semiring.expr``), and the distance measures import no graph
    measure but through their old name ``semiring.distances.graph``."""
    crossed = rooms_crossed(GRAPH)
    assert not crossed, "\n".join(crossed)


def old_names_used(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each import of an old name by a module other than the package holding it, and each import of an old name
    that reaches outside its new module's room, as a sentence."""
    found = []
    for module, arrows in graph.items():
        for target, line in arrows.items():
            if target in OLD_NAMES and module != target.rpartition(".")[0]:
                found.append(f"{module} imports the old name {target} at line {line}: use {OLD_NAMES[target]}")
            if module in OLD_NAMES and _room(target) != _room(module):
                found.append(f"{module}, an old name, imports {target} at line {line}")
    return found


def test_old_names_are_kept_and_only_kept():
    """Each old name is a module of the package, importing only its new room; the package itself uses the new
    names."""
    assert set(OLD_NAMES) <= set(GRAPH) and set(OLD_NAMES.values()) <= set(GRAPH)
    found = old_names_used(GRAPH)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_an_old_name_gives_the_moved_objects(old):
    """Every public name of the new module, through the old name, is the same object: code written before the
    move runs unchanged (``from semiring.distances.graph import plus_min``, ``semiring.distances.cli:main``)."""
    new = importlib.import_module(OLD_NAMES[old])
    kept = importlib.import_module(old)
    names = [n for n in vars(new) if not n.startswith("_")]
    assert names and [n for n in names if getattr(kept, n) is not getattr(new, n)] == []


def test_the_commands_answer_to_old_and_new_names():
    """``python -m`` by each name, old and new, reaches the same program (its help: no engine runs)."""
    code = (
        "import contextlib, io, runpy, sys\n"
        "for name in sys.argv[1:]:\n"
        "    sys.argv = [name, '--help']\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "        runpy.run_module(name, run_name='__main__', alter_sys=True)\n"
        "    print(name, '->', out.getvalue().splitlines()[0])\n"
    )
    names = ["semiring.cli", "semiring.distances.cli", "semiring.cli.demo", "semiring.distances"]
    out = subprocess.run([sys.executable, "-c", code, *names], cwd="/", capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert [line.split(" [")[0] for line in out.stdout.splitlines()] == [
        "semiring.cli -> usage: semiring",
        "semiring.distances.cli -> usage: semiring",
        "semiring.cli.demo -> usage: python -m semiring.cli.demo",
        "semiring.distances -> usage: python -m semiring.cli.demo",
    ]


def test_the_graph_is_the_installed_package_and_its_real_imports():
    """Every module of the three folders is in the graph, under its installed name; the arrows it must have
    are there (a measure module imports the core and the driver; a lazy import inside a function counts)."""
    files = {p.resolve() for folder in ("semiring", "kernels", "distances") for p in (ROOT / folder).rglob("*.py")}
    assert {p.resolve() for p in installed_modules().values()} == files, "a package missing from pyproject.toml?"
    assert {"semiring.backend", "semiring.tiling", "semiring.distances.bound"} <= set(
        GRAPH["semiring.distances.pairwise"]
    )
    assert {"semiring.expr", "semiring.graph.labelled"} <= set(GRAPH["semiring.graph.measures"])
    assert {"semiring.graph", "semiring.distances.pairwise", "semiring.cli.io"} <= set(GRAPH["semiring.cli.commands"])
    assert "semiring.kernels.cuda.compile" in GRAPH["semiring.kernels.cuda.launch"]
    assert "semiring" in GRAPH["semiring.kernels.cpu.strategies"]  # from semiring import monoid: the package


def test_the_checks_can_fail():
    """A cycle, an arrow up, rooms crossed and an old name used are found in made-up graphs: the tests above are
    not vacuous."""
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}, "e": {"e": 5}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []
    graph = {"semiring.api": {"semiring.cli.commands": 7}, "semiring.cli.commands": {"semiring.api": 3}}
    assert upward_arrows(graph) == ["semiring.api (core) imports semiring.cli.commands (command line) at line 7"]
    graph = {
        "semiring.graph.measures": {"semiring.cli.io": 5},
        "semiring.distances.pairwise": {"semiring.distances.cli": 9},
    }
    assert upward_arrows(graph) == [
        "semiring.graph.measures (measures) imports semiring.cli.io (command line) at line 5",
        "semiring.distances.pairwise (measures) imports semiring.distances.cli (command line) at line 9",
    ]
    graph = {"semiring.graph.measures": {"semiring.distances.specs": 3, "semiring.expr": 4}}
    assert rooms_crossed(graph) == [
        "semiring.graph.measures (semiring.graph) imports semiring.distances.specs (semiring.distances) at line 3"
    ]
    assert (
        rooms_crossed(
            {"semiring.distances.graph": {"semiring.graph": 4}, "semiring.distances": {"semiring.distances.graph": 10}}
        )
        == []
    )
    graph = {
        "semiring.cli.commands": {"semiring.distances.io": 4},
        "semiring.distances": {"semiring.distances.graph": 10},
        "semiring.distances.graph": {"semiring.graph": 4, "semiring.distances.specs": 5},
    }
    assert old_names_used(graph) == [
        "semiring.cli.commands imports the old name semiring.distances.io at line 4: use semiring.cli.io",
        "semiring.distances.graph, an old name, imports semiring.distances.specs at line 5",
    ]


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
    """Nor Dask: its layer (semiring.dask) imports it only when given a Dask array."""
    code = (
        "import sys, semiring, semiring.distances, semiring.graph, semiring.distances.graph, semiring.dask\n"
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
        "import semiring.graph, semiring.kernels.cuda.graph_source as s; s.render_intersect('total')",
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
    from semiring.interfaces import missing_methods

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


def _members(protocol) -> set[str]:
    """What an interface declares: its methods and its annotated attributes."""
    return {n for n in vars(protocol) if not n.startswith("_")} | set(protocol.__annotations__)


@pytest.mark.parametrize("module", ENGINE_MODULES)
@pytest.mark.parametrize(("attribute", "protocol"), [("ENGINE", PairwiseEngine), ("GRAPH_ENGINE", GraphEngine)])
def test_an_engine_offers_only_what_the_interface_declares(module, attribute, protocol):
    """No public method beside the interface's: what a caller can use is declared, so none is probed."""
    engine = type(getattr(importlib.import_module(module), attribute))
    extra = {n for n in vars(engine) if not n.startswith("_")} - _members(protocol)
    assert not extra, f"{engine.__name__} has {sorted(extra)}, declared on no interface"


def _outside_the_engines(module: str) -> bool:
    return not module.startswith("semiring.kernels") and module != "semiring.interfaces"


def _attributes_read(path: pathlib.Path) -> set[str]:
    return {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}


@pytest.mark.parametrize("protocol", [PairwiseEngine, GraphEngine])
def test_every_declared_member_is_used_by_a_caller(protocol):
    """Nothing declared goes unused: each member is read by some module outside the engines and the interfaces."""
    read = set().union(*(_attributes_read(p) for m, p in installed_modules().items() if _outside_the_engines(m)))
    unused = _members(protocol) - read
    assert not unused, f"{protocol.__name__} declares {sorted(unused)}, which no caller uses"


def test_no_engine_is_probed_for_a_method():
    """Callers use the interface as declared: no getattr/hasattr on an engine (the resolver's guard reads the
    interface statically, in semiring.interfaces), and no branch on an engine's name (ask it what it does)."""
    probes = []
    for module, path in installed_modules().items():
        if not _outside_the_engines(module):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
            ):
                first = ast.unparse(node.args[0]) if node.args else ""
                if "engine" in first.lower() or first in ("eng", "_backend"):
                    probes.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.Compare):  # engine.name == "cpu": a branch on which engine, not on what it says
                sides = [node.left, *node.comparators]
                names = [s for s in sides if isinstance(s, ast.Attribute) and s.attr == "name"]
                literal = [s for s in sides if isinstance(s, ast.Constant) and s.value in ("cpu", "cuda")]
                if literal and any("engine" in ast.unparse(s.value).lower() for s in names):
                    probes.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert not probes, "\n".join(probes)


# Where CuPy may be named: the array-kind module and the GPU engine's package.
CUPY_ROOMS = ("semiring.arrays", "semiring.kernels.cuda")


def test_only_the_arrays_module_and_the_gpu_engine_import_cupy():
    """NumPy-vs-CuPy knowledge in one place: a new device backend is its own engine package plus its array kind in
    semiring.arrays, not an edit of the measures."""
    found = []
    for module, path in installed_modules().items():
        if module.startswith(CUPY_ROOMS):
            continue
        for name, line in _named_imports(path, module):
            if name.split(".")[0] in ("cupy", "cupyx"):
                found.append(f"{module}:{line}: imports {name}")
    assert not found, "\n".join(found)
    assert any(n.split(".")[0] == "cupy" for n, _ in _named_imports(ROOT / "semiring" / "arrays.py", "semiring.arrays"))


def test_the_dask_layer_is_used_through_its_public_names():
    """Dask as a service: callers hand semiring.dask callables through its public names (``__all__``), reach
    none of its internals, and it imports no measure (the layer rule: it is core)."""
    import semiring.dask

    public = set(semiring.dask.__all__)
    reached = []
    for module, path in installed_modules().items():
        tree = ast.parse(path.read_text())
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                for alias in node.names:
                    if (base, alias.name) in (("semiring", "dask"), ("", "dask")) and module.startswith("semiring"):
                        aliases.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            through = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
            if through and node.attr not in public:
                reached.append(f"{module}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not reached, "\n".join(reached)
    assert not [t for t in GRAPH["semiring.dask"] if t.startswith("semiring.distances")]


def test_array_kinds_are_asked_of_the_arrays_module():
    """``semiring.validation`` still answers to the array-kind names it once held, for code written then; the
    package itself asks ``semiring.arrays``."""
    import semiring.arrays

    kinds = {n for n in vars(semiring.arrays) if not n.startswith("_") and callable(vars(semiring.arrays)[n])}
    found = []
    for module, path in installed_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in kinds and ast.unparse(node.value) == "validation":
                found.append(f"{module}:{node.lineno}: validation.{node.attr}")
    assert not found, "ask semiring.arrays:\n" + "\n".join(found)
