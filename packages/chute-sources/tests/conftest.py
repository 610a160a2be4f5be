import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chute_sources.testing import loopback_gcs_fixture, loopback_s3_fixture

# Object-storage servers on loopback, one each per test run (skipped without the dev group).
loopback_s3 = pytest.fixture(scope="session", name="loopback_s3")(loopback_s3_fixture)
loopback_gcs = pytest.fixture(scope="session", name="loopback_gcs")(loopback_gcs_fixture)


@pytest.fixture(scope="session")
def spawn_pool() -> Iterator[Callable[..., Any]]:
    """Runs a picklable callable in a process started with spawn; returns its result."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:

        def run(function: Callable[..., Any], *args: Any) -> Any:
            return pool.apply(function, args)

        yield run
