"""What reading from a bucket adds to `COUNTERS`, checked against the requests a proxy saw.

Every request a `FaultProxy` in front of a real S3 server (moto) answers is one chute
counts, with its op; the bytes counted are those of the object bodies it sent.
"""

from __future__ import annotations

import collections
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chute_core.internal import (
    CACHE_HITS,
    CACHE_MISSES,
    COUNTERS,
    STORAGE_BYTES,
    STORAGE_REQUESTS,
    STORAGE_RETRIES,
)
from chute_sources import ArrayRecordSource, ParquetSource, StorageOptions, write_array_record
from chute_sources._remote._client import client_for
from chute_sources._remote._urls import parse_object_url
from chute_testing import FaultProxy

RECORDS = [{"i": i, "x": np.full(500, i % 251, np.uint8)} for i in range(90)]
TABLE = pa.table({"i": np.arange(300), "text": [f"t{i}" * 20 for i in range(300)]})


@pytest.fixture(scope="module")
def bucket(loopback_s3, tmp_path_factory):
    """A bucket holding `TABLE` as table.parquet and `RECORDS` in 3 shards under shards/."""
    folder, name = tmp_path_factory.mktemp("counted"), f"chute-counted-{os.getpid()}"
    pq.write_table(TABLE, folder / "table.parquet", row_group_size=50)
    (folder / "shards").mkdir()
    shards = write_array_record(RECORDS, str(folder / "shards" / "shard"), num_shards=3)
    loopback_s3.create_bucket(name)
    for path in [str(folder / "table.parquet"), *shards]:
        loopback_s3.put_file(name, os.path.relpath(path, folder), path)
    return name


@pytest.fixture
def proxy(s3):
    """A proxy in front of the server, for requests that `options` send."""
    with FaultProxy(s3.endpoint) as proxy:
        yield proxy


@pytest.fixture
def options(proxy, tmp_path):
    """Through `proxy` (credentials from the environment `s3` sets), a cache of the test's."""
    return StorageOptions(endpoint=proxy.endpoint, cache_dir=str(tmp_path), initial_backoff=0.01)


def _op(request) -> str:
    if request.method == "GET":
        return "list" if "list-type=" in request.path else "get"
    if request.method == "POST" and request.path.endswith("?delete"):
        return "delete"  # obstore deletes through the multi-object delete.
    return str(request.method.lower())


def _seen(proxy) -> tuple[dict[str, int], int]:
    """The proxy's requests by op, and the object body bytes it sent (successful GETs)."""
    ops = collections.Counter(_op(r) for r in proxy.requests)
    body = sum(r.sent for r in proxy.requests if _op(r) == "get" and r.status < 300)
    return dict(ops), body


def _counted(before) -> tuple[dict[str, int], float, float]:
    """What COUNTERS grew by: requests by op, body bytes, retries."""
    grown = COUNTERS.since(before)
    ops = {
        dict(labels)["op"]: int(n)
        for (name, labels), n in grown.items()
        if name == STORAGE_REQUESTS
    }
    return ops, grown.get((STORAGE_BYTES, ()), 0.0), grown.get((STORAGE_RETRIES, ()), 0.0)


def _cache(before, cache: str) -> tuple[float, float]:
    grown, labels = COUNTERS.since(before), (("cache", cache),)
    return grown.get((CACHE_HITS, labels), 0.0), grown.get((CACHE_MISSES, labels), 0.0)


def test_parquet_reads_count_every_request_and_the_body_bytes(s3, bucket, proxy, options):
    before = COUNTERS.snapshot()
    source = ParquetSource(s3.url(bucket, "table.parquet"), storage_options=options)
    keys = list(range(0, 300, 7))
    assert [record["i"] for record in source.__getitems__(keys)] == keys
    ops, body = _seen(proxy)
    assert ops["head"] >= 1 and ops["get"] >= 6  # The object, its footer, 6 row groups.
    assert _counted(before) == (ops, body, 0.0)
    assert body > 0


