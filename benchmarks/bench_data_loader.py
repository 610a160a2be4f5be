"""asv benchmarks of `DataLoader` beside the equivalent `MapDataset` pipeline.

Both run range(N) -> global shuffle -> map -> batch(256) to the end, in this process.
They are one pipeline written two ways (Grain's DataLoader guide and its Dataset
guide); the worker planner gives both the same execution, so the ratio
(`track_ratio_to_map_dataset`: DataLoader throughput over MapDataset's, medians of pairs
run alternately) should stay near 1 (the goal: above 0.9). The image workload of
`benchmarks.compare` runs both ways with 2 workers (`DataLoaderVsMpPrefetchImages`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

import chute

from ._timing import median_ratio, median_seconds
from .compare import workloads as images

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


class _Decode(chute.MapTransform):
    def map(self, element: bytes) -> dict[str, Any]:
        return images.decode(element)


class _CropFlip(chute.RandomMapTransform):
    def random_map(self, element: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        return images.crop_flip(element, rng)


class _Normalise(chute.MapTransform):
    def map(self, element: dict[str, Any]) -> dict[str, Any]:
        return images.normalise(element)


class DataLoaderVsMpPrefetchImages:
    """The image workload of `benchmarks.compare` through `DataLoader(worker_count=2)`,
    beside the same steps as `...to_iter_dataset().mp_prefetch(2 workers).batch(128)`.

    4,096 zlib-compressed 64x64 images in two ArrayRecord files: shuffle, decode, random
    crop and flip, normalise, batch(128); both iterators are built inside the timing and
    take over the workers the one before parked. `track_ratio_to_mp_prefetch`: images/s
    of the DataLoader over the dataset pipeline's (target >= 0.95).
    """

    timeout = 300

    def setup(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="chute-bench-dl-img-")
        paths = _written_images(self.folder)
        count = images.IMAGES
        self.source = chute.ArrayRecordSource(paths, decode=False)
        self.sampler = chute.IndexSampler(
            count, shard_options=chute.NoSharding(), shuffle=True, seed=0, num_epochs=1
        )
        self.options = chute.MultiprocessingOptions(num_workers=2)

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _loader(self) -> None:
        loader = chute.DataLoader(
            data_source=self.source,
            sampler=self.sampler,
            operations=[
                _Decode(),
                _CropFlip(),
                _Normalise(),
                chute.BatchTransform(batch_size=images.IMAGE_BATCH),
            ],
            worker_count=2,
        )
        for _ in loader:
            pass

    def _dataset(self) -> None:
        ds = (
            chute.MapDataset.source(self.source)
            .seed(0)
            .shuffle()
            .map(images.decode)
            .random_map(images.crop_flip)
            .map(images.normalise)
            .to_iter_dataset()
            .mp_prefetch(self.options)
            .batch(images.IMAGE_BATCH)
        )
        for _ in ds:
            pass

    def track_ratio_to_mp_prefetch(self) -> float:
        return median_ratio(self._loader, self._dataset, repeats=5)

    track_ratio_to_mp_prefetch.unit = "ratio"  # type: ignore[attr-defined]


_WRITE = "import sys; from benchmarks.compare import workloads; workloads.write_images(sys.argv[1])"


def _written_images(folder: str) -> list[str]:
    """The comparison's image files, written by another process (ArrayRecord's writer
    leaves a native thread running, and a process with threads cannot fork workers)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", _WRITE, folder], check=True, cwd=root)
    return images.write_images(folder)  # Written: this only lists them.
