"""`JsonLinesSource`: the objects of a JSON Lines file, one a line, by index.

Opening the source scans the file once for line ends (memory-mapped, a chunk at a
time, so memory stays at two integers per line); a read decodes only the lines it is
asked for. A pickled source carries its path, not the file's contents or the line
index: the copy maps the file and scans it again on its first read. Objects in buckets
are read from local copies in the shard cache (`_json_lines_remote`).
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from chute_core import CorruptRecordError, SourceFileError, SourceFileNotFoundError

from ._base import Source
from ._json_lines_remote import RemoteFiles
from ._remote._options import StorageOptions
from ._remote._urls import is_object_url, local_path

__all__ = ["JsonLinesSource"]

_NEWLINE = ord("\n")
_RETURN = ord("\r")
_SCAN_CHUNK = 1 << 26  # Bytes compared at once when looking for line ends (64 MiB).


class _Lines(NamedTuple):
    """A mapped file, where its non-blank lines start and end, and what it was."""

    data: Any  # an mmap.mmap, b"" for an empty file (which cannot be mapped), None: unmapped
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

    `path` may also be a URL: `file:///path`, or `s3://bucket/key` / `gs://...` of an
    object, a glob pattern of objects (`s3://bucket/data/*.jsonl`) or a folder (its
    `*.jsonl` and `*.ndjson` objects); the records of several objects follow one
    another in URL order. Each object is downloaded into the per-machine shard cache
    when the source is created (to find its lines) and read from that copy; a pickled
    source carries the objects' URLs, sizes and versions, and a copy in another
    process or machine reads the cached copy or downloads it again, of the same
    version (`ObjectChangedError` if the object was replaced meanwhile).

    Args:
        path: the JSON Lines file (any name; `.jsonl` and `.ndjson` are usual), or a
            URL (see above). Kept as given for messages and `repr`; a relative path is
            resolved now.
        storage_options: how to reach a URL's bucket, and the shard cache (default:
            from the environment; see `StorageOptions`).

    Raises:
        SourceFileNotFoundError: no file at `path` (or no such object or bucket).
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
        >>> source.files == (path,), source.file_records
        (True, (2,))
    """

    def __init__(
        self, path: str | os.PathLike[str], *, storage_options: StorageOptions | None = None
    ) -> None:
        if not isinstance(path, str | os.PathLike) or not isinstance(os.fspath(path), str):
            raise TypeError(
                f"JsonLinesSource: path must be a str or os.PathLike of a JSON Lines file, "
                f"got {type(path).__name__} {path!r}."
            )
        self._path = os.fspath(path)
        self._remote: RemoteFiles | None = None
        if is_object_url(self._path):
            options = storage_options if storage_options is not None else StorageOptions()
            self._remote = RemoteFiles.expand(self._path, options)
            self._file = self._path
        else:
            self._file = os.path.abspath(local_path(self._path, "JsonLinesSource"))
        self._lock = threading.Lock()
        self._lines: list[_Lines | None] = self._scan_all()
        counts = [len(lines.starts) for lines in self._lines if lines is not None]
        self._offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._length = int(self._offsets[-1])
        self._stamps = tuple(lines.stamp for lines in self._lines if lines is not None)
        if self._remote is not None:  # The last MAX_OPEN stay mapped.
            for index in range(len(self._lines)):
                self._unmap_beyond(self._remote.used(index))

    def _scan_all(self) -> list[_Lines | None]:
        if self._remote is None:
            return [_scan(self._path, self._file)]
        count = len(self._remote.infos)
        if count == 1:
            return [self._scan_object(0)]
        with ThreadPoolExecutor(min(8, count), thread_name_prefix="chute-jsonl") as pool:
            return list(pool.map(self._scan_object, range(count)))

    def _scan_object(self, index: int) -> _Lines:
        assert self._remote is not None
        info = self._remote.infos[index]
        with self._remote.local(index) as path:
            lines = _scan(info.url, path)
        return lines._replace(stamp=(info.size, 0))  # The copy's time is the cache's.

    def _unmapped(self, index: int) -> None:
        lines = self._lines[index]
        if lines is not None:
            self._lines[index] = lines._replace(data=None)  # Unmapped when no read uses it.

    @property
    def path(self) -> str:
        """The file, as given."""
        return self._path

    @property
    def files(self) -> tuple[str, ...]:
        """The files read, in record order: the absolute path, or the objects' URLs."""
        if self._remote is None:
            return (self._file,)
        return tuple(info.url for info in self._remote.infos)

    @property
    def file_records(self) -> tuple[int, ...]:
        """The number of records of each of `files`."""
        return tuple(int(count) for count in np.diff(self._offsets))

    def __len__(self) -> int:
        return self._length

    def _name(self, file: int) -> str:
        return self._path if self._remote is None else self._remote.infos[file].url

    def _read(self, index: int) -> Any:
        if len(self._lines) == 1:
            return self._decode(self._mapped(0), index, 0)
        file = int(np.searchsorted(self._offsets, index, side="right")) - 1
        return self._decode(self._mapped(file), index - int(self._offsets[file]), file)

    def _read_many(self, indices: Sequence[int]) -> list[Any]:
        if len(self._lines) == 1:
            lines = self._mapped(0)
            return [self._decode(lines, index, 0) for index in indices]
        keys = np.asarray(indices, dtype=np.int64)
        files = np.searchsorted(self._offsets, keys, side="right") - 1
        rows = keys - self._offsets[files]
        return [
            self._decode(self._mapped(file), row, file)
            for file, row in zip(files.tolist(), rows.tolist(), strict=True)
        ]

    def _decode(self, lines: _Lines, index: int, file: int) -> Any:
        start, end = int(lines.starts[index]), int(lines.ends[index])
        try:
            return json.loads(lines.data[start:end])
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, too many digits
            line = _line_number(lines.data, start)
            raise CorruptRecordError(
                f"{self._name(file)!r} line {line} is not valid JSON: {error}"
            ) from error
        except RecursionError:
            raise CorruptRecordError(
                f"{self._name(file)!r} line {_line_number(lines.data, start)} nests arrays or "
                f"objects too deeply to decode (deeper than Python's recursion limit, "
                f"{sys.getrecursionlimit()})"
            ) from None

    def _mapped(self, file: int) -> _Lines:
        """The mapped file and its line index; after unpickling, made on first use."""
        lines = self._lines[file]
        if lines is not None and lines.data is not None:
            if self._remote is not None:
                self._unmap_beyond(self._remote.used(file))
            return lines
        with self._lock:
            lines = self._lines[file]
            if lines is None or lines.data is None:
                lines = self._open(file, lines)
                self._lines[file] = lines
        if self._remote is not None:
            self._unmap_beyond(self._remote.used(file))
        return lines

    def _unmap_beyond(self, files: list[int]) -> None:
        if files:
            with self._lock:
                for index in files:
                    self._unmapped(index)

    def _open(self, file: int, known: _Lines | None) -> _Lines:
        """Maps `file` (and finds its lines unless `known`); checks it is unchanged."""
        if self._remote is not None and known is not None:
            with self._remote.local(file) as path:
                return known._replace(data=_map(self._name(file), path)[0])
        found = _scan(self._path, self._file) if self._remote is None else self._scan_object(file)
        if found.stamp != self._stamps[file] or len(found.starts) != self._count(file):
            _unmap(found.data)
            size, _ = self._stamps[file]
            raise SourceFileError(
                f"JsonLinesSource: {self._name(file)!r} changed after this source was opened "
                f"(it had {size} bytes and {self._count(file)} records, now "
                f"{found.stamp[0]} bytes and {len(found.starts)} records, or a new "
                "modification time); create a new source from the current file."
            )
        return found

    def _count(self, file: int) -> int:
        return int(self._offsets[file + 1] - self._offsets[file])

    def _params(self) -> dict[str, Any]:
        return {"path": self._path, "len": self._length}

    def close(self) -> None:
        """Unmaps the file; reads afterwards raise `SourceClosedError`."""
        with self._lock:
            lines, self._lines = self._lines, [None] * len(self._lines)
        for found in lines:
            if found is not None:
                _unmap(found.data)
        super().close()

    def __getstate__(self) -> dict[str, Any]:
        fields = ("_path", "_file", "_remote", "_offsets", "_length", "_stamps", "_closed")
        return {field: getattr(self, field) for field in fields}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._lines = [None] * len(self._stamps)


def _map(shown: str, file: str) -> tuple[Any, os.stat_result]:
    """Maps `file` read-only (b"" if empty); `shown` names it in errors."""
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
    return data, stat


def _scan(shown: str, file: str) -> _Lines:
    """Maps `file` and finds its non-blank lines; `shown` names it in errors."""
    data, stat = _map(shown, file)
    size = stat.st_size
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
