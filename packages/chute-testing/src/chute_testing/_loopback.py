"""Object-storage servers on loopback for tests and benchmarks; `LoopbackS3` runs moto.

Each server runs in a child process of its own (`_loopback_serve.py`), on a port of
127.0.0.1 the kernel picks, and is ready when `start()` returns: the child has announced
its port and the server has answered a request. `stop()` (or leaving the `with` block)
kills the child's whole process group. A server left running is stopped at interpreter
exit, and a child whose parent dies (even by SIGKILL) sees its stdin close and exits, so
no test run leaves a server behind.

The helpers (`create_bucket`, `put`, `get`, `delete`) speak plain HTTP through
`http.client`: they set data up for a test, without the client under test.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import http.client
import importlib.util
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar, Self

from chute_core import ChuteError

from ._loopback_serve import parse_ready_line

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Store

__all__ = ["LoopbackS3", "LoopbackServerError"]

_SERVE = Path(__file__).with_name("_loopback_serve.py")
_LIVE: weakref.WeakSet[_LoopbackServer] = weakref.WeakSet()
_STOP_TIMEOUT = 5.0
# moto does not check signatures; it reads the service (s3) from the credential scope.
_S3_AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=chute-testing/20260101/us-east-1/s3/aws4_request, "
    "SignedHeaders=host, Signature=0"
)


class LoopbackServerError(ChuteError, RuntimeError):
    """A loopback server that could not start, or that refused a helper's request.

    Example:
        >>> issubclass(LoopbackServerError, RuntimeError)
        True
    """


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


class _LoopbackServer(abc.ABC):
    """A server in a child process: start, stop, the endpoint, plain HTTP requests."""

    _KIND: ClassVar[str]  # The argument of _loopback_serve.py.
    _SCHEME: ClassVar[str]  # Of the URLs the server's objects have.
    _NEEDS: ClassVar[str]  # The distribution the child needs, as `pip install` names it.
    _MODULES: ClassVar[tuple[str, ...]]  # The modules it imports from it.

    def __init__(self, *, start_timeout: float = 30.0) -> None:
        self._start_timeout = start_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._port: int | None = None
        self.startup_seconds: float | None = None
        """How long the last `start()` took, from spawning the child to its first answer."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.endpoint if self._port is not None else "stopped"
        return f"{type(self).__name__}({where})"

    @property
    def endpoint(self) -> str:
        """The server's base URL, `http://127.0.0.1:PORT`."""
        if self._port is None:
            raise LoopbackServerError(
                f"{type(self).__name__} is not running: use it in a `with` block, or call "
                "start() first"
            )
        return f"http://127.0.0.1:{self._port}"

    @property
    @abc.abstractmethod
    def env(self) -> dict[str, str]:
        """The environment variables that point a client at this server."""

    @classmethod
    def missing(cls) -> str | None:
        """What to install for this server, if a module it needs is missing; else None."""
        if all(importlib.util.find_spec(module) is not None for module in cls._MODULES):
            return None
        return (
            f"{cls.__name__} needs {cls._NEEDS}, which is not installed: it is in chute's dev "
            "dependency group (`uv sync` installs it)"
        )

    def url(self, bucket: str, key: str = "") -> str:
        """The URL of `key` in `bucket` (of the bucket, without a key)."""
        return f"{self._SCHEME}://{bucket}/{key}"

    def start(self) -> Self:
        """Starts the server and waits until it answers; returns `self`."""
        if self._process is not None:
            return self
        if (missing := self.missing()) is not None:
            raise LoopbackServerError(missing)
        began = time.perf_counter()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        self._process = subprocess.Popen(
            [sys.executable, str(_SERVE), self._KIND],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,  # Its own process group, killed as one by stop().
        )
        _LIVE.add(self)
        try:
            self._port = self._await_port(began + self._start_timeout)
            self._await_answer(began + self._start_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.perf_counter() - began
        return self

    def stop(self) -> None:
        """Stops the server: kills its process group and waits for it. Idempotent."""
        process, self._process, self._port = self._process, None, None
        _LIVE.discard(self)
        if process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)  # The child is not reaped yet: its pid is ours.
            try:
                process.wait(_STOP_TIMEOUT)
                break
            except subprocess.TimeoutExpired:
                continue
        for pipe in (process.stdin, process.stdout, self._stderr):
            if pipe is not None:
                pipe.close()
        self._stderr = None

    def _failure(self, what: str) -> LoopbackServerError:
        output = b""
        if self._stderr is not None:
            self._stderr.seek(0)
            output = self._stderr.read()[-4000:]
        text = output.decode(errors="replace").strip() or "(nothing)"
        return LoopbackServerError(f"{type(self).__name__} {what}. Its stderr:\n{text}")

    def _await_port(self, deadline: float) -> int:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        while (remaining := deadline - time.perf_counter()) > 0:
            readable, _, _ = select.select([stdout], [], [], remaining)
            if not readable:
                break
            line = stdout.readline().decode(errors="replace")
            if not line:
                raise self._failure(f"exited with status {self._process.wait()} before listening")
            port = parse_ready_line(line)
            if port is not None:
                return port
        raise self._failure(f"did not listen within {self._start_timeout} s")

    def _await_answer(self, deadline: float) -> None:
        while True:
            try:
                status, _, _ = self._request("GET", "/")
            except OSError:
                status = 0
            if status == 200:
                return
            if time.perf_counter() > deadline:
                raise self._failure(f"did not answer GET / with 200 (last: {status})")
            time.sleep(0.01)

    def _headers(self) -> dict[str, str]:
        return {}

    def _request(
        self,
        method: str,
        path: str,
        body: bytes | IO[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on a new connection: `(status, headers, body)`."""
        connection = http.client.HTTPConnection(
            "127.0.0.1", self._port, timeout=60, blocksize=1 << 20
        )
        try:
            connection.request(method, path, body, {**self._headers(), **(headers or {})})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def _refused(self, what: str, status: int, body: bytes) -> LoopbackServerError:
        text = body[:500].decode(errors="replace")
        return LoopbackServerError(f"{type(self).__name__}: {what} answered {status}: {text}")

    def _checked(self, what: str, ok: tuple[int, ...], *request: Any) -> bytes:
        status, _, body = self._request(*request)
        if status not in ok:
            raise self._refused(what, status, body)
        return body

    def put_file(self, bucket: str, key: str, path: str | os.PathLike[str]) -> None:
        """Uploads the file at `path` as `key` in `bucket`, streamed from disk."""
        with open(path, "rb") as file:
            self._upload(bucket, key, file, os.fstat(file.fileno()).st_size)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """Uploads `data` as `key` in `bucket` (replacing any object of that name)."""
        self._upload(bucket, key, data, len(data))

    @abc.abstractmethod
    def _upload(self, bucket: str, key: str, body: bytes | IO[bytes], size: int) -> None:
        """Stores `size` bytes of `body` as `key` in `bucket` (each server's own API)."""


class LoopbackS3(_LoopbackServer):
    """An S3 server (moto, in server mode) on 127.0.0.1, in a child process.

    Start-up takes about 1 s (moto's imports); a session-scoped fixture starts one for a
    whole test run (`chute_testing.loopback_s3_fixture`). Needs `moto[server]`.
    moto keeps objects in memory (those over 5 MiB in temporary files) and, unlike S3,
    reads a whole object for every request: a range read of a large object costs as much
    as reading all of it (36 ms for 64 MiB, against 2 ms for a small object).

    Args:
        start_timeout: seconds to wait for the server to answer.

    Example:
        ```python
        import obstore

        with LoopbackS3() as s3:
            s3.create_bucket("data")
            s3.put("data", "a/x.bin", b"hello")
            store = s3.store("data")
            assert obstore.get(store, "a/x.bin").bytes() == b"hello"
        ```
    """

    _KIND = "s3"
    _SCHEME = "s3"
    _NEEDS = "moto[server]"
    _MODULES = ("moto", "flask", "flask_cors")
    ACCESS_KEY_ID = "chute-testing"
    SECRET_ACCESS_KEY = "chute-testing-secret"
    REGION = "us-east-1"

    @property
    def env(self) -> dict[str, str]:
        """`AWS_ENDPOINT_URL`, credentials, `AWS_REGION` and `AWS_ALLOW_HTTP` for this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": self.SECRET_ACCESS_KEY,
            "AWS_REGION": self.REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def store(
        self,
        bucket: str,
        *,
        endpoint: str | None = None,
        client_options: ClientConfig | None = None,
        retry_config: RetryConfig | None = None,
    ) -> S3Store:
        """An obstore `S3Store` of `bucket` on this server (needs obstore).

        Args:
            bucket: the bucket.
            endpoint: where to send requests instead of `self.endpoint` (a `FaultProxy`'s).
            client_options: obstore's client options; `allow_http` is always set.
            retry_config: obstore's retry settings (`{"max_retries": 0}`: no retries).

        Returns:
            The store, with this server's credentials and region.
        """
        from obstore.store import S3Store

        return S3Store(
            bucket,
            config={
                "endpoint": endpoint or self.endpoint,
                "access_key_id": self.ACCESS_KEY_ID,
                "secret_access_key": self.SECRET_ACCESS_KEY,
                "region": self.REGION,
            },
            client_options={**(client_options or {}), "allow_http": True},
            retry_config=retry_config,
        )

    def _headers(self) -> dict[str, str]:
        return {"Authorization": _S3_AUTHORIZATION}

    @staticmethod
    def _path(bucket: str, key: str = "") -> str:
        return f"/{bucket}/{urllib.parse.quote(key, safe='/~')}" if key else f"/{bucket}"

    def create_bucket(self, bucket: str) -> None:
        """Creates `bucket`; one that exists already is kept as it is."""
        self._checked(f"creating bucket {bucket!r}", (200, 409), "PUT", self._path(bucket))

    def _upload(self, bucket: str, key: str, body: bytes | IO[bytes], size: int) -> None:
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        what = f"uploading {self.url(bucket, key)}"
        self._checked(what, (200,), "PUT", self._path(bucket, key), body, headers)

    def get(self, bucket: str, key: str) -> bytes:
        """The bytes of `key` in `bucket`."""
        return self._checked(
            f"reading {self.url(bucket, key)}", (200,), "GET", self._path(bucket, key)
        )

    def delete(self, bucket: str, key: str) -> None:
        """Deletes `key` from `bucket`; a missing key is not an error."""
        what = f"deleting {self.url(bucket, key)}"
        self._checked(what, (200, 204, 404), "DELETE", self._path(bucket, key))
