"""k-nearest neighbours on the device: the running top-k selection of each query row.

The running selection of m query rows is a pair of (m, k) device arrays,
values and int64 indices, each row sorted best first; every distance block
(queries × a tile of index rows) is merged into it by one warp per row (see
:mod:`.topk_source`), so only m × k pairs persist between tiles.  Empty slots
are ``(NaN, semiring.interfaces.TOPK_EMPTY)``.
"""

from __future__ import annotations

import numpy as np

from semiring.interfaces import TOPK_EMPTY, Expansion

from . import elementwise, launch, topk_source
from .launch import device_params, value_type

# A block whose rows are too few to give each multiprocessor SEGMENT_WARPS_PER_SM warps is selected a segment
# of each row per warp, then the segments' lists merged: at batch 500 against the 8.8 M-row MS MARCO-shaped
# index (tiles of 256 rows × 8.4 M), a warp a row took 246 of a batch's 388 ms on an H200, latency-bound on
# 256 warps.  A segment holds at least SEGMENT_MIN_ENTRIES candidates, so a warp's pass outweighs its merge.
SEGMENT_WARPS_PER_SM = 32
SEGMENT_MIN_ENTRIES = 32 * 512


def topk_init(m: int, k: int, dtype):
    import cupy

    return cupy.full((m, k), np.nan, dtype), cupy.full((m, k), TOPK_EMPTY, np.int64)


def topk_push(block, col0: int, self0: int, largest: bool, selection) -> None:
    """Merge ``block`` (query rows × index rows col0, col0 + 1, …) into ``selection`` in place.

    ``block`` is an array, or an :class:`~semiring.interfaces.Expansion` whose entries the kernel computes as it
    reads them (the distances never written to memory and read back).  ``self0 >= 0``: the block's row r is
    index row self0 + r, which it does not select.
    """
    values, ids = selection
    m, p = block.shape
    k = values.shape[1]
    if m == 0 or p == 0:
        return
    value_name, T = value_type(values.dtype)
    capacity = topk_source.capacity_for(k)
    if capacity is None:
        _topk_by_sorting(_expanded(block, values.dtype), col0, self0, largest, selection)
        return
    if isinstance(block, Expansion):
        tree, names, params, ncols = block.tree, tuple(block.param_names), block.params, block.ncols
        operands = elementwise.operands(T, block.terms, block.xnorms, block.ynorms)
        label = elementwise.label(tree)
    else:
        tree, names, params, ncols, label = topk_source.BLOCK, (), (), 0, "block"
        operands = elementwise.operands(T, [block], [], [])
    threads = 32 * topk_source.WARPS_PER_BLOCK
    rows = (m + topk_source.WARPS_PER_BLOCK - 1) // topk_source.WARPS_PER_BLOCK
    args = (*operands, np.int64(m), np.int64(p), np.int64(ncols), device_params(params))
    args = (*args, np.int64(col0), np.int64(self0), np.int32(k), values, ids)
    count = segments(m, p)
    if count == 1:
        kernel = topk_source.render_topk(value_name, capacity, largest, tree, names, label)
        launch.run(launch.function(kernel), (rows,), (threads,), (*args, np.int64(p), values, ids, ids))
        return
    import cupy

    seg = -(-p // count)
    part_v, part_i = cupy.empty((m, count * k), values.dtype), cupy.empty((m, count * k), np.int64)
    kernel = topk_source.render_topk(value_name, capacity, largest, tree, names, label, mode="segment")
    launch.run(launch.function(kernel), (rows, count), (threads,), (*args, np.int64(seg), part_v, part_i, ids))
    merge = topk_source.render_topk(value_name, capacity, largest, mode="merge")
    args = (
        *elementwise.operands(T, [part_v], [], []),
        np.int64(m),
        np.int64(count * k),
        np.int64(0),
        device_params(()),
    )
    args = (*args, np.int64(0), np.int64(-1), np.int32(k), values, ids, np.int64(count * k), values, ids, part_i)
    launch.run(launch.function(merge), (rows,), (threads,), args)


def segments(m: int, p: int) -> int:
    """The segments each of m rows of p candidates is cut into (1: a warp a row): at most as many as give the
    GPU SEGMENT_WARPS_PER_SM warps a multiprocessor, so the segments' lists (m × segments × k pairs, 12 bytes
    each) stay within a few MiB, and within a grid's second dimension (65,535)."""
    wanted = -(-launch.multiprocessor_count() * SEGMENT_WARPS_PER_SM // max(1, m))
    return max(1, min(wanted, p // SEGMENT_MIN_ENTRIES, 65_535))


def _expanded(block, dtype):
    """``block`` as an array: an :class:`~semiring.interfaces.Expansion` computed into one."""
    if not isinstance(block, Expansion):
        return block
    import cupy

    out = cupy.empty(block.shape, dtype)
    return elementwise.expand(
        block.tree, block.param_names, block.params, block.terms, block.xnorms, block.ynorms, block.ncols, out
    )


def topk_extra_bytes(k: int) -> int:
    """Temporaries per distance-block entry beyond the block: none for the kernel; the sort's for a large k
    (candidate values, indices and keys, their class, two orders)."""
    return 0 if topk_source.capacity_for(k) else 8 + 8 + 8 + 1 + 8 + 8


def _topk_by_sorting(block, col0, self0, largest, selection) -> None:
    """For k beyond the kernels' register lists: stable sorts of the running selection and the block.

    Candidates are laid out by index (the running pairs come from earlier tiles,
    so their indices are smaller, and they are sorted already), so a stable sort
    by value breaks ties by index.  NaN and excluded pairs (the query itself,
    empty slots) are ranked by a second stable sort on their class.
    """
    import cupy

    values, ids = selection
    m, p = block.shape
    k = values.shape[1]
    cand_v = cupy.concatenate([values, block.astype(values.dtype, copy=False)], axis=1)
    cand_i = cupy.concatenate([ids, cupy.broadcast_to(cupy.arange(col0, col0 + p, dtype=np.int64), (m, p))], axis=1)
    nan = cupy.isnan(cand_v)
    excluded = cand_i == TOPK_EMPTY
    if self0 >= 0:
        excluded |= cand_i == cupy.arange(self0, self0 + m, dtype=np.int64)[:, None]
    klass = nan.astype(np.int8) + 2 * excluded.astype(np.int8)  # 0 number, 1 NaN, 2 excluded (3: empty NaN)
    key = cupy.where(nan, 0, -cand_v if largest else cand_v)
    order = cupy.argsort(key, axis=1)
    order = cupy.take_along_axis(order, cupy.argsort(cupy.take_along_axis(klass, order, axis=1), axis=1), axis=1)
    keep = order[:, :k]
    values[...] = cupy.take_along_axis(cand_v, keep, axis=1)
    ids[...] = cupy.take_along_axis(cand_i, keep, axis=1)
    taken = cupy.take_along_axis(klass, keep, axis=1) >= 2
    values[taken], ids[taken] = np.nan, TOPK_EMPTY


def topk_finish(selection, largest: bool, dtype):
    """The selection as device arrays ``(values, indices)``, each row best first."""
    values, ids = selection
    return values.astype(dtype, copy=False), ids
