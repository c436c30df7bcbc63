"""Nearest neighbours with scikit-learn's ``NearestNeighbors`` API, on any of the measures.

Brute force, as ``sklearn.neighbors.NearestNeighbors(algorithm="brute")``: the
distances from a batch of query rows to a tile of index rows are computed on
the engine's device (the same ``pairwise_distances`` machinery).  For
``kneighbors`` each row's k best are selected there and merged with the best
of the earlier tiles, and only ``n_queries × k`` pairs come back; for
``radius_neighbors`` each tile is thresholded there and only the entries
within the radius come back.  The full query × index matrix never exists:
tiles are sized so the engine's temporaries fit ``working_memory``.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import numbers
import sys
import weakref

import numpy as np
import scipy.sparse as sp

from semiring import arrays, tiling, validation
from semiring import backend as _backend
from semiring import dask as _sdask
from semiring.interfaces import EXPANSION_VARIABLES, DerivedCache, Entries, call_density, held

from . import precomputed as _precomputed
from .bound import BoundMeasure
from .pairwise import check_n_jobs, cpu_threads
from .specs import column_scale, dask_column_defaults, expression, get_metric, resolve_metric, split_columns

# The index is split into tiles only when this many query rows against all of it would not fit.
MIN_QUERY_ROWS = 256
# A progress bar appears only for runs longer than this (seconds).
PROGRESS_DELAY_S = 0.5


# The entries of a tile within the radius: at most it for a distance, at least it for a similarity.
WITHIN = {False: "c0 <= radius", True: "c0 >= radius"}


class NotFittedError(ValueError, AttributeError):
    """A method that needs ``fit`` was called first (as scikit-learn's, a ValueError and an AttributeError).

    Where scikit-learn is loaded, the error raised is also an instance of
    ``sklearn.exceptions.NotFittedError`` (see :func:`not_fitted`), so either
    ``except`` clause catches it; scikit-learn is never imported for it.
    """


def not_fitted(message: str) -> NotFittedError:
    """Our NotFittedError, also scikit-learn's when scikit-learn is loaded (it is not a dependency)."""
    if "sklearn" not in sys.modules:
        return NotFittedError(message)
    return _both_not_fitted()(message)


@functools.cache
def _both_not_fitted() -> type:
    """One class, made once, that is both our NotFittedError and scikit-learn's."""
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    return type("NotFittedError", (NotFittedError, SklearnNotFittedError), {"__module__": __name__})


# The metric whose X is distances already (a square matrix, or a sparse neighbours graph): distances.precomputed.
PRECOMPUTED = "precomputed"

# scikit-learn's algorithms other than brute force: trees, which these measures and engines do not use.
TREES = ("ball_tree", "kd_tree")


def keep_params(estimator, given: dict) -> None:
    """Every parameter of an estimator's ``__init__`` (``locals()`` there) kept as the attribute of its name, and
    nothing else, as scikit-learn's protocol has it (``get_params`` reads them back by the signature)."""
    for name, value in given.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


class NearestNeighbors:
    """Unsupervised k-nearest neighbours, brute force, on the CPU or the GPU engine.

    Parameters
    ----------
    n_neighbors : int, default 5
        Neighbours returned by :meth:`kneighbors` when it is not given one.
    metric : str, default "euclidean"
        Any name or alias of ``distances.METRICS``, or ``"precomputed"``: X
        is a square distance matrix or a sparse neighbours graph (see
        ``semiring.distances.precomputed``).  A callable is refused (every
        measure runs as kernels generated from its declaration).
    radius : float, default 1.0
        The radius of :meth:`radius_neighbors` when it is not given one.  For
        a similarity measure (``inner_product``) *within the radius* means a
        similarity of at least ``radius``; for a distance, at most ``radius``.
    algorithm : {"auto", "brute"}, default "auto"
        Both are brute force (tiles on the engine); scikit-learn's trees
        (``"ball_tree"``, ``"kd_tree"``) are refused with the reason.
    leaf_size : int, default 30
        Accepted for scikit-learn's sake and ignored (there is no tree).
    p : float, default 2
        Minkowski's exponent (``metric="minkowski"``; ignored otherwise, as scikit-learn).
    metric_params : dict, optional
        Further parameters of the measure; a ``"p"`` here wins over ``p``.
        SciPy's per-column ``w`` (and seuclidean's ``V``) go here; seuclidean
        without ``V`` takes the fitted rows' column variances.
    n_jobs : int, optional
        The CPU engine's threads during each call, restored after (``-1``
        all, None the current number); the GPU engine ignores it.
    backend : {"auto", "cpu", "cuda"}
        The engine; ``"auto"`` takes the GPU when it is usable.
    working_memory : float, optional
        MiB (as scikit-learn's) for what a query takes beyond its inputs and
        result; default 1024 on the CPU (``semiring.tiling.DEFAULT_WORKING_MEMORY_MIB``),
        and on a GPU a share of the device's free memory (``semiring.tiling.budget_bytes``).
        Peak memory is about this plus the inputs and the ``n_queries × k``
        result.
    verbose : bool, default True
        Show a progress bar (tqdm) for runs longer than half a second, when
        standard error is a terminal.

    Notes
    -----
    Results are sorted best first: smallest distance first or, for a
    similarity (``inner_product``), largest value first.  Equal values are
    ordered by index; NaN (e.g. cosine of an empty row) comes after every
    number.  ``kneighbors(X=None)`` queries the fitted rows and, as
    scikit-learn, does not count a point as its own neighbour (it is excluded
    by index, so a duplicate of the point can still be its neighbour).

    >>> import numpy as np
    >>> from semiring import distances
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [3.0, 1.0]])
    >>> nn = distances.NearestNeighbors(n_neighbors=2).fit(X)
    >>> dist, ind = nn.kneighbors([[2.9, 0.0]])
    >>> ind, dist.round(2)
    (array([[2, 3]]), array([[0.1, 1. ]]))
    >>> nn.kneighbors(n_neighbors=1)[1].ravel()  # X=None: each fitted row's nearest other row
    array([1, 0, 3, 2])
    """

    def __init__(
        self,
        n_neighbors: int = 5,
        metric: str = "euclidean",
        *,
        radius: float = 1.0,
        algorithm: str = "auto",
        leaf_size: int = 30,
        p: float = 2,
        metric_params: dict | None = None,
        n_jobs: int | None = None,
        backend: str = "auto",
        working_memory: float | None = None,
        verbose: bool = True,
    ):
        keep_params(self, locals())

    # ------------------------------------------------------------------ scikit-learn's estimator protocol

    @classmethod
    def _get_param_names(cls) -> list[str]:
        return sorted(name for name in inspect.signature(cls.__init__).parameters if name != "self")

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params) -> NearestNeighbors:
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid parameters are {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {k: v.default for k, v in inspect.signature(type(self).__init__).parameters.items()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if v is not defaults[k] and v != defaults[k]]
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self):
        """Tags for scikit-learn (>= 1.6), imported only when scikit-learn asks."""
        from sklearn.utils import InputTags, Tags, TargetTags

        pairwise = self.metric == PRECOMPUTED  # scikit-learn's checks then pass square distance matrices
        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            input_tags=InputTags(sparse=True, pairwise=pairwise, positive_only=pairwise),
        )

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "n_samples_fit_")

    def _check_fitted(self) -> None:
        if not self.__sklearn_is_fitted__():
            raise not_fitted(
                f"This {type(self).__name__} instance is not fitted yet: call 'fit' with the index data first"
            )

    def _is_precomputed(self) -> bool:
        """Whether queries read precomputed distances; refused where the fitted rows are of the other kind
        (``set_params(metric=...)`` after ``fit`` crossing between distances and features)."""
        precomputed = self.metric == PRECOMPUTED
        index = self.__dict__.get("_index")
        if precomputed != (isinstance(index, _LocalIndex) and index.precomputed):
            fitted = "precomputed distances" if not precomputed else "feature rows"
            raise ValueError(
                f"metric={self.metric!r} cannot query an estimator fitted on {fitted}: fit it again after "
                "changing metric to or from 'precomputed'"
            )
        return precomputed

    # ------------------------------------------------------------------ fit and query

    def _resolve(self):
        """The measure's spec, its parameter values, and its per-column values (``w``, ``V``; None when not
        given), from metric, p and metric_params."""
        spec = get_metric(self.metric)  # the name first: an unknown metric is named before its params
        if self.metric_params is not None and not isinstance(self.metric_params, dict):
            raise TypeError(f"metric_params must be a dict or None, got {type(self.metric_params).__name__}")
        params = dict(self.metric_params or {})
        if "p" in spec.params:
            params.setdefault("p", self.p)
        params, columns = split_columns(self.metric, params)
        return (*resolve_metric(self.metric, params), columns)

    def _measure(self, spec, values, columns, Q) -> BoundMeasure:
        """The measure bound to the engine for queries Q against the fitted rows; a default ``V`` is the
        fitted rows' (scikit-learn computes it over each call's queries and fitted rows stacked)."""
        X = self._index.X
        scale = column_scale(spec, values, columns, X, X)
        if spec.on_nonnegative is not None and validation.is_nonnegative(X):  # the queries' sign: each call
            spec = spec.for_rows(Q)
        return BoundMeasure(_backend.engine(self.backend), spec, values, validation.result_dtype(Q, X), scale)

    def fit(self, X, y=None) -> NearestNeighbors:
        """Keep X (any SciPy sparse format or a dense 2-D array) as the index; ``y`` is ignored."""
        if _sdask.is_dask(X):  # the index sharded over the workers by X's row blocks (docs/dask.md)
            return self._fit_sharded(X)
        return self._fit_local(X, known_again=True)

    def _fit_local(self, X, known_again: bool) -> NearestNeighbors:
        """``fit`` on one machine.  ``known_again``: a digest of the caller's X is kept, so that ``kneighbors``
        of that matrix, unchanged, reads the prepared rows; a shard (a row block on a worker, asked only by
        its own rows as ``None`` or by other blocks) takes none: the digest of a 125,000-row movielens-like
        block took 0.25 s of its 0.39 s fit on an H200's host."""
        if self.metric == PRECOMPUTED:
            return self._fit_distances(X)
        spec, values, columns = self._resolve()
        engine = _backend.engine(self.backend)  # an unusable backend is refused now, with the reason
        tiling.check_working_memory(self.working_memory)
        _check_n_neighbors(self.n_neighbors, "n_neighbors")
        _check_algorithm(self.algorithm, self.leaf_size)
        check_n_jobs(self.n_jobs)
        given = X
        X = validation.check_matrix(X, "X", verdicts=engine.csr_verdicts)
        shared = _shares_arrays(X, given)
        if shared:
            # The caller's own arrays: a change made to them in place after fit would reach the index half way
            # (its norms were taken at fit), giving answers blended from old and new rows.  The index owns a copy.
            X = _owned_copy(X)
        if X.shape[0] == 0:
            raise ValueError(f"X has 0 samples (shape={X.shape}); NearestNeighbors needs at least one to fit")
        if X.shape[1] == 0:
            raise ValueError(f"X has 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
        if spec.nonnegative:
            validation.check_nonnegative(X, "X", spec.name)
        self._index = _LocalIndex(X)
        if shared and known_again:
            self._index.source = _Source.of(given)
        self.effective_metric_, self.effective_metric_params_ = effective_metric(
            self.metric, self.p, self.metric_params
        )
        self.n_samples_fit_, self.n_features_in_ = X.shape
        measure = self._measure(spec, values, columns, X)
        with cpu_threads(self.n_jobs, measure.engine):
            self._index.prepare(measure)
        return self

    @property
    def _fit_X(self):
        """The fitted rows under scikit-learn's name for them, which its idioms read: a SciPy CSR matrix (the
        distances for ``metric="precomputed"``), or the Dask array of a sharded index."""
        return self._index.X

    def _fit_sharded(self, X) -> NearestNeighbors:
        """``fit`` on a Dask array: one single-machine model per non-empty row block, fitted and kept on the
        worker holding it (``self._index``, a ``semiring.dask.ShardedIndex``).  As the single-machine ``fit``,
        returns when the index is ready: the shards are fitted (checked and prepared on their workers' devices),
        their errors raised here."""
        self._resolve()  # the metric and its parameters, checked before any work
        _sdask.check_call(self.backend, self.working_memory)
        _check_n_neighbors(self.n_neighbors, "n_neighbors")
        X = _sdask.as_row_blocks(X, "X")
        _sdask.result_dtype(X)  # the value type, checked now
        _sdask.known_rows(X, "X")
        if X.shape[0] == 0:
            raise ValueError(f"X has 0 samples (shape={X.shape}); NearestNeighbors needs at least one to fit")
        if X.shape[1] == 0:
            raise ValueError(f"X has 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
        params = {**self.get_params(), "verbose": False}
        # A default computed from all the fitted rows (seuclidean's V): over the whole Dask input, not per shard.
        params["metric_params"] = dask_column_defaults(self.metric, dict(self.metric_params or {}), X) or None
        self._index = _sdask.ShardedIndex.fit(X, functools.partial(_fit_shard, params))
        self.effective_metric_, self.effective_metric_params_ = effective_metric(
            self.metric, self.p, self.metric_params
        )
        self.n_samples_fit_, self.n_features_in_ = X.shape
        return self

    def _is_sharded(self) -> bool:
        """Whether the index was fitted on a Dask array (sharded over the workers)."""
        return isinstance(self.__dict__.get("_index"), _sdask.ShardedIndex)

    def _shards(self):
        """The index as the Dask layer asks it: the sharded index, or a model fitted on one machine as one
        shard (sent to each worker that answers queries once; its prepared index is remade there)."""
        if self._is_sharded():
            return self._index
        return _sdask.ShardedIndex.of_model(self, self._index.X, self.n_samples_fit_)

    def _dask_queries(self, X):
        """The queries as row blocks: X, or the fitted rows for ``X=None``; their width checked."""
        Q = self._index.X if X is None else _sdask.as_row_blocks(X, "X")
        if Q.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {Q.shape[1]} features, but NearestNeighbors is expecting {self.n_features_in_} features "
                "as input (the fitted rows' columns)"
            )
        return Q

    def __sizeof__(self) -> int:
        """What a fitted model holds: its rows, and about as much again for their prepared copy on the device
        (so that Dask, holding one as a shard, counts the memory it takes and prices moving it)."""
        index = self.__dict__.get("_index")
        if not (isinstance(index, _LocalIndex) and sp.issparse(index.X)):
            return object.__sizeof__(self)
        X = index.X
        return 2 * (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)

    def _fit_distances(self, D) -> NearestNeighbors:
        """``fit`` for ``metric="precomputed"``: D, the distances between the fitted rows, kept as the index."""
        if self.backend not in ("auto", "cpu"):
            raise ValueError(
                f"backend={self.backend!r} cannot run metric='precomputed': its neighbours are selected on the "
                "host from the given distances; use backend='auto' or 'cpu'"
            )
        tiling.check_working_memory(self.working_memory)
        _check_n_neighbors(self.n_neighbors, "n_neighbors")
        _check_algorithm(self.algorithm, self.leaf_size)
        check_n_jobs(self.n_jobs)
        D = _precomputed.check_distances(D, "X", square=True)
        if D.shape[0] == 0:
            raise ValueError(f"X has 0 samples (shape={D.shape}); NearestNeighbors needs at least one to fit")
        self._index = _LocalIndex(D, precomputed=True)
        self.effective_metric_, self.effective_metric_params_ = PRECOMPUTED, dict(self.metric_params or {})
        self.n_samples_fit_, self.n_features_in_ = D.shape
        return self

    def _query_distances(self, X):
        """The precomputed distances from the queries to the fitted rows (the fitted matrix for X=None)."""
        if X is None:
            return self._index.X
        return _precomputed.check_distances(X, "X", n_columns=self.n_samples_fit_)

    def _queries(self, X, spec):
        """The query rows, checked (the fitted rows themselves for ``X=None``), after checking the fitted rows
        against the measure as it is now: ``set_params(metric=...)`` after ``fit`` may name a measure with
        rules the fitted rows break."""
        self._check_fitted()
        if spec.nonnegative:  # the fitted rows' sign, found once and kept in their facts (validation.Facts)
            validation.check_nonnegative(self._index.X, "the fitted X", spec.name)
        if X is None:
            return self._index.X
        source = getattr(self._index, "source", None)
        if source is not None and source.unchanged(X):  # the fitted matrix itself, as it was: its prepared rows
            return self._index.X
        Q = validation.check_matrix(X, "X", verdicts=_backend.engine(self.backend).csr_verdicts)
        if Q.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {Q.shape[1]} features, but NearestNeighbors is expecting {self.n_features_in_} features "
                "as input (the fitted rows' columns)"
            )
        if spec.nonnegative:
            validation.check_nonnegative(Q, "X", spec.name)
        return Q

    def kneighbors(self, X=None, n_neighbors: int | None = None, return_distance: bool = True):
        """The ``n_neighbors`` nearest fitted rows of each row of X: ``(distances, indices)``, or indices.

        ``X=None`` queries the fitted rows themselves, each excluding itself.
        Both arrays have shape ``(n_queries, n_neighbors)``; indices are int64,
        distances float32 when the fitted and query data are both float32.
        """
        if _sdask.is_dask(X) or self._is_sharded():  # lazy Dask arrays, the queries' row blocks (docs/dask.md)
            k = self._query_k(X, n_neighbors)  # the single-machine checks and messages
            spec, _, _ = self._resolve()
            Q = self._dask_queries(X)
            dtype = _sdask.result_dtype(Q, self._index.X)
            pair_part = _shard_kneighbors_both if spec.symmetric else None  # each pair of shards once
            dist, ind = self._shards().kneighbors(
                Q,
                X is None,
                k,
                spec.similarity,
                _shard_kneighbors,
                dtype,
                pair_part=pair_part,
                pair_rows=_shard_rows,
                backend=self.backend,
            )
            return (dist, ind) if return_distance else ind
        k = self._query_k(X, n_neighbors)
        if self._is_precomputed():
            dist, ind = _precomputed.kneighbors(self._query_distances(X), k, X is None, self.working_memory)
            return (dist, ind) if return_distance else ind
        (dist, ind), where, _, _ = self._search(X, _kneighbors, int(k))
        dist, ind = where.give(dist), where.give(ind)
        return (dist, ind) if return_distance else ind

    def _search(self, X, search, bound):
        """Queries X (None: the fitted rows, each excluding itself) through ``search`` (``_kneighbors`` with k,
        ``_within`` with the radius: ``bound``) against the prepared index: ``(found, where, measure,
        n_queries)``, found on the engine's device when ``where.on_device`` (CuPy queries, or a CuPy index
        queried by X=None, get CuPy)."""
        spec, values, columns = self._resolve()
        Q = self._queries(X, spec)
        measure = self._measure(spec, values, columns, Q)
        where = tiling.placement(measure.engine, Q)
        with cpu_threads(self.n_jobs, measure.engine), call_density(Q, self._fit_X):  # one path for every tile
            index = self._index.prepare(measure)
            _check_dense_tile(measure, Q, index, self.working_memory)
            with held(self._index.derived):  # what the engine derives from the index, made once for every query
                found = search(
                    measure,
                    Q,
                    index,
                    Q is self._index.X,
                    bound,
                    self.working_memory,
                    bool(self.verbose),
                    X is None,
                    where.on_device,
                )
        return found, where, measure, Q.shape[0]

    def _query_k(self, X, n_neighbors) -> int:
        """The number of neighbours a query asks for, checked against the fitted rows (as scikit-learn)."""
        self._check_fitted()
        k = self.n_neighbors if n_neighbors is None else n_neighbors
        _check_n_neighbors(k, "n_neighbors")
        n = self.n_samples_fit_
        if X is None and k >= n:
            raise ValueError(
                f"Expected n_neighbors < n_samples_fit when X is None (a point is not its own neighbour), "
                f"but n_neighbors = {k}, n_samples_fit = {n}"
            )
        if X is not None and k > n:
            raise ValueError(f"Expected n_neighbors <= n_samples_fit, but n_neighbors = {k}, n_samples_fit = {n}")
        return int(k)

    def kneighbors_graph(self, X=None, n_neighbors: int | None = None, mode: str = "connectivity") -> sp.csr_matrix:
        """The neighbours as a sparse ``(n_queries, n_samples_fit)`` CSR matrix, rows in neighbour order.

        ``mode="connectivity"`` stores ones, ``"distance"`` the distances (the
        similarities, for a similarity measure); a distance of 0 is stored.
        """
        _check_mode(mode)
        dist, ind = self.kneighbors(X, n_neighbors)
        if _sdask.is_dask(ind):  # neighbours from the cluster, computed: this CSR (docs/dask.md)
            dist, ind = _sdask.compute(dist, ind)
        n_queries, k = ind.shape
        xp = arrays.array_module(ind)  # CuPy neighbours give a cupyx.scipy.sparse result, built on the GPU
        data = xp.ones(ind.size) if mode == "connectivity" else dist.ravel()
        indptr = xp.arange(0, n_queries * k + 1, k)
        kind = arrays.csr_matrix_class(xp)
        return kind((data, ind.ravel(), indptr), shape=(n_queries, self.n_samples_fit_))

    def radius_neighbors(
        self, X=None, radius: float | None = None, return_distance: bool = True, sort_results: bool = False
    ):
        """The fitted rows within ``radius`` of each row of X: ``(distances, indices)``, or indices.

        As scikit-learn's: two object arrays of ``n_queries`` 1-D arrays (the
        distances, float32 when the fitted and query data are both float32;
        int64 indices), in index order, or best first with
        ``sort_results=True`` (ties by index).  Within the radius means a
        distance of at most ``radius`` or, for a similarity measure
        (``inner_product``), a similarity of at least ``radius``; NaN (e.g.
        cosine of an empty row) is never within it.  ``X=None`` queries the
        fitted rows, each excluding itself.  Each tile of distances is
        thresholded on the engine's device, so memory follows the number of
        neighbours found, not ``n_queries × n_samples_fit``.  CuPy queries on
        the GPU get CuPy rows (views of one device buffer a result).

        >>> import numpy as np
        >>> from semiring import distances
        >>> nn = distances.NearestNeighbors(radius=1.5).fit(np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]]))
        >>> dist, ind = nn.radius_neighbors([[0.9, 0.0]], sort_results=True)
        >>> ind[0], dist[0].round(2)
        (array([1, 0]), array([0.1, 0.9]))
        """
        if sort_results and not return_distance:
            raise ValueError("return_distance must be True if sort_results is True (as scikit-learn)")
        G = self.radius_neighbors_graph(X, radius, mode="distance", sort_results=sort_results)
        ind = _rows_of(G.indices.astype(np.int64), G.indptr)
        if not return_distance:
            return ind
        return _rows_of(G.data, G.indptr), ind

    def radius_neighbors_graph(
        self, X=None, radius: float | None = None, mode: str = "connectivity", sort_results: bool = False
    ) -> sp.csr_matrix:
        """The neighbours within ``radius`` as a sparse ``(n_queries, n_samples_fit)`` CSR matrix.

        ``mode="connectivity"`` stores ones, ``"distance"`` the distances (the
        similarities, for a similarity measure), a distance of 0 included.
        Each row's entries are in index order, or best first with
        ``sort_results=True`` in ``mode="distance"`` (ignored otherwise, as
        scikit-learn).  CuPy queries on the GPU get a ``cupyx.scipy.sparse``
        CSR matrix, built there.  See :meth:`radius_neighbors`.
        """
        _check_mode(mode)
        radius = _check_radius(self.radius if radius is None else radius)
        self._check_fitted()
        if _sdask.is_dask(X) or self._is_sharded():  # every shard's answer, side by side (docs/dask.md)
            Q = self._dask_queries(X)
            dtype = _sdask.result_dtype(Q, self._index.X)
            rows, cols, dist = self._shards().within(Q, X is None, radius, _shard_within, dtype)
            return self._entries_graph(rows, cols, dist.astype(dtype), Q.shape[0], mode, sort_results)
        if self._is_precomputed():
            D = self._query_distances(X)
            found = _FoundPairs(_backend.engine("cpu"), D.dtype, False, D.shape[0])
            rows, cols, dist = _precomputed.within(D, radius, X is None, self.working_memory, found.add)
            return self._entries_graph(rows, cols, dist, D.shape[0], mode, sort_results)
        (rows, cols, dist), where, measure, n_queries = self._search(X, _within, radius)
        dist = dist.astype(measure.dtype, copy=False)
        return where.give(self._entries_graph(rows, cols, dist, n_queries, mode, sort_results))

    def _entries_graph(self, rows, cols, dist, n_queries: int, mode: str, sort_results: bool):
        """The ``(n_queries, n_samples_fit)`` CSR matrix of the entries found (rows ascending, each row's
        entries in index order), or best first with ``sort_results`` in ``mode="distance"``; NumPy or CuPy."""
        xp = arrays.array_module(rows)
        if sort_results and mode == "distance":  # best first, ties by index
            similarity = self.metric != PRECOMPUTED and self._resolve()[0].similarity
            order = xp.lexsort(xp.stack((cols, -dist if similarity else dist, rows)))
            rows, cols, dist = rows[order], cols[order], dist[order]
        data = xp.ones(cols.size) if mode == "connectivity" else dist
        indptr = xp.zeros(n_queries + 1, np.int64)
        xp.cumsum(xp.bincount(rows, minlength=n_queries), out=indptr[1:])
        return arrays.csr_matrix_class(xp)((data, cols, indptr), shape=(n_queries, self.n_samples_fit_))


