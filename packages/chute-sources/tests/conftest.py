import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spawn_pool() -> Iterator[Callable[..., Any]]:
    """Runs a picklable callable in a process started with spawn; returns its result."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:

        def run(function: Callable[..., Any], *args: Any) -> Any:
            return pool.apply(function, args)

        yield run
