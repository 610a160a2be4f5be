"""Forking this process only while that is provably safe, and work done in such a child.

A fork copies one thread: the one that forks. A lock another thread held at that
moment stays held forever in the child, so forking a process that runs other threads
(jax's, ArrayRecord's native readers, obstore's runtime, a Python thread) can deadlock
the child. So a fork is made only when:

- no module known to be unsafe in a forked child is imported (`UNSAFE_MODULES`);
- no Python thread but this one runs (`threading.active_count() == 1`);
- right after the fork, this process has a single thread (`/proc/self/task`). Native
  libraries that stop their own threads for a fork (OpenBLAS, which NumPy loads, does)
  pass; any other thread fails it, and the child is killed before it ran anything: it
  waits for a go that only a verified fork gets.

chute's own background threads that come and go (the execution layer's timer for idle
shared memory) register a stopper (`quiet_during_forks`), and whoever checks and forks
does it inside `threads_quieted()`, so that they never rule out a fork.

`map_in_fork` uses this for work that would leave native threads running in this
process: counting the records of ArrayRecord files opens readers, which start
ArrayRecord's pool of threads for good, and a process with those threads can no longer
fork its workers (chute's execution layer forks them while it is single-threaded).
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

__all__ = [
    "UNSAFE_MODULES",
    "fork_refusal",
    "forking",
    "map_in_fork",
    "quiet_during_forks",
    "thread_count",
    "threads_quieted",
]

T = TypeVar("T")

UNSAFE_MODULES = {
    "jax": "jax is imported (workers never hold jax)",
    "jaxlib": "jaxlib is imported (workers never hold jax)",
    "obstore": "obstore is imported (its runtime does not survive a fork)",
}
"""Modules whose presence in this process rules out forking, and why."""


_STOPPERS: list[Callable[[], AbstractContextManager[None]]] = []


def quiet_during_forks(stopper: Callable[[], AbstractContextManager[None]]) -> None:
    """Registers `stopper()`: a block during which one of chute's own threads does not run.

    For a background thread of a layer that comes and goes (a timer), so that it never
    makes a fork unsafe: `threads_quieted()` enters every registered block.

    Example:
        >>> quiet_during_forks(contextlib.nullcontext)
        >>> with threads_quieted():
        ...     pass
    """
    _STOPPERS.append(stopper)


@contextlib.contextmanager
def threads_quieted() -> Iterator[None]:
    """During the block, no thread registered with `quiet_during_forks` runs."""
    with contextlib.ExitStack() as stack:
        for stopper in list(_STOPPERS):
            stack.enter_context(stopper())
        yield


def thread_count() -> int | None:
    """The threads this process runs now (`/proc/self/task`), or None if unknown.

    Example:
        >>> thread_count() is None or thread_count() >= 1
        True
    """
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def fork_refusal() -> str | None:
    """Why this process may not fork now, or None if it may (then verify after the fork).

    The checks that need no fork: the platform, the modules in `UNSAFE_MODULES`, and
    Python threads. A None is not the final word: `thread_count()` right after the
    fork must be 1 too (native threads are visible only there).

    Example:
        >>> import threading
        >>> stop = threading.Event()
        >>> thread = threading.Thread(target=stop.wait)
        >>> thread.start()
        >>> fork_refusal() is not None  # A Python thread runs.
        True
        >>> stop.set(); thread.join()
    """
    if not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return f"this platform ({sys.platform}) cannot tell whether a fork is safe"
    for name, reason in UNSAFE_MODULES.items():
        if name in sys.modules:
            return reason
    threads = threading.active_count()
    if threads != 1:
        return f"{threads} Python threads run"
    if thread_count() is None:
        return "/proc/self/task cannot be read, so the threads cannot be counted"
    return None


@contextlib.contextmanager
def forking() -> Iterator[None]:
    """Around a fork: SIGINT waits until the fork is done.

    A Ctrl-C during the fork then reaches the parent after it, and the child after it
    (which should ignore SIGINT). Python 3.12+ warns when a multi-threaded process
    forks: such a child is killed unstarted (the thread count is checked), so the
    warning is moot.
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message=r".*multi-threaded.*fork", category=DeprecationWarning
            )
            yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _child(fn: Callable[[T], int], items: Sequence[T], go: int, out: int) -> None:
    """The forked child of `map_in_fork`: waits for the go, writes a line per item."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()  # The parent's objects: never collected here, so never finalized.
    code = 1
    try:
        if os.read(go, 1) == b"g":
            with os.fdopen(out, "w") as lines:
                for item in items:
                    lines.write(f"{int(fn(item))}\n")
                    lines.flush()
            code = 0
    except BaseException:
        pass
    finally:
        os._exit(code)


def map_in_fork(
    fn: Callable[[T], int], items: Sequence[T], stall_seconds: float = 30.0
) -> list[int] | None:
    """`[fn(item) for item in items]`, computed in a forked child, or None if it was not.

    So whatever `fn` starts (native threads, say) never runs in this process. None
    when a fork is not provably safe now (see the module), when `fn` raised (call it
    here to get the error), or when the child gave no result for `stall_seconds`;
    then do the work here.

    Example:
        >>> map_in_fork(len, ["ab", "cde"]) in ([2, 3], None)  # None if unsafe here.
        True
    """
    if not items:
        return None
    with threads_quieted():
        if fork_refusal() is not None:
            return None
        go_read, go_write = os.pipe()
        out_read, out_write = os.pipe()
        with forking():
            pid = os.fork()
            if pid == 0:  # pragma: no cover (the child ends in os._exit)
                os.close(go_write)
                os.close(out_read)
                _child(fn, items, go_read, out_write)
            threads = thread_count()
    os.close(go_read)
    os.close(out_write)
    results: list[int] = []
    try:
        if threads != 1:
            return None  # It may hang on a lock of a thread it lacks: killed below.
        os.write(go_write, b"g")
        pending = b""
        while len(results) < len(items):
            if not select.select([out_read], [], [], stall_seconds)[0]:
                break  # No progress for stall_seconds.
            data = os.read(out_read, 1 << 16)
            if not data:
                break  # The child ended (fn raised).
            *lines, pending = (pending + data).split(b"\n")
            results.extend(int(line) for line in lines)
    finally:
        os.close(go_write)
        os.close(out_read)
        if len(results) < len(items):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return results if len(results) == len(items) else None
