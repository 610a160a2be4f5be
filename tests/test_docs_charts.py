"""The performance page's charts are drawn from the committed figures, and show them.

`docs/charts.py` draws the SVGs of `docs/pages/img/` from
`docs/pages/performance-figures.json`; `--check` (a step of .ci/run) fails when a
committed SVG is not what the script draws now. Here: that check passes on the
committed files and fails, naming the file and the command, on a stale one; the figures
file holds exactly the numbers of the page's tables; and the page shows every chart
with a description for readers who cannot see it.
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "charts.py"
PAGE = ROOT / "docs" / "pages" / "performance.md"
FIGURES = json.loads((ROOT / "docs" / "pages" / "performance-figures.json").read_text())
COMMAND = "uv run --frozen python docs/charts.py"


@pytest.fixture(scope="module")
def charts():
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("docs_charts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def table_rows(text, header):
    """The cells of each row of the Markdown table whose header row starts with `header`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_committed_charts_are_what_the_script_draws():
    result = run_script("--check")
    assert result.returncode == 0, result.stderr
    assert "the 3 charts in" in result.stdout


def test_check_names_a_stale_or_missing_chart_and_the_command_to_redraw(tmp_path, charts):
    for name in charts.CHARTS:
        shutil.copy(charts.FOLDER / name, tmp_path / name)
    stale = tmp_path / "performance-history.svg"
    stale.write_text(stale.read_text().replace("abe1d44", "0000000"))
    (tmp_path / "asv-targets.svg").unlink()
    result = run_script("--check", "--folder", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"docs/charts.py --check: {stale} differs from what performance-figures.json draws",
        f"docs/charts.py --check: {tmp_path / 'asv-targets.svg'} is missing",
        f"draw them again and commit them: {COMMAND}",
    ]


def test_the_figures_are_the_numbers_of_the_tables_on_the_page():
    page = PAGE.read_text()
    comparison = FIGURES["comparison"]
    shown = table_rows(page, "| workload | baseline | chute |")
    latest = comparison["runs"][-1]["cells"]
    expected = [
        [row["label"], *cells] for row, cells in zip(comparison["rows"], latest, strict=True)
    ]
    assert shown == expected
    targets = {row[-1].strip("`"): row[1] for row in table_rows(page, "| target | figure")}
    for row in FIGURES["targets"]["rows"]:
        short = "..." + row["asv"].split(".", 1)[1]
        figure = targets.get(row["asv"], targets.get(short))
        assert figure is not None, f"no row of the targets table names {row['asv']}"
        value = re.sub(r"\*\*|\s*\(.*\)$", "", figure)  # "**16 ms** (met; ...)": "16 ms"
        unit = " ms" if row["unit"] == "ms" else ""
        assert value == row["figures"][-1] + unit, row["asv"]


def test_the_page_shows_every_chart_with_a_description(charts):
    page = PAGE.read_text()
    for name in charts.CHARTS:
        found = re.search(rf"!\[([^\]]*)\]\(img/{re.escape(name)}\)", page)
        assert found, f"performance.md does not show img/{name}"
        assert len(found.group(1).split()) >= 20, f"img/{name} needs a description (alt text)"


def test_the_script_docstrings_run(charts):
    failures, tried = doctest.testmod(charts, optionflags=doctest.ELLIPSIS)
    assert (failures, tried > 0) == (0, True)


def test_cells_parse_as_the_table_shows_them(charts):
    assert charts.parse_cell("1,058 ms") == pytest.approx(1.058)
    assert charts.parse_cell("2.79M") == pytest.approx(2.79e6)
    assert charts.parse_cell("-") is None
    for run in FIGURES["comparison"]["runs"]:  # Every committed cell is readable.
        for cells in run["cells"]:
            assert all(
                charts.parse_cell(cell) is not None or cell in ("-", "n/a") for cell in cells
            )
