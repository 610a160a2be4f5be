"""Workers kept idle after their iterator ends, for the next iterator to take over.

An iterator that ends (exhausted, closed, garbage) parks its workers instead of
stopping them: each gives its slabs back (as a stopped worker does, `SlabPool`), then
waits up to `MultiprocessingOptions.idle_worker_seconds` for a new pipeline. The next
iterator of this process with the same worker options, started in the same setting
(working folder, `sys.path`, environment) and without a `worker_init_fn`, takes them
over: it sends them its pipeline (shipped, as at a start) and skips starting processes,
importing, opening native reader pools and faulting in a fresh heap.

Parked workers hold no shared memory. A parked worker exits on its own when its time
is up, when the consumer exits or dies, or at `stop_idle_workers()`; so they never
outlive the consumer. Only a worker that stopped cleanly is parked: one that died,
timed out or could not load its pipeline ends its whole group.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import sys
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from ._mp_options import MultiprocessingOptions
from ._worker import READY
from ._worker_stop import JOIN_SECONDS, ask, finish, linger, reap_lingering

__all__ = [
    "PARK",
    "IdleGroup",
    "claim",
    "park",
    "parked_count",
    "reuse_key",
    "stop_idle_workers",
]

PARK = "park"
"""The first item of the message that parks a worker: `(PARK, seconds)`."""

_MARGIN_SECONDS = 0.5
"""A group is taken over only this long before its workers' own deadline, at the latest."""


def _most_idle() -> int:
    """How many workers may wait parked at once: twice the cores (the oldest go first)."""
    return 2 * max(2, os.cpu_count() or 1)


Key = tuple[object, ...]


@dataclasses.dataclass(eq=False)  # Each group is itself: found and removed by identity.
class IdleGroup:
    """Parked workers of one pool: taken over whole, by an iterator with the same key."""

    processes: list[BaseProcess]
    connections: list[Connection]
    key: Key
    start_path: str
    until: float  # `time.monotonic()` after which its workers may have exited.


_IDLE: list[IdleGroup] = []
_LOCK = threading.RLock()  # Reentrant: a pool's finalizer may park within a claim (GC).
_OWNER = os.getpid()
_EXITING = False  # Set at exit: from then on workers are stopped, never parked.


def _forget_in_child() -> None:
    """A forked child's copy of the parked groups is its parent's: it never touches them."""
    global _OWNER, _LOCK
    _OWNER, _LOCK = os.getpid(), threading.RLock()
    _IDLE.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def parked_count() -> int:
    """How many workers wait parked now (read without the lock: a moment old at worst)."""
    return sum(len(group.processes) for group in list(_IDLE))


def reuse_key(options: MultiprocessingOptions, shipped_init: bytes | None) -> Key | None:
    """What a pool must share with a parked group to take it over; None: never parked.

    Workers with a `worker_init_fn` are never reused (it runs once per new worker),
    and neither are they when `idle_worker_seconds` is 0. Workers see the working
    folder, `sys.path` and environment of their start: those must not have changed.
    """
    if shipped_init is not None or options.idle_worker_seconds <= 0:
        return None
    environment = hash(frozenset(os.environ.items()))
    return (
        options.num_workers,
        options.per_worker_buffer_size,
        options.start_method,
        os.getcwd(),
        tuple(sys.path),
        environment,
    )


def _release(group: IdleGroup) -> None:
    """Tells a group's workers to exit (they hold no slabs) and leaves them to reaping."""
    now = time.monotonic()
    for connection in group.connections:
        with contextlib.suppress(OSError, ValueError):
            connection.send(None)
        connection.close()
    for process in group.processes:
        linger(process, now)


def _took(group: IdleGroup) -> bool:
    """(Under `_LOCK`.) Takes `group` out of the idle ones; False if it is gone already.

    The lock is reentrant, and the garbage collector may run a finalizer of another
    pool between a look at the idle groups and this: it parks that pool, and lets go
    of expired groups itself (`_expire`), maybe this one.
    """
    try:
        _IDLE.remove(group)
    except ValueError:
        return False
    return True


