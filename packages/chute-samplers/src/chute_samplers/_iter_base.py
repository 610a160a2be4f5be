"""`IterNode`: the base class of chute's checkpointable iterators (streams)."""

from __future__ import annotations

import abc
from typing import Generic, TypeVar

from chute_sources import IteratorState

__all__ = ["IterNode"]

T = TypeVar("T")


class IterNode(abc.ABC, Generic[T]):
    """A Python iterator whose position is a small JSON-serialisable dict.

    Subclasses implement `__next__`, `get_state` and `set_state` (the
    `chute_sources.CheckpointableIterator` protocol). The contract: after
    `b.set_state(a.get_state())`, `b` yields exactly what `a` yields from there on,
    whatever `b` did before; `get_state` is cheap. An iterator is used by one thread at a
    time.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = SequentialIter(["a", "b", "c"])
        >>> next(it), it.get_state()
        ('a', {'position': 1})
    """

    def __iter__(self) -> IterNode[T]:
        return self

    @abc.abstractmethod
    def __next__(self) -> T:
        """Returns the next element, or raises `StopIteration` at the end."""

    @abc.abstractmethod
    def get_state(self) -> IteratorState:
        """Returns the position as a JSON-serialisable dict."""

    @abc.abstractmethod
    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the position `state` (from `get_state`) describes.

        Raises:
            chute_sources.InvalidStateError: the state is malformed or out of range.
        """
