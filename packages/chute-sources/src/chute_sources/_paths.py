"""Expanding user-given paths, globs and folders into a sorted list of files."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from ._errors import SourceFileNotFoundError

__all__ = ["PathLike", "expand_paths"]

PathLike = str | os.PathLike[str]

_GLOB_CHARS = frozenset("*?[")


def expand_paths(
    paths: PathLike | Sequence[PathLike], what: str, suffixes: tuple[str, ...]
) -> list[str]:
    """Expands files, glob patterns and folders into files, in a stable order.

    Globs expand sorted; a folder expands to its files whose names contain one of
    `suffixes`, sorted. The order of the arguments is kept.

    Args:
        paths: one path or pattern, or a sequence of them.
        what: the kind of file, for error messages (e.g. "ArrayRecord").
        suffixes: name parts that select files inside a folder (e.g. (".array_record",)).

    Raises:
        SourceFileNotFoundError: a path that does not exist or a pattern matching nothing.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[str] = []
    for entry in paths:
        text = os.fspath(entry)
        if any(char in _GLOB_CHARS for char in text) and not os.path.exists(text):
            matches = sorted(glob.glob(text))
            if not matches:
                raise SourceFileNotFoundError(f"no {what} file matches the pattern {text!r}.")
            files.extend(matches)
        elif os.path.isdir(text):
            found = sorted(
                str(p)
                for p in Path(text).iterdir()
                if p.is_file() and any(s in p.name for s in suffixes)
            )
            if not found:
                raise SourceFileNotFoundError(
                    f"the folder {text!r} holds no {what} file (names containing {suffixes})."
                )
            files.extend(found)
        elif os.path.isfile(text):
            files.append(text)
        else:
            raise SourceFileNotFoundError(f"{what} file {text!r} does not exist.")
    if not files:
        raise SourceFileNotFoundError(f"no {what} files given (an empty list of paths).")
    return files
