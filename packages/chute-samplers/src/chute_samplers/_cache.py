"""`CacheMap` and `CacheIter`: elements kept in memory after they are first read."""

from __future__ import annotations

import json
from typing import TypeVar

import numpy as np

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
    RandomAccessDataSource,
    StageTraits,
    declare_op,
)
from chute_core.internal import (
    CACHE_HITS,
    CACHE_MISSES,
    COUNTERS,
    check_dataset,
    state_bool,
    state_dict,
    state_int,
    state_parent,
)

from ._iter_base import IterNode
from ._mix_iter import check_iterator
from ._node import EpochArray, MapNode, PositionArray, fetch

__all__ = ["CACHE", "CacheIter", "CacheMap"]

T = TypeVar("T")

_REPORT = 1024
"""`CacheIter` adds to `COUNTERS` once per this many elements (an addition costs ~9 of
its replayed elements), at the end of each pass and on `set_state`."""


class CacheMap(MapNode[T]):
    """`parent`'s elements, each kept in memory (a dict by position) once read.

    Memory: every element read so far stays in this node for its lifetime, up to the
    whole dataset; each worker process holds its own copy of what it read. The parent
    is always read in epoch 0, so a cached position is the same element in every
    epoch whichever epoch read it first (a `ShuffleMap` above still reorders each
    epoch; a random stage below is drawn once).

    Counts, per read, the positions read from the parent as cache misses (label
    `cache="map"`) and the others as hits.

    Args:
        parent: a node, source or sequence.

    Example:
        >>> reads = []
        >>> class Source:
        ...     def __len__(self): return 3
        ...     def __getitem__(self, i): reads.append(i); return i * 10
        >>> node = CacheMap(Source())
        >>> list(node), list(node), reads
        ([0, 10, 20], [0, 10, 20], [0, 1, 2])
    """

    def __init__(self, parent: RandomAccessDataSource[T]) -> None:
        check_dataset(parent, "CacheMap")
        self._parent = parent
        self._cache: dict[int, T] = {}

    def __len__(self) -> int:
        return len(self._parent)

    @property
    def cached(self) -> int:
        """How many positions are held in memory."""
        return len(self._cache)

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[T], PositionArray, EpochArray]:
        return self._parent, positions, np.zeros_like(epochs)  # Read in epoch 0.

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T]:
        cache = self._cache
        asked = positions.tolist()
        missing = sorted({p for p in asked if p not in cache})
        if len(missing) < len(asked):
            COUNTERS.add(CACHE_HITS, len(asked) - len(missing), cache="map")
        if missing:
            COUNTERS.add(CACHE_MISSES, len(missing), cache="map")
            wanted = np.array(missing, np.int64)
            for position, element in zip(
                missing, fetch(self._parent, wanted, np.zeros(len(missing), np.uint64)), strict=True
            ):
                cache[position] = element
        return [cache[p] for p in asked]

    def __repr__(self) -> str:
        return f"CacheMap({self._parent!r})"


