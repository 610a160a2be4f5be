"""asv benchmarks of mixtures of many sources beside one source (issue 32, item 4).

Each figure comes from fresh processes (`benchmarks._mixture_run`): a mixture of 1, 8
or 64 streams of zlib-compressed images, each stream read with `ReadOptions()` (16
threads, 500 records ahead), against one stream of the same records and work. The
streams of a mixture share one read pool and one read-ahead budget, so the targets
for 64 sources are: threads <= 2x one source's, peak RSS <= 1.5x, throughput >= 0.9x
(`track_*_ratio_to_one_source`, medians over runs alternating with the baseline).
`MapDataset.mix` (one reader over a random-access mixture) is measured beside it.
"""

from __future__ import annotations

import statistics
from typing import Any

from ._timing import alternating, fresh_process

RUNS = 3


def run(sources: int, kind: str = "iter") -> dict[str, float]:
    """One fresh process's figures (see `benchmarks._mixture_run`)."""
    return fresh_process("_mixture_run", str(sources), kind)


def ratios(sources: int, kind: str, key: str) -> list[float]:
    """`RUNS` ratios of the mixture's `key` to one source's, the runs alternating."""
    return alternating(lambda: run(sources, kind), lambda: run(1), key, RUNS)


class ManySources:
    """`IterDataset.mix` of 1, 8 or 64 streams: records/s, threads and peak RSS.

    Each count runs `RUNS` times in fresh processes (once, in `setup_cache`); the
    figures are the medians (the most threads seen, for threads).
    """

    params = (1, 8, 64)
    param_names = ("sources",)
    timeout = 600

    def setup_cache(self) -> dict[int, list[dict[str, float]]]:
        return {sources: [run(sources) for _ in range(RUNS)] for sources in self.params}

    def track_records_per_second(self, runs: dict[int, Any], sources: int) -> float:
        return statistics.median(figures["records_per_s"] for figures in runs[sources])

    track_records_per_second.unit = "records/s"  # type: ignore[attr-defined]

    def track_threads(self, runs: dict[int, Any], sources: int) -> float:
        return max(figures["threads"] for figures in runs[sources])

    track_threads.unit = "threads"  # type: ignore[attr-defined]

    def track_rss_mib(self, runs: dict[int, Any], sources: int) -> float:
        return statistics.median(figures["rss_mib"] for figures in runs[sources])

    track_rss_mib.unit = "MiB"  # type: ignore[attr-defined]


class SixtyFourSources:
    """64 sources over one, as ratios (the targets of `benchmarks.targets`)."""

    timeout = 600

    def track_throughput_ratio_to_one_source(self) -> float:
        return statistics.median(ratios(64, "iter", "records_per_s"))

    track_throughput_ratio_to_one_source.unit = "ratio"  # type: ignore[attr-defined]

    def track_threads_ratio_to_one_source(self) -> float:
        return max(ratios(64, "iter", "threads"))

    track_threads_ratio_to_one_source.unit = "ratio"  # type: ignore[attr-defined]

    def track_rss_ratio_to_one_source(self) -> float:
        return statistics.median(ratios(64, "iter", "rss_mib"))

    track_rss_ratio_to_one_source.unit = "ratio"  # type: ignore[attr-defined]

    def track_map_mix_throughput_ratio_to_one_source(self) -> float:
        """The same 64 components through `MapDataset.mix` (one reader of the mixture)."""
        return statistics.median(ratios(64, "map", "records_per_s"))

    track_map_mix_throughput_ratio_to_one_source.unit = "ratio"  # type: ignore[attr-defined]