def _owned_copy(A):
    """A copy of the CSR matrix A with A's own index types (SciPy's ``copy`` narrows int64 indices to int32,
    and each index type the kernels meet is another compile of each), with what validation proved of A."""
    B = A.copy()
    B.indices, B.indptr = A.indices.copy(), A.indptr.copy()
    return validation.carry_facts(B, A)


def _shares_arrays(A, given) -> bool:
    """Whether the checked matrix ``A`` may use any of the arrays of the caller's ``given`` (no copy made)."""
    if A is given:
        return True
    if arrays.is_cupy(A) != arrays.is_cupy(given):  # one on the device, the other on the host
        return False
    mine = [getattr(A, name, None) for name in ("data", "indices", "indptr")]
    theirs = [getattr(given, name, None) for name in ("data", "indices", "indptr", "row", "col")]
    if not arrays.sparse_module(given).issparse(given) and hasattr(given, "shape"):
        theirs = [given]
    xp = arrays.array_module(A)
    return any(a is not None and hasattr(b, "shape") and xp.may_share_memory(a, b) for a in mine for b in theirs)


class _Source:
    """The caller's matrix a model was fitted on (weakly held) and a digest of its arrays then: ``kneighbors``
    of that very matrix, unchanged, reads the fitted rows' prepared copy instead of preparing them again."""

    def __init__(self, ref, digest: bytes):
        self.ref, self.digest = ref, digest

    @classmethod
    def of(cls, A) -> _Source | None:
        digest = _digest(A)
        try:
            return None if digest is None else cls(weakref.ref(A), digest)
        except TypeError:  # an object that takes no weak reference
            return None

    def unchanged(self, A) -> bool:
        return self.ref() is A and _digest(A) == self.digest


