"""The execution layer's thread check, for its tests that drive chute's fluent API.

These tests came from packages/chute-execution/tests (they build pipelines with
`chute.MapDataset`, so they run where chute is installed); they keep the check that
conftest applies there: no reader or prefetch thread outlives a test.
"""

import gc
import threading
import time
from collections.abc import Callable, Iterator

import pytest

SETTLE_SECONDS = 10.0  # A bound for threads to exit on their own, never a speed check.


def _chute_threads() -> list[threading.Thread]:
    """The threads of PrefetchReadIter and ThreadPrefetchIter."""
    return [t for t in threading.enumerate() if t.name.startswith(("chute-read", "chute-prefetch"))]


def _wait_until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + SETTLE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Every test must leave no reader or prefetch thread behind once its iterators are
    collected."""
    yield
    if _chute_threads():
        gc.collect()  # Only when needed: a full collection costs tens of milliseconds.
    assert _wait_until(lambda: not _chute_threads()), f"leaked threads: {_chute_threads()}"
