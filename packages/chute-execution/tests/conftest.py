import threading
from collections.abc import Callable

import pytest

from chute_testing.execution import no_leaked_threads, wait_until

no_leaked_threads = pytest.fixture(autouse=True)(no_leaked_threads)


@pytest.fixture
def new_threads() -> Callable[[], list[threading.Thread]]:
    """Returns a function listing the threads started since the test began."""
    before = set(threading.enumerate())
    return lambda: [t for t in threading.enumerate() if t not in before]


@pytest.fixture
def eventually() -> Callable[[Callable[[], bool]], bool]:
    """Returns a function that polls a condition until it holds (or a generous bound)."""
    return wait_until
