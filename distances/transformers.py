"""scikit-learn's neighbours-graph idioms: ``KNeighborsTransformer``, ``RadiusNeighborsTransformer`` and
``kneighbors_graph``, on any of the measures and either engine.

The transformers give the sparse graph scikit-learn's consumers take with
``metric="precomputed"`` (``DBSCAN``, ``TSNE``, ``Isomap``,
``SpectralClustering``, ``NearestNeighbors`` itself), so the neighbours are
found here and the rest of a ``Pipeline`` is unchanged::

    from sklearn.cluster import DBSCAN
    from sklearn.pipeline import make_pipeline
    from semiring.distances import KNeighborsTransformer

    model = make_pipeline(KNeighborsTransformer(n_neighbors=10, metric="cosine"),
                          DBSCAN(eps=0.3, metric="precomputed"))

As scikit-learn's, ``transform(X)`` queries X against the fitted rows, so a
fitted row finds itself (at distance 0): with ``mode="distance"`` each row
holds ``n_neighbors + 1`` entries, the point itself included, with
``mode="connectivity"`` ``n_neighbors`` ones.  scikit-learn is not imported
(it is not a dependency); the estimators follow its protocol
(``get_params``/``set_params``, ``fit``/``transform``/``fit_transform``,
``get_feature_names_out``) and pass its ``check_estimator``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .neighbors import NearestNeighbors, _check_mode, keep_params

__all__ = ["KNeighborsTransformer", "RadiusNeighborsTransformer", "kneighbors_graph", "radius_neighbors_graph"]


class _GraphTransformer(NearestNeighbors):
    """What both transformers share: scikit-learn's transformer protocol around a neighbours graph."""

    def __sklearn_tags__(self):
        """A transformer's tags; float32 kept by ``mode="distance"`` (the distances' type; ones are float64)."""
        from sklearn.utils import TransformerTags

        tags = super().__sklearn_tags__()
        kept = ["float64", "float32"] if getattr(self, "mode", None) == "distance" else ["float64"]
        tags.transformer_tags = TransformerTags(preserves_dtype=kept)
        return tags

    def fit(self, X, y=None):
        """Keep X as the index (as :meth:`NearestNeighbors.fit`); ``mode`` is checked now."""
        _check_mode(self.mode)
        return super().fit(X)

    def fit_transform(self, X, y=None):
        """``fit(X).transform(X)``: each row's neighbours among the rows themselves, itself included."""
        return self.fit(X).transform(X)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """One name a fitted row (the graph's columns), as scikit-learn's: ``kneighborstransformer0``, ..."""
        self._check_fitted()
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.n_samples_fit_)], dtype=object)

    @property
    def _n_features_out(self) -> int:
        return self.n_samples_fit_


