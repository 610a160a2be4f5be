"""The docs' pictures are drawn from their sources, and drawn again after each edit.

A picture of the site is a Graphviz source (`docs/pages/.../name.dot`) and the SVG made
from it (`dot -Tsvg name.dot -o name.svg`, committed: the site and GitHub show the SVG,
with no script and nothing fetched). Graphviz may not be installed where the tests run,
so the test reads the SVG instead of drawing it again: every line of every label in the
source must be a text of the SVG, so a label edited without drawing the picture again
fails here. A page shows each picture, so none is left unused.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "docs" / "pages").rglob("*.dot"))
_LABEL = re.compile(r'\blabel="((?:[^"\\]|\\.)*)"')
_TEXT = re.compile(r"<text\b[^>]*>([^<]*)</text>")


def label_lines(source: str) -> list[str]:
    """The lines of every label in a Graphviz source, as Graphviz draws them."""
    lines = []
    for label in _LABEL.findall(source):
        unescaped = label.replace('\\"', '"')
        lines.extend(line.strip() for line in re.split(r"\\[nlr]", unescaped) if line.strip())
    return lines


def test_there_is_a_picture():
    assert [path.name for path in SOURCES] == ["architecture.dot"]


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.name)
def test_the_svg_shows_every_label_of_its_source(source):
    svg = source.with_suffix(".svg")
    assert svg.exists(), f"{svg.name} is missing: dot -Tsvg {source.name} -o {svg.name}"
    drawn = {html.unescape(text).strip() for text in _TEXT.findall(svg.read_text())}
    missing = [line for line in label_lines(source.read_text()) if line not in drawn]
    assert not missing, f"{svg.name} was not drawn again from {source.name}: {missing}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.name)
def test_a_page_shows_the_picture(source):
    name = source.with_suffix(".svg").name
    pages = [page for page in source.parent.glob("*.md") if f"]({name})" in page.read_text()]
    assert pages, f"no page beside {source.name} shows {name}"


def test_label_lines_reads_labels_as_graphviz_draws_them():
    source = 'a [label="first\\nsecond"]; b -> c [label="say \\"hi\\""];'
    assert label_lines(source) == ["first", "second", 'say "hi"']
