"""The ``semiring`` command and the files it reads and writes.

* ``commands`` — the subcommands (``knn``, ``pairwise``, ``graph``, ``info``), their arguments, reports and
  exit statuses, and ``main``, which the ``semiring`` console script and ``python -m semiring.cli`` run;
* ``io`` — matrices and graphs read from files, results written atomically, every failure naming the file;
* ``datasets`` — the bundled dataset ``semiring knn`` runs on without an input file;
* ``demo`` — ``python -m semiring.cli.demo``, a pairwise-distance job on generated data.

The command line is the top layer: it calls the measures (``semiring.distances``, ``semiring.graph``) as a
user would, and nothing below imports it.
"""

from .commands import main

__all__ = ["main"]