class KNeighborsTransformer(_GraphTransformer):
    """X's rows into their k-neighbours graph: scikit-learn's ``KNeighborsTransformer`` on the engines.

    ``transform(X)`` is a CSR matrix ``(n_queries, n_samples_fit)``: with
    ``mode="distance"`` (the default) each row holds the distances to its
    ``n_neighbors + 1`` nearest fitted rows (one more, as scikit-learn's, since
    a fitted row is its own nearest neighbour), with ``mode="connectivity"``
    ones at its ``n_neighbors`` nearest.  Entries are in neighbour order, ties
    by index.  The other parameters are :class:`NearestNeighbors`'.

    >>> import numpy as np
    >>> from semiring import distances
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    >>> G = distances.KNeighborsTransformer(n_neighbors=1).fit_transform(X)
    >>> G.toarray()
    array([[0., 1., 0.],
           [1., 0., 0.],
           [0., 2., 0.]])
    >>> G.indices.tolist()  # each row itself (a stored 0), then its nearest other row
    [0, 1, 1, 0, 2, 1]
    """

    radius = 1.0  # radius_neighbors' default (a class attribute: scikit-learn's parameters are __init__'s only)

    def __init__(
        self,
        *,
        mode: str = "distance",
        n_neighbors: int = 5,
        metric: str = "euclidean",
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

    def transform(self, X) -> sp.csr_matrix:
        """The k-neighbours graph of X's rows against the fitted rows (see the class docstring)."""
        self._check_fitted()
        _check_mode(self.mode)
        extra = 1 if self.mode == "distance" else 0  # scikit-learn's: the point itself comes first
        return self.kneighbors_graph(X, mode=self.mode, n_neighbors=self.n_neighbors + extra)


class RadiusNeighborsTransformer(_GraphTransformer):
    """X's rows into their ε-neighbours graph: scikit-learn's ``RadiusNeighborsTransformer`` on the engines.

    ``transform(X)`` is a CSR matrix ``(n_queries, n_samples_fit)`` of the
    fitted rows within ``radius`` (distances with ``mode="distance"``, the
    default, sorted best first; ones with ``mode="connectivity"``); a fitted
    row finds itself.  Memory follows the number of pairs found.

    >>> import numpy as np
    >>> from semiring import distances
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    >>> distances.RadiusNeighborsTransformer(radius=1.5, mode="connectivity").fit_transform(X).toarray()
    array([[1., 1., 0.],
           [1., 1., 0.],
           [0., 0., 1.]])
    """

    n_neighbors = 5  # kneighbors' default (a class attribute: scikit-learn's parameters are __init__'s only)

    def __init__(
        self,
        *,
        mode: str = "distance",
        radius: float = 1.0,
        metric: str = "euclidean",
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

    def transform(self, X) -> sp.csr_matrix:
        """The ε-neighbours graph of X's rows against the fitted rows (see the class docstring)."""
        self._check_fitted()
        _check_mode(self.mode)
        return self.radius_neighbors_graph(X, mode=self.mode, sort_results=True)


def kneighbors_graph(
    X,
    n_neighbors: int,
    *,
    mode: str = "connectivity",
    metric: str = "euclidean",
    p: float = 2,
    metric_params: dict | None = None,
    include_self: bool = False,
    n_jobs: int | None = None,
    backend: str = "auto",
    working_memory: float | None = None,
) -> sp.csr_matrix:
    """The k-neighbours graph of X's rows: a sparse ``(n, n)`` CSR matrix, as scikit-learn's function.

    ``mode="connectivity"`` stores ones, ``"distance"`` the distances; a row
    is its own neighbour only with ``include_self=True`` (then it is one of
    the ``n_neighbors``).  X may also be a fitted :class:`NearestNeighbors`,
    whose fitted rows and measure are used (as scikit-learn takes a fitted
    estimator); the measure's parameters are then its own.

    >>> import numpy as np
    >>> from semiring import distances
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    >>> distances.kneighbors_graph(X, 1, mode="distance").toarray()
    array([[0., 1., 0.],
           [1., 0., 0.],
           [0., 2., 0.]])
    """
    params = {"metric": metric, "p": p, "metric_params": metric_params, "n_jobs": n_jobs, "backend": backend}
    nn = _fitted(X, include_self, n_neighbors=n_neighbors, working_memory=working_memory, **params)
    return nn.kneighbors_graph(nn._fit_X if include_self else None, n_neighbors, mode=mode)


def radius_neighbors_graph(
    X,
    radius: float,
    *,
    mode: str = "connectivity",
    metric: str = "euclidean",
    p: float = 2,
    metric_params: dict | None = None,
    include_self: bool = False,
    n_jobs: int | None = None,
    backend: str = "auto",
    working_memory: float | None = None,
) -> sp.csr_matrix:
    """The ε-graph of X's rows: a sparse ``(n, n)`` CSR matrix of the pairs within ``radius``.

    As ``sklearn.neighbors.radius_neighbors_graph``: ``mode="connectivity"``
    stores ones, ``"distance"`` the distances; a row is its own neighbour only
    with ``include_self=True``.  X may also be a fitted :class:`NearestNeighbors`
    (its fitted rows and measure, asked at this ``radius``).  For a similarity
    measure, within the radius means a similarity of at least ``radius`` (a
    threshold).  Memory follows the number of pairs found: tiles of the
    distances are thresholded on the engine's device.  For a graph of given
    pairs instead, see ``pairwise_distances(mask=)``.

    >>> import numpy as np
    >>> from semiring import distances
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    >>> distances.radius_neighbors_graph(X, 1.5).toarray()
    array([[0., 1., 0.],
           [1., 0., 0.],
           [0., 0., 0.]])
    """
    params = {"metric": metric, "p": p, "metric_params": metric_params, "n_jobs": n_jobs, "backend": backend}
    nn = _fitted(X, include_self, radius=radius, working_memory=working_memory, **params)
    return nn.radius_neighbors_graph(nn._fit_X if include_self else None, radius, mode=mode)


def _fitted(X, include_self, **params) -> NearestNeighbors:
    """The model the graph functions ask: X itself where it is a fitted :class:`NearestNeighbors` (as
    scikit-learn's functions take a fitted estimator), else one fitted on X with ``params``."""
    if not isinstance(include_self, (bool, np.bool_)):
        raise TypeError(f"include_self must be True or False, got {include_self!r}")
    if isinstance(X, NearestNeighbors):
        X._check_fitted()
        return X
    return NearestNeighbors(**params, verbose=False).fit(X)
