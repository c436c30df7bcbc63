"""The old name of :mod:`semiring.cli.datasets`, kept: the bundled dataset moved with the command that uses it."""

from semiring.cli import datasets as _moved


def __getattr__(name: str):
    return getattr(_moved, name)
