"""Runs every comparison and prints one table: `uv run python -m benchmarks.compare`.

Options: `--repeats N` (default 3; the table shows medians), `--markdown FILE` (also
write the table as Markdown), `--torch-python PATH` (a Python with torch, numpy and
array-record; by default `benchmarks/compare/.torch-venv`, created on first use with
`pip install torch==2.13.0 numpy array-record`), `--no-torch`, `--data DIR` (where
the image files go; a temporary folder by default).

Every run is a fresh process, so start-up costs (imports, worker processes) count
where they should: in time to first batch, and in throughput as a user sees it.
Ratios compare figures measured in this same invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_VENV = os.path.join(HERE, ".torch-venv")

# (row label, workload, workers, metric, unit, higher is better)
ROWS: list[tuple[str, str, int, str, str, bool]] = [
    (
        "1. range -> shuffle -> map -> batch(256), 1 process",
        "range",
        0,
        "records_per_s",
        "records/s",
        True,
    ),
    (
        "2a. ArrayRecord images -> decode -> crop/flip -> normalise -> batch(128), 0 workers",
        "images",
        0,
        "records_per_s",
        "records/s",
        True,
    ),
    ("2b. the same, 2 workers", "images", 2, "records_per_s", "records/s", True),
    ("3. 2 MiB arrays -> batch(8), 2 workers", "arrays", 2, "mb_per_s", "MB/s", True),
    (
        "4. time to first batch (images, 2 workers, from iter())",
        "first_batch",
        2,
        "first_batch_s",
        "s",
        False,
    ),
    (
        "4b. ... from process start (imports included)",
        "first_batch",
        2,
        "process_first_batch_s",
        "s",
        False,
    ),
    (
        "5a. checkpoint save (get_state + json.dump, 2 workers)",
        "checkpoint",
        2,
        "save_s",
        "s",
        False,
    ),
    (
        "5b. checkpoint restore (json.load + set_state + next)",
        "checkpoint",
        2,
        "restore_s",
        "s",
        False,
    ),
]
LOADERS = ("chute", "grain", "torch")


def ensure_torch(python: str | None) -> str | None:
    if python:
        return python
    candidate = os.path.join(TORCH_VENV, "bin", "python")
    if not os.path.exists(candidate):
        print("creating the PyTorch environment (once) ...", file=sys.stderr)
        if os.path.islink(TORCH_VENV):  # A link to an environment that is gone.
            os.unlink(TORCH_VENV)
        subprocess.run([sys.executable, "-m", "venv", TORCH_VENV], check=True)
        subprocess.run(
            [candidate, "-m", "pip", "install", "-q", "torch==2.13.0", "numpy", "array-record"],
            check=True,
        )
    return candidate


def run(python: str, runner: str, workload: str, folder: str, workers: int) -> dict[str, Any]:
    script = os.path.join(HERE, f"run_{runner}.py")
    # Workers that spawn (Grain) import the workload functions by module name.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [python, script, workload, folder, str(workers)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}


def median_of(results: Sequence[dict[str, Any]], metric: str) -> float | str:
    values = [r[metric] for r in results if metric in r]
    if values:
        return statistics.median(values)
    for r in results:
        if "unsupported" in r:
            return "n/a"
        if "error" in r:
            return "error: " + str(r["error"])[:60]
    return "n/a"


def show(value: float | str, unit: str) -> str:
    if isinstance(value, str):
        return value
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value >= 0.001 else f"{value * 1e6:.0f} us"
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value:,.0f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--torch-python", default=None)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    folder = args.data or tempfile.mkdtemp(prefix="chute-compare-")
    pythons = {"chute": sys.executable, "grain": sys.executable, "plain": sys.executable}
    if not args.no_torch:
        pythons["torch"] = ensure_torch(args.torch_python) or ""
    cache: dict[tuple[str, str, int], list[dict[str, Any]]] = {}

    def results(runner: str, workload: str, workers: int) -> list[dict[str, Any]]:
        key = (runner, workload, workers)
        if key not in cache:
            python = pythons.get(runner)
            cache[key] = [
                run(python, runner, workload, folder, workers) if python else {"unsupported": 1}
                for _ in range(args.repeats)
            ]
        return cache[key]

    lines = [
        "| workload | baseline | chute | Grain 0.2.18 | PyTorch 2.13 | chute / best other |",
        "|---|---|---|---|---|---|",
    ]
    for label, workload, workers, metric, unit, higher in ROWS:
        base_metric = "mb_per_s" if workload == "arrays" else metric
        baseline: float | str = "-"
        if workload in ("range", "images", "arrays", "checkpoint"):
            baseline = median_of(results("plain", workload, 0), base_metric)
        values = {name: median_of(results(name, workload, workers), metric) for name in LOADERS}
        others = [v for n, v in values.items() if n != "chute" and isinstance(v, float)]
        ours = values["chute"]
        ratio = "-"
        if isinstance(ours, float) and others and ours > 0:
            best = max(others) if higher else min(others)
            ratio = f"{(ours / best) if higher else (best / ours):.2f}x"
        cells = [show(baseline, unit), *(show(values[n], unit) for n in LOADERS), ratio]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print()
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as file:
            file.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
