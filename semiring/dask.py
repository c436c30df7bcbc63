"""The Dask layer: a service the public calls hand their own single-machine work to, as callables.

A Dask array passed to a public call is read as row blocks: each block holds
whole rows (a SciPy sparse matrix or array, a NumPy array, or their CuPy
kinds).  The public call checks what it can without the data, then gives this
layer callables — compute one pair of blocks, fit a model on one block, ask a
model, assemble and check a graph, compute one block of it — and the layer
places them on the workers and puts the answers together.  It imports no
measure and writes no caller's state (see ``docs/dask.md``):

* :func:`pairs_of_blocks` — a lazy result whose block ``(i, j)`` is the
  caller's function of row block ``i`` of X and row block ``j`` of Y, run on
  the worker that holds them (``semiring.pairwise``, ``pairwise_distances``);
* :class:`ShardedIndex` — models fitted by the caller's function, one a row
  block, each kept by the worker holding it, asked by the caller's functions
  with queries travelling to the shards; :func:`merge` combines their k best
  (``NearestNeighbors``);
* :func:`by_blocks` — a graph assembled and checked once by the caller's
  function, held by every worker (a broadcast), and the caller's per-block
  function run on each row block, the values gathered (the graph measures);
  :func:`kept_blocks` leaves the values on the workers instead
  (:class:`KeptBlocks`: reduced there as a tree, or made one Dask array or
  DataFrame that stays there until computed).

Nothing here imports Dask until a Dask array is passed: :func:`is_dask` reads
the type's module, so ``import semiring`` loads no Dask.
"""

from __future__ import annotations

import functools
import operator
import uuid

import numpy as np
import scipy.sparse as sp

from . import arrays, tiling, validation
from . import backend as _backend


def is_dask(*inputs) -> bool:
    """Whether any input is a Dask collection (told by its type's module: Dask is not imported)."""
    return any(type(a).__module__.split(".")[0] == "dask" for a in inputs)


def as_row_blocks(A, name: str):
    """``A`` as a 2-D Dask array of row blocks, each with every column (a non-Dask ``A`` is one block)."""
    import dask.array as da

    if not is_dask(A):
        if not (sp.issparse(A) or arrays.is_cupy(A)):
            A = np.asarray(A)
        A = da.from_array(A, chunks=A.shape, asarray=False)
    if not isinstance(A, da.Array):
        raise TypeError(f"{name} must be a dask.array.Array of row blocks, got {type(A).__name__}")
    if A.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (rows are samples, columns features), got a Dask array of shape {A.shape}"
        )
    return A.rechunk({1: -1}) if A.numblocks[1] > 1 else A


def known_rows(A, name: str) -> tuple[int, ...]:
    """The row counts of A's blocks; unknown ones (NaN, after filtering) are refused with the fix."""
    rows = A.chunks[0]
    if any(np.isnan(r) for r in rows):
        raise ValueError(f"{name} has blocks of unknown size; call {name}.compute_chunk_sizes() first")
    return tuple(int(r) for r in rows)


def result_dtype(X, Y=None) -> np.dtype:
    """The single-machine result type of X against Y, from the blocks' dtypes and widths alone.

    Checked as the single-machine call checks them (the same messages): value
    types, and equal widths.
    """
    X0 = np.empty((0, X.shape[1]), X.dtype)
    Y0 = None if Y is None else np.empty((0, Y.shape[1]), Y.dtype)
    X0, Y0 = validation.check_pair(X0, Y0)
    return validation.result_dtype(X0, Y0)


def check_call(backend: str, working_memory) -> None:
    """What the workers would refuse, refused now: ``backend``'s name and ``working_memory``.

    Whether the backend can run is the workers' to say (a GPU worker's engine may run where the client cannot).
    """
    if backend not in _backend.BACKENDS:
        _backend.resolve(backend)  # the resolver's message
    tiling.check_working_memory(working_memory)


def meta(like, dtype, *, sparse: bool = False):
    """An empty block of the result's kind: CuPy when ``like``'s blocks are CuPy, NumPy/SciPy otherwise."""
    return arrays.empty_like_kind(like._meta, dtype, sparse=sparse)


