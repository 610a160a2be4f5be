"""gcp-storage-emulator as a concurrent HTTP/1.1 server that speaks GCS's XML API too.

`make_server` builds a server on the emulator's in-memory `Storage`. Requests on the JSON
API's paths (`/storage/v1/...`, `/upload/...`, `/download/...`, `/batch/...`, `/b/...`,
and `/`, the health check) go to the emulator's own handler functions, through its own
route table; every other path is the XML API, which `chute_testing._gcs_xml.XmlApi`
answers (its docstring lists what real GCS does there and the emulator does not). Gaps
filled here, each as 'real GCS does X; the emulator does not':

- Real GCS serves many requests at once, over kept-alive HTTP/1.1 connections; the
  emulator's `http.server.HTTPServer` serves one request at a time, over HTTP/1.0 (one
  connection per request, closed after it).
- Real GCS sends a JSON API media download (`alt=media`) with the same headers as an XML
  read (`ETag`, `x-goog-generation`, ...) and honours suffix ranges there; the emulator
  omits them, so those downloads are answered by `XmlApi.read` too.
- Real GCS stores an empty object sent by a media upload; the emulator's body parser
  gives its upload handler None for an empty body, and the upload fails with 500. An
  empty body that is not JSON is handed over as `b""` here.
- Real GCS keeps its metadata in a database; the emulator rewrites a JSON dump of all of
  its metadata after every write, a cost per write that grows with the number of objects
  (in memory nothing ever reads that dump back). Skipped here.

Only the server's own process imports this module (see `_loopback_serve`), and
gcp-storage-emulator is imported when `make_server` runs.

Example:
    >>> _is_json_api("/storage/v1/b/bucket/o"), _is_json_api("/bucket/key.bin")
    (True, False)
"""

from __future__ import annotations

import io
import re
import sys
import traceback
import urllib.parse
from collections.abc import Callable
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._gcs_objects import Reply
from ._gcs_xml import XmlApi

__all__ = ["make_server"]

_JSON_PREFIXES = ("/storage/", "/upload/", "/download/", "/batch/", "/b/")
_UNREAD = object()


def _is_json_api(path: str) -> bool:
    return path in ("/", "/b", "/wipe") or path.startswith(_JSON_PREFIXES)


class _Body:
    """A request body already read, shaped as the emulator's body parser reads one."""

    def __init__(self, body: bytes, headers: Message) -> None:
        self.rfile = io.BytesIO(body)
        self.headers = {"Content-Length": str(len(body))}
        for name in ("Content-Type", "Content-Encoding"):
            if headers.get(name):
                self.headers[name] = headers[name]