class CacheIter(IterNode[T]):
    """Yields `parent`'s stream, keeping its first pass in memory to replay it.

    Once the parent has ended, the stream is served from memory: restoring an earlier
    state (a `RepeatIter` above does at each epoch) replays the cached elements
    without reading the parent again, as Grain's `CacheIterDataset` does.

    Memory: every element of the first pass, i.e. the whole stream, stays in this
    iterator for its lifetime. The state holds no elements: `{"parent": <state>,
    "position": p, "filled": bool}`; restored into a new iterator, the cache is
    rebuilt by reading the parent from its start up to `p` (all of it if the state
    was taken while replaying).

    Counts the elements served from memory as cache hits (label `cache="iter"`) and
    those read from the parent (also to rebuild the cache on a restore) as misses, in
    bulk: every 1,024 elements, at the end of each pass and on `set_state`.

    Args:
        parent: a finite checkpointable iterator at its start.

    Example:
        >>> from chute_samplers import RepeatIter, SequentialIter
        >>> list(RepeatIter(CacheIter(SequentialIter(["a", "b"])), 3))
        ['a', 'b', 'a', 'b', 'a', 'b']
    """

    def __init__(self, parent: CheckpointableIterator[T]) -> None:
        check_iterator(parent, "CacheIter", "parent")
        self._parent = parent
        self._start = parent.get_state()
        self._cache: list[T] = []
        self._position = 0
        self._filled = False
        self._replaying = False  # Whether the last element came from memory.
        self._counted = 0  # The position up to which elements were counted.
        self._count_at = _REPORT  # The position at which to count again.

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(position,)` in the cached stream of the element last returned."""
        return None if self._position == 0 else (self._position - 1,)

    def __next__(self) -> T:
        if self._filled:
            if self._position >= len(self._cache):
                self._count()
                raise StopIteration
            self._position += 1
            if self._position >= self._count_at:
                self._count()
            return self._cache[self._position - 1]
        try:
            element = next(self._parent)
        except StopIteration:
            self._count()
            self._filled = self._position == len(self._cache)
            raise
        if self._position == len(self._cache):
            self._cache.append(element)
        self._position += 1
        if self._position >= self._count_at:
            self._count()
        return element

    def _count(self) -> None:
        """Counts the elements returned since the last count: hits if replayed, else misses."""
        served = self._position - self._counted
        if served > 0:
            COUNTERS.add(CACHE_HITS if self._filled else CACHE_MISSES, served, cache="iter")
        self._counted, self._count_at = self._position, self._position + _REPORT

    def get_state(self) -> IteratorState:
        parent = self._start if self._filled else self._parent.get_state()
        return {"parent": parent, "position": self._position, "filled": self._filled}

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("parent", "position", "filled"))
        position = state_int(self, checked, "position")
        filled = state_bool(self, checked, "filled")
        parent = state_parent(self, checked)
        self._count()
        if filled and _as_json(parent) != _as_json(self._start):
            raise InvalidStateError(
                f"{self!r}: state['parent'] of a filled cache is the parent's state at its "
                f"start, {self._start!r}; got {parent!r}. Was it saved by another pipeline?"
            )
        if self._filled or (not filled and position <= len(self._cache)):
            if self._filled and position > len(self._cache):
                raise InvalidStateError(
                    f"{self!r}: state['position'] = {position} is out of range [0, "
                    f"{len(self._cache)}] (the cached elements); the state belongs to another "
                    "pipeline."
                )
            if not filled:  # Checks it (unused while the cache serves the stream).
                self._parent.set_state(parent)
            self._position = self._counted = position
            self._count_at = position + _REPORT
            return
        # The cache must first be read from the parent's start: all of it, or `position`.
        previous = self._parent.get_state()
        try:
            cache, complete = self._read_from_start(None if filled else position)
            if complete and position > len(cache):
                raise InvalidStateError(
                    f"{self!r}: state['position'] = {position} is out of range [0, "
                    f"{len(cache)}] (the elements of the stream); the state belongs to another "
                    "pipeline."
                )
            if not complete:
                self._parent.set_state(parent)
        except BaseException:
            self._parent.set_state(previous)  # A refused state moves nothing.
            raise
        self._cache, self._filled, self._position = cache, complete, position
        self._counted, self._count_at = position, position + _REPORT

    def _read_from_start(self, count: int | None) -> tuple[list[T], bool]:
        """The parent's first `count` elements (None: all), and whether that is all of them.

        Raises:
            InvalidStateError: the stream has fewer than `count` elements.
        """
        self._parent.set_state(self._start)
        cache: list[T] = []
        try:
            while count is None or len(cache) < count:
                try:
                    cache.append(next(self._parent))
                except StopIteration:
                    if count is not None:
                        raise InvalidStateError(
                            f"{self!r}: state['position'] = {count} is past the {len(cache)} "
                            "elements of the stream; the state belongs to another pipeline."
                        ) from None
                    return cache, True
            return cache, False
        finally:
            if cache:  # Read from the parent: misses, though returned to nobody.
                COUNTERS.add(CACHE_MISSES, len(cache), cache="iter")

    def __repr__(self) -> str:
        return f"CacheIter({len(self._cache)} cached, filled={self._filled})"


def _as_json(state: IteratorState) -> str:
    """`state` as canonical JSON: states compare by type too (`False` is not `0`)."""
    return json.dumps(state, sort_keys=True)


CACHE = declare_op("cache", StageTraits(), map_node=CacheMap, iter_node=CacheIter)
"""The op's declaration (see `chute_core.declare_op`)."""
