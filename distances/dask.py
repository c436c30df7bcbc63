"""Dask arrays in the measures: ``pairwise_distances``, ``NearestNeighbors`` and the graph measures.

Each path runs the single-machine code on pieces that fit one worker, on the
engine of the worker that holds them (see ``docs/dask.md``):

* ``pairwise_distances`` — block ``(i, j)`` of the lazy result is the
  single-machine call on row block ``i`` of X and row block ``j`` of Y
  (``semiring.dask.block_pairs``).
* ``NearestNeighbors`` — ``fit`` shards the index by X's row blocks: each
  shard is a single-machine ``NearestNeighbors`` fitted on its worker (its
  rows prepared on that worker's device, kept there).  ``kneighbors`` asks
  every shard for the k best of each block of queries (the single-machine
  ``kneighbors``, tiled under ``working_memory``), adds the shard's first row
  to its indices and merges: smallest first for distances, largest first for
  similarities, NaN last, ties to the smaller index, as one machine orders
  them.  The results are lazy Dask arrays with the queries' row blocks.
  ``radius_neighbors_graph`` asks every shard the same way and puts the
  answers side by side (``within``; the single-machine call builds its CSR matrix).
* graph measures — the graph is assembled and checked once (the
  single-machine checks), held whole by every worker that works on it, and cut
  into row blocks of about equal stored entries; each block's values are the
  masked product ``C⟨P⟩ = G plus.pair Gᵀ`` at its rows' entries (triangles: of
  the oriented graph L), expanded as the single-machine measure does.
  Results come back computed, in the single-machine call's form.

Dask is imported only inside these functions, which run only for Dask input.
"""

from __future__ import annotations

import functools
import uuid
import weakref

import numpy as np
import scipy.sparse as sp

from semiring import arrays
from semiring import backend as _backend
from semiring import dask as _sdask

from . import graph as _graph
from .specs import resolve_metric

# --------------------------------------------------------------------------- pairwise_distances


def pairwise_distances(X, Y, metric: str, backend: str, working_memory, params: dict):
    """The lazy Dask result of ``pairwise_distances``: the single-machine call per pair of row blocks."""
    from .pairwise import pairwise_distances as single_machine

    resolve_metric(metric, params)  # an unknown metric or parameter is named now, not on a worker
    _sdask.check_call(backend, working_memory)
    X = _sdask.as_row_blocks(X, "X")
    Y = None if Y is None else _sdask.as_row_blocks(Y, "Y")
    dtype = _sdask.result_dtype(X, Y)
    func = functools.partial(single_machine, metric=metric, backend=backend, working_memory=working_memory, **params)
    return _sdask.block_pairs(func, X, Y, dtype)


# --------------------------------------------------------------------------- NearestNeighbors


def is_sharded(model) -> bool:
    """Whether ``model`` was fitted on a Dask array (its index is sharded over the workers)."""
    return _sdask.is_dask(model.__dict__.get("_fit_X"))


class _Shard:
    """A single-machine model fitted on one row block, held by its worker.

    Its size is what it holds (the rows, and about as much again for their
    prepared copy on the device), so that Dask counts the memory it takes and
    prices moving it as it should.
    """

    def __init__(self, model):
        self.model = model

    def __sizeof__(self) -> int:
        X = self.model._fit_X
        return 2 * (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)


def _fit_shard(params: dict, rows) -> _Shard:
    from .neighbors import NearestNeighbors

    return _Shard(NearestNeighbors(**params).fit(rows))


def _shard_rows(shard: _Shard) -> int:
    return shard.model.n_samples_fit_