def _digest(A) -> bytes | None:
    """A digest of a host matrix's arrays (SciPy sparse or NumPy), None for others (CuPy)."""
    arrays_ = [getattr(A, name) for name in ("data", "indices", "indptr", "row", "col") if hasattr(A, name)]
    arrays_ = arrays_ if sp.issparse(A) else [A]
    if not all(isinstance(a, np.ndarray) for a in arrays_):
        return None
    h = hashlib.blake2b(digest_size=16)
    for a in arrays_:
        h.update(str((a.dtype, a.shape)).encode())
        h.update(np.ascontiguousarray(a).view(np.uint8).reshape(-1))
    return h.digest()


class _LocalIndex:
    """The index of a model fitted on one machine (``NearestNeighbors._index``; a Dask-fitted one holds a
    ``semiring.dask.ShardedIndex``): the fitted rows (the distances, ``precomputed``; what validation proved of
    them, their sign once a measure asks, kept in their facts: ``validation.Facts``), and their copy prepared on
    the engine's device, made once a fit."""

    def __init__(self, X, precomputed: bool = False):
        self.X, self.precomputed = X, precomputed
        self.prepared = None  # (key, Rows) of the last prepare
        self.derived = DerivedCache()  # what the engine derived from the prepared rows, for every later query

    def prepare(self, measure: BoundMeasure):
        """The fitted rows prepared on the engine's device (rows as the measure reads them, and their norms).

        Made by ``fit`` and kept, so queries pay only for themselves (as scikit-learn's and cuML's estimators,
        where fit holds the index); remade when the engine, the measure, the column scaling or the accumulation
        type changes.  Pickling drops it (device arrays stay out of pickles).
        """
        scale = None if measure.scale is None else measure.scale.tobytes()
        key = (
            measure.engine.name,
            measure.spec.prepare,
            measure.spec.norms,
            measure.spec.row_terms,
            measure.acc,
            scale,
        )
        if self.prepared is None or self.prepared[0] != key:
            self.prepared = (key, measure.prepare(self.X))
            self.derived = DerivedCache()
        return self.prepared[1]

    def __getstate__(self) -> dict:
        # the caller's matrix is not pickled with it, nor what is derived on a device
        return {**self.__dict__, "prepared": None, "source": None, "derived": DerivedCache()}


