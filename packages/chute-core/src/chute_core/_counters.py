"""Running totals of what a process did below the pipeline: requests, bytes, cache hits.

The layers count events that no stage's clock sees (a request to a bucket, a retry, a
hit in a cache, bytes put in shared memory or onto a device) in one process-wide table,
`COUNTERS`. Counting costs a lock and an addition, so it is always on; nothing reads
the table unless metrics are asked for (`chute.metrics`). A worker process has its own
table: it sends what it counted since its last chunk with the chunk's result
(`Counters.since`), and the consumer adds it to its iterator's tally.

A counter is named by a metric name (without `chute_` and `_total`) and its labels, a
sorted tuple of `(label, value)` pairs, so the totals travel between processes as a
plain dict.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

__all__ = [
    "CACHE_HITS",
    "CACHE_MISSES",
    "COUNTERS",
    "DEVICE_BYTES",
    "SHM_BYTES",
    "STORAGE_BYTES",
    "STORAGE_REQUESTS",
    "STORAGE_RETRIES",
    "CounterKey",
    "Counters",
]

CounterKey = tuple[str, tuple[tuple[str, str], ...]]
"""A counter's name and its labels, sorted by label."""

STORAGE_REQUESTS = "storage_requests"
"""Requests made to object storage, each attempt and listing page (label `op`: get, head,
list, put, delete)."""
STORAGE_BYTES = "storage_read_bytes"
"""Bytes of object bodies read from object storage."""
STORAGE_RETRIES = "storage_retries"
"""Requests to object storage tried again after a transient failure."""
CACHE_HITS = "cache_hits"
"""Lookups a cache answered (label `cache`: which one)."""
CACHE_MISSES = "cache_misses"
"""Lookups a cache could not answer (label `cache`)."""
SHM_BYTES = "shm_written_bytes"
"""Bytes written into shared memory to carry elements between processes (counted by the
consumer as it reads each message)."""
DEVICE_BYTES = "device_put_bytes"
"""Bytes of arrays prefetched onto accelerators."""


class Counters:
    """A table of running totals, safe to add to from any thread.

    Example:
        >>> counters = Counters()
        >>> counters.add(STORAGE_REQUESTS, op="get")
        >>> counters.add(STORAGE_BYTES, 512)
        >>> before = counters.snapshot()
        >>> counters.add(STORAGE_BYTES, 100)
        >>> counters.since(before)
        {('storage_read_bytes', ()): 100.0}
        >>> counters.snapshot()[(STORAGE_REQUESTS, (("op", "get"),))]
        1.0
    """

    def __init__(self) -> None:
        self._totals: dict[CounterKey, float] = {}
        self._taken: dict[CounterKey, float] = {}
        self._lock = threading.Lock()

    def add(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Adds `amount` (>= 0: these only grow) to counter `name` with `labels`."""
        # One label (the common case) needs no sorting; the lock makes the sum exact.
        key = (name, tuple(labels.items()) if len(labels) < 2 else tuple(sorted(labels.items())))
        with self._lock:
            totals = self._totals
            totals[key] = totals.get(key, 0.0) + amount

    def snapshot(self) -> dict[CounterKey, float]:
        """Every counter's total now (a copy)."""
        with self._lock:
            return dict(self._totals)

    def since(self, before: Mapping[CounterKey, float]) -> dict[CounterKey, float]:
        """What grew since `before` (a snapshot): the counters that changed, by how much."""
        return _grown(self.snapshot(), before)

    def take(self) -> dict[CounterKey, float]:
        """What grew since the last `take` (or `mark`): what a worker sends with a result.

        Example:
            >>> counters = Counters()
            >>> counters.add(SHM_BYTES, 64)
            >>> counters.take(), counters.take()
            ({('shm_written_bytes', ()): 64.0}, {})
        """
        with self._lock:
            now, before = dict(self._totals), self._taken
            self._taken = now
        return _grown(now, before)

    def mark(self) -> None:
        """Makes the next `take` start from now (a forked worker's inherited totals)."""
        with self._lock:
            self._taken = dict(self._totals)

    def merge(self, other: Mapping[CounterKey, float]) -> None:
        """Adds another table's totals (e.g. what a worker process sent) to this one."""
        with self._lock:
            for key, amount in other.items():
                self._totals[key] = self._totals.get(key, 0.0) + amount


def _grown(
    now: Mapping[CounterKey, float], before: Mapping[CounterKey, float]
) -> dict[CounterKey, float]:
    """The counters of `now` that differ from `before`, by how much they grew."""
    return {
        key: total - before.get(key, 0.0) for key, total in now.items() if total != before.get(key)
    }


COUNTERS = Counters()
"""This process's totals (a worker's own, in a worker process)."""
