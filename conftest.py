"""Test-wide setup: eight simulated CPU devices for the device-layer tests.

Set before anything imports jax, so every test sees `jax.devices()` of 8 (CPU) devices,
as on a host with 8 accelerators. Code under test never depends on this count.
"""

import os

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()

import pytest  # noqa: E402 - after XLA_FLAGS, which must come first.

from chute_sources.testing import loopback_gcs_fixture, loopback_s3_fixture  # noqa: E402

# Object-storage servers on loopback, one each per test run, for every test folder
# (skipped with a message where the dev group is not installed).
loopback_s3 = pytest.fixture(scope="session", name="loopback_s3")(loopback_s3_fixture)
loopback_gcs = pytest.fixture(scope="session", name="loopback_gcs")(loopback_gcs_fixture)
