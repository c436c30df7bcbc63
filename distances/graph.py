"""The old name of :mod:`semiring.graph`, kept: the graph measures have a room of their own, and code written
as ``from semiring.distances import graph`` runs as before, on the same functions."""

from semiring import graph as _room
from semiring.graph import *
from semiring.graph import measures as _moved

__all__ = list(_room.__all__)


def __getattr__(name: str):  # every other name the module had (plus_min, Similarity, PER ...)
    return getattr(_moved, name)
