"""A thread that calls a function every few seconds, and steps aside for forks.

`chute bench --live` refreshes its view while the pipeline it measures starts worker
processes. chute forks them from the process only when no other thread runs (else a
fork server starts them, ~0.4 s more for the first batch), so the refresher registers
with `quiet_during_forks`: during each fork its thread is ended, and started again
after.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator

from chute_core.internal import quiet_during_forks, thread_count

__all__ = ["Refresher"]

_REFRESHERS: weakref.WeakSet[Refresher] = weakref.WeakSet()


class Refresher:
    """Calls `tick()` now and every `interval` s on a thread of its own, until `close()`.

    Example:
        >>> ticks = []
        >>> refresher = Refresher(lambda: ticks.append(1), interval=60)
        >>> with refresher.paused():  # As around a fork: no thread of its own runs.
        ...     refresher.running
        False
        >>> refresher.running
        True
        >>> refresher.close()
        >>> len(ticks) >= 1, refresher.running
        (True, False)
    """

    def __init__(self, tick: Callable[[], object], interval: float) -> None:
        self._tick, self._interval = tick, interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._paused = 0
        self._closed = False
        self._start()
        _REFRESHERS.add(self)

    @property
    def running(self) -> bool:
        """Whether its thread runs now."""
        return self._thread is not None

    def _start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="chute-live-view", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._tick()
            self._stop.wait(self._interval)

    def _halt(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join()
        for _ in range(100):  # Until its native thread is gone too (microseconds).
            if (thread_count() or 0) <= threading.active_count():
                break
            time.sleep(0.0002)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No thread of its own runs during the block (so that this process may fork)."""
        with self._lock:
            self._paused += 1
            if self._paused == 1:
                self._halt()
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1
                if self._paused == 0 and not self._closed:
                    self._start()

    def close(self) -> None:
        """Stops calling `tick` (after the call under way, if any)."""
        with self._lock:
            self._closed = True
            self._halt()


@contextlib.contextmanager
def _all_paused() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for refresher in list(_REFRESHERS):
            stack.enter_context(refresher.paused())
        yield


quiet_during_forks(_all_paused)