def compute(*collections) -> tuple:
    """Dask collections computed (on the client's cluster, or Dask's local scheduler)."""
    import dask

    return dask.compute(*collections)


# --------------------------------------------------------------------------- pairs of row blocks


def _call(X, Y, *mask, func, y_is_x: bool = False):
    try:
        return func(X, Y, mask=mask[0]) if mask else func(X, Y)
    except (ValueError, TypeError) as exc:
        # X against itself: the single-machine call names the column blocks "Y", but the caller gave only X
        message = str(exc)
        if y_is_x and message[:1] == "Y" and message[1:2] in (" ", ":"):
            raise type(exc)("X" + message[1:]) from None
        raise


def block_pairs(func, X, Y, dtype, *, mask=None):
    """The lazy result whose block ``(i, j)`` is ``func(X_i, Y_j)`` (``mask=`` its block of ``mask``).

    X and Y are row-block Dask arrays (:func:`as_row_blocks`); ``Y=None`` is X
    against itself.  Blocks follow X's rows and Y's rows.  A ``mask`` (a SciPy
    sparse matrix or a Dask array of sparse blocks) is cut the same way, and
    each block of the result is then a CSR matrix with its mask block's
    pattern.
    """
    import dask.array as da

    y_is_x = Y is None
    Y = X if Y is None else Y
    args = [X, "ik", Y, "jk"]
    if mask is not None:
        shape = (X.shape[0], Y.shape[0])
        if mask.shape != shape:
            raise ValueError(f"mask has shape {mask.shape} but the result has shape {shape} (rows of X by rows of Y)")
        if not is_dask(mask):
            mask = validation.check_mask(mask, shape)
            mask = da.from_array(mask, chunks=(X.chunks[0], Y.chunks[0]), asarray=False)
        args += [mask.rechunk((X.chunks[0], Y.chunks[0])), "ij"]
    call = functools.partial(_call, func=func, y_is_x=y_is_x)
    kind = meta(X, dtype, sparse=mask is not None)
    return da.blockwise(call, "ij", *args, dtype=dtype, meta=kind, concatenate=True)


def pairs_of_blocks(func, X, Y, *, mask=None, backend: str, working_memory):
    """The whole Dask path of a call of rows against rows: ``func(X_i, Y_j)`` (the single-machine call, its
    options bound) on each pair of row blocks, lazily; the backend's name, ``working_memory`` and the blocks'
    types checked now."""
    check_call(backend, working_memory)
    X = as_row_blocks(X, "X")
    Y = None if Y is None else as_row_blocks(Y, "Y")
    return block_pairs(func, X, Y, result_dtype(X, Y), mask=mask)


# --------------------------------------------------------------------------- the cluster


def distributed_client():
    """The ``distributed`` client Dask computes on, or None on Dask's own local schedulers."""
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _worker_addresses(client) -> list[str]:
    """The cluster's workers now, in order, waiting for one where there is none (all restarting).

    ``client.nthreads()`` names every worker in every ``distributed`` release we take (``scheduler_info()`` lists
    at most five in some, and was once seen empty here, in the test suite on a loaded machine)."""
    workers = sorted(client.nthreads())
    if not workers:
        client.wait_for_workers(1)
        workers = sorted(client.nthreads())
    return workers


# --------------------------------------------------------------------------- a sharded index


def _ready(shard) -> bool:
    return True


def _holders(client, blocks) -> list[list[str]]:
    """The workers holding each of these blocks (Delayed objects or futures) now, sorted, asked of the scheduler
    once (none for a block not yet computed)."""
    from distributed import futures_of

    futures = [futures_of(b) for b in blocks]
    found = client.who_has([f for fs in futures for f in fs]) if any(futures) else {}
    return [sorted({w for f in fs for w in found.get(f.key, ())}) for fs in futures]


