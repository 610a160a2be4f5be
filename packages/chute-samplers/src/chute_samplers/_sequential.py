"""`SequentialIter`: a random-access dataset read in order, as a checkpointable stream."""

from __future__ import annotations

import time
from collections.abc import Collection
from itertools import repeat
from operator import is_
from typing import TypeVar

import numpy as np

from chute_core import DROPPED, IteratorState, RandomAccessDataSource, StageTraits, declare_op
from chute_core.internal import active_ledger, check_dataset, check_int

from ._frontier import Frontier, SkipConsumed, read_reader_state, reader_state
from ._iter_base import IterNode
from ._span import Span, read_span, reader_name

__all__ = ["TO_ITER_DATASET", "SequentialIter"]

T = TypeVar("T")

_FAST = 0.008  # Seconds: a read faster than this doubles the next one's size.
_SLOW = 0.032  # Seconds: a read slower than this halves it.
_CHUNK = 256  # The most positions a read takes by default...
_SMALL_CHUNK = 4096  # ... or of small elements (about _SMALL_BYTES or less each).
_SMALL_BYTES = 4096
_UNKNOWN = 1 << 62  # The estimated size of an element of a type not looked into.


def _estimated_bytes(value: object, depth: int = 0) -> int:
    """Roughly the memory an element holds: numbers, strings, arrays and small containers.

    Anything else counts as large (`_UNKNOWN`): only elements known to be small let
    reads grow past `_CHUNK`.
    """
    kind = type(value)
    if kind is int or kind is float or kind is bool or value is None:
        return 32
    if isinstance(value, str | bytes) and (kind is str or kind is bytes):
        return 64 + len(value)
    if isinstance(value, np.ndarray | np.generic):
        return 128 + int(value.nbytes)
    items: Collection[object]
    if isinstance(value, dict) and kind is dict:
        items = value.values()
    elif isinstance(value, list | tuple) and (kind is list or kind is tuple):
        items = value
    else:
        return _UNKNOWN
    if depth >= 2 or len(items) > 64:
        return _UNKNOWN
    return 64 + sum(_estimated_bytes(item, depth + 1) for item in items)


