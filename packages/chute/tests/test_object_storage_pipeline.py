"""Pipelines over sources in a bucket (loopback S3 server): exact, resumable, worker-invariant.

Prefetch and the shard cache are performance only: the elements and the states are
those of the same files on local disk, with 0 or 2 workers, and a state holds no cache.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import chute
from chute_testing import assert_resumes

RECORDS = [{"i": i, "x": np.full(64, i % 251, np.uint8)} for i in range(160)]


def plus_pixels(record):
    return {"i": record["i"], "total": int(record["x"].sum())}


def parquet_row(record):
    return {"i": record["i"], "n": len(record["text"])}


@pytest.fixture(scope="module")
def bucket(loopback_s3, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pipeline")
    shards = chute.write_array_record(RECORDS, str(folder / "rec"), num_shards=4)
    table = pa.table({"i": np.arange(160), "text": ["w" * (i % 37) for i in range(160)]})
    parquet = str(folder / "rows.parquet")
    pq.write_table(table, parquet, row_group_size=16)
    loopback_s3.create_bucket("pipeline")
    for path in [*shards, parquet]:
        loopback_s3.put_file("pipeline", os.path.basename(path), path)
    return shards, parquet


def _options(loopback_s3, tmp_path):
    env = loopback_s3.env
    return chute.StorageOptions(
        endpoint=loopback_s3.endpoint,
        access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region=env["AWS_REGION"],
        cache_dir=str(tmp_path / "cache"),
        cache_bytes=20_000,  # Smaller than the shards together: evictions on the way.
    )


def _pipeline(source, function, workers):
    ds = chute.MapDataset.source(source).seed(7).shuffle().to_iter_dataset().map(function)
    if workers is not None:
        ds = ds.mp_prefetch(num_workers=workers, chunk_size=8)
    return ds.batch(5)


@pytest.mark.parametrize("kind", ["array_record", "parquet"])
def test_a_bucket_pipeline_equals_the_local_one_and_resumes_exactly(
    loopback_s3, bucket, tmp_path, kind
):
    shards, parquet = bucket
    options = _options(loopback_s3, tmp_path)
    if kind == "array_record":
        remote = chute.ArrayRecordSource("s3://pipeline/rec-*", storage_options=options)
        local, function = chute.ArrayRecordSource(shards), plus_pixels
    else:
        remote = chute.ParquetSource("s3://pipeline/rows.parquet", storage_options=options)
        local, function = chute.ParquetSource(parquet), parquet_row
    expected = [
        {k: v.tolist() for k, v in batch.items()} for batch in _pipeline(local, function, None)
    ]

    def as_lists(iterator):
        return [{k: v.tolist() for k, v in batch.items()} for batch in iterator]

    assert as_lists(_pipeline(remote, function, 2)) == expected
    it = iter(_pipeline(remote, function, 2))
    head = as_lists(next(it) for _ in range(13))
    state = it.get_state()
    assert "cache" not in json.dumps(state) and "s3://" not in json.dumps(state)
    resumed = iter(_pipeline(local, function, 0))  # Restores into local files, 0 workers.
    resumed.set_state(json.loads(json.dumps(state)))
    assert head + as_lists(resumed) == expected
    assert_resumes(
        lambda: iter(_pipeline(remote, function, 2)),
        every=11,
        make_restored=[lambda: iter(_pipeline(remote, function, 0))],
    )
