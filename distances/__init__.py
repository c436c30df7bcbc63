"""Sparse pairwise distances on the semiring primitive.

>>> import numpy as np
>>> from semiring import distances
>>> distances.pairwise_distances(np.array([[1.0, 0.0], [0.0, 1.0]]), metric="cityblock")
array([[0., 2.],
       [2., 0.]])
"""

from . import graph  # the old name of semiring.graph, kept
from .chunked import pairwise_distances_chunked
from .neighbors import NearestNeighbors
from .pairwise import pairwise_distances
from .specs import DISTANCES, METRICS, Distance, get_metric, resolve_metric
from .transformers import KNeighborsTransformer, RadiusNeighborsTransformer, kneighbors_graph, radius_neighbors_graph

__all__ = [
    "DISTANCES",
    "METRICS",
    "Distance",
    "KNeighborsTransformer",
    "NearestNeighbors",
    "RadiusNeighborsTransformer",
    "get_metric",
    "graph",
    "kneighbors_graph",
    "pairwise_distances",
    "pairwise_distances_chunked",
    "radius_neighbors_graph",
    "resolve_metric",
]
