"""Timing helpers shared by the benchmarks: ratios measured in one run, with medians."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["median_ratio", "median_seconds"]


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
