"""`PrefetchReadIter`: a random-access dataset read in order by a pool of threads."""

from __future__ import annotations

import collections
import time
import warnings
import weakref
from typing import Any, TypeVar

from chute_core import DROPPED, IteratorState, RandomAccessDataSource
from chute_core.internal import active_ledger, check_count, check_dataset
from chute_samplers import IterNode
from chute_samplers.internal import (
    Frontier,
    SkipConsumed,
    Span,
    read_reader_state,
    read_span,
    reader_name,
    reader_state,
)

from ._read_group import ReadGroup, ReadLane, current_group
from ._read_options import ReadAheadWarning, ReadOptions, element_nbytes
from ._thread_pool import ReadPool, Slot

__all__ = ["PrefetchReadIter", "default_chunk_size"]

T = TypeVar("T")

MAX_CHUNK_SIZE = 256
"""The largest default chunk: per-chunk overhead is already negligible there."""

JOIN_TIMEOUT = 10.0
"""Seconds `close()` waits for reads in flight before leaving them to finish alone."""

MEASURE_CHUNK = 4
"""Elements of the first reads (one per thread in flight) that measure an element's bytes."""

TARGET_SECONDS = 0.01
"""How long an automatic chunk should take to read: ~100x a hand-over between threads."""

SPLIT = 4
"""An automatic chunk is at most 1/SPLIT of each thread's share of the dataset."""


