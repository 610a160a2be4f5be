"""Saving and restoring iterators to files, without Orbax: one atomic file per process."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Any, TypeVar

from chute_sources import CheckpointableIterator

from ._errors import CheckpointNotFoundError
from ._format import (
    apply_document,
    dumps_document,
    loads_document,
    make_document,
    process_position,
)

__all__ = ["read_document", "restore", "save", "state_file_name", "write_atomic"]

It = TypeVar("It", bound=CheckpointableIterator[Any])
_STATE_FILE = re.compile(r"process_(\d+)-of-(\d+)\.json")


def state_file_name(process_index: int, process_count: int) -> str:
    """The name of process `process_index`'s state file (as Grain names it).

    Example:
        >>> state_file_name(0, 2)
        'process_0-of-2.json'
    """
    return f"process_{process_index}-of-{process_count}.json"


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Writes `text` to `path` so that a reader sees the old file or the new, whole.

    Writes a temporary file in the same folder, flushes it to disk, renames it over
    `path` and flushes the folder, so a crash (or SIGKILL) at any moment leaves no
    half-written file under `path`.

    Example:
        >>> import pathlib, tempfile
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "state.json"
        >>> write_atomic(target, "{}")
        >>> target.read_text()
        '{}'
    """
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


def read_document(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads and validates one state file (see `validate_document`).

    Example:
        >>> import chute, tempfile
        >>> it = iter(chute.MapDataset.range(3).to_iter_dataset())
        >>> read_document(save(it, tempfile.mkdtemp()))["state"]
        {'position': 0}
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError as error:
        raise CheckpointNotFoundError(f"no checkpoint file at {os.fspath(path)}.") from error
    return loads_document(data, os.fspath(path))


def save(
    iterator: CheckpointableIterator[Any],
    directory: str | os.PathLike[str],
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> Path:
    """Saves `iterator`'s position to `directory/process_<i>-of-<n>.json`, atomically.

    Each process writes its own file into the same folder (created if missing).
    `process_index` and `process_count` default to JAX's when JAX is imported, else
    `0` and `1`.

    Returns:
        The path of the file written.

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
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / state_file_name(index, count)
    write_atomic(path, dumps_document(document))
    return path


def restore(
    iterator: It,
    directory: str | os.PathLike[str],
    *,
    process_index: int | None = None,
    process_count: int | None = None,
    check_pipeline: bool = True,
) -> It:
    """Moves `iterator` to the position saved in `directory` by `save`; returns it.

    Raises:
        CheckpointNotFoundError: no state file for this process (the message says when
            the folder holds states of another number of processes: see `reshard`).
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
    folder = Path(directory)
    path = folder / state_file_name(index, count)
    if not path.is_file():
        raise CheckpointNotFoundError(_missing(folder, index, count))
    apply_document(iterator, read_document(path), check_pipeline=check_pipeline, where=str(path))
    return iterator


def _missing(folder: Path, index: int, count: int) -> str:
    name = state_file_name(index, count)
    if not folder.is_dir():
        return f"no checkpoint at {folder}: the folder does not exist."
    counts = sorted(
        {int(m.group(2)) for p in folder.iterdir() if (m := _STATE_FILE.fullmatch(p.name))}
    )
    if counts:
        return (
            f"{folder} has no {name}: it holds the states of {counts[0]} process(es), and this "
            f"is process {index} of {count}. Redistribute them with "
            f"chute_checkpoint.reshard_directory(source, target, process_count={count}) (for "
            f"index-based sharded pipelines)."
        )
    return f"{folder} has no {name} (no chute state files at all)."
