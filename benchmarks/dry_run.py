"""Tool ``dry-run``: a GPU suite's Python run end to end on a machine without a GPU, before device time is spent.

NumPy stands in for CuPy (``cupy``: NumPy with CUDA events read off the host clock, a memory pool that holds
nothing, a device of 64 GiB free), SciPy for ``cupyx.scipy.sparse``, and the CPU engines for the GPU ones
(``backend="cuda"`` and the suites' own calls of the engine). So every line of the suite runs (its data, its
peers' code, its checks, its results file) at whatever size is given, and an error of the suite's own shows
here; what it cannot show is CuPy's or a kernel's behaviour on a device. Its figures are no figures: the file
records the command as ``python -m benchmarks dry-run ...``, and ``python -m benchmarks docs`` refuses it.

    python -m benchmarks dry-run knn --seed 0 --scale 0.01 --subset 64 --check-queries 16 --json /tmp/knn.json
    python -m benchmarks dry-run graph --seed 1 --scales 8,10 --repeats 1 --host-repeats 1 --json /tmp/graph.json
"""

from __future__ import annotations

import sys
import time
import types

import numpy as np
import scipy.sparse as sp


class _Event:
    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass


class _Device:
    def __init__(self, index: int = 0):
        self.id = index
        self.mem_info = (64 * 2**30, 80 * 2**30)
        self.compute_capability = "90"

    def synchronize(self):
        pass


class _Pool:
    def free_all_blocks(self):
        pass

    def total_bytes(self):
        return 0

    def used_bytes(self):
        return 0

    def malloc(self, size):
        return 0


class _Runtime:
    @staticmethod
    def getDeviceCount():  # CuPy's name
        raise RuntimeError("dry run: NumPy stands in for CuPy, there is no device")

    @staticmethod
    def getDeviceProperties(index):  # CuPy's name
        return {"name": b"no device (dry run)", "totalGlobalMem": 80 * 2**30, "memoryClockRate": 1, "memoryBusWidth": 8}

    @staticmethod
    def malloc(size):
        return 1

    @staticmethod
    def free(pointer):
        pass


def stand_ins() -> dict[str, types.ModuleType]:
    """The modules ``cupy``, ``cupyx``, ``cupyx.scipy`` and ``cupyx.scipy.sparse`` as NumPy and SciPy."""
    cupy = types.ModuleType("cupy", "NumPy standing in for CuPy (benchmarks.dry_run)")
    cupy.__dict__.update({k: v for k, v in vars(np).items() if not k.startswith("__")})
    pool = _Pool()
    cupy.__version__ = "dry run"
    cupy.asnumpy = np.asarray
    cupy.get_default_memory_pool = lambda: pool
    cupy.cuda = types.SimpleNamespace(
        Event=_Event,
        Device=_Device,
        runtime=_Runtime,
        get_elapsed_time=lambda start, stop: 1e3 * (stop.t - start.t),
        set_allocator=lambda allocator=None: None,
        PythonFunctionAllocator=lambda malloc, free: types.SimpleNamespace(malloc=malloc),
    )
    cupyx, scipy_ = types.ModuleType("cupyx"), types.ModuleType("cupyx.scipy")
    cupyx.scipy, scipy_.sparse = scipy_, sp
    return {"cupy": cupy, "cupyx": cupyx, "cupyx.scipy": scipy_, "cupyx.scipy.sparse": sp}


def main() -> int:
    import argparse
    import importlib

    from .__main__ import COMMANDS
    from .__main__ import main as benchmarks

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks dry-run", description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1]
    )
    parser.add_argument("suite", help="a suite whose options the entry point parses: distances, knn, graph, retrieval")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the suite's options, as it takes them")
    args = parser.parse_args(sys.argv[1:])
    if args.suite not in COMMANDS or not hasattr(
        importlib.import_module(f"benchmarks.{COMMANDS[args.suite][0]}"), "add_arguments"
    ):
        parser.error(f"{args.suite!r} is not a suite it runs (dask has its own: --backend cpu --cluster local)")
    if "cupy" in sys.modules:
        parser.error("CuPy is imported already: run the suite itself")
    sys.modules.update(stand_ins())
    from semiring.kernels import cpu, cuda

    cuda.ENGINE, cuda.GRAPH_ENGINE = cpu.ENGINE, cpu.GRAPH_ENGINE  # backend="cuda", and the engine itself
    sys.argv = ["-m benchmarks", "dry-run", args.suite, *args.options]  # the command its results file records
    return benchmarks([args.suite, *args.options])
