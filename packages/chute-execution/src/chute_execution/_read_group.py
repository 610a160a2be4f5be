"""`ReadGroup`: one pool of read threads and one read-ahead budget for many readers.

A mixture of 64 streams, each read with `ReadOptions()`, would otherwise start 64 pools
of 16 threads and hold 64 read-ahead buffers of 500 elements. Inside `sharing_reads()`
(which `IterDataset.mix` and `select_from` use while they build their components), every
`PrefetchReadIter` built joins the block's group instead:

- **Threads.** The group starts at most as many threads as its largest member asks for
  (`ReadOptions.num_threads`), whatever the number of members, and each member queues
  its reads on them through a `ReadLane`. The threads stop when the last lane stops.
- **Memory.** The members share the largest member's read-ahead: each reads
  `max(MIN_SHARE, prefetch_buffer_size // members)` positions ahead (and that share of
  `prefetch_buffer_bytes`), so the read-ahead of the mixture is about that of one
  stream, not of one stream per component.

Sharing changes only how far ahead and on which threads reads run: each reader still
returns its dataset in order, with the same states.

Example:
    >>> with sharing_reads() as group:
    ...     members = [group.join(4) for _ in range(64)]
    >>> group.members, group.max_threads
    (64, 4)
    >>> current_group() is None  # Outside the block, readers get pools of their own.
    True
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ._thread_pool import Slot, start_worker

__all__ = ["MIN_SHARE", "ReadGroup", "ReadLane", "current_group", "sharing_reads"]

R = TypeVar("R")

MIN_SHARE = 8
"""The fewest positions a member of a group reads ahead (one chunk's worth)."""

_GROUP: contextvars.ContextVar[ReadGroup | None] = contextvars.ContextVar(
    "chute_read_group", default=None
)


def current_group() -> ReadGroup | None:
    """The group readers built now join (inside `sharing_reads()`), else None."""
    return _GROUP.get()


@contextlib.contextmanager
def sharing_reads() -> Iterator[ReadGroup]:
    """Readers built inside the block share one `ReadGroup` (an outer block's, if nested).

    Example:
        >>> from chute_execution import PrefetchReadIter, ReadOptions, sharing_reads
        >>> with sharing_reads() as group:
        ...     readers = [PrefetchReadIter(range(100), ReadOptions(num_threads=2))
        ...                for _ in range(3)]
        >>> group.members, [next(r) for r in readers]
        (3, [0, 0, 0])
        >>> for reader in readers:
        ...     reader.close()
    """
    group = _GROUP.get()
    if group is not None:
        yield group
        return
    token = _GROUP.set(ReadGroup())
    try:
        yield _GROUP.get()  # type: ignore[misc]
    finally:
        _GROUP.reset(token)


class ReadGroup:
    """Threads and a read-ahead budget shared by the readers that `join` it.

    Thread-safe: the readers of a group may be consumed from different threads.

    Example:
        >>> group = ReadGroup().join(4).join(2)  # Two members, of 4 and 2 threads.
        >>> group.max_threads, group.share(500), group.share(4)
        (4, 250, 8)
        >>> lane = group.lane()
        >>> lane.submit(sum, [1, 2, 3]).wait()
        6
        >>> lane.shutdown(5)
        True
    """

    def __init__(self) -> None:
        # Reentrant: a reader collected while this thread holds it stops its lane here.
        self._lock = threading.RLock()
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lanes = 0  # Lanes started and not yet stopped.
        self.members = 0
        self.max_threads = 0

    def join(self, num_threads: int) -> ReadGroup:
        """Counts one more member that reads with `num_threads` threads; returns self."""
        with self._lock:
            self.members += 1
            self.max_threads = max(self.max_threads, num_threads)
        return self

    def share(self, positions: int) -> int:
        """A member's part of a read-ahead of `positions` (at least `MIN_SHARE`)."""
        return max(MIN_SHARE, positions // max(1, self.members))

    def lane(self) -> ReadLane:
        """A new lane: a member's reads on the group's threads (see `ReadLane`)."""
        with self._lock:
            self._lanes += 1
        return ReadLane(self)

    def _submit(self, task: tuple[Any, ...]) -> None:
        self._tasks.put(task)
        if len(self._threads) < self.max_threads:
            with self._lock:
                if len(self._threads) < self.max_threads:
                    name = f"chute-read-shared-{len(self._threads)}"
                    self._threads.append(start_worker(self._tasks, name, self.stop_soon))

    def _lane_stopped(self) -> list[threading.Thread]:
        """One lane fewer; the threads told to stop if it was the last (returned)."""
        with self._lock:
            self._lanes -= 1
            if self._lanes > 0:
                return []
            threads, self._threads = self._threads, []
        for _ in threads:
            self._tasks.put(None)
        return threads

    def stop_soon(self) -> None:
        """Asks the threads to stop after the tasks queued before (at interpreter exit)."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._tasks.put(None)

    @property
    def num_threads(self) -> int:
        """Threads running for the group now."""
        return len(self._threads)


class ReadLane:
    """One member's reads on its group's threads, with `ReadPool`'s interface.

    `discard()` drops this lane's queued reads only, and `shutdown()` waits for this
    lane's reads in flight only; the group's threads stop with its last lane. A lane
    checks its own generation when a thread takes its task (the group's threads run
    every lane's tasks), under the lock that `discard` takes: after `discard()`
    returns, no dropped read starts.
    """

    def __init__(self, group: ReadGroup) -> None:
        self._group = group
        self._generation = 0
        self._executing = 0  # Reads running now.
        self._lock = threading.Condition()
        self._stopped = False

    def submit(self, fn: Callable[..., R], *args: Any) -> Slot[R]:
        """Queues `fn(*args)` on the group's threads; returns its slot."""
        slot: Slot[R] = Slot()
        task = (_LIVE, 0, slot, self._run, (self._generation, fn, args))
        self._group._submit(task)
        return slot

    def _run(self, generation: int, fn: Callable[..., R], args: tuple[Any, ...]) -> R | None:
        with self._lock:
            if generation != self._generation:
                return None  # Dropped: nobody waits on its slot.
            self._executing += 1
        try:
            return fn(*args)
        finally:
            with self._lock:
                self._executing -= 1
                self._lock.notify_all()

    def discard(self) -> None:
        """Drops this lane's queued tasks (tasks already running finish, unobserved)."""
        with self._lock:
            self._generation += 1

    @property
    def num_threads(self) -> int:
        """The group's threads (shared with the other lanes)."""
        return self._group.num_threads

    def shutdown(self, timeout: float | None) -> bool:
        """Drops queued tasks; waits up to `timeout` seconds for this lane's running ones.

        Returns:
            Whether none of this lane's tasks still runs.
        """
        self.discard()
        if not self._stopped:
            self._stopped = True
            self._group._lane_stopped()
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        with self._lock:
            while self._executing > 0:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._lock.wait(left)
        return True


_LIVE = [0]
"""The generation list of lane tasks: the group's threads run them all (lanes check)."""
