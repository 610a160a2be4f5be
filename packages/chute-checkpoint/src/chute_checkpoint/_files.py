"""Saving and restoring iterators to files, without Orbax: one atomic file per process.

Folders may be local or in buckets (`s3://bucket/prefix`, `gs://...`, see
`_object_folder`). Every state file is complete or absent as readers see it (a local
file is renamed into place, an object written by one request). A checkpoint of `n`
processes is `n` such files, each written by its own process: a process restoring
with the same count reads only its own file, and one restoring with another count
uses the states only when all `n` are there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any, TypeVar

from chute_core import CheckpointableIterator
from chute_sources import StorageOptions, is_object_url, write_object

from ._elastic import find_document, state_file_name, states_by_count
from ._errors import ReshardError
from ._format import (
    apply_document,
    dumps_document,
    loads_document,
    make_document,
    process_position,
)
from ._object_folder import ObjectFolder, read_url
from ._read_state import load_state, read_state
from ._reshard import reshard

__all__ = ["read_document", "reshard_directory", "restore", "save", "write_atomic"]

It = TypeVar("It", bound=CheckpointableIterator[Any])


def write_atomic(
    path: str | os.PathLike[str], text: str, storage_options: StorageOptions | None = None
) -> None:
    """Writes `text` to `path` so that a reader sees the old file or the new, whole.

    Writes a temporary file in the same folder, flushes it to disk, renames it over
    `path` and flushes the folder, so a crash (or SIGKILL) at any moment leaves no
    half-written file under `path`. An `s3://` or `gs://` URL is written as one
    object, by one request (object stores never show part of one); `storage_options`
    says how to reach its bucket (default: from the environment).

    Example:
        >>> import pathlib, tempfile
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "state.json"
        >>> write_atomic(target, "{}")
        >>> target.read_text()
        '{}'
    """
    if is_object_url(os.fspath(path)):
        write_object(os.fspath(path), text.encode("utf-8"), storage_options)
        return
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def read_document(
    path: str | os.PathLike[str], storage_options: StorageOptions | None = None
) -> dict[str, Any]:
    """Reads and validates one state file (see `validate_document`), local or a URL.

    Raises:
        CheckpointNotFoundError: no such file (or object).
        SourceFileNotFoundError: the URL's bucket does not exist (named).
        CheckpointFormatError: the file is not a valid chute state, or `path` is a
            folder, FIFO, socket or device (refused without blocking on it).

    Example:
        >>> import chute, tempfile
        >>> it = iter(chute.MapDataset.range(3).to_iter_dataset())
        >>> read_document(save(it, tempfile.mkdtemp()))["state"]
        {'position': 0}
    """
    if is_object_url(os.fspath(path)):
        return loads_document(read_url(os.fspath(path), storage_options), os.fspath(path))
    return loads_document(read_state(Path(path)), os.fspath(path))


def save(
    iterator: CheckpointableIterator[Any],
    directory: str | os.PathLike[str],
    *,
    process_index: int | None = None,
    process_count: int | None = None,
    storage_options: StorageOptions | None = None,
) -> Path | str:
    """Saves `iterator`'s position to `directory/process_<i>-of-<n>.json`, atomically.

    Each process writes its own file into the same folder (created if missing).
    `process_index` and `process_count` default to JAX's when JAX is imported, else
    `0` and `1`. `directory` may be a bucket's prefix, `s3://bucket/run/step_100` or
    `gs://...`: the state is then one object, written by one request (readers see it
    whole or not at all); `storage_options` says how to reach the bucket (default:
    from the environment, see `chute_sources.StorageOptions`).

    Returns:
        The path of the file written (its URL, a str, for a bucket).

    Example:
        >>> import chute, tempfile
        >>> ds = chute.MapDataset.range(10).seed(0).shuffle().to_iter_dataset()
        >>> it = iter(ds)
        >>> first = [next(it) for _ in range(3)]
        >>> folder = tempfile.mkdtemp()
        >>> save(it, folder).name
        'process_0-of-1.json'
        >>> rest = list(it)
        >>> list(restore(iter(ds), folder)) == rest
        True
    """
    index, count = process_position(process_index, process_count)
    document = make_document(iterator, index, count)
    name = state_file_name(index, count)
    if is_object_url(os.fspath(directory)):
        url = (ObjectFolder(os.fspath(directory), storage_options) / name).url
        write_atomic(url, dumps_document(document), storage_options)
        return url
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    write_atomic(path, dumps_document(document))
    return path


def restore(
    iterator: It,
    directory: str | os.PathLike[str],
    *,
    process_index: int | None = None,
    process_count: int | None = None,
    check_pipeline: bool = True,
    storage_options: StorageOptions | None = None,
    allow_changes: Collection[str] = (),
) -> It:
    """Moves `iterator` to the position saved in `directory` by `save`; returns it.

    Elastic: when `directory` holds the states of another number of processes (all of
    them), this process's state is computed from them (`reshard_for`), for pipelines
    that are index-based up to the batch: those batched with `batch(global_size,
    sharding=...)` (no shard stage), and those with one `.shard(...)` stage followed
    only by stages that keep positions, each process stopped at any position.

    `allow_changes=("weights",)` restores an `IterDataset.mix` whose weights changed
    since the save (each component goes on from its own position; see
    `apply_document`).

    `directory` may be a bucket's prefix (`s3://...`, `gs://...`), as for `save`.

    Raises:
        CheckpointNotFoundError: no state file for this process, and no complete set of
            another process count's states (the message says what the folder holds).
        SourceFileNotFoundError: the bucket of a URL does not exist (named; not taken
            for "no checkpoint yet").
        ReshardError: the folder holds another process count's states, which cannot
            continue in this iterator (the message says why, e.g. a window shuffle after
            the shard).
        CheckpointFormatError: the file is corrupt, truncated, foreign or too new.
        PipelineMismatchError: the checkpoint is of another pipeline (names the stage
            and the parameter); `check_pipeline=False` restores the position anyway.

    Example:
        >>> import chute, tempfile
        >>> ds = chute.MapDataset.range(4).to_iter_dataset()
        >>> it = iter(ds)
        >>> _ = next(it)
        >>> folder = tempfile.mkdtemp()
        >>> _ = save(it, folder)
        >>> next(restore(iter(ds), folder))
        1
    """
    index, count = process_position(process_index, process_count)
    document, where = find_document(_folder(directory, storage_options), iterator, index, count)
    apply_document(
        iterator, document, check_pipeline=check_pipeline, where=where, allow_changes=allow_changes
    )
    return iterator


def reshard_directory(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    process_count: int,
    *,
    storage_options: StorageOptions | None = None,
) -> list[Path | str]:
    """`reshard` on files: reads every `process_*-of-n.json` in `source`, writes to `target`.

    `restore` does this by itself when it finds the states of another number of
    processes; use this to keep the resharded files, or for meshes with one shard per
    process only (`reshard` gives process `k` shard `k` of `process_count`). Either
    folder may be a bucket's prefix (then the URLs written are returned); write into
    an empty `target`, since a process restores from its own file alone.

    Raises:
        ReshardError: `source` holds no state files, or those of several process counts,
            or states that cannot be resharded (see `reshard`).
        CheckpointFormatError: a file named like a state file is none, or a state file
            is not valid (see `restore`).

    Example:
        >>> import chute, tempfile
        >>> ds = chute.MapDataset.range(8).shard(0, 1).to_iter_dataset()
        >>> it = iter(ds)
        >>> _ = [next(it) for _ in range(4)]
        >>> old, new = tempfile.mkdtemp(), tempfile.mkdtemp()
        >>> _ = save(it, old)
        >>> [p.name for p in reshard_directory(old, new, 2)]
        ['process_0-of-2.json', 'process_1-of-2.json']
        >>> ds1 = chute.MapDataset.range(8).shard(1, 2).to_iter_dataset()
        >>> list(restore(iter(ds1), new, process_index=1, process_count=2))
        [5, 7]
    """
    folder = _folder(source, storage_options)
    found = states_by_count(folder)
    if not found:
        raise ReshardError(f"{folder} holds no process_*-of-*.json state files.")
    if len(found) != 1:
        raise ReshardError(f"{folder} mixes states of different process counts {sorted(found)}.")
    ((count, paths),) = found.items()
    documents = [load_state(paths[index], index, count) for index in sorted(paths)]
    out = _folder(target, storage_options)
    if isinstance(out, Path):
        out.mkdir(parents=True, exist_ok=True)
    written: list[Path | str] = []
    for document in reshard(documents, process_count):
        path = out / state_file_name(document["process_index"], process_count)
        write_atomic(path, dumps_document(document), storage_options)
        written.append(path if isinstance(path, Path) else path.url)
    return written


def _folder(
    directory: str | os.PathLike[str], options: StorageOptions | None
) -> Path | ObjectFolder:
    """A local folder, or a bucket's prefix for an `s3://` / `gs://` URL."""
    if is_object_url(os.fspath(directory)):
        return ObjectFolder(os.fspath(directory), options)
    return Path(directory)
