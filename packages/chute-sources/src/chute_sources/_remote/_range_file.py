"""`RangeFile`: a read-only file over an object, reading byte ranges on demand."""

from __future__ import annotations

import io
import threading
from typing import Any

from ._client import ObjectClient, ObjectInfo

__all__ = ["RangeFile"]

_MIN_FETCH = 256 << 10  # A read outside the known pieces fetches at least this much.


class RangeFile(io.RawIOBase):
    """A seekable binary file whose bytes come from ranged reads of one object.

    Pieces of the object already in memory (a footer, a prefetched row group) are
    given with `add`; other reads fetch what they need (at least `_MIN_FETCH` bytes)
    and keep it, so libraries that read in small steps (pyarrow's footer, numpy's
    header) make few requests.

    Example:
        >>> info = ObjectInfo("s3://bucket/x.bin", size=6, version=None)
        >>> file = RangeFile(info, client=None)
        >>> file.add(0, b"abcdef")
        >>> _ = file.seek(2); file.read(3)
        b'cde'
    """

    def __init__(self, info: ObjectInfo, client: ObjectClient | None) -> None:
        super().__init__()
        self.info = info
        self._client = client
        self._pieces: list[tuple[int, Any]] = []
        self._position = 0
        self._lock = threading.Lock()

    def add(self, start: int, data: Any) -> None:
        """Keeps bytes `data` of the object, starting at offset `start`."""
        with self._lock:
            self._pieces.append((start, memoryview(data).cast("B")))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.info.size}
        self._position = max(0, base[whence] + offset)
        return self._position

    def _piece(self, start: int, end: int) -> Any | None:
        with self._lock:
            for begin, data in self._pieces:
                if begin <= start and end <= begin + len(data):
                    return data[start - begin : end - begin]
        return None

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        start = self._position
        end = min(self.info.size, start + len(view))
        if end <= start:
            return 0
        data = self._piece(start, end)
        if data is None:
            if self._client is None:
                raise OSError(f"{self.info.url}: bytes [{start}, {end}) were not fetched.")
            fetch_end = min(self.info.size, max(end, start + _MIN_FETCH))
            fetched = self._client.read(self.info, start, fetch_end)
            self.add(start, fetched)
            data = fetched[: end - start]
        view[: end - start] = data
        self._position = end
        return end - start

    def size(self) -> int:
        """The object's size in bytes."""
        return self.info.size
