"""Sources reading s3:// and gs:// URLs from real servers on loopback (moto, the GCS emulator).

Every read is compared with the same files read locally: exact records, in order.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chute_core import (
    InvalidArgumentError,
    ObjectChangedError,
    ObjectStorageCredentialsError,
    SourceFileNotFoundError,
)
from chute_sources import (
    ArrayRecordSource,
    FileInstruction,
    ParquetSource,
    ParquetStream,
    StorageOptions,
    write_array_record,
)
from chute_sources._remote._expand import glob_regex
from chute_sources._remote._urls import parse_object_url

RECORDS = [{"i": i, "x": np.full(40, i % 251, np.uint8)} for i in range(600)]


def options_for(server, tmp_path, **changes):
    """StorageOptions naming the server explicitly (workers get them pickled)."""
    env = server.env
    fields = {"cache_dir": str(tmp_path / "cache"), "max_attempts": 3, "initial_backoff": 0.01}
    if "AWS_ENDPOINT_URL" in env:
        fields.update(
            endpoint=env["AWS_ENDPOINT_URL"],
            access_key_id=env["AWS_ACCESS_KEY_ID"],
            secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region=env["AWS_REGION"],
        )
    else:
        fields.update(endpoint=env["STORAGE_EMULATOR_HOST"])
    fields.update(changes)
    return StorageOptions(**fields)


@pytest.fixture(params=["s3", "gs"])
def server(request):
    return request.getfixturevalue("loopback_s3" if request.param == "s3" else "loopback_gcs")


@pytest.fixture(scope="module")
def local_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local")
    shards = write_array_record(RECORDS, str(folder / "images"), num_shards=3)
    table = pa.table(
        {
            "i": np.arange(600),
            "name": [f"n{i}" for i in range(600)],
            "blob": [bytes([i % 256]) * (i % 50) for i in range(600)],
        }
    )
    parquet = []
    for k in range(3):
        path = str(folder / f"part-{k}.parquet")
        pq.write_table(table.slice(200 * k, 200), path, row_group_size=32)
        parquet.append(path)
    return shards, parquet


_COUNTER = iter(range(10**6))


@pytest.fixture
def bucket(server, local_files):
    """A fresh bucket holding the shards under `images/` and the Parquet files under `table/`."""
    name = f"chute-test-{os.getpid()}-{next(_COUNTER)}"
    server.create_bucket(name)
    shards, parquet = local_files
    for path in shards:
        server.put_file(name, "images/" + os.path.basename(path), path)
    for path in parquet:
        server.put_file(name, "table/" + os.path.basename(path), path)
    return name


def _same(a, b):
    assert a["i"] == b["i"]
    np.testing.assert_array_equal(a["x"], b["x"])


def test_array_record_from_a_bucket_reads_what_the_local_files_hold(
    server, bucket, local_files, tmp_path
):
    options = options_for(server, tmp_path)
    source = ArrayRecordSource(server.url(bucket, "images/"), storage_options=options)
    local = ArrayRecordSource(local_files[0])
    assert len(source) == len(local) == 600
    assert [i.filename for i in source.instructions] == [
        server.url(bucket, "images/" + os.path.basename(p)) for p in local_files[0]
    ]
    keys = np.random.default_rng(0).permutation(600).tolist()
    for got, want in zip(source.__getitems__(keys), local.__getitems__(keys), strict=True):
        _same(got, want)
    copy = pickle.loads(pickle.dumps(source))  # As a worker gets it: no clients, no readers.
    _same(copy[599], local[599])


def test_array_record_globs_lists_and_file_instructions(server, bucket, local_files, tmp_path):
    options = options_for(server, tmp_path)
    first = server.url(bucket, "images/" + os.path.basename(local_files[0][0]))
    pattern = server.url(bucket, "images/*-0000[12]-*")
    source = ArrayRecordSource([pattern, first], storage_options=options)
    assert [r["i"] for r in source.__getitems__([0, 199, 200, 399, 400, 599])] == [
        200,
        399,
        400,
        599,
        0,
        199,
    ]
    sliced = ArrayRecordSource(
        FileInstruction(first, skip=10, take=5, examples_in_shard=200), storage_options=options
    )
    assert [r["i"] for r in sliced.__getitems__(range(5))] == [10, 11, 12, 13, 14]


def test_counting_a_shard_downloads_none_of_it(server, bucket, tmp_path):
    options = options_for(server, tmp_path)
    ArrayRecordSource(server.url(bucket, "images/"), storage_options=options)
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(
        p.is_file() and p.suffix != ".lock"
        for p in cache.rglob("*")
        if "tmp" not in p.parts and p.name != "evict.lock"
    )


def test_parquet_from_a_bucket_reads_what_the_local_files_hold(
    server, bucket, local_files, tmp_path
):
    options = options_for(server, tmp_path)
    source = ParquetSource(server.url(bucket, "table/*.parquet"), storage_options=options)
    local = ParquetSource(local_files[1])
    keys = np.random.default_rng(1).permutation(600).tolist()
    source.prefetch(keys[:100])
    assert source.__getitems__(keys) == local.__getitems__(keys)
    named = ParquetSource(server.url(bucket, "table/"), columns=["name"], storage_options=options)
    assert named[433] == {"name": "n433"}
    stream = ParquetStream(server.url(bucket, "table/"), storage_options=options, batch_rows=7)
    assert list(stream) == [local[i] for i in range(600)]
    copy = pickle.loads(pickle.dumps(source))
    assert copy.__getitems__(keys[:50]) == local.__getitems__(keys[:50])


def test_missing_objects_and_buckets_are_named_at_construction(server, bucket, tmp_path):
    options = options_for(server, tmp_path)
    missing = server.url(bucket, "images/none.array_record")
    with pytest.raises(SourceFileNotFoundError, match=r"none\.array_record"):
        ArrayRecordSource(missing, storage_options=options)
    with pytest.raises(SourceFileNotFoundError, match="matches no Parquet object"):
        ParquetSource(server.url(bucket, "table/*.parq-nope"), storage_options=options)
    absent = f"{server.url(bucket, '')[: -len(bucket) - 1]}no-such-bucket-{os.getpid()}/x.parquet"
    with pytest.raises(SourceFileNotFoundError, match="bucket 'no-such-bucket"):
        ParquetSource(absent, storage_options=options)


def test_an_object_replaced_after_construction_is_an_error_not_mixed_data(
    server, bucket, local_files, tmp_path
):
    options = options_for(server, tmp_path)
    parquet = ParquetSource(server.url(bucket, "table/"), storage_options=options)
    shards = ArrayRecordSource(server.url(bucket, "images/"), storage_options=options)
    server.put_file(bucket, "table/" + os.path.basename(local_files[1][2]), local_files[1][0])
    server.put_file(bucket, "images/" + os.path.basename(local_files[0][2]), local_files[0][0])
    assert parquet[0]["i"] == 0  # Unchanged files read on.
    with pytest.raises(ObjectChangedError, match=r"part-2\.parquet changed"):
        parquet[599]
    with pytest.raises(ObjectChangedError, match="changed after the source was created"):
        shards[599]


def test_urls_are_checked():
    with pytest.raises(InvalidArgumentError, match="no valid bucket name"):
        parse_object_url("s3://A/b")
    with pytest.raises(InvalidArgumentError, match="scheme http://"):
        ParquetSource("http://example.com/x.parquet")
    assert bool(glob_regex("a/**/b?.parquet").match("a/x/y/b1.parquet"))
    assert not glob_regex("a/*.parquet").match("a/x/b.parquet")


def test_file_urls_read_local_files(local_files):
    assert len(ParquetSource("file://" + local_files[1][0])) == 200
    assert len(ArrayRecordSource("file://" + local_files[0][0])) == 200


@pytest.mark.parametrize("url", ["s3://some-bucket/x.parquet", "gs://some-bucket/x.parquet"])
def test_missing_credentials_are_a_clear_error_at_construction(monkeypatch, url):
    pytest.importorskip("obstore")  # The [s3] extra, not installed with the layer alone.
    for name in list(os.environ):
        if name.startswith(("AWS_", "GOOGLE_", "STORAGE_EMULATOR")):
            monkeypatch.delenv(name)
    options = StorageOptions(endpoint="http://127.0.0.1:9", max_attempts=2, initial_backoff=0)
    if url.startswith("gs://"):
        options = StorageOptions(max_attempts=2, initial_backoff=0)
    with pytest.raises(ObjectStorageCredentialsError, match="no credentials found") as caught:
        ParquetSource(url, storage_options=options)
    assert ("AWS_ACCESS_KEY_ID" if url.startswith("s3") else "GOOGLE_APPLICATION") in str(
        caught.value
    )
