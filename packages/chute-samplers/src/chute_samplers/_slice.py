"""`SliceMap`: a Python slice of a random-access dataset, as a fixed subset."""

from __future__ import annotations

import sys
from typing import TypeVar

import numpy as np

from chute_core import InvalidArgumentError, RandomAccessDataSource
from chute_core.internal import check_dataset, check_int

from ._node import EpochArray, MapNode, PositionArray, fetch

__all__ = ["SliceMap"]

T = TypeVar("T")


class SliceMap(MapNode[T]):
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

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T]:
        return fetch(*self.parent_positions(positions, epochs))

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[T], PositionArray, EpochArray]:
        parent_positions = self._range.start + positions * self._range.step
        return self._parent, parent_positions, np.zeros_like(epochs)

    def __repr__(self) -> str:
        return f"SliceMap({self._parent!r}, {self._range!r})"
