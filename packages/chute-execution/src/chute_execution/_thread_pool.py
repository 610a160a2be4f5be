"""`ReadPool`: a small pool of daemon threads whose queued work can be dropped in O(1).

Unlike `concurrent.futures.ThreadPoolExecutor`, the threads are daemons and `shutdown`
waits for work in flight only up to a timeout, so a read stuck on storage can delay
neither `close()` nor interpreter exit indefinitely. Queued work belongs to a
*generation*: `discard()` starts a new one, and threads skip tasks of older ones, so
throwing away a read-ahead buffer costs O(1) however long the queue is.

The threads hold the task queue (each task its generation list), never the pool, so
an owner can shut the pool down from a `weakref.finalize` callback. At interpreter exit,
threads still running are stopped and waited for (`finish_at_exit`).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeAlias, TypeVar

from ._exit_threads import finish_at_exit

__all__ = ["ReadPool", "Slot", "start_worker", "work"]

R = TypeVar("R")

_Task: TypeAlias = "tuple[list[int], int, Slot[Any], Callable[..., Any], tuple[Any, ...]]"
"""`(generations, generation, slot, fn, args)`: run unless `generations[0]` moved on."""

_pool_numbers = itertools.count()


class Slot(Generic[R]):
    """The result of one task: `wait()` blocks until a thread has run it.

    A lock held from creation and released by the thread is the cheapest one-shot
    event CPython has (an `Event` allocates a `Condition` per slot).
    """

    __slots__ = ("_done", "error", "value")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self.value: R | None = None
        self.error: BaseException | None = None

    def finish(self) -> None:
        """Marks the task done (called once, by the thread that ran it)."""
        self._done.release()

    def wait(self) -> R:
        """Blocks until the task ran; returns its value or raises its exception.

        Interruptible (Ctrl-C); may be called again after an interruption.
        """
        with self._done:
            pass
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def work(tasks: queue.SimpleQueue[_Task | None]) -> None:
    """A pool thread: runs `tasks` until it gets None; skips those of a dropped generation."""
    while (task := tasks.get()) is not None:
        generations, task_generation, slot, fn, args = task
        if task_generation == generations[0]:
            try:
                slot.value = fn(*args)
            except BaseException as error:  # Handed to the consumer, whatever it is.
                slot.error = error
        slot.finish()
        del task, generations, slot, fn, args  # Do not keep the last result alive while idle.


def start_worker(
    tasks: queue.SimpleQueue[_Task | None], name: str, stop: Callable[[], object]
) -> threading.Thread:
    """Starts a daemon thread running `work(tasks)`; interpreter exit calls `stop()`."""
    thread = threading.Thread(target=work, args=(tasks,), name=name, daemon=True)
    thread.start()
    finish_at_exit(thread, stop)
    return thread


class ReadPool:
    """Up to `max_threads` daemon threads running submitted calls in FIFO order.

    Threads start on demand (one per `submit` until `max_threads`). Not thread-safe:
    one owner submits, discards and shuts down.

    Args:
        max_threads: the most threads to start (>= 1).
        name: thread name prefix (threads are named `{name}-{pool}-{i}`).
    """

    def __init__(self, max_threads: int, name: str) -> None:
        self._max_threads = max_threads
        self._name = f"{name}-{next(_pool_numbers)}"
        self._tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._generation = [0]
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., R], *args: Any) -> Slot[R]:
        """Queues `fn(*args)` in the current generation; returns its slot."""
        slot: Slot[R] = Slot()
        self._tasks.put((self._generation, self._generation[0], slot, fn, args))
        if len(self._threads) < self._max_threads:
            name = f"{self._name}-{len(self._threads)}"
            self._threads.append(start_worker(self._tasks, name, self.stop_soon))
        return slot

    def discard(self) -> None:
        """Drops every queued task (tasks already running finish, unobserved)."""
        self._generation[0] += 1

    def stop_soon(self) -> None:
        """Drops queued tasks and asks the threads to stop, without waiting."""
        self.shutdown(0)

    def shutdown(self, timeout: float | None) -> bool:
        """Drops queued tasks and stops the threads, waiting at most `timeout` seconds.

        Args:
            timeout: seconds to wait for tasks in flight; 0 does not wait, None waits
                until they finish.

        Returns:
            Whether every thread has exited. Threads still running a task exit when it
            returns (they are daemons, so they never block interpreter exit).
        """
        self.discard()
        threads, self._threads = self._threads, []
        for _ in threads:
            self._tasks.put(None)
        if timeout is not None and timeout <= 0:
            return not any(thread.is_alive() for thread in threads)
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            if thread is threading.current_thread():
                continue  # A finalizer run by a pool thread cannot join itself.
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        return not any(thread.is_alive() for thread in threads)

    @property
    def num_threads(self) -> int:
        """Threads started and not yet shut down."""
        return len(self._threads)
