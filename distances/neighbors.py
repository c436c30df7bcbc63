"""k-nearest neighbours with scikit-learn's ``NearestNeighbors`` API, on any of the measures.

Brute force, as ``sklearn.neighbors.NearestNeighbors(algorithm="brute")``: the
distances from a batch of query rows to a tile of index rows are computed on
the engine's device (the same ``pairwise_distances`` machinery), each row's k
best are selected there and merged with the best of the earlier tiles, and
only ``n_queries × k`` pairs come back.  The full query × index matrix never
exists: tiles are sized so the engine's temporaries fit ``working_memory``.
"""

from __future__ import annotations

import inspect
import numbers
import sys

import numpy as np
import scipy.sparse as sp

from semiring import backend as _backend
from semiring import dask as _sdask
from semiring import driver, validation

from . import dask as _dask
from .measure import BoundMeasure
from .specs import resolve_metric

# The index is split into tiles only when this many query rows against all of it would not fit.
MIN_QUERY_ROWS = 256
# A progress bar appears only for runs longer than this (seconds).
PROGRESS_DELAY_S = 0.5


class NotFittedError(ValueError, AttributeError):
    """A method that needs ``fit`` was called first (as scikit-learn's, a ValueError and an AttributeError)."""


class NearestNeighbors:
    """Unsupervised k-nearest neighbours, brute force, on the CPU or the GPU engine.

    Parameters
    ----------
    n_neighbors : int, default 5
        Neighbours returned by :meth:`kneighbors` when it is not given one.
    metric : str, default "euclidean"
        Any name or alias of ``distances.METRICS`` (17 measures).
    p : float, default 2
        Minkowski's exponent (``metric="minkowski"``; ignored otherwise, as scikit-learn).
    metric_params : dict, optional
        Further parameters of the measure; a ``"p"`` here wins over ``p``.
    backend : {"auto", "cpu", "cuda"}
        The engine; ``"auto"`` takes the GPU when it is usable.
    working_memory : float, optional
        MiB (as scikit-learn's) for one tile's temporaries; default 1024
        (``semiring.driver.DEFAULT_WORKING_MEMORY_MIB``).
        Peak memory is about this plus the inputs and the ``n_queries × k``
        result.
    verbose : bool, default True
        Show a progress bar (tqdm) for runs longer than half a second, when
        standard error is a terminal.

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
        p: float = 2,
        metric_params: dict | None = None,
        backend: str = "auto",
        working_memory: float | None = None,
        verbose: bool = True,
    ):
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.p = p
        self.metric_params = metric_params
        self.backend = backend
        self.working_memory = working_memory
        self.verbose = verbose

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
                raise ValueError(f"invalid parameter {name!r} for NearestNeighbors; valid parameters are {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {k: v.default for k, v in inspect.signature(type(self).__init__).parameters.items()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if v is not defaults[k] and v != defaults[k]]
        return f"NearestNeighbors({', '.join(changed)})"

    def __sklearn_tags__(self):
        """Tags for scikit-learn (>= 1.6), imported only when scikit-learn asks."""
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False), input_tags=InputTags(sparse=True))

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "n_samples_fit_")

    # ------------------------------------------------------------------ fit and query

    def _resolve(self):
        """The measure's spec and parameter values, from metric, p and metric_params."""
        spec, _ = resolve_metric(self.metric, {})  # the name first: an unknown metric is named before its params
        if self.metric_params is not None and not isinstance(self.metric_params, dict):
            raise TypeError(f"metric_params must be a dict or None, got {type(self.metric_params).__name__}")
        params = dict(self.metric_params or {})
        if "p" in spec.params:
            params.setdefault("p", self.p)
        return resolve_metric(self.metric, params)

    def fit(self, X, y=None) -> NearestNeighbors:
        """Keep X (any SciPy sparse format or a dense 2-D array) as the index; ``y`` is ignored."""
        if _sdask.is_dask(X):  # the index sharded over the workers by X's row blocks (docs/dask.md)
            return _dask.fit(self, X)
        spec, values = self._resolve()
        _backend.resolve(self.backend)  # an unusable backend is refused now, with the reason
        driver.check_working_memory(self.working_memory)
        _check_n_neighbors(self.n_neighbors, "n_neighbors")
        X = validation.check_matrix(X, "X")
        if X.shape[0] == 0:
            raise ValueError(f"X has 0 samples (shape={X.shape}); NearestNeighbors needs at least one to fit")
        if X.shape[1] == 0:
            raise ValueError(f"X has 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
        if spec.nonnegative:
            validation.check_nonnegative(X, "X", spec.name)
        self._fit_X = X
        self.effective_metric_, self.effective_metric_params_ = spec.name, values
        self.n_samples_fit_, self.n_features_in_ = X.shape
        self._index_cache = None
        self._index(BoundMeasure(_backend.engine(self.backend), spec, values, validation.result_dtype(X, X)))
        return self

    def _index(self, measure: BoundMeasure):
        """The fitted rows prepared on the engine's device (rows as the measure reads them, and their norms).

        Made by ``fit`` and kept, so queries pay only for themselves (as scikit-learn's and cuML's estimators,
        where fit holds the index); remade when the engine, the measure or the accumulation type changes.
        Pickling drops it (see ``__getstate__``).
        """
        key = (measure.engine.name, measure.spec.prepare, measure.spec.norms, measure.acc)
        if getattr(self, "_index_cache", None) is None or self._index_cache[0] != key:
            self._index_cache = (key, measure.prepare(self._fit_X))
        return self._index_cache[1]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_index_cache": None}  # device arrays stay out of pickles

    def kneighbors(self, X=None, n_neighbors: int | None = None, return_distance: bool = True):
        """The ``n_neighbors`` nearest fitted rows of each row of X: ``(distances, indices)``, or indices.

        ``X=None`` queries the fitted rows themselves, each excluding itself.
        Both arrays have shape ``(n_queries, n_neighbors)``; indices are int64,
        distances float32 when the fitted and query data are both float32.
        """
        if _sdask.is_dask(X) or _dask.is_sharded(self):  # lazy Dask arrays, the queries' row blocks (docs/dask.md)
            return _dask.kneighbors(self, X, n_neighbors, return_distance)
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(
                "This NearestNeighbors instance is not fitted yet: call 'fit' with the index data first"
            )
        k = self.n_neighbors if n_neighbors is None else n_neighbors
        _check_n_neighbors(k, "n_neighbors")
        spec, values = self._resolve()
        n = self.n_samples_fit_
        if X is None:
            if k >= n:
                raise ValueError(
                    f"Expected n_neighbors < n_samples_fit when X is None (a point is not its own neighbour), "
                    f"but n_neighbors = {k}, n_samples_fit = {n}"
                )
            Q = self._fit_X
        else:
            if k > n:
                raise ValueError(f"Expected n_neighbors <= n_samples_fit, but n_neighbors = {k}, n_samples_fit = {n}")
            Q = validation.check_matrix(X, "X")  # the fitted rows were checked by fit
            if Q.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has {Q.shape[1]} features, but NearestNeighbors is expecting {self.n_features_in_} features "
                    "as input (the fitted rows' columns)"
                )
            if spec.nonnegative:
                validation.check_nonnegative(Q, "X", spec.name)
        measure = BoundMeasure(_backend.engine(self.backend), spec, values, validation.result_dtype(Q, self._fit_X))
        index = self._index(measure)
        dist, ind = _kneighbors(
            measure, Q, index, Q is self._fit_X, int(k), self.working_memory, bool(self.verbose), X is None
        )
        return (dist, ind) if return_distance else ind

    def kneighbors_graph(self, X=None, n_neighbors: int | None = None, mode: str = "connectivity") -> sp.csr_matrix:
        """The neighbours as a sparse ``(n_queries, n_samples_fit)`` CSR matrix, rows in neighbour order.

        ``mode="connectivity"`` stores ones, ``"distance"`` the distances (the
        similarities, for a similarity measure); a distance of 0 is stored.
        """
        if _sdask.is_dask(X) or _dask.is_sharded(self):  # neighbours from the cluster, this CSR (docs/dask.md)
            return _dask.kneighbors_graph(self, X, n_neighbors, mode)
        if mode not in ("connectivity", "distance"):
            raise ValueError(f"mode must be 'connectivity' or 'distance', got {mode!r}")
        dist, ind = self.kneighbors(X, n_neighbors)
        n_queries, k = ind.shape
        data = np.ones(ind.size) if mode == "connectivity" else dist.ravel()
        indptr = np.arange(0, n_queries * k + 1, k)
        return sp.csr_matrix((data, ind.ravel(), indptr), shape=(n_queries, self.n_samples_fit_))


