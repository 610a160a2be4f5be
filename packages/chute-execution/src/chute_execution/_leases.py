"""`LeaseBook`: which worker slabs the consumer's batches hold as views, and for how long.

`MultiprocessPrefetchIter` hands out large arrays as views into a worker's slab
(`SlabReader.read_leased`) instead of copying them: no copy, and no fresh pages to
fault in per batch. The slab is the batch's until the last of its arrays is garbage;
the worker grows its pool meanwhile (`SlabWriter.lease`). The book bounds the shared
memory held this way (past the budget, results are copied out as before, so a user
who keeps thousands of batches costs private memory, not `/dev/shm`), and queues the
ends of leases, which run in whatever thread drops a batch, for the consumer's thread
to send to the workers.
"""

from __future__ import annotations

import collections
import os

from chute_core.internal import shm_dir

from ._transport.codec import SlabMessage

__all__ = ["LEASE_MIN_BYTES", "LeaseBook", "default_budget"]

LEASE_MIN_BYTES = 2**20
"""Results with fewer bytes of large arrays are copied out: a small copy is cheap, and
it frees the slab at once."""

_MAX_BUDGET = 2**30


def default_budget() -> int:
    """Bytes of slabs the consumer may hold as views: 1 GiB, or a quarter of `/dev/shm`."""
    try:
        stats = os.statvfs(shm_dir())
    except OSError:
        return 0
    return min(_MAX_BUDGET, stats.f_blocks * stats.f_frsize // 4)


class _End:
    """Called once when a lease ends (by `weakref.finalize`, or by hand on failure)."""

    __slots__ = ("book", "done", "entry")

    def __init__(self, book: LeaseBook, entry: tuple[int, int, int, int]) -> None:
        self.book, self.entry, self.done = book, entry, False

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            self.book.ended.append(self.entry)  # deque.append: atomic, never blocks.


class LeaseBook:
    """Leases of one consumer: their bytes, and the ends not yet told to the workers.

    Args:
        budget: bytes of slabs that may be leased at once (0: never lease).

    Example:
        >>> book = LeaseBook(budget=2**30)
        >>> end = book.take(pool=1, worker=0, token=5, nbytes=2**24)
        >>> book.held
        16777216
        >>> end()
        >>> book.drain()
        [(1, 0, 5)]
        >>> book.held
        0
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.held = 0
        self.ended: collections.deque[tuple[int, int, int, int]] = collections.deque()

    def worth_leasing(self, message: SlabMessage) -> bool:
        """Whether to hand out `message`'s arrays as views (it has large ones, and room)."""
        if message.token is None:
            return False
        large = sum(size for offset, size in message.spans if offset + size > message.packed)
        return large >= LEASE_MIN_BYTES and self.held + message.slab_size <= self.budget

    def take(self, pool: int, worker: int, token: int, nbytes: int) -> _End:
        """Records a lease; call the result (once is enough) when it ends."""
        self.held += nbytes
        return _End(self, (pool, worker, token, nbytes))

    def drain(self) -> list[tuple[int, int, int]]:
        """The `(pool, worker, token)` of leases that ended since the last call."""
        out = []
        while self.ended:
            pool, worker, token, nbytes = self.ended.popleft()
            self.held -= nbytes
            out.append((pool, worker, token))
        return out
