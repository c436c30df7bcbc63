"""Sparse pairwise distances on the semiring primitive.

>>> import numpy as np
>>> from semiring import distances
>>> distances.pairwise_distances(np.array([[1.0, 0.0], [0.0, 1.0]]), metric="cityblock")
array([[0., 2.],
       [2., 0.]])
"""

from . import graph
from .neighbors import NearestNeighbors, radius_neighbors_graph
from .pairwise import pairwise_distances
from .specs import DISTANCES, METRICS, Distance, get_metric, resolve_metric

__all__ = [
    "DISTANCES",
    "METRICS",
    "Distance",
    "NearestNeighbors",
    "get_metric",
    "graph",
    "pairwise_distances",
    "radius_neighbors_graph",
    "resolve_metric",
]
