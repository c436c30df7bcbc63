"""``python -m benchmarks <suite> [options]``: one entry point for every suite and tool (see ``__init__``)."""

from __future__ import annotations

import argparse
import importlib
import sys

# name: (module, one line); a module with add_arguments/main(args) gets its options here, the others (tools
# with an argument parser of their own) are called with the rest of the command line.
COMMANDS = {
    "distances": (
        "suite_distances",
        "every measure on the GPU with cuVS, cuSPARSE, cuBLAS, the naive merge, scikit-learn",
    ),
    "knn": ("suite_knn", "k-nearest neighbours on the GPU with cuVS, cuSPARSE, cuBLAS; a subset with scikit-learn"),
    "scale": ("scale", "all-pairs kNN at the sizes users have, ours against cuVS"),
    "retrieval": ("retrieval", "exact inner-product top-k of query batches against an MS MARCO-sized index, with cuVS"),
    "graph": ("suite_graph", "graph measures on R-MAT graphs with cuSPARSE, cuGraph and python-graphblas"),
    "cpu": ("suite_cpu", "the CPU engine with scikit-learn, python-graphblas and networkx"),
    "dask": ("suite_dask", "one GPU against two on Dask"),
    "startup": ("suite_startup", "import and first-call costs, each from a fresh process"),
    "suite-time": ("suite_time", "the test suite's counts and time, as CI runs it"),
    "docs": ("docs", "make the tables of docs/ from the results files (--check: fail where they differ)"),
    "stamp": ("stamp", "fill in the commit of results files written where git was missing"),
    "profile": ("profile_gpu", "tool: a GPU call's stages, time and memory"),
    "cpu-profile": ("profile_cpu", "tool: a CPU call's stages at a thread count"),
    "strategies": ("strategies", "tool: every GPU strategy forced in turn"),
    "cpu-ab": ("cpu_ab", "tool: builds of an engine timed interleaved (the GPU's with --backend cuda)"),
    "graph-work": ("graph_work", "tool: the triangle probe's work (out-wedges) on R-MAT graphs, counted with NumPy"),
    "cpu-union": ("cpu_union", "tool: the CPU engine's union kernels forced in turn"),
    "dense-cpu": ("dense_bench", "tool: the CPU engine's dense paths, their crossover, against scikit-learn and cdist"),
    "dense-gpu": ("dense_gpu", "tool: dense CuPy rows, ours against CuPy's X @ Y.T formulation"),
    "dry-run": ("dry_run", "tool: a GPU suite's Python end to end without a GPU, NumPy standing in for CuPy"),
    "small-call": ("small_call", "tool: a small call's fixed cost (cosine of 200 TF-IDF rows) against scikit-learn"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        lines = [f"  {name:<12} {about}" for name, (_, about) in COMMANDS.items()]
        print("usage: python -m benchmarks <command> [options]   (<command> --help for its options)\n")
        print("\n".join(lines))
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nunknown command {argv[0]!r}", file=sys.stderr)
            return 2
        return 0
    name, rest = argv[0], argv[1:]
    module_name = COMMANDS[name][0]
    try:
        module = importlib.import_module(f"benchmarks.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"benchmarks.{module_name}":
            raise
        print(f"python -m benchmarks {name}: benchmarks/{module_name}.py is not there yet", file=sys.stderr)
        return 2
    if hasattr(module, "add_arguments"):
        parser = argparse.ArgumentParser(
            prog=f"python -m benchmarks {name}", description=module.__doc__.split("\n\n")[0]
        )
        module.add_arguments(parser)
        return int(module.main(parser.parse_args(rest)) or 0)
    sys.argv = [f"-m benchmarks {name}", *rest]  # their own parsers, and "python " + argv as the command they record
    return int(module.main() or 0)


if __name__ == "__main__":
    sys.exit(main())
