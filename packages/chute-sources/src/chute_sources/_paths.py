"""Expanding user-given paths, glob patterns and folders into a list of files."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Any

from chute_core import SourceFileNotFoundError

__all__ = ["PathLike", "ShortRepr", "display_paths", "expand_paths"]

PathLike = str | os.PathLike[str]

_GLOB_CHARS = ("*", "?", "[")


class ShortRepr:
    """A value whose `repr` is a given text (keeps reprs of many paths short)."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __repr__(self) -> str:
        return self._text


def display_paths(paths: Any) -> object:
    """Returns `paths` as the user gave them, shortened for a `repr`."""
    if isinstance(paths, str | os.PathLike):
        return os.fspath(paths)
    shown = [os.fspath(path) if isinstance(path, str | os.PathLike) else path for path in paths]
    if len(shown) <= 3:
        return shown
    return ShortRepr(f"[{shown[0]!r}, {shown[1]!r}, ... ({len(shown)} paths)]")


def expand_paths(paths: Any, what: str, suffixes: tuple[str, ...], owner: str) -> list[str]:
    """Returns the absolute paths of the files that `paths` names, in a stable order.

    Each entry is a file, a glob pattern (`*`, `?`, `[...]`, and `**` for any number of
    folders; expanded sorted), or a folder (its files whose names contain one of
    `suffixes`, sorted; hidden files, named `.*`, are skipped as a pattern skips them:
    writers keep partial files there, e.g. `write_array_record`'s `.<name>.tmp`).
    Entries keep the order in which they are given.

    Args:
        paths: a path, pattern or folder, or a sequence of them.
        what: the kind of file, for messages (e.g. "Parquet").
        suffixes: name parts that select the files of a folder (e.g. (".parquet",)).
        owner: who asks, for messages (e.g. "ParquetSource").

    Raises:
        SourceFileNotFoundError: an entry names no file, or `paths` is empty.
        TypeError: `paths` is not a path, a pattern or a sequence of these.
    """
    if isinstance(paths, str | os.PathLike):
        entries: list[object] = [paths]
    elif isinstance(paths, Sequence):
        entries = list(paths)
    else:
        raise TypeError(
            f"{owner}: paths must be a path, a glob pattern or a list of these, "
            f"got {type(paths).__name__}."
        )
    if not entries:
        raise SourceFileNotFoundError(
            f"{owner}: no paths given; pass a file, a folder, a glob pattern such as "
            f"'data/*{suffixes[0]}', or a list of these."
        )
    files: list[str] = []
    for entry in entries:
        if not isinstance(entry, str | os.PathLike):
            raise TypeError(
                f"{owner}: every path must be a str or os.PathLike, got "
                f"{type(entry).__name__} {entry!r}."
            )
        path = os.fspath(entry)
        if not isinstance(path, str):
            raise TypeError(f"{owner}: paths must be text, got bytes {path!r}.")
        if os.path.isfile(path):
            files.append(os.path.abspath(path))
        elif os.path.isdir(path):
            found = sorted(
                name
                for name in os.listdir(path)
                if not name.startswith(".")
                and any(s in name for s in suffixes)
                and os.path.isfile(os.path.join(path, name))
            )
            if not found:
                raise SourceFileNotFoundError(
                    f"{owner}: the folder {path!r} holds no {what} file (no file name contains "
                    f"{' or '.join(suffixes)}); pass the files or a glob pattern such as "
                    f"{os.path.join(path, '*')!r}."
                )
            files.extend(os.path.abspath(os.path.join(path, name)) for name in found)
        elif any(char in path for char in _GLOB_CHARS):
            matches = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
            if not matches:
                raise SourceFileNotFoundError(
                    f"{owner}: the glob pattern {path!r} matches no {what} file (working "
                    f"directory {os.getcwd()!r}); check the folder and the file extension."
                )
            files.extend(os.path.abspath(match) for match in matches)
        else:
            raise SourceFileNotFoundError(
                f"{owner}: {what} file {path!r} does not exist (working directory {os.getcwd()!r})."
            )
    return files
