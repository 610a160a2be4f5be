"""Failures between chute and a bucket, injected by a proxy in front of a real server.

And the shard cache as several processes and a killed one see it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chute_core import ObjectStoragePermissionError, ObjectStorageReadError
from chute_sources import ArrayRecordSource, ParquetSource, StorageOptions, write_array_record
from chute_sources._remote._cache import ShardCache
from chute_testing import FaultProxy

RECORDS = [{"i": i, "x": np.full(2000, i % 251, np.uint8)} for i in range(300)]
_BUCKETS = iter(range(10**6))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    shards = write_array_record(RECORDS, str(folder / "shard"), num_shards=3)
    table = pa.table({"i": np.arange(300), "text": [f"t{i}" * 20 for i in range(300)]})
    parquet = str(folder / "table.parquet")
    pq.write_table(table, parquet, row_group_size=50)
    return shards, parquet


@pytest.fixture
def bucket(loopback_s3, files):
    name = f"chute-faults-{os.getpid()}-{next(_BUCKETS)}"
    loopback_s3.create_bucket(name)
    shards, parquet = files
    for path in shards:
        loopback_s3.put_file(name, "shards/" + os.path.basename(path), path)
    loopback_s3.put_file(name, "table.parquet", parquet)
    return name


@pytest.fixture
def proxy(loopback_s3):
    with FaultProxy(loopback_s3.endpoint) as proxy:
        yield proxy


def options_via(loopback_s3, endpoint, tmp_path, **changes):
    env = loopback_s3.env
    fields = {
        "endpoint": endpoint,
        "access_key_id": env["AWS_ACCESS_KEY_ID"],
        "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        "region": env["AWS_REGION"],
        "max_attempts": 4,
        "initial_backoff": 0.01,
        "max_backoff": 0.05,
        "cache_dir": str(tmp_path / "cache"),
    }
    fields.update(changes)
    return StorageOptions(**fields)


def test_transient_failures_are_retried_and_the_records_are_exact(
    loopback_s3, bucket, proxy, files, tmp_path
):
    options = options_via(loopback_s3, proxy.endpoint, tmp_path)
    source = ParquetSource(loopback_s3.url(bucket, "table.parquet"), storage_options=options)
    local = ParquetSource(files[1])
    proxy.clear()
    proxy.fail_next(2, status=503)
    assert source[123] == local[123]
    statuses = [r.status for r in proxy.requests if r.method == "GET"]
    assert statuses == [503, 503, 206]
    proxy.fail_next(1, status=500)
    proxy.reset_next(1)  # The connection is cut in the middle of the body.
    assert source.__getitems__(list(range(299, -1, -7))) == local.__getitems__(
        list(range(299, -1, -7))
    )
    faults = [r.fault for r in proxy.requests if r.fault]
    assert faults == ["fail", "fail", "fail", "reset"]


def test_a_request_that_outlasts_its_timeout_is_retried(
    loopback_s3, bucket, proxy, files, tmp_path
):
    options = options_via(loopback_s3, proxy.endpoint, tmp_path, request_timeout=0.5)
    source = ParquetSource(loopback_s3.url(bucket, "table.parquet"), storage_options=options)
    proxy.stall_next(1, seconds=3)
    assert source[250] == ParquetSource(files[1])[250]


def test_failures_beyond_the_attempts_name_the_url_the_range_and_the_attempts(
    loopback_s3, bucket, proxy, tmp_path
):
    options = options_via(loopback_s3, proxy.endpoint, tmp_path, max_attempts=3)
    url = loopback_s3.url(bucket, "table.parquet")
    source = ParquetSource(url, storage_options=options)
    proxy.fail_next(10, status=503)
    with pytest.raises(ObjectStorageReadError) as caught:
        source[0]
    error = caught.value
    assert (error.url, error.attempts) == (url, 3)
    start, end = error.byte_range
    assert 0 <= start < end
    assert f"GET {url} bytes [{start}, {end}) failed 3 time(s) in a row" in str(error)


def test_permission_denied_is_clear_at_construction(loopback_s3, bucket, proxy, tmp_path):
    options = options_via(loopback_s3, proxy.endpoint, tmp_path)
    proxy.fail_next(1, status=403)
    with pytest.raises(ObjectStoragePermissionError, match="permission denied"):
        ParquetSource(loopback_s3.url(bucket, "table.parquet"), storage_options=options)


def test_a_data_set_larger_than_the_cache_reads_exactly(loopback_s3, bucket, files, tmp_path):
    shard_bytes = max(os.path.getsize(p) for p in files[0])
    limit = int(shard_bytes * 1.5)
    options = options_via(loopback_s3, loopback_s3.endpoint, tmp_path, cache_bytes=limit)
    source = ArrayRecordSource(loopback_s3.url(bucket, "shards/"), storage_options=options)
    keys = np.random.default_rng(4).permutation(300).tolist()
    for start in range(0, 300, 25):  # Hops between shards: each is fetched again and again.
        chunk = keys[start : start + 25]
        assert [r["i"] for r in source.__getitems__(chunk)] == chunk
    assert ShardCache(str(tmp_path / "cache"), limit).size_bytes() <= limit


_READ_ALL = textwrap.dedent(
    """
    import pickle, sys
    from chute_sources import ArrayRecordSource
    source = pickle.loads(bytes.fromhex(sys.argv[1]))
    assert [r["i"] for r in source.__getitems__(list(range(300)))] == list(range(300))
    """
)


def test_processes_sharing_the_cache_download_each_shard_once(loopback_s3, bucket, proxy, tmp_path):
    import pickle

    options = options_via(loopback_s3, proxy.endpoint, tmp_path)
    source = ArrayRecordSource(loopback_s3.url(bucket, "shards/"), storage_options=options)
    proxy.clear()
    blob = pickle.dumps(source).hex()
    readers = [subprocess.Popen([sys.executable, "-c", _READ_ALL, blob]) for _ in range(3)]
    assert [reader.wait(timeout=120) for reader in readers] == [0, 0, 0]
    downloads = [r.path for r in proxy.requests if r.method == "GET" and r.range is None]
    assert sorted(downloads) == sorted(
        f"/{bucket}/shards/{os.path.basename(i.filename)}" for i in source.instructions
    )


_DOWNLOAD = textwrap.dedent(
    """
    import pickle, sys
    source = pickle.loads(bytes.fromhex(sys.argv[1]))
    source[0]
    """
)


def test_a_process_killed_mid_download_leaves_no_entry(loopback_s3, bucket, proxy, tmp_path):
    import pickle

    options = options_via(loopback_s3, proxy.endpoint, tmp_path, request_timeout=60.0)
    source = ArrayRecordSource(loopback_s3.url(bucket, "shards/"), storage_options=options)
    cache = ShardCache(str(tmp_path / "cache"), options.cache_bytes)
    proxy.stall_next(1, seconds=30)
    child = subprocess.Popen([sys.executable, "-c", _DOWNLOAD, pickle.dumps(source).hex()])
    partial = os.path.join(cache.folder, "tmp")
    deadline = time.monotonic() + 60
    while not os.listdir(partial):
        assert time.monotonic() < deadline, "the download never started"
        assert child.poll() is None
        time.sleep(0.02)
    child.kill()
    child.wait()
    assert cache.entries() == []  # The killed download left no entry ...
    assert source[0]["i"] == 0  # ... and the shard reads whole here ...
    cache.evict()
    assert os.listdir(partial) == []  # ... and its temporary file is gone.


def test_prefetch_downloads_the_shards_a_read_will_need(loopback_s3, bucket, proxy, tmp_path):
    options = options_via(loopback_s3, proxy.endpoint, tmp_path)
    source = ArrayRecordSource(loopback_s3.url(bucket, "shards/"), storage_options=options)
    cache = ShardCache(str(tmp_path / "cache"), options.cache_bytes)
    source.prefetch([5, 250])  # Shards 0 and 2 (100 records each).
    deadline = time.monotonic() + 60
    while len(cache.entries()) < 2:
        assert time.monotonic() < deadline, "prefetch did not download the shards"
        time.sleep(0.02)
    proxy.clear()
    assert [r["i"] for r in source.__getitems__([250, 5, 6])] == [250, 5, 6]
    assert proxy.requests == []  # Read from the cache: no request.
    assert sorted(os.path.basename(path).split("-", 1)[1] for _, _, path in cache.entries()) == [
        os.path.basename(source.instructions[0].filename),
        os.path.basename(source.instructions[2].filename),
    ]


_FORK_AFTER_READ = textwrap.dedent(
    """
    import os, pickle, sys
    source = pickle.loads(bytes.fromhex(sys.argv[1]))
    assert source[1]["i"] == 1  # The parent reads from the bucket, then forks.
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            source.__getitems__([290])
            message = "no error"
        except Exception as error:
            message = str(error)
        os.write(writer, message.encode())
        os._exit(0)
    os.close(writer)
    print(os.read(reader, 4096).decode())
    os.waitpid(child, 0)
    """
)


def test_a_process_forked_after_bucket_reads_gets_a_clear_error_not_a_hang(
    loopback_s3, bucket, tmp_path
):
    import pickle

    options = options_via(loopback_s3, loopback_s3.endpoint, tmp_path)
    source = ParquetSource(loopback_s3.url(bucket, "table.parquet"), storage_options=options)
    done = subprocess.run(
        [sys.executable, "-c", _FORK_AFTER_READ, pickle.dumps(source).hex()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "forked from one that had already read from a bucket" in done.stdout
