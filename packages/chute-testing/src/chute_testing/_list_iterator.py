"""Test helpers: a checkpointable iterator over an in-memory list.

For tests and examples of iterators that take a parent (`BatchIter`, packing, ...).
Use `chute_testing.assert_resumes` to check resuming.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Self, TypeVar

from chute_core import InvalidStateError, IteratorState
from chute_core.internal import state_dict, state_int

__all__ = ["ListIterator"]

T = TypeVar("T")


class ListIterator(Generic[T]):
    """The items of a list, in order, as a checkpointable iterator.

    State: `{"index": i}`, the position of the next item. Once exhausted it stays
    exhausted until `set_state` moves it back. Items are yielded as stored (no copy).
    The `origin` of an item is `(its index in the list,)`, as for
    `chute_samplers.SequentialIter`.

    Args:
        items: the items.
        origins: False: its items have no origin (`origin` is always None), as a
            format's own reader that does not say which record an element is.

    Example:
        >>> it = ListIterator(["a", "b", "c"])
        >>> next(it), it.get_state()
        ('a', {'index': 1})
        >>> it.set_state({"index": 2})
        >>> list(it), it.origin
        (['c'], (2,))
        >>> unnamed = ListIterator(["a"], origins=False)
        >>> next(unnamed), unnamed.origin
        ('a', None)
    """

    def __init__(self, items: Sequence[T], *, origins: bool = True) -> None:
        self._items = items
        self._origins = origins
        self._index = 0
        self._last = -1  # The index of the item last returned (-1: none).

    def __repr__(self) -> str:
        return f"ListIterator(<{len(self._items)} items>)"

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(index,)` of the item last returned; None before the first one, or without."""
        return None if self._last < 0 or not self._origins else (self._last,)

    def __iter__(self) -> Self:
        """Returns the iterator itself."""
        return self

    def __next__(self) -> T:
        """Returns the next item; raises `StopIteration` at the end."""
        index = self._index
        if index >= len(self._items):
            raise StopIteration
        self._index = index + 1
        self._last = index
        return self._items[index]

    def get_state(self) -> IteratorState:
        """Returns `{"index": i}`."""
        return {"index": self._index}

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to item `state["index"]` (from `get_state`).

        Raises:
            InvalidStateError: `state` is malformed or past the end of the list.
        """
        index = state_int(self, state_dict(self, state, ("index",)), "index")
        if index > len(self._items):
            raise InvalidStateError(
                f"{self!r}: state['index'] = {index} is past the end ({len(self._items)})."
            )
        self._index, self._last = index, -1