def _fit_shard(params: dict, rows) -> NearestNeighbors:
    """A single-machine model fitted on one row block (on the worker holding it), for the sharded index."""
    return NearestNeighbors(**params)._fit_local(rows, known_again=False)


def _shard_kneighbors(shard: NearestNeighbors, queries, k: int, offset: int):
    """The shard's k best for each query, indices made global; ``queries=None``: the shard's own rows."""
    dist, ind = shard.kneighbors(queries, k)
    return dist, ind + offset


def _shard_kneighbors_both(shard: NearestNeighbors, rows, k: int, offset: int, rows_offset: int) -> tuple:
    """For a symmetric measure, the shard's rows and other ``rows`` (of the same fitted data, from row
    ``rows_offset``) each the other's k best, each pair computed once: ``((distances, global indices) of the rows,
    (distances, global indices) of the shard's rows)``, each at most as wide as the other side has rows."""
    (rows_best, shard_best), where, _, _ = shard._search(rows, _kneighbors_both, int(k))
    (d0, i0), (d1, i1) = rows_best, shard_best
    return (where.give(d0), where.give(i0) + offset), (where.give(d1), where.give(i1) + rows_offset)


def _shard_rows(shard: NearestNeighbors):
    """The shard's fitted rows as its fit checked them, carrying what the check proved (``validation.Facts``): a
    pair's queries, so no pair checks them again (``ShardedIndex.kneighbors``)."""
    return shard._index.X


