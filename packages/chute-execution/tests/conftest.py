import gc
import threading
from collections.abc import Callable, Iterator

import pytest

from chute_testing.execution import chute_threads, wait_until


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Every test must leave no reader or prefetch thread behind once its iterators are
    collected."""
    yield
    if chute_threads():
        gc.collect()  # Only when needed: a full collection costs tens of milliseconds.
    assert wait_until(lambda: not chute_threads()), f"leaked threads: {chute_threads()}"


@pytest.fixture
def new_threads() -> Callable[[], list[threading.Thread]]:
    """Returns a function listing the threads started since the test began."""
    before = set(threading.enumerate())
    return lambda: [t for t in threading.enumerate() if t not in before]


@pytest.fixture
def eventually() -> Callable[[Callable[[], bool]], bool]:
    """Returns a function that polls a condition until it holds (or a generous bound)."""
    return wait_until
