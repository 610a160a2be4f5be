"""The metrics endpoint's HTTP server: a thread of its own that steps aside for forks.

chute starts worker processes by forking the training process when no other thread
runs (`chute_core.internal.fork_refusal`), else from a fork server, whose first start
costs ~0.4 s. A server thread that simply ran would rule the fast path out. This one
registers with `quiet_during_forks`: for each fork its thread is woken (a byte on a
pipe), ends, and is started again after the fork; scrapes arriving meanwhile wait in
the socket's backlog. A client gets 5 s to send its request, so a stalled one cannot
hold a fork up for long.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import time
import weakref
import wsgiref.simple_server
from collections.abc import Callable, Iterator
from typing import Any

from chute_core.internal import quiet_during_forks, thread_count

__all__ = ["Endpoint"]

_ENDPOINTS: weakref.WeakSet[Endpoint] = weakref.WeakSet()


class _QuietHandler(wsgiref.simple_server.WSGIRequestHandler):
    """Logs nothing per request; gives a client 5 s to send its request."""

    timeout = 5

    def log_message(self, format: str, *args: Any) -> None:
        return


def _server_class(host: str, port: int) -> type[wsgiref.simple_server.WSGIServer]:
    """A WSGI server class of the address family `host` resolves to (IPv4 or IPv6)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    class Server(wsgiref.simple_server.WSGIServer):
        address_family = family

    return Server


class Endpoint:
    """Serves `app` (a WSGI application) at `host:port` until `close()`.

    Example:
        >>> import urllib.request
        >>> def app(environ, start_response):
        ...     start_response("200 OK", [("Content-Type", "text/plain")])
        ...     return [b"up 1"]
        >>> endpoint = Endpoint(app, "127.0.0.1", 0)
        >>> urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/").read()
        b'up 1'
        >>> with endpoint.paused():  # As around a fork: no thread of its own runs.
        ...     endpoint.running
        False
        >>> endpoint.running
        True
        >>> endpoint.close()
    """

    def __init__(self, app: Callable[..., Any], host: str, port: int) -> None:
        self._httpd = wsgiref.simple_server.make_server(
            host, port, app, _server_class(host, port), handler_class=_QuietHandler
        )
        self.port = int(self._httpd.server_port)
        self._wake_read, self._wake_write = os.pipe()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._paused = 0
        self._closed = False
        self._start()
        _ENDPOINTS.add(self)

    @property
    def running(self) -> bool:
        """Whether its thread runs now."""
        return self._thread is not None

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="chute-metrics", daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        os.write(self._wake_write, b"x")
        thread.join()
        for _ in range(100):  # Until its native thread is gone too (microseconds).
            if (thread_count() or 0) <= threading.active_count():
                break
            time.sleep(0.0002)

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._httpd.socket, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            while True:
                ready = [key.fileobj for key, _ in selector.select()]
                if self._wake_read in ready:
                    os.read(self._wake_read, 1)
                    return
                self._httpd.handle_request()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No thread of its own runs during the block (so that this process may fork)."""
        with self._lock:
            self._paused += 1
            if self._paused == 1:
                self._stop()
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1
                if self._paused == 0 and not self._closed:
                    self._start()

    def close(self) -> None:
        """Stops serving and frees the port."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop()
        self._httpd.server_close()
        os.close(self._wake_read)
        os.close(self._wake_write)


@contextlib.contextmanager
def _all_paused() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for endpoint in list(_ENDPOINTS):
            stack.enter_context(endpoint.paused())
        yield


quiet_during_forks(_all_paused)
