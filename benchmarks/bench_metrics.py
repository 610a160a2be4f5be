"""asv benchmarks of live metrics' cost: a metered pipeline over the same one unmetered.

The workload of the per-element benchmark (`bench_datasets.ShuffleMapBatch`): integers
-> shuffle -> map -> batch(256), iterated to the end, once with `iter(metrics=...)`
(each stage timed, its cells and histogram updated, the input wait measured) and once
without; and a stream of three maps batched after the stream, where every element
passes four metered stages. Target for the first: metered >= 0.98 of unmetered.
"""

from __future__ import annotations

import chute

from ._timing import median_ratio

N = 200_000
BATCH = 256


def _add_one(x: int) -> int:
    return x + 1


class MetricsOverhead:
    """Metered over unmetered throughput (1.0: free; 0.98: 2% slower)."""

    def setup(self) -> None:
        self.batched = chute.MapDataset.range(N).shuffle(seed=0).map(_add_one).batch(BATCH)
        stream = chute.MapDataset.range(N // 4).to_iter_dataset()
        self.stream = stream.map(_add_one).map(_add_one).map(_add_one).batch(BATCH)

    def _run(self, ds: chute.IterDataset[object], label: str | bool) -> None:
        for _ in ds.iter(metrics=label):
            pass

    def track_ratio_metrics_on_to_off(self) -> float:
        """The per-element benchmark's pipeline: metered / unmetered throughput."""
        ds = self.batched.to_iter_dataset()
        return median_ratio(lambda: self._run(ds, "bench"), lambda: self._run(ds, False), 9)

    track_ratio_metrics_on_to_off.unit = "ratio"  # type: ignore[attr-defined]

    def track_ratio_metrics_on_to_off_per_element_stages(self) -> float:
        """Three maps over a stream, metered per element / unmetered throughput."""
        ds = self.stream
        return median_ratio(lambda: self._run(ds, "bench"), lambda: self._run(ds, False), 5)

    track_ratio_metrics_on_to_off_per_element_stages.unit = "ratio"  # type: ignore[attr-defined]
