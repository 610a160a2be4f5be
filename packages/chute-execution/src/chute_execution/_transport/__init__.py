"""Results from worker processes to the consumer through reusable shared-memory slabs.

A worker pickles each result with `SlabWriter.write`: the raw bytes of its NumPy arrays
go straight into one of the worker's few shared-memory slabs, and a small `SlabMessage`
(the pickle stream of everything else, and where the bytes are) goes to the consumer
through any pipe or queue. The consumer's `SlabReader.read` copies the bytes out once,
into fresh memory, rebuilds the result, and sends `message.token` back so the worker's
`SlabWriter.release` can reuse the slab. Array data is never pickled; a slab is reused
for message after message, so its pages are faulted in once.

Large results need not be copied at all: `SlabReader.read_leased` rebuilds them as views
into the slab, which the worker keeps out of its pool (`SlabWriter.lease`) until the
consumer reports the views gone (`release`). And a worker can build a batch right in a
slab (`SlabWriter.arena`), so that writing it copies nothing either.

Trust boundary: `read` unpickles, which can run any code the stream names. It is only
for messages from this program's own worker processes; chute never unpickles data files
or bytes from the network.

Lifetimes: slabs are owner-only (0600) files in `/dev/shm` whose names carry the worker
process's id and start time. The worker unlinks them on `close()`, at garbage collection
and at exit. A worker killed by a signal cannot: then the consumer unlinks the slabs it
has seen (`SlabReader.forget_process`), and the next chute process that creates shared
memory reclaims any other (`chute_core._shm.reclaim_orphaned_segments`, once the dead
worker has been reaped).

`serve_writes` is the smallest worker loop over one connection: the tests and benchmarks
run it in child processes, and it shows the protocol a worker pool follows.

Example:
    >>> import numpy as np
    >>> with SlabWriter(num_slabs=2) as writer, SlabReader() as reader:
    ...     message = writer.write([{"x": np.zeros(2, np.float32), "id": i} for i in range(2)])
    ...     elements = reader.read(message)  # In the consumer process.
    ...     writer.release(message.token)  # Carried back to the worker.
    >>> elements
    [{'x': array([0., 0.], dtype=float32), 'id': 0}, {'x': array([0., 0.], dtype=float32), 'id': 1}]
"""

from __future__ import annotations

from multiprocessing.connection import Connection

from .codec import SlabMessage as SlabMessage
from .reader import SlabReader as SlabReader
from .writer import DEFAULT_SLAB_SIZE as DEFAULT_SLAB_SIZE
from .writer import SlabWriter as SlabWriter

__all__ = ["DEFAULT_SLAB_SIZE", "SlabMessage", "SlabReader", "SlabWriter", "serve_writes"]


def _receive_release(connection: Connection, writer: SlabWriter, seconds: float) -> None:
    """`wait_for_release` of `serve_writes`: applies one release notice, if one comes."""
    if not connection.poll(seconds):
        return
    try:
        command, value = connection.recv()
    except EOFError:
        raise BrokenPipeError("serve_writes: the consumer closed the connection") from None
    if command not in ("release", "lease"):
        raise RuntimeError(f"serve_writes: expected a release while waiting, got {command!r}")
    (writer.release if command == "release" else writer.lease)(value)


def serve_writes(
    connection: Connection, num_slabs: int, initial_size: int = DEFAULT_SLAB_SIZE
) -> None:
    """Runs a `SlabWriter` for the consumer at the other end of `connection`.

    Commands, each a pair received on `connection`:

    - `("write", obj)`: writes `obj` and sends back its `SlabMessage` (or the exception).
    - `("release", token)`: releases a slab; also accepted while a write waits for one.
    - `("lease", token)`: the consumer keeps the slab (views into it) until a release.
    - `("stop", close)`: returns; closes the writer first if `close`, else leaves the
      clean-up to the writer's finalizers.

    Returns when the consumer closes the connection, after closing the writer.

    Args:
        connection: one end of a `multiprocessing.Pipe()`.
        num_slabs: the writer's number of slabs.
        initial_size: the writer's initial slab size.
    """
    writer = SlabWriter(
        num_slabs,
        initial_size,
        wait_for_release=lambda seconds: _receive_release(connection, writer, seconds),
    )
    while True:
        try:
            command, value = connection.recv()
        except EOFError:
            writer.close()
            return
        if command == "write":
            try:
                reply: object = writer.write(value)
            except BrokenPipeError:  # The consumer is gone.
                writer.close()
                return
            except Exception as error:
                reply = error
            connection.send(reply)
        elif command == "release":
            writer.release(value)
        elif command == "lease":
            writer.lease(value)
        elif command == "stop":
            if value:
                writer.close()
            return
        else:
            raise ValueError(f"serve_writes: unknown command {command!r}")
