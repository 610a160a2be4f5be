"""A WebDataset pipeline with worker processes: exact resume, local shards and a bucket.

The random-access `WebDatasetSource` behind a global shuffle, a map and two worker
processes resumes exactly (also into the same pipeline run in one process), from local shards
and from shards in a bucket (the loopback S3 server) read through the shard cache;
the `WebDatasetStream` behind an `IterDataset` resumes exactly too.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

import pytest

import chute
from chute_sources import WebDatasetSource, WebDatasetStream, write_webdataset
from chute_testing import assert_resumes

SAMPLES = [
    {"__key__": f"train/{i:04d}", "jpg": bytes([i % 256]) * (7 * i % 300), "cls": i % 10}
    for i in range(48)
]


def label_and_key(sample: dict[str, Any]) -> tuple[str, int, int]:
    return sample["__key__"], sample["cls"], len(sample["jpg"])


def pipeline(source: WebDatasetSource, workers: int) -> Any:
    dataset = chute.MapDataset.source(source).shuffle(seed=5).map(label_and_key)
    options = chute.MultiprocessingOptions(num_workers=workers)
    return dataset.to_iter_dataset().mp_prefetch(options, chunk_size=4)


def assert_pipeline_resumes(paths: Any, options: Any = None) -> None:
    source = WebDatasetSource(paths, decode=True, storage_options=options)
    expected = [label_and_key(source[i]) for i in range(len(source))]
    elements = assert_resumes(
        lambda: iter(pipeline(source, 2)),
        every=7,
        make_restored=[lambda: iter(pipeline(source, 0))],
    )
    assert sorted(elements) == sorted(expected)
    assert elements != expected  # Shuffled.


@pytest.fixture
def local_shards(tmp_path: Path) -> list[str]:
    return write_webdataset(SAMPLES, str(tmp_path / "shard-%03d.tar"), max_count=10)


def test_two_workers_resume_exactly_from_local_shards(
    local_shards: list[str], tmp_path: Path
) -> None:
    assert_pipeline_resumes(str(tmp_path / "shard-{000..004}.tar"))


def test_two_workers_resume_exactly_from_a_bucket(
    s3: Any, local_shards: list[str], tmp_path: Path
) -> None:
    # Explicit options, as worker processes started earlier lack the test's environment.
    options = chute.StorageOptions(
        endpoint=s3.endpoint,
        access_key_id=s3.env["AWS_ACCESS_KEY_ID"],
        secret_access_key=s3.env["AWS_SECRET_ACCESS_KEY"],
        cache_dir=str(tmp_path / "cache"),
    )
    bucket = s3.create_bucket(f"wds-{uuid.uuid4().hex[:16]}")
    for path in local_shards:
        s3.put(bucket, f"train/{Path(path).name}", Path(path).read_bytes())
    assert_pipeline_resumes(f"s3://{bucket}/train/shard-{{000..004}}.tar", options)


def test_a_stream_pipeline_resumes_exactly(local_shards: list[str]) -> None:
    def make() -> Any:
        stream = functools.partial(WebDatasetStream, local_shards, decode=True)
        return iter(chute.IterDataset.source(stream).map(label_and_key).batch(3))

    elements = assert_resumes(make, every=2)
    assert [key for batch in elements for key in batch[0]] == [s["__key__"] for s in SAMPLES]


def test_webdataset_shards_read_on_three_processes_continue_on_two_then_five(tmp_path):
    samples = [{"__key__": f"s{i:03d}", "cls": i % 5, "txt": f"t{i}"} for i in range(40)]
    paths = write_webdataset(samples, str(tmp_path / "shard-%03d.tar"), max_count=9)
    source = chute.WebDatasetSource(paths)

    def sharded(index, count):
        ds = chute.MapDataset.source(source).seed(1).shuffle().shard(index, count)
        return ds.to_iter_dataset().map(lambda sample: sample["__key__"])

    run = chute.testing.assert_reshards(sharded, 3, [2, 5], seed=2)
    assert run.records == 40
