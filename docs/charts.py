"""Draws the performance page's charts (SVG) from the figures committed beside it.

The figures are `docs/pages/performance-figures.json`: the side-by-side tables of
`python -m benchmarks.compare` as each was committed to the page (the last one is the
page's table now), and the asv `track_` figures of its "Close to the limit" table at
the commits that recorded them. asv's own results (`benchmarks/results/`) are not
committed, so what is drawn over commits is these tables. After editing the figures:

    uv run --frozen python docs/charts.py            # writes docs/pages/img/*.svg
    uv run --frozen python docs/charts.py --check    # CI: fails if a committed SVG is stale

The SVGs are byte for byte the same on every run and machine with the locked
matplotlib: a fixed hash salt for the ids, no date, text kept as text (laid out with
matplotlib's own DejaVu Sans, whatever fonts the system has).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib import font_manager, ticker
from matplotlib import pyplot as plt
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "pages" / "performance-figures.json"
FOLDER = ROOT / "docs" / "pages" / "img"
COMMAND = "uv run --frozen python docs/charts.py"
COLOURS = {"baseline": "#9e9e9e", "chute": "#1f77b4", "Grain": "#ff7f0e", "PyTorch": "#d62728"}
_SCALES = {"M": 1e6, "k": 1e3, "x": 1.0, "ms": 1e-3, "us": 1e-6}

Figures = dict[str, Any]
"""The parsed `performance-figures.json`."""


def parse_cell(text: str) -> float | None:
    """A table cell as a number (times in seconds), or None for "-" and "n/a".

    Example:
        >>> [parse_cell(cell) for cell in ["7.82M", "46,843", "40 ms", "239 us", "2.47x", "n/a"]]
        [7820000.0, 46843.0, 0.04, 0.000239, 2.47, None]
    """
    text = text.replace(",", "").strip()
    if text in ("-", "n/a", ""):
        return None
    number, _, unit = text.partition(" ")
    if not unit and number[-1] in _SCALES:
        number, unit = number[:-1], number[-1]
    return round(float(number) * _SCALES.get(unit, 1.0), 12)


def _seconds(value: float, _: object = None) -> str:
    """A time axis' tick: `_seconds(0.04)` is '40 ms'."""
    if value >= 1:
        return f"{value:g} s"
    return f"{value * 1e3:g} ms" if value >= 1e-3 else f"{value * 1e6:g} us"


def _count(value: float, _: object = None) -> str:
    """A rate axis' tick: `_count(2e6)` is '2M'."""
    for suffix, scale in (("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def draw_comparison(figures: Figures) -> Figure:
    """The page's side-by-side table: each loader's figure per workload, log scales."""
    comparison = figures["comparison"]
    rows, latest = comparison["rows"], comparison["runs"][-1]
    names = ["baseline", "chute", "Grain", "PyTorch"]
    figure, axes = plt.subplots(2, 1, figsize=(9, 8.6), layout="constrained")
    for ax, higher in zip(axes, (True, False), strict=True):
        chosen = [i for i, row in enumerate(rows) if row["higher_is_better"] is higher]
        for position, index in enumerate(chosen):
            for offset, name in enumerate(names):
                cell = latest["cells"][index][offset]
                value = parse_cell(cell)
                y = position + (offset - 1.5) * 0.2
                if value is None:  # "-" (no baseline) or "n/a" (the loader cannot).
                    where = ax.get_yaxis_transform()
                    note = f" {name}: {cell}"
                    ax.text(0, y, note, transform=where, va="center", fontsize=7, color="#757575")
                    continue
                ax.barh(y, value, height=0.18, color=COLOURS[name], label=name)
                ax.text(value, y, f" {cell}", va="center", fontsize=7)
        labels = [rows[i]["short"] + (f"\n({rows[i]['unit']})" if higher else "") for i in chosen]
        ax.set_yticks(range(len(chosen)), labels)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_count if higher else _seconds))
        ax.set_xlim(left=1e2 if higher else 1e-5, right=3e7 if higher else 3e1)
        what = "Throughput (longer is better)" if higher else "Time (shorter is better)"
        ax.set_title(f"{what}; log scale", loc="left")
    handles = dict(zip(*reversed(axes[0].get_legend_handles_labels()), strict=True))
    shown = dict(zip(names, comparison["columns"], strict=False), baseline="no loader (baseline)")
    axes[0].legend(handles.values(), [shown[name] for name in handles], frameon=False)
    figure.suptitle(
        "chute beside Grain and the PyTorch DataLoader: median of "
        f"{latest.get('repeats', 3)} fresh processes each, 2 cores "
        f"({latest['commit']}, {latest['date']})",
        fontsize=10,
    )
    return figure


def draw_history(figures: Figures) -> Figure:
    """The ratio of chute to the best other loader, per workload, in each committed table."""
    comparison = figures["comparison"]
    runs = comparison["runs"]
    figure, ax = plt.subplots(figsize=(9, 4.8), layout="constrained")
    for index, row in enumerate(comparison["rows"]):
        cells = [parse_cell(run["cells"][index][-1]) for run in runs]
        ratios = [float("nan") if ratio is None else ratio for ratio in cells]
        ax.plot(range(len(runs)), ratios, marker="o", label=row["short"])
    ax.axhline(1.0, color="#424242", linewidth=0.8, linestyle="--")
    # Below the line between the 2nd and 3rd runs, where no row's line has passed.
    ax.text(1.08, 0.95, "as good as the best other", ha="left", va="top", fontsize=7)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.set_xticks(range(len(runs)), [f"{run['commit']}\n{run['date']}" for run in runs])
    ax.set_ylabel("chute / best of Grain and PyTorch (log scale)")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax.set_title(
        "The side-by-side table in each commit that re-measured it (above 1: chute is ahead)",
        loc="left",
        fontsize=10,
    )
    return figure


