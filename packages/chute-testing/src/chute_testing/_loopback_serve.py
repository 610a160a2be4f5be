"""The child side of `LoopbackS3` and `LoopbackGCS`: one object-storage server, in this process.

The parent runs this file by path, `python .../_loopback_serve.py s3` (or `gcs`), not
with `-m chute_testing._loopback_serve`, which would run `chute_sources/__init__.py` and
import numpy and pyarrow: about 0.3 s of start-up for nothing. Run by path, the script
registers a bare stand-in for the `chute_sources` package (the folder, without its
`__init__`), through which `chute_testing._gcs_emulator` and its sibling modules import
as usual. moto and gcp-storage-emulator are imported in this process only.

The protocol with the parent:

- the server listens on 127.0.0.1, on a port the kernel picks (port 0, so two servers
  never race for one), and the child prints `READY <port>` on stdout;
- it serves until its stdin reaches end-of-file. The parent closes the pipe to stop it,
  and the pipe also closes when the parent dies, however it dies (SIGKILL included), so
  a server never outlives its test run.

Example:
    >>> parse_ready_line("READY 8123")
    8123
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import types
from collections.abc import Callable

__all__ = ["READY", "main", "parse_ready_line"]

READY = "READY"
"""The first word of the line the child prints once its server listens."""


def parse_ready_line(line: str) -> int | None:
    """The port announced by a `READY <port>` line, or None for any other line."""
    words = line.split()
    if len(words) == 2 and words[0] == READY and words[1].isdigit():
        return int(words[1])
    return None


def _start_moto(host: str) -> tuple[int, Callable[[], None]]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address=host, port=0, verbose=False)
    server.start()
    return server.get_host_and_port()[1], server.stop


def _start_gcs(host: str) -> tuple[int, Callable[[], None]]:
    from chute_testing._gcs_emulator import make_server  # Absolute: this may be a script.

    server = make_server(host, 0)
    thread = threading.Thread(target=server.serve_forever, name="gcs-emulator", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    port: int = server.server_address[1]
    return port, stop


def main(argv: list[str]) -> int:
    """Starts the server named by `argv[0]` (`s3` or `gcs`), serves until stdin closes.

    Args:
        argv: the command-line arguments after the script's path.

    Returns:
        The exit status: 0 after a clean stop, 2 for a wrong command line.
    """
    starters = {"s3": _start_moto, "gcs": _start_gcs}
    if len(argv) != 1 or argv[0] not in starters:
        print(f"usage: _loopback_serve.py {{{','.join(starters)}}}; got {argv}", file=sys.stderr)
        return 2
    # Werkzeug logs every request, the emulator an error for every 404; the parent reads
    # stderr only to explain a failed start.
    logging.disable(logging.ERROR)
    port, stop = starters[argv[0]]("127.0.0.1")
    print(f"{READY} {port}", flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # Nobody reads stdout any more.
    sys.stdin.buffer.read()  # Returns at end-of-file: the parent closed the pipe, or died.
    stop()
    return 0


def _stand_in_for_the_package() -> None:
    """Makes `chute_sources.X` importable from this folder without `__init__.py`."""
    folder = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == folder:
        del sys.path[0]  # The script's folder: its modules are not top-level modules.
    package = types.ModuleType("chute_sources")
    package.__path__ = [folder]
    sys.modules["chute_sources"] = package


if __name__ == "__main__":
    _stand_in_for_the_package()
    sys.exit(main(sys.argv[1:]))
