"""A griffe extension for chute's API pages: read `Example:` sections as examples.

griffe parses only `Examples:` (plural) as a Google-style examples section, whose `>>>`
lines render as Python code. It renders `Example:` as an admonition of plain Markdown,
where doctest lines run together and output such as `[9, 7, 9]` reads as a link. chute's
docstrings write `Example:` (ruff's Google convention accepts both spellings), so this
renames the heading before griffe parses a docstring. Loaded by `mkdocs.yml`.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Renames `Example:` section headings to `Examples:` in every docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrites the docstring of each object as griffe creates it."""
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE_HEADING.sub(r"\1Examples:", obj.docstring.value)
