"""``python -m semiring.distances``, the old name of ``python -m semiring.cli.demo``, kept: the same job."""

from semiring.cli import demo as _moved
from semiring.cli.demo import main


def __getattr__(name: str):
    return getattr(_moved, name)


if __name__ == "__main__":
    raise SystemExit(main())
