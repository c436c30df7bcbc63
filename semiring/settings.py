"""Every setting the library reads from the environment, declared once: its name, default, rule and docs line.

A setting is read where a call needs it, at each call (tests and benchmarks
change them between calls), through :meth:`Setting.read`, which checks its
rule and names the variable in the error.  No other module of the package
reads ``os.environ`` (``tests/unit/test_settings.py`` fails on one that does),
so this list is the whole truth, and ``docs/settings.md`` holds a copy of
:func:`settings_table` (``python -m semiring.settings`` prints it) that a test
keeps equal.

>>> from semiring import settings
>>> settings.CPU_UNION.check("merge")
'merge'
>>> settings.CPU_UNION.check("fastest")
Traceback (most recent call last):
...
ValueError: $SEMIRING_CPU_UNION must be one of 'auto', 'margins-spgemm', 'margins', 'extremum', 'merge', 'scatter', got 'fastest'; for example SEMIRING_CPU_UNION=auto
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    """An environment variable: ``name``, its ``default`` (what an unset one reads as), the values it may take
    (``choices``; empty: a path, any text) and the line the docs give it."""

    name: str
    default: str
    choices: tuple[str, ...]
    doc: str

    def check(self, value: str) -> str:
        """``value`` where the rule allows it, else a ValueError naming the variable, the rule and a right value."""
        if self.choices and value not in self.choices:
            raise ValueError(
                f"${self.name} must be one of {', '.join(map(repr, self.choices))}, got {value!r}; "
                f"for example {self.name}={self.default}"
            )
        return value

    def raw(self) -> str:
        """The variable's text now (its default when unset), unchecked: for reports such as ``semiring info``."""
        return os.environ.get(self.name, self.default)

    def read(self) -> str:
        """The variable's value now (its default when unset), checked."""
        return self.check(self.raw())

    def is_set(self) -> bool:
        """Whether the environment gives the variable a value (an empty one counts as unset)."""
        return bool(os.environ.get(self.name))


CACHE_DIR = Setting(
    "SEMIRING_CACHE_DIR",
    "",
    (),
    "The folder of compiled kernels, both engines' (GPU cubins; the CPU engine's generated modules in `cpu/`); "
    "unset or empty: `$XDG_CACHE_HOME/sparse-semirings/kernels`, `~/.cache/sparse-semirings/kernels` without "
    "`$XDG_CACHE_HOME`. Made when first written; one that cannot be written costs compiling again, nothing else.",
)
GPU_STRATEGY = Setting(
    "SEMIRING_GPU_STRATEGY",
    "auto",
    (
        "auto",
        "rowvec",
        "rowvec-compact",
        "merge",
        "inverted",
        "ranges",
        "dense-gemm",
        "split",
        "margins",
        "ranked",
        "extrema",
        "coo",
        "hash",
    ),
    "The GPU engine's kernel for a dense product: `auto` lets its planner choose; another forces that strategy "
    "where it applies (see [GPU strategies](cuda.md)).",
)
GRAPH_EDGES = Setting(
    "SEMIRING_GRAPH_EDGES",
    "auto",
    ("auto", "oriented", "direct"),
    "How the GPU graph engine finds per-edge common-neighbour counts: `oriented` (each triangle once on the "
    "degree-oriented graph, scattered to its three edges; what `auto` takes) or `direct` (each edge intersects "
    "its two full lists).",
)
GRAPH_TRIANGLES = Setting(
    "SEMIRING_GRAPH_TRIANGLES",
    "auto",
    ("auto", "probe", "search"),
    "How the GPU graph engine intersects the oriented graph's lists for triangles and per-edge counts: `probe` "
    "(each triangle at its middle vertex, whose out-list is hashed in shared memory; what `auto` takes in the "
    "degree order from 2^24 stored entries) or `search` (each edge's shorter list binary-searched in the longer).",
)
CPU_INTERSECTION = Setting(
    "SEMIRING_CPU_INTERSECTION",
    "auto",
    ("auto", "rows", "spgemm", "inverted"),
    "The CPU engine's kernel for a dense intersection product: `auto` chooses by the products per result entry "
    "(see [CPU engine](cpu-engine.md)).",
)
CPU_UNION = Setting(
    "SEMIRING_CPU_UNION",
    "auto",
    ("auto", "margins-spgemm", "margins", "extremum", "merge", "scatter"),
    "The CPU engine's kernel for a union product: `auto` chooses by a cost model (see [CPU engine](cpu-engine.md)).",
)
CPU_DENSE = Setting(
    "SEMIRING_CPU_DENSE",
    "auto",
    ("auto", "never", "always"),
    "The CPU engine's dense paths (BLAS for `plus_times`, the tiled kernel for unions): `auto` takes them where "
    "the call's inputs are dense enough (see [CPU engine](cpu-engine.md#dense-blocks)).",
)
CPU_SPARSE = Setting(
    "SEMIRING_CPU_SPARSE",
    "auto",
    ("auto", "rows", "hash", "dense", "columns"),
    "The CPU engine's sparse product (`mxm`): down Y's rows (`columns`) or X's (`rows`, or every row with the "
    "`hash` or `dense` accumulator); `auto` walks the smaller side.",
)
CPU_SPARSE_BLOCKS = Setting(
    "SEMIRING_CPU_SPARSE_BLOCKS",
    "auto",
    ("auto", "0", "1"),
    "`1` or `0` forces the CPU sparse product's column index of X in blocks or whole (`1`: small blocks, so tests "
    "cross them on small inputs).",
)
CPU_SPARSE_BITMAPS = Setting(
    "SEMIRING_CPU_SPARSE_BITMAPS",
    "auto",
    ("auto", "0", "1"),
    "`1` or `0` forces the CPU sparse product's bitmaps of the X rows holding each column, or none.",
)

SETTINGS = (CACHE_DIR, GPU_STRATEGY, GRAPH_EDGES, GRAPH_TRIANGLES, CPU_INTERSECTION, CPU_UNION, CPU_DENSE, CPU_SPARSE,
            CPU_SPARSE_BLOCKS, CPU_SPARSE_BITMAPS)  # fmt: skip


def cache_dir() -> Path:
    """The folder of compiled kernels: ``$SEMIRING_CACHE_DIR``, else ``$XDG_CACHE_HOME/sparse-semirings/kernels``
    (``~/.cache`` by default)."""
    if CACHE_DIR.is_set():
        return Path(os.environ[CACHE_DIR.name])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "sparse-semirings" / "kernels"


def settings_table() -> str:
    """The docs' table of settings (``docs/settings.md``), from the declarations above."""
    rows = ["| variable | values | default | what it sets |", "| --- | --- | --- | --- |"]
    for s in SETTINGS:
        values = ", ".join(f"`{c}`" for c in s.choices) or "a folder"
        default = f"`{s.default}`" if s.default else "see the text"
        rows.append(f"| `{s.name}` | {values} | {default} | {s.doc} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(settings_table(), end="")