def deal_shards(sizes: list, holders: list, workers: list) -> list:
    """The worker each shard is fitted on and kept by: the rows dealt evenly over the workers, each shard left
    with a worker already holding its block while that worker stays within its even share (largest shards
    first), the rest given to the least loaded workers, one holding the block where one ties.

    Every later task of the index runs where its shards are, so the fit sets the balance of every question:
    ``from_array(...).persist()`` once left eight blocks of a million rows on four workers one, one, two and
    four (fits of 0.66 s against 0.3; 8 pairs of shards on one worker, 6 on another, and own-row tasks taken by
    work stealing, their shards copied).

    >>> deal_shards([5, 5, 5, 5], [["a"], ["a"], ["a"], ["b"]], ["a", "b"])
    ['a', 'a', 'b', 'b']
    """
    share = sum(sizes) / max(len(workers), 1)
    load = dict.fromkeys(workers, 0)
    homes = [None] * len(sizes)
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    for i in order:  # kept where its block is, within the share
        near = [w for w in holders[i] if w in load and load[w] + sizes[i] <= share]
        if near:
            homes[i] = min(near, key=lambda w: (load[w], w))
            load[homes[i]] += sizes[i]
    for i in order:
        if homes[i] is None:
            homes[i] = min(workers, key=lambda w: (load[w], w not in holders[i], w))
            load[homes[i]] += sizes[i]
    return homes


