"""`chute bench --plot FILE`: a chart of where a measured pipeline's time went.

One horizontal bar per stage, its own time as a share of the wall time (of N x the wall
time for stages in N worker processes, as the printed table counts it), and a last bar
for the consumer's input wait: the share of the wall time its `next()` calls took.
`chute bench` does nothing with an element but count it, so that wait is close to the
whole run there; what the stages' bars show is who is to blame for it.

matplotlib draws it, an optional dependency (`pip install 'chute-cli[plot]'`), imported
only when a chart is asked for; the format follows the file's extension (.svg or .png).
"""

from __future__ import annotations

import os
from typing import Any

from ._common import usage_error

__all__ = ["FORMATS", "check_plot_path", "write_plot"]

FORMATS = (".svg", ".png")
"""The extensions `--plot` accepts."""
_INSTALL = "pip install 'chute-cli[plot]'"
_STAGE, _BOTTLENECK, _WAIT = "#90caf9", "#1565c0", "#ef6c00"


def check_plot_path(path: str) -> None:
    """Refuses a `--plot` path before the run: a wrong extension, no folder, no matplotlib.

    Raises:
        CliError: with exit code 2, saying what to change (or what to install).

    Example:
        >>> check_plot_path("stages.svg")
        >>> try:
        ...     check_plot_path("stages.pdf")
        ... except Exception as error:
        ...     print(error)
        --plot: 'stages.pdf' must end in .svg or .png (the chart's format)
    """
    extension = os.path.splitext(path)[1].lower()
    if extension not in FORMATS:
        usage_error(f"--plot: {path!r} must end in .svg or .png (the chart's format)")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        usage_error(f"--plot: no folder {folder!r} to write {os.path.basename(path)!r} in")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        usage_error(f"--plot needs matplotlib, which is not installed: {_INSTALL}")


def _label(stage: dict[str, Any]) -> str:
    name = str(stage["name"])
    return name if len(name) <= 48 else name[:45] + "..."


def write_plot(result: dict[str, Any], path: str) -> None:
    """Draws `result` (what `measure` returned, with a `target`) into `path`.

    Raises:
        CliError: matplotlib is missing (exit code 2), naming the extra to install.

    Example:
        >>> import os, tempfile
        >>> result = {"target": "pipe:make", "seconds": 2.0, "elements": 40,
        ...           "batched": True, "input_wait_seconds": 1.9, "bottleneck": "map(f)",
        ...           "stages": [{"name": "map(f)", "seconds": 1.5, "share": 0.75}]}
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     write_plot(result, os.path.join(folder, "stages.svg"))
        ...     os.listdir(folder)
        ['stages.svg']
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        usage_error(f"--plot needs matplotlib, which is not installed: {_INSTALL}")
    stages = list(result["stages"])
    wall = float(result["seconds"])
    wait = float(result.get("input_wait_seconds") or 0.0)
    labels = [_label(stage) for stage in stages] + ["consumer's input wait (in next())"]
    shares = [float(stage["share"]) for stage in stages] + [wait / wall if wall > 0 else 0.0]
    seconds = [float(stage["seconds"]) for stage in stages] + [wait]
    colours = [_BOTTLENECK if s["name"] == result.get("bottleneck") else _STAGE for s in stages]
    colours.append(_WAIT)
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    figure, ax = plt.subplots(figsize=(8, 1.4 + 0.45 * len(labels)), layout="constrained")
    try:
        rows = range(len(labels))
        ax.barh(rows, [100 * share for share in shares], color=colours, height=0.6)
        for row, share, own in zip(rows, shares, seconds, strict=True):
            ax.text(100 * share, row, f" {share:.0%} ({own:.3g} s)", va="center", fontsize=8)
        ax.set_yticks(rows, labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(110.0, 100 * max(shares, default=0.0) * 1.25))
        ax.set_xlabel("% of the wall time (for stages in N workers: of N x the wall time)")
        keys = [(_BOTTLENECK, "bottleneck"), (_STAGE, "other stages"), (_WAIT, "input wait")]
        patches = [Patch(color=colour, label=label) for colour, label in keys]
        figure.legend(handles=patches, loc="outside lower center", ncols=3, frameon=False)
        unit = "batches" if result.get("batched") else "elements"
        ax.set_title(
            f"chute bench {result['target']}: {result['elements']:,} {unit} in {wall:.2f} s",
            loc="left",
            fontsize=10,
        )
        ax.spines[["top", "right"]].set_visible(False)
        # Text stays text in an SVG: searchable, and read by screen readers and tests.
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            metadata = {"Date": None} if extension == "svg" else {}
            figure.savefig(path, format=extension, metadata=metadata, dpi=120)
    finally:
        plt.close(figure)
