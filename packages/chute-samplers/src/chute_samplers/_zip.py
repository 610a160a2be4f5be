"""`ZipMap` and `ZipIter`: several datasets or streams read side by side, as tuples."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chute_core import (
    DROPPED,
    CheckpointableIterator,
    IteratorState,
    RandomAccessDataSource,
    StageTraits,
    declare_op,
)
from chute_core.internal import check_dataset, check_sequence, restore_all, state_dict, state_dicts

from ._iter_base import IterNode
from ._mix_iter import check_iterator
from ._node import EpochArray, MapNode, PositionArray, fetch

__all__ = ["ZIP", "ZipIter", "ZipMap"]


class ZipMap(MapNode[tuple[Any, ...]]):
    """Position `i` is `(parents[0][i], parents[1][i], ...)`; the length is the shortest's.

    Grain's `ZipMapDataset` refuses parents of different lengths; this takes the
    shortest, as Python's `zip` does (equal lengths give the same). A position one of
    the parents dropped (a filter) is dropped. Epochs pass on to every parent.

    Args:
        parents: nodes, sources or sequences, at least one.

    Example:
        >>> node = ZipMap([range(3), ["a", "b", "c", "d"]])
        >>> len(node), list(node)
        (3, [(0, 'a'), (1, 'b'), (2, 'c')])
    """

    def __init__(self, parents: Sequence[RandomAccessDataSource[Any]]) -> None:
        check_sequence(parents, "parents", "ZipMap")
        if not parents:
            raise ValueError("ZipMap: parents is empty; pass at least one dataset.")
        for number, parent in enumerate(parents):
            check_dataset(parent, "ZipMap", f"parents[{number}]")
        self._parents = tuple(parents)
        self._length = min(len(parent) for parent in parents)

    def __len__(self) -> int:
        return self._length

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[tuple[Any, ...]]:
        columns = [fetch(parent, positions, epochs) for parent in self._parents]
        return [
            DROPPED if any(value is DROPPED for value in row) else row  # type: ignore[misc]
            for row in zip(*columns, strict=True)
        ]

    def __repr__(self) -> str:
        return f"ZipMap({len(self._parents)} parents, len={self._length})"


class ZipIter(IterNode[tuple[Any, ...]]):
    """Yields `(next(parents[0]), next(parents[1]), ...)` until one of them ends.

    The state is `{"parents": [<each parent's state>]}`. The `origin` of a tuple is its
    first parent's origin of its element.

    Args:
        parents: checkpointable iterators, at least one.
        strict: when one parent ends, the others must end there too, else `ValueError`
            names the parents that had more (Grain's `ZipIterDataset(strict=True)`).

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = ZipIter([SequentialIter(list("abc")), SequentialIter(range(2))])
        >>> next(it), it.get_state()
        (('a', 0), {'parents': [{'position': 1}, {'position': 1}]})
        >>> list(it)
        [('b', 1)]
        >>> strict = ZipIter([SequentialIter([1, 2]), SequentialIter([1])], strict=True)
        >>> try:
        ...     list(strict)
        ... except ValueError as error:
        ...     print(str(error)[:53])
        ZipIter(strict=True): parent 1 ended, but parents [0]
    """

    def __init__(
        self, parents: Sequence[CheckpointableIterator[Any]], strict: bool = False
    ) -> None:
        check_sequence(parents, "parents", "ZipIter")
        if not isinstance(strict, bool):
            raise TypeError(f"ZipIter: strict must be a bool, got {strict!r}.")
        self._strict = strict
        if not parents:
            raise ValueError("ZipIter: parents is empty; pass at least one stream.")
        for number, parent in enumerate(parents):
            check_iterator(parent, "ZipIter", f"parents[{number}]")
        self._parents = tuple(parents)

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The first parent's origin of the tuple's first element."""
        origin: tuple[int, ...] | None = getattr(self._parents[0], "origin", None)
        return origin

    def __next__(self) -> tuple[Any, ...]:
        if not self._strict:
            return tuple([next(parent) for parent in self._parents])  # StopIteration ends.
        elements: list[Any] = []
        for number, parent in enumerate(self._parents):
            try:
                elements.append(next(parent))
            except StopIteration:
                self._check_all_ended(number)
                raise
        return tuple(elements)

    def _check_all_ended(self, ended: int) -> None:
        """Raises `ValueError` unless every parent ends where parent `ended` did."""
        longer = list(range(ended))  # These gave an element for this tuple already.
        for number in range(ended + 1, len(self._parents)):
            try:
                next(self._parents[number])
            except StopIteration:
                continue
            longer.append(number)
        if longer:
            raise ValueError(
                f"ZipIter(strict=True): parent {ended} ended, but parents {longer} have "
                "more elements; zip streams of the same length, or pass strict=False to "
                "end with the shortest."
            )

    def get_state(self) -> IteratorState:
        return {"parents": [parent.get_state() for parent in self._parents]}

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("parents",))
        restore_all(self._parents, state_dicts(self, checked, "parents", len(self._parents)))

    def __repr__(self) -> str:
        return f"ZipIter({len(self._parents)} parents)"


ZIP = declare_op("zip", StageTraits(), map_node=ZipMap, iter_node=ZipIter)
"""The op's declaration (see `chute_core.declare_op`)."""
