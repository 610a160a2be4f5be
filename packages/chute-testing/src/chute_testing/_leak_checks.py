"""What tests of the execution layer check after each test: no thread, no slab left."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from chute_core.internal import SHM_PREFIX, shm_dir

__all__ = [
    "all_exited",
    "chute_threads",
    "exited",
    "no_leaked_threads",
    "own_slabs",
    "slabs_of",
    "wait_until",
]


def chute_threads() -> list[threading.Thread]:
    """The live threads of `PrefetchReadIter` and `ThreadPrefetchIter` in this process.

    Example:
        >>> chute_threads()
        []
    """
    prefixes = ("chute-read", "chute-prefetch")
    return [thread for thread in threading.enumerate() if thread.name.startswith(prefixes)]


def wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Polls `condition` until it holds (True) or `seconds` pass (False): a bound, not a speed.

    Example:
        >>> wait_until(lambda: True)
        True
    """
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def exited(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie not yet reaped counts as exited).

    Example:
        >>> exited(os.getpid())
        False
    """
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def all_exited(pids: Iterable[int], seconds: float = 10.0) -> bool:
    """Waits up to `seconds` for every process of `pids` to exit; whether they all did.

    Example:
        >>> all_exited([], seconds=0.1)
        True
    """
    waited = list(pids)
    return wait_until(lambda: all(map(exited, waited)), seconds)


def _descends_from_us(pid: int) -> bool:
    """Whether `pid` is this process or runs under it (False if it is gone)."""
    while pid > 1:
        if pid == os.getpid():
            return True
        try:
            with open(f"/proc/{pid}/status") as status:
                pid = next(int(line.split()[1]) for line in status if line.startswith("PPid:"))
        except (OSError, StopIteration, ValueError):
            return False
    return False


def slabs_of(pid: int) -> set[str]:
    """The shared-memory slabs process `pid` made (live or not).

    Example:
        >>> slabs_of(-1)
        set()
    """
    mine = f"{SHM_PREFIX}{pid}-"
    return {name for name in os.listdir(shm_dir()) if name.startswith(mine) and "-slab-" in name}


def own_slabs() -> set[str]:
    """The workers' shared-memory slabs this process may own (not other live programs').

    Slabs of this process's workers, and of dead processes; never those of another
    program that is running (e.g. a soak run beside the tests).

    Example:
        >>> isinstance(own_slabs(), set)
        True
    """
    names = {n for n in os.listdir(shm_dir()) if n.startswith(SHM_PREFIX) and "-slab-" in n}
    return {
        name
        for name in names
        if _descends_from_us(int(name.split("-")[1]))
        or not os.path.exists(f"/proc/{name.split('-')[1]}")
    }


def no_leaked_threads() -> Iterator[None]:
    """The body of an autouse pytest fixture: no reader or prefetch thread outlives a test.

    Once the test's iterators are collected, every thread `chute_threads` lists must end
    (within `wait_until`'s bound). The conftests of the tests of the execution layer and
    of the cross-layer execution scenarios declare it.

    Example:
        In a `conftest.py`:

        ```python
        import pytest
        from chute_testing.execution import no_leaked_threads

        no_leaked_threads = pytest.fixture(autouse=True)(no_leaked_threads)
        ```
    """
    yield
    if chute_threads():
        gc.collect()  # Only when needed: a full collection costs tens of milliseconds.
    assert wait_until(lambda: not chute_threads()), f"leaked threads: {chute_threads()}"


def no_leaked_slabs() -> Iterator[None]:
    """The body of a pytest fixture: a test leaves no shared-memory slab behind.

    The slabs `own_slabs` lists after the test (its iterators collected) must be those
    listed before it.

    Example:
        In a test module:

        ```python
        import pytest
        from chute_testing.execution import no_leaked_slabs

        no_leaked_slabs = pytest.fixture(autouse=True)(no_leaked_slabs)
        ```
    """
    before = own_slabs()
    yield
    gc.collect()
    assert own_slabs() - before == set(), "a test left shared memory behind"
