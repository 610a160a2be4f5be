"""Draws a chute trace (the JSON of `ds.iter(trace=...)`) as a PNG timeline.

One row per track (process and thread), nested events stacked below their parent,
one box per event coloured by its name, a legend. The picture of the tracing guide is
made with

    uv run --frozen python docs/trace_picture.py

which traces the image pipeline of `benchmarks/bench_execution_workers.py` on 2 workers,
batched by 128, and writes docs/pages/guides/img/trace-image-pipeline.png (and the trace
itself to /tmp/trace-image-pipeline.json). Given the paths of a trace and of a PNG, it
draws that trace instead: `python docs/trace_picture.py trace.json out.png`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "pages" / "guides" / "img" / "trace-image-pipeline.png"
SKIPPED: set[str] = set()  # Event names not drawn.


def trace_image_pipeline(path: Path) -> None:
    """Runs the benchmarks' image pipeline on 2 workers, batched by 128, traced to `path`."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_execution_workers import IMAGES, image_pipeline, write_images

    with tempfile.TemporaryDirectory() as folder:
        paths = write_images(folder, IMAGES)
        ds = image_pipeline(paths).mp_prefetch(num_workers=2).batch(128)
        for _ in ds:  # A first run, so that the picture shows a warm one.
            pass
        for _ in ds.iter(trace=path):
            pass


def _tracks(trace: dict[str, Any]) -> tuple[list[tuple[int, int]], dict[tuple[int, int], str]]:
    processes, threads = {}, {}
    for event in trace["traceEvents"]:
        if event["ph"] == "M" and event["name"] == "process_name":
            processes[event["pid"]] = event["args"]["name"]
        if event["ph"] == "M" and event["name"] == "thread_name":
            threads[(event["pid"], event["tid"])] = event["args"]["name"]
    order = {pid: number for number, pid in enumerate(processes)}
    keys = sorted(threads, key=lambda key: (order.get(key[0], len(order)), key[1]))
    labels = {
        key: f"{processes.get(key[0], key[0])} (pid {key[0]})\n{threads[key]}" for key in keys
    }
    return keys, labels


def _depths(events: list[dict[str, Any]]) -> list[int]:
    """Each event's nesting depth on its track (events sorted by start, longest first)."""
    depths, open_ends = [], []
    for event in events:
        end = event["ts"] + event["dur"]
        while open_ends and open_ends[-1] <= event["ts"] + 1e-3:
            open_ends.pop()
        depths.append(len(open_ends))
        open_ends.append(end)
    return depths


def draw(trace_path: Path, picture: Path, title: str) -> None:
    """Draws the trace at `trace_path` as a timeline in `picture` (a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    trace = json.loads(trace_path.read_text())
    keys, labels = _tracks(trace)
    events = defaultdict(list)
    for event in trace["traceEvents"]:
        if event["ph"] == "X" and event["name"] not in SKIPPED:
            events[(event["pid"], event["tid"])].append(event)
    keys = [key for key in keys if events[key]]
    start = min(event["ts"] for track in events.values() for event in track)
    names = sorted({event["name"] for track in events.values() for event in track})
    palette = plt.get_cmap("tab20").colors
    colours = {name: palette[number % len(palette)] for number, name in enumerate(names)}
    layout, row = [], 0.0
    for key in keys:
        track = sorted(events[key], key=lambda event: (event["ts"], -event["dur"]))
        depths = _depths(track)
        levels = max(depths) + 1
        layout.append((key, track, depths, row, levels))
        row += levels + 0.6
    figure, axes = plt.subplots(figsize=(14, 0.42 * row + 1.8))
    for _key, track, depths, top, _levels in layout:
        for event, depth in zip(track, depths, strict=True):
            axes.broken_barh(
                [((event["ts"] - start) / 1000, max(event["dur"] / 1000, 0.02))],
                (top + depth, 0.9),
                facecolors=colours[event["name"]],
                edgecolor="black",
                linewidth=0.2,
            )
    axes.set_yticks([top + levels / 2 for _, _, _, top, levels in layout])
    axes.set_yticklabels([labels[key] for key, *_ in layout], fontsize=8)
    axes.set_ylim(row, -0.3)
    axes.set_xlabel("milliseconds since the first event")
    axes.set_title(title, fontsize=10)
    axes.grid(axis="x", linewidth=0.3)
    handles = [Patch(facecolor=colours[name], edgecolor="black", label=name) for name in names]
    axes.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    picture.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(picture, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        draw(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[1]).name)
    else:
        traced = Path(tempfile.gettempdir()) / "trace-image-pipeline.json"
        trace_image_pipeline(traced)
        draw(
            traced,
            PICTURE,
            "image pipeline (ArrayRecord -> shuffle -> decode -> crop/flip -> normalise), "
            "mp_prefetch(num_workers=2), batch(128): 4096 images",
        )
        print(f"wrote {traced} and {PICTURE}")
