"""`MapNode`: the base class of chute's random-access dataset nodes, and epochs.

A node answers positions with elements: `len(node)`, `node[i]`, `node.__getitems__(
[i, j, ...])` (one batched call, as sources do) and `node[a:b:c]` (a `SliceMap`).
Internally every read carries an **epoch** per position, the pass of the enclosing
`RepeatMap`s, so that a `ShuffleMap` below a repeat draws a new permutation per pass:

- `RepeatMap` turns an outer epoch `e` and position `i` into the parent position
  `i % len(parent)` in epoch `e * passes + i // len(parent)`;
- `ShuffleMap`, `ShardMap`, `MixMap` and `SelectFromMap` pass epochs on unchanged;
- `SliceMap` passes epoch 0 on: a slice is a fixed subset of its parent, and repeating
  it repeats exactly those records (Grain issue #1200 leaks others).

`epoch_length` tells a `ShuffleMap` above where the epochs of a node begin: it shuffles
each block of `epoch_length` positions separately, so `ShuffleMap(RepeatMap(x))` and
`RepeatMap(ShuffleMap(x))` are the same stream.

Epochs are `uint64` and wrap modulo 2**64 (only their distinctness matters).

Writing a node (the transforms layer does): subclass `MapNode`, implement `__len__` and
`get_many(positions, epochs)` reading the parent with `fetch(parent, positions, epochs)`
(positions are in range; pass the epochs on unless the node defines its own), and
override `epoch_length` if the node changes how many positions an epoch has. A position
may hold `chute_sources.DROPPED` (a filtered-out element): nodes pass it on, and
iteration skips it.
"""

from __future__ import annotations

import abc
import operator
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Generic, SupportsIndex, TypeAlias, TypeVar, overload

import numpy as np
import numpy.typing as npt

from chute_core import (
    DROPPED,
    InvalidArgumentError,
    RandomAccessDataSource,
    RecordIndexError,
    StageTraits,
    declare_op,
    read_records,
)
from chute_core.internal import check_dataset, check_int
from chute_sources import Source

__all__ = [
    "ENDLESS",
    "SLICE",
    "EpochArray",
    "MapNode",
    "PositionArray",
    "PositionMap",
    "SliceMap",
    "consecutive",
    "fetch",
    "node_epoch_length",
]

T = TypeVar("T")

ENDLESS = sys.maxsize
"""The length of an endless dataset (`RepeatMap(parent, None)`), as in Grain."""

PositionArray: TypeAlias = npt.NDArray[np.int64]
"""Non-negative in-range positions, 1-d."""

EpochArray: TypeAlias = npt.NDArray[np.uint64]
"""One epoch per position, same shape as the positions."""

_ITER_CHUNK = 256
_SOURCE_GETITEMS = Source.__getitems__


def fetch(
    dataset: RandomAccessDataSource[T], positions: PositionArray, epochs: EpochArray
) -> list[T]:
    """Reads in-range `positions` of a node (in `epochs`) or of a plain source.

    What a node's `get_many` calls to read its parent: nodes get the epochs, plain
    sources and sequences a batched `read_records`.

    Example:
        >>> import numpy as np
        >>> from chute_samplers import RepeatMap
        >>> fetch(RepeatMap(["a", "b"], 2), np.array([3, 0]), np.zeros(2, np.uint64))
        ['b', 'a']
    """
    if isinstance(dataset, MapNode):
        result: list[T] = dataset.get_many(positions, epochs)
        return result
    if isinstance(dataset, Source) and type(dataset).__getitems__ is _SOURCE_GETITEMS:
        records = dataset.__getitems__(positions)  # chute's sources read arrays directly.
        return records if type(records) is list else list(records)
    return read_records(dataset, positions.tolist())


def consecutive(positions: PositionArray) -> bool:
    """Whether non-empty `positions` are `p, p + 1, p + 2, ...` (as in-order readers ask).

    Example:
        >>> import numpy as np
        >>> consecutive(np.array([4, 5, 6])), consecutive(np.array([4, 6, 5]))
        (True, False)
    """
    first = int(positions[0])
    count = len(positions)
    return int(positions[-1]) - first == count - 1 and bool(
        (positions == np.arange(first, first + count)).all()
    )


