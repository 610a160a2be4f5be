"""This process's state in a checkpoint folder, also when another process count saved it.

A folder holds one `process_<i>-of-<n>.json` per process. A process restoring with the
same count reads its own file. With another count, it reads the states of all `n`
processes and turns them into its own with `reshard_for` (index-based pipelines only:
the error says why when that is impossible). Works on `pathlib.Path`, on Orbax's
`etils.epath.Path` (local or cloud storage) and on chute's own bucket prefixes
(`_object_folder.ObjectFolder`) alike.

Folders may hold what others left there. Listing one costs work in proportion to the
files in it, never to a count written in a name (counts are bounded by
`MAX_PROCESS_COUNT`); a name that looks like a state file's but is not one, a folder
or FIFO where a state file should be, and a file whose content names another process
than its name are each a `CheckpointFormatError` naming the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any, Protocol

from ._errors import CheckpointFormatError, CheckpointNotFoundError, ReshardError
from ._format import MAX_PROCESS_COUNT
from ._read_state import load_state, local_path
from ._reshard import reshard_for

__all__ = ["find_document", "parse_state_file_name", "state_file_name", "states_by_count"]

_STATE_FILE = re.compile(r"process_([0-9]+)-of-([0-9]+)\.json")
_COUNT_DIGITS = len(str(MAX_PROCESS_COUNT))
_SHOWN = 10  # Process indices listed in a message, at most.


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


def parse_state_file_name(name: str, where: str) -> tuple[int, int]:
    """`(process_index, process_count)` from a state file's name, as `state_file_name` writes it.

    Raises:
        CheckpointFormatError: the name is no state file's (the message names `where`
            and says why): not of the form, a number with a leading zero, a process
            count over `MAX_PROCESS_COUNT`, or an index not below the count.

    Example:
        >>> parse_state_file_name("process_1-of-4.json", "f")
        (1, 4)
        >>> try:
        ...     parse_state_file_name("process_4-of-4.json", "f")
        ... except CheckpointFormatError as error:
        ...     print(error)
        f: not a chute state file: process index 4 is not below its process count 4; remove \
or rename the file.
    """
    match = _STATE_FILE.fullmatch(name)
    if match is None:
        raise _stray(where, "not of the form process_<i>-of-<n>.json")
    index_text, count_text = match.groups()
    if any(len(text) > 1 and text.startswith("0") for text in (index_text, count_text)):
        raise _stray(where, "a number with a leading zero")
    if len(count_text) > _COUNT_DIGITS or int(count_text) > MAX_PROCESS_COUNT:
        shown = count_text if len(count_text) <= 20 else count_text[:20] + "..."
        raise _stray(
            where,
            f"its process count {shown} is over {MAX_PROCESS_COUNT:,} (more processes than any "
            "JAX cluster runs; the bound keeps a stray name from costing work or memory)",
        )
    count = int(count_text)
    if len(index_text) > _COUNT_DIGITS or int(index_text) >= count:
        shown = index_text if len(index_text) <= 20 else index_text[:20] + "..."
        raise _stray(where, f"process index {shown} is not below its process count {count}")
    return int(index_text), count


def _stray(where: str, reason: str) -> CheckpointFormatError:
    return CheckpointFormatError(
        f"{where}: not a chute state file: {reason}; remove or rename the file."
    )


def states_by_count(folder: _Folder) -> dict[int, dict[int, Any]]:
    """The state files in `folder`: `{process_count: {process_index: path}}`.

    Work and memory are in proportion to the files in `folder`.

    Raises:
        CheckpointFormatError: a file named `process_*-of-*.json` whose name is no
            state file's (see `parse_state_file_name`).

    Example:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "process_1-of-2.json").write_text("{}")
        >>> {n: sorted(files) for n, files in states_by_count(folder).items()}
        {2: [1]}
    """
    found: dict[int, dict[int, Any]] = {}
    for path in folder.glob("process_*-of-*.json"):
        index, count = parse_state_file_name(path.name, str(path))
        found.setdefault(count, {})[index] = path
    return found


def find_document(
    folder: _Folder, iterator: object, process_index: int, process_count: int
) -> tuple[dict[str, Any], str]:
    """This process's state document in `folder`, and where it came from (for errors).

    Raises:
        CheckpointNotFoundError: no state for this process, and no complete set of
            states of another process count to continue from.
        CheckpointFormatError: a state file is corrupt, foreign or too new, is no regular
            file, or names another process than its name; a file named like a state
            file is none; or `folder` is a file.
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
        return load_state(path, process_index, process_count), str(path)
    if not folder.is_dir():
        local = local_path(folder)
        if local is not None and os.path.exists(local):
            raise CheckpointFormatError(
                f"{folder} is a file, not a checkpoint folder: pass the folder that holds the "
                f"process_<i>-of-<n>.json files ({os.path.dirname(local)})."
            )
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
    if len(paths) != count:  # Indices are distinct and below count: all or some missing.
        raise CheckpointNotFoundError(
            f"{folder} has no {name}: it holds the states of processes {_listed(paths)} of "
            f"{count}, and this is process {process_index} of {process_count}; continuing on "
            f"another number of processes needs the states of all {count}."
        )
    documents = [load_state(paths[i], i, count) for i in range(count)]
    try:
        document = reshard_for(
            documents, iterator, process_index=process_index, process_count=process_count
        )
    except ReshardError as error:
        raise ReshardError(
            f"{folder} holds the states of {count} process(es), and this is process "
            f"{process_index} of {process_count}; they cannot continue here: {error}"
        ) from error
    except CheckpointFormatError as error:
        raise CheckpointFormatError(
            f"{folder} holds the states of {count} process(es) (state i is "
            f"process_<i>-of-{count}.json): {error}"
        ) from error
    return document, f"{folder} (the states of {count} process(es), resharded)"


def _listed(paths: dict[int, Any]) -> str:
    """The process indices of `paths`, sorted; the first few of many, with how many."""
    indices = sorted(paths)
    if len(indices) <= _SHOWN:
        return str(indices)
    return f"[{', '.join(map(str, indices[:_SHOWN]))}, ...] ({len(indices)} in all)"