class ShardedIndex:
    """Models fitted on the row blocks of a Dask array, each kept by the worker holding its block.

    ``shards`` lists ``(shard, first row, rows)``: the shard a Dask key (a persisted Delayed or a future) or,
    for :meth:`of_model`, one model held on the client.  Dask counts a model's memory as ``sys.getsizeof``
    says (its ``__sizeof__``), so that it prices moving one as it should.
    """

    def __init__(self, X, shards: list, held: bool):
        self.X, self.shards, self.held = X, shards, held

    @classmethod
    def fit(cls, X, fit_block) -> ShardedIndex:
        """``fit_block(rows)`` on each non-empty row block of X (row blocks, their sizes known), on the worker
        holding it, kept there.  Returns when the shards are fitted: any error of theirs is raised here."""
        import dask

        rows = known_rows(X, "X")
        offsets = np.concatenate([[0], np.cumsum(rows)])
        blocks = X.to_delayed()[:, 0]
        kept = [b for b, n in enumerate(rows) if n]
        client = distributed_client()
        if client is None:
            shards = dask.persist(*[dask.delayed(fit_block)(blocks[b]) for b in kept])
        else:
            homes = deal_shards(
                [rows[b] for b in kept], _holders(client, [blocks[b] for b in kept]), _worker_addresses(client)
            )
            fits = []
            for b, home in zip(kept, homes):  # each fit's worker an annotation of its task alone, not its block's
                with dask.annotate(workers=[home], allow_other_workers=True):
                    fits.append(dask.delayed(fit_block)(blocks[b]))
            # One graph: a block not yet computed brings its source into it (from_array's whole matrix), which a
            # persist a shard would send again each time (a 250 MiB matrix in eight blocks: fit 2.5 s against 0.8)
            shards = client.persist(fits, optimize_graph=False)
        dask.compute(*[dask.delayed(_ready)(s) for s in shards])  # waits for the shards; raises their errors
        return cls(X, [(s, int(offsets[b]), rows[b]) for s, b in zip(shards, kept)], held=True)

    @classmethod
    def of_model(cls, model, X, rows: int) -> ShardedIndex:
        """A model fitted on one machine (on rows X) as one shard: sent to each worker that answers queries
        once, as one key of the graph (its prepared device arrays are remade there)."""
        return cls(X, [(model, 0, rows)], held=False)

    def _plan(self, Q, own_queries: bool, part, args_of, holders: list, pairs=None) -> tuple[list, list]:
        """The jobs of a question and their uses: ``(jobs, uses)``.

        A job ``(function, shard, queries, args)`` is ``function(shard, queries, *args)``, the queries ``None``
        (the shard's own rows, each excluding itself), ``("block", q)`` (block q of Q) or ``("rows", b)`` (shard
        b's rows as its fit checked them, ``pairs``' ``rows_of(shard b)`` on its worker: a pair's).  ``uses`` lists,
        for each query block of Q, the ``(job, side)`` its answer combines: the job's whole result
        (``side=None``) or item ``side`` of it.  Every shard answers every block (``args_of(shard size, own,
        shard's first row)``, None: no job); ``own_queries``: a block that is a shard is that shard's own query.

        ``pairs=(pair_part, pair_args, rows_of)``, for the fitted rows as queries under a symmetric measure: each
        pair of shards is asked once, ``pair_part(shard a, rows of shard b, *pair_args(a, b))`` answering both
        blocks (item 0 for b's rows, 1 for a's), on whichever of the two shards' workers (``holders``) has the
        less work so far, the largest pairs placed first.
        """
        rows = known_rows(Q, "X")
        starts = np.concatenate([[0], np.cumsum(rows)])
        block_of = {int(starts[q]): q for q in range(len(rows)) if rows[q]}
        jobs, uses = [], [[] for _ in rows]

        def add(job, *used) -> None:
            for q, side in used:
                uses[q].append((len(jobs), side))
            jobs.append(job)

        paired = pairs is not None and own_queries and self.held
        for q in range(len(rows)):
            if paired and rows[q]:
                continue  # the shard of this block answers below, once a pair
            for i, (_, offset, size) in enumerate(self.shards):
                own = bool(own_queries and rows[q] and offset == starts[q])
                args = args_of(size, own, offset)
                if args is not None:
                    add((part, i, None if own else ("block", q), args), (q, None))
        if not paired:
            return jobs, uses
        pair_part, pair_args, _ = pairs
        load = dict.fromkeys(holders, 0.0)
        for i, (_, offset, size) in enumerate(self.shards):  # each shard's own rows, each pair of them once
            load[holders[i]] += size * size / 2
            args = args_of(size, True, offset)
            if args is not None:
                add((part, i, None, args), (block_of[offset], None))
        ordered = sorted(
            ((a, b) for a in range(len(self.shards)) for b in range(a + 1, len(self.shards))),
            key=lambda ab: -self.shards[ab[0]][2] * self.shards[ab[1]][2],
        )
        placed = []  # (shard run, shard asked, work)
        for a, b in ordered:
            if load[holders[b]] < load[holders[a]]:
                a, b = b, a
            placed.append((a, b, self.shards[a][2] * self.shards[b][2]))
            load[holders[a]] += placed[-1][2]
        # The greedy pass alone left four workers holding two shards each, in row order, with 4 to 9 pairs
        # (3.1 to 6.0 s of tasks at 1,000,000 rows; a task stream on four H200s showed the busiest worker 6.3 s
        # against 4.6): a pair moves to its other shard's worker while that lowers the larger of the two loads.
        moved = True
        while moved:
            moved = False
            for k, (a, b, work) in enumerate(placed):
                if load[holders[b]] + work < load[holders[a]]:
                    load[holders[a]] -= work
                    load[holders[b]] += work
                    placed[k], moved = (b, a, work), True
        for a, b, _ in placed:
            qa, qb = block_of[self.shards[a][1]], block_of[self.shards[b][1]]
            add((pair_part, a, ("rows", b), pair_args(a, b)), (qb, 0), (qa, 1))
        return jobs, uses

    def _lazy_parts(self, blocks, jobs, uses, combine, rows_of=None) -> list:
        """Each query block's ``combine`` of its jobs' answers as a Delayed (Dask's local schedulers)."""
        import dask

        shards = [s for s, _, _ in self.shards]
        if not self.held:
            shards = [dask.delayed(s, name=f"nearest-neighbors-{uuid.uuid4().hex}", traverse=False) for s in shards]
        given = {"block": blocks, "rows": [dask.delayed(rows_of)(s) for s in shards] if rows_of else []}
        done = [dask.delayed(f)(shards[i], _queries(given, q), *args) for f, i, q, args in jobs]
        return [dask.delayed(_combined)([done[j] for j, _ in use], [s for _, s in use], combine) for use in uses]

    def _placed(self, client) -> tuple[list, list, list]:
        """The shards on a ``distributed`` cluster: ``(held, where, holders)``, each shard's future, the
        ``submit`` arguments binding a task to the worker holding it (another only if that one is lost), and
        that worker's address (the shard's own name where none is known).  A model fitted on one machine is
        copied to every worker once instead."""
        import dask
        from distributed import futures_of

        if not self.held:
            held = [client.scatter(self.shards[0][0], broadcast=True, hash=False)]
            return held, [{}], ["everywhere"]
        held = [
            (futures_of(shard) or [client.scatter(dask.compute(shard, scheduler="sync")[0])])[0]
            for shard, _, _ in self.shards
        ]
        found = _holders(client, held)
        where = [{"workers": w or None, "allow_other_workers": True} for w in found]
        return held, where, [w[0] if w else f"shard {i}" for i, w in enumerate(found)]

    def _submitted_parts(self, client, blocks, jobs, uses, combine, held, where, rows_of=None) -> list:
        """As ``_lazy_parts``, as futures computing now on a ``distributed`` cluster: each job on the worker
        holding its shard, so the queries travel to the shards and a shard never leaves its worker (a pair's
        rows are taken from their shard on its own worker, and travel as a block does)."""
        asked = {q[1] for _, _, q, _ in jobs if q is not None and q[0] == "rows"}
        rows = {b: client.submit(rows_of, held[b], pure=False, **where[b]) for b in asked}
        given = {"block": client.compute(list(blocks)), "rows": rows}
        done = [client.submit(f, held[i], _queries(given, q), *args, pure=False, **where[i]) for f, i, q, args in jobs]
        return [
            client.submit(_combined, [done[j] for j, _ in use], [s for _, s in use], combine, pure=False)
            for use in uses
        ]

    def ask(self, Q, own_queries: bool, part, combine, args_of, pairs=None) -> list:
        """Each query block's combined answer: Delayed objects (local schedulers) or futures (a cluster)."""
        blocks = Q.to_delayed()[:, 0]
        client = distributed_client()
        rows_of = None if pairs is None else pairs[2]
        if client is None:
            jobs, uses = self._plan(Q, own_queries, part, args_of, list(range(len(self.shards))), pairs)
            return self._lazy_parts(blocks, jobs, uses, combine, rows_of)
        held, where, holders = self._placed(client)
        jobs, uses = self._plan(Q, own_queries, part, args_of, holders, pairs)
        return self._submitted_parts(client, blocks, jobs, uses, combine, held, where, rows_of)

    def kneighbors(
        self, Q, own_queries: bool, k: int, largest: bool, part, dtype, pair_part=None, pair_rows=None, backend="cpu"
    ):
        """The k best of every shard for each query, merged: Dask arrays ``(distances, indices)`` with Q's row
        blocks.  ``part(shard, queries, k, first row)`` is a shard's ``(distances, global indices)``; the merges
        sort on the device where ``backend`` resolves to the GPU engine on the worker (:func:`merge`).

        ``pair_part`` (a symmetric measure): the fitted rows as queries ask each pair of shards once,
        ``pair_part(shard, rows, k, shard's first row, rows' first row)`` giving both blocks' k best of the
        other, ``((distances, indices) of the rows, (distances, indices) of the shard's rows)``: about half the
        pairs of asking every shard every block.  The rows are ``pair_rows(other shard)``, taken on that shard's
        worker: its rows as its fit checked them, carrying what the check proved, so no pair checks them again
        (a pair of 125,000-row shards spent 74 ms of 0.68 s on an H200's host checking its block and scanning
        its magnitudes)."""
        import dask.array as da

        def args_of(size, own, offset):  # the k a shard can give: a shard queried by itself has one row fewer
            kk = min(k, size - 1) if own else min(k, size)
            return (kk, offset) if kk > 0 or not own else None

        def pair_args(a: int, b: int) -> tuple:
            return k, self.shards[a][1], self.shards[b][1]

        pairs = None if pair_part is None else (pair_part, pair_args, pair_rows)
        combine = functools.partial(merge, k=k, largest=largest, backend=backend)
        merged = self.ask(Q, own_queries, part, combine, args_of, pairs)
        rows = known_rows(Q, "X")
        dist = [_piece(pair, 0, (m, k), dtype) for pair, m in zip(merged, rows)]
        ind = [_piece(pair, 1, (m, k), np.int64) for pair, m in zip(merged, rows)]
        return da.concatenate(dist), da.concatenate(ind)

    def within(self, Q, own_queries: bool, radius: float, part, dtype) -> tuple:
        """Every shard's rows within ``radius`` of each query, side by side: ``(rows, columns, distances)`` on the
        host, rows ascending, each row's entries in index order.  ``part(shard, queries, radius, first row)``
        is a shard's ``(indptr, global columns, distances)``."""

        def args_of(size, own, offset):
            return (radius, offset) if size > int(own) else None

        blocks = self.ask(Q, own_queries, part, _side_by_side, args_of)
        blocks = compute(*blocks) if distributed_client() is None else [f.result() for f in blocks]
        first = np.concatenate([[0], np.cumsum(known_rows(Q, "X"))])
        rows = np.concatenate([b[0] + first[q] for q, b in enumerate(blocks)] or [np.zeros(0, np.int64)])
        cols = np.concatenate([b[1] for b in blocks] or [np.zeros(0, np.int64)])
        dist = np.concatenate([b[2] for b in blocks] or [np.zeros(0, dtype)])
        return rows, cols, dist


