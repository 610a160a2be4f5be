"""A compressed `.npz` member: its header read on opening, its rows decompressed on demand.

`np.savez_compressed` deflates each array; such a member cannot be memory-mapped.
Opening it streams only the `.npy` header at its start (a few hundred bytes), and
checks what the header says (shape, dtype) against the size the zip directory declares,
so `len()` and the schema cost nothing and an entry that lies is refused before any
data is decompressed. Rows are decompressed when first read, into one buffer of the
array's size that is filled from the start: a read of the first rows decompresses only
those (and as many again, so that reading on costs at most twice the work), a read
further in decompresses up to its last row. A Fortran-order array keeps each row spread
over the whole member, so its first read decompresses it all.
"""

from __future__ import annotations

import threading
import zipfile
import zlib
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from chute_core import SourceFileError

from ._npy_header import FIX, NpyHeader, check_header, read_header

__all__ = ["CompressedMember"]

_CHUNK = 4 * 2**20
"""Bytes decompressed per call."""
_DEFLATE_MAX_RATIO = 1032
"""Deflate gives at most this many bytes per compressed byte (zlib's documented bound)."""
_ERRORS = (
    ValueError,
    EOFError,
    OSError,
    zipfile.BadZipFile,
    zlib.error,
    RuntimeError,
    NotImplementedError,
)
"""What reading a zip entry raises: RuntimeError for encryption, NotImplementedError for
an unknown compression method, BadZipFile for a wrong CRC at its end."""


class CompressedMember:
    """The array of one compressed `.npz` entry, indexable like one (rows on demand).

    Rows read are views of one read-only buffer, which lives as long as they do.

    Example:
        >>> import os, tempfile, zipfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.npz")
        >>> np.savez_compressed(path, x=np.arange(12).reshape(6, 2))
        >>> with zipfile.ZipFile(path) as archive:
        ...     member = CompressedMember.open(path, archive, archive.getinfo("x.npy"), "x")
        >>> len(member), member.shape, member.rows_decompressed
        (6, (6, 2), 0)
        >>> member[1], member.rows_decompressed
        (array([2, 3]), 2)
    """

    def __init__(self, path: str, info: zipfile.ZipInfo, header: NpyHeader, where: str) -> None:
        self._path = path
        self._info = info
        self._header = header
        self._where = where
        self._lock = threading.Lock()
        self._bytes: npt.NDArray[np.uint8] | None = None
        self._array: npt.NDArray[Any] | None = None
        self._ready = 0  # Rows decompressed, from the first.

    @classmethod
    def open(
        cls, path: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str
    ) -> CompressedMember:
        """Reads and checks the header of `info` in the open `archive` at `path`.

        Raises:
            SourceFileError: the header is unreadable, describes an object or 0-d array,
                or does not match the entry's declared size.
        """
        try:
            with archive.open(info) as stream:
                header = read_header(stream, where)
        except SourceFileError:
            raise
        except _ERRORS as error:
            raise SourceFileError(
                f"NumpySource: {where}: cannot read the entry: {error}"
            ) from error
        check_header(header, where, info.file_size - header.size)
        declared = header.size + header.nbytes
        if info.file_size != declared:
            raise SourceFileError(
                f"NumpySource: {where}: the zip entry declares {info.file_size:,} bytes, but its "
                f".npy header (shape {header.shape}, dtype {header.dtype}) makes {declared:,}; "
                f"the archive is corrupt or was altered; {FIX}."
            )
        if (
            info.compress_type == zipfile.ZIP_DEFLATED
            and info.file_size > info.compress_size * _DEFLATE_MAX_RATIO + 2**16
        ):
            raise SourceFileError(
                f"NumpySource: {where}: the zip entry declares {info.file_size:,} bytes from "
                f"{info.compress_size:,} compressed bytes, more than deflate can give (at most "
                f"{_DEFLATE_MAX_RATIO}:1); the archive is corrupt or was altered; {FIX}."
            )
        return cls(path, info, header, where)

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return self._header.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The array's dtype."""
        return self._header.dtype

    @property
    def ndim(self) -> int:
        """The array's number of axes."""
        return len(self._header.shape)

    @property
    def rows_decompressed(self) -> int:
        """How many rows, from the first, are decompressed so far."""
        return self._ready

    def __len__(self) -> int:
        return self._header.shape[0]

    def __getitem__(self, key: Any) -> Any:
        """Row `key` (an int), or rows `key` (an array of non-negative ints), as NumPy's."""
        if isinstance(key, np.ndarray):
            return self._rows(int(key.max()) + 1 if key.size else 0)[key]
        return self._rows(int(key) + 1)[key]

    def _rows(self, needed: int) -> npt.NDArray[Any]:
        """The array, its first `needed` rows (at least) decompressed."""
        if needed > self._ready or self._array is None:
            with self._lock:
                if self._array is None:
                    self._allocate()
                if needed > self._ready:
                    self._fill(self._target(needed))
        assert self._array is not None
        return self._array

    def _allocate(self) -> None:
        header = self._header
        # Untouched pages of the buffer take no memory: only what is filled does.
        try:
            self._bytes = np.empty(header.nbytes, np.uint8)
        except MemoryError as error:
            raise SourceFileError(
                f"NumpySource: {self._where}: its {header.nbytes:,} bytes of data (shape "
                f"{header.shape}, dtype {header.dtype}) do not fit in memory; save the array "
                "with np.save and read the .npy file, which is memory-mapped."
            ) from error
        array: npt.NDArray[Any] = np.ndarray(
            header.shape,
            header.dtype,
            buffer=self._bytes,
            order="F" if header.fortran_order else "C",
        )
        array.flags.writeable = False
        self._array = array

    def _target(self, needed: int) -> int:
        total = len(self)
        if self._header.fortran_order:
            return total  # Each row is spread over the whole member.
        return min(total, max(needed, 2 * self._ready))

    def _fill(self, target: int) -> None:
        """Decompresses rows `[self._ready, target)` into the buffer."""
        assert self._bytes is not None
        row_bytes = self._header.nbytes // max(1, len(self))
        start, stop = self._ready * row_bytes, target * row_bytes
        try:
            with zipfile.ZipFile(self._path) as archive:
                info = archive.getinfo(self._info.filename)
                if (info.file_size, info.CRC) != (self._info.file_size, self._info.CRC):
                    raise SourceFileError(
                        f"NumpySource: {self._where} changed since the source was opened "
                        f"({self._info.file_size:,} -> {info.file_size:,} bytes); create a new "
                        "source from the current file."
                    )
                with archive.open(info) as stream:
                    _skip(stream, self._header.size + start, self._where)
                    _read_into(stream, self._bytes.data[start:stop], self._where)
        except SourceFileError:
            raise
        except _ERRORS as error:
            raise SourceFileError(
                f"NumpySource: {self._where}: cannot read the entry: {error}"
            ) from error
        self._ready = target

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a CompressedMember is not pickled: NumpySource opens its file again")


def _skip(stream: IO[bytes], count: int, where: str) -> None:
    while count:
        chunk = stream.read(min(count, _CHUNK))
        if not chunk:
            raise SourceFileError(f"NumpySource: {where}: the entry ends early; {FIX}.")
        count -= len(chunk)


def _read_into(stream: IO[bytes], out: memoryview, where: str) -> None:
    done = 0
    while done < len(out):
        count = stream.readinto(out[done : done + _CHUNK])  # type: ignore[attr-defined]
        if not count:
            raise SourceFileError(
                f"NumpySource: {where}: the entry ends after {done:,} of the {len(out):,} "
                f"bytes of data its header promises; {FIX}."
            )
        done += count
