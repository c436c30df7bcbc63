"""Tool ``graph-work``: the triangle probe's work on R-MAT graphs, counted with NumPy (no GPU).

The probe (``kernels/cuda/graph_source.render_probe``) looks up, for each entry u → v of the degree-oriented
graph L, the elements of N⁺(u) after v: Σ over u of C(d⁺(u), 2), the out-wedges of the degree order.  No choice
of list per edge lowers it much (R-MAT 20: the shorter of that tail and N⁺(v), edge by edge, saves 1 %), so
its growth per edge bounds how the time per edge can hold as R-MAT graphs grow.  Each scale's graph is
``synthetic.rmat`` drawn with NumPy (the graph suite draws with CuPy: the same parameters, another draw).

    python -m benchmarks graph-work --scales 18,20,22 --seed 1 --json benchmarks/results/graph_work.json
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .record import Results
from .synthetic import rmat


def out_degrees(indptr, indices) -> np.ndarray:
    """Each vertex's out-degree in the degree order (u ≺ v: d(u) < d(v), ties by id) of a symmetric CSR graph."""
    n = indptr.size - 1
    degree = np.diff(indptr).astype(np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), degree)
    cols = indices.astype(np.int64)
    before = (degree[rows] < degree[cols]) | ((degree[rows] == degree[cols]) & (rows < cols))
    return np.bincount(rows[before], minlength=n)


def out_wedges(out_degree: np.ndarray) -> int:
    """Σ over u of C(d⁺(u), 2), from the out-degrees (``out_degrees``): the probe's lookups."""
    d = out_degree.astype(np.int64)
    return int((d * (d - 1) // 2).sum())


def add_arguments(p) -> None:
    p.add_argument("--scales", default="18,20,22")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)


def main(args) -> int:
    results = Results("graph-work", args, args.json)
    for scale in (int(s) for s in args.scales.split(",") if s):
        start = time.perf_counter()
        indptr, indices, n = rmat(scale, seed=args.seed, xp=np)
        d = out_degrees(indptr, indices)
        wedges = out_wedges(d)
        edges = int(indices.size) // 2
        results.add(
            {
                "graph": f"rmat{scale}",
                "scale": scale,
                "vertices": n,
                "edges": edges,
                "max_degree": int(np.diff(indptr).max()),
                "max_out_degree": int(d.max()),
                "out_wedges": wedges,
                "out_wedges_per_edge": round(wedges / edges, 2),
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
        del indptr, indices, d
    return results.finish()
