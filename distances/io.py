"""The old name of :mod:`semiring.cli.io`, kept: the command's file IO moved with the command."""

from semiring.cli import io as _moved


def __getattr__(name: str):
    return getattr(_moved, name)