def _queries(given: dict, source):
    """A job's queries (``ShardedIndex._plan``): None, or ``given[kind][index]`` for ``source = (kind, index)``."""
    return None if source is None else given[source[0]][source[1]]


def _combined(answers, sides, combine):
    """``combine`` of a query block's jobs' answers, each whole (``side=None``) or its item ``side``."""
    return combine([a if side is None else a[side] for a, side in zip(answers, sides)])


def merge(parts, k: int, largest: bool, backend: str = "cpu"):
    """The ``k`` best of each row over several shards' ``(distances, indices)``, each row best first, as host
    arrays; the sort runs on the GPU where ``backend`` resolves to it here (on the worker).

    Best is the smallest (``largest=False``) or the largest value; NaN comes
    after every number, and equal values (NaNs too) are ordered by index: the
    order of the single-machine selection (``semiring.interfaces``'s top-k).

    Each part is one shard's answer: its indices are rows of that shard (a range no other part's indices
    fall in), each row in the selection's order.  Laid side by side in the order of their ranges, equal values
    stand in index order, so one stable sort by value gives the order (NaN sorts last): a sort by NaN, value and
    index took 0.74 s a block of 125,000 rows and nine parts on the 4-GPU host, a quarter of the all-pairs call.
    The stable sort on the host still took 0.46 s a block there (eight parts), 14 % of the workers' time, and
    takes 0.031 s on the GPU (the parts copied there and the k best back): CuPy's sorts are stable too, with
    NaN last, so the order is the same.

    >>> d = [(np.array([[1.0, 3.0]]), np.array([[4, 5]])), (np.array([[1.0, np.nan]]), np.array([[0, 1]]))]
    >>> merge(d, 3, largest=False)
    (array([[1., 1., 3.]]), array([[0, 4, 5]]))
    """
    parts = sorted(parts, key=lambda p: p[1].min() if p[1].size else -1)  # in the order of their shards' rows
    on_gpu = sum(p[0].size for p in parts) and _backend.resolve(backend) == "cuda"
    load = arrays.to_cupy if on_gpu else np.asarray
    dist, ind = ([load(p[side]) for p in parts] for side in (0, 1))
    xp = arrays.array_module(dist[0])
    dist, ind = xp.concatenate(dist, axis=1), xp.concatenate(ind, axis=1)
    order = xp.argsort(-dist if largest else dist, axis=1, kind="stable")[:, :k]
    best = xp.take_along_axis(dist, order, axis=1), xp.take_along_axis(ind, order, axis=1)
    return tuple(arrays.on_host(a) for a in best)


