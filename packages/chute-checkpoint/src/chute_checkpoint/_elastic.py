"""This process's state in a checkpoint folder, also when another process count saved it.

A folder holds one `process_<i>-of-<n>.json` per process. A process restoring with the
same count reads its own file. With another count, it reads the states of all `n`
processes and turns them into its own with `reshard_for` (index-based pipelines only:
the error says why when that is impossible). Works on `pathlib.Path`, on Orbax's
`etils.epath.Path` (local or cloud storage) and on chute's own bucket prefixes
(`_object_folder.ObjectFolder`) alike.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any, Protocol

from ._errors import CheckpointNotFoundError, ReshardError
from ._format import loads_document
from ._reshard import reshard_for

__all__ = ["find_document", "state_file_name", "states_by_count"]

_STATE_FILE = re.compile(r"process_(\d+)-of-(\d+)\.json")


class _Folder(Protocol):
    """A folder path: `pathlib.Path` or `etils.epath.Path`."""

    def __truediv__(self, name: str) -> Any: ...
    def glob(self, pattern: str) -> Iterable[Any]: ...
    def is_dir(self) -> bool: ...


def state_file_name(process_index: int, process_count: int) -> str:
    """The name of process `process_index`'s state file (as Grain names it).

    Example:
        >>> state_file_name(0, 2)
        'process_0-of-2.json'
    """
    return f"process_{process_index}-of-{process_count}.json"


def states_by_count(folder: _Folder) -> dict[int, dict[int, Any]]:
    """The state files in `folder`: `{process_count: {process_index: path}}`.

    Example:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "process_1-of-2.json").write_text("{}")
        >>> {n: sorted(files) for n, files in states_by_count(folder).items()}
        {2: [1]}
    """
    found: dict[int, dict[int, Any]] = {}
    for path in folder.glob("process_*-of-*.json"):
        match = _STATE_FILE.fullmatch(path.name)
        if match:
            found.setdefault(int(match.group(2)), {})[int(match.group(1))] = path
    return found


def find_document(
    folder: _Folder, iterator: object, process_index: int, process_count: int
) -> tuple[dict[str, Any], str]:
    """This process's state document in `folder`, and where it came from (for errors).

    Raises:
        CheckpointNotFoundError: no state for this process, and no complete set of
            states of another process count to continue from.
        CheckpointFormatError: a state file is corrupt, foreign or too new.
        ReshardError: the states of another process count cannot continue in this
            iterator (the message says why).

    Example:
        >>> import pathlib, tempfile, chute
        >>> from chute_checkpoint import save
        >>> ds = chute.MapDataset.range(6).batch(2).to_iter_dataset()
        >>> it = iter(ds)
        >>> _ = next(it)
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = save(it, folder, process_index=0, process_count=1)
        >>> document, where = find_document(folder, iter(ds), 1, 2)
        >>> document["state"], document["process_index"], document["process_count"]
        ({'position': 1}, 1, 2)
    """
    name = state_file_name(process_index, process_count)
    path = folder / name
    if path.exists():
        return loads_document(path.read_bytes(), os.fspath(path)), os.fspath(path)
    if not folder.is_dir():
        raise CheckpointNotFoundError(f"no checkpoint at {folder}: the folder does not exist.")
    found = states_by_count(folder)
    if not found:
        raise CheckpointNotFoundError(f"{folder} has no {name} (no chute state files at all).")
    if len(found) > 1:
        raise CheckpointNotFoundError(
            f"{folder} has no {name}, and holds the states of several process counts "
            f"{sorted(found)}: it is unclear which to continue from; keep one step's states "
            "in a folder (or reshard_directory the right ones into a new folder)."
        )
    ((count, paths),) = found.items()
    if sorted(paths) != list(range(count)):
        raise CheckpointNotFoundError(
            f"{folder} has no {name}: it holds the states of processes {sorted(paths)} of "
            f"{count}, and this is process {process_index} of {process_count}; continuing on "
            f"another number of processes needs the states of all {count}."
        )
    documents = [loads_document(paths[i].read_bytes(), os.fspath(paths[i])) for i in range(count)]
    try:
        document = reshard_for(
            documents, iterator, process_index=process_index, process_count=process_count
        )
    except ReshardError as error:
        raise ReshardError(
            f"{folder} holds the states of {count} process(es), and this is process "
            f"{process_index} of {process_count}; they cannot continue here: {error}"
        ) from error
    return document, f"{folder} (the states of {count} process(es), resharded)"
