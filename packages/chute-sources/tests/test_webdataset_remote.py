"""WebDataset shards in a bucket (a local moto S3 server): the source reads them through
the shard cache, the stream by ranged reads, and both give the local shards' samples."""

from __future__ import annotations

import pickle
import uuid
from pathlib import Path
from typing import Any

import pytest

from chute_sources import WebDatasetSource, WebDatasetStream, write_webdataset
from chute_testing import assert_resumes

SAMPLES = [
    {"__key__": f"img/{i:03d}", "jpg": bytes([i]) * (i * 50), "cls": i % 3} for i in range(11)
]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CHUTE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def shards(s3: Any, tmp_path: Path) -> tuple[list[str], str]:
    """The shards, written locally and uploaded; (local paths, bucket brace pattern)."""
    bucket = s3.create_bucket(f"wds-{uuid.uuid4().hex[:16]}")
    paths = write_webdataset(SAMPLES, str(tmp_path / "local" / "shard-%02d.tar"), max_count=4)
    for path in paths:
        s3.put(bucket, f"data/{Path(path).name}", Path(path).read_bytes())
    s3.put(bucket, "data/README.md", b"not a shard")
    return paths, f"s3://{bucket}/data/shard-{{00..02}}.tar"


def without_url(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k != "__url__"} for s in samples]


def test_shards_in_a_bucket_read_as_the_local_shards(shards: tuple[list[str], str]) -> None:
    paths, pattern = shards
    local = WebDatasetSource(paths, decode=True)
    bucket = pattern.rsplit("/", 1)[0]
    for given in (pattern, f"{bucket}/shard-*.tar", f"{bucket}/"):
        remote = WebDatasetSource(given, decode=True)
        assert remote.shards == tuple(f"{bucket}/shard-{n:02d}.tar" for n in range(3))
        assert without_url(list(remote)) == without_url(list(local))
        assert remote[5]["__url__"] == f"{bucket}/shard-01.tar"
        keys = [10, 0, 4, 4]
        assert without_url(remote.__getitems__(keys)) == without_url(local.__getitems__(keys))
    copy = pickle.loads(pickle.dumps(remote))
    copy.prefetch([9, 10])
    assert without_url(list(copy)) == without_url(list(local))


def test_the_stream_over_a_bucket_resumes_exactly(shards: tuple[list[str], str]) -> None:
    paths, pattern = shards
    expected = list(WebDatasetSource(pattern))
    elements = assert_resumes(lambda: WebDatasetStream(pattern), every=3, expected=expected)
    assert without_url(elements) == without_url(list(WebDatasetStream(paths)))
