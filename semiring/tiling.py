"""The one blocked driver: tiles under a working-memory budget, and where results live.

``semiring.pairwise``, ``semiring.distances.pairwise_distances`` and
``NearestNeighbors``' queries (``kneighbors``, ``radius_neighbors``) all run
through here.  Each hands over two
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

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import arrays, validation
from .interfaces import CALL_CACHE, SCRATCH_BUDGET, TOPK_EMPTY, Expansion, PairwiseEngine, written_into

# A progress bar (anything with ``update(rows)``) that ``dense`` advances as row batches finish, set by a caller
# that shows one (the ``semiring`` command) without a parameter through every public call.
PROGRESS: ContextVar[Any] = ContextVar("PROGRESS", default=None)

# MiB, as scikit-learn's working_memory: the default budget of one tile's temporaries on the host.
DEFAULT_WORKING_MEMORY_MIB = 1024
# A larger working_memory is taken as this (1 EiB: beyond any machine; the engine's own limit applies anyway).
WORKING_MEMORY_CAP_MIB = 2**40
# On a GPU, by default, all a call takes beyond its inputs and its result stays within DEVICE_FREE_SHARE of the
# device memory free when the call starts, at least DEVICE_FLOOR_MIB and at most DEVICE_CAP_MIB; half of that
# goes to the tiles' temporaries, half is left to the engine's own work buffers (densified columns, postings,
# recomputed entries).  Sized from the device, not fixed: at 300,000 nytimes-like rows a fixed 256 MiB made
# tiles of 256 query rows against a fifth of the index, each rebuilding its postings.
DEVICE_FREE_SHARE = 0.25
DEVICE_FLOOR_MIB = 256
DEVICE_CAP_MIB = 16 * 1024


@dataclass(frozen=True)
class Placement:
    """Where the inputs came from and where the result goes."""

    cupy_input: bool  # some input was a CuPy array: the caller gets CuPy back
    on_device: bool  # ... and the engine computes on the GPU, so the result never leaves it

    def give(self, result):
        """The result in the caller's kind: CuPy for CuPy callers (a host result copied up once)."""
        return arrays.as_cupy(result) if self.cupy_input and not self.on_device else result

    def masked(self, engine: PairwiseEngine, mask, M, values):
        """A CSR result with the checked mask M's pattern holding ``values`` (the engine's, in M's order).

        Built on the GPU when the result stays there; else in host memory, a ``csr_array`` for an array mask.
        """
        if self.on_device:
            M = M if arrays.is_cupy(M) else arrays.as_cupy(M)
            return type(M)((values, M.indices.copy(), M.indptr.copy()), shape=M.shape)
        M = arrays.on_host(M)
        kind = sp.csr_array if isinstance(mask, sp.sparray) else sp.csr_matrix
        return self.give(kind((engine.to_host(values), M.indices.copy(), M.indptr.copy()), shape=M.shape))


def placement(engine: PairwiseEngine, *inputs) -> Placement:
    cupy_input = any(arrays.is_cupy(a) for a in inputs)
    return Placement(cupy_input, cupy_input and engine.device_results)


def check_working_memory(working_memory) -> float | None:
    """``working_memory`` as a positive number of MiB, or None for the default; the one rule every entry states."""
    if working_memory is None:
        return None
    return validation.check_positive(working_memory, "working_memory", "> 0 and finite (MiB)", finite=True)


