"""Compiling rendered kernels with NVRTC (``cuda-bindings``), and the compile cache.

The one module that talks to NVRTC.  Compiling needs no GPU: CI compiles every
rendered kernel for ``sm_90`` here.  A failure raises :class:`CompileError`
with the compiler's log and the numbered source.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from semiring.settings import cache_dir

from .source import KernelSource

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


# --------------------------------------------------------------------------- the compile cache
#
# Compiled kernels are kept in memory and on disk, keyed by everything that
# changes the binary and nothing else: the rendered source, the architecture,
# the compiler options and NVRTC's version (so parameter values, which kernels
# read at run time, share one entry).  Disk writes are atomic (a temporary file
# in the same folder, then a rename), and each entry carries a digest of its
# contents: a damaged entry is compiled again and replaced, never loaded.  The folder is
# ``semiring.settings.cache_dir()``.

_FORMAT = b"sparse-semirings cubin v1\n"
_MEMORY: dict[str, bytes] = {}
compile_count = 0  # compiles done by this process (the cache's tests read it)


def cache_key(kernel: KernelSource, arch: str = DEFAULT_ARCH, options: tuple[str, ...] = ()) -> str:
    major, minor = nvrtc_version()
    parts = [kernel.source, arch, "\0".join(options), f"nvrtc {major}.{minor}", _FORMAT.decode()]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def compile_cached(kernel: KernelSource, arch: str = DEFAULT_ARCH, options: tuple[str, ...] = ()) -> bytes:
    """The cubin of ``kernel``: from memory, from the disk cache, or compiled (and then stored)."""
    global compile_count
    key = cache_key(kernel, arch, options)
    if key in _MEMORY:
        return _MEMORY[key]
    path = cache_dir() / f"{key}.cubin"
    cubin = _read_entry(path)
    if cubin is None:
        cubin = compile_kernel(kernel, arch, options)
        compile_count += 1
        _write_entry(path, cubin)
    _MEMORY[key] = cubin
    return cubin


def _read_entry(path: Path) -> bytes | None:
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head, digest, body = blob[: len(_FORMAT)], blob[len(_FORMAT) : len(_FORMAT) + 64], blob[len(_FORMAT) + 64 :]
    if head != _FORMAT or digest != hashlib.sha256(body).hexdigest().encode():
        return None  # damaged or foreign: compile again and replace it
    return body


def _write_entry(path: Path, cubin: bytes) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as tmp:
            tmp.write(_FORMAT + hashlib.sha256(cubin).hexdigest().encode() + cubin)
        os.replace(tmp.name, path)
    except OSError:  # a read-only or full cache only costs recompiling next time
        if tmp is not None and os.path.exists(tmp.name):
            os.unlink(tmp.name)


def clear_memory_cache() -> None:
    _MEMORY.clear()