def fit(model, X):
    """Fit ``model`` on a Dask array: one single-machine model per non-empty row block, kept on its worker.

    Like the single-machine ``fit`` this returns when the index is ready: the
    shards are fitted (checked and prepared on their workers' devices) and any
    error of theirs is raised here.
    """
    import dask

    from .neighbors import _check_n_neighbors, effective_metric

    model._resolve()  # the metric and its parameters, checked before any work
    _sdask.check_call(model.backend, model.working_memory)
    _check_n_neighbors(model.n_neighbors, "n_neighbors")
    X = _sdask.as_row_blocks(X, "X")
    _sdask.result_dtype(X)  # the value type, checked now
    rows = _sdask.known_rows(X, "X")
    if X.shape[0] == 0:
        raise ValueError(f"X has 0 samples (shape={X.shape}); NearestNeighbors needs at least one to fit")
    if X.shape[1] == 0:
        raise ValueError(f"X has 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    params = {**model.get_params(), "verbose": False}
    offsets = np.concatenate([[0], np.cumsum(rows)])
    blocks = X.to_delayed()[:, 0]
    kept = [b for b, n in enumerate(rows) if n]
    shards = dask.persist(*[dask.delayed(_fit_shard)(params, blocks[b]) for b in kept])
    dask.compute(*[dask.delayed(_shard_rows)(s) for s in shards])  # waits for the shards; raises their errors
    model._fit_X = X
    model._shards = [(s, int(offsets[b]), rows[b]) for s, b in zip(shards, kept)]
    model.effective_metric_, model.effective_metric_params_ = effective_metric(
        model.metric, model.p, model.metric_params
    )
    model.n_samples_fit_, model.n_features_in_ = X.shape
    model._index_cache = None
    return model


def _shard_kneighbors(shard: _Shard, queries, k: int, offset: int):
    """The shard's k best for each query, indices made global; ``queries=None``: the shard's own rows."""
    dist, ind = shard.model.kneighbors(queries, k)
    return dist, ind + offset


def _lazy_parts(shards, blocks, plan, part, combine) -> list:
    """Each query block's ``combine`` of its shards' ``part(shard, queries, *args)`` as a Delayed (Dask's local
    schedulers); ``plan`` lists per query block its jobs ``(shard, own, *args)``, ``own``: the queries are the
    shard's own rows (``queries=None``)."""
    import dask

    def job(q, i, own, *args):
        return dask.delayed(part)(shards[i][0], None if own else blocks[q], *args)

    return [dask.delayed(combine)([job(q, *j) for j in jobs]) for q, jobs in enumerate(plan)]


def _submitted_parts(client, model, blocks, plan, part, combine) -> list:
    """As ``_lazy_parts``, as futures computing now on a ``distributed`` cluster.

    Each shard's task is bound to the worker holding the shard (another only if that one is lost), so the
    queries travel to the shards and a shard never leaves its worker.  A model fitted on one machine is
    copied to every worker once instead.
    """
    import dask
    from distributed import futures_of

    if is_sharded(model):
        held = [
            futures_of(shard) or [client.scatter(dask.compute(shard, scheduler="sync")[0])]
            for shard, _, _ in model._shards
        ]
        held = [f[0] for f in held]
        holders = client.who_has(held)
        where = [{"workers": list(holders.get(f.key, ())) or None, "allow_other_workers": True} for f in held]
    else:
        held = [client.scatter(_Shard(model), broadcast=True, hash=False)]
        where = [{}]
    queries = client.compute(list(blocks))
    combined = []
    for q, jobs in enumerate(plan):
        parts = [
            client.submit(part, held[i], None if own else queries[q], *args, pure=False, **where[i])
            for i, own, *args in jobs
        ]
        combined.append(client.submit(combine, parts, pure=False))
    return combined


def _shard_plan(model, X, Q, args_of) -> list:
    """Per query block of Q, its jobs ``(shard, own, *args_of(shard size, own, shard's first row))``: every
    shard answers every block; ``X=None`` (the fitted rows as queries): a block that is a shard is that shard's
    own query, each row excluding itself."""
    rows = _sdask.known_rows(Q, "X")
    starts = np.concatenate([[0], np.cumsum(rows)])
    plan = []
    for q in range(len(rows)):
        jobs = []
        for i, (_, offset, size) in enumerate(_shards_of(model)):
            own = X is None and rows[q] and offset == starts[q]
            args = args_of(size, own, offset)
            if args is not None:
                jobs.append((i, own, *args))
        plan.append(jobs)
    return plan


def _shards_of(model) -> list:
    """``(shard, first row, rows)`` of a sharded index, or the one shard of a model fitted on one machine: the
    model itself, one key of the graph, sent to each worker once."""
    import dask

    if is_sharded(model):
        return model._shards
    shard = dask.delayed(_Shard(model), name=f"nearest-neighbors-{uuid.uuid4().hex}", traverse=False)
    return [(shard, 0, model.n_samples_fit_)]


def _combined(model, X, Q, part, combine, args_of) -> list:
    """Each query block's combined answer: Delayed objects (local schedulers) or futures (a cluster)."""
    plan = _shard_plan(model, X, Q, args_of)
    blocks = Q.to_delayed()[:, 0]
    client = _distributed_client()
    if client is None:
        return _lazy_parts(_shards_of(model), blocks, plan, part, combine)
    return _submitted_parts(client, model, blocks, plan, part, combine)


def merge(parts, k: int, largest: bool):
    """The ``k`` best of each row over several shards' ``(distances, indices)``, each row best first.

    Best is the smallest (``largest=False``) or the largest value; NaN comes
    after every number, and equal values (NaNs too) are ordered by index: the
    order of the single-machine selection (``semiring.engine``'s top-k).

    >>> d = [(np.array([[1.0, 3.0]]), np.array([[4, 5]])), (np.array([[1.0, np.nan]]), np.array([[0, 1]]))]
    >>> merge(d, 3, largest=False)
    (array([[1., 1., 3.]]), array([[0, 4, 5]]))
    """
    dist = np.concatenate([p[0] for p in parts], axis=1)
    ind = np.concatenate([p[1] for p in parts], axis=1)
    key = -dist if largest else dist
    nan = np.isnan(key)
    order = np.lexsort((ind, np.where(nan, 0, key), nan), axis=1)[:, :k]
    return np.take_along_axis(dist, order, axis=1), np.take_along_axis(ind, order, axis=1)


def _queries(model, X):
    """The queries as row blocks: X, or the fitted rows for ``X=None``; their width checked."""
    Q = model._fit_X if X is None else _sdask.as_row_blocks(X, "X")
    if Q.shape[1] != model.n_features_in_:
        raise ValueError(
            f"X has {Q.shape[1]} features, but NearestNeighbors is expecting {model.n_features_in_} features "
            "as input (the fitted rows' columns)"
        )
    return Q


def kneighbors(model, X, n_neighbors, return_distance: bool):
    """``kneighbors`` against a sharded index, or with Dask queries: Dask arrays with the queries' row blocks.

    A model fitted on one machine counts as one shard, held by every worker that
    answers queries (the model is sent once per worker; its prepared index is
    remade there).  On Dask's local schedulers the arrays are lazy; on a
    ``distributed`` cluster the work starts at once, each shard's part on the
    worker holding it, and the arrays are backed by its futures.
    """
    import dask.array as da

    k = model._query_k(X, n_neighbors)  # the single-machine checks and messages
    spec, _, _ = model._resolve()
    Q = _queries(model, X)
    dtype = _sdask.result_dtype(Q, model._fit_X)
    rows = _sdask.known_rows(Q, "X")

    def args_of(size, own, offset):  # the k a shard can give: a shard queried by itself has one row fewer
        kk = min(k, size - 1) if own else min(k, size)
        return (kk, offset) if kk > 0 or not own else None

    combine = functools.partial(merge, k=k, largest=spec.similarity)
    merged = _combined(model, X, Q, _shard_kneighbors, combine, args_of)
    dist = [_piece(pair, 0, (m, k), dtype) for pair, m in zip(merged, rows)]
    ind = [_piece(pair, 1, (m, k), np.int64) for pair, m in zip(merged, rows)]
    dist, ind = da.concatenate(dist), da.concatenate(ind)
    return (dist, ind) if return_distance else ind


def _piece(pair, which: int, shape, dtype):
    """Item ``which`` of a block's merged pair (a Delayed or a future) as a Dask array of ``shape``."""
    import operator

    import dask
    import dask.array as da

    item = dask.delayed(operator.itemgetter(which))(pair)
    return da.from_delayed(item, shape, dtype=dtype, meta=np.empty((0, 0), dtype))


def _shard_within(shard: _Shard, queries, radius: float, offset: int) -> tuple:
    """The shard's fitted rows within ``radius`` of each query (``None``: its own rows, each excluding itself)
    as host CSR arrays ``(indptr, columns, distances)``, columns made global row numbers, rows in index order."""
    G = shard.model.radius_neighbors_graph(queries, radius, mode="distance")
    G = arrays.on_host(G)
    return G.indptr, G.indices.astype(np.int64) + offset, G.data


def _side_by_side(parts) -> tuple:
    """One query block's shards' answers as (rows, columns, distances), each row's entries in shard order
    (the shards in row order: index order)."""
    rows = np.concatenate([np.repeat(np.arange(p[0].size - 1), np.diff(p[0])) for p in parts] or [[]])
    order = np.argsort(rows, kind="stable")
    cols = np.concatenate([p[1] for p in parts] or [[]]).astype(np.int64)
    dist = np.concatenate([p[2] for p in parts] or [[]])
    return rows[order].astype(np.int64), cols[order], dist[order]


def within(model, X, radius: float) -> tuple:
    """The fitted rows within ``radius`` of each query, for ``radius_neighbors_graph`` on a sharded index or
    Dask queries: ``((rows, columns, distances), value type, number of queries)`` on the host, rows ascending,
    each row's entries in index order.  Each shard answers every query block with the single-machine call; the
    answers are put side by side, column numbers made global."""
    import dask

    Q = _queries(model, X)
    dtype = _sdask.result_dtype(Q, model._fit_X)

    def args_of(size, own, offset):
        return (radius, offset) if size > int(own) else None

    blocks = _combined(model, X, Q, _shard_within, _side_by_side, args_of)
    blocks = dask.compute(*blocks) if _distributed_client() is None else [f.result() for f in blocks]
    first = np.concatenate([[0], np.cumsum(_sdask.known_rows(Q, "X"))])
    rows = np.concatenate([b[0] + first[q] for q, b in enumerate(blocks)] or [np.zeros(0, np.int64)])
    cols = np.concatenate([b[1] for b in blocks] or [np.zeros(0, np.int64)])
    dist = np.concatenate([b[2] for b in blocks] or [np.zeros(0, dtype)])
    return (rows, cols, dist), dtype, Q.shape[0]


class _Computed:
    """A fitted model as ``kneighbors_graph`` reads it: the neighbours of ``X``, computed on the cluster when asked."""

    def __init__(self, model, X):
        self.model, self.X, self.n_samples_fit_ = model, X, model.n_samples_fit_

    def kneighbors(self, X, n_neighbors=None, return_distance=True):
        import dask

        return dask.compute(*kneighbors(self.model, self.X, n_neighbors, True))


def kneighbors_graph(model, X, n_neighbors, mode: str):
    """The single-machine ``kneighbors_graph`` (its checks, its SciPy CSR matrix) of neighbours from the cluster."""
    return type(model).kneighbors_graph(_Computed(model, X), None, n_neighbors, mode)


# --------------------------------------------------------------------------- graph measures


def _stack(blocks):
    """Row blocks as one matrix of their kind (SciPy, CuPy sparse, or dense)."""
    return arrays.vstack(blocks)


def _checked_graph(blocks, weighted: bool, normalize: bool, measure: str):
    """The whole graph as host CSR, checked (and normalised) as the single-machine call does, and its form."""
    g = _graph._graph(_stack(blocks), "cpu", weighted=weighted, normalize=normalize, measure=measure)
    return g.G, g.kind


def row_blocks(indptr: np.ndarray, nblocks: int) -> np.ndarray:
    """``nblocks + 1`` row bounds cutting a CSR matrix into blocks of about equal stored entries.

    >>> row_blocks(np.array([0, 5, 6, 7, 8, 10]), 2).tolist()
    [0, 1, 5]
    """
    targets = np.linspace(0, indptr[-1], nblocks + 1)
    bounds = np.searchsorted(indptr, targets, side="left")
    bounds[0], bounds[-1] = 0, indptr.size - 1
    return np.maximum.accumulate(bounds)


# Each worker's device copies of the graphs it holds, by id(graph): made once, dropped with the graph.
_DEVICE_GRAPHS: dict[int, dict] = {}


def _on_device(engine, G):
    held = _DEVICE_GRAPHS.get(id(G), {})
    if engine.name not in held:
        device = engine.to_device(G)
        if device is G:  # the CPU engine computes on G itself: nothing to keep
            return G
        if id(G) not in _DEVICE_GRAPHS:
            _DEVICE_GRAPHS[id(G)] = held
            weakref.finalize(G, _DEVICE_GRAPHS.pop, id(G), None)
        held[engine.name] = device
    return held[engine.name]


def _block_rows(G, b: int, nblocks: int) -> tuple[int, int]:
    """The rows of block b of G (``row_blocks``: blocks of about equal stored entries)."""
    r0, r1 = row_blocks(G.indptr, nblocks)[b : b + 2]
    return int(r0), int(r1)


def _block_product(G, b: int, nblocks: int, backend: str, sr):
    """(engine, G on its device, P, c): ``C⟨P⟩ = G ⊕.⊗ Gᵀ`` at P, the entries of block b's rows of G."""
    engine = _backend.graph_engine(backend)
    Gd = _on_device(engine, G)
    r0, r1 = _block_rows(G, b, nblocks)
    s0, s1 = G.indptr[r0], G.indptr[r1]
    indptr = np.concatenate([np.zeros(r0, np.int64), G.indptr[r0 : r1 + 1] - s0, np.full(G.shape[0] - r1, s1 - s0)])
    indptr = indptr.astype(G.indptr.dtype)  # G's index type (it fits): the kernels keep int32 where G has it
    P = sp.csr_matrix((np.ones(s1 - s0), G.indices[s0:s1], indptr), shape=G.shape)
    P.has_canonical_format = True  # G's rows: sorted and unique
    P = engine.to_device(P)
    return engine, Gd, P, engine.masked_product(Gd, P, sr)


def _block_similarity(G, b: int, nblocks: int, name: str, weighted: bool, backend: str) -> np.ndarray:
    """The similarity at the entries of block b's rows: the engine's specialised kernel (each entry from its
    two lists) unweighted, the masked product of the weighted semiring weighted."""
    s = _graph.SIMILARITIES[name]
    if not weighted:
        engine = _backend.graph_engine(backend)
        return engine.to_host(engine.edge_measure(_on_device(engine, G), s.tree, rows=_block_rows(G, b, nblocks)))
    engine, Gd, P, c = _block_product(G, b, nblocks, backend, s.weighted_semiring)
    norms = engine.row_norm(Gd, s.norm_tree)
    return engine.to_host(engine.expand(s.tree, engine.edge_rows(P), P.indices, c, norms))


def _block_counts(G, b: int, nblocks: int, backend: str) -> np.ndarray:
    """The common-neighbour counts at the entries of block b's rows."""
    engine = _backend.graph_engine(backend)
    counts = engine.common_neighbor_counts(_on_device(engine, G), rows=_block_rows(G, b, nblocks))
    return engine.to_host(counts).astype(np.int64)


def _block_triangles(G, b: int, nblocks: int, by_degree: bool, backend: str) -> int:
    """The triangles of part b of the engine's work (the parts' counts sum to the total)."""
    engine = _backend.graph_engine(backend)
    return engine.triangle_count_total(_on_device(engine, G), by_degree, part=(b, nblocks))


def _as_sparse(checked, *values):
    G, kind = checked()
    return _graph._Graph(_backend.graph_engine("cpu"), G, kind).sparse(np.concatenate(values))


def _as_vertex_counts(checked, *counts):
    G, kind = checked()
    running = np.concatenate([[0], np.cumsum(np.concatenate(counts), dtype=np.int64)])
    per_vertex = running[G.indptr[1:]] - running[G.indptr[:-1]]  # each vertex's sum over its edges
    return _graph._Graph(_backend.graph_engine("cpu"), G, kind).dense(per_vertex // 2)


def _pairs_block(G, b: int, nblocks: int, pairs, name: str, weighted: bool, backend: str) -> np.ndarray:
    """Share b of the pairs through the single-machine call (its checks too)."""
    part = np.array_split(pairs, nblocks)[b] if pairs.ndim == 2 else pairs
    return getattr(_graph, name)(G, part, weighted=weighted, backend=backend)


def _concatenated(checked, *values) -> np.ndarray:
    return np.concatenate(values)


def _total(checked, *counts) -> int:
    return sum(counts)


def _distributed_client():
    """The ``distributed`` client Dask computes on, or None on Dask's own local schedulers."""
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


class _HeldGraph:
    """A Dask adjacency matrix's graph, checked and held where it is used.

    ``H`` is the graph G held by every worker (a future, after ``Client.replicate``: the broadcast), or G
    itself on Dask's local schedulers; :meth:`checked` is ``(G, kind)`` on the client (from the cluster
    once, when a result first needs it).
    """

    def __init__(self, A, weighted: bool, normalize: bool, measure: str, client):
        import dask

        made = dask.delayed(_checked_graph, nout=2)(list(A.to_delayed()[:, 0]), weighted, normalize, measure)
        if client is None:
            self._checked = dask.compute(made)[0]
            self.H = self._checked[0]
        else:
            import operator

            self._made = client.compute(made)
            self._checked = None
            self.H = client.submit(operator.itemgetter(0), self._made)
            client.replicate([self.H], n=len(_worker_addresses(client)))

    def checked(self) -> tuple:
        if self._checked is None:
            self._checked = self._made.result()
        return self._checked


# The graph last given on Dask arrays, by key: one graph is kept, so that its several measures, or one
# measure's repeats, assemble, check and broadcast it once; the next graph replaces it (its memory on the
# workers freed).  The key is the Dask array's name (Dask names arrays by what they hold), the checks asked
# for, and the cluster.
_LAST_GRAPH: dict[tuple, _HeldGraph] = {}


def _held_graph(A, weighted: bool, normalize: bool, measure: str, client) -> _HeldGraph:
    key = (A.name, weighted, normalize, None if client is None else client.id)
    if key not in _LAST_GRAPH:
        _LAST_GRAPH.clear()
        _LAST_GRAPH[key] = _HeldGraph(A, weighted, normalize, measure, client)
    return _LAST_GRAPH[key]


def _worker_addresses(client) -> list[str]:
    """The cluster's workers now, in order, waiting for one where there is none (all restarting).

    ``client.nthreads()`` names every worker in every ``distributed`` release we take (``scheduler_info()`` lists
    at most five in some, and was once seen empty here, in the test suite on a loaded machine)."""
    workers = sorted(client.nthreads())
    if not workers:
        client.wait_for_workers(1)
        workers = sorted(client.nthreads())
    return workers


def _by_blocks(A, block, assemble, *, weighted: bool = False, normalize: bool = False, measure: str = ""):
    """``assemble(checked, *[block(H, b, nblocks) for each block b])``, computed, where ``checked()`` gives
    ``(G, kind)``, A's row blocks assembled into the graph G and checked, and ``H`` is G held by every worker
    (``_held_graph``: made once per graph).

    On a ``distributed`` cluster the blocks are dealt to the workers in turn, their values gathered and
    assembled on the client; otherwise Dask's local scheduler runs them on its threads, sharing G.  There are
    as many blocks as A has row blocks.
    """
    import dask

    A = _sdask.as_row_blocks(A, "A")
    nblocks = A.numblocks[0]
    client = _distributed_client()
    held = _held_graph(A, weighted, normalize, measure, client)
    if client is None:
        values = dask.compute(*[dask.delayed(block, pure=False)(held.H, b, nblocks) for b in range(nblocks)])
    else:
        workers = _worker_addresses(client)
        where = [{"workers": [workers[b % len(workers)]], "allow_other_workers": True} for b in range(nblocks)]
        values = client.gather(
            [client.submit(block, held.H, b, nblocks, pure=False, **where[b]) for b in range(nblocks)]
        )
    return assemble(held.checked, *values)


def similarity(name: str, A, pairs, weighted: bool, backend: str, normalize: bool):
    """A graph similarity of a Dask adjacency matrix, computed: the single-machine call's result."""
    _sdask.check_call(backend, None)
    if pairs is None:
        block = functools.partial(_block_similarity, name=name, weighted=weighted, backend=backend)
        return _by_blocks(A, block, _as_sparse, weighted=weighted, normalize=normalize, measure=name)
    block = functools.partial(_pairs_block, pairs=np.asarray(pairs), name=name, weighted=weighted, backend=backend)
    return _by_blocks(A, block, _concatenated, weighted=weighted, normalize=normalize, measure=name)


def common_neighbors(A, normalize: bool, backend: str):
    """``common_neighbors`` of a Dask adjacency matrix, computed: the single-machine call's result."""
    _sdask.check_call(backend, None)
    return _by_blocks(A, functools.partial(_block_counts, backend=backend), _as_sparse, normalize=normalize)


def triangle_count(A, per: str, order: str, normalize: bool, backend: str):
    """``triangle_count`` of a Dask adjacency matrix, computed: the single-machine call's result.

    ``per="total"``: the masked products of row blocks of the oriented graph
    L, summed.  ``"edge"`` and ``"vertex"``: an edge's support is its
    common-neighbour count, a vertex's triangles half the sum over its edges.
    """
    if per not in _graph.PER:
        raise ValueError(f"per must be one of {_graph.PER}, got {per!r}")
    by_degree = _graph._order(order)
    _sdask.check_call(backend, None)
    counts = functools.partial(_block_counts, backend=backend)
    if per == "total":
        return _by_blocks(
            A, functools.partial(_block_triangles, by_degree=by_degree, backend=backend), _total, normalize=normalize
        )
    return _by_blocks(A, counts, _as_sparse if per == "edge" else _as_vertex_counts, normalize=normalize)


def not_at_scale(name: str):
    raise NotImplementedError(
        f"{name} on a Dask array is not supported (its peeling rounds need the whole graph at once); "
        f"compute the graph first: {name}(A.compute(), ...)"
    )


__all__ = [
    "common_neighbors",
    "fit",
    "is_sharded",
    "kneighbors",
    "kneighbors_graph",
    "merge",
    "not_at_scale",
    "pairwise_distances",
    "row_blocks",
    "similarity",
    "triangle_count",
    "within",
]
