"""`RangePrefetcher`: byte ranges fetched ahead of the reads that need them, and kept.

A bounded, per-process memory of byte ranges: ranges the pipeline will read soon
(plan-aware prefetch) are fetched in background threads, and ranges read are kept
while they fit, so that a row group read again (a shuffled pipeline decodes the same
row groups many times) costs no request.
"""

from __future__ import annotations

import collections
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from chute_core.internal import CACHE_HITS, CACHE_MISSES, COUNTERS

from ._client import ObjectInfo, client_for
from ._options import StorageOptions

__all__ = ["RangePrefetcher"]

_THREADS = 16
_Key = tuple[str, int, int]


class RangePrefetcher:
    """Fetches byte ranges in background threads and keeps them, within a byte budget.

    At most `options.prefetch_bytes` are held (fetched or under way). Asking for a
    range (`want`) is a hint: when the budget is spent by ranges still under way, it
    is not fetched. Ranges are dropped least recently used first to make room; a
    range under way is never dropped. A failed fetch is not reported here: the read
    that needs the range fetches it itself and raises what it gets.

    Example:
        >>> prefetcher = RangePrefetcher(StorageOptions(prefetch_bytes=0))
        >>> prefetcher.want(ObjectInfo("s3://b/k", 10, None), 0, 10)
        False
    """

    def __init__(self, options: StorageOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._ranges: collections.OrderedDict[_Key, Future[Any]] = collections.OrderedDict()
        self._bytes = 0
        self._pool: ThreadPoolExecutor | None = None

    def _make_room(self, size: int) -> bool:
        """Drops finished ranges, oldest use first, until `size` more bytes fit."""
        budget = self.options.prefetch_bytes
        if size > budget:
            return False
        for key in list(self._ranges):
            if self._bytes + size <= budget:
                break
            if self._ranges[key].done():
                del self._ranges[key]
                self._bytes -= key[2] - key[1]
        return self._bytes + size <= budget

    def want(self, info: ObjectInfo, start: int, end: int) -> bool:
        """Starts fetching `[start, end)` of `info` unless held; True if held or under way."""
        key = (info.url, start, end)
        with self._lock:
            if key in self._ranges:
                self._ranges.move_to_end(key)
                return True
            if not self._make_room(end - start):
                return False
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="chute-prefetch")
            client = client_for(self.options)
            self._ranges[key] = self._pool.submit(client.read, info, start, end)
            self._bytes += end - start
        return True

    def take(self, info: ObjectInfo, start: int, end: int) -> Any | None:
        """The bytes of `[start, end)` if held or under way (waits for them), else None.

        Counts a cache hit (label `cache="range"`) when it gives bytes, else a miss.
        """
        data = self._held(info, start, end)
        COUNTERS.add(CACHE_MISSES if data is None else CACHE_HITS, cache="range")
        return data

    def _held(self, info: ObjectInfo, start: int, end: int) -> Any | None:
        key = (info.url, start, end)
        with self._lock:
            future = self._ranges.get(key)
            if future is None:
                return None
            self._ranges.move_to_end(key)
        try:
            return future.result()
        except Exception:
            with self._lock:
                if self._ranges.get(key) is future:
                    del self._ranges[key]
                    self._bytes -= end - start
            return None  # The caller reads the range itself and reports the failure.

    def keep(self, info: ObjectInfo, start: int, end: int, data: Any) -> None:
        """Holds bytes read without a prefetch, if they fit."""
        key = (info.url, start, end)
        with self._lock:
            if key in self._ranges or not self._make_room(end - start):
                return
            done: Future[Any] = Future()
            done.set_result(data)
            self._ranges[key] = done
            self._bytes += end - start

    def close(self) -> None:
        """Drops every range and stops the threads."""
        with self._lock:
            for future in self._ranges.values():
                future.cancel()
            self._ranges.clear()
            self._bytes = 0
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
