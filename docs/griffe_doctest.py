"""A griffe extension for the API reference: docstring examples (``>>>`` lines and their output) as code blocks,
and Sphinx cross-reference roles as code.

The docstrings keep doctest's plain form, which ``tests/cpu/test_doctests.py`` runs;
Markdown would read ``>>>`` as nested quotes, so each run of example lines is
fenced as ``pycon`` (a Python console session) before mkdocstrings renders it.
Roles such as ``:meth:`kneighbors``` (read by help() and IDEs) would show as raw
markup: each becomes its target in code (``kneighbors``).
"""

from __future__ import annotations

import re

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ")
_ROLE = re.compile(r":(?:meth|class|func|data|mod|attr|obj|exc):`~?([^`]+)`")


def plain_roles(text: str) -> str:
    """``text`` with each Sphinx role (``:meth:`~a.b```) as its target in code (``a.b``)."""
    return _ROLE.sub(lambda m: f"`{m.group(1)}`", text)


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
        if obj.docstring is None:
            return
        if ">>> " in obj.docstring.value:
            obj.docstring.value = fence_examples(obj.docstring.value)
        obj.docstring.value = plain_roles(obj.docstring.value)
