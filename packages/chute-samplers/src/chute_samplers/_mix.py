"""`MixMap`: a deterministic weighted mixture of random-access datasets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from chute_core import RandomAccessDataSource
from chute_core.internal import check_dataset, check_sequence, distinct

from ._node import ENDLESS, EpochArray, MapNode, PositionArray, fetch
from ._schedule import MixSchedule

__all__ = ["MixMap", "gather"]

T = TypeVar("T")


def gather(
    parents: Sequence[RandomAccessDataSource[T]],
    components: PositionArray,
    occurrences: PositionArray,
    epochs: EpochArray,
) -> list[T]:
    """Reads `parents[components[i]][occurrences[i]]` for every `i`, one batch per parent."""
    result: list[T] = [None] * len(components)  # type: ignore[list-item]
    for component in distinct(components).tolist():
        where = np.flatnonzero(components == component)
        values = fetch(parents[component], occurrences[where], epochs[where])
        for slot, value in zip(where.tolist(), values, strict=True):
            result[slot] = value
    return result


class MixMap(MapNode[T]):
    """Mixes `parents` by `weights`, position by position, deterministically.

    In every prefix of the mixture each component's count is within one element of its
    weight's share (see `MixSchedule`), and any position is located in O(1). The mixture
    ends just before the first position that would need an element a component does not
    have (the remainder of the others is not used, as in Grain); repeat the components
    (`RepeatMap(c, None)`) to avoid that. If every component is endless the mixture is
    endless too (length `sys.maxsize`). Epochs pass on to the components.

    Args:
        parents: the components (nodes, sources or sequences), at least one.
        weights: one positive finite weight per component; None for equal weights.

    Example:
        >>> node = MixMap([["a0", "a1", "a2", "a3"], ["b0", "b1"]], weights=[2, 1])
        >>> list(node)
        ['a0', 'a1', 'b0', 'a2', 'a3', 'b1']
        >>> list(MixMap([["a0", "a1", "a2"], ["b0"]]))  # Ends when "b1" would be needed.
        ['a0', 'b0', 'a1']
    """

    def __init__(
        self,
        parents: Sequence[RandomAccessDataSource[T]],
        weights: Sequence[float] | None = None,
    ) -> None:
        check_sequence(parents, "parents", "MixMap")
        if not parents:
            raise ValueError("MixMap: parents is empty; pass at least one dataset.")
        for number, parent in enumerate(parents):
            check_dataset(parent, "MixMap", f"parents[{number}]")
        self._parents = tuple(parents)
        self._schedule = MixSchedule(weights, len(parents))
        lengths = [len(parent) for parent in parents]
        ends = [
            self._schedule.position_of(j, size) for j, size in enumerate(lengths) if size < ENDLESS
        ]
        self._length = min([*ends, ENDLESS])

    @property
    def parents(self) -> tuple[RandomAccessDataSource[T], ...]:
        """The components."""
        return self._parents

    @property
    def schedule(self) -> MixSchedule:
        """Which component each position comes from."""
        return self._schedule

    @property
    def min_chunk_size(self) -> int:
        """The fewest positions a reader should read at once: 4 per component.

        A chunk of `c` positions calls each of `k` components for about `c / k` of
        them, and each call costs the component's own overhead; readers that cut the
        mixture into chunks (`chute_execution.PrefetchReadIter`) take at least this many.

        Example:
            >>> MixMap([range(4)] * 64).min_chunk_size
            256
        """
        return 4 * len(self._parents)

    def __len__(self) -> int:
        return self._length

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T]:
        components, occurrences = self._schedule.locate(positions)
        return gather(self._parents, components, occurrences, epochs)

    def __repr__(self) -> str:
        return f"MixMap({list(self._parents)!r}, weights={list(self._schedule.weights)})"
