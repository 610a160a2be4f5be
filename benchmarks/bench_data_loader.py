"""asv benchmarks of `DataLoader` beside the equivalent `MapDataset` pipeline.

Both run range(N) -> global shuffle -> map -> batch(256) to the end, in this process.
They are one pipeline written two ways (Grain's DataLoader guide and its Dataset
guide); the worker planner gives both the same execution, so the ratio
(`track_ratio_to_map_dataset`: DataLoader throughput over MapDataset's, medians of pairs
run alternately) should stay near 1 (the goal: above 0.9).
"""

from __future__ import annotations

import numpy as np

import chute

from ._timing import median_ratio, median_seconds

N = 131_072
BATCH = 256


class _AddOne(chute.MapTransform):
    def map(self, element: int) -> int:
        return element + 1


def _add_one(element: int) -> int:
    return element + 1


class DataLoaderVsMapDataset:
    """`DataLoader(worker_count=0)` beside `MapDataset...batch(256)`, same elements."""

    def setup(self) -> None:
        sampler = chute.IndexSampler(
            N, shard_options=chute.NoSharding(), shuffle=True, seed=0, num_epochs=1
        )
        self.loader = chute.DataLoader(
            data_source=chute.RangeSource(N),
            sampler=sampler,
            operations=[_AddOne(), chute.BatchTransform(batch_size=BATCH)],
            worker_count=0,
        )
        self.dataset = chute.MapDataset.range(N).shuffle(seed=0).map(_add_one).batch(BATCH)

    def _loader(self) -> None:
        for _ in self.loader:
            pass

    def _dataset(self) -> None:
        for _ in self.dataset:
            pass

    def time_data_loader(self) -> None:
        self._loader()

    def track_us_per_element(self) -> float:
        return median_seconds(self._loader, repeats=3) / N * 1e6

    track_us_per_element.unit = "us"  # type: ignore[attr-defined]

    def track_ratio_to_map_dataset(self) -> float:
        return median_ratio(self._loader, self._dataset, repeats=7)

    track_ratio_to_map_dataset.unit = "ratio"  # type: ignore[attr-defined]


def _vector(element: int) -> np.ndarray:
    return np.full(256, element, np.float32) * 2.0


class _Vector(chute.MapTransform):
    def map(self, element: int) -> np.ndarray:
        return _vector(element)


class DataLoaderVsMpPrefetch:
    """`DataLoader(worker_count=2)` beside `...map().mp_prefetch(2 workers).batch(256)`.

    Each record becomes a 1 KiB float32 vector, so the batches cross shared memory. The
    ratio (`track_ratio_to_mp_prefetch`) should stay near 1: one planner plans both.
    """

    timeout = 120

    def setup(self) -> None:
        size = N // 4
        sampler = chute.IndexSampler(
            size, shard_options=chute.NoSharding(), shuffle=True, seed=0, num_epochs=1
        )
        self.loader = chute.DataLoader(
            data_source=chute.RangeSource(size),
            sampler=sampler,
            operations=[_Vector(), chute.BatchTransform(batch_size=BATCH)],
            worker_count=2,
        )
        options = chute.MultiprocessingOptions(num_workers=2)
        self.dataset = (
            chute.MapDataset.range(size)
            .shuffle(seed=0)
            .to_iter_dataset()
            .map(_vector)
            .mp_prefetch(options)
            .batch(BATCH)
        )

    def _loader(self) -> None:
        for _ in self.loader:
            pass

    def _dataset(self) -> None:
        for _ in self.dataset:
            pass

    def track_ratio_to_mp_prefetch(self) -> float:
        return median_ratio(self._loader, self._dataset, repeats=5)

    track_ratio_to_mp_prefetch.unit = "ratio"  # type: ignore[attr-defined]
