"""The shard cache serves only bytes it has verified against what the bucket said.

Entries are damaged the ways a shared disk or a careless hand damages them (replaced by
another valid shard of the same size, bytes zeroed in place, a copy left by an older
chute) and read through real sources from a loopback S3 server: the records read are
always the bucket's, or the read raises; damaged bytes are never served.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import stat
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chute_core import ObjectChangedError, SourceFileError
from chute_sources import ArrayRecordSource, JsonLinesSource, StorageOptions, write_array_record
from chute_sources._remote._cache import ShardCache
from chute_sources._remote._client import ObjectInfo, client_for
from chute_sources._remote._urls import parse_object_url
from chute_testing import FaultProxy

SEEDS = (0, 1)


def records_of(seed: int) -> list[dict[str, Any]]:
    """100 records; every seed's shard has the same size, and different records."""
    rng = np.random.default_rng(seed)
    return [{"i": seed * 1000 + i, "x": rng.integers(0, 256, 1000, np.uint8)} for i in range(100)]


@pytest.fixture(scope="module")
def shard_files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    folder = tmp_path_factory.mktemp("shards")
    paths = {
        seed: write_array_record(records_of(seed), str(folder / f"s{seed}"))[0] for seed in SEEDS
    }
    assert len({os.path.getsize(path) for path in paths.values()}) == 1  # Same size.
    return paths


@pytest.fixture
def bucket(loopback_s3: Any, shard_files: dict[int, str]) -> str:
    """A fresh bucket holding shard 0 as `shards/a.array_record`."""
    name = f"cache-{uuid.uuid4().hex[:16]}"
    loopback_s3.create_bucket(name)
    loopback_s3.put_file(name, "shards/a.array_record", shard_files[0])
    return name


def options_for(server: Any, cache: Path, endpoint: str | None = None) -> StorageOptions:
    env = server.env
    return StorageOptions(
        endpoint=endpoint or env["AWS_ENDPOINT_URL"],
        access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region=env["AWS_REGION"],
        max_attempts=2,
        initial_backoff=0.01,
        cache_dir=str(cache),
    )


def info_of(options: StorageOptions, url: str) -> ObjectInfo:
    return client_for(options).stat(parse_object_url(url))


def entry_of(options: StorageOptions, url: str) -> str:
    """Where the cache keeps `url`'s copy."""
    cache = ShardCache(options.cache_folder, options.cache_bytes)
    return cache.entry_path(info_of(options, url))


def read_all(url: str, options: StorageOptions) -> list[int]:
    """The `i` of every record, read by a new source (no reader left open)."""
    source = ArrayRecordSource(url, storage_options=options)
    try:
        return [record["i"] for record in source.__getitems__(list(range(len(source))))]
    finally:
        source.close()


BUCKET_RECORDS = [record["i"] for record in records_of(0)]