def _piece(pair, which: int, shape, dtype):
    """Item ``which`` of a block's merged pair (a Delayed or a future) as a Dask array of ``shape``."""
    import dask
    import dask.array as da

    item = dask.delayed(operator.itemgetter(which))(pair)
    return da.from_delayed(item, shape, dtype=dtype, meta=np.empty((0, 0), dtype))


def _side_by_side(parts) -> tuple:
    """One query block's shards' answers as (rows, columns, distances), each row's entries in shard order
    (the shards in row order: index order)."""
    rows = np.concatenate([np.repeat(np.arange(p[0].size - 1), np.diff(p[0])) for p in parts] or [[]])
    order = np.argsort(rows, kind="stable")
    cols = np.concatenate([p[1] for p in parts] or [[]]).astype(np.int64)
    dist = np.concatenate([p[2] for p in parts] or [[]])
    return rows[order].astype(np.int64), cols[order], dist[order]


# --------------------------------------------------------------------------- a graph held by every worker


class Held:
    """A value held by a worker, with what its users derive from it kept beside it (a device copy of a graph
    per engine): made once per worker, dropped with the value.  The keys of one value share one dict (threads
    may make a value twice; either copy is kept)."""

    def __init__(self, value):
        self.value = value
        self._derived: dict = {}

    def derived(self, key, make):
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]

    def __getstate__(self) -> dict:
        return {"value": self.value, "_derived": {}}  # derived values (device arrays) stay where they were made