def budget_bytes(engine: PairwiseEngine, working_memory: float | None) -> int:
    """The tile budget: ``working_memory`` MiB (checked), or the default, within the engine's own limit.

    The default is :data:`DEFAULT_WORKING_MEMORY_MIB` on the host, and on a GPU (an engine with
    ``device_results``) :data:`DEVICE_FREE_SHARE` of the device's free memory, within
    [:data:`DEVICE_FLOOR_MIB`, :data:`DEVICE_CAP_MIB`], where half of the budget goes to the tiles and half is
    left to the engine's own buffers.
    """
    working_memory = check_working_memory(working_memory)
    if working_memory is not None:  # at most WORKING_MEMORY_CAP_MIB: int() of 1e308 MiB in bytes overflows
        budget = int(min(working_memory, WORKING_MEMORY_CAP_MIB) * 2**20)
    elif engine.device_results:
        free = 2 * (engine.memory_limit_bytes() or 0)  # the engine's limit is half of what is free
        budget = int(min(DEVICE_CAP_MIB * 2**20, max(DEVICE_FLOOR_MIB * 2**20, DEVICE_FREE_SHARE * free)))
    else:
        budget = DEFAULT_WORKING_MEMORY_MIB * 2**20
    if engine.device_results:
        budget //= 2  # half for the tiles, half left to the engine's own buffers
    limit = engine.memory_limit_bytes()
    return budget if limit is None else max(1, min(budget, limit))


@contextmanager
def scratch_budget(budget: int):
    """Within the block, engines keep their scratch within ``budget`` bytes (``semiring.interfaces.SCRATCH_BUDGET``):
    the union kernels' per-column arrays fit the working memory as each tile does.  The outermost block also
    opens the call's cache (``semiring.interfaces.CALL_CACHE``), dropped as it ends."""
    token = SCRATCH_BUDGET.set(budget)
    cache = CALL_CACHE.set({}) if CALL_CACHE.get() is None else None
    try:
        yield
    finally:
        SCRATCH_BUDGET.reset(token)
        if cache is not None:
            CALL_CACHE.reset(cache)


