"""Timing helpers shared by the benchmarks: ratios measured in one run, with medians."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["alternating", "fresh_process", "median_ratio", "median_seconds"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fresh_process(module: str, *args: str) -> dict[str, Any]:
    """The JSON object the last line of `python -m benchmarks.<module> *args` prints."""
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def alternating(
    ours: Callable[[], dict[str, Any]], base: Callable[[], dict[str, Any]], key: str, runs: int
) -> list[float]:
    """`runs` ratios of `ours()[key]` to `base()[key]`, which of the two goes first alternating."""
    values = []
    for number in range(runs):
        if number % 2 == 0:
            mine, theirs = ours(), base()
        else:
            theirs, mine = base(), ours()
        values.append(mine[key] / theirs[key])
    return values


def median_seconds(function: Callable[[], object], repeats: int = 7) -> float:
    """The median wall time of `function()` over `repeats` calls, after one warm-up."""
    function()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def median_ratio(
    ours: Callable[[], object], baseline: Callable[[], object], repeats: int = 7
) -> float:
    """Throughput of `ours` over throughput of `baseline` doing the same work.

    Both run alternately (so drifting machine load hits both alike), after one warm-up
    each; the result is the median of the per-pair ratios baseline_time / our_time.
    Above 1: ours is faster.
    """
    ours()
    baseline()
    ratios = []
    for repeat in range(repeats):
        pair = {}
        order = (("ours", ours), ("base", baseline))
        for name, function in order if repeat % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            function()
            pair[name] = time.perf_counter() - start
        ratios.append(pair["base"] / pair["ours"])
    return statistics.median(ratios)
