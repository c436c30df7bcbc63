"""The old name of :mod:`semiring.cli.commands`, kept: ``semiring.distances.cli:main`` and
``python -m semiring.distances.cli`` still run the ``semiring`` command, which has a room of its own."""

from semiring.cli import commands as _moved
from semiring.cli.commands import main


def __getattr__(name: str):
    return getattr(_moved, name)


if __name__ == "__main__":
    raise SystemExit(main())
