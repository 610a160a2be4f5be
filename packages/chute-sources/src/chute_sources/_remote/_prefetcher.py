"""`RangePrefetcher`: byte ranges fetched ahead of the reads that need them, within a budget."""

from __future__ import annotations

import collections
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ._client import ObjectInfo, client_for
from ._options import StorageOptions

__all__ = ["RangePrefetcher"]

_THREADS = 8


class RangePrefetcher:
    """Fetches byte ranges in background threads; a read takes its range when it comes.

    At most `options.prefetch_bytes` are fetched ahead and not yet taken; a range
    asked for beyond that waits until earlier ones are taken (asking is a hint,
    never an obligation). Ranges never taken are dropped, oldest first, to make room.
    A failed fetch is not reported here: the read that needs the range fetches it
    itself and raises what it gets.

    Example:
        >>> prefetcher = RangePrefetcher(StorageOptions(prefetch_bytes=0))
        >>> prefetcher.want(ObjectInfo("s3://b/k", 10, None), 0, 10)
        False
    """

    def __init__(self, options: StorageOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._ranges: collections.OrderedDict[tuple[str, int, int], Future[Any]] = (
            collections.OrderedDict()
        )
        self._bytes = 0
        self._pool: ThreadPoolExecutor | None = None

    def want(self, info: ObjectInfo, start: int, end: int) -> bool:
        """Starts fetching `[start, end)` of `info` if the budget allows; True if under way."""
        size = end - start
        budget = self.options.prefetch_bytes
        key = (info.url, start, end)
        with self._lock:
            if key in self._ranges:
                return True
            if size > budget:
                return False
            while self._bytes + size > budget and self._ranges:
                oldest = next(iter(self._ranges))
                if not self._ranges[oldest].done():
                    return False  # Everything ahead is still wanted and under way.
                self._drop(oldest)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="chute-prefetch")
            client = client_for(self.options)
            self._ranges[key] = self._pool.submit(client.read, info, start, end)
            self._bytes += size
        return True

    def _drop(self, key: tuple[str, int, int]) -> None:
        future = self._ranges.pop(key)
        future.cancel()
        self._bytes -= key[2] - key[1]

    def take(self, info: ObjectInfo, start: int, end: int) -> Any | None:
        """The bytes of `[start, end)` if they were asked for (waits for them), else None."""
        key = (info.url, start, end)
        with self._lock:
            future = self._ranges.get(key)
            if future is None:
                return None
            self._drop(key)
        try:
            return future.result()
        except Exception:
            return None  # The caller reads the range itself and reports the failure.

    def close(self) -> None:
        """Drops every range and stops the threads."""
        with self._lock:
            for key in list(self._ranges):
                self._drop(key)
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
