"""The loopback object-storage servers and the fault proxy, driven by obstore."""

import asyncio
import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.parse
import uuid
from datetime import timedelta

import numpy as np
import pytest

from chute_core import InvalidArgumentError
from chute_testing import (
    FaultProxy,
    LoopbackGCS,
    LoopbackS3,
    LoopbackServerError,
    ProxiedRequest,
    loopback_s3_fixture,
)

obstore = pytest.importorskip("obstore")
from obstore.exceptions import (  # noqa: E402
    AlreadyExistsError,
    BaseError,
    NotModifiedError,
    PreconditionError,
)

NO_RETRIES = {"max_retries": 0}
QUICK_RETRIES = {
    "max_retries": 5,
    "backoff": {
        "init_backoff": timedelta(milliseconds=1),
        "max_backoff": timedelta(milliseconds=5),
    },
}


def payload(size, seed=0):
    return np.random.default_rng(seed).bytes(size)


@pytest.fixture(params=["s3", "gcs"])
def server(request):
    return request.getfixturevalue(f"loopback_{request.param}")


@pytest.fixture
def bucket(server):
    name = f"t-{uuid.uuid4().hex[:16]}"
    server.create_bucket(name)
    return name


@pytest.fixture
def proxy(server):
    with FaultProxy(server.endpoint) as proxy:
        yield proxy


