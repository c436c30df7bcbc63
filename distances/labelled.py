"""The old name of :mod:`semiring.graph.labelled`, kept: it moved with the graph measures."""

from semiring.graph import labelled as _moved


def __getattr__(name: str):
    return getattr(_moved, name)