def node_epoch_length(dataset: RandomAccessDataSource[Any]) -> int:
    """The `epoch_length` of a node, or the length of a plain source.

    Example:
        >>> from chute_samplers import RepeatMap
        >>> node_epoch_length(RepeatMap(range(3), 4)), node_epoch_length(range(3))
        (3, 3)
    """
    if isinstance(dataset, MapNode):
        return dataset.epoch_length
    return len(dataset)


class MapNode(abc.ABC, Generic[T]):
    """Base class of random-access dataset nodes (shuffle, repeat, slice, shard, mix).

    Subclasses implement `__len__` and `get_many`; this class checks positions, turns
    slices into `SliceMap`s and iterates. Nodes hold no mutable state besides caches, so
    they are safe to read from several threads and pickle to worker processes.

    Example:
        >>> from chute_samplers import RepeatMap
        >>> node = RepeatMap(["a", "b"], num_epochs=2)
        >>> len(node), node[3], node[-1], list(node[1::2])
        (4, 'b', 'b', ['b', 'b'])
        >>> node.__getitems__([0, 3])
        ['a', 'b']
    """

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of positions."""

    @property
    def epoch_length(self) -> int:
        """Positions per epoch of this node: a shuffle above permutes each such block."""
        return len(self)

    @abc.abstractmethod
    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T]:
        """Returns the elements at in-range `positions`, read in outer `epochs`.

        The extension point of nodes: no range checks (callers pass positions in
        `[0, len(self))`); nodes pass the epochs on as the module docstring describes.

        Args:
            positions: 1-d int64 array of positions in `[0, len(self))`.
            epochs: 1-d uint64 array of the same length.

        Returns:
            The elements, in the order of `positions`.
        """

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[Any], PositionArray, EpochArray] | None:
        """Where `positions` are read from: `(parent, its positions, their epochs)`.

        Nodes whose every position reads one position of one parent say so here (and
        read through it); a node that combines or reorders elements otherwise returns
        None (the default). `record_keys` follows these down to the source.
        """
        return None

    def _check_positions(self, positions: Sequence[SupportsIndex] | npt.ArrayLike) -> PositionArray:
        length = len(self)
        array = np.asarray(positions)
        if array.size == 0:
            return np.zeros(0, dtype=np.int64)
        if array.dtype.kind not in "iu":
            return np.array([self._check_position(p) for p in array.tolist()], dtype=np.int64)
        array = array.reshape(-1).astype(np.int64)
        negative = array < 0
        if negative.any():
            array = np.where(negative, array + length, array)
        bad = (array < 0) | (array >= length)
        if bad.any():
            self._check_position(int(np.asarray(positions).reshape(-1)[np.flatnonzero(bad)[0]]))
        return array

    def _check_position(self, position: SupportsIndex) -> int:
        try:
            value = operator.index(position)
        except TypeError:
            raise TypeError(
                f"{self!r}: positions are integers or slices, got "
                f"{type(position).__name__} {position!r}."
            ) from None
        length = len(self)
        checked = value + length if value < 0 else value
        if not 0 <= checked < length:
            raise RecordIndexError(
                f"{self!r}: position {value} is out of range; this dataset has {length} "
                f"elements (valid positions are 0..{length - 1}, or negative from the end)."
            )
        return checked

    @overload
    def __getitem__(self, position: SupportsIndex) -> T: ...

    @overload
    def __getitem__(self, position: slice) -> SliceMap[T]: ...

    def __getitem__(self, position: SupportsIndex | slice) -> T | SliceMap[T]:
        if isinstance(position, slice):
            return SliceMap(self, position)
        index = self._check_position(position)
        return self.get_many(np.array([index], np.int64), np.zeros(1, np.uint64))[0]

    def __getitems__(self, positions: Sequence[SupportsIndex] | npt.ArrayLike) -> list[T]:
        """Returns the elements at `positions` in one call (negative from the end)."""
        array = self._check_positions(positions)
        return self.get_many(array, np.zeros(array.shape, np.uint64))

    def __iter__(self) -> Iterator[T]:
        """Yields the elements in order, skipping positions that hold `DROPPED`."""
        length = len(self)
        for start in range(0, length, _ITER_CHUNK):
            positions = np.arange(start, min(start + _ITER_CHUNK, length), dtype=np.int64)
            for element in self.get_many(positions, np.zeros(positions.shape, np.uint64)):
                if element is not DROPPED:
                    yield element


class PositionMap(MapNode[T]):
    """A node each of whose positions reads one position of its parent.

    It says which in `parent_positions` and reads through it: slices, repeats,
    shards and shuffles are such nodes (and `record_keys` follows them to the source).

    Example:
        >>> class Reversed(PositionMap):
        ...     def __init__(self, parent):
        ...         self._parent = parent
        ...     def __len__(self):
        ...         return len(self._parent)
        ...     def parent_positions(self, positions, epochs):
        ...         return self._parent, len(self._parent) - 1 - positions, epochs
        >>> list(Reversed(range(3)))
        [2, 1, 0]
    """

    @abc.abstractmethod
    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[Any], PositionArray, EpochArray]:
        """Where `positions` are read from: `(parent, its positions, their epochs)`."""

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T]:
        return fetch(*self.parent_positions(positions, epochs))


class SliceMap(PositionMap[T]):
    """The elements `parent[s]` for a Python slice `s` (any start, stop and step).

    A slice is a *fixed* subset: it reads its parent in epoch 0 whatever epoch it is
    read in, so repeating a slice of a shuffled dataset repeats exactly the slice's
    records every epoch (in Grain, issue #1200, other records leak in). To reshuffle a
    slice each epoch, shuffle after slicing. Slices of slices are flattened into one.

    Args:
        parent: a node, a source, or any sequence.
        slice_: a `slice`; step must not be 0.

    Example:
        >>> node = SliceMap(range(10), slice(8, 1, -3))
        >>> list(node), len(node)
        ([8, 5, 2], 3)
        >>> list(node[1:])
        [5, 2]
    """

    def __init__(self, parent: RandomAccessDataSource[T], slice_: slice) -> None:
        check_dataset(parent, "SliceMap")
        if not isinstance(slice_, slice):
            raise TypeError(f"SliceMap: expected a slice, got {type(slice_).__name__} {slice_!r}.")
        for name in ("start", "stop", "step"):
            bound = getattr(slice_, name)
            if bound is not None:
                check_int(bound, f"slice {name}", "SliceMap", minimum=-sys.maxsize)
        if slice_.step is not None and slice_.step == 0:
            raise InvalidArgumentError(
                "SliceMap: slice step must not be 0 (use a positive or negative step)."
            )
        selected: range
        try:
            if isinstance(parent, SliceMap):
                inner: SliceMap[T] = parent
                selected = inner.positions[slice_]
                parent = inner.parent
            else:
                selected = range(len(parent))[slice_]
        except TypeError:
            raise TypeError(
                f"SliceMap: slice bounds must be integers or None, got {slice_!r}."
            ) from None
        self._parent: RandomAccessDataSource[T] = parent
        self._range = selected
        self._slice = slice_

    @property
    def parent(self) -> RandomAccessDataSource[T]:
        """The sliced dataset (the innermost one, when slices were flattened)."""
        return self._parent

    @property
    def positions(self) -> range:
        """The parent positions this slice reads, in order."""
        return self._range

    def __len__(self) -> int:
        return len(self._range)

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[T], PositionArray, EpochArray]:
        parent_positions = self._range.start + positions * self._range.step
        return self._parent, parent_positions, np.zeros_like(epochs)

    def __repr__(self) -> str:
        return f"SliceMap({self._parent!r}, {self._range!r})"


SLICE = declare_op("slice", StageTraits(stride=""), map_node=SliceMap)
"""The op's declaration (see `chute_core.declare_op`)."""
