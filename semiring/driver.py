"""The one blocked driver: tiles under a working-memory budget, and where results live.

``semiring.pairwise``, ``semiring.distances.pairwise_distances`` and
``NearestNeighbors.kneighbors`` all run through here.  Each hands over two
callables — prepare a batch of X rows on the engine's device, and compute one
tile (those rows × a range of Y rows) there — and the driver decides:

* **how big a tile is**: its temporaries (``bytes_per_entry`` per result
  entry) fit the budget, ``working_memory`` MiB as in scikit-learn (default
  :data:`DEFAULT_WORKING_MEMORY_MIB` on every engine, capped by what the
  engine's device has free).  Y is cut into column tiles only when even
  ``min_rows`` rows against all of it would not fit;
* **where the result goes**: a CuPy caller's result computed on the GPU stays
  on the GPU; otherwise each tile comes back to host memory as it is done, so
  a result larger than the GPU's memory is still computed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import validation
from .engine import SCRATCH_BUDGET, TOPK_EMPTY, PairwiseEngine

# MiB, as scikit-learn's working_memory: the default budget of one tile's temporaries, on every engine.
DEFAULT_WORKING_MEMORY_MIB = 1024


@dataclass(frozen=True)
class Placement:
    """Where the inputs came from and where the result goes."""

    cupy_input: bool  # some input was a CuPy array: the caller gets CuPy back
    on_device: bool  # ... and the engine computes on the GPU, so the result never leaves it

    def give(self, result):
        """The result in the caller's kind: CuPy for CuPy callers (a host result copied up once)."""
        return validation.as_cupy(result) if self.cupy_input and not self.on_device else result


def placement(engine: PairwiseEngine, *inputs) -> Placement:
    cupy_input = any(validation.is_cupy(a) for a in inputs)
    return Placement(cupy_input, cupy_input and engine.device_results)


def check_working_memory(working_memory) -> float | None:
    """``working_memory`` as a positive number of MiB, or None for the default; the one rule every entry states."""
    if working_memory is None:
        return None
    return validation.check_positive(working_memory, "working_memory", "> 0 (MiB)")


def budget_bytes(engine: PairwiseEngine, working_memory: float | None) -> int:
    """The tile budget: ``working_memory`` MiB (checked), or the default, within the engine's own limit."""
    working_memory = check_working_memory(working_memory)
    budget = int((working_memory or DEFAULT_WORKING_MEMORY_MIB) * 2**20)
    limit = engine.memory_limit_bytes()
    return budget if limit is None else max(1, min(budget, limit))


@contextmanager
def scratch_budget(budget: int):
    """Within the block, engines keep their scratch within ``budget`` bytes (``semiring.engine.SCRATCH_BUDGET``):
    the union kernels' per-column arrays fit the working memory as each tile does."""
    token = SCRATCH_BUDGET.set(budget)
    try:
        yield
    finally:
        SCRATCH_BUDGET.reset(token)


def tile_shape(m: int, n: int, bytes_per_entry: int, budget: int, min_rows: int = 1) -> tuple[int, int]:
    """(rows, columns) of a tile of an ``m × n`` result whose temporaries fit ``budget`` bytes.

    All ``n`` columns are one tile while ``min_rows`` rows against them fit;
    otherwise the columns are cut so that they do.  At least one of each.

    >>> tile_shape(1000, 500, 8, 8 * 500 * 10)  # ten rows of 500 fit
    (10, 500)
    >>> tile_shape(1000, 500, 8, 8 * 500 * 10, min_rows=100)  # 100 rows must fit: 50 columns
    (100, 50)
    """
    per_entry = max(1, bytes_per_entry)
    rows_wanted = max(1, min(m, min_rows))
    cols = n if n * per_entry * rows_wanted <= budget else budget // (per_entry * rows_wanted)
    cols = max(1, min(n, cols))
    rows = max(1, min(m, budget // (cols * per_entry)))
    return rows, cols


def ranges(total: int, step: int) -> Iterator[tuple[int, int]]:
    for start in range(0, total, step):
        yield start, min(total, start + step)


def dense(
    engine: PairwiseEngine,
    shape: tuple[int, int],
    dtype,
    bytes_per_entry: int,
    working_memory: float | None,
    on_device: bool,
    rows: Callable[[int, int], Any],
    tile: Callable[[Any, int, int], Any],
):
    """An ``m × n`` result, tile by tile: ``rows(r0, r1)`` prepares X's rows, ``tile(prepared, c0, c1)``
    computes them against Y's rows ``c0:c1`` on the engine's device.

    On the device when ``on_device``, else in host memory.
    """
    m, n = shape
    budget = budget_bytes(engine, working_memory)
    with scratch_budget(budget):
        row_step, col_step = tile_shape(m, n, bytes_per_entry, budget)
        if row_step >= m and col_step >= n:  # one tile: the engine's array is the result
            block = tile(rows(0, m), 0, n)
            return block if on_device else engine.to_host(block)
        out = engine.empty((m, n), dtype) if on_device else np.empty((m, n), dtype)
        for r0, r1 in ranges(m, row_step):
            prepared = rows(r0, r1)
            for c0, c1 in ranges(n, col_step):
                block = tile(prepared, c0, c1)
                if on_device:
                    out[r0:r1, c0:c1] = block
                elif col_step >= n:  # whole rows: a contiguous slice of the result, copied into once
                    engine.to_host(block, out=out[r0:r1])
                else:
                    out[r0:r1, c0:c1] = engine.to_host(block)
                del block  # freed before the next tile is made
        return out


def topk(
    engine: PairwiseEngine,
    shape: tuple[int, int],
    k: int,
    dtype,
    bytes_per_entry: int,
    working_memory: float | None,
    *,
    largest: bool,
    exclude_self: bool,
    rows: Callable[[int, int], Any],
    tile: Callable[[Any, int, int], Any],
    min_rows: int = 1,
    progress=None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of each row of an ``m × n`` result, which never exists whole: host ``(values, indices)``.

    Each tile is merged on the device into the running selection of its rows
    (``engine.topk_push``) and freed before the next is made.  ``exclude_self``:
    row ``i`` does not select column ``i`` (queries that are the index itself).
    ``progress.update(rows)`` is called as row batches finish.
    """
    m, n = shape
    budget = budget_bytes(engine, working_memory)
    with scratch_budget(budget):
        row_step, col_step = tile_shape(m, n, bytes_per_entry + engine.topk_extra_bytes(k), budget, min_rows)
        values, indices = np.empty((m, k), dtype), np.empty((m, k), np.int64)
        for r0, r1 in ranges(m, row_step):
            prepared = rows(r0, r1)
            selection = engine.topk_init(r1 - r0, k, dtype)
            for c0, c1 in ranges(n, col_step):
                block = tile(prepared, c0, c1)
                engine.topk_push(block, c0, r0 if exclude_self else -1, largest, selection)
                del block  # freed before the next tile is made
            values[r0:r1], indices[r0:r1] = engine.topk_finish(selection, largest, dtype)
            if progress is not None:
                progress.update(r1 - r0)
        if (indices == TOPK_EMPTY).any():  # an empty slot left: a driver bug, never a silent answer
            raise RuntimeError("internal error: fewer candidates than k were selected")
        return values, indices
