"""``python -m semiring.cli``: the ``semiring`` command."""

from .commands import main

if __name__ == "__main__":
    raise SystemExit(main())
