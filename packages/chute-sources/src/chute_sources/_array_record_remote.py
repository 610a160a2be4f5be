"""ArrayRecord shards in buckets: counted by their footers, read from the shard cache.

The native ArrayRecord reader reads local files only, so a shard in a bucket is read
from a local copy in the per-machine `ShardCache`. Counting a shard's records needs
only its footer: the end of the object is fetched into a sparse local file of the
object's size (the rest is a hole), which the reader opens and counts (more of the end
is fetched if the footer is longer), so creating a source downloads no shard. Open
readers are bounded (`_MAX_OPEN`), so evicted shards do not keep disk space.
"""

from __future__ import annotations

import collections
import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chute_core import SourceFileError

from ._remote._cache import ShardCache
from ._remote._client import ObjectInfo, client_for
from ._remote._options import StorageOptions

__all__ = ["RemoteShards"]

_MAX_OPEN = 8
"""Remote shards kept open at once (their local copies' disk space stays in use)."""
_TAILS = (256 << 10, 2 << 20, 16 << 20)


class RemoteShards:
    """The remote files of an `ArrayRecordSource`: counting, readers, prefetch.

    Args:
        infos: the objects, by the source's file index.
        options: how to reach them, and the cache's folder and limit.
    """

    def __init__(self, infos: dict[int, ObjectInfo], options: StorageOptions) -> None:
        self.infos = infos
        self.options = options
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._open: collections.OrderedDict[int, Any] = collections.OrderedDict()
        self._users: collections.Counter[int] = collections.Counter()
        self._pending: dict[int, Any] = {}
        self._pending_bytes = 0
        self._pool: ThreadPoolExecutor | None = None
        self._cache: ShardCache | None = None

    def __chute_identity__(self) -> list[ObjectInfo]:
        """The objects (URL, size, version) by file number: what identifies the data."""
        return [self.infos[file] for file in sorted(self.infos)]

    def __getstate__(self) -> dict[str, Any]:
        return {"infos": self.infos, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    @property
    def cache(self) -> ShardCache:
        """This machine's shard cache (made on first use)."""
        if self._cache is None:
            self._cache = ShardCache(self.options.cache_folder, self.options.cache_bytes)
        return self._cache

    def count_records(self, info: ObjectInfo, open_reader: Callable[[str], Any]) -> int:
        """The number of records of shard `info`, from the end of the object only."""
        client = client_for(self.options)
        with tempfile.TemporaryDirectory(prefix="chute-footer-") as folder:
            path = os.path.join(folder, "shard.array_record")
            for tail in (*_TAILS, info.size):
                tail = min(tail, info.size)
                data = client.read(info, info.size - tail, info.size)
                with open(path, "wb") as file:
                    file.truncate(info.size)
                    file.seek(info.size - tail)
                    file.write(data)
                try:
                    reader = open_reader(path)
                except SourceFileError:
                    if tail == info.size:
                        raise SourceFileError(
                            f"{info.url} is not a readable ArrayRecord file."
                        ) from None
                    continue
                try:
                    return int(reader.num_records())
                finally:
                    reader.close()
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.contextmanager
    def reader(self, index: int, open_reader: Callable[[str], Any]) -> Iterator[Any]:
        """A reader of shard `index` (its local copy), held open during the block."""
        with self._lock:
            reader = self._open.get(index)
            self._users[index] += 1
            if reader is not None:
                self._open.move_to_end(index)
        try:
            if reader is None:
                self._await_prefetch(index)
                with self.cache.local(self.infos[index], client_for(self.options)) as path:
                    opened = open_reader(path)
                with self._lock:
                    reader = self._open.setdefault(index, opened)
                    self._open.move_to_end(index)
                if reader is not opened:
                    opened.close()
            yield reader
        finally:
            with self._lock:
                self._users[index] -= 1
                idle = self._close_idle()
            for extra in idle:
                extra.close()

    def _close_idle(self) -> list[Any]:
        """Readers beyond `_MAX_OPEN` that nobody uses, least recently used first."""
        closing: list[Any] = []
        for index in list(self._open):
            if len(self._open) - len(closing) <= _MAX_OPEN:
                break
            if self._users[index] == 0:
                closing.append(self._open.pop(index))
        return closing

    def prefetch(self, indices: Iterable[int]) -> None:
        """Starts downloading shards `indices` into the cache, within the prefetch budget."""
        budget = self.options.prefetch_bytes
        if budget <= 0:
            return
        with self._lock:
            for index in dict.fromkeys(indices):
                if index not in self.infos or index in self._open or index in self._pending:
                    continue
                info = self.infos[index]
                if self._pending and self._pending_bytes + info.size > budget:
                    break
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(2, thread_name_prefix="chute-shard-prefetch")
                self._pending[index] = self._pool.submit(self._fetch, index)
                self._pending_bytes += info.size

    def _fetch(self, index: int) -> None:
        try:
            with self.cache.local(self.infos[index], client_for(self.options)):
                pass
        finally:
            with self._lock:
                self._pending.pop(index, None)
                self._pending_bytes -= self.infos[index].size

    def _await_prefetch(self, index: int) -> None:
        with self._lock:
            future = self._pending.get(index)
        if future is not None:
            with contextlib.suppress(Exception):  # The read below raises it again.
                future.result()

    def close(self) -> None:
        """Closes the open readers and stops prefetching."""
        with self._lock:
            readers = list(self._open.values())
            self._open.clear()
            pool, self._pool = self._pool, None
        for reader in readers:
            reader.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
