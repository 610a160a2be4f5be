"""What a prefetching iterator holds and runs on right now: the figures live metrics read.

Read from another thread (a metrics endpoint) while the iterator runs, so everything
here only looks: no lock is taken and nothing is started. A figure read while the
iterator changes may be a moment old, never wrong by more than that.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._idle_workers import parked_count
from ._mp_batch import MultiprocessBatchIter
from ._mp_prefetch import MultiprocessPrefetchIter
from ._thread_prefetch import ThreadPrefetchIter

__all__ = ["Health", "health", "parked_workers"]


@dataclasses.dataclass(frozen=True)
class Health:
    """A prefetching iterator's buffer and workers, now.

    Attributes:
        buffered: elements (a thread prefetch) or chunks (workers) ready or on their way.
        capacity: how many of those it keeps at most.
        workers: worker processes asked for (0: a thread, or the consumer's process).
        alive: worker processes running now.
        starts: times it started a pool of workers (more than 1: it started them again,
            after a worker died or a restore, or for an autotuner's change).
        pids: the process ids of its running workers.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = ThreadPrefetchIter(SequentialIter(range(10)), buffer_size=4)
        >>> next(it)
        0
        >>> h = health(it)
        >>> h.capacity, h.workers, h.buffered <= 4
        (4, 0, True)
        >>> it.close()
    """

    buffered: int
    capacity: int
    workers: int = 0
    alive: int = 0
    starts: int = 0
    pids: tuple[int, ...] = ()


def health(iterator: Any) -> Health | None:
    """`iterator`'s `Health`, or None if it neither prefetches nor runs workers."""
    if isinstance(iterator, ThreadPrefetchIter):
        channel = iterator._channel
        buffered = 0 if channel is None else len(channel.items)
        return Health(buffered, iterator.buffer_size)
    if isinstance(iterator, MultiprocessBatchIter):
        iterator = iterator._chunks  # Batches the chunks of this one.
    if isinstance(iterator, MultiprocessPrefetchIter):
        options = iterator._options
        pool = iterator._resources.pool
        processes = [] if pool is None or pool.closed else list(pool.processes)
        pids = tuple(p.pid for p in processes if p.pid is not None and p.is_alive())
        return Health(
            buffered=sum(len(sent) for sent in iterator._in_flight),
            capacity=options.num_workers * options.per_worker_buffer_size,
            workers=options.num_workers,
            alive=len(pids),
            starts=iterator._pool_serial,
            pids=pids,
        )
    return None


def parked_workers() -> int:
    """Worker processes of this process's ended iterators, parked for the next one."""
    return parked_count()
