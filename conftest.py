"""Test-wide setup: eight simulated CPU devices, and a local S3 server for URL tests.

Set before anything imports jax, so every test sees `jax.devices()` of 8 (CPU) devices,
as on a host with 8 accelerators. Code under test never depends on this count.
"""

import os

import pytest

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()

from chute_testing import (  # noqa: E402 - after XLA_FLAGS, which must come first.
    LoopbackS3,
    loopback_gcs_fixture,
    loopback_s3_fixture,
)

# Object-storage servers on loopback, one each per test run, for every test folder
# (skipped with a message where the dev group is not installed).
loopback_s3 = pytest.fixture(scope="session", name="loopback_s3")(loopback_s3_fixture)
loopback_gcs = pytest.fixture(scope="session", name="loopback_gcs")(loopback_gcs_fixture)


class BucketWriter:
    """The session's S3 server, with writes that return what the tests go on with."""

    def __init__(self, server: LoopbackS3) -> None:
        self.server = server
        self.endpoint = server.endpoint
        self.env = server.env

    def create_bucket(self, name: str) -> str:
        """Creates the bucket `name`; returns the name."""
        self.server.create_bucket(name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> str:
        """Writes the object `key` in `bucket`; returns its `s3://` URL."""
        self.server.put(bucket, key, bytes(data))
        return self.url(bucket, key)

    def url(self, bucket: str, key: str) -> str:
        """The `s3://` URL of `key` in `bucket`."""
        return self.server.url(bucket, key)


@pytest.fixture
def s3(loopback_s3: LoopbackS3, monkeypatch: pytest.MonkeyPatch) -> BucketWriter:
    """The session's S3 server, with the AWS variables pointing at it."""
    for name, value in loopback_s3.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    return BucketWriter(loopback_s3)
