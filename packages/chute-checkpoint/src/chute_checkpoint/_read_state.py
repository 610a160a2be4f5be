"""Reading one state file, local or in a bucket, as others may have left it.

A local file is opened without blocking and read only when it is a regular file: a
folder, FIFO, socket or device named like a state file is a `CheckpointFormatError`
(a FIFO would otherwise hang the restore), and a file's content must name the process
its name says.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from ._errors import CheckpointFormatError, CheckpointNotFoundError
from ._format import loads_document

__all__ = ["load_state", "local_path", "read_state"]


def read_state(path: Any) -> bytes:
    """The bytes of the state file at `path`: a local path, an `epath.Path` or an object.

    A local file is opened without blocking and read only if it is a regular file, so a
    FIFO named like a state file cannot hang a restore.

    Raises:
        CheckpointNotFoundError: no such file (or object).
        CheckpointFormatError: a folder, FIFO, socket or device at `path`.

    Example:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> try:
        ...     read_state(folder)
        ... except CheckpointFormatError as error:
        ...     print(str(error).split(": ", 1)[1])
        a folder, not a state file; restore from the folder that holds the \
process_<i>-of-<n>.json files.
    """
    where = str(path)
    local = local_path(path)
    if local is None:
        try:
            data: bytes = path.read_bytes()
        except IsADirectoryError as error:
            raise CheckpointFormatError(_a_folder(where)) from error
        return data
    try:
        descriptor = os.open(local, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as error:
        raise CheckpointNotFoundError(f"no checkpoint file at {where}.") from error
    except NotADirectoryError as error:
        raise CheckpointNotFoundError(
            f"no checkpoint file at {where}: {_file_above(local)} is a file, not a folder."
        ) from error
    except IsADirectoryError as error:
        raise CheckpointFormatError(_a_folder(where)) from error
    except OSError as error:
        if error.errno != errno.ENXIO:  # ENXIO: a socket, which no one can open.
            raise
        raise CheckpointFormatError(_not_regular(where)) from error
    try:
        mode = os.fstat(descriptor).st_mode
    except BaseException:
        os.close(descriptor)
        raise
    if not stat.S_ISREG(mode):  # Never read: a FIFO may block, a device never end.
        os.close(descriptor)
        raise CheckpointFormatError(_a_folder(where) if stat.S_ISDIR(mode) else _not_regular(where))
    with open(descriptor, "rb") as file:
        return file.read()


def load_state(path: Any, process_index: int, process_count: int) -> dict[str, Any]:
    """The validated document in the state file of process `process_index` of `process_count`.

    Raises:
        CheckpointNotFoundError: no such file.
        CheckpointFormatError: not a valid document, or one of another process than the
            file's name says (a copied or renamed file).

    Example:
        >>> import chute, tempfile
        >>> from chute_checkpoint import save
        >>> path = save(iter(chute.MapDataset.range(3).to_iter_dataset()), tempfile.mkdtemp())
        >>> load_state(path, 0, 1)["state"]
        {'position': 0}
    """
    where = str(path)
    document = loads_document(read_state(path), where)
    found = (document["process_index"], document["process_count"])
    if found != (process_index, process_count):
        raise CheckpointFormatError(
            f"{where}: holds the state of process {found[0]} of {found[1]}, but its name says "
            f"process {process_index} of {process_count}: the file was copied or renamed; "
            "restore from the files as save wrote them."
        )
    return document


def local_path(path: Any) -> str | None:
    """The local file system path of `path`; None for a URL (a bucket's object).

    Example:
        >>> import pathlib
        >>> local_path(pathlib.Path("/tmp/x")), local_path("s3://bucket/x")
        ('/tmp/x', None)
    """
    if not isinstance(path, str | os.PathLike):
        return None
    text = os.fspath(path)
    return text if isinstance(text, str) and "://" not in text else None


def _file_above(path: str) -> str:
    for parent in Path(path).parents:
        if parent.exists() and not parent.is_dir():
            return str(parent)
    return "a folder on the way"


def _a_folder(where: str) -> str:
    return (
        f"{where}: a folder, not a state file; restore from the folder that holds the "
        "process_<i>-of-<n>.json files."
    )


def _not_regular(where: str) -> str:
    return (
        f"{where}: not a regular file (a FIFO, socket or device); a state file is a plain "
        "JSON file: remove or rename it."
    )
