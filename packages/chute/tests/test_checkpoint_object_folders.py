"""Checkpoints in buckets (the loopback S3 server): `save` / `restore` / `reshard_directory`
on `s3://` prefixes resume exactly, and missing objects and buckets are told apart."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

import chute
from chute_checkpoint import (
    CheckpointFormatError,
    CheckpointNotFoundError,
    read_document,
    reshard_directory,
    restore,
    save,
)
from chute_core import InvalidArgumentError, SourceFileNotFoundError
from chute_sources import StorageOptions, list_objects, read_object


@pytest.fixture
def bucket(s3: Any) -> str:
    return s3.create_bucket(f"ckpt-{uuid.uuid4().hex[:16]}")


def _pipeline(index: int = 0, count: int = 1) -> Any:
    ds = chute.MapDataset.range(60).seed(4).shuffle().shard(index, count).to_iter_dataset()
    return ds.batch(3)


def _lists(batches: Any) -> list[list[int]]:
    return [batch.tolist() for batch in batches]


def test_save_and_restore_in_a_bucket_resume_exactly(bucket: str) -> None:
    it = iter(_pipeline())
    _lists(next(it) for _ in range(4))
    folder = f"s3://{bucket}/run/step_4"
    written = save(it, folder, process_index=0, process_count=1)
    assert written == f"{folder}/process_0-of-1.json"
    expected = _lists(it)
    restored = restore(iter(_pipeline()), folder + "/", process_index=0, process_count=1)
    assert _lists(restored) == expected
    assert read_document(written)["state"] == json.loads(read_object(written))["state"]
    assert [info.url for info in list_objects(f"s3://{bucket}/run/")] == [written]


def test_explicit_storage_options_reach_the_bucket(
    s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    options = StorageOptions(
        endpoint=s3.endpoint,
        access_key_id=s3.env["AWS_ACCESS_KEY_ID"],
        secret_access_key=s3.env["AWS_SECRET_ACCESS_KEY"],
    )
    it = iter(_pipeline())
    next(it)
    folder = f"s3://{bucket}/explicit"
    save(it, folder, process_index=0, process_count=1, storage_options=options)
    restored = restore(
        iter(_pipeline()), folder, process_index=0, process_count=1, storage_options=options
    )
    assert _lists(restored) == _lists(it)


def test_states_of_another_process_count_reshard_from_a_bucket(bucket: str) -> None:
    old = f"s3://{bucket}/two"
    iterators = [iter(_pipeline(i, 2)) for i in range(2)]
    for it in iterators:
        next(it)
    for index, it in enumerate(iterators):
        save(it, old, process_index=index, process_count=2)
    expected = [x for it in iterators for batch in it for x in batch.tolist()]
    one = restore(iter(_pipeline(0, 1)), old, process_index=0, process_count=1)
    assert sorted(x for batch in one for x in batch.tolist()) == sorted(expected)
    new = f"s3://{bucket}/three"
    written = reshard_directory(old, new, 3)
    assert written == [f"{new}/process_{i}-of-3.json" for i in range(3)]
    resumed = [
        restore(iter(_pipeline(i, 3)), new, process_index=i, process_count=3) for i in range(3)
    ]
    assert sorted(x for it in resumed for batch in it for x in batch.tolist()) == sorted(expected)


def test_an_incomplete_set_of_states_is_not_used(bucket: str) -> None:
    folder = f"s3://{bucket}/partial"
    it = iter(_pipeline(0, 2))
    next(it)
    save(it, folder, process_index=0, process_count=2)  # Process 1 never wrote its state.
    with pytest.raises(CheckpointNotFoundError, match=r"processes \[0\] of 2.*all 2"):
        restore(iter(_pipeline(0, 1)), folder, process_index=0, process_count=1)


def test_missing_checkpoint_and_missing_bucket_are_told_apart(bucket: str) -> None:
    with pytest.raises(CheckpointNotFoundError, match=r"no checkpoint at s3://.*/nothing"):
        restore(iter(_pipeline()), f"s3://{bucket}/nothing", process_index=0, process_count=1)
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint file at s3://"):
        read_document(f"s3://{bucket}/nothing/process_0-of-1.json")
    for call in (
        lambda: restore(iter(_pipeline()), "s3://no-such-bucket-c1/run", process_index=0),
        lambda: read_document("s3://no-such-bucket-c1/run/process_0-of-1.json"),
    ):
        with pytest.raises(SourceFileNotFoundError, match="the bucket 'no-such-bucket-c1'"):
            call()
    assert not issubclass(SourceFileNotFoundError, CheckpointNotFoundError)


def test_a_corrupt_object_is_a_format_error(s3: Any, bucket: str) -> None:
    url = s3.put(bucket, "bad/process_0-of-1.json", b'{"format": "chute-iter')
    with pytest.raises(CheckpointFormatError, match=url):
        restore(iter(_pipeline()), f"s3://{bucket}/bad", process_index=0, process_count=1)


def test_states_reshard_from_a_folder_beside_keys_chute_cannot_address(
    s3: Any, bucket: str
) -> None:
    old = f"s3://{bucket}/two"
    iterators = [iter(_pipeline(i, 2)) for i in range(2)]
    for it in iterators:
        next(it)
    for index, it in enumerate(iterators):
        save(it, old, process_index=index, process_count=2)
    # Object stores take such keys; obstore refuses every listing page holding one.
    s3.put(bucket, "two/..", b"{}")
    s3.put(bucket, "two/../process_0-of-1.json", b"{}")
    expected = [x for it in iterators for batch in it for x in batch.tolist()]
    one = restore(iter(_pipeline(0, 1)), old, process_index=0, process_count=1)
    assert sorted(x for batch in one for x in batch.tolist()) == sorted(expected)
    written = reshard_directory(old, f"s3://{bucket}/three", 3)
    assert written == [f"s3://{bucket}/three/process_{i}-of-3.json" for i in range(3)]
    with pytest.raises(InvalidArgumentError, match=r"names a key with a '\.\.' segment"):
        restore(iter(_pipeline()), f"{old}/../two", process_index=0, process_count=1)
