"""Where the split strategy's time goes: one tile of 4,096 nytimes-like rows against all rows (GPU).

For each row count and heavy-column threshold (``planner.SPLIT_HEAVY_DENSITY``, patched per run), CUDA-event
medians of: cuBLAS's product over the heavy columns, the whole split product (the GEMM, the light columns'
banded scatter-adds, the dense and light copies of the tile's rows), and the top-k merge of the tile.  Time per
pair of rows is the figure that must not grow with the rows (``docs/scale.md``).

    python benchmarks/split_profile.py 40000,300000 OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def event_ms(fn, repeats: int = 3) -> float:
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    fn()  # warm-up: compiles, and the call's layout made
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return float(np.median(times))


def main(argv=None) -> int:
    import cupy
    from cupy import cublas
    from datasets import SPECS, make_dataset

    import semiring
    from semiring.kernels.cuda import launch, planner, strategies, topk

    argv = sys.argv[1:] if argv is None else argv
    results = []
    for rows in (int(r) for r in argv[0].split(",")):
        Y = launch.to_device(make_dataset("nytimes", scale=rows / SPECS["nytimes"].rows, seed=0))
        m = min(rows, 4096)
        Q = launch.row_slice(Y, 0, m)
        for density in (0.03, 0.061):
            planner.SPLIT_HEAVY_DENSITY = density
            heavy, count = planner.heavy_columns(Y, 4, None)
            layout = strategies._split_layout(Y, "float32", np.float32)
            out = cupy.empty((m, rows), cupy.float32)
            dense_x = strategies._dense_columns(Q, Q.data, heavy, count, np.float32)
            gemm = event_ms(lambda a=dense_x, b=layout[2], o=out: cublas.gemm("N", "T", a, b, out=o))
            split = event_ms(lambda o=out, q=Q, y=Y: strategies.split(semiring.plus_times, "float32", q, q.data, y, o))
            selection = topk.topk_init(m, 10, np.float32)
            merge = event_ms(lambda o=out, s=selection: topk.topk_push(o, 0, 0, False, s))
            row = {
                "rows": rows,
                "dens": density,
                "heavy": count,
                "gemm_ms": gemm,
                "split_ms": split,
                "topk_ms": merge,
                "ps_per_pair_split": 1e9 * split / (m * rows),
                "ps_per_pair_light": 1e9 * (split - gemm) / (m * rows),
            }
            print(json.dumps(row), flush=True)
            results.append(row)
            del out, dense_x, layout
            cupy.get_default_memory_pool().free_all_blocks()
    Path(argv[1]).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
