"""Feature checks: conditional reads, retries and timeouts, credentials from the environment."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import os
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ._libraries import _http, arrow_s3, obstore_s3, s3fs_fs
from ._measure import in_child
from ._setup import BUCKET, CHILD_TIMEOUT, FIRST, KEY_ID, MIB, REGION, SECRET, Endpoint


def conditional_reads(endpoint: Endpoint) -> dict[str, str]:
    """Reads 16 KiB, replaces the object (same size), reads the next 16 KiB: detected?"""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    old, new = b"a" * MIB, b"b" * MIB

    def replace(key: str) -> None:
        client.put_object(Bucket=BUCKET, Key=key, Body=new, ACL="public-read")

    def verdict(second: Any) -> str:
        data = bytes(second)
        return (
            "not detected: returned the new object's bytes"
            if data == new[:16384]
            else ("not detected: returned the old bytes" if data == old[:16384] else "?")
        )

    results: dict[str, str] = {}

    def try_it(name: str, first: Callable[[str], Any], then: Callable[[Any], Any]) -> None:
        key = f"cond/{name}"
        client.put_object(Bucket=BUCKET, Key=key, Body=old, ACL="public-read")
        try:
            handle = first(key)
            replace(key)
            results[name] = verdict(then(handle))
        except Exception as error:
            results[name] = f"detected: {type(error).__name__}"

    import obstore

    store = obstore_s3(endpoint)

    def ob_first(key: str) -> Any:
        etag = obstore.head(store, key)["e_tag"]
        obstore.get(store, key, options={"range": (0, 16384), "if_match": etag}).bytes()
        return key, etag

    def ob_then(handle: Any) -> Any:
        key, etag = handle
        return obstore.get(store, key, options={"range": (16384, 32768), "if_match": etag}).bytes()

    try_it("obstore", ob_first, ob_then)

    def ob_batch_first(key: str) -> str:
        obstore.get_ranges(store, key, starts=[0], lengths=[16384])
        return key

    try_it(
        "obstore get_ranges",
        ob_batch_first,
        lambda key: obstore.get_ranges(store, key, starts=[16384], lengths=[16384])[0],
    )
    fs = s3fs_fs(endpoint)

    def fs_first(key: str) -> Any:
        file = fs.open(f"{BUCKET}/{key}", "rb", block_size=16384, cache_type="none")
        file.read(16384)
        return file

    try_it("s3fs", fs_first, lambda file: file.read(16384))

    def fs_batch_first(key: str) -> str:
        fs.cat_ranges([f"{BUCKET}/{key}"], [0], [16384])
        return key

    try_it(
        "s3fs cat_ranges",
        fs_batch_first,
        lambda key: fs.cat_ranges([f"{BUCKET}/{key}"], [16384], [32768])[0],
    )
    arrow = arrow_s3(endpoint)

    def pa_first(key: str) -> Any:
        file = arrow.open_input_file(f"{BUCKET}/{key}")
        file.read_at(16384, 0)
        return file

    try_it("pyarrow", pa_first, lambda file: file.read_at(16384, 16384))
    try:
        _http(endpoint.port, "GET", f"/{BUCKET}/cond/obstore", {"If-Match": '"stale"'})
        results["server"] = "moto ignored a stale If-Match"
    except OSError as error:
        results["server"] = f"moto honours If-Match ({error})"
    return results


class _Flaky(http.server.BaseHTTPRequestHandler):
    """A tiny S3 look-alike serving 1 MiB at any path.

    A path with "flaky" in it answers 503 twice, then the data; one with "stall" never
    answers (until the check ends).
    """

    protocol_version = "HTTP/1.1"
    counts: dict[str, int] = {}  # noqa: RUF012
    body = bytes(range(256)) * 4096  # 1 MiB
    release = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, send_body: bool) -> None:
        path = self.path.split("?")[0]
        self.counts[path] = self.counts.get(path, 0) + 1
        if "stall" in path:
            self.release.wait(60)
            return
        if "flaky" in path and self.counts[path] <= 2:
            error = b"<Error><Code>ServiceUnavailable</Code><Message>x</Message></Error>"
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error)
            return
        start, end = 0, len(self.body) - 1
        if self.headers.get("Range"):
            first, last = self.headers["Range"].split("=")[1].split("-")
            start, end = int(first), min(int(last), end)
        data = self.body[start : end + 1]
        self.send_response(206 if self.headers.get("Range") else 200)
        self.send_header("Content-Length", str(len(data)))
        if self.headers.get("Range"):
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(self.body)}")
        self.send_header("ETag", '"fixed"')
        self.send_header("Last-Modified", "Wed, 01 Jan 2025 00:00:00 GMT")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if send_body:
            self.wfile.write(data)

    def do_GET(self) -> None:
        with contextlib.suppress(OSError):
            self._answer(True)

    def do_HEAD(self) -> None:
        with contextlib.suppress(OSError):
            self._answer(False)


def retry_check(name: str, port: int, key: str) -> None:
    """Prints how a read of `key` ends against `_Flaky` (in a child).

    Configured: 3 retries with short backoff for "flaky" keys; a 1 s timeout and 1 retry
    for "stall" keys.
    """
    stall = "stall" in key
    if name == "obstore":
        options: dict[str, Any] = (
            {
                "client_options": {"timeout": "1s", "connect_timeout": "1s"},
                "retry_config": {"max_retries": 1, "retry_timeout": timedelta(seconds=5)},
            }
            if stall
            else {
                "retry_config": {
                    "max_retries": 3,
                    "backoff": {
                        "init_backoff": timedelta(milliseconds=20),
                        "max_backoff": timedelta(seconds=1),
                    },
                }
            }
        )
    elif name == "s3fs":
        botocore = {"retries": {"max_attempts": 2 if stall else 4, "mode": "standard"}}
        if stall:
            botocore |= {"read_timeout": 1, "connect_timeout": 1}
        options = {"config_kwargs": botocore}
    else:
        import pyarrow.fs

        strategy = pyarrow.fs.AwsStandardS3RetryStrategy(max_attempts=2 if stall else 4)
        options = {"retry_strategy": strategy}
        if stall:
            options |= {"request_timeout": 1, "connect_timeout": 1}
    start = time.perf_counter()
    try:
        client = make_client(name, Endpoint(port, ""), **options)
        if name == "s3fs" and stall:
            client.retries = 1  # s3fs's own retry loop, around botocore's (default 5)
        read_first(name, client, key, 16)
        print(f"reads after {time.perf_counter() - start:.1f} s")
    except Exception as error:
        print(f"{type(error).__name__} after {time.perf_counter() - start:.1f} s")


def retries_and_timeouts(names: list[str]) -> dict[str, dict[str, str]]:
    """Two 503s then success (retries), and a server that never answers (1 s timeout)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    server.daemon_threads = True
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out: dict[str, dict[str, str]] = {}
    try:
        for name in names:
            flaky, stall = f"flaky-{name}", f"stall-{name}"
            result = _child(f"m.retry_check({name!r}, {port}, {flaky!r})")
            tries = sum(n for path, n in _Flaky.counts.items() if flaky in path)
            out[name] = {"retry": f"{result} ({tries} requests)"}
            result = _child(f"m.retry_check({name!r}, {port}, {stall!r})", timeout=30)
            tries = sum(n for path, n in _Flaky.counts.items() if stall in path)
            out[name]["timeout"] = f"{result} ({tries} requests)"
    finally:
        _Flaky.release.set()
        server.shutdown()
        server.server_close()
    return out