class _EmulatorRequest:
    """What the emulator's handler functions read from a request (its `Request`'s shape)."""

    def __init__(self, handler: _Handler, method: str, body: bytes, match: re.Match[str]) -> None:
        host = handler.headers.get("Host") or "{}:{}".format(*handler.server.server_address[:2])
        self.base_url = f"http://{host}"
        self.full_url = self.base_url + handler.path
        self.method = method
        split = urllib.parse.urlsplit(handler.path)
        self.path = split.path
        self.query = urllib.parse.parse_qs(split.query)
        self.params = {k: urllib.parse.unquote(v) for k, v in match.groupdict().items() if v}
        self._headers = handler.headers
        self._body = body
        self._parse: Callable[[Any, dict[str, list[str]]], Any] = handler.server.parse_body
        self._data: Any = _UNREAD

    @property
    def data(self) -> Any:
        """The body, parsed by the emulator's own parser (JSON, multipart or bytes)."""
        if self._data is _UNREAD:
            self._data = self._parse(_Body(self._body, self._headers), self.query)
            if self._data is None and "json" not in (self._headers.get("Content-Type") or ""):
                self._data = b""  # An empty upload; the emulator's parser says None.
        return self._data

    def get_header(self, key: str, default: str | None = None) -> str | None:
        """A request header, or `default`."""
        return self._headers.get(key, default)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # obstore opens many connections at once.

    def __init__(self, address: tuple[str, int], emulator: dict[str, Any]) -> None:
        super().__init__(address, _Handler)
        self.storage = emulator["storage"]
        self.objects = emulator["objects"]
        self.parse_body: Callable[[Any, dict[str, list[str]]], Any] = emulator["parse_body"]
        self.routes: list[tuple[re.Pattern[str], dict[str, Callable[..., Any]]]] = [
            (re.compile(pattern), methods) for pattern, methods in emulator["routes"]
        ]
        self.xml = XmlApi(self.storage, self.objects)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # Not a client gone away.
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # Else headers then body wait 40 ms for a delayed ACK.
    server: _Server

    def do_GET(self) -> None:
        """Answers any method: the routes, not the method, choose the handler."""
        try:
            reply = self._reply(self._read_body())
        except ConnectionError:
            raise
        except Exception:
            traceback.print_exc()
            reply = Reply(HTTPStatus.INTERNAL_SERVER_ERROR, body=traceback.format_exc().encode())
        self._send(reply, head=self.command == "HEAD")

    do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a test run's requests are counted by the proxy, not logged here."""

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length:
            return self.rfile.read(int(length))
        if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
            return b""
        chunks = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline().strip():  # Trailers, up to the empty line.
            pass
        return b"".join(chunks)

    def _reply(self, body: bytes) -> Reply:
        method = self.headers.get("x-http-method-override") or self.command
        split = urllib.parse.urlsplit(self.path)
        if _is_json_api(split.path):
            return self._json_api(method, split.path, body)
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        bucket, _, name = (urllib.parse.unquote(part) for part in split.path[1:].partition("/"))
        xml, base_url = self.server.xml, f"http://{self.headers.get('Host')}"
        if not name and method == "GET":
            return xml.list(bucket, query)
        if name and method in ("GET", "HEAD"):
            return xml.read(bucket, name, query, self.headers, head=method == "HEAD")
        if name and method == "PUT":
            return xml.write(bucket, name, query, self.headers, body, base_url)
        if name and method == "POST":
            return xml.post(bucket, name, query, self.headers, body, base_url)
        if name and method == "DELETE":
            return xml.delete(bucket, name, query, self.headers)
        return Reply(HTTPStatus.NOT_IMPLEMENTED, body=f"{method} {split.path}".encode())

    def _json_api(self, method: str, path: str, body: bytes) -> Reply:
        """One JSON API request, answered by the emulator's handler for its route."""
        objects = self.server.objects
        routes = ((pattern.fullmatch(path), methods) for pattern, methods in self.server.routes)
        match, methods = next(((m, found) for m, found in routes if m), (None, {}))
        if match is None:
            return Reply(HTTPStatus.NOT_IMPLEMENTED, body=f"{method} {path}".encode())
        request = _EmulatorRequest(self, method, body, match)
        function = methods.get(method)
        if function is None and method == "POST" and path.endswith("/o"):
            function = objects.insert  # As the emulator does: uploads without /upload.
        if function is None:
            return Reply(HTTPStatus.NOT_IMPLEMENTED, body=f"{method} {path}".encode())
        if function is objects.download or (
            function is objects.get and request.query.get("alt") == ["media"]
        ):
            bucket, name = request.params["bucket_name"], request.params["object_id"]
            return self.server.xml.read(bucket, name, request.query, self.headers, head=False)
        reply = Reply()
        with self.server.xml.lock:
            function(request, reply, self.server.storage)
        return reply

    def _send(self, reply: Reply, *, head: bool) -> None:
        status = int(reply.status)
        self.send_response(status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        has_body = status >= 200 and status not in (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED)
        if has_body:
            length = len(reply.body) if reply.length is None else reply.length
            self.send_header("Content-Length", str(length))
        self.end_headers()
        if has_body and not head:
            self.wfile.write(reply.body)


def make_server(host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A gcp-storage-emulator with an empty in-memory storage, listening on `host:port`.

    Args:
        host: the address to listen on.
        port: the port; 0 lets the kernel pick a free one (read `server_address`).

    Returns:
        The server, listening; `serve_forever()` answers requests.
    """
    from gcp_storage_emulator import server
    from gcp_storage_emulator.handlers import objects
    from gcp_storage_emulator.storage import Storage

    storage = Storage(use_memory_fs=True)
    storage._write_config_to_file = lambda: None  # See the module docstring.
    emulator = {
        "storage": storage,
        "objects": objects,
        "parse_body": server._read_data,
        "routes": server.HANDLERS,
    }
    return _Server((host, port), emulator)