def _shard_within(shard: NearestNeighbors, queries, radius: float, offset: int) -> tuple:
    """The shard's fitted rows within ``radius`` of each query (``None``: its own rows, each excluding itself)
    as host CSR arrays ``(indptr, columns, distances)``, columns made global row numbers, rows in index order."""
    G = arrays.on_host(shard.radius_neighbors_graph(queries, radius, mode="distance"))
    return G.indptr, G.indices.astype(np.int64) + offset, G.data


def effective_metric(metric, p, metric_params) -> tuple[str, dict]:
    """``effective_metric_`` and ``effective_metric_params_`` exactly as scikit-learn's ``NearestNeighbors.fit``
    sets them: minkowski with p = 1, 2 or inf (and no ``w``) becomes manhattan, euclidean or chebyshev; any other
    minkowski keeps ``p`` and ``w`` (None when not given) in the parameters; every other metric is as given.

    >>> effective_metric("minkowski", 1, None)
    ('manhattan', {})
    >>> effective_metric("minkowski", 3, None)
    ('minkowski', {'p': 3, 'w': None})
    """
    params = {} if metric_params is None else dict(metric_params)
    if metric != "minkowski":
        return metric, params
    p = params.pop("p", p)
    w = params.pop("w", None)
    shortcut = {1: "manhattan", 2: "euclidean", np.inf: "chebyshev"}.get(p) if w is None else None
    if shortcut is not None:
        return shortcut, params
    return metric, {**params, "p": p, "w": w}


