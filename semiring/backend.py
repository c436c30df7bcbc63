"""Backends are explicit: ``"cpu"``, ``"cuda"`` or ``"auto"``.

``"auto"`` picks the GPU only when a GPU engine is present and usable; an
explicit request that cannot run raises with the reason.  Nothing falls back
silently.
"""

from __future__ import annotations

BACKENDS = ("auto", "cpu", "cuda")


def cuda_unavailable_reason() -> str | None:
    """Why ``backend="cuda"`` cannot run here, or None when it can."""
    from semiring.kernels import cuda

    return cuda.unavailable_reason()


def resolve(backend: str) -> str:
    """The concrete backend for a request, or an error naming the reason."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "cpu" if cuda_unavailable_reason() else "cuda"
    if backend == "cuda":
        reason = cuda_unavailable_reason()
        if reason:
            raise RuntimeError(f"backend='cuda' cannot run: {reason}")
    return backend


def available_backends() -> list[str]:
    """The concrete backends usable on this machine."""
    return ["cpu"] + ([] if cuda_unavailable_reason() else ["cuda"])


def engine(backend: str):
    """The engine module (``kernels.cpu`` or ``kernels.cuda``) for a request; see ``resolve``."""
    name = resolve(backend)
    if name == "cuda":
        from semiring.kernels import cuda

        return cuda
    from semiring.kernels import cpu

    return cpu
