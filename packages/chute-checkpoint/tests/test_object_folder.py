"""`ObjectFolder`: a bucket prefix seen as a checkpoint folder (the loopback S3 server)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chute_checkpoint import write_atomic
from chute_checkpoint._object_folder import ObjectFolder
from chute_core import InvalidArgumentError


def _bucket(s3: Any) -> str:
    return s3.create_bucket(f"ckpt-{uuid.uuid4().hex[:16]}")


def test_write_atomic_writes_one_object_and_folders_list_only_their_children(
    s3: Any,
) -> None:
    bucket = _bucket(s3)
    write_atomic(f"s3://{bucket}/f/process_0-of-1.json", "{}")
    s3.put(bucket, "f/sub/process_1-of-2.json", b"{}")
    s3.put(bucket, "f/notes.txt", b"")
    folder = ObjectFolder(f"s3://{bucket}/f/", None)
    assert [f.name for f in folder.glob("process_*-of-*.json")] == ["process_0-of-1.json"]
    assert (folder / "process_0-of-1.json").read_bytes() == b"{}"
    assert (folder / "process_0-of-1.json").exists()
    assert not (folder / "process_0-of-2.json").exists()
    assert folder.is_dir() and not ObjectFolder(f"s3://{bucket}/g", None).is_dir()


def test_a_folder_lists_its_states_past_keys_chute_cannot_address(s3: Any) -> None:
    bucket = _bucket(s3)
    write_atomic(f"s3://{bucket}/f/process_0-of-1.json", "{}")
    s3.put(bucket, "f/..", b"")  # Object stores take such keys; obstore lists none of them.
    s3.put(bucket, "f/../process_1-of-2.json", b"{}")
    folder = ObjectFolder(f"s3://{bucket}/f", None)
    assert [f.name for f in folder.glob("process_*-of-*.json")] == ["process_0-of-1.json"]
    assert folder.is_dir()
    assert not (folder / "process_1-of-2.json").exists()
    with pytest.raises(InvalidArgumentError, match=r"names a key with a '\.\.' segment"):
        (folder / "../process_1-of-2.json").exists()
