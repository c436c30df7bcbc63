"""Test doubles shared by the test modules (imported as ``from spies import Calls``, as ``oracles`` is)."""

from __future__ import annotations


class Calls:
    """Counts the calls of a function it stands in for."""

    def __init__(self, function):
        self.function, self.count = function, 0

    def __call__(self, *args, **kwargs):
        self.count += 1
        return self.function(*args, **kwargs)
