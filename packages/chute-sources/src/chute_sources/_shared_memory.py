"""`SharedMemorySource`: records held once in shared memory, read by every process."""

from __future__ import annotations

import mmap
import os
import struct
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from chute_core import SharedMemoryError, SourceClosedError
from chute_core.internal import create_segment_file, no_space_error

from ._base import Source
from ._codec import decode_record, encode_record

__all__ = ["SharedMemorySource"]

_MAGIC = b"CHUTESHM"
_FOOTER = struct.Struct("<8sQQ")  # magic, number of records, offset of the offsets table
_ALIGN = 16


def _unlink(path: str, owner_pid: int) -> None:
    """The creator's finalizer; a copy of the source in a forked child never unlinks."""
    if os.getpid() != owner_pid:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _keep(path: str, owner_pid: int) -> None:
    """The finalizer of copies: the memory belongs to the creating process."""


class SharedMemorySource(Source[Any]):
    """Records encoded once into shared memory; every worker process reads the same copy.

    The records are encoded with chute's record codec into one shared-memory file
    (`/dev/shm`, owner-only permissions). Pickling the source sends only the file's
    name, so worker processes map the same pages instead of copying the data. Records
    may be anything the codec takes (numbers, str, bytes, NumPy arrays, nested dicts,
    lists and tuples of them) of any size. Arrays read back are read-only views of the
    shared pages.

    The creating process owns the memory: it is freed by `close()`, when the source is
    garbage collected, at interpreter exit, or, if the process is killed, by the next
    chute process that creates shared memory.

    Args:
        records: the records, consumed once.

    Example:
        >>> source = SharedMemorySource(range(5))
        >>> len(source), source[0], source[-1]
        (5, 0, 4)
        >>> source.close()
    """

    def __init__(self, records: Iterable[Any]) -> None:
        path, fd = create_segment_file("source")
        self._path = str(path)
        self._finalizer = weakref.finalize(self, _unlink, self._path, os.getpid())
        offsets = [len(_MAGIC)]
        try:
            with os.fdopen(fd, "wb", buffering=1 << 20) as file:
                file.write(_MAGIC)
                for record in records:
                    data = encode_record(record)
                    pad = -len(data) % _ALIGN
                    file.write(data)
                    if pad:
                        file.write(b"\0" * pad)
                    offsets.append(offsets[-1] + len(data) + pad)
                table = np.asarray(offsets, dtype="<i8")
                file.write(table.tobytes())
                file.write(_FOOTER.pack(_MAGIC, len(offsets) - 1, offsets[-1]))
        except OSError as error:
            self._finalizer()
            raise no_space_error(path, offsets[-1], error) from error
        except BaseException:
            self._finalizer()
            raise
        self._owner_pid = os.getpid()
        self._length = len(offsets) - 1
        self._nbytes = offsets[-1] + table.nbytes + _FOOTER.size
        self._lock = threading.Lock()
        self._map: mmap.mmap | None = None
        self._offsets: np.ndarray[Any, np.dtype[np.int64]] | None = None

    @property
    def name(self) -> str:
        """The shared-memory file's name."""
        return os.path.basename(self._path)

    @property
    def nbytes(self) -> int:
        """The size of the shared memory in bytes."""
        return self._nbytes

    def _attach(self) -> tuple[mmap.mmap, np.ndarray[Any, np.dtype[np.int64]]]:
        with self._lock:
            if self._map is None or self._offsets is None:
                self._check_open()
                try:
                    with open(self._path, "rb") as file:
                        mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
                except FileNotFoundError:
                    raise SharedMemoryError(
                        f"{self!r}: the shared memory {self._path} is gone; the process that "
                        "created this source closed it or exited. Keep the source open in the "
                        "creating process while others read it."
                    ) from None
                magic, length, table_at = _FOOTER.unpack_from(mapping, len(mapping) - _FOOTER.size)
                if magic != _MAGIC or length != self._length:
                    raise SharedMemoryError(f"{self!r}: {self._path} is not this source's memory")
                self._offsets = np.frombuffer(mapping, "<i8", length + 1, table_at)
                self._map = mapping
            return self._map, self._offsets

    def __len__(self) -> int:
        return self._length

    def _read(self, index: int) -> Any:
        mapping, offsets = self._attach()
        start, end = offsets[index : index + 2].tolist()
        return decode_record(memoryview(mapping)[start:end])

    def _read_many(self, indices: Sequence[int]) -> list[Any]:
        mapping, offsets = self._attach()
        view = memoryview(mapping)
        starts = offsets[indices].tolist()
        ends = offsets[np.asarray(indices) + 1].tolist()
        return [decode_record(view[s:e]) for s, e in zip(starts, ends, strict=True)]

    def close(self) -> None:
        """Unmaps the memory; in the creating process also frees it for every process.

        Arrays already read stay valid (they keep their pages mapped).
        """
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._offsets = None
            mapping, self._map = self._map, None
        if mapping is not None:
            try:
                mapping.close()
            except BufferError:
                pass  # Views handed out keep the mapping alive until they are freed.
        if os.getpid() == self._owner_pid:
            self._finalizer()

    def unlink(self) -> None:
        """Frees the shared memory for every process now (Grain's `unlink`), from any of them.

        Its file is removed: no process can open it from here on, while mappings already
        made (and arrays read from them) stay readable until closed. Reading a record
        in a process that had not mapped it yet then raises `SharedMemoryError`.

        Example:
            >>> source = SharedMemorySource(["a", "b"])
            >>> source[1]
            'b'
            >>> source.unlink()
            >>> source[0]  # This process mapped it before: still readable.
            'a'
            >>> source.close()
        """
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            pass

    def __getstate__(self) -> dict[str, Any]:
        if self._closed:
            raise SourceClosedError(f"{self!r} was closed and cannot be pickled.")
        return {
            "path": self._path,
            "length": self._length,
            "nbytes": self._nbytes,
            "owner_pid": self._owner_pid,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._path = state["path"]
        self._length = state["length"]
        self._nbytes = state["nbytes"]
        self._owner_pid = state["owner_pid"]
        self._lock = threading.Lock()
        self._map = None
        self._offsets = None
        self._closed = False
        self._finalizer = weakref.finalize(self, _keep, self._path, self._owner_pid)

    def _params(self) -> dict[str, Any]:
        return {"name": self.name, "len": self._length, "nbytes": self._nbytes}
