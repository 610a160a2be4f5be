"""`Channel`: a bounded hand-over from one producer thread to one consumer.

The producer thread calls `next(parent)` and records the parent's state and origin
with each element, so the consumer can report the state right after the element it
received last, however far ahead the thread has run.
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import Any, Final, TypeAlias

from chute_core import CheckpointableIterator, IteratorState

from ._exit_threads import finish_at_exit

__all__ = ["ELEMENT", "END", "ERROR", "Channel", "Item"]

_POLL = 0.1  # Seconds between checks for a stop request or a dead producer.

ELEMENT: Final = 0
END: Final = 1
ERROR: Final = 2

# (kind, element or exception, the parent's state and origin right after producing it)
Item: TypeAlias = "tuple[int, Any, IteratorState | None, tuple[int, ...] | None]"


def _produce(parent: CheckpointableIterator[Any], channel: Channel) -> None:
    """The producer thread: `next(parent)`, its state and origin into `channel`.

    Ends after sending the parent's end or exception, or when the channel is stopped.
    """
    while not channel.stopped:
        kind, value = ELEMENT, None
        try:
            value = next(parent)
        except StopIteration:
            kind = END
        except BaseException as error:  # Sent to the consumer, whatever it is.
            kind, value = ERROR, error
        try:
            state: IteratorState | None = parent.get_state()
            origin: tuple[int, ...] | None = getattr(parent, "origin", None)
        except BaseException as error:
            kind, value, state, origin = ERROR, error, None, None
        item = (kind, value, state, origin)
        del value
        if not channel.put(item) or kind != ELEMENT:
            return


class Channel:
    """A bounded FIFO from one producer thread to one consumer, and the thread itself.

    The fast path takes no lock: `deque.append` and `popleft` are atomic. A side that
    must wait raises its `*_waiting` flag, looks at the deque once more, then blocks on
    its wake-up queue; the other side, after changing the deque, sends a token if the
    flag is up. (Looking again after raising the flag means no wake-up is lost; a token
    that arrives late only causes one more look.) `SimpleQueue` tokens hand over faster
    than `Event`s, which matters: a hand-over between threads costs ~50-100 us here.
    The channel holds no reference to the iterator that owns it, so a
    `weakref.finalize` of that iterator can stop it.
    """

    def __init__(self, parent: CheckpointableIterator[Any], capacity: int) -> None:
        self.items: collections.deque[Item] = collections.deque()
        self.capacity = capacity
        self.consumer_waiting = False
        self.producer_waiting = False
        self.wake_consumer: queue.SimpleQueue[None] = queue.SimpleQueue()
        self.wake_producer: queue.SimpleQueue[None] = queue.SimpleQueue()
        self.stopped = False  # Set once, by the consumer (or a finalizer).
        self.thread = threading.Thread(
            target=_produce, args=(parent, self), name="chute-prefetch", daemon=True
        )
        self.thread.start()
        finish_at_exit(self.thread, self.stop_soon)

    def put(self, item: Item) -> bool:
        """Producer side: appends `item` when there is room; False once stopped."""
        items, capacity = self.items, self.capacity
        while len(items) >= capacity and not self.stopped:
            self.producer_waiting = True
            if len(items) >= capacity:
                _wait(self.wake_producer)
            self.producer_waiting = False
        if self.stopped:
            return False
        items.append(item)
        if self.consumer_waiting:
            self.consumer_waiting = False
            self.wake_consumer.put(None)
        return True

    def get(self) -> Item:
        """Consumer side: the next item; `RuntimeError` if the thread died without one."""
        items = self.items
        while True:
            try:
                item = items.popleft()
            except IndexError:
                pass
            else:
                if self.producer_waiting:
                    self.producer_waiting = False
                    self.wake_producer.put(None)
                return item
            self.consumer_waiting = True
            if not items:
                # Items are appended before the thread ends: dead and empty means none come.
                if not self.thread.is_alive() and not items:
                    raise RuntimeError(
                        "ThreadPrefetchIter: the prefetch thread ended without a result; "
                        "this is a bug in chute, please report it."
                    )
                _wait(self.wake_consumer)
            self.consumer_waiting = False

    def stop_soon(self) -> None:
        """Stops the thread without waiting for it (at interpreter exit)."""
        self.stop(0)

    def stop(self, timeout: float | None) -> bool:
        """Stops the thread, dropping buffered items; returns whether it has exited."""
        self.stopped = True
        self.wake_producer.put(None)  # Wakes a producer waiting for room.
        self.items.clear()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)
        self.items.clear()
        return not self.thread.is_alive()


def _wait(tokens: queue.SimpleQueue[None]) -> None:
    """Blocks until a token arrives or `_POLL` seconds pass (then the caller looks again)."""
    try:
        tokens.get(timeout=_POLL)
    except queue.Empty:
        pass
