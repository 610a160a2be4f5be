"""Fixtures shared by the top-level tests."""

import pytest

from chute_sources.testing import loopback_gcs_fixture, loopback_s3_fixture

# Object-storage servers on loopback, one each per test run (skipped without the dev group).
loopback_s3 = pytest.fixture(scope="session", name="loopback_s3")(loopback_s3_fixture)
loopback_gcs = pytest.fixture(scope="session", name="loopback_gcs")(loopback_gcs_fixture)
