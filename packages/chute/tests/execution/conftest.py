"""The execution layer's thread check, for its tests that drive chute's fluent API.

These tests came from packages/chute-execution/tests (they build pipelines with
`chute.MapDataset`, so they run where chute is installed); they keep the check that
conftest applies there: no reader or prefetch thread outlives a test.
"""

import gc
from collections.abc import Iterator

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
