"""`RepeatMap`: a random-access dataset repeated for several epochs, or endlessly."""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from chute_core import LengthOverflowError, RandomAccessDataSource
from chute_core.internal import check_dataset, check_int

from ._node import (
    ENDLESS,
    EpochArray,
    PositionArray,
    PositionMap,
    node_epoch_length,
)

__all__ = ["RepeatMap"]

T = TypeVar("T")


class RepeatMap(PositionMap[T]):
    """Repeats `parent` `num_epochs` times, or endlessly (length `sys.maxsize`).

    Position `i` is the parent's position `i % len(parent)` in pass `i // len(parent)`;
    each pass is an epoch for the nodes below, so a `ShuffleMap` under the repeat
    reshuffles every pass. An endless repeat (or a repeat of an endless parent) has
    length `sys.maxsize`; a finite one longer than that raises
    `chute_sources.LengthOverflowError` (an `OverflowError`).

    Args:
        parent: a node, a source, or any sequence.
        num_epochs: the number of passes (>= 0), or None for endless.

    Example:
        >>> from chute_samplers import ShuffleMap
        >>> node = RepeatMap(ShuffleMap(range(4), seed=0), num_epochs=2)
        >>> first, second = list(node)[:4], list(node)[4:]
        >>> sorted(first) == sorted(second) == [0, 1, 2, 3], first != second
        (True, True)
        >>> len(RepeatMap(range(4), None)) == ENDLESS
        True
    """

    def __init__(self, parent: RandomAccessDataSource[T], num_epochs: int | None = None) -> None:
        check_dataset(parent, "RepeatMap")
        self._parent = parent
        self._num_epochs = (
            None if num_epochs is None else check_int(num_epochs, "num_epochs", "RepeatMap")
        )
        size = len(parent)
        if size == 0:
            self._length = 0
        elif self._num_epochs is None:
            self._length = ENDLESS
        elif size == ENDLESS and self._num_epochs:
            self._length = ENDLESS  # An endless parent stays endless.
        elif size * self._num_epochs > ENDLESS:
            raise LengthOverflowError(
                f"RepeatMap (repeat): {size} elements x {self._num_epochs} epochs is more "
                f"than len() can count (sys.maxsize = {ENDLESS}); pass num_epochs=None for "
                "an endless repeat, or fewer epochs."
            )
        else:
            self._length = size * self._num_epochs
        self._passes = -(-self._length // size) if size else 0
        inner = node_epoch_length(parent)
        self._epoch_length = inner if inner > 0 and size % inner == 0 else size

    @property
    def parent(self) -> RandomAccessDataSource[T]:
        """The repeated dataset."""
        return self._parent

    @property
    def num_epochs(self) -> int | None:
        """The number of passes (None: endless)."""
        return self._num_epochs

    def __len__(self) -> int:
        return self._length

    @property
    def epoch_length(self) -> int:
        """One pass of the parent (or the parent's own epochs, if they tile it)."""
        return self._epoch_length

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[T], PositionArray, EpochArray]:
        passes, within = np.divmod(positions, len(self._parent))
        inner_epochs = epochs * np.uint64(self._passes) + passes.astype(np.uint64)
        return self._parent, within, inner_epochs

    def __repr__(self) -> str:
        return f"RepeatMap({self._parent!r}, num_epochs={self._num_epochs})"
