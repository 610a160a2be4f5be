"""`SequentialIter`: a random-access dataset read in order, as a checkpointable stream."""

from __future__ import annotations

import time
from typing import TypeVar

import numpy as np

from chute_sources import DROPPED, IteratorState, RandomAccessDataSource

from ._checks import check_int, state_value
from ._iter_base import IterNode
from ._node import check_dataset, fetch

__all__ = ["SequentialIter"]

T = TypeVar("T")

_FAST = 0.008  # Seconds: a read faster than this doubles the next one's size.
_SLOW = 0.032  # Seconds: a read slower than this halves it.


class SequentialIter(IterNode[T]):
    """Yields `dataset[0], dataset[1], ...`; the state is the next position.

    Positions holding `chute_sources.DROPPED` (filtered out) are skipped. The `origin` of
    an element is `(position,)`, its position in `dataset` (so origins have gaps where
    positions were dropped).

    Reads positions in batched calls (`__getitems__` / `get_many`) of adaptive size:
    the first call reads one position, and the size doubles (up to `chunk_size`) while
    a call takes under 8 ms and halves when one takes over 32 ms. So cheap
    elements cost one call per `chunk_size`, while the first of costly ones (a batch
    of decoded images) comes after its own work, not after hundreds of others'. The
    chunk read ahead is not part of the state, so restoring re-reads at most one chunk;
    the elements never depend on the chunking.

    Args:
        dataset: a node, a source or any sequence.
        chunk_size: the most positions read per call (>= 1).

    Example:
        >>> from chute_samplers import ShuffleMap
        >>> it = SequentialIter(ShuffleMap(range(5), seed=1))
        >>> first = [next(it), next(it)]
        >>> state = it.get_state()
        >>> rest = list(it)
        >>> it.set_state(state); list(it) == rest
        True
    """

    def __init__(self, dataset: RandomAccessDataSource[T], chunk_size: int = 256) -> None:
        check_dataset(dataset, "SequentialIter", "dataset")
        self._dataset = dataset
        self._chunk_size = check_int(chunk_size, "chunk_size", "SequentialIter", minimum=1)
        self._read = 1  # Positions the next call reads (adapts, see the class docs).
        self._position = 0
        self._buffer: list[T] = []
        self._offset = 0
        self._last = -1  # The position of the element last returned (-1: none).

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(position,)` of the element last returned (see `IterNode.origin`)."""
        return None if self._last < 0 else (self._last,)

    def __next__(self) -> T:
        while True:
            if self._offset == len(self._buffer):
                stop = min(self._position + self._read, len(self._dataset))
                if self._position >= stop:
                    raise StopIteration
                positions = np.arange(self._position, stop, dtype=np.int64)
                epochs = np.zeros(positions.size, np.uint64)
                started = time.perf_counter()
                self._buffer, self._offset = fetch(self._dataset, positions, epochs), 0
                self._adapt(time.perf_counter() - started)
            element = self._buffer[self._offset]
            position = self._position
            self._offset += 1
            self._position = position + 1
            if element is not DROPPED:
                self._last = position
                return element

    def _adapt(self, seconds: float) -> None:
        if seconds < _FAST and self._read < self._chunk_size:
            self._read = min(self._read * 2, self._chunk_size)
        elif seconds > _SLOW and self._read > 1:
            self._read //= 2

    def get_state(self) -> IteratorState:
        return {"position": self._position}

    def set_state(self, state: IteratorState, /) -> None:
        self._position = state_value(
            state, "position", "SequentialIter", maximum=len(self._dataset)
        )
        self._buffer, self._offset, self._last = [], 0, -1

    def __repr__(self) -> str:
        return f"SequentialIter({self._dataset!r}, position={self._position})"