def row_blocks(indptr: np.ndarray, nblocks: int) -> np.ndarray:
    """``nblocks + 1`` row bounds cutting a CSR matrix into blocks of about equal stored entries.

    >>> row_blocks(np.array([0, 5, 6, 7, 8, 10]), 2).tolist()
    [0, 1, 5]
    """
    targets = np.linspace(0, indptr[-1], nblocks + 1)
    bounds = np.searchsorted(indptr, targets, side="left")
    bounds[0], bounds[-1] = 0, indptr.size - 1
    return np.maximum.accumulate(bounds)


def _assembled(make, *blocks) -> tuple:
    """``(Held(made), made)``: ``made = make`` of the row blocks stacked into one matrix (the caller's assembly
    and checks), held for the workers' blocks and returned for the client's assembly."""
    made = make(arrays.vstack(blocks))
    return Held(made), made


class HeldGraph:
    """A Dask matrix's graph, made (assembled and checked) once and held where it is used: what :func:`hold`
    returns, for the caller to hold and pass to several calls instead of the Dask array.

    ``H`` is the :class:`Held` graph on every worker (a future, after ``Client.replicate``: the broadcast), or
    the Held itself on Dask's local schedulers; :meth:`made` is what the caller's ``make`` returned, on the
    client (from the cluster once, when a result first needs it); ``checks`` the caller's checks it was made
    under, ``nblocks`` the row blocks its work is cut into.
    """

    def __init__(self, A, make, checks, client):
        import dask

        self.checks, self.nblocks = checks, A.numblocks[0]
        self.client_id = None if client is None else client.id
        assembled = dask.delayed(_assembled, nout=2)(make, *A.to_delayed()[:, 0])
        if client is None:
            self.H, self._made = dask.compute(assembled)[0]
            self._future = None
        else:
            self._future = client.compute(assembled)
            self._made = None
            self.H = client.submit(operator.itemgetter(0), self._future)
            client.replicate([self.H], n=len(_worker_addresses(client)))

    def made(self):
        if self._made is None:
            self._made = self._future.result()[1]
        return self._made


def hold(A, make, checks) -> HeldGraph:
    """A's row blocks assembled into one matrix by ``make`` (the caller's assembly and checks) and held by every
    worker of the current cluster (or Dask's local scheduler): see :class:`HeldGraph`."""
    A = as_row_blocks(A, "A")
    return HeldGraph(A, make, checks, distributed_client())


def _held(A, make, checks, client) -> HeldGraph:
    """A's graph held for this call: the caller's :class:`HeldGraph` (checked for this call) or A made anew."""
    if isinstance(A, HeldGraph):
        if A.checks != checks:
            raise ValueError(f"the held graph was checked for {A.checks}, this call asks for {checks}: hold it again")
        if A.client_id != (None if client is None else client.id):
            raise ValueError("the held graph is held by another cluster (or none): hold it again on this one")
        return A
    return hold(A, make, checks)