def _check_algorithm(algorithm, leaf_size) -> None:
    if algorithm in TREES:
        raise ValueError(
            f"algorithm={algorithm!r} is not supported: this estimator is brute force on the CPU or GPU engine "
            "(tiles of the measure, no tree), for every measure; use algorithm='auto' or 'brute'"
        )
    if algorithm not in ("auto", "brute"):
        raise ValueError(f"algorithm must be 'auto' or 'brute', got {algorithm!r}")
    if isinstance(leaf_size, bool) or not isinstance(leaf_size, numbers.Integral) or leaf_size < 1:
        raise ValueError(
            f"leaf_size must be an integer >= 1 (accepted and ignored: there is no tree), got {leaf_size!r}"
        )


def _check_mode(mode) -> None:
    if mode not in ("connectivity", "distance"):
        raise ValueError(f"mode must be 'connectivity' or 'distance', got {mode!r}")


def _check_radius(radius) -> float:
    if isinstance(radius, bool) or not isinstance(radius, numbers.Real) or np.isnan(radius):
        raise ValueError(f"radius must be a real number (not NaN), got {radius!r}")
    return float(radius)


def _rows_of(values, indptr) -> np.ndarray:
    """A CSR matrix's rows as scikit-learn's object array of 1-D arrays: NumPy copies, or for a CuPy result
    CuPy views of its one device buffer (a copy a row would launch a kernel a row); only the row pointer
    comes to the host, to cut it."""
    on_device = arrays.is_cupy(values)
    bounds = indptr.get() if on_device else indptr
    out = np.empty(bounds.size - 1, dtype=object)
    for i in range(out.size):
        row = values[bounds[i] : bounds[i + 1]]
        out[i] = row if on_device else row.copy()
    return out


