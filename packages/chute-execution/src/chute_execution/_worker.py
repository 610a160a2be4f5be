"""The worker process: runs chunks of a `ChunkPlan` and sends their outputs back.

A worker receives the pickled plan once, then task messages `(generation, chunk)` on
its connection, and answers each with `("ok", generation, chunk, payload)` or
`("error", generation, chunk, details)`. It never imports jax (nothing here does), and
it ignores SIGINT so that Ctrl-C reaches only the consumer, which shuts workers down.
When the consumer's end of the connection closes (the consumer exited or was killed),
`recv` fails and the worker exits: no orphan keeps running.
"""

from __future__ import annotations

import pickle
import signal
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["WorkerFailure", "worker_main"]


class WorkerFailure:
    """What a worker reports about an exception: picklable whatever the exception was."""

    def __init__(self, error: BaseException, chunk: int, worker: int) -> None:
        self.type_name = f"{type(error).__module__}.{type(error).__qualname__}"
        self.message = str(error)
        self.traceback = "".join(traceback.format_exception(error))
        self.chunk = chunk
        self.worker = worker
        try:
            self.pickled: bytes | None = pickle.dumps(error)
            pickle.loads(self.pickled)
        except Exception:  # Not every exception pickles; the text always does.
            self.pickled = None

    def exception(self) -> BaseException | None:
        """The original exception, rebuilt, or None if it could not travel."""
        if self.pickled is None:
            return None
        try:
            error: BaseException = pickle.loads(self.pickled)
        except Exception:
            return None
        return error


def worker_main(
    worker: int,
    connection: Connection,
    plan_bytes: bytes,
    init_fn: Callable[[int, int], Any] | None,
    num_workers: int,
    encode: Callable[[Any], Any] | None = None,
) -> None:
    """The body of worker process `worker` (a spawn target: module-level, importable)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if init_fn is not None:
            init_fn(worker, num_workers)
        plan = pickle.loads(plan_bytes)
    except BaseException as error:
        connection.send(("error", -1, -1, WorkerFailure(error, -1, worker)))
        return
    while True:
        try:
            task = connection.recv()
        except (EOFError, OSError):
            break  # The consumer is gone.
        if task is None:
            break
        generation, chunk = task
        try:
            result = plan.run(chunk)
            payload = result if encode is None else encode(result)
        except BaseException as error:
            try:
                connection.send(("error", generation, chunk, WorkerFailure(error, chunk, worker)))
            except (EOFError, OSError):
                break
            continue
        try:
            connection.send(("ok", generation, chunk, payload))
        except (EOFError, OSError):
            break
    connection.close()
    sys.stdout.flush()