def draw_targets(figures: Figures) -> Figure:
    """The asv `track_` figures of the page's targets, at the commits that recorded them."""
    targets = figures["targets"]
    commits = [f"{entry['commit']} ({entry['date']})" for entry in targets["commits"]]
    figure, axes = plt.subplots(
        1, 2, figsize=(10, 4.6), layout="constrained", gridspec_kw={"width_ratios": [3, 2]}
    )
    for ax, unit in zip(axes, ("x", "ms"), strict=True):
        rows = [row for row in targets["rows"] if row["unit"] == unit]
        for y, row in enumerate(rows):
            values = [None if text is None else float(text) for text in row["figures"]]
            known = [(v, c) for v, c in zip(values, ("#bdbdbd", COLOURS["chute"]), strict=True)]
            xs = [v for v, _ in known if v is not None]
            ax.plot(xs, [y] * len(xs), color="#bdbdbd", linewidth=1.5, zorder=1)
            for value, colour in known:
                if value is not None:
                    ax.scatter(value, y, color=colour, zorder=2, s=30)
            if row["target"] is not None:
                limit = float(row["target"].split()[-1])
                ax.scatter(limit, y, marker="|", s=200, color="#d62728", zorder=3)
            ax.annotate(row["figures"][-1], (xs[-1], y), xytext=(4, 5), textcoords="offset points")
        ax.set_yticks(range(len(rows)), [row["short"] for row in rows])
        ax.invert_yaxis()
        if unit == "ms":
            ax.set_xscale("symlog", linthresh=1.0)
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
            ax.set_xlim(-2, 400)
            ax.set_xlabel("log scale beyond 1 ms")
            ax.set_title("milliseconds, lower is better", loc="right")
        else:
            ax.set_title("x a baseline measured in the same process", loc="left")
    legend = [
        axes[0].scatter([], [], color="#bdbdbd", label=commits[0]),
        axes[0].scatter([], [], color=COLOURS["chute"], label=commits[1]),
        axes[0].scatter([], [], marker="|", s=200, color="#d62728", label="target"),
    ]
    figure.legend(handles=legend, loc="outside lower center", ncols=3, frameon=False)
    figure.suptitle("asv track_ figures of the targets, medians of 5 calls", fontsize=10)
    return figure


CHARTS: dict[str, Callable[[Figures], Figure]] = {
    "performance-comparison.svg": draw_comparison,
    "performance-history.svg": draw_history,
    "asv-targets.svg": draw_targets,
}
"""Each chart's file name, and what draws it."""


@contextmanager
def _deterministic() -> Iterator[None]:
    """The settings that make SVGs byte-identical, with matplotlib's bundled fonts only."""
    manager = font_manager.fontManager
    every_font = manager.ttflist
    bundled = Path(matplotlib.get_data_path()).resolve()
    manager.ttflist = [font for font in every_font if bundled in Path(font.fname).parents]
    try:
        with matplotlib.rc_context(
            {
                "svg.hashsalt": "chute-docs-charts",  # The ids of clip paths and the like.
                "svg.fonttype": "none",  # Text stays text: searchable, read aloud, smaller.
                "font.family": "DejaVu Sans",
                "font.size": 9,
                "axes.spines.top": False,
                "axes.spines.right": False,
            }
        ):
            yield
    finally:
        manager.ttflist = every_font


def write_charts(folder: Path, figures_path: Path = FIGURES) -> list[Path]:
    """Draws every chart of `CHARTS` into `folder`; returns their paths."""
    figures = json.loads(figures_path.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with _deterministic():
        for name, draw in CHARTS.items():
            figure = draw(figures)
            path = folder / name
            figure.savefig(path, format="svg", metadata={"Date": None, "Creator": COMMAND})
            plt.close(figure)
            written.append(path)
    return written


def stale_charts(folder: Path, figures_path: Path = FIGURES) -> list[str]:
    """What differs between the SVGs in `folder` and what `write_charts` draws now.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     _ = write_charts(Path(folder))
        ...     stale_charts(Path(folder))
        []
    """
    with tempfile.TemporaryDirectory() as scratch:
        problems = []
        for fresh in write_charts(Path(scratch), figures_path):
            committed = folder / fresh.name
            if not committed.exists():
                problems.append(f"{committed} is missing")
            elif committed.read_bytes() != fresh.read_bytes():
                problems.append(f"{committed} differs from what {figures_path.name} draws")
        return problems


def main(argv: Sequence[str] | None = None) -> int:
    """`python docs/charts.py [--check] [--folder DIR]`; returns the exit code."""
    parser = argparse.ArgumentParser(prog="docs/charts.py", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed SVG is stale")
    parser.add_argument("--folder", type=Path, default=FOLDER, help="where the SVGs are")
    args = parser.parse_args(argv)
    if not args.check:
        for path in write_charts(args.folder):
            print(f"wrote {path}")
        return 0
    problems = stale_charts(args.folder)
    for problem in problems:
        print(f"docs/charts.py --check: {problem}", file=sys.stderr)
    if problems:
        print(f"draw them again and commit them: {COMMAND}", file=sys.stderr)
        return 1
    print(f"docs/charts.py --check: the {len(CHARTS)} charts in {args.folder} are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
