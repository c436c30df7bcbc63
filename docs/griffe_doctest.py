"""A griffe extension for the API reference: docstring examples (``>>>`` lines and their output) as code blocks.

The docstrings keep doctest's plain form, which ``tests/cpu/test_doctests.py`` runs;
Markdown would read ``>>>`` as nested quotes, so each run of example lines is
fenced as ``pycon`` (a Python console session) before mkdocstrings renders it.
"""

from __future__ import annotations

import re

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ")


def fence_examples(text: str) -> str:
    """``text`` with each example (a ``>>>`` line up to the next blank line) in a fenced ``pycon`` block."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        match = _PROMPT.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match.group(1)
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ">>> " in obj.docstring.value:
            obj.docstring.value = fence_examples(obj.docstring.value)
