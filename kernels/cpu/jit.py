"""The numba options of every CPU kernel, and generated kernel modules compiled once per machine, not per process.

One place for the options, so that the kernels of every module are compiled
alike:

* ``nogil`` — kernels release the GIL, so callers' threads can overlap them;
* ``error_model="numpy"`` — x/0 gives inf or NaN as in NumPy (the semantics the
  ops are declared with), not a ZeroDivisionError, and divisions need no check;
* ``cache=True`` — compiled machine code is kept on disk and reused by the next
  process (numba's cache, next to the source file or in ``$NUMBA_CACHE_DIR``).

numba caches only functions defined in a real source file.  A semiring's
kernels depend on its ops, so they are *generated*: a template module (a loop
skeleton written once, e.g. ``semiring_template.py``) has an ops block between
``# <ops>`` and ``# </ops>``, which :func:`generate` replaces with the ops
rendered to scalar Python, writes to ``cache_dir()/cpu/<template>_<hash>.py``
and imports.  The file name is a digest of its text, of the engine's source
files the generated code can reach through its imports (``_dependencies``) and
of numba's and Python's versions, so a file is never rewritten once made: numba's cache of it (keyed by
the file's time stamp) stays valid, and a changed kernel gets a new file.
Files are written atomically (a temporary file, then a rename); the folder is
the GPU engine's compile cache (``semiring.settings.cache_dir()``, ``$SEMIRING_CACHE_DIR``), subfolder
``cpu``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import inspect
import os
import pickle
import re
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import ModuleType

import numba

from semiring import expr as _expr
from semiring.settings import cache_dir  # one cache folder for both engines

JIT = {"nogil": True, "error_model": "numpy", "cache": True}

OPS_BEGIN, OPS_END = "# <ops>", "# </ops>"
_HERE = Path(__file__).parent


def scalar_source(name: str, tree: _expr.Node, variables: Sequence[str], params: Sequence[str] = ()) -> str:
    """``def name(*variables, params)`` for ``tree`` as an inlined numba function, as Python source text.

    Numbers are written as float64 (``np.float64(1.0)``), as ``semiring.expr.compile_python`` renders
    them, so that constants follow NumPy's IEEE semantics, not Python's.
    """
    names = {v: v for v in variables}
    names.update({p: f"params[{i}]" for i, p in enumerate(params)})
    float64 = replace(
        _expr._python_dialect(False),
        number=lambda v: f"np.float64({_expr._py_number('np.')(v)})",
        to_number=lambda s: f"(np.float64(1.0) if {s} else np.float64(0.0))",
        # Both sides of a test evaluated, without a branch (they are pure, and the NumPy error model raises
        # nothing): a loop over entries then vectorises, as it does not through Python's short-circuit.
        logic={"and": "&", "or": "|", "not": "not "},
    )
    tree, shared = _shared_subexpressions(tree)
    lines = []
    for temp, sub in shared:
        lines.append(f"    {temp} = {_expr._render(sub, names, float64)}\n")
        names[temp] = temp
    body = _expr._render(tree, names, float64)
    args = ", ".join([*variables, "params"])
    return f'@njit(inline="always", **JIT)\ndef {name}({args}):\n{"".join(lines)}    return {body}\n'


def _shared_subexpressions(tree: _expr.Node) -> tuple[_expr.Node, list[tuple[str, _expr.Node]]]:
    """``tree`` with each numeric subexpression it holds more than once read from a local, and those locals'
    ``(name, subexpression)`` in the order they are computed (each over the ones before).

    A measure's declaration repeats its parts (a clip to [0, 2] of ``1 − c/√(a·b)`` holds that expression three
    times); numba does not merge the copies across the branches of the conditionals, and each costs a square
    root and a division per entry.  Computed once, before the conditionals (pure, and raising nothing under
    NumPy's error model), the loops over entries vectorise.  The largest repeated part is taken first, then the
    parts still repeated after it (its own parts are then held once, in its local); tests (kinds ``cmp``,
    ``and``, ``or``, ``not``) stay in place: they are cheap, and a local would change their type.
    """
    parts: list[_expr.Node] = [tree]  # the tree, then each local's subexpression
    names: list[str] = []

    def walk(n: _expr.Node, counts: dict) -> None:
        if n.kind in ("num", "var"):
            return
        counts[n] = counts.get(n, 0) + 1
        for a in n.args:
            if isinstance(a, _expr.Node):
                walk(a, counts)

    def size(n: _expr.Node) -> int:
        return 1 + sum(size(a) for a in n.args if isinstance(a, _expr.Node))

    def replaced(n: _expr.Node, sub: _expr.Node, var: _expr.Node) -> _expr.Node:
        if n == sub:
            return var
        return _expr.Node(n.kind, tuple(replaced(a, sub, var) if isinstance(a, _expr.Node) else a for a in n.args))

    while True:
        counts: dict = {}
        for part in parts:
            walk(part, counts)
        repeated = [n for n, k in counts.items() if k > 1 and not n.is_bool]
        if not repeated:
            break
        sub = max(repeated, key=size)
        var = _expr.Node("var", (f"_s{len(names)}",))
        parts = [replaced(part, sub, var) for part in parts] + [sub]
        names.append(var.args[0])
    # A later local is a smaller part, which an earlier one may read, never the reverse: computed last first.
    return parts[0], list(zip(reversed(names), reversed(parts[1:])))


# An import of a module of this package: ``from semiring.kernels.cpu.pairwise import ...``, ``from .jit import ...``,
# ``import semiring.kernels.cpu.topk``, ``from . import graph as _graph, elementwise``.
_PACKAGE_IMPORT = re.compile(
    r"^[ \t]*(?:from|import)[ \t]+(?:semiring\.kernels\.cpu\.|\.)(\w+)"
    r"|^[ \t]*from[ \t]+(?:semiring\.kernels\.cpu|\.)[ \t]+import[ \t]+(?:\(([^)]*)\)|([^\n#]+))",
    re.MULTILINE,
)


@cache
def _dependencies(module: str) -> frozenset[str]:
    """The modules of this package ``module``'s code can reach: itself, what it imports from the package, what
    those import, and so on."""
    reached, pending = set(), [module]
    while pending:
        name = pending.pop()
        path = _HERE / f"{name}.py"
        if name in reached or not path.is_file():
            continue
        reached.add(name)
        for single, *listed in _PACKAGE_IMPORT.findall(path.read_text()):
            names = [single] if single else "".join(listed).split(",")
            pending += [name.split(" as ")[0].strip() for name in names]
    return frozenset(reached)


@cache
def _engine_digest(template: str) -> str:
    """A digest of the compiler and of the engine modules a template's kernels can reach (``_dependencies``):
    numba's cache of a generated module is keyed by that file alone and would not see them change.  Modules out
    of reach (the graph kernels, the engine classes) are not in it: editing them recompiles no semiring."""
    h = hashlib.sha256(f"numba {numba.__version__} python {sys.version}".encode())
    for name in sorted(_dependencies(template)):
        h.update(name.encode() + b"\0" + (_HERE / f"{name}.py").read_bytes())
    return h.hexdigest()


def generate(template: str, ops: Mapping[str, str]) -> ModuleType:
    """The template module ``template`` (a module of this package) with its ops block replaced by ``ops``.

    ``ops`` maps each name the block defines to its source (``scalar_source``,
    or an assignment such as ``"UNION = True"``).  The module is written to the
    cache folder (once per text) and imported from there, so numba can cache
    its kernels on disk.
    """
    text = (_HERE / f"{template}.py").read_text()
    head, rest = text.split(OPS_BEGIN, 1)
    _, tail = rest.split(OPS_END, 1)
    block = "\n\n".join(src.rstrip("\n") for src in ops.values())
    text = f"{head}{OPS_BEGIN} generated by semiring.kernels.cpu.jit.generate\n{block}\n{OPS_END}{tail}"
    key = hashlib.sha256((_engine_digest(template) + text).encode()).hexdigest()[:32]
    return _load(_write_once(cache_dir() / "cpu" / f"{template}_{key}.py", text), f"_semiring_cpu_{template}_{key}")


def _write_once(path: Path, text: str) -> Path:
    """``path`` holding ``text``: written atomically unless it already does; a read-only cache falls back to a
    private temporary folder (compiled per process, as without a cache)."""
    try:
        if path.is_file() and _read_or_none(path) == text:  # a damaged file (not even UTF-8) is written again
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".tmp-", suffix=".py", delete=False) as tmp:
            tmp.write(text)
        os.replace(tmp.name, path)
        return path
    except OSError:
        fallback = Path(tempfile.mkdtemp(prefix="semiring-cpu-")) / path.name
        fallback.write_text(text)
        return fallback


def _read_or_none(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def _heal_numba_cache(path: Path) -> None:
    """Remove numba's cache files of the generated module ``path`` that cannot be read back (truncated, or
    overwritten): numba would raise on them at the kernel's first call, where a cache is only an optimisation.
    Each index and data file is unpickled once per process; a damaged one takes its module's others with it,
    and numba compiles and saves them again."""
    folder = path.parent / "__pycache__"
    if not folder.is_dir():
        return
    files = sorted(folder.glob(f"{path.stem}.*.nb[ic]"))
    for f in files:
        try:
            with open(f, "rb") as stream:
                if f.suffix == ".nbi":
                    pickle.load(stream)
                pickle.loads(stream.read())
        except Exception:  # noqa: BLE001 - any failure to read a cache file means: not a cache hit
            for other in files:
                with contextlib.suppress(OSError):
                    other.unlink()
            return


# One module loaded at a time: a thread must not find in sys.modules a module another thread is still executing
# (its kernels not defined yet).
_LOADING = threading.RLock()  # reentrant: a module may import one that generates another


def _load(path: Path, name: str) -> ModuleType:
    with _LOADING:
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # numba (and pickling) find the module of a kernel by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        _heal_numba_cache(path)
        return module


# --------------------------------------------------------------------------- fork safety
#
# numba runs parallel kernels on a threading layer chosen at the first parallel call: TBB where the ``tbb`` package
# is installed (safe under both threads and fork), else OpenMP.  GNU OpenMP (Linux wheels) does not survive fork:
# a child forked after a parallel call is killed by numba at its first parallel kernel ("Terminating: fork() called
# from a process already using GNU OpenMP"), so a multiprocessing fork pool hangs.  The workqueue layer survives
# fork but aborts when two threads launch kernels at once, which the nogil kernels promise to allow; so instead a
# forked child of such a process gets a clear error at its first call, naming the ways out.

FORK_UNSAFE_MESSAGE = (
    "this process was forked after the CPU engine had run on GNU OpenMP threads, which do not survive fork "
    "(numba would kill the process); start worker processes with multiprocessing's 'spawn' or 'forkserver' "
    "method, or install TBB (pip install tbb), whose threads survive fork, or set NUMBA_THREADING_LAYER=workqueue "
    "(fork-safe, but one calling thread at a time)"
)
_forked_after_gnu_openmp = False


def _after_fork_in_child() -> None:
    global _forked_after_gnu_openmp
    try:
        layer = numba.threading_layer()  # ValueError: no parallel kernel ran yet, the child starts its own threads
    except ValueError:
        return
    if layer == "omp":
        from numba.np.ufunc import omppool

        _forked_after_gnu_openmp = omppool.openmp_vendor == "GNU"


os.register_at_fork(after_in_child=_after_fork_in_child)


def check_fork_safe() -> None:
    """Raise a clear ``RuntimeError`` in a child forked from a process whose GNU OpenMP threads it cannot use."""
    if _forked_after_gnu_openmp:
        raise RuntimeError(FORK_UNSAFE_MESSAGE)


def fork_guarded(cls):
    """``cls`` with :func:`check_fork_safe` run first in every public method (the engines' entry points)."""
    for name, method in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(method):
            setattr(cls, name, _guarded(method))
    return cls


def _guarded(method):
    @functools.wraps(method)
    def guarded(*args, **kwargs):
        check_fork_safe()
        return method(*args, **kwargs)

    return guarded