def _check_n_neighbors(k, name: str) -> None:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {k!r} ({type(k).__name__})")
    if k <= 0:
        raise ValueError(f"{name} must be a positive integer, got {k}")


def _check_dense_tile(measure: BoundMeasure, Q, index, working_memory) -> None:
    """A tile of queries × fitted rows with the rows the engine's dense path densifies for it (a block of every
    column, which ``working_memory`` does not bound: it cuts tiles by result entries), refused before any tile
    is made where they do not fit beside the tile's own temporaries."""
    engine = measure.engine
    shape = (Q.shape[0], index.matrix.shape[0])
    tile = tiling.tile_shape(*shape, measure.bytes_per_entry, tiling.budget_bytes(engine, working_memory))
    blocks = measure.dense_block_bytes(Q, index.matrix, tile)
    if blocks:
        validation.check_allocation(
            tile[0] * tile[1] * measure.bytes_per_entry + blocks,
            f"a tile of {tile[0]:,} queries x {tile[1]:,} fitted rows with the rows densified for it "
            f"({validation.format_bytes(blocks)})",
            "give a smaller working_memory, or fewer queries at a time",
        )


def _kneighbors(
    measure: BoundMeasure,
    Q,
    index,
    queries_are_index: bool,
    k: int,
    working_memory,
    verbose: bool,
    exclude_self: bool,
    on_device: bool = False,
    both_ways: bool = False,
):
    """Tiles of queries × index through the blocked driver, each merged into a running top-k on the device.

    ``index`` is the fitted rows prepared on the device (``NearestNeighbors._index``); when the queries are
    those very rows (``X=None``, or the fitted matrix passed again), batches are slices of it, so nothing is
    prepared or copied to the device again (on scRNA-like data that copy cost 0.3 s and 100 MiB).

    ``both_ways`` (:func:`_kneighbors_both`): the queries are other rows of the same data under a symmetric
    measure, and the index rows' k best among the queries come too, from the same pass
    (``tiling.topk(both_ways=True)``).
    """
    engine = measure.engine
    rows, tile = _query_tiles(measure, Q, index, queries_are_index, measure.candidates)
    shape = (Q.shape[0], index.matrix.shape[0])
    if both_ways and (queries_are_index or exclude_self):
        raise ValueError("internal error: the both-ways selection is for rows other than the index's own")
    if not on_device:  # the (queries, k) arrays are no temporaries: they must fit, checked before any tile
        entries = shape[0] * k + (shape[1] * min(k, shape[0]) if both_ways else 0)
        validation.check_allocation(
            entries * (measure.dtype.itemsize + 8),
            f"the k nearest neighbours ({shape[0]:,} queries x {k:,} distances and int64 indices"
            + (f", and {shape[1]:,} index rows' among them)" if both_ways else ")"),
            "ask for fewer neighbours or fewer queries at a time",
        )
    with _progress(shape[0], verbose) as bar:
        return tiling.topk(
            engine,
            shape,
            k,
            measure.dtype,
            measure.bytes_per_entry,
            working_memory,
            largest=measure.spec.similarity,
            exclude_self=exclude_self,
            rows=rows,
            tile=tile,
            on_device=on_device,
            min_rows=MIN_QUERY_ROWS,
            progress=bar,
            symmetric=queries_are_index and measure.spec.symmetric,  # each pair once, for both rows
            both_ways=both_ways,
        )