def test_a_failed_request_counts_once_as_a_request_and_once_as_a_retry(s3, bucket, proxy, options):
    url = s3.url(bucket, "table.parquet")
    source = ParquetSource(url, storage_options=options, cache_row_groups=0)
    proxy.clear()
    before = COUNTERS.snapshot()
    proxy.fail_next(1, status=503)
    assert source[123]["i"] == 123
    assert [r.status for r in proxy.requests] == [503, 206]
    assert _counted(before) == ({"get": 2}, proxy.requests[1].sent, 1.0)


def test_shard_cache_downloads_count_as_misses_and_later_opens_as_hits(s3, bucket, proxy, options):
    url = s3.url(bucket, "shards/")
    before = COUNTERS.snapshot()
    first = ArrayRecordSource(url, storage_options=options)
    assert [r["i"] for r in first.__getitems__(list(range(90)))] == list(range(90))
    assert _cache(before, "shard") == (0.0, 3.0)
    ops, body = _seen(proxy)
    assert _counted(before) == (ops, body, 0.0)
    proxy.clear()
    before = COUNTERS.snapshot()
    again = ArrayRecordSource(url, storage_options=options)  # Same cache folder.
    backwards = list(range(89, -1, -1))
    assert [r["i"] for r in again.__getitems__(backwards)] == backwards
    assert _cache(before, "shard") == (3.0, 0.0)
    ops, body = _seen(proxy)
    assert _counted(before) == (ops, body, 0.0)
    assert not [r for r in proxy.requests if _op(r) == "get" and r.range is None]  # Downloads.


def test_ranges_and_row_groups_read_again_count_as_hits(s3, bucket, options):
    url = s3.url(bucket, "table.parquet")
    uncached = ParquetSource(url, storage_options=options, cache_row_groups=0)
    before = COUNTERS.snapshot()
    uncached[60]
    uncached[61]  # The same row group: its bytes are kept by the range prefetcher.
    assert _cache(before, "range") == (1.0, 1.0)
    assert _cache(before, "row_group") == (0.0, 0.0)  # No row group cache to count.
    cached = ParquetSource(url, storage_options=options)
    before = COUNTERS.snapshot()
    cached.__getitems__([0, 60, 1, 61])  # Two row groups, decoded once each.
    cached[2]
    assert _cache(before, "row_group") == (1.0, 2.0)
    assert _cache(before, "range") == (0.0, 2.0)  # Another source: its own prefetcher.


def test_each_page_of_a_listing_counts_as_a_request(s3, proxy, options):
    name = s3.create_bucket(f"chute-counted-{os.getpid()}-listing")
    for i in range(1001):  # Servers answer 1,000 objects a page: two pages.
        s3.put(name, f"run/k{i:04d}", b"x")
    before = COUNTERS.snapshot()
    listed = client_for(options).list_objects(parse_object_url(f"s3://{name}/run/"))
    assert len(listed) == 1001
    assert _seen(proxy) == ({"list": 2}, 0)
    assert _counted(before) == ({"list": 2}, 0.0, 0.0)


def test_writes_and_deletes_count_with_their_op(bucket, proxy, options):
    url = parse_object_url(f"s3://{bucket}/written")
    before = COUNTERS.snapshot()
    client_for(options).put(url, b"abc")
    client_for(options).delete(url)
    assert _seen(proxy) == ({"put": 1, "delete": 1}, 0)
    assert _counted(before) == ({"put": 1, "delete": 1}, 0.0, 0.0)


def test_a_listing_around_keys_chute_cannot_address_counts_each_request(s3, proxy, options):
    name = s3.create_bucket(f"chute-counted-{os.getpid()}-bad-keys")
    for key in ["run/a", "run/sub/b", "run/sub/./x", "run/z"]:
        s3.put(name, key, b"x")
    before = COUNTERS.snapshot()
    objects, skipped = client_for(options).listing(parse_object_url(f"s3://{name}/run/"))
    assert [o.url.split("/run/")[1] for o in objects] == ["a", "sub/b", "z"]
    assert skipped == ["run/sub/./x"]
    # The page that failed, the level of run/, the key just after the bad one, the rest.
    assert _seen(proxy) == ({"list": 3, "head": 1}, 0)
    assert _counted(before) == ({"list": 3, "head": 1}, 0.0, 0.0)
