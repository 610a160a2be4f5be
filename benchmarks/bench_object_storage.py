"""asv benchmarks of reading the images data set from a bucket (a loopback S3 server).

Each figure is a ratio measured in one run against the same files on local disk (or,
for latency, against the same bucket without injected latency), medians of 3 pairs.
Targets of the cloud storage issue: warm-cache ArrayRecord and ranged Parquet reads at
>= 0.8x local disk for the image pipeline with 2 workers; with 20 ms injected per
request, >= 0.7x of the figure without, thanks to plan-aware prefetch. The server is
moto (Python), so cold reads measure its speed more than chute's.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import timeit
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import chute
from chute_sources import ArrayRecordSource, ParquetSource, StorageOptions
from chute_testing import FaultProxy, LoopbackS3

from ._timing import median_ratio
from .bench_execution_workers import crop_flip, normalise, write_images

IMAGES = 2048
PARQUET_FILES = 8
WORKERS = chute.MultiprocessingOptions(num_workers=2)
_FRESH = itertools.count()


def decode_row(record: dict) -> np.ndarray:
    """A Parquet row's image bytes as a 64x64x3 array."""
    return np.frombuffer(record["image"], np.uint8).reshape(64, 64, 3)


def array_record_image(record: dict) -> np.ndarray:
    return record["image"]


def _pipeline(source, decode) -> chute.IterDataset:
    return (
        chute.MapDataset.source(source)
        .shuffle(seed=0)
        .to_iter_dataset()
        .map(decode)
        .random_map(crop_flip, seed=1)
        .map(normalise)
        .mp_prefetch(WORKERS, chunk_size=128)
        .batch(128)
    )


def _drain(dataset) -> None:
    for _ in dataset:
        pass


def write_parquet_images(folder: str, paths: list[str]) -> list[str]:
    """The same images as 8 Parquet files (raw bytes), 64 rows per row group."""
    source = ArrayRecordSource(paths)
    images = [source[i]["image"].tobytes() for i in range(len(source))]
    per_file = len(images) // PARQUET_FILES
    written = []
    for number in range(PARQUET_FILES):
        rows = range(number * per_file, (number + 1) * per_file)
        table = pa.table({"image": [images[i] for i in rows], "label": [i % 10 for i in rows]})
        path = os.path.join(folder, f"images-{number}.parquet")
        pq.write_table(table, path, row_group_size=64, compression="none")
        written.append(path)
    return written


class _Bucket:
    """The images in ArrayRecord and Parquet, locally and in a loopback S3 bucket."""

    timer = timeit.default_timer
    number = 1
    repeat = 1
    timeout = 600

    def setup(self, *params) -> None:
        self.folder = tempfile.mkdtemp(prefix="chute-bench-s3-")
        self.shards = write_images(self.folder, IMAGES)
        self.parquet = write_parquet_images(self.folder, self.shards)
        self.server = LoopbackS3().start()
        self.proxy = FaultProxy(self.server.endpoint).start()
        self.server.create_bucket("images")
        for path in [*self.shards, *self.parquet]:
            self.server.put_file("images", os.path.basename(path), path)

    def teardown(self, *params) -> None:
        self.proxy.stop()
        self.server.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def options(self, endpoint: str | None = None, **changes) -> StorageOptions:
        env = self.server.env
        return StorageOptions(
            endpoint=endpoint or self.server.endpoint,
            access_key_id=env["AWS_ACCESS_KEY_ID"],
            secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region=env["AWS_REGION"],
            cache_dir=os.path.join(self.folder, "cache", str(next(_FRESH))),
            **changes,
        )

    def url(self, name: str) -> str:
        return self.server.url("images", name)


class ArrayRecordFromBucket(_Bucket):
    """The image pipeline, 2 workers, reading ArrayRecord shards through the shard cache."""

    def setup(self, *params) -> None:
        super().setup()
        self.urls = [self.url(os.path.basename(p)) for p in self.shards]
        self.warm = self.options()
        ArrayRecordSource(self.urls, storage_options=self.warm).__getitems__([0, IMAGES - 1])

    def _local(self) -> None:
        _drain(_pipeline(ArrayRecordSource(self.shards), array_record_image))

    def _warm(self) -> None:
        source = ArrayRecordSource(self.urls, storage_options=self.warm)
        _drain(_pipeline(source, array_record_image))

    def _cold(self) -> None:
        source = ArrayRecordSource(self.urls, storage_options=self.options())
        _drain(_pipeline(source, array_record_image))

    def time_warm_cache(self) -> None:
        self._warm()

    def track_warm_cache_ratio_to_local_disk(self) -> float:
        return median_ratio(self._warm, self._local, repeats=3)

    track_warm_cache_ratio_to_local_disk.unit = "ratio"  # type: ignore[attr-defined]

    def track_cold_cache_ratio_to_local_disk(self) -> float:
        return median_ratio(self._cold, self._local, repeats=3)

    track_cold_cache_ratio_to_local_disk.unit = "ratio"  # type: ignore[attr-defined]


class ParquetFromBucket(_Bucket):
    """The image pipeline, 2 workers, reading Parquet row groups by ranged requests."""

    def _local(self) -> None:
        _drain(_pipeline(ParquetSource(self.parquet), decode_row))

    def _ranged(self, endpoint: str | None = None, **changes) -> None:
        options = self.options(endpoint, **changes)
        source = ParquetSource(self.url("images-*.parquet"), storage_options=options)
        _drain(_pipeline(source, decode_row))

    def time_ranged_reads(self) -> None:
        self._ranged()

    def track_ranged_ratio_to_local_disk(self) -> float:
        return median_ratio(self._ranged, self._local, repeats=3)

    track_ranged_ratio_to_local_disk.unit = "ratio"  # type: ignore[attr-defined]


class LatencyAndPrefetch(_Bucket):
    """Parquet from the bucket with 20 ms per request, by prefetch budget (0: none).

    The ratio is to the same budget without injected latency (both through the proxy).
    The budget also holds row groups already read, which a shuffled pipeline decodes
    again and again (the data set is 25 MB: 16 MiB holds part of it).
    """

    params: ClassVar[list[int]] = [0, 16 << 20, 256 << 20]
    param_names: ClassVar[list[str]] = ["prefetch_bytes"]

    def _read(self, latency: float, prefetch_bytes: int) -> None:
        self.proxy.latency = latency
        options = self.options(self.proxy.endpoint, prefetch_bytes=prefetch_bytes)
        source = ParquetSource(self.url("images-*.parquet"), storage_options=options)
        _drain(_pipeline(source, decode_row))

    def track_ratio_to_no_latency(self, prefetch_bytes: int) -> float:
        return median_ratio(
            lambda: self._read(0.02, prefetch_bytes),
            lambda: self._read(0.0, prefetch_bytes),
            repeats=3,
        )

    track_ratio_to_no_latency.unit = "ratio"  # type: ignore[attr-defined]
