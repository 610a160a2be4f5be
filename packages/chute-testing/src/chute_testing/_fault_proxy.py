"""`FaultProxy`: an HTTP/1.1 proxy on loopback that adds latency and injects faults.

A client pointed at the proxy's endpoint instead of a server's gets the server's answers,
streamed through, except where a fault was scheduled: an error status without the server
being asked, a connection reset in the middle of a body, a stall. Faults apply to the
next requests in the order they were scheduled, one per request, whatever the request;
with a client that sends many requests at once, which request gets which fault is
decided by arrival order.

Only the standard library: a `ThreadingHTTPServer` (one thread per client connection,
kept alive between requests) whose handler forwards each request over an `http.client`
connection of its own to the target (kept alive too), bodies streamed both ways in
chunks, so objects of any size pass through at memory-copy speed.
"""

from __future__ import annotations

import collections
import http.client
import socket
import struct
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

from chute_core import InvalidArgumentError

__all__ = ["FaultProxy", "ProxiedRequest"]

Fault = Literal["fail", "reset", "stall"]
_CHUNK = 1 << 18
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "expect",
        "content-length",  # Set again from the body actually sent.
    }
)
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


@dataclass(frozen=True)
class ProxiedRequest:
    """One request the proxy answered, recorded as its answer ends.

    Attributes:
        method: the HTTP method.
        path: the request target as sent (percent-encoded), with its query string.
        range: the `Range` header, or None.
        status: the status the proxy answered with (the server's, or a fault's).
        fault: the fault injected into this request, or None.
        sent: body bytes sent to the client.

    Example:
        >>> ProxiedRequest("GET", "/bucket/key", "bytes=0-9", 206, None, 10).status
        206
    """

    method: str
    path: str
    range: str | None
    status: int
    fault: Fault | None = None
    sent: int = 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # obstore opens many connections at once.

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.sockets: set[socket.socket] = set()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.proxy._lock:
            self.sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.proxy._lock:
            self.sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # Not a connection gone away.
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # Else headers then body wait 40 ms for a delayed ACK.
    server: _Server
    _upstream: http.client.HTTPConnection | None = None

    def do_GET(self) -> None:
        """Proxies a request of any method (all `do_*` are this)."""
        proxy = self.server.proxy
        fault, seconds, status = proxy._take_fault()
        if fault == "fail":
            self._drain_body()
            body = f"FaultProxy: injected {status}\n".encode()
            self._record(status, fault, len(body))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if fault == "stall":
            proxy._stop.wait(seconds)
        if proxy.latency > 0:
            proxy._stop.wait(proxy.latency)
        try:
            response = self._forward()
        except OSError as error:
            self._close_upstream()
            self._record(HTTPStatus.BAD_GATEWAY, fault)
            self.send_error(HTTPStatus.BAD_GATEWAY, f"FaultProxy: {error}")
            return
        self._answer(response, fault)

    do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: `FaultProxy.requests` is the log."""

    def _record(self, status: int, fault: Fault | None, sent: int = 0) -> None:
        record = ProxiedRequest(
            self.command, self.path, self.headers.get("Range"), int(status), fault, sent
        )
        with self.server.proxy._lock:
            self.server.proxy._requests.append(record)

    def _body_chunks(self) -> Iterator[bytes]:
        """The request body, de-chunked if it came chunked."""
        length = self.headers.get("Content-Length")
        if length is not None:
            remaining = int(length)
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, _CHUNK))
                if not chunk:
                    raise ConnectionResetError("client closed the connection mid-body")
                remaining -= len(chunk)
                yield chunk
        elif "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                yield self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline().strip():  # Trailers, up to the empty line.
                pass

    def _drain_body(self) -> None:
        for _ in self._body_chunks():
            pass

    def _close_upstream(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

    def _forward(self) -> http.client.HTTPResponse:
        """Sends the request to the target, body streamed; returns the response."""
        path = self.path
        if path.startswith(("http://", "https://")):  # Absolute form: used as a forward proxy.
            split = urllib.parse.urlsplit(path)
            path = urllib.parse.urlunsplit(("", "", split.path or "/", split.query, ""))
        has_body = "Content-Length" in self.headers or "Transfer-Encoding" in self.headers
        for attempt in (0, 1):
            reused = self._upstream is not None
            if self._upstream is None:
                host, port = self.server.proxy._target
                self._upstream = http.client.HTTPConnection(host, port)
                self._upstream.connect()
                assert self._upstream.sock is not None
                self._upstream.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream = self._upstream
            try:
                self._send_request(upstream, path)
                return upstream.getresponse()
            except _STALE:
                # A kept-alive connection the server had closed: retry once on a new one,
                # if nothing of the client's body was consumed.
                self._close_upstream()
                if attempt or not reused or has_body:
                    raise
        raise AssertionError("unreachable")

    def _send_request(self, upstream: http.client.HTTPConnection, path: str) -> None:
        upstream.putrequest(self.command, path, skip_host=True, skip_accept_encoding=True)
        dropped = {name.strip().lower() for name in self.headers.get("Connection", "").split(",")}
        for name, value in self.headers.items():
            if name.lower() not in _HOP_BY_HOP and name.lower() not in dropped:
                upstream.putheader(name, value)
        length = self.headers.get("Content-Length")
        if length is not None:
            upstream.putheader("Content-Length", length)
            upstream.endheaders()
            for chunk in self._body_chunks():
                upstream.send(chunk)
        elif "Transfer-Encoding" in self.headers:
            upstream.putheader("Transfer-Encoding", "chunked")
            upstream.endheaders()
            for chunk in self._body_chunks():
                upstream.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            upstream.send(b"0\r\n\r\n")
        else:
            upstream.endheaders()

    def _answer(self, response: http.client.HTTPResponse, fault: Fault | None) -> None:
        """Streams the response to the client; a reset fault cuts it halfway.

        The request is recorded just before the last bytes of its answer are written: a
        client that has had its answer finds the request in `FaultProxy.requests`.
        """
        status = response.status
        length = response.getheader("Content-Length")
        bodiless = self.command == "HEAD" or status in (204, 304) or 100 <= status < 200
        chunked = not bodiless and length is None
        self.send_response(status, response.reason)
        connection = response.getheader("Connection") or ""
        dropped = {name.strip().lower() for name in connection.split(",")}
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP and name.lower() not in dropped:
                self.send_header(name, value)
        if length is not None:
            self.send_header("Content-Length", length)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        # The body bytes to send (None: up to the end of the server's chunked body).
        limit = 0 if bodiless else (int(length) if length is not None else None)
        if fault == "reset":
            limit = _CHUNK if limit is None else limit // 2
        sent, recorded = 0, False

        def record() -> None:
            nonlocal recorded
            if not recorded:
                recorded = True
                self._record(status, fault, sent)

        try:
            if limit == 0:
                record()
            self.end_headers()
            buffer = memoryview(bytearray(_CHUNK))
            while limit is None or sent < limit:
                view = buffer if limit is None else buffer[: min(_CHUNK, limit - sent)]
                count = response.readinto(view)
                if not count:
                    break
                sent += count
                if sent == limit:
                    record()
                self.wfile.write(
                    b"%x\r\n%s\r\n" % (count, view[:count]) if chunked else view[:count]
                )
            if chunked and fault != "reset":
                record()
                self.wfile.write(b"0\r\n\r\n")
        finally:
            record()
        if fault == "reset":
            self._reset()
        elif response.will_close or not response.isclosed():
            self._close_upstream()

    def _reset(self) -> None:
        """Closes both connections abruptly: the client gets a TCP reset, not an EOF."""
        self._close_upstream()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def finish(self) -> None:
        """Closes the upstream connection with the client's."""
        self._close_upstream()
        try:
            super().finish()
        except OSError:
            pass  # The client's socket is already closed (a reset fault).


