"""Background threads of chute finish before the interpreter ends.

chute's read and prefetch threads are daemons, so they never keep a program alive.
But a daemon thread still running when the interpreter tears down can be inside a
native library (ArrayRecord's C++ reader) while the interpreter and the library's
static objects are destroyed, and the process aborts ("terminate called without an
active exception", exit code 134). An `atexit` hook (which runs before that tear-down)
asks every registered thread that is still running to stop, and waits for them, up to
`EXIT_SECONDS` in all so that a read stuck on storage cannot hold the exit forever.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable

__all__ = ["EXIT_SECONDS", "finish_at_exit"]

EXIT_SECONDS = 10.0
"""How long interpreter exit waits for chute's threads, in all (a bound for a stuck read)."""

_THREADS: weakref.WeakKeyDictionary[threading.Thread, Callable[[], object] | None] = (
    weakref.WeakKeyDictionary()
)


def finish_at_exit(thread: threading.Thread, stop: Callable[[], object]) -> None:
    """Has interpreter exit call `stop()` (if its object still lives) and join `thread`.

    `stop` must return at once (signal the thread, not wait for it). It is held
    weakly when it is a bound method, so registering keeps nothing alive.

    Example:
        >>> done = threading.Event()
        >>> thread = threading.Thread(target=done.wait, daemon=True)
        >>> thread.start()
        >>> finish_at_exit(thread, done.set)
        >>> _finish_all()  # What interpreter exit does.
        >>> thread.is_alive()
        False
    """
    if hasattr(stop, "__self__") and hasattr(stop, "__func__"):
        method = weakref.WeakMethod(stop)
        _THREADS[thread] = lambda: (bound := method()) is not None and bound()
    else:
        _THREADS[thread] = stop


def _finish_all() -> None:
    running = [(thread, stop) for thread, stop in list(_THREADS.items()) if thread.is_alive()]
    for _, stop in running:
        if stop is not None:
            stop()
    deadline = time.monotonic() + EXIT_SECONDS
    for thread, _ in running:
        if thread is not threading.current_thread():
            thread.join(max(deadline - time.monotonic(), 0.0))


atexit.register(_finish_all)
