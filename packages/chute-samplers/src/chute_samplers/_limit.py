"""`LimitIter`: the first `count` elements of a stream."""

from __future__ import annotations

from typing import TypeVar

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
    StageTraits,
    declare_op,
)
from chute_core.internal import check_int, state_dict, state_int, state_parent

from ._iter_base import IterNode
from ._mix_iter import check_iterator

__all__ = ["LIMIT", "LimitIter"]

T = TypeVar("T")


class LimitIter(IterNode[T]):
    """Yields the first `count` elements of `parent` (fewer if it ends before).

    It never asks the parent for element `count + 1`, so a limit over an endless or
    costly stream stops without reading past it. The state is `{"count": n, "parent":
    <the parent's state>}`, `n` the elements yielded so far; the `origin` is the
    parent's.

    Args:
        parent: a checkpointable iterator.
        count: the most elements to yield (>= 0).

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = LimitIter(SequentialIter(range(100)), 3)
        >>> next(it), it.get_state()
        (0, {'count': 1, 'parent': {'position': 1}})
        >>> list(it)
        [1, 2]
    """

    def __init__(self, parent: CheckpointableIterator[T], count: int) -> None:
        check_iterator(parent, "LimitIter", "parent")
        self._parent = parent
        self._count = check_int(count, "count", "LimitIter")
        self._yielded = 0

    @property
    def count(self) -> int:
        """The most elements this iterator yields."""
        return self._count

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The parent's origin of the element last returned."""
        origin: tuple[int, ...] | None = getattr(self._parent, "origin", None)
        return origin

    def __next__(self) -> T:
        if self._yielded >= self._count:
            raise StopIteration
        element = next(self._parent)
        self._yielded += 1
        return element

    def get_state(self) -> IteratorState:
        return {"count": self._yielded, "parent": self._parent.get_state()}

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("count", "parent"))
        count = state_int(self, checked, "count")
        if count > self._count:
            raise InvalidStateError(
                f"{self!r}: state['count'] = {count} is past the limit {self._count}; the "
                "state belongs to another pipeline."
            )
        self._parent.set_state(state_parent(self, checked))
        self._yielded = count

    def __repr__(self) -> str:
        return f"LimitIter(count={self._count})"


LIMIT = declare_op("limit", StageTraits(), iter_node=LimitIter)
"""The op's declaration (see `chute_core.declare_op`)."""