_kneighbors_both = functools.partial(_kneighbors, both_ways=True)


def _query_tiles(measure: BoundMeasure, Q, index, queries_are_index: bool, block=None):
    """The driver's two steps for queries Q against the prepared fitted rows ``index``: a batch of query rows
    (slices of the index itself when the queries are those rows), and one tile of the measure, by ``block``
    (default ``measure.block``; ``measure.candidates`` for a top-k)."""
    engine = measure.engine
    block = measure.block if block is None else block

    def rows(r0: int, r1: int):
        return index.slice(engine, r0, r1) if queries_are_index else measure.prepare(validation.row_slice(Q, r0, r1))

    def tile(queries, c0: int, c1: int):
        return block(queries, index.slice(engine, c0, c1))

    return rows, tile


def _within(
    measure: BoundMeasure,
    Q,
    index,
    queries_are_index: bool,
    radius: float,
    working_memory,
    verbose,
    exclude_self,
    on_device: bool = False,
):
    """Tiles of queries × index through the blocked driver, each thresholded on the device (``WITHIN``):
    ``(rows, cols, values)`` of the entries within ``radius``, in row then column order, on the device when
    ``on_device``, else in host memory."""
    engine = measure.engine
    tree = expression(WITHIN[measure.spec.similarity], (*EXPANSION_VARIABLES, "radius"))
    bound = np.array([radius])
    rows, tile = _query_tiles(measure, Q, index, queries_are_index)
    found = _FoundPairs(engine, measure.dtype, on_device, Q.shape[0])

    def select(block, r0: int, c0: int):
        kept = engine.select(tree, ("radius",), bound, [block], [], [], 0, block.shape)
        # query r0 + r is candidate c0 + c where c - r = r0 - c0: in the tile only when that difference fits it
        if exclude_self and -block.shape[0] < r0 - c0 < block.shape[1]:
            other = kept.cols - kept.rows != r0 - c0  # in the tile's own small coordinates (int32 on the GPU)
            kept = Entries(kept.rows[other], kept.cols[other])
        found.add(len(kept.rows), r0 + block.shape[0])
        return kept

    shape = (Q.shape[0], index.matrix.shape[0])
    with _progress(shape[0], verbose, "radius_neighbors") as bar:
        return tiling.selected(
            engine,
            shape,
            measure.bytes_per_entry,
            working_memory,
            rows=rows,
            tile=tile,
            select=select,
            on_device=on_device,
            min_rows=MIN_QUERY_ROWS,
            progress=bar,
        )


class _FoundPairs:
    """The pairs a radius query has found, counted as each tile's are kept: refused (``MemoryError``) before a
    tile's pairs are kept where the pairs found could not be put in order, so a radius that takes in most of
    the index fails in a moment, naming the count, not half-way by the system's out-of-memory killer."""

    def __init__(self, engine, dtype, on_device: bool, n_queries: int):
        self.engine, self.on_device, self.n_queries, self.pairs = engine, on_device, n_queries, 0
        # A pair as ``tiling.selected`` keeps it (int64 row and column, its value); at the end, beside those, it
        # concatenates them, sorts a key by row and column (the key and its order) and gathers them in order.
        self.held = 16 + np.dtype(dtype).itemsize
        self.to_finish = 2 * self.held + 8

    def add(self, new: int, r1: int) -> None:
        """``new`` pairs found in a tile of the queries up to ``r1``, before they are kept."""
        self.pairs += new
        need = self.pairs * self.to_finish + new * self.held  # those kept hold memory the system no longer counts
        what = (
            f"putting in order the {self.pairs:,} pairs within the radius of the first {r1:,} of "
            f"{self.n_queries:,} queries"
        )
        hint = "give a smaller radius, or fewer queries a call (radius_neighbors on row slices of X)"
        if not self.on_device:
            validation.check_allocation(need, what, hint)
            return
        limit = self.engine.memory_limit_bytes()  # half of the device memory free now
        if limit is not None and need > 2 * limit:
            raise MemoryError(
                f"{what} needs {validation.format_bytes(need)} of GPU memory; "
                f"{validation.format_bytes(2 * limit)} is free; {hint}"
            )


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int) -> None:
        pass


def _progress(total: int, verbose: bool, desc: str = "kneighbors"):
    """A tqdm bar over query rows when asked for and standard error is a terminal; else nothing.

    The bar appears only for runs longer than ``PROGRESS_DELAY_S``, and is closed on
    any exit, Ctrl-C included (KeyboardInterrupt then propagates as usual).
    """
    if not (verbose and sys.stderr.isatty()):
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="rows", delay=PROGRESS_DELAY_S, leave=False, file=sys.stderr)
