"""asv benchmarks of 2 MiB arrays made in a map and batched by 8, beside plain loops.

Every figure comes from fresh processes (`benchmarks._arrays_run`), runs alternating
with the baseline's, as ratios of GB/s (medians of `RUNS`). The baseline is the loop a
user writes without a loader, with Python's allocator as it is (issue 32's targets:
2 workers >= 1.5x, 0 workers >= 0.9x). The same loop with glibc keeping freed memory
(`mallopt`, as chute's workers do) is the physical limit on one core here: arrays stay
in the caches, and nothing crosses processes (`track_two_workers_ratio_to_kept_loop`).
"""

from __future__ import annotations

import statistics

from ._timing import alternating, fresh_process

RUNS = 3


def run(kind: str) -> float:
    """GB/s of one fresh process (see `benchmarks._arrays_run`)."""
    return float(fresh_process("_arrays_run", kind)["gb_per_s"])


def ratio(kind: str, baseline: str) -> float:
    """The median over `RUNS` alternating pairs of `kind`'s GB/s over `baseline`'s."""
    figures = alternating(
        lambda: fresh_process("_arrays_run", kind),
        lambda: fresh_process("_arrays_run", baseline),
        "gb_per_s",
        RUNS,
    )
    return statistics.median(figures)


class LargeArraysVsPlainLoop:
    """chute with 0 and 2 workers over the plain loop, in fresh processes."""

    timeout = 600

    def track_two_workers_ratio_to_plain_loop(self) -> float:
        return ratio("workers2", "plain")

    track_two_workers_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def track_zero_workers_ratio_to_plain_loop(self) -> float:
        return ratio("workers0", "plain")

    track_zero_workers_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def track_two_workers_ratio_to_kept_loop(self) -> float:
        """Against the plain loop with freed memory kept: the one-core limit."""
        return ratio("workers2", "kept")

    track_two_workers_ratio_to_kept_loop.unit = "ratio"  # type: ignore[attr-defined]
