"""The one module that talks to the CUDA toolchain (NVRTC through ``cuda-bindings``).

Compiling needs no GPU: CI compiles every rendered kernel for ``sm_90`` here.
"""

from __future__ import annotations

from .cuda_source import KernelSource

DEFAULT_ARCH = "sm_90"


class CompileError(RuntimeError):
    """NVRTC rejected a rendered kernel; the message holds the numbered source and the log."""


def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    _check(nvrtc, err, "nvrtcVersion")
    return major, minor


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {err}")


def compile_kernel(kernel: KernelSource, arch: str = DEFAULT_ARCH, options: tuple[str, ...] = ()) -> bytes:
    """Compile ``kernel`` with NVRTC to a cubin for ``arch``; raise :class:`CompileError` on failure."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise CompileError("NVRTC is not installed: pip install 'sparse-semirings[cuda]' or cuda-bindings") from exc
    err, prog = nvrtc.nvrtcCreateProgram(kernel.source.encode(), f"{kernel.name}.cu".encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", *(o.encode() for o in options)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CompileError(
                f"NVRTC could not compile {kernel.name} for {arch}:\n{log.decode(errors='replace').rstrip()}\n"
                f"--- source ---\n{kernel.numbered()}"
            )
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(nvrtc, err, "nvrtcGetCUBINSize")
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check(nvrtc, err, "nvrtcGetCUBIN")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
