"""Forking workers straight from the consumer, only while that is provably safe.

The checks are the foundation's (`chute_core.internal.fork_refusal`, and one
thread in `/proc/self/task` right after the fork): no jax or obstore imported, no
other Python thread, no native thread that does not stop for a fork. A child whose
fork fails the last check is killed before it ran any code of the user's: it waits for
a go (`GO`) that only a verified fork gets.

The child (`forked_worker`) then sheds what it inherited and must not act on: it
ignores SIGINT (blocked by the parent across the fork, so a Ctrl-C at that instant
cannot reach it first), resets the consumer's Python signal handlers, freezes the
consumer's objects for the garbage collector (so no finalizer of the consumer's, such
as one that unlinks shared memory, ever runs in it), and closes its copies of the
consumer's ends of every worker connection. It exits through `os._exit` (no atexit
hook of the consumer's runs), and then runs `worker_main` exactly as a worker of the
fork server does, from the same shipped bytes.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import weakref
from multiprocessing.connection import Connection
from typing import Any

from chute_core.internal import UNSAFE_MODULES, fork_refusal, forking, thread_count

from ._worker import worker_main

__all__ = [
    "GO",
    "UNSAFE_MODULES",
    "fork_refusal",
    "forked_worker",
    "forking",
    "keep_from_forks",
    "probe_refusal",
    "thread_count",
]

GO = "chute-go"
"""What the consumer sends a forked worker once it has verified the fork."""

_CONSUMER_ENDS: weakref.WeakSet[Connection] = weakref.WeakSet()
"""The consumer's ends of worker connections: a forked worker closes its copies."""


def probe_refusal() -> str | None:
    """Like `fork_refusal`, but also forks a child that exits at once, to count threads.

    For deciding ahead of time (at `mp_prefetch`) whether the fork server will be
    needed: threads visible now may be ones that stop for a fork (OpenBLAS's).
    """
    refusal = fork_refusal()
    if refusal is not None or thread_count() == 1:
        return refusal
    with forking():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        threads = thread_count()
    if threads != 1:
        os.kill(pid, signal.SIGKILL)  # It may hang on a lock of a thread it lacks.
    os.waitpid(pid, 0)
    return None if threads == 1 else f"{threads} threads ran when it forked"


def keep_from_forks(connection: Connection) -> None:
    """Has every worker forked from now on close its copy of `connection` (ours)."""
    _CONSUMER_ENDS.add(connection)


def _shed_inheritance() -> None:
    """What a worker forked from the consumer does first (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    for number in signal.valid_signals():
        if number == signal.SIGINT:
            continue
        with contextlib.suppress(ValueError, OSError, TypeError):
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_DFL)
    gc.freeze()  # The consumer's objects: never collected here, so never finalized.
    for connection in list(_CONSUMER_ENDS):
        if not connection.closed:
            with contextlib.suppress(OSError):
                connection.close()


def forked_worker(connection: Connection, *worker_args: Any) -> None:
    """The target of a worker forked from the consumer: waits for `GO`, then `worker_main`.

    `worker_args` are those of `worker_main` after the connection. Anything but `GO`
    (the consumer stops it, or it is gone) ends the child before it runs user code.
    """
    _shed_inheritance()
    try:
        go = connection.recv()
    except (EOFError, OSError):
        return
    if go != GO:
        return
    worker, *rest = worker_args
    worker_main(worker, connection, *rest)
