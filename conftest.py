"""Test-wide setup: eight simulated CPU devices, and a local S3 server for URL tests.

Set before anything imports jax, so every test sees `jax.devices()` of 8 (CPU) devices,
as on a host with 8 accelerators. Code under test never depends on this count.
"""

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()


# --------------------------------------------------------------------------------------
# A local S3 server (moto) for the tests of s3:// URLs: the fixture `s3`.
#
# Stand-in for `chute_sources.testing`'s `loopback_s3` (branch `loopback`): the same
# surface (`.endpoint`, `.env`, `.create_bucket(name)`, `.put(bucket, key, data)`,
# `.url(bucket, key)`), so that swapping it is replacing this block by
# `s3 = loopback_s3` (or renaming the tests' argument).


class MotoS3:
    """A moto S3 server at `endpoint`; `env` points the AWS variables at it."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }
        self._boto: Any = None

    def _client(self) -> Any:
        if self._boto is None:
            import boto3

            self._boto = boto3.client(
                "s3",
                endpoint_url=self.endpoint,
                aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
                region_name=self.env["AWS_REGION"],
            )
        return self._boto

    def create_bucket(self, name: str) -> str:
        """Creates the bucket `name` (3+ lower-case characters); returns the name."""
        self._client().create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> str:
        """Writes the object `key` in `bucket`; returns its `s3://` URL."""
        self._client().put_object(Bucket=bucket, Key=key, Body=bytes(data))
        return self.url(bucket, key)

    def url(self, bucket: str, key: str) -> str:
        """The `s3://` URL of `key` in `bucket`."""
        return f"s3://{bucket}/{key}"


# Runs moto's server, first asking Linux to end it when the test process dies (even by
# SIGKILL), so that no server outlives an interrupted run.
_LAUNCH = """
import ctypes, runpy, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
except (AttributeError, OSError):
    pass
sys.argv = ["moto.server", *sys.argv[1:]]
runpy.run_module("moto.server", run_name="__main__")
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def _moto_s3_server() -> Iterator[MotoS3]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = MotoS3(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{server.endpoint}/moto-api/", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto S3 server did not start") from None
                time.sleep(0.05)
        yield server
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def s3(_moto_s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch) -> MotoS3:
    """The session's moto S3 server, with the AWS variables pointing at it."""
    for name, value in _moto_s3_server.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    return _moto_s3_server
