"""Reading a chunk's base positions: the first stage of every `ChunkPlan` run.

`read_chunk` reads the records of `[start, stop)` in one batched call, or split over
a few threads (one pool per size, per process); `ChunkReader` hands them to the
chunk's ops one at a time, with their origins, skipping positions that were dropped.
"""

from __future__ import annotations

import itertools
import operator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from chute_core import DROPPED, IteratorState, RandomAccessDataSource
from chute_core.internal import ErrorLedger, active_ledger, state_dict, state_int
from chute_samplers import IterNode
from chute_samplers.internal import Span, read_span, reader_name

__all__ = ["ChunkReader", "has_dropped", "read_chunk"]


def has_dropped(elements: list[Any]) -> bool:
    """Whether a position of `elements` was dropped (by identity: never `==` on records).

    Example:
        >>> has_dropped([1, 2]), has_dropped([1, DROPPED])
        (False, True)
    """
    return any(map(operator.is_, elements, itertools.repeat(DROPPED)))


_READERS: dict[int, ThreadPoolExecutor] = {}
"""One reading thread pool per size, per process (workers each get their own)."""


def read_chunk(
    dataset: RandomAccessDataSource[Any],
    start: int,
    stop: int,
    threads: int,
    ledger: ErrorLedger | None,
    stage: int,
) -> Span[Any]:
    """`read_span` of `[start, stop)`, split over `threads` threads when it is long enough.

    Example:
        >>> read_chunk(range(10), 2, 9, 0, None, 0).elements  # One thread: no pool is kept.
        [2, 3, 4, 5, 6, 7, 8]
    """
    if threads <= 1 or stop - start < 2 * threads:
        return read_span(dataset, start, stop, ledger, stage)
    pool = _READERS.get(threads)
    if pool is None:
        pool = _READERS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="chute-chunk")
    bounds = np.linspace(start, stop, threads + 1).astype(np.int64).tolist()
    futures = [
        pool.submit(read_span, dataset, a, b, ledger, stage) for a, b in itertools.pairwise(bounds)
    ]
    merged: Span[Any] = Span(start, [])
    for future in futures:
        part = future.result()
        if part.failures:
            shift = part.start - start
            merged.failures = merged.failures or {}
            merged.failures.update({shift + k: e for k, e in part.failures.items()})
        merged.elements.extend(part.elements)
        if part.error is not None:
            merged.error = part.error
            break
    return merged


class ChunkReader(IterNode[Any]):
    """Reads base positions `[start, stop)` in order (skipping DROPPED); origin `(p,)`.

    Reads on the first `next()`. A failed read raises after the elements before it or,
    under an error budget, is charged to the ledger (which collects) and skipped.

    Example:
        >>> reader = ChunkReader(range(10), 3, 6)
        >>> next(reader), reader.origin, reader.get_state()
        (3, (3,), {'next': 1})
        >>> list(reader)
        [4, 5]
    """

    def __init__(
        self, dataset: RandomAccessDataSource[Any], start: int, stop: int, threads: int = 0
    ) -> None:
        self._dataset, self._stop, self._threads = dataset, stop, threads
        self._span: Span[Any] | None = None
        self._start = start
        self._next = 0
        self._last: int | None = None
        self._ledger = active_ledger()
        self._stage = 0 if self._ledger is None else self._ledger.register()

    def __next__(self) -> Any:
        span = self._span
        if span is None:
            span = self._span = read_chunk(
                self._dataset, self._start, self._stop, self._threads, self._ledger, self._stage
            )
        elements = span.elements
        while self._next < len(elements):
            index = self._next
            element = elements[index]
            if element is not DROPPED:
                self._next = index + 1
                self._last = self._start + index
                return element
            if span.failures is not None and self._ledger is not None:
                span.charge(index, self._ledger, self._stage, reader_name(self._dataset))
            self._next = index + 1
        if span.error is not None:
            raise span.error
        raise StopIteration

    @property
    def dataset(self) -> RandomAccessDataSource[Any]:
        """The random-access dataset this reads (see `chute_samplers.reader_dataset`)."""
        return self._dataset

    @property
    def origin(self) -> tuple[int, ...] | None:
        return None if self._last is None else (self._last,)

    def get_state(self) -> IteratorState:
        return {"next": self._next}

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("next",))
        self._next = state_int(self, checked, "next", maximum=self._stop - self._start)
