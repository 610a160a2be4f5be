"""`JsonLinesSource`: the objects of a JSON Lines file, one a line, by index.

Opening the source scans the file once for line ends (memory-mapped, a chunk at a
time, so memory stays at two integers per line); a read decodes only the lines it is
asked for. A pickled source carries its path, not the file's contents or the line
index: the copy maps the file and scans it again on its first read.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ._base import Source
from ._errors import CorruptRecordError, SourceFileError, SourceFileNotFoundError

__all__ = ["JsonLinesSource"]

_NEWLINE = ord("\n")
_RETURN = ord("\r")
_SCAN_CHUNK = 1 << 26  # Bytes compared at once when looking for line ends (64 MiB).


class _Lines(NamedTuple):
    """A mapped file, where its non-blank lines start and end, and what it was."""

    data: Any  # an mmap.mmap, or b"" for an empty file (which cannot be mapped)
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    stamp: tuple[int, int]  # size, modification time (ns): to notice a changed file


class JsonLinesSource(Source[Any]):
    r"""The values of a JSON Lines file, one a line, as a random-access source.

    Record `i` is the `i`-th non-blank line, decoded with `json.loads` (objects become
    dicts, arrays lists; each read gives a new value). Blank lines (empty, or a lone
    `\r`) are skipped and do not count; the file is UTF-8 (or UTF-16 / UTF-32, which
    `json.loads` recognises). A line that is not valid JSON is found when it is read,
    not when the source is opened: the read raises `CorruptRecordError`, naming the
    file and the line number.

    Reads are thread-safe. Pickling sends the path; the copy reopens the file on its
    first read and raises `SourceFileError` if the file's size or modification time
    changed since it was opened. Do not truncate the file while a source maps it.

    Args:
        path: the JSON Lines file (any name; `.jsonl` and `.ndjson` are usual). Kept as
            given for messages and `repr`; a relative path is resolved now.

    Raises:
        SourceFileNotFoundError: no file at `path`.
        SourceFileError: `path` is a folder.
        TypeError: `path` is not a str or `os.PathLike`.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "pets.jsonl")
        >>> with open(path, "w") as file:
        ...     _ = file.write('{"name": "cat", "legs": 4}\n\n{"name": "eel", "legs": 0}\n')
        >>> source = JsonLinesSource(path)
        >>> len(source), source[-1]
        (2, {'name': 'eel', 'legs': 0})
        >>> [pet["name"] for pet in source.__getitems__([1, 0])]
        ['eel', 'cat']
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, str | os.PathLike) or not isinstance(os.fspath(path), str):
            raise TypeError(
                f"JsonLinesSource: path must be a str or os.PathLike of a JSON Lines file, "
                f"got {type(path).__name__} {path!r}."
            )
        self._path = os.fspath(path)
        self._file = os.path.abspath(self._path)
        self._lock = threading.Lock()
        self._lines: _Lines | None = _scan(self._path, self._file)
        self._length = len(self._lines.starts)
        self._stamp = self._lines.stamp

    @property
    def path(self) -> str:
        """The file, as given."""
        return self._path

    def __len__(self) -> int:
        return self._length

    def _read(self, index: int) -> Any:
        return self._decode(self._mapped(), index)

    def _read_many(self, indices: Sequence[int]) -> list[Any]:
        lines = self._mapped()
        return [self._decode(lines, index) for index in indices]

    def _decode(self, lines: _Lines, index: int) -> Any:
        start, end = int(lines.starts[index]), int(lines.ends[index])
        try:
            return json.loads(lines.data[start:end])
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, too many digits
            raise CorruptRecordError(
                f"{self._path!r} line {_line_number(lines.data, start)} is not valid JSON: {error}"
            ) from error
        except RecursionError:
            raise CorruptRecordError(
                f"{self._path!r} line {_line_number(lines.data, start)} nests arrays or objects "
                f"too deeply to decode (deeper than Python's recursion limit, "
                f"{sys.getrecursionlimit()})"
            ) from None

    def _mapped(self) -> _Lines:
        """The mapped file and its line index; after unpickling, made on first use."""
        lines = self._lines
        if lines is not None:
            return lines
        with self._lock:
            if self._lines is None:
                found = _scan(self._path, self._file)
                if found.stamp != self._stamp or len(found.starts) != self._length:
                    _unmap(found.data)
                    size, _ = self._stamp
                    raise SourceFileError(
                        f"JsonLinesSource: {self._path!r} changed after this source was opened "
                        f"(it had {size} bytes and {self._length} records, now "
                        f"{found.stamp[0]} bytes and {len(found.starts)} records, or a new "
                        "modification time); create a new source from the current file."
                    )
                self._lines = found
            return self._lines

    def _params(self) -> dict[str, Any]:
        return {"path": self._path, "len": self._length}

    def close(self) -> None:
        """Unmaps the file; reads afterwards raise `SourceClosedError`."""
        with self._lock:
            lines, self._lines = self._lines, None
        if lines is not None:
            _unmap(lines.data)
        super().close()

    def __getstate__(self) -> dict[str, Any]:
        fields = ("_path", "_file", "_length", "_stamp", "_closed")
        return {field: getattr(self, field) for field in fields}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._lines = None


def _scan(shown: str, file: str) -> _Lines:
    """Maps `file` and finds its non-blank lines; `shown` names it in errors."""
    try:
        with open(file, "rb") as handle:
            stat = os.fstat(handle.fileno())
            size = stat.st_size
            data: Any = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except FileNotFoundError:
        raise SourceFileNotFoundError(
            f"JSON Lines file {shown!r} does not exist (working directory {os.getcwd()!r})."
        ) from None
    except IsADirectoryError:
        raise SourceFileError(
            f"{shown!r} is a folder, not a JSON Lines file; pass the file itself."
        ) from None
    raw = np.frombuffer(data, np.uint8)
    found = [
        np.flatnonzero(raw[offset : offset + _SCAN_CHUNK] == _NEWLINE) + offset
        for offset in range(0, size, _SCAN_CHUNK)
    ]
    ends = np.concatenate(found).astype(np.int64) if found else np.zeros(0, np.int64)
    if size and raw[-1] != _NEWLINE:  # A last line without a line end.
        ends = np.append(ends, np.int64(size))
    starts = np.concatenate([np.zeros(1, np.int64), ends[:-1] + 1]) if len(ends) else ends
    lengths = ends - starts
    blank = lengths == 0
    single = np.flatnonzero(lengths == 1)
    blank[single] = raw[starts[single]] == _RETURN  # A lone "\r" of a CRLF file.
    keep = ~blank
    del raw  # A view of the mapping: the mapping cannot close while one exists.
    return _Lines(data, starts[keep], ends[keep], (size, stat.st_mtime_ns))


def _line_number(data: Any, start: int) -> int:
    """The line (from 1) that starts at byte `start`: one more than the line ends before."""
    return int(np.count_nonzero(np.frombuffer(data, np.uint8, count=start) == _NEWLINE)) + 1


def _unmap(data: Any) -> None:
    if isinstance(data, mmap.mmap):
        try:
            data.close()
        except BufferError:  # A read in another thread still views it: the GC closes it.
            pass