def test_an_entry_replaced_by_another_shard_of_its_size_is_downloaded_again(
    loopback_s3: Any,
    bucket: str,
    shard_files: dict[int, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    options = options_for(loopback_s3, tmp_path / "cache")
    url = loopback_s3.url(bucket, "shards/a.array_record")
    assert read_all(url, options) == BUCKET_RECORDS
    entry = entry_of(options, url)
    shutil.copyfile(shard_files[1], entry + ".other")
    os.replace(entry + ".other", entry)  # Valid ArrayRecord bytes, the entry's size.
    assert read_all(url, options) == BUCKET_RECORDS
    assert Path(entry).read_bytes() == Path(shard_files[0]).read_bytes()
    assert f"{entry} of {url} does not hold the bytes downloaded" in caplog.text


def test_an_entry_overwritten_in_place_is_downloaded_again(
    loopback_s3: Any, bucket: str, shard_files: dict[int, str], tmp_path: Path
) -> None:
    options = options_for(loopback_s3, tmp_path / "cache")
    url = loopback_s3.url(bucket, "shards/a.array_record")
    assert read_all(url, options) == BUCKET_RECORDS
    entry = entry_of(options, url)
    Path(entry).write_bytes(Path(shard_files[1]).read_bytes())  # Same inode, new bytes.
    assert read_all(url, options) == BUCKET_RECORDS


@pytest.mark.parametrize("where", [0.02, 0.25, 0.5, 0.75, 0.98])
def test_zeroed_bytes_in_an_entry_are_never_served(
    loopback_s3: Any, bucket: str, shard_files: dict[int, str], tmp_path: Path, where: float
) -> None:
    options = options_for(loopback_s3, tmp_path / "cache")
    url = loopback_s3.url(bucket, "shards/a.array_record")
    assert read_all(url, options) == BUCKET_RECORDS
    entry = entry_of(options, url)
    nonzero = np.flatnonzero(np.frombuffer(Path(entry).read_bytes(), np.uint8))
    spot = int(nonzero[int(len(nonzero) * where)])  # A byte that zeroing changes.
    with open(entry, "r+b") as file:
        file.seek(spot)
        file.write(bytes(64))
    assert read_all(url, options) == BUCKET_RECORDS
    assert Path(entry).read_bytes() == Path(shard_files[0]).read_bytes()


def test_a_json_lines_entry_replaced_by_other_lines_of_its_size_is_downloaded_again(
    loopback_s3: Any, tmp_path: Path
) -> None:
    name = f"cache-{uuid.uuid4().hex[:16]}"
    loopback_s3.create_bucket(name)
    loopback_s3.put(name, "a.jsonl", b"[1]\n[2]\n[3]\n")
    options = options_for(loopback_s3, tmp_path / "cache")
    url = loopback_s3.url(name, "a.jsonl")
    assert list(JsonLinesSource(url, storage_options=options)) == [[1], [2], [3]]
    Path(entry_of(options, url)).write_bytes(b"[7]\n[8]\n[9]\n")
    assert list(JsonLinesSource(url, storage_options=options)) == [[1], [2], [3]]


def test_a_copy_left_by_an_older_chute_is_not_served(
    loopback_s3: Any, bucket: str, shard_files: dict[int, str], tmp_path: Path
) -> None:
    options = options_for(loopback_s3, tmp_path / "cache")
    url = loopback_s3.url(bucket, "shards/a.array_record")
    info = info_of(options, url)
    # Where chute's first layout ("v1", size checks only) kept the copy of `info`.
    digest = hashlib.sha256(f"{info.url}\0{info.version}\0{info.size}".encode()).hexdigest()
    old = tmp_path / "cache" / "v1" / digest[:2] / f"{digest[:32]}-a.array_record"
    old.parent.mkdir(parents=True)
    shutil.copyfile(shard_files[1], old)  # A wrong copy of the right size.
    assert read_all(url, options) == BUCKET_RECORDS


def test_a_damaged_entry_of_an_object_replaced_since_raises_naming_the_url(
    loopback_s3: Any, bucket: str, shard_files: dict[int, str], tmp_path: Path
) -> None:
    options = options_for(loopback_s3, tmp_path / "cache")
    url = loopback_s3.url(bucket, "shards/a.array_record")
    source = ArrayRecordSource(url, storage_options=options)
    assert source[0]["i"] == 0
    pickled = pickle.dumps(source)  # The old ETag, as a worker gets it (no reader open).
    entry = entry_of(options, url)
    loopback_s3.put_file(bucket, "shards/a.array_record", shard_files[1])
    with open(entry, "r+b") as file:
        file.write(bytes(64))
    with pytest.raises(ObjectChangedError, match=f"{url} changed after the source was created"):
        pickle.loads(pickled)[0]
    assert not os.path.exists(entry)  # The damaged copy is gone, not left to be served.


def test_an_intact_entry_touched_or_copied_is_verified_not_downloaded_again(
    loopback_s3: Any, bucket: str, tmp_path: Path
) -> None:
    with FaultProxy(loopback_s3.endpoint) as proxy:
        options = options_for(loopback_s3, tmp_path / "cache", proxy.endpoint)
        url = loopback_s3.url(bucket, "shards/a.array_record")
        assert read_all(url, options) == BUCKET_RECORDS
        entry = entry_of(options, url)
        proxy.clear()
        os.utime(entry, (0, 0))  # Its times moved, not its bytes.
        assert read_all(url, options) == BUCKET_RECORDS
        shutil.copyfile(entry, entry + ".copy")
        os.replace(entry + ".copy", entry)  # Another inode, the same bytes.
        assert read_all(url, options) == BUCKET_RECORDS
        downloads = [r for r in proxy.requests if r.method == "GET" and r.range is None]
        assert downloads == []


@pytest.mark.parametrize("damage", ["garbage", "another object", "missing"])
def test_an_entry_whose_record_is_damaged_or_missing_is_downloaded_again(
    loopback_s3: Any, bucket: str, shard_files: dict[int, str], tmp_path: Path, damage: str
) -> None:
    with FaultProxy(loopback_s3.endpoint) as proxy:
        options = options_for(loopback_s3, tmp_path / "cache", proxy.endpoint)
        url = loopback_s3.url(bucket, "shards/a.array_record")
        assert read_all(url, options) == BUCKET_RECORDS
        entry = Path(entry_of(options, url))
        records = [p for p in entry.parent.iterdir() if p.suffix == ".record"]
        assert [p.name[:32] for p in records] == [entry.name[:32]]  # One record, beside it.
        record = records[0]
        if damage == "garbage":
            record.write_bytes(b"\x00{not json")
        elif damage == "another object":
            record.write_text(record.read_text().replace("a.array_record", "b.array_record"))
        else:
            record.unlink()
        entry.write_bytes(Path(shard_files[1]).read_bytes())
        proxy.clear()
        assert read_all(url, options) == BUCKET_RECORDS
        downloads = [r for r in proxy.requests if r.method == "GET" and r.range is None]
        assert len(downloads) == 1


def test_an_object_longer_than_listed_is_refused_not_cached(
    loopback_s3: Any, blob_url: str, tmp_path: Path
) -> None:
    options = options_for(loopback_s3, tmp_path / "cache")
    cache = ShardCache(options.cache_folder, options.cache_bytes)
    # As listed by a server that gives no version to pin reads to, before it grew.
    info = ObjectInfo(blob_url, size=len(BLOB) - 10, version=None)
    local = cache.local(info, client_for(options))
    refused = pytest.raises(ObjectChangedError, match=f"{blob_url} sent more than its 49990 bytes")
    with refused, local:
        pass
    assert cache.entries() == []
    assert os.listdir(os.path.join(cache.folder, "tmp")) == []


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_folders_are_private_and_files_owner_only_whatever_the_umask(
    loopback_s3: Any, bucket: str, tmp_path: Path, umask: int
) -> None:
    options = options_for(loopback_s3, tmp_path / "cache")
    url = loopback_s3.url(bucket, "shards/a.array_record")
    old = os.umask(umask)
    try:
        assert read_all(url, options) == BUCKET_RECORDS
        ShardCache(options.cache_folder, options.cache_bytes).evict()
    finally:
        os.umask(old)
    root = tmp_path / "cache"
    folders = [root, *(p for p in root.rglob("*") if p.is_dir())]
    files = [p for p in root.rglob("*") if not p.is_dir()]
    assert len(files) >= 3  # The entry, its lock, and what the cache keeps beside them.
    assert {str(p): stat.S_IMODE(p.stat().st_mode) for p in folders} == {
        str(p): 0o700 for p in folders
    }
    assert {str(p): stat.S_IMODE(p.stat().st_mode) for p in files} == {str(p): 0o600 for p in files}


def test_a_cache_folder_made_loosely_is_made_private(tmp_path: Path) -> None:
    (tmp_path / "cache" / "v2").mkdir(parents=True)
    (tmp_path / "cache" / "v2").chmod(0o755)
    cache = ShardCache(str(tmp_path / "cache"), 1 << 20)
    assert stat.S_IMODE(os.stat(cache.folder).st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder away needs root (CI runs as root)")
def test_a_cache_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cache" / "v2").mkdir(parents=True)
    os.chown(tmp_path / "cache" / "v2", 12345, 12345)
    with pytest.raises(SourceFileError, match=r"v2 belongs to user id 12345, not to this"):
        ShardCache(str(tmp_path / "cache"), 1 << 20)


BLOB = np.random.default_rng(7).bytes(50_000)


@pytest.fixture(scope="module")
def blob_url(loopback_s3: Any) -> str:
    name = f"cache-{uuid.uuid4().hex[:16]}"
    loopback_s3.create_bucket(name)
    loopback_s3.put(name, "blob.bin", BLOB)
    return str(loopback_s3.url(name, "blob.bin"))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    start=st.integers(0, len(BLOB) - 1),
    length=st.integers(1, 4096),
    flip=st.integers(1, 255),
)
def test_any_changed_span_of_an_entry_is_downloaded_again(
    loopback_s3: Any,
    blob_url: str,
    tmp_path_factory: pytest.TempPathFactory,
    start: int,
    length: int,
    flip: int,
) -> None:
    options = options_for(loopback_s3, tmp_path_factory.mktemp("cache"))
    cache = ShardCache(options.cache_folder, options.cache_bytes)
    client = client_for(options)
    info = info_of(options, blob_url)
    with cache.local(info, client) as path:
        assert Path(path).read_bytes() == BLOB
    with open(path, "r+b") as file:
        file.seek(start)
        file.write(bytes(b ^ flip for b in BLOB[start : start + length]))
    with cache.local(info, client) as again:
        assert Path(again).read_bytes() == BLOB