def _expire() -> None:
    """Lets go of groups that are past their time (nearly) or lost a worker.

    Then of the oldest ones, while more than `_most_idle()` workers wait.
    """
    now = time.monotonic()
    with _LOCK:
        stale = [
            group
            for group in list(_IDLE)
            if now > group.until - _MARGIN_SECONDS
            or not all(process.is_alive() for process in group.processes)
        ]
        gone = [group for group in stale if _took(group)]
        while len(_IDLE) > 1 and sum(len(group.processes) for group in _IDLE) > _most_idle():
            gone.append(_IDLE.pop(0))
    for group in gone:
        _release(group)
    reap_lingering()


def claim(key: Key | None, plan: bytes) -> IdleGroup | None:
    """Hands `plan` to a parked group with `key`, taken away from the idle ones.

    Each of its workers must acknowledge the plan (`READY`): one that died while
    parked (its death may not show yet) ends the group, and the next one with `key`
    is tried. None if no group takes the plan: the caller starts new workers.
    """
    if key is None or os.getpid() != _OWNER:
        return None
    _expire()
    while True:
        with _LOCK:
            group = next((group for group in _IDLE if group.key == key), None)
            if group is None:
                return None
            if not _took(group):
                continue
        if _hand_over(group.connections, plan):
            return group
        _release(group)


def _hand_over(connections: list[Connection], plan: bytes) -> bool:
    """Sends each worker `("plan", plan)`; whether all of them acknowledged it in time."""
    try:
        for connection in connections:
            connection.send(("plan", plan))
        deadline = time.monotonic() + JOIN_SECONDS
        for connection in connections:
            if not connection.poll(max(0.0, deadline - time.monotonic())):
                return False
            if connection.recv() != (READY,):
                return False
    except (OSError, EOFError, ValueError):
        return False  # A worker died while parked.
    return True


def park(
    processes: list[BaseProcess],
    connections: list[Connection],
    key: Key,
    start_path: str,
    seconds: float,
) -> None:
    """Parks a pool's workers for `seconds`, or stops them all if one does not confirm."""
    until = time.monotonic() + seconds  # Before they are asked: their deadline is later.
    confirmed = ask(connections, (PARK, seconds))
    if all(confirmed) and all(process.is_alive() for process in processes):
        with _LOCK:
            parked = not _EXITING and os.getpid() == _OWNER
            if parked:
                group = IdleGroup(list(processes), list(connections), key, start_path, until)
                _IDLE.append(group)
        if parked:
            _expire()
            return
    for connection, waiting in zip(connections, confirmed, strict=True):
        if waiting:
            with contextlib.suppress(OSError, ValueError):
                connection.send(None)  # Waiting for a pipeline: it exits at once.
    finish(processes, connections, confirmed)


def stop_idle_workers() -> int:
    """Stops the worker processes parked for the next iterator; returns how many.

    An iterator's workers wait idle for `MultiprocessingOptions.idle_worker_seconds`
    after it ends, so that the next iterator starts at once; call this to end them
    now (they also end by themselves, and with this process). It waits (at most a
    few seconds) until they have exited.

    Example:
        >>> from chute_execution import (
        ...     ChunkPlan, MultiprocessPrefetchIter, MultiprocessingOptions, stop_idle_workers)
        >>> plan = ChunkPlan(range(8), [], chunk_size=4)
        >>> _ = stop_idle_workers()  # Those of earlier examples.
        >>> list(MultiprocessPrefetchIter(plan, MultiprocessingOptions(num_workers=2)))
        [0, 1, 2, 3, 4, 5, 6, 7]
        >>> stop_idle_workers()
        2
    """
    if os.getpid() != _OWNER:
        return 0
    with _LOCK:
        groups, _IDLE[:] = list(_IDLE), []
    processes = [process for group in groups for process in group.processes]
    for group in groups:
        _release(group)
    deadline = time.monotonic() + JOIN_SECONDS
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    reap_lingering()
    return len(processes)


def _at_exit() -> None:
    global _EXITING
    _EXITING = True
    stop_idle_workers()


atexit.register(_at_exit)
