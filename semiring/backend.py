"""The one resolver of ``backend=``: ``"cpu"``, ``"cuda"`` or ``"auto"``, for every public call.

``"auto"`` picks the GPU only when its engine is usable; an explicit request
that cannot run raises with the reason.  Nothing falls back silently.

Engines live in ``semiring.kernels`` and are imported here by name only when a
call asks for one, so importing ``semiring`` loads no engine (and no CuPy):
the layers run one way, core ← engines ← measures ← command line.

>>> from semiring import backend
>>> backend.resolve("cpu")
'cpu'
>>> backend.engine("cpu").name
'cpu'
"""

from __future__ import annotations

import importlib

from . import arrays
from .interfaces import GraphEngine, PairwiseEngine

BACKENDS = ("auto", "cpu", "cuda")

# Where each concrete backend's engines live: a module with ENGINE and GRAPH_ENGINE.
ENGINE_MODULES = {"cpu": "semiring.kernels.cpu", "cuda": "semiring.kernels.cuda"}


def _module(name: str):
    return importlib.import_module(ENGINE_MODULES[name])


def _check_name(backend) -> None:
    if backend not in BACKENDS:
        raise ValueError(
            f"backend must be one of {', '.join(repr(b) for b in BACKENDS)}, got {backend!r}; for example backend='cpu'"
        )


def unavailable_reason(name: str) -> str | None:
    """Why the concrete backend ``name`` cannot run here (a sentence), or None when it can."""
    _check_name(name)
    if name == "auto":
        return None
    return _module(name).ENGINE.unavailable_reason()


def resolve(backend: str) -> str:
    """The concrete backend (``"cpu"`` or ``"cuda"``) for a request, or an error naming the reason."""
    _check_name(backend)
    if backend == "auto":
        return "cpu" if unavailable_reason("cuda") else "cuda"
    reason = unavailable_reason(backend)
    if reason:
        raise RuntimeError(f"backend={backend!r} cannot run: {reason}; backend='cpu' runs everywhere")
    return backend


def available_backends() -> list[str]:
    """The concrete backends usable on this machine, the CPU first.

    >>> "cpu" in available_backends()
    True
    """
    return [name for name in ENGINE_MODULES if not unavailable_reason(name)]


def engine(backend: str) -> PairwiseEngine:
    """The pairwise engine for a request (see :func:`resolve`)."""
    return _module(resolve(backend)).ENGINE


def graph_engine(backend: str) -> GraphEngine:
    """The graph engine for a request (see :func:`resolve`)."""
    return _module(resolve(backend)).GRAPH_ENGINE


def engine_of(A) -> PairwiseEngine:
    """The pairwise engine whose device holds the array A (``semiring.arrays.backend_of``), which checks it where
    it lives (``validation``); A being there, the device is usable."""
    name = arrays.backend_of(A)
    if name is None:
        raise TypeError(f"{type(A).__name__} is a host array: every engine takes it, none holds it")
    return _module(name).ENGINE
