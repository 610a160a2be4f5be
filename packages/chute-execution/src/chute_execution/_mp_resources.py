"""What a `MultiprocessPrefetchIter` owns outside itself, and its stand-in exception."""

from __future__ import annotations

import threading

from chute_sources import ChuteError
from chute_sources.internal import reclaim_orphaned_segments

from ._transport.reader import SlabReader
from ._worker_pool import WorkerPool

__all__ = ["Resources", "WorkerError"]


class WorkerError(ChuteError, RuntimeError):
    """An exception in a worker that could not be rebuilt in the consumer (its text is).

    Exceptions that pickle are re-raised with their own type; this one stands in for
    the others, with the original type name and message, and the worker's traceback in
    a note.

    Example:
        >>> str(WorkerError("mymodule.OddError: it broke"))
        'mymodule.OddError: it broke'
    """


class Resources:
    """The worker pool and the slab reader, released together (also at GC)."""

    def __init__(self) -> None:
        self.pool: WorkerPool | None = None
        self.reader: SlabReader | None = None
        self.lock = threading.Lock()

    def release(self) -> None:
        """Stops the workers and frees the slabs; safe from any thread, idempotent."""
        with self.lock:
            pool, self.pool = self.pool, None
            reader, self.reader = self.reader, None
        if pool is not None:
            pool.close()
        if reader is not None:
            # Workers unlink their slabs when they exit; a killed one cannot: unlink what
            # we saw of it, and reclaim what it made but never sent (it is reaped now).
            reader.unlink_all_seen()
            reader.close()
            reclaim_orphaned_segments()
