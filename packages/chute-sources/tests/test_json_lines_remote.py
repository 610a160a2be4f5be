"""`JsonLinesSource` of objects in a bucket (a local moto S3 server): objects, globs and
folders read through the shard cache give the records of the local files."""

from __future__ import annotations

import json
import operator
import pickle
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chute_core import CorruptRecordError, ObjectChangedError, SourceFileNotFoundError
from chute_sources import JsonLinesSource, StorageOptions
from chute_sources._json_lines_remote import MAX_OPEN
from chute_sources._remote._client import client_for


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CHUTE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def bucket(s3: Any) -> str:
    return s3.create_bucket(f"jsonl-{uuid.uuid4().hex[:16]}")


def lines_of(records: list[Any]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


PARTS = [
    [{"part": 0, "i": i} for i in range(5)],
    [{"part": 1, "i": i, "text": "é\u2603"} for i in range(3)],
    [[2, i] for i in range(4)],
]


def test_an_object_reads_as_the_local_file(s3: Any, bucket: str, tmp_path: Path) -> None:
    data = b'{"name": "cat"}\r\n\r\n{"name": "eel"}\n\n[1, 2]\n3'  # CRLF, blanks, no final \n
    (tmp_path / "pets.jsonl").write_bytes(data)
    url = s3.put(bucket, "pets.jsonl", data)
    local, remote = JsonLinesSource(tmp_path / "pets.jsonl"), JsonLinesSource(url)
    assert len(remote) == len(local) == 4
    assert list(remote) == list(local)
    assert remote.__getitems__([3, 0, 3]) == local.__getitems__([3, 0, 3])
    assert repr(remote) == f"JsonLinesSource(path='{url}', len=4)"
    assert remote.path == url


def test_a_glob_and_a_folder_read_every_object_in_url_order(s3: Any, bucket: str) -> None:
    for number, part in enumerate(PARTS):
        s3.put(bucket, f"data/part-{number}.jsonl", lines_of(part))
    s3.put(bucket, "data/README.md", b"not data\n")
    s3.put(bucket, "data/deeper/part-9.jsonl", lines_of([{"no": 1}]))
    expected = [record for part in PARTS for record in part]
    for url in (
        f"s3://{bucket}/data/part-*.jsonl",
        f"s3://{bucket}/data/",
        f"s3://{bucket}/data",
    ):
        source = JsonLinesSource(url)
        assert list(source) == expected, url
        keys = [11, 0, 5, 4, 8, 7, 11]
        assert source.__getitems__(keys) == [expected[k] for k in keys]
        assert source[-1] == expected[-1]
        assert source.files == tuple(f"s3://{bucket}/data/part-{n}.jsonl" for n in range(3))
        assert source.file_records == (5, 3, 4)


def test_objects_are_downloaded_once_to_the_cache(
    s3: Any, bucket: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = s3.put(bucket, "once.jsonl", lines_of(PARTS[0]))
    client = client_for(StorageOptions())
    downloads: list[str] = []
    download = client.download

    def counting(info: Any, file: Any) -> None:
        downloads.append(info.url)
        download(info, file)

    monkeypatch.setattr(client, "download", counting)
    first = JsonLinesSource(url)
    assert downloads == [url]
    second = JsonLinesSource(url)
    copy = pickle.loads(pickle.dumps(first))
    assert list(second) == list(copy) == PARTS[0]
    assert downloads == [url]  # Read from the cache since.
    assert any(cache_dir.rglob("*once.jsonl"))


def test_many_objects_keep_few_mapped(s3: Any, bucket: str) -> None:
    parts = [[{"file": f, "i": i} for i in range(f % 3 + 1)] for f in range(MAX_OPEN + 5)]
    for number, part in enumerate(parts):
        s3.put(bucket, f"many/{number:03d}.jsonl", lines_of(part))
    source = JsonLinesSource(f"s3://{bucket}/many/")
    expected = [record for part in parts for record in part]
    keys = [*range(len(expected) - 1, -1, -1), 0, len(expected) - 1]
    assert source.__getitems__(keys) == [expected[k] for k in keys]
    mapped = [lines for lines in source._lines if lines is not None and lines.data is not None]
    assert 1 <= len(mapped) <= MAX_OPEN
    assert [source[k] for k in range(len(expected))] == expected


def test_pickled_source_reads_in_a_spawned_process(
    s3: Any, bucket: str, tmp_path: Path, spawn_pool: Callable[..., Any]
) -> None:
    for number, part in enumerate(PARTS):
        s3.put(bucket, f"spawn/{number}.jsonl", lines_of(part))
    options = StorageOptions(
        endpoint=s3.endpoint,
        access_key_id=s3.env["AWS_ACCESS_KEY_ID"],
        secret_access_key=s3.env["AWS_SECRET_ACCESS_KEY"],
        cache_dir=str(tmp_path / "other-cache"),  # The spawned process downloads again.
    )
    source = JsonLinesSource(f"s3://{bucket}/spawn/*.jsonl", storage_options=options)
    expected = [record for part in PARTS for record in part]
    assert spawn_pool(operator.getitem, source, 6) == expected[6]  # spawn_pool: conftest.py
    assert spawn_pool(JsonLinesSource.__getitems__, source, [11, 0]) == [expected[11], expected[0]]
    assert b"part" not in pickle.dumps(source).replace(b"spawn/", b"")  # URLs, not records.


def test_a_bad_line_names_the_object_and_the_line(s3: Any, bucket: str) -> None:
    s3.put(bucket, "bad/0.jsonl", lines_of([1, 2]))
    url = s3.put(bucket, "bad/1.jsonl", b"[1]\n\n{oops\n")
    source = JsonLinesSource(f"s3://{bucket}/bad/")
    assert source[2] == [1]
    with pytest.raises(CorruptRecordError, match=f"'{url}' line 3 is not valid JSON"):
        source.__getitems__([0, 3])


def test_missing_objects_and_buckets_are_named(s3: Any, bucket: str) -> None:
    url = f"s3://{bucket}/nothing.jsonl"
    with pytest.raises(SourceFileNotFoundError, match=f"{url} does not exist"):
        JsonLinesSource(url)
    with pytest.raises(SourceFileNotFoundError, match="matches no JSON Lines object"):
        JsonLinesSource(f"s3://{bucket}/*.jsonl")
    with pytest.raises(SourceFileNotFoundError, match="the bucket 'no-such-bucket-j1'"):
        JsonLinesSource("s3://no-such-bucket-j1/x.jsonl")


def test_a_replaced_object_is_not_read_as_the_old_one(s3: Any, bucket: str, tmp_path: Path) -> None:
    url = s3.put(bucket, "v.jsonl", lines_of([1, 2, 3]))
    source = JsonLinesSource(url, storage_options=StorageOptions(max_attempts=1))
    s3.put(bucket, "v.jsonl", lines_of([4, 5, 6]))
    assert list(source) == [1, 2, 3]  # The copy made on creation.
    payload = pickle.dumps(source)
    elsewhere = pickle.loads(payload)
    elsewhere._remote.options = StorageOptions(max_attempts=1, cache_dir=str(tmp_path / "new"))
    with pytest.raises(ObjectChangedError, match="changed after the source was created"):
        elsewhere[0]


def test_file_urls_are_local_paths(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text("1\n2\n")
    assert list(JsonLinesSource(f"file://{tmp_path}/x.jsonl")) == [1, 2]
