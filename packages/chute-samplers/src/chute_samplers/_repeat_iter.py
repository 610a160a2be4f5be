"""`RepeatIter`: a stream read again from its start, for several epochs or endlessly."""

from __future__ import annotations

import sys
from typing import TypeVar, cast

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
    StageTraits,
    declare_op,
)
from chute_core.internal import check_optional_int, state_dict, state_int, state_parent

from ._iter_base import IterNode
from ._mix_iter import check_iterator
from ._repeat import RepeatMap
from ._repeat_states import AHEAD

__all__ = ["ENDED", "REPEAT", "RepeatIter"]

ENDED = sys.maxsize
"""The epoch of an endless repeat that ended (its parent had no element)."""

T = TypeVar("T")


class RepeatIter(IterNode[T]):
    """Yields `parent`'s elements, then again from its start, `num_epochs` times in all.

    Each epoch after the first begins by restoring the parent's starting state (taken
    when this iterator was built), which by the state contract is the same stream as a
    fresh parent: the stages before the repeat yield the same elements every epoch
    (as in Grain). Restoring instead of rebuilding keeps what the parent holds: a
    `CacheIter` under the repeat replays its cache. An empty parent ends the stream at
    once, even when endless.

    The state is `{"epoch": e, "parent": <the parent's state>}`, `e` in `[0,
    num_epochs]` (`num_epochs` once the stream has ended; `ENDED`, `sys.maxsize`, once an
    endless one has). The `origin` of an
    element is `(epoch,) + <its origin in the parent>`, so a random map after the
    repeat draws anew each epoch. Resharded to another process count
    (`chute_checkpoint.reshard`), a state may also list the parent's states for the
    epochs after `e` (`ahead`): when an epoch ends, the next one starts there rather
    than at the parent's start, and such an epoch that yields nothing (others read
    all of it) does not end the stream.

    Args:
        parent: a checkpointable iterator at its start.
        num_epochs: passes over the parent (>= 0), or None for endless.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = RepeatIter(SequentialIter(["a", "b"]), num_epochs=2)
        >>> next(it), next(it), next(it), it.get_state(), it.origin
        ('a', 'b', 'a', {'epoch': 1, 'parent': {'position': 1}}, (1, 0))
        >>> list(it)
        ['b']
    """

    def __init__(self, parent: CheckpointableIterator[T], num_epochs: int | None = None) -> None:
        check_iterator(parent, "RepeatIter", "parent")
        self._parent = parent
        self._num_epochs = check_optional_int(num_epochs, "num_epochs", "RepeatIter")
        self._start = parent.get_state()
        self._epoch = 0
        self._yielded = False  # Whether this epoch has yielded (an empty parent ends all).
        self._ahead: list[IteratorState] = []  # The parent's states of later epochs.

    @property
    def num_epochs(self) -> int | None:
        """The number of passes (None: endless)."""
        return self._num_epochs

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(epoch,) + parent.origin` of the element last returned."""
        inner: tuple[int, ...] | None = getattr(self._parent, "origin", None)
        return None if inner is None else (self._epoch, *inner)

    def __next__(self) -> T:
        end = ENDED if self._num_epochs is None else self._num_epochs
        while self._epoch < end:
            try:
                element = next(self._parent)
            except StopIteration:
                if not self._yielded:  # A whole epoch without an element: stop.
                    self._epoch = end
                    raise
                self._epoch += 1
                self._yielded = False
                if self._num_epochs is not None and self._epoch >= self._num_epochs:
                    raise
                if self._ahead:  # Resharded: where this epoch starts for this process.
                    self._parent.set_state(self._ahead.pop(0))
                    self._yielded = True  # Empty when others read it all: not the end.
                else:
                    self._parent.set_state(self._start)
                continue
            self._yielded = True
            return element
        raise StopIteration

    def get_state(self) -> IteratorState:
        state: IteratorState = {"epoch": self._epoch, "parent": self._parent.get_state()}
        if self._ahead:
            state[AHEAD] = list(self._ahead)
        return state

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("epoch", "parent"), (AHEAD,))
        most = sys.maxsize if self._num_epochs is None else self._num_epochs
        epoch = state_int(self, checked, "epoch", maximum=most)
        ahead = checked.get(AHEAD, [])
        if not isinstance(ahead, list) or not all(isinstance(a, dict) for a in ahead):
            raise InvalidStateError(
                f"{self!r}: state['ahead'] must list the parent's states of later epochs, "
                f"got {ahead!r:.200}."
            )
        if ahead and self._num_epochs is not None and epoch + len(ahead) >= self._num_epochs:
            raise InvalidStateError(
                f"{self!r}: state['ahead'] lists {len(ahead)} epochs after epoch {epoch}, "
                f"past the last of {self._num_epochs}."
            )
        previous = self._parent.get_state()
        try:  # Each epoch's state is tried now: a damaged one moves nothing.
            for later in ahead:
                self._parent.set_state(cast(IteratorState, later))
            self._parent.set_state(state_parent(self, checked))
        except BaseException:
            self._parent.set_state(previous)
            raise
        self._epoch, self._ahead = epoch, [cast(IteratorState, a) for a in ahead]
        self._yielded = checked["parent"] != self._start

    def __repr__(self) -> str:
        return f"RepeatIter(num_epochs={self._num_epochs})"


REPEAT = declare_op("repeat", StageTraits(repeats=True), map_node=RepeatMap, iter_node=RepeatIter)
"""The op's declaration (see `chute_core.declare_op`)."""