class SequentialIter(IterNode[T]):
    """Yields `dataset[0], dataset[1], ...`; the state is the next position.

    Positions holding `chute_sources.DROPPED` (filtered out) are skipped. The `origin` of
    an element is `(position,)`, its position in `dataset` (so origins have gaps where
    positions were dropped).

    Reads positions in batched calls (`__getitems__` / `get_many`) of adaptive size:
    the first call reads one position, and the size doubles (up to `chunk_size`) while
    a call takes under 8 ms and halves when one takes over 32 ms. So cheap
    elements cost one call per `chunk_size`, while the first of costly ones (a batch
    of decoded images) comes after its own work, not after hundreds of others'. By
    default (`chunk_size=None`) a call reads at most 256 positions, or 4096 while the
    elements are small (numbers, short strings, arrays of up to 4 KiB, and small
    dicts, lists and tuples of those, judged by the first and last elements of the
    last call): so what is read ahead stays within about 16 MiB, and cheap small
    elements pay the per-call work once per 4096. The chunk read ahead is not part of
    the state, so restoring re-reads at most one chunk; the elements never depend on
    the chunking.

    Errors: an exception raised reading position `p` comes from the `next()` that
    would have returned `p` (after the elements before it), with a note naming `p`;
    the state stays at `p`. Under an error budget (`chute_sources.ErrorBudget`, an
    active `ErrorLedger` when the iterator is built) the element is skipped instead,
    and charged to the budget when it is reached.

    Args:
        dataset: a node, a source or any sequence.
        chunk_size: the most positions read per call (>= 1); None: 256, or 4096 for
            small elements (see above).

    Example:
        >>> from chute_samplers import ShuffleMap
        >>> it = SequentialIter(ShuffleMap(range(5), seed=1))
        >>> first = [next(it), next(it)]
        >>> state = it.get_state()
        >>> rest = list(it)
        >>> it.set_state(state); list(it) == rest
        True
    """

    def __init__(self, dataset: RandomAccessDataSource[T], chunk_size: int | None = None) -> None:
        check_dataset(dataset, "SequentialIter", "dataset")
        self._dataset = dataset
        self._reading: RandomAccessDataSource[T] = dataset  # Skips a frontier's positions.
        self._frontier: Frontier | None = None
        self._chunk_size = (
            None
            if chunk_size is None
            else check_int(chunk_size, "chunk_size", "SequentialIter", minimum=1)
        )
        self._read = 1  # Positions the next call reads (adapts, see the class docs).
        self._position = 0
        self._span: Span[T] = Span(0, [])
        self._offset = 0
        self._last = -1  # The position of the element last returned (-1: none).
        self._clean: Span[T] | None = None  # The span last found to hold no DROPPED.
        self._ledger = active_ledger()
        self._stage = 0 if self._ledger is None else self._ledger.register()

    @property
    def dataset(self) -> RandomAccessDataSource[T]:
        """The random-access dataset this reads in order."""
        return self._dataset

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(position,)` of the element last returned (see `IterNode.origin`)."""
        return None if self._last < 0 else (self._last,)

    def __next__(self) -> T:
        while True:
            offset = self._offset
            elements = self._span.elements
            if offset == len(elements):
                self._refill()
                continue
            element = elements[offset]
            position = self._position
            if element is not DROPPED:
                self._offset = offset + 1
                self._position = position + 1
                self._last = position
                return element
            if self._span.failures is not None:  # Charged before moving past it.
                assert self._ledger is not None
                self._span.charge(offset, self._ledger, self._stage, reader_name(self._dataset))
            self._offset = offset + 1
            self._position = position + 1

    def next_many(self, count: int) -> list[T]:
        """The next up to `count` elements: what `count` calls of `next` would return.

        Fewer only at the end of the stream. An exception one of those calls would
        raise propagates the same way (the elements before it are consumed, the state
        stays at the failing position). Slices the chunk read ahead instead of
        returning element by element, for consumers that take many at once (a batch).

        Example:
            >>> it = SequentialIter(range(5))
            >>> it.next_many(3), it.next_many(3), it.get_state()
            ([0, 1, 2], [3, 4], {'position': 5})
        """
        out: list[T] = []
        while len(out) < count:
            span, offset = self._span, self._offset
            elements = span.elements
            taken = min(count - len(out), len(elements) - offset)
            if taken and (span is self._clean or self._is_clean(span)):
                out += elements[offset : offset + taken]
                self._offset = offset + taken
                self._position += taken
                self._last = self._position - 1
                continue
            try:
                out.append(self.__next__())  # Refills, skips DROPPED, raises.
            except StopIteration:
                break
        return out

    def _is_clean(self, span: Span[T]) -> bool:
        """Whether `span` can be handed out in slices: no DROPPED, nothing to charge."""
        if span.failures is not None or any(map(is_, span.elements, repeat(DROPPED))):
            return False
        self._clean = span
        return True

    def _refill(self) -> None:
        """Reads the next span; raises the current span's error or `StopIteration`."""
        span = self._span
        if span.error is not None:
            error, self._span = span.error, Span(self._position, [])
            raise error  # The state stays at the failing position.
        stop = min(self._position + self._read, len(self._dataset))
        if self._position >= stop:
            raise StopIteration
        started = time.perf_counter()
        self._span = read_span(self._reading, self._position, stop, self._ledger, self._stage)
        self._offset = 0
        self._adapt(time.perf_counter() - started)

    def _adapt(self, seconds: float) -> None:
        limit = self._chunk_size
        if limit is None:
            elements = self._span.elements
            ends = (elements[0], elements[-1]) if elements else ()
            small = ends and max(map(_estimated_bytes, ends)) <= _SMALL_BYTES
            limit = _SMALL_CHUNK if small else _CHUNK
        if seconds < _FAST and self._read < limit:
            self._read = min(self._read * 2, limit)
        elif seconds > _SLOW and self._read > 1:
            self._read //= 2
        self._read = min(self._read, limit)  # Elements that grew large: back within it.

    def get_state(self) -> IteratorState:
        return reader_state(self._position, self._frontier)

    def set_state(self, state: IteratorState, /) -> None:
        """Restores a state of `get_state`, or one `reshard` wrote (with a frontier)."""
        self._position, frontier = read_reader_state(state, "SequentialIter", len(self._dataset))
        self._frontier = None if frontier is None else frontier.after(self._position)
        self._reading = (
            self._dataset if self._frontier is None else SkipConsumed(self._dataset, self._frontier)
        )
        self._span, self._offset, self._last = Span(self._position, []), 0, -1

    def __repr__(self) -> str:
        return f"SequentialIter({self._dataset!r}, position={self._position})"


TO_ITER_DATASET = declare_op(
    "to_iter_dataset",
    StageTraits(keeps_positions=True, begins_stream=True, performance=frozenset({"read_options"})),
    iter_node=SequentialIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
