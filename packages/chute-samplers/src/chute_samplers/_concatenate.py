"""`ConcatenateMap` and `ConcatenateIter`: datasets or streams one after another."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from chute_core import (
    CheckpointableIterator,
    IteratorState,
    RandomAccessDataSource,
    StageTraits,
    declare_op,
)
from chute_core.internal import (
    check_dataset,
    check_sequence,
    restore_all,
    state_dict,
    state_dicts,
    state_int,
)

from ._iter_base import IterNode
from ._mix_iter import check_iterator
from ._node import ENDLESS, EpochArray, MapNode, PositionArray, fetch

__all__ = ["CONCATENATE", "ConcatenateIter", "ConcatenateMap"]


class ConcatenateMap(MapNode[Any]):
    """All positions of `parents[0]`, then of `parents[1]`, ...: random access over them.

    Position `i` is read from the parent whose range of positions holds it (a binary
    search over the cumulative lengths). Endless parents are refused. Epochs pass on to
    the parents.

    Args:
        parents: finite nodes, sources or sequences, at least one.

    Example:
        >>> node = ConcatenateMap([range(3), ["a", "b"]])
        >>> len(node), list(node), node[3]
        (5, [0, 1, 2, 'a', 'b'], 'a')
    """

    def __init__(self, parents: Sequence[RandomAccessDataSource[Any]]) -> None:
        check_sequence(parents, "parents", "ConcatenateMap")
        if not parents:
            raise ValueError("ConcatenateMap: parents is empty; pass at least one dataset.")
        for number, parent in enumerate(parents):
            check_dataset(parent, "ConcatenateMap", f"parents[{number}]")
            if len(parent) >= ENDLESS:
                raise ValueError(
                    f"ConcatenateMap: parents[{number}] is endless (len sys.maxsize), so the "
                    "parents after it would never be reached; repeat after concatenating."
                )
        self._parents = tuple(parents)
        self._starts = [0, *itertools.accumulate(len(parent) for parent in parents)]
        if self._starts[-1] >= ENDLESS:
            raise ValueError("ConcatenateMap: the parents together have sys.maxsize elements.")

    def __len__(self) -> int:
        return self._starts[-1]

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[Any]:
        owners = np.searchsorted(np.asarray(self._starts[1:]), positions, side="right")
        result: list[Any] = [None] * len(positions)
        for number in np.unique(owners).tolist():
            where = np.flatnonzero(owners == number)
            inner = positions[where] - self._starts[number]
            for slot, element in zip(
                where.tolist(), fetch(self._parents[number], inner, epochs[where]), strict=True
            ):
                result[slot] = element
        return result

    def locate(self, position: int) -> tuple[int, int]:
        """`(parent, position in it)` of an in-range position.

        Example:
            >>> ConcatenateMap([range(3), range(2)]).locate(4)
            (1, 1)
        """
        number = bisect.bisect_right(self._starts, position) - 1
        return number, position - self._starts[number]

    def __repr__(self) -> str:
        return f"ConcatenateMap({len(self._parents)} parents, len={len(self)})"


class ConcatenateIter(IterNode[Any]):
    """Yields every element of `parents[0]`, then of `parents[1]`, ...

    The state is `{"current": k, "parents": [<each parent's state>]}`, `k` the parent
    being read. The `origin` of an element is `(k,) + <its origin in parent k>`.

    Args:
        parents: checkpointable iterators, at least one.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = ConcatenateIter([SequentialIter(["a", "b"]), SequentialIter(["c"])])
        >>> next(it), next(it), next(it), it.origin
        ('a', 'b', 'c', (1, 0))
        >>> it.get_state()
        {'current': 1, 'parents': [{'position': 2}, {'position': 1}]}
    """

    def __init__(self, parents: Sequence[CheckpointableIterator[Any]]) -> None:
        check_sequence(parents, "parents", "ConcatenateIter")
        if not parents:
            raise ValueError("ConcatenateIter: parents is empty; pass at least one stream.")
        for number, parent in enumerate(parents):
            check_iterator(parent, "ConcatenateIter", f"parents[{number}]")
        self._parents = tuple(parents)
        self._current = 0

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(parent,) + parent.origin` of the element last returned."""
        if self._current >= len(self._parents):
            return None
        inner: tuple[int, ...] | None = getattr(self._parents[self._current], "origin", None)
        return None if inner is None else (self._current, *inner)

    def __next__(self) -> Any:
        while self._current < len(self._parents):
            try:
                return next(self._parents[self._current])
            except StopIteration:
                if self._current + 1 == len(self._parents):
                    raise
                self._current += 1
        raise StopIteration

    def get_state(self) -> IteratorState:
        return {
            "current": self._current,
            "parents": [parent.get_state() for parent in self._parents],
        }

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("current", "parents"))
        current = state_int(self, checked, "current", maximum=len(self._parents) - 1)
        restore_all(self._parents, state_dicts(self, checked, "parents", len(self._parents)))
        self._current = current

    def __repr__(self) -> str:
        return f"ConcatenateIter({len(self._parents)} parents)"


CONCATENATE = declare_op(
    "concatenate",
    StageTraits(),
    map_node=ConcatenateMap,
    iter_node=ConcatenateIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