class KeptBlocks:
    """The values of ``block(H, b, nblocks)`` for each block b of a held graph, left where they were computed:
    futures (submitted at once, block b on worker b mod the number of workers) on a ``distributed`` cluster,
    Delayed objects on Dask's local schedulers.  Nothing comes to the client until asked: :meth:`gather` (every
    value), :meth:`reduce` (one value, combined on the workers), or a Dask collection of them (:meth:`array`,
    :meth:`frame`) that the caller computes when it wants."""

    def __init__(self, held: HeldGraph, block, client):
        import dask

        self.held, self.client = held, client
        nblocks = held.nblocks
        if client is None:
            self.parts = [dask.delayed(block, pure=False)(held.H, b, nblocks) for b in range(nblocks)]
        else:
            workers = _worker_addresses(client)
            self.parts = [
                client.submit(
                    block, held.H, b, nblocks, pure=False, workers=[workers[b % len(workers)]], allow_other_workers=True
                )
                for b in range(nblocks)
            ]

    def gather(self) -> list:
        """Every block's value, on the client."""
        return list(compute(*self.parts)) if self.client is None else self.client.gather(self.parts)

    def reduce(self, combine, fan_in: int = 8):
        """``combine(values)`` over every block's value, as a tree on the workers (``fan_in`` values a task):
        only the last value comes to the client.  ``combine`` must be associative."""
        import dask

        parts = self.parts
        while len(parts) > 1:
            groups = [parts[i : i + fan_in] for i in range(0, len(parts), fan_in)]
            if self.client is None:
                parts = [dask.delayed(combine, pure=False)(g) for g in groups]
            else:
                parts = [self.client.submit(combine, g, pure=False) for g in groups]
        return compute(parts[0])[0] if self.client is None else parts[0].result()

    def array(self, shapes: list, dtype, meta):
        """The blocks' values (arrays or sparse matrices of ``shapes``) as one Dask array, stacked along rows."""
        import dask.array as da

        pieces = [da.from_delayed(p, shape, dtype=dtype, meta=meta) for p, shape in zip(self.parts, shapes)]
        return da.concatenate(pieces) if len(pieces) > 1 else pieces[0]

    def frame(self, meta):
        """The blocks' values (DataFrames of ``meta``'s columns) as the partitions of one Dask DataFrame.

        Needs Dask's DataFrames (``pip install "dask[dataframe]"``: pandas and pyarrow)."""
        try:
            import dask.dataframe as dd
        except ImportError as exc:
            raise ImportError(
                f'a Dask DataFrame result needs dask\'s dataframe module ({exc}): pip install "dask[dataframe]"'
            ) from None
        import dask

        # Each future wrapped in a Delayed: the frame's graph then holds the futures themselves (``futures_of``
        # finds them, and they live as long as the frame), where Dask's expressions would hold only their keys.
        return dd.from_delayed([dask.delayed(p) for p in self.parts], meta=meta, verify_meta=False)


def kept_blocks(A, make, checks, block) -> KeptBlocks:
    """``block(H, b, nblocks)`` for each row block b of the graph, left on the workers (:class:`KeptBlocks`).

    ``A`` is a Dask array, made into the graph for this call by ``make`` (the caller's assembly and checks; see
    :func:`hold`), or a :class:`HeldGraph` the caller holds (made under the same ``checks``, on the same
    cluster), used as it is.  There are as many blocks as A has row blocks."""
    client = distributed_client()
    return KeptBlocks(_held(A, make, checks, client), block, client)


def ask_held(A, make, checks, question):
    """``(held, question(H))``: A's graph held (as :func:`kept_blocks` holds it) and the value of ``question`` of
    it, computed where the graph is (a worker) and brought to the client: a small fact of the graph (its size,
    its blocks' bounds) that the caller needs before it puts the blocks' values together."""
    client = distributed_client()
    held = _held(A, make, checks, client)
    if client is None:
        return held, question(held.H)
    return held, client.submit(question, held.H, pure=False).result()


def by_blocks(A, make, checks, block, assemble):
    """``assemble(made, *[block(H, b, nblocks) for each block b])``, computed: ``made = make(matrix)`` is A's row
    blocks assembled into one matrix and checked by the caller, ``H`` a :class:`Held` of it on every worker.

    ``A`` as in :func:`kept_blocks`.  On a ``distributed`` cluster the blocks are dealt to the workers in turn,
    their values gathered and assembled on the client; otherwise Dask's local scheduler runs them on its
    threads, sharing the graph.
    """
    kept = kept_blocks(A, make, checks, block)
    return assemble(kept.held.made(), *kept.gather())


__all__ = [
    "Held",
    "HeldGraph",
    "KeptBlocks",
    "ShardedIndex",
    "as_row_blocks",
    "ask_held",
    "block_pairs",
    "by_blocks",
    "check_call",
    "compute",
    "distributed_client",
    "hold",
    "is_dask",
    "kept_blocks",
    "known_rows",
    "merge",
    "meta",
    "pairs_of_blocks",
    "result_dtype",
    "row_blocks",
]
