"""The execution layer's thread check, for the scenarios that drive chute's fluent API."""

import pytest

from chute_testing.execution import no_leaked_threads

no_leaked_threads = pytest.fixture(autouse=True)(no_leaked_threads)