def tile_shape(m: int, n: int, bytes_per_entry: int, budget: int, min_rows: int = 1) -> tuple[int, int]:
    """(rows, columns) of a tile of an ``m × n`` result whose temporaries fit ``budget`` bytes.

    All ``n`` columns are one tile while ``min_rows`` rows against them fit;
    otherwise the columns are cut so that they do.  The budget has a floor of
    one row of the result (all ``n`` columns): a tiny ``working_memory`` would
    otherwise cut tiles to single entries, a kernel launch each, and a call
    that never ends.

    >>> tile_shape(1000, 500, 8, 1)  # 1 byte: one row a tile, never less
    (1, 500)

    >>> tile_shape(1000, 500, 8, 8 * 500 * 10)  # ten rows of 500 fit
    (10, 500)
    >>> tile_shape(1000, 500, 8, 8 * 500 * 10, min_rows=100)  # 100 rows must fit: 50 columns
    (100, 50)
    """
    per_entry = max(1, bytes_per_entry)
    budget = max(budget, n * per_entry)
    rows_wanted = max(1, min(m, min_rows))
    cols = n if n * per_entry * rows_wanted <= budget else budget // (per_entry * rows_wanted)
    cols = max(1, min(n, cols))
    rows = max(1, min(m, budget // (cols * per_entry)))
    return rows, cols


def dense_tile(
    shape: tuple[int, int], bytes_per_entry: int, budget: int, whole_extra: int | None, in_place: bool = False
) -> tuple[int, int]:
    """(rows, columns) of :func:`dense`'s tiles: the whole result where ``whole_extra`` is given (bytes an entry
    a tile that is the whole result takes beyond it: the engine's array is the result) and those fit ``budget``;
    where the tiles are written into the result (``in_place``), whole rows as many as ``whole_extra`` an entry
    fit ``budget``; else :func:`tile_shape`'s, every entry's ``bytes_per_entry`` (its own buffer among them)
    counted.

    >>> dense_tile((1000, 1000), 12, 2 * 10**6, whole_extra=2)  # 2 bytes an entry beside the result fit
    (1000, 1000)
    >>> dense_tile((1000, 1000), 12, 2 * 10**6, whole_extra=None)
    (166, 1000)
    >>> dense_tile((1000, 1000), 12, 10**6, whole_extra=2, in_place=True)  # rows of the result, 2 bytes an entry
    (500, 1000)
    """
    m, n = shape
    if whole_extra is not None:
        extra = max(0, whole_extra)
        if m * n * extra <= budget:
            return m, n
        if in_place:
            rows, cols = tile_shape(m, n, extra, budget)
            if cols >= n:
                return rows, cols
    return tile_shape(m, n, bytes_per_entry, budget)


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
    out: np.ndarray | None = None,
    held_bytes: int = 0,
    result_extra_bytes: int | None = None,
    symmetric: bool = False,
):
    """An ``m × n`` result, tile by tile: ``rows(r0, r1)`` prepares X's rows, ``tile(prepared, c0, c1)``
    computes them against Y's rows ``c0:c1`` on the engine's device.

    On the device when ``on_device``, else in host memory (in ``out`` when given: a C-contiguous host array
    of the result's shape and type).  ``bytes_per_entry`` counts a tile's own buffer: when one tile on the
    device is the whole result, that buffer is the result and only the rest must fit (:func:`dense_tile`).  On
    the host, where the engine states what it takes beyond a block it writes into the result
    (``result_extra_bytes`` an entry: ``PairwiseEngine.expanded_bytes_per_entry``), each tile is written there
    in place (``semiring.interfaces.RESULT_BLOCK``: rows of the result, or all of it where it fits), no tile
    computed apart and copied; ``symmetric`` (X's rows are Y's and the measure is symmetric): then only the
    tiles on and above the diagonal of row batches are computed, each one's mirror below written as its
    transpose (:func:`_in_place`).  ``held_bytes``: what the caller holds on the
    device for the call beyond its inputs (rows prepared as a measure reads them), taken from the engine's half
    of the budget.
    """
    m, n = shape
    itemsize = np.dtype(dtype).itemsize
    budget = budget_bytes(engine, working_memory)
    if not on_device and out is None:  # the result is no temporary: it must fit host memory, checked before any tile
        validation.check_dense_result(shape, dtype, "compute fewer rows at a time, or the k nearest (kneighbors)")
    # The engine keeps at least a quarter of its half: below that, its slabs and bands would be too thin to run.
    held = held_bytes if engine.device_results else 0
    with scratch_budget(max(budget // 4, budget - held)):  # the engines' own scratch (a union's per-column arrays)
        in_place = not on_device and result_extra_bytes is not None
        whole_extra = max(0, bytes_per_entry - itemsize) if on_device else result_extra_bytes
        row_step, col_step = dense_tile(
            shape, bytes_per_entry, budget, None if out is not None and not in_place else whole_extra, in_place
        )
        if in_place:
            result = np.empty((m, n), dtype) if out is None else out
            if symmetric and m == n and row_step < m:
                batches = list(square_batches(m, max(1, result_extra_bytes), budget))
                return _in_place_upper(engine, result, batches, rows, tile)
            return _in_place(engine, result, row_step, col_step, rows, tile)
        if row_step >= m and col_step >= n:  # one tile: the engine's array is the result
            # The tiles' half of a device budget is left to the engine, less the tile's own temporaries: on
            # scRNA-like unions that keeps the inverted kernel's postings in one slab (52 ms, not 75).
            spare = budget - m * n * max(0, bytes_per_entry - itemsize) if engine.device_results else 0
            with scratch_budget(max(budget // 4, budget + max(0, spare) - held)):
                block = tile(rows(0, m), 0, n)
            _advance(m)
            return block if on_device else engine.to_host(block, out=out)
        if out is None:
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
            _advance(r1 - r0)
        return out


def _written(engine: PairwiseEngine, target: np.ndarray, tile, prepared, c0: int, c1: int) -> None:
    """``tile(prepared, c0, c1)`` written into ``target`` (a view of the host result) by the engine, in place; a
    block the engine made apart all the same (a path that cannot write there) is copied in."""
    with written_into(target):
        block = tile(prepared, c0, c1)
    if block is not target:
        target[...] = engine.to_host(block)


def _in_place(engine: PairwiseEngine, result: np.ndarray, row_step: int, col_step: int, rows, tile) -> np.ndarray:
    """Every tile of ``result`` written in place by the engine: batches of whole rows (C-contiguous views)."""
    m, n = result.shape
    for r0, r1 in ranges(m, row_step):
        prepared = rows(r0, r1)
        for c0, c1 in ranges(n, col_step):
            _written(engine, result[r0:r1, c0:c1], tile, prepared, c0, c1)
        del prepared
        _advance(r1 - r0)
    return result


def square_batches(m: int, bytes_per_entry: int, budget: int) -> Iterator[tuple[int, int]]:
    """Row batches of an ``m × m`` result computed on and above the diagonal only: each batch's rows against
    the columns from its first on (its diagonal tile and the tile right of it) within ``budget`` bytes at
    ``bytes_per_entry`` an entry, one row at least; lower batches, shorter rows, are taller.

    >>> list(square_batches(1000, 2, 2 * 1000 * 400))  # 400 rows of 1,000, then 600 of 600
    [(0, 400), (400, 1000)]
    """
    r0 = 0
    while r0 < m:
        width = m - r0
        r1 = r0 + max(1, min(width, budget // (bytes_per_entry * width)))
        yield r0, r1
        r0 = r1


def _in_place_upper(engine: PairwiseEngine, result: np.ndarray, batches, rows, tile) -> np.ndarray:
    """X against itself, a symmetric measure, written in place tile by tile on and above the diagonal of the row
    ``batches``: each batch's rows against themselves (``tile(prepared, r0, r1)``: the engine mirrors within it
    where it can) and against the rows after it, that tile's mirror below the diagonal written as its
    transpose by the engine (``mirror_into``; a pair computed once, the result exactly symmetric across tiles)."""
    m = result.shape[0]
    for r0, r1 in batches:
        prepared = rows(r0, r1)
        _written(engine, result[r0:r1, r0:r1], tile, prepared, r0, r1)
        if r1 < m:
            upper = result[r0:r1, r1:m]
            _written(engine, upper, tile, prepared, r1, m)
            engine.mirror_into(result[r1:m, r0:r1], upper)
        del prepared
        _advance(r1 - r0)
    return result


def _advance(rows: int) -> None:
    bar = PROGRESS.get()
    if bar is not None:
        bar.update(rows)


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
    on_device: bool = False,
    min_rows: int = 1,
    progress=None,
    symmetric: bool = False,
    both_ways: bool = False,
):
    """The ``k`` best of each row of an ``m × n`` result, which never exists whole: ``(values, indices)``.

    Each tile is merged on the device into the running selection of its rows
    (``engine.topk_push``) and freed before the next is made.  ``exclude_self``:
    row ``i`` does not select column ``i`` (queries that are the index itself).
    ``symmetric``: the queries are the index rows and the measure is symmetric, so on an engine that says
    ``all_pairs_once`` each pair is computed once for both rows' selections (:func:`_topk_all_pairs`).
    The two ``(m, k)`` arrays are on the engine's device when ``on_device``, else in host memory.
    ``progress.update(rows)`` is called as row batches finish.

    ``both_ways``: the rows and the columns are two different sets of rows of one dataset under a symmetric
    measure (the Dask all-pairs kNN, each pair of shards once), and the columns' k best among the rows come too,
    from the same tiles pushed transposed to the columns' selections: ``((values, indices) of the rows,
    (values, indices) of the columns)``, ``min(k, n)`` and ``min(k, m)`` wide.  The columns' selections receive
    the row batches in order, so their candidates arrive in index order, as the selection expects.
    """
    m, n = shape
    budget = budget_bytes(engine, working_memory)
    if symmetric and engine.all_pairs_once and m == n:
        with scratch_budget(budget):
            per_entry = bytes_per_entry + engine.topk_extra_bytes(k)
            step = square_step(m, per_entry, budget)
            if step < m:  # blocks above the diagonal: beside each, one slice of it transposed at a time
                step = square_step(m, per_entry + -(-bytes_per_entry // TRANSPOSE_SLICES), budget)
            batches = list(ranges(m, step))
            selections = _topk_all_pairs(engine, batches, k, dtype, largest, exclude_self, rows, tile, progress)
            answer = _answer(engine, (m, k), dtype, on_device)
            for selection, batch in zip(selections, batches):
                _finish(engine, selection, batch, answer, largest, dtype, on_device)
            return _checked(answer)
    with scratch_budget(budget):
        per_entry = bytes_per_entry + engine.topk_extra_bytes(k)
        if both_ways:  # beside each tile, a slice of it transposed
            per_entry += -(-bytes_per_entry // TRANSPOSE_SLICES)
        row_step, col_step = tile_shape(m, n, per_entry, budget, min_rows)
        k_rows = min(k, n) if both_ways else k
        answer = _answer(engine, (m, k_rows), dtype, on_device)
        columns = engine.topk_init(n, min(k, m), dtype) if both_ways else None
        for r0, r1 in ranges(m, row_step):
            prepared = rows(r0, r1)
            selection = engine.topk_init(r1 - r0, k_rows, dtype)
            for c0, c1 in ranges(n, col_step):
                block = tile(prepared, c0, c1)
                engine.topk_push(block, c0, r0 if exclude_self else -1, largest, selection)
                if columns is not None:
                    _push_transposed(engine, block, r0, c0, False, largest, (columns[0][c0:c1], columns[1][c0:c1]))
                del block  # freed before the next tile is made
            _finish(engine, selection, (r0, r1), answer, largest, dtype, on_device)
            if progress is not None:
                progress.update(r1 - r0)
        if columns is None:
            return _checked(answer)
        other = _answer(engine, (n, min(k, m)), dtype, on_device)
        _finish(engine, columns, (0, n), other, largest, dtype, on_device)
        return _checked(answer), _checked(other)


def square_step(m: int, bytes_per_entry: int, budget: int) -> int:
    """The rows of each batch of an all-pairs selection, whose blocks are batch × batch: as many as fit
    ``budget`` bytes, with the floor of one row of the result (as :func:`tile_shape`'s), at most ``m``.

    >>> square_step(10_000, 8, 8 * 1000 * 1000), square_step(10_000, 8, 1), square_step(50, 8, 2**30)
    (1000, 100, 50)
    """
    per_entry = max(1, bytes_per_entry)
    budget = max(budget, m * per_entry)
    return max(1, min(m, math.isqrt(budget // per_entry)))


def _topk_all_pairs(engine, batches, k, dtype, largest, exclude_self, rows, tile, progress) -> list:
    """The running selections of every batch of rows, each pair of an all-pairs symmetric measure computed once.

    The row batches are also the column batches: batch i's rows are computed against batches j ≥ i only, and
    each block (rows of i × rows of j) is pushed to batch i's selection and, transposed, to batch j's, since
    d(i, j) = d(j, i).  About half the blocks of the full product are computed (b (b + 1) / 2 of b²); the
    selection merges by (value, index) whatever the order blocks arrive in, so the result is the full one's.
    """
    selections = [engine.topk_init(r1 - r0, k, dtype) for r0, r1 in batches]
    for i, (r0, r1) in enumerate(batches):
        prepared = rows(r0, r1)
        for j in range(i, len(batches)):
            c0, c1 = batches[j]
            block = tile(prepared, c0, c1)
            engine.topk_push(block, c0, r0 if exclude_self else -1, largest, selections[i])
            if j > i:  # the diagonal block holds both orders of its pairs already
                _push_transposed(engine, block, r0, c0, exclude_self, largest, selections[j])
            del block  # freed before the next block is made
        if progress is not None:
            progress.update(r1 - r0)
    return selections


# An above-diagonal block reaches its columns' rows a slice of TRANSPOSE_SLICES-th of its columns at a time, each
# slice transposed into a copy: a copy of the whole block took the room of a second one, and all-pairs batches
# sized for both were slower on an H200 than computing every pair (300,000 movielens-like rows: 3.59 s against
# 3.22, benchmarks/results/scale_h200_58c086c_all_pairs_doubled.json).
TRANSPOSE_SLICES = 8


def _push_transposed(engine, block, r0: int, c0: int, exclude_self: bool, largest: bool, selection) -> None:
    """Push ``block`` (rows r0… × columns c0…) to the selection of its columns' rows, in slices of columns."""
    values, ids = selection
    p = block.shape[1]
    step = max(1, -(-p // TRANSPOSE_SLICES))
    for a in range(0, p, step):
        b = min(p, a + step)
        part = _transposed_columns(engine, block, a, b)
        engine.topk_push(part, r0, c0 + a if exclude_self else -1, largest, (values[a:b], ids[a:b]))
        del part


def _transposed_columns(engine, block, a: int, b: int):
    """Columns ``a:b`` of a block, transposed: of the array, or an :class:`Expansion` of its terms' columns
    transposed with the two sides' norms exchanged and Y's cut to the columns (a symmetric measure's expansion
    reads them alike)."""
    if isinstance(block, Expansion):
        terms = [engine.transposed_columns(t, a, b) for t in block.terms]
        return block._replace(terms=terms, xnorms=[y[a:b] for y in block.ynorms], ynorms=block.xnorms)
    return engine.transposed_columns(block, a, b)


def _answer(engine, shape, dtype, on_device: bool):
    """The two empty ``shape`` arrays of a top-k's answer (values, indices), on the engine's device when
    ``on_device``, else in host memory."""
    make = engine.empty if on_device else np.empty
    return make(shape, dtype), make(shape, np.int64)


def _finish(engine, selection, rows: tuple[int, int], answer, largest: bool, dtype, on_device: bool) -> None:
    """The finished selection of the answer's ``rows`` written into it."""
    (r0, r1), (values, indices) = rows, answer
    best_values, best_indices = engine.topk_finish(selection, largest, dtype)
    if on_device:
        values[r0:r1], indices[r0:r1] = best_values, best_indices
    else:
        engine.to_host(best_values, out=values[r0:r1])
        engine.to_host(best_indices, out=indices[r0:r1])


def _checked(answer):
    if bool((answer[1] == TOPK_EMPTY).any()):  # an empty slot left: a driver bug, never a silent answer
        raise RuntimeError("internal error: fewer candidates than k were selected")
    return answer


def selected(
    engine: PairwiseEngine,
    shape: tuple[int, int],
    bytes_per_entry: int,
    working_memory: float | None,
    *,
    rows: Callable[[int, int], Any],
    tile: Callable[[Any, int, int], Any],
    select: Callable[[Any, int, int], Any],
    on_device: bool = False,
    min_rows: int = 1,
    progress=None,
):
    """The entries of an ``m × n`` result that ``select`` keeps, the result never whole: ``(rows, cols,
    values)``, int64 coordinates, rows ascending and, within a row, columns ascending; on the engine's device
    when ``on_device``, else in host memory.

    ``select(block, r0, c0)`` returns the kept entries of one tile as ``Entries`` on the device (block
    coordinates); only they are kept, so memory follows the number kept (a radius query, an ε-graph).
    ``progress.update(rows)`` is called as row batches finish.
    """
    m, n = shape
    budget = budget_bytes(engine, working_memory)
    row_step, col_step = tile_shape(m, n, bytes_per_entry, budget, min_rows)
    keep = (lambda a: a) if on_device else engine.to_host
    found = []
    with scratch_budget(budget):
        for r0, r1 in ranges(m, row_step):
            prepared = rows(r0, r1)
            for c0, c1 in ranges(n, col_step):
                block = tile(prepared, c0, c1)
                kept = select(block, r0, c0)
                values = keep(block[kept.rows, kept.cols])
                rows_found = keep(kept.rows).astype(np.int64) + r0  # int64 before the offset
                found.append((rows_found, keep(kept.cols).astype(np.int64) + c0, values))
                del block, kept  # freed before the next tile is made
            if progress is not None:
                progress.update(r1 - r0)
    if not found:  # an empty m or n
        make = engine.empty if on_device else np.empty
        return make((0,), np.int64), make((0,), np.int64), make((0,), np.float64)
    xp = arrays.array_module(found[0][0])
    r, c, v = (xp.concatenate(parts) for parts in zip(*found))
    order = xp.argsort(r * n + c)  # tiles across the columns arrive row batch by column tile; keys are unique
    return r[order], c[order], v[order]