def make_client(name: str, endpoint: Endpoint | None, **options: Any) -> Any:
    """obstore's S3Store, s3fs's S3FileSystem or pyarrow's S3FileSystem.

    With `endpoint=None`, nothing but the bucket is given: keys, region and endpoint
    come from the environment.
    """
    if endpoint is not None:
        return {"obstore": obstore_s3, "s3fs": s3fs_fs, "pyarrow": arrow_s3}[name](
            endpoint, **options
        )
    if name == "obstore":
        from obstore.store import S3Store

        return S3Store(BUCKET, **options)
    if name == "s3fs":
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **options)
    import pyarrow.fs

    return pyarrow.fs.S3FileSystem(**options)


def read_first(name: str, client: Any, key: str, length: int = FIRST) -> bytes:
    if name == "obstore":
        import obstore

        return bytes(obstore.get_range(client, key, start=0, length=length))
    if name == "s3fs":
        return bytes(client.cat_file(f"{BUCKET}/{key}", start=0, end=length))
    with client.open_input_file(f"{BUCKET}/{key}") as file:
        return bytes(file.read_at(length, 0))


def _child(
    call: str,
    env: dict[str, str] | None = None,
    timeout: float = CHILD_TIMEOUT,
    replace: bool = False,
) -> str:
    """Runs `call` (an expression on this module, as `m`) in a fresh interpreter."""
    code = f"import benchmarks.compare.object_storage as m; {call}"
    return in_child(code, env, timeout, replace)


def env_check(name: str, port: int, key: str, endpoint_from_env: bool) -> None:
    """Prints whether a client with no keys given reads a private object (in a child)."""
    endpoint = None if endpoint_from_env else Endpoint(port, "")
    if endpoint is not None and name == "obstore":
        from obstore.store import S3Store

        client = S3Store(BUCKET, endpoint=endpoint.url, client_options={"allow_http": True})
    elif endpoint is not None and name == "s3fs":
        import s3fs

        client = s3fs.S3FileSystem(endpoint_url=endpoint.url, skip_instance_cache=True)
    elif endpoint is not None:
        import pyarrow.fs

        client = pyarrow.fs.S3FileSystem(scheme="http", endpoint_override=f"127.0.0.1:{port}")
    else:
        client = make_client(name, None)
    try:
        print("reads" if len(read_first(name, client, key, 16)) == 16 else "short read")
    except Exception as error:
        print(f"fails: {type(error).__name__}: {str(error).splitlines()[0][:100]}")


def environment_credentials(endpoint: Endpoint, names: list[str]) -> dict[str, list[str]]:
    """Keys from AWS_* variables (endpoint in code), then the endpoint too (AWS_ENDPOINT_URL).

    The object is private, so an unsigned request fails (moto answers 403 to anonymous
    requests): "reads" means the library signed with the variables' keys. Without keys,
    each library's fallback shows (anonymous, or an error).
    """
    import boto3

    boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    ).put_object(Bucket=BUCKET, Key="private/env", Body=b"x" * 1024)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BOTO"))}
    base |= {
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
    }
    keys = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
    url = {"AWS_ENDPOINT_URL": endpoint.url, "AWS_ALLOW_HTTP": "true"}
    out = {}
    for name in names:
        call = f"m.env_check({name!r}, {endpoint.port}, 'private/env', " + "{})"
        out[name] = [
            _child(call.format(False), {**base, **keys}, replace=True),
            _child(call.format(False), base, replace=True),
            _child(call.format(True), {**base, **keys, **url}, replace=True),
        ]
    return out