def _check_n_neighbors(k, name: str) -> None:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {k!r} ({type(k).__name__})")
    if k <= 0:
        raise ValueError(f"{name} must be a positive integer, got {k}")


def _kneighbors(
    measure: BoundMeasure, Q, index, queries_are_index: bool, k: int, working_memory, verbose: bool, exclude_self: bool
):
    """Tiles of queries × index through the blocked driver, each merged into a running top-k on the device.

    ``index`` is the fitted rows prepared on the device (``NearestNeighbors._index``); when the queries are
    those very rows (``X=None``, or the fitted matrix passed again), batches are slices of it, so nothing is
    prepared or copied to the device again (on scRNA-like data that copy cost 0.3 s and 100 MiB).
    """
    engine = measure.engine

    def rows(r0: int, r1: int):
        return index.slice(engine, r0, r1) if queries_are_index else measure.prepare(Q[r0:r1])

    def tile(queries, c0: int, c1: int):
        return measure.block(queries, index.slice(engine, c0, c1))

    shape = (Q.shape[0], index.matrix.shape[0])
    with _progress(shape[0], verbose) as bar:
        return driver.topk(
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
            min_rows=MIN_QUERY_ROWS,
            progress=bar,
        )


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int) -> None:
        pass


def _progress(total: int, verbose: bool):
    """A tqdm bar over query rows when asked for and standard error is a terminal; else nothing.

    The bar appears only for runs longer than ``PROGRESS_DELAY_S``, and is closed on
    any exit, Ctrl-C included (KeyboardInterrupt then propagates as usual).
    """
    if not (verbose and sys.stderr.isatty()):
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(total=total, desc="kneighbors", unit="rows", delay=PROGRESS_DELAY_S, leave=False, file=sys.stderr)