def raw(endpoint, method, path, body=None, headers=None):
    """One plain HTTP request: (status, headers with lower-case names, body)."""
    split = urllib.parse.urlsplit(endpoint)
    connection = http.client.HTTPConnection(split.hostname, split.port)
    try:
        connection.request(method, path, body, headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_objects_round_trip_between_the_helpers_and_obstore(server, bucket, tmp_path):
    data = payload(300_000)
    store = server.store(bucket)
    server.put(bucket, "helper/a.bin", data)
    assert obstore.get(store, "helper/a.bin").bytes().to_bytes() == data
    obstore.put(store, "client/b.bin", data[::-1])
    assert server.get(bucket, "client/b.bin") == data[::-1]
    (tmp_path / "c.bin").write_bytes(data[:1000])
    server.put_file(bucket, "file/c.bin", tmp_path / "c.bin")
    assert obstore.get(store, "file/c.bin").bytes().to_bytes() == data[:1000]
    server.put(bucket, "empty.bin", b"")
    assert obstore.get(store, "empty.bin").bytes().to_bytes() == b""
    assert obstore.head(store, "empty.bin")["size"] == 0


def test_multipart_uploads_and_copies_keep_exact_bytes(server, bucket):
    data = payload(11 << 20, seed=1)
    store = server.store(bucket)
    obstore.put(store, "big.bin", data, use_multipart=True, chunk_size=5 << 20)
    assert obstore.get(store, "big.bin").bytes().to_bytes() == data
    obstore.copy(store, "big.bin", "copy.bin")
    assert server.get(bucket, "copy.bin") == data


def test_range_reads_return_exact_slices(server, bucket):
    data = payload(1 << 20, seed=2)
    server.put(bucket, "r.bin", data)
    store = server.store(bucket)
    assert bytes(obstore.get_range(store, "r.bin", start=10, end=4096)) == data[10:4096]
    starts, ends = [0, 5, 700_000, 1_048_000], [3, 600_000, 700_001, 1 << 20]
    got = obstore.get_ranges(store, "r.bin", starts=starts, ends=ends)
    assert [bytes(b) for b in got] == [data[s:e] for s, e in zip(starts, ends, strict=True)]
    result = obstore.get(store, "r.bin", options={"range": (100, 200)})
    assert result.range == (100, 200)
    assert result.bytes().to_bytes() == data[100:200]
    suffix = obstore.get(store, "r.bin", options={"range": {"suffix": 7}})
    assert suffix.bytes().to_bytes() == data[-7:]
    offset = obstore.get(store, "r.bin", options={"range": {"offset": (1 << 20) - 9}})
    assert offset.bytes().to_bytes() == data[-9:]
    assert (
        bytes(obstore.get_range(store, "r.bin", start=(1 << 20) - 5, end=(1 << 20) + 50))
        == (data[-5:])
    )


def test_a_range_past_the_end_is_answered_416(server, bucket):
    server.put(bucket, "x.bin", b"hello world")
    path = f"/{bucket}/x.bin"
    headers = {"Range": "bytes=20-40"}
    if isinstance(server, LoopbackS3):
        headers["Authorization"] = (
            "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/s3/aws4_request"
        )
    status, _, _ = raw(server.endpoint, "GET", path, headers=headers)
    assert status == 416
    with pytest.raises(BaseError, match="416"):
        obstore.get_range(server.store(bucket), "x.bin", start=20, end=40)


def test_overwrite_changes_the_etag_and_a_stale_if_match_fails(server, bucket):
    store = server.store(bucket)
    obstore.put(store, "v.bin", b"first")
    first = obstore.head(store, "v.bin")
    assert obstore.get(store, "v.bin", options={"if_match": first["e_tag"]}).bytes() == b"first"
    with pytest.raises(NotModifiedError):
        obstore.get(store, "v.bin", options={"if_none_match": first["e_tag"]})
    obstore.put(store, "v.bin", b"second")
    second = obstore.head(store, "v.bin")
    assert second["e_tag"] != first["e_tag"]
    assert second["size"] == 6
    if isinstance(server, LoopbackGCS):
        assert int(second["version"]) > int(first["version"])
    with pytest.raises(PreconditionError):
        obstore.get(store, "v.bin", options={"if_match": first["e_tag"]})
    assert obstore.get(store, "v.bin", options={"if_match": second["e_tag"]}).bytes() == b"second"


def test_conditional_puts_refuse_to_replace(server, bucket):
    store = server.store(bucket)
    put = obstore.put(store, "c.bin", b"one", mode="create")
    with pytest.raises(AlreadyExistsError):
        obstore.put(store, "c.bin", b"two", mode="create")
    stale = (
        {"e_tag": '"0"', "version": "1"} if isinstance(server, LoopbackGCS) else {"e_tag": '"0"'}
    )
    with pytest.raises(PreconditionError):
        obstore.put(store, "c.bin", b"two", mode=stale)
    obstore.put(store, "c.bin", b"two", mode={k: v for k, v in put.items() if v is not None})
    assert server.get(bucket, "c.bin") == b"two"


def test_list_with_prefix_and_delete(server, bucket):
    store = server.store(bucket)
    for key in ["a/1.bin", "a/2.bin", "a/sub/3.bin", "b/4.bin"]:
        server.put(bucket, key, key.encode())
    listed = obstore.list(store, prefix="a").collect()
    assert sorted(m["path"] for m in listed) == ["a/1.bin", "a/2.bin", "a/sub/3.bin"]
    assert {m["path"]: m["size"] for m in listed}["a/sub/3.bin"] == len(b"a/sub/3.bin")
    head = obstore.head(store, "a/1.bin")
    assert next(m for m in listed if m["path"] == "a/1.bin")["e_tag"] == head["e_tag"]
    shallow = obstore.list_with_delimiter(store, prefix="a")
    assert shallow["common_prefixes"] == ["a/sub"]
    assert [m["path"] for m in shallow["objects"]] == ["a/1.bin", "a/2.bin"]
    obstore.delete(store, "a/1.bin")
    with pytest.raises(FileNotFoundError):
        obstore.head(store, "a/1.bin")
    server.delete(bucket, "a/2.bin")
    server.delete(bucket, "a/2.bin")  # Deleting a missing key is not an error.
    assert [m["path"] for m in obstore.list(store, prefix="a").collect()] == ["a/sub/3.bin"]


def test_gcs_xml_headers_agree_with_the_json_api_metadata(loopback_gcs):
    bucket = f"t-{uuid.uuid4().hex[:16]}"
    loopback_gcs.create_bucket(bucket)
    loopback_gcs.put(bucket, "dir/m.bin", b"metadata")
    status, _, body = raw(loopback_gcs.endpoint, "GET", f"/storage/v1/b/{bucket}/o/dir%2Fm.bin")
    meta = json.loads(body)
    assert status == 200
    status, headers, body = raw(loopback_gcs.endpoint, "HEAD", f"/{bucket}/dir%2Fm.bin")
    assert (status, body) == (200, b"")
    assert headers["content-length"] == "8"
    assert headers["etag"] == '"' + base64.b64decode(meta["md5Hash"]).hex() + '"'
    assert headers["x-goog-generation"] == meta["generation"]
    assert headers["last-modified"].endswith(" GMT")
    stale = {"x-goog-if-generation-match": "0"}
    status, _, _ = raw(loopback_gcs.endpoint, "PUT", f"/{bucket}/dir/m.bin", b"x", stale)
    assert status == 412
    live = f"/{bucket}/dir/m.bin?generation={meta['generation']}"
    assert raw(loopback_gcs.endpoint, "GET", live)[:3:2] == (200, b"metadata")
    wrong = f"/{bucket}/dir/m.bin?generation=1"
    assert raw(loopback_gcs.endpoint, "GET", wrong)[0] == 404
    status, headers, _ = raw(
        loopback_gcs.endpoint, "GET", f"/{bucket}/dir/m.bin", None, {"Range": "bytes=8-"}
    )
    assert (status, headers["content-range"]) == (416, "bytes */8")


def test_gcs_listing_pages_with_continuation_tokens(loopback_gcs):
    bucket = f"t-{uuid.uuid4().hex[:16]}"
    loopback_gcs.create_bucket(bucket)
    keys = [*(f"p/{i:02d}" for i in range(5)), "p/d/x", "p/d/y"]
    for key in keys:
        loopback_gcs.put(bucket, key, b"")
    seen, token = [], None
    while True:
        query = {"list-type": "2", "prefix": "p/", "delimiter": "/", "max-keys": "2"}
        if token:
            query["continuation-token"] = token
        _, _, body = raw(loopback_gcs.endpoint, "GET", f"/{bucket}?{urllib.parse.urlencode(query)}")
        text = body.decode()
        seen += [part.split("<")[0] for part in text.split("<Key>")[1:]]
        seen += [part.split("<")[0] for part in text.split("<CommonPrefixes><Prefix>")[1:]]
        if "<NextContinuationToken>" not in text:
            break
        token = text.split("<NextContinuationToken>")[1].split("<")[0]
    assert seen == [f"p/{i:02d}" for i in range(5)] + ["p/d/"]


def test_proxy_forwards_exact_bytes_and_logs_every_request(server, bucket, proxy):
    data = payload(3 << 20, seed=3)
    store = server.store(bucket, endpoint=proxy.endpoint)
    proxy.latency = 0.001
    obstore.put(store, "p.bin", data)
    assert obstore.get(store, "p.bin").bytes().to_bytes() == data
    assert bytes(obstore.get_range(store, "p.bin", start=5, end=10)) == data[5:10]
    assert obstore.head(store, "p.bin")["size"] == len(data)
    obstore.delete(store, "p.bin")
    log = [(r.method, r.range, r.status, r.fault) for r in proxy.requests]
    # obstore deletes through S3's bulk DeleteObjects (a POST), and GCS's DELETE.
    deleted = (
        ("POST", None, 200, None) if isinstance(server, LoopbackS3) else ("DELETE", None, 204, None)
    )
    assert log == [
        ("PUT", None, 200, None),
        ("GET", None, 200, None),
        ("GET", "bytes=5-9", 206, None),
        ("HEAD", None, 200, None),
        deleted,
    ]
    assert proxy.requests[1].sent == len(data)
    assert urllib.parse.unquote(proxy.requests[0].path) == f"/{bucket}/p.bin"  # As sent.


def test_proxy_serves_concurrent_requests(server, bucket, proxy):
    data = payload(1 << 20, seed=4)
    server.put(bucket, "c.bin", data)
    store = server.store(bucket, endpoint=proxy.endpoint)

    async def read_all():
        reads = [
            obstore.get_range_async(store, "c.bin", start=i, end=i + 999)
            for i in range(0, 32_000, 1000)
        ]
        return await asyncio.gather(*reads)

    got = asyncio.run(read_all())
    assert [bytes(b) for b in got] == [data[i : i + 999] for i in range(0, 32_000, 1000)]
    assert len(proxy.requests) == 32


def test_proxy_streams_chunked_request_bodies(server, bucket, proxy):
    if isinstance(server, LoopbackS3):
        headers = {
            "Authorization": "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/s3/aws4_request"
        }
    else:
        headers = {}
    connection = http.client.HTTPConnection("127.0.0.1", int(proxy.endpoint.rsplit(":", 1)[1]))
    connection.request(
        "PUT", f"/{bucket}/chunked.bin", iter([b"ab", b"cde"]), headers, encode_chunked=True
    )
    assert connection.getresponse().status == 200
    connection.close()
    assert server.get(bucket, "chunked.bin") == b"abcde"


def test_injected_503_is_seen_without_retries_and_retried_otherwise(server, bucket, proxy):
    server.put(bucket, "f.bin", b"payload")
    proxy.fail_next(1, status=503)
    with pytest.raises(BaseError, match="503"):
        obstore.get(server.store(bucket, endpoint=proxy.endpoint, retry_config=NO_RETRIES), "f.bin")
    proxy.fail_next(3, status=500)
    retrying = server.store(bucket, endpoint=proxy.endpoint, retry_config=QUICK_RETRIES)
    assert obstore.get(retrying, "f.bin").bytes() == b"payload"
    log = [(r.status, r.fault) for r in proxy.requests]
    assert log == [(503, "fail"), (500, "fail"), (500, "fail"), (500, "fail"), (200, None)]


def test_reset_mid_body_is_an_error_without_retries_and_resumed_otherwise(server, bucket, proxy):
    data = payload(1 << 20, seed=5)
    server.put(bucket, "r.bin", data)
    proxy.reset_next(1)
    with pytest.raises(BaseError, match="body"):
        obstore.get(
            server.store(bucket, endpoint=proxy.endpoint, retry_config=NO_RETRIES), "r.bin"
        ).bytes()
    cut = proxy.requests[-1]
    assert urllib.parse.unquote(cut.path) == f"/{bucket}/r.bin"
    assert cut == ProxiedRequest("GET", cut.path, None, 200, "reset", sent=1 << 19)
    proxy.clear()
    proxy.reset_next(1)
    retrying = server.store(bucket, endpoint=proxy.endpoint, retry_config=QUICK_RETRIES)
    assert obstore.get(retrying, "r.bin").bytes().to_bytes() == data
    assert [r.fault for r in proxy.requests] == ["reset", None]
    # Resumed where its bytes stopped: at most where the proxy cut (a reset discards the
    # bytes the client's kernel had not handed over yet).
    first, last = proxy.requests[1].range.removeprefix("bytes=").split("-")
    assert 0 < int(first) <= 1 << 19
    assert int(last) == (1 << 20) - 1


def test_a_stall_makes_a_short_timeout_client_give_up(server, bucket, proxy):
    server.put(bucket, "s.bin", b"slow")
    proxy.stall_next(1, seconds=30)
    impatient = server.store(
        bucket,
        endpoint=proxy.endpoint,
        retry_config=NO_RETRIES,
        client_options={"timeout": "200ms"},
    )
    with pytest.raises(BaseError, match=r"error sending request|timed out|timeout"):
        obstore.get(impatient, "s.bin").bytes()
    proxy.clear()  # Ends the stall: the proxy forwards to a client that has gone.
    deadline = time.monotonic() + 10
    while not proxy.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [(r.method, r.fault) for r in proxy.requests] == [("GET", "stall")]
    assert obstore.get(impatient, "s.bin").bytes() == b"slow"


def test_clear_forgets_requests_and_faults_but_keeps_latency(server, bucket, proxy):
    server.put(bucket, "k.bin", b"k")
    store = server.store(bucket, endpoint=proxy.endpoint, retry_config=NO_RETRIES)
    obstore.head(store, "k.bin")
    proxy.fail_next(5)
    proxy.latency = 0.001
    proxy.clear()
    assert (proxy.requests, proxy.latency) == ([], 0.001)
    assert obstore.get(store, "k.bin").bytes() == b"k"
    assert [r.fault for r in proxy.requests] == [None]


def test_fault_proxy_refuses_bad_arguments():
    with pytest.raises(InvalidArgumentError, match="http://host:port"):
        FaultProxy("s3://bucket")
    proxy = FaultProxy("http://127.0.0.1:9")
    with pytest.raises(InvalidArgumentError, match="latency"):
        proxy.latency = -1
    with pytest.raises(InvalidArgumentError, match="error status"):
        proxy.fail_next(1, status=200)
    with pytest.raises(InvalidArgumentError, match="not running"):
        proxy.endpoint  # noqa: B018


def test_servers_describe_their_environment(loopback_s3, loopback_gcs):
    assert loopback_s3.env == {
        "AWS_ENDPOINT_URL": loopback_s3.endpoint,
        "AWS_ACCESS_KEY_ID": LoopbackS3.ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": LoopbackS3.SECRET_ACCESS_KEY,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    assert loopback_gcs.env == {"STORAGE_EMULATOR_HOST": loopback_gcs.endpoint}
    assert loopback_s3.endpoint.startswith("http://127.0.0.1:")
    assert loopback_s3.url("b", "k/x.bin") == "s3://b/k/x.bin"
    assert loopback_gcs.url("b", "k/x.bin") == "gs://b/k/x.bin"


def test_a_stopped_server_is_gone_with_its_process_group():
    server = LoopbackGCS()
    with pytest.raises(LoopbackServerError, match="not running"):
        server.endpoint  # noqa: B018
    with server:
        pid = server._process.pid
        assert raw(server.endpoint, "GET", "/")[0] == 200
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    server.stop()  # Idempotent.


def test_a_server_exits_when_its_parent_is_killed(tmp_path):
    script = textwrap.dedent(
        """
        import sys, time
        from chute_testing import LoopbackGCS
        server = LoopbackGCS().start()
        print(server._process.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        parent.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not exited(child):
        time.sleep(0.02)
    if not exited(child):
        os.killpg(child, signal.SIGKILL)
        pytest.fail("the server outlived its parent")


def exited(pid):
    """Whether `pid` is gone or a zombie (an orphan's is reaped by init, whenever it does)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_fixture_skips_with_what_to_install_when_moto_is_missing(monkeypatch):
    monkeypatch.setattr(LoopbackS3, "_MODULES", ("no_such_module_for_chute",))
    with pytest.raises(pytest.skip.Exception, match=r"moto\[server\].*uv sync"):
        next(loopback_s3_fixture())
