"""`ThreadPrefetchIter`: a checkpointable iterator advanced by one background thread."""

from __future__ import annotations

import weakref
from typing import Any, TypeVar, cast

from chute_core import CheckpointableIterator, IteratorState, StageTraits, declare_op
from chute_core.internal import check_count
from chute_samplers import IterNode

from ._channel import ELEMENT, END, Channel

__all__ = ["PREFETCH", "ThreadPrefetchIter"]

T = TypeVar("T")

JOIN_TIMEOUT = 10.0
"""Seconds `close()` waits for the parent's `next()` in flight before leaving it."""


class ThreadPrefetchIter(IterNode[T]):
    """Runs `next(parent)` on a background thread, up to `buffer_size` elements ahead.

    Yields exactly what `parent` yields, in order, and its state is the parent's state
    right after the last element received (the producer thread records
    `parent.get_state()` with each element), so states move freely between this
    iterator, other buffer sizes and the bare parent. `get_state()` never waits. The
    `origin` of an element (see `chute_samplers.IterNode`) is recorded with it too, so
    a `RandomMapIter` above draws what it would draw over the bare parent.

    Exceptions from the parent are raised in the consumer after the elements before
    them, with their type and traceback; afterwards the iterator continues as the parent
    would (the thread stops at the exception and restarts on the next `next()`).

    Threads: the thread starts on the first `next()` and stops at the parent's end or
    exception, in `set_state` (which waits for the parent's `next()` in flight, then
    moves the parent), in `close()`, and when the iterator is garbage collected. With
    `buffer_size=0` no thread is used: calls go straight to the parent.

    Args:
        parent: a checkpointable iterator; only the producer thread touches it while a
            thread runs.
        buffer_size: elements buffered ahead of the consumer (the parent may have
            produced one more, waiting for room).

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = ThreadPrefetchIter(SequentialIter(range(6)), buffer_size=2)
        >>> next(it), next(it), it.get_state()
        (0, 1, {'position': 2})
        >>> rest = list(it)
        >>> it.set_state({"position": 2})
        >>> list(it) == rest == [2, 3, 4, 5]
        True
    """

    def __init__(self, parent: CheckpointableIterator[T], buffer_size: int) -> None:
        if not isinstance(parent, CheckpointableIterator):
            raise TypeError(
                "ThreadPrefetchIter: parent must be a checkpointable iterator (with "
                f"__next__, get_state and set_state), got {type(parent).__name__}; wrap a "
                "random-access dataset in SequentialIter or PrefetchReadIter first."
            )
        self._parent = parent
        self._buffer_size = check_count(buffer_size, "buffer_size", "ThreadPrefetchIter")
        self._state = parent.get_state()  # The parent's state after the last element.
        self._origin: tuple[int, ...] | None = None  # The parent's origin of that element.
        self._parent_ahead = False  # Whether the parent has moved past self._state.
        self._channel: Channel | None = None
        self._lingering: Channel | None = None  # Stopped, but still in next(parent).
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def parent(self) -> CheckpointableIterator[T]:
        """The iterator this one prefetches from."""
        return self._parent

    @property
    def buffer_size(self) -> int:
        """Elements buffered ahead of the consumer, at most."""
        return self._buffer_size

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The parent's origin of the element last returned (None if it has none)."""
        if self._buffer_size == 0:
            origin: tuple[int, ...] | None = getattr(self._parent, "origin", None)
            return origin
        return self._origin

    def __next__(self) -> T:
        if self._buffer_size == 0:
            return next(self._parent)
        channel = self._channel if self._channel is not None else self._start()
        kind, value, state, self._origin = channel.get()
        if kind == ELEMENT:
            self._state = cast(IteratorState, state)  # Elements always carry a state.
            element: T = value
            return element
        self._stop(JOIN_TIMEOUT)  # It has sent its last item and is returning.
        # The parent is where the thread left it, unless get_state() itself failed.
        self._parent_ahead = state is None
        if state is not None:
            self._state = state
        if kind == END:
            raise StopIteration
        raise value

    def start_prefetch(self) -> None:
        """Starts the producer thread now (if there is none), filling the buffer ahead.

        The thread owns the parent from then on, so the call is not forwarded to it:
        the parent's own work starts when the thread first asks it for an element.
        """
        if self._buffer_size and self._channel is None:
            self._start()

    def _start(self) -> Channel:
        self._stop(None)  # A thread stopped earlier may still be inside next(parent).
        if self._parent_ahead:
            self._parent.set_state(self._state)
            self._parent_ahead = False
        channel = self._channel = Channel(self._parent, self._buffer_size)
        # Stops the thread when this iterator is collected; holds no reference to it.
        self._finalizer = weakref.finalize(self, channel.stop, 0)
        return channel

    def _forget_channel(self) -> Channel | None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        channel, self._channel = self._channel, None
        return channel

    def _stop(self, timeout: float | None) -> bool:
        """Stops the producer thread, waiting up to `timeout` seconds for it to exit.

        Returns:
            Whether no thread uses the parent any more.
        """
        channel = self._forget_channel()
        if channel is not None:
            self._parent_ahead = True  # It may have run ahead of the consumer.
            self._lingering = channel
        if self._lingering is not None and self._lingering.stop(timeout):
            self._lingering = None
        return self._lingering is None

    def get_state(self) -> IteratorState:
        if self._buffer_size == 0:
            return self._parent.get_state()
        return self._state

    def set_state(self, state: IteratorState, /) -> None:
        if self._buffer_size == 0:
            self._parent.set_state(state)
            return
        self._stop(None)  # Must wait: the parent is not safe to move while it runs.
        self._parent_ahead = True  # Until set_state below succeeds.
        self._parent.set_state(state)
        self._state = self._parent.get_state()
        self._origin = None
        self._parent_ahead = False

    def close(self) -> None:
        """Stops the thread, dropping buffered elements, and closes the parent.

        Waits up to `JOIN_TIMEOUT` seconds for the parent's `next()` in flight; if it
        is still running then, the thread exits when it returns and the parent is not
        closed (it is in use); a later `next()` or `set_state` waits for that call. The
        position is kept: a later `next()` restarts the thread at the element after the
        last one received.
        """
        if self._stop(JOIN_TIMEOUT):
            close = getattr(self._parent, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> ThreadPrefetchIter[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ThreadPrefetchIter({self._parent!r}, buffer_size={self._buffer_size})"


PREFETCH = declare_op(
    "prefetch",
    StageTraits(keeps_positions=True, performance=frozenset({"buffer_size"})),
    iter_node=ThreadPrefetchIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