def default_chunk_size(options: ReadOptions) -> int:
    """Positions per read: one chunk per thread fills the read-ahead buffer.

    Every thread has a chunk in flight while the consumer waits for the oldest, and
    chunks are as large as the buffer allows, because each one costs a hand-over between
    threads (~50-100 us with the GIL): with 8 threads and a 50 us read, one chunk per
    thread measured ~10% faster than two (the workload of `bench_execution_threads`). At
    most `MAX_CHUNK_SIZE`; `MAX_CHUNK_SIZE` when reads run in the calling thread.

    Example:
        >>> default_chunk_size(ReadOptions(16, 500)), default_chunk_size(ReadOptions(0, 500))
        (31, 256)
    """
    if not options.threaded:
        return MAX_CHUNK_SIZE
    return max(1, min(MAX_CHUNK_SIZE, options.prefetch_buffer_size // options.num_threads))


class PrefetchReadIter(IterNode[T]):
    """Yields `dataset[0], dataset[1], ...` read by `num_threads` threads, in order.

    The same stream and the same state (`{"position": next position}`) as
    `chute_samplers.SequentialIter`, so states move freely between the two and between
    thread counts. Positions holding `chute_sources.DROPPED` are skipped.

    Reads are chunks of consecutive positions (one batched call each), queued on a
    thread pool so that at most about `prefetch_buffer_size` positions (plus one
    chunk) are read ahead of the consumer; the consumer takes chunks in order, so the
    work per element is constant. With `num_threads=0` or `prefetch_buffer_size=0`
    every read runs in the calling thread.

    Chunk sizes (unless `chunk_size` is given) adapt to the work: the first chunks
    are small and double while reads are quick, a chunk aims at `TARGET_SECONDS` of
    reading at the measured cost of an element, and a small dataset is cut into at
    least `SPLIT` chunks per thread. So ten elements that take 0.1 s each are read by
    two threads in about 0.5 s, while cheap elements are read in large chunks. The
    chunks never change the stream or the state, only how the reading is shared out.

    Bytes: the first reads (up to `MEASURE_CHUNK` positions each, one per thread in
    flight) measure the bytes of an element; if `prefetch_buffer_size` elements would hold more than
    `prefetch_buffer_bytes`, fewer are read ahead (and chunks shrink to fit, unless
    `chunk_size` was given), with a `ReadAheadWarning`.

    The `origin` of an element (see `chute_samplers.IterNode`) is `(position,)`, as for
    `SequentialIter`, so a `RandomMapIter` above draws the same.

    Errors: an exception raised while reading position `p` is raised by the `next()`
    that would have returned `p`, with its type, traceback and a note naming the
    position; `get_state()` is then `{"position": p}`, and the next `next()` reads `p`
    again. A failed chunk is re-read one position at a time to find `p`. Under an
    error budget (an active `chute_sources.ErrorLedger` when the iterator is built),
    `p` is skipped instead and charged to the budget when the consumer reaches it.

    Threads: the pool starts on the first `next()` and stops at the end of the dataset,
    at an exception, in `close()` and when the iterator is garbage collected. A later
    `next()` starts it again. `set_state` drops what was read ahead.

    Args:
        dataset: a node, a source or any sequence (read from several threads at once).
        read_options: threads and read-ahead buffer.
        chunk_size: positions per read; by default `prefetch_buffer_size //
            num_threads` (one chunk per thread fills the buffer), between 1 and 256.

    Example:
        >>> from chute_samplers import ShuffleMap
        >>> it = PrefetchReadIter(ShuffleMap(range(8), seed=0), ReadOptions(num_threads=2))
        >>> first = [next(it), next(it)]
        >>> state = it.get_state()
        >>> state
        {'position': 2}
        >>> rest = list(it)
        >>> it.set_state(state)
        >>> list(it) == rest, sorted(first + rest) == list(range(8))
        (True, True)
    """

    def __init__(
        self,
        dataset: RandomAccessDataSource[T],
        read_options: ReadOptions = ReadOptions(),  # noqa: B008  (frozen, so shared is fine)
        chunk_size: int | None = None,
    ) -> None:
        check_dataset(dataset, "PrefetchReadIter", "dataset")
        if not isinstance(read_options, ReadOptions):
            raise TypeError(
                "PrefetchReadIter: read_options must be a ReadOptions, got "
                f"{type(read_options).__name__} {read_options!r}."
            )
        self._dataset = dataset
        self._reading: RandomAccessDataSource[T] = dataset  # Skips a frontier's positions.
        self._frontier: Frontier | None = None
        self._length = len(dataset)
        self._options = read_options
        self._auto_chunk = chunk_size is None
        if chunk_size is None:
            chunk_size = default_chunk_size(read_options)
            fewest = getattr(dataset, "min_chunk_size", 1)  # A mixture's (see `MixMap`).
            if isinstance(fewest, int):
                chunk_size = max(chunk_size, min(fewest, MAX_CHUNK_SIZE))
            if read_options.threaded:  # Every thread gets a share of a small dataset.
                share = -(-self._length // (read_options.num_threads * SPLIT))
                chunk_size = max(1, min(chunk_size, share))
        self._chunk_size = check_count(chunk_size, "chunk_size", "PrefetchReadIter", minimum=1)
        self._ramp = 1  # Automatic chunks start at 1 position and double...
        self._limit = self._chunk_size  # ...up to what took at most TARGET_SECONDS.
        self._measured = read_options.prefetch_buffer_bytes is None
        self._measure_reads = 0
        # Positions in flight ahead of the consumer's chunk, at most.
        self._window = max(read_options.prefetch_buffer_size, self._chunk_size)
        self._chunk: Span[T] = Span(0, [])
        self._offset = 0  # Into self._chunk.elements: the next one to look at.
        self._pending: collections.deque[Slot[tuple[Span[T], float]]] = collections.deque()
        self._next_read = 0  # First position not yet queued.
        self._pool: ReadPool | ReadLane | None = None
        group = current_group()
        threads = read_options.num_threads if read_options.threaded else 0
        self._group: ReadGroup | None = None if group is None else group.join(threads)
        self._shared = False  # Whether the window is already the group member's share.
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._ledger = active_ledger()
        self._stage = 0 if self._ledger is None else self._ledger.register()

    @property
    def dataset(self) -> RandomAccessDataSource[T]:
        """The random-access dataset this reads in order."""
        return self._dataset

    @property
    def read_options(self) -> ReadOptions:
        """The threads and buffer this iterator reads with."""
        return self._options

    @property
    def chunk_size(self) -> int:
        """Positions per read."""
        return self._chunk_size

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(position,)` of the element last returned; None before one (or after a move)."""
        offset = self._offset
        return None if offset == 0 else (self._chunk.start + offset - 1,)

    def __next__(self) -> T:
        while True:
            offset = self._offset
            chunk = self._chunk
            elements = chunk.elements
            if offset < len(elements):
                element = elements[offset]
                if element is DROPPED and chunk.failures is not None:
                    assert self._ledger is not None
                    chunk.charge(offset, self._ledger, self._stage, reader_name(self._dataset))
                self._offset = offset + 1
                if element is not DROPPED:
                    return element
            else:
                self._advance()

    def _advance(self) -> None:
        """Moves to the next chunk; raises at the end or at the current chunk's error."""
        chunk = self._chunk
        position = chunk.start + len(chunk.elements)
        if chunk.error is not None:
            error = chunk.error
            self._restart(position)
            self._stop_pool(JOIN_TIMEOUT)
            raise error
        if position >= self._length:
            self._stop_pool(JOIN_TIMEOUT)
            raise StopIteration
        if self._options.threaded:
            self._fill(position)
            slot = self._pending[0]
            try:
                chunk, seconds = slot.wait()
            except BaseException:
                self._restart(position)
                self._stop_pool(JOIN_TIMEOUT)
                raise
            self._pending.popleft()
            if chunk.elements:
                self._fit(len(chunk.elements), seconds)
            if not self._measured:
                self._measure(chunk)
            self._fill(position)
        else:
            self._take_share()
            stop = min(position + self._chunk_size, self._length)
            chunk = read_span(self._reading, position, stop, self._ledger, self._stage)
        self._chunk, self._offset = chunk, 0

    def _fill(self, position: int) -> None:
        """Queues chunks until `window` positions from `position` on are in flight."""
        pool = self._pool
        if pool is None and self._group is not None:
            self._take_share()
            pool = self._pool = self._group.lane()
            self._finalizer = weakref.finalize(self, pool.shutdown, 0)
        elif pool is None:
            # Threads beyond the chunks that fit in the window would stay idle.
            threads = min(self._options.num_threads, self._window // self._chunk_size + 1)
            pool = self._pool = ReadPool(threads, "chute-read")
            # Stops the threads when this iterator is collected; holds no reference to it.
            self._finalizer = weakref.finalize(self, pool.shutdown, 0)
        # Small reads first, one per thread at most, to measure an element; a group's
        # member reads its small share whole (its first chunk measures).
        measuring = not self._measured and self._group is None
        if measuring:
            ahead = position + self._options.num_threads
            limit = min(max(self._next_read, ahead), self._length)
        else:
            limit = min(position + self._window, self._length)
        while self._next_read < limit:
            start = self._next_read
            size = min(self._next_size(), MEASURE_CHUNK) if measuring else self._next_size()
            self._next_read = min(start + size, self._length)
            self._pending.append(
                pool.submit(
                    _timed_read, self._reading, start, self._next_read, self._ledger, self._stage
                )
            )

    def _take_share(self) -> None:
        """In a `ReadGroup`, reads this member's share ahead (once: all are built by now)."""
        if self._shared or self._group is None:
            return
        self._shared = True
        if self._options.threaded:
            self._window = self._group.share(self._window)
            if self._auto_chunk:
                self._chunk_size = max(1, min(self._chunk_size, self._window))
                # A share is a few positions: start with whole chunks (no ramp from 1).
                self._ramp = self._limit = self._chunk_size
        elif self._auto_chunk:  # The chunk read in this thread is all it holds ahead.
            self._chunk_size = self._group.share(self._chunk_size)

    def _next_size(self) -> int:
        """Positions of the next chunk queued (see the class docs)."""
        if not self._auto_chunk:
            return self._chunk_size
        size = min(self._chunk_size, self._ramp, self._limit)
        self._ramp = min(2 * self._ramp, self._chunk_size)
        return size

    def _fit(self, positions: int, seconds: float) -> None:
        """Limits automatic chunks to about `TARGET_SECONDS` of reading, from a read's time.

        A read that took longer sets the limit to what would have taken the target at
        its cost per position; a quicker one doubles the limit (up to `chunk_size`), so
        the size settles within a factor of two of the target instead of swinging.
        """
        if seconds > TARGET_SECONDS:
            self._limit = max(1, int(TARGET_SECONDS * positions / seconds))
        else:
            self._limit = min(self._chunk_size, 2 * self._limit)

    def _measure(self, chunk: Span[T]) -> None:
        """Lowers the read-ahead to `prefetch_buffer_bytes`, measured from `chunk`."""
        elements = [element for element in chunk.elements if element is not DROPPED]
        self._measure_reads += 1
        if not elements:  # All dropped: measured on the next read, up to 4 reads.
            self._measured = chunk.error is not None or self._measure_reads >= 4
            return
        self._measured = True
        per_element = max(1, sum(map(element_nbytes, elements)) // len(elements))
        budget = self._options.prefetch_buffer_bytes
        assert budget is not None
        if self._group is not None:  # A member's share, chosen by the group: no warning.
            fits = max(1, budget // max(1, self._group.members) // per_element)
            self._window = min(self._window, fits)
            if self._auto_chunk:
                self._chunk_size = max(1, min(self._chunk_size, self._window))
            return
        fits = max(1, budget // per_element)
        if fits >= self._window:
            return
        count = self._options.prefetch_buffer_size
        warnings.warn(
            f"ReadOptions: prefetch_buffer_size={count} counts elements of the dataset read "
            f"(batches after MapDataset.batch), measured at ~{_size(per_element)} each, so "
            f"the read-ahead would hold ~{_size(count * per_element)}, more than "
            f"prefetch_buffer_bytes={_size(budget)}: reading {fits} elements ahead instead. "
            f"Pass ReadOptions(prefetch_buffer_size={fits}) to choose it, or a larger "
            "prefetch_buffer_bytes (None: no bound in bytes).",
            ReadAheadWarning,
            stacklevel=4,
        )
        self._window = fits
        if self._auto_chunk:
            self._chunk_size = max(1, min(self._chunk_size, fits // self._options.num_threads))

    def _restart(self, position: int) -> None:
        """Drops everything read ahead; the next element read is `position`."""
        if self._pool is not None:
            self._pool.discard()
        self._pending.clear()
        self._next_read = position
        self._chunk, self._offset = Span(position, []), 0

    def _stop_pool(self, timeout: float) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown(timeout)

    def get_state(self) -> IteratorState:
        return reader_state(self._chunk.start + self._offset, self._frontier)

    def set_state(self, state: IteratorState, /) -> None:
        """Restores a state of `get_state`, or one `reshard` wrote (with a frontier)."""
        position, frontier = read_reader_state(state, "PrefetchReadIter", self._length)
        self._frontier = None if frontier is None else frontier.after(position)
        self._reading = (
            self._dataset if self._frontier is None else SkipConsumed(self._dataset, self._frontier)
        )
        self._restart(position)

    def close(self) -> None:
        """Stops the threads, dropping what was read ahead; the position is kept.

        Waits up to `JOIN_TIMEOUT` seconds for reads in flight; threads still reading
        after that exit when their read returns. Calling `next()` later starts new
        threads at the same position.
        """
        self._restart(self._chunk.start + self._offset)
        self._stop_pool(JOIN_TIMEOUT)

    def __enter__(self) -> PrefetchReadIter[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"PrefetchReadIter({self._dataset!r}, num_threads={self._options.num_threads}, "
            f"prefetch_buffer_size={self._options.prefetch_buffer_size}, "
            f"chunk_size={self._chunk_size}, position={self._chunk.start + self._offset})"
        )


def _timed_read(
    dataset: RandomAccessDataSource[T], start: int, stop: int, ledger: Any, stage: int
) -> tuple[Span[T], float]:
    """`read_span(...)` and the seconds it took (in a pool thread)."""
    began = time.perf_counter()
    span = read_span(dataset, start, stop, ledger, stage)
    return span, time.perf_counter() - began


def _size(nbytes: int) -> str:
    """`nbytes` for people: `512 B`, `1.5 KiB`, `3.0 MiB`, `2.0 GiB`."""
    value, unit = float(nbytes), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{nbytes} B" if unit == "B" else f"{value:.1f} {unit}"