class FaultProxy:
    """An HTTP/1.1 proxy on 127.0.0.1 in front of `target`, injecting latency and faults.

    Point a client at `endpoint` instead of the server's. Requests are forwarded with
    their headers (`Host` included, so signatures stay valid) and bodies streamed both
    ways; connections are kept alive, and each client connection gets a thread of its
    own. The proxy runs in this process, in threads; it starts in well under 10 ms.

    Settable at any time, from any thread: `latency` (seconds of delay before each
    forwarded request) and the faults of `fail_next`, `reset_next` and `stall_next`,
    which apply to the next requests in the order they were scheduled.

    Args:
        target: the server's base URL, `http://host:port`.
        latency: seconds added before each forwarded request.

    Example:
        >>> import obstore
        >>> from chute_testing import LoopbackGCS
        >>> with LoopbackGCS() as gcs, FaultProxy(gcs.endpoint) as proxy:
        ...     gcs.create_bucket("data")
        ...     gcs.put("data", "x.bin", b"hello")
        ...     store = gcs.store("data", endpoint=proxy.endpoint)
        ...     proxy.fail_next(1, status=503)  # obstore retries a 503: no error.
        ...     bytes(obstore.get_range(store, "x.bin", start=1, end=3))
        ...     [(r.method, r.status, r.fault) for r in proxy.requests]
        b'el'
        [('GET', 503, 'fail'), ('GET', 206, None)]
    """

    def __init__(self, target: str, *, latency: float = 0.0) -> None:
        split = urllib.parse.urlsplit(target)
        if split.scheme != "http" or not split.hostname or split.port is None:
            raise InvalidArgumentError(
                f"FaultProxy needs an http://host:port target; got {target!r}. Pass a "
                "loopback server's endpoint, such as LoopbackS3().endpoint"
            )
        self._target = (split.hostname, split.port)
        self.target = target
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._faults: collections.deque[tuple[Fault, float, int]] = collections.deque()
        self._requests: list[ProxiedRequest] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.latency = latency

    @property
    def latency(self) -> float:
        """Seconds added before each forwarded request (not before an injected failure)."""
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        if not seconds >= 0:
            raise InvalidArgumentError(f"latency must be >= 0 seconds; got {seconds!r}")
        self._latency = float(seconds)

    @property
    def endpoint(self) -> str:
        """The proxy's base URL, `http://127.0.0.1:PORT`: give it to the client."""
        if self._server is None:
            raise InvalidArgumentError("FaultProxy is not running: use it in a `with` block")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[ProxiedRequest]:
        """The requests answered so far, in the order their answers ended (a copy)."""
        with self._lock:
            return list(self._requests)

    def _schedule(self, fault: Fault, count: int, seconds: float = 0.0, status: int = 0) -> None:
        if count < 0:
            raise InvalidArgumentError(f"count must be >= 0; got {count}")
        with self._lock:
            self._faults.extend([(fault, seconds, status)] * count)

    def fail_next(self, count: int = 1, *, status: int = 503) -> None:
        """Answers the next `count` requests with `status`, without forwarding them."""
        if not 400 <= status <= 599:
            raise InvalidArgumentError(f"status must be an error status (4xx, 5xx); got {status}")
        self._schedule("fail", count, status=status)

    def reset_next(self, count: int = 1) -> None:
        """Forwards the next `count` requests, then resets each connection mid-body.

        The proxy sends the status line, the headers and half of the body (of a body of
        unknown length, 256 KiB), then resets the connection (TCP RST). The client may
        get fewer bytes than were sent: a reset discards what its kernel still holds.
        """
        self._schedule("reset", count)

    def stall_next(self, count: int = 1, *, seconds: float = 5.0) -> None:
        """Holds each of the next `count` requests for `seconds` before forwarding it.

        A client whose timeout is shorter gives up; `clear()` and leaving the `with` block
        end a stall early.
        """
        if not seconds >= 0:
            raise InvalidArgumentError(f"seconds must be >= 0; got {seconds!r}")
        self._schedule("stall", count, seconds=seconds)

    def _take_fault(self) -> tuple[Fault | None, float, int]:
        with self._lock:
            return self._faults.popleft() if self._faults else (None, 0.0, 0)

    def clear(self) -> None:
        """Forgets the recorded requests and the pending faults, and ends stalls.

        `latency` stays as it is: set it to 0 to remove it.
        """
        with self._lock:
            self._faults.clear()
            self._requests.clear()
        if self._server is not None:
            self._stop.set()
            self._stop = threading.Event()

    def start(self) -> Self:
        """Starts listening and forwarding; returns `self`."""
        if self._server is None:
            self._stop = threading.Event()
            self._server = _Server(self)
            self._thread = threading.Thread(
                target=self._server.serve_forever, args=(0.05,), name="fault-proxy", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the proxy and closes every connection to it. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stop.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            sockets = list(server.sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.endpoint if self._server is not None else "stopped"
        return f"FaultProxy({where} -> {self.target})"
