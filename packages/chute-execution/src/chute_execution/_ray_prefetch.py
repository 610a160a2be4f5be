"""`RayPrefetchIter`: the chunks of a plan run as Ray tasks, merged in order here.

The same consumer as `MultiprocessPrefetchIter` (the order, the states, the error
budget's skips, errors after the elements before them) with another backend: each
chunk is a Ray task (`_ray_task.run_chunk`), at most `num_workers *
per_worker_buffer_size` in flight. A chunk whose Ray worker dies runs again elsewhere
(Ray's task retries, up to `max_retries`): it is a pure function of (plan, chunk), so
nothing is repeated or lost. Tasks no longer wanted (the iterator closed, restored or
raised) are cancelled through the driver's board (`_ray_board`), not `ray.cancel`.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import socket
import sys
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from chute_core import ChuteError

from ._chunk_plan import ChunkPlan, ChunkResult
from ._mp_prefetch import MultiprocessPrefetchIter
from ._ray_board import CLOSED, Board
from ._ray_options import RayOptions
from ._worker_pool import WorkerDiedError, WorkerTimeoutError

__all__ = ["RayPrefetchIter"]

_POLL = 0.5  # Seconds between looks at the cluster's head while waiting for a chunk.


class _Cluster:
    """The Ray connection of this process: joined or started by chute, or by the user.

    A cluster chute started is stopped when this process exits (not when an iterator
    closes: the next epoch's iterator would wait seconds for a new one); a connection
    chute made to a running cluster is closed then too, and the cluster left running.
    One the user started or joined (`ray.init` before the first iterator) is theirs.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ours = False  # Whether chute called ray.init (so it calls ray.shutdown).
        self.remote: Any = None  # `run_chunk` as a Ray remote function.
        self.board: tuple[Any, Any] | None = None  # (job and node, this driver's `Board`)

    def connect(self, options: RayOptions) -> tuple[Any, Any]:
        """Joins or starts the cluster if this process has none; `run_chunk` and the board.

        The board is made once per connection (a Ray job on a cluster): an actor owned
        by this process, reserving no CPU, gone with it.
        """
        import ray

        with self.lock:
            if not ray.is_initialized():
                settings: dict[str, Any] = {
                    "include_dashboard": False,
                    "log_to_driver": False,
                    "logging_level": logging.WARNING,
                    "configure_logging": False,
                }
                address = options.address
                if address is None and not os.environ.get("RAY_ADDRESS"):
                    address = "local"  # A new local cluster, never a stale one's address.
                    # Its workers see this machine's files: let them import what this
                    # process can, as local worker processes do.
                    path = os.pathsep.join(entry for entry in sys.path if entry)
                    settings["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
                with warnings.catch_warnings():
                    # Ray forks only to exec its own processes (the GCS, the raylet):
                    # jax's warning about forking a multithreaded process does not apply.
                    warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
                    ray.init(address=address, **settings)
                if not self.ours:
                    atexit.register(self.stop)
                self.ours = True
            if self.remote is None:
                from ._ray_task import run_chunk

                self.remote = ray.remote(run_chunk)
            # A job id alone is no key: the first job of every new cluster has the same
            # one, and a handle kept from a cluster that was shut down makes Ray abort
            # the process when used (after `ray.shutdown()` and `ray.init()` again).
            context = ray.get_runtime_context()
            session = (context.get_job_id(), context.get_node_id())
            if self.board is None or self.board[0] != session:
                actor = ray.remote(Board).options(num_cpus=0, max_restarts=-1)
                self.board = (session, actor.remote())
            return self.remote, self.board[1]

    def stop(self) -> None:
        """Stops (or leaves) the cluster chute started (or joined); never the user's."""
        import ray

        with self.lock:
            if self.ours and ray.is_initialized():
                ray.shutdown()
            self.ours = False
            self.remote = None
            self.board = None


CLUSTER = _Cluster()


class _Tasks:
    """The Ray side of one iterator: its shipped plan and its tasks in flight."""

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex  # This iterator, to the board.
        self.connected = False
        self.remote: Any = None
        self.board: Any = None
        self.plan: tuple[str, list[Any]] | None = None  # (key, [reference to the bytes])
        self.futures: dict[int, tuple[int, Any]] = {}  # chunk -> (generation, reference)

    def cancel(self, below: int) -> None:
        """Cancels the tasks of a generation below `below` and drops their references.

        Tasks not yet started return without running (the board says so); a running
        one stops at its next element, and its result is freed unread. Never
        `ray.cancel`: see `_ray_board`.
        """
        if self.board is not None and self.futures:
            import ray

            if ray.is_initialized():  # Not after the connection ended (at exit).
                self.board.withdraw.remote(self.token, below)
        self.futures = {}

    def release(self) -> None:
        """Cancels every task in flight and drops the references to them and the plan."""
        self.cancel(CLOSED)
        self.token = uuid.uuid4().hex  # Used again, the iterator's new tasks are wanted.
        self.plan = None
        self.connected = False


class RayPrefetchIter(MultiprocessPrefetchIter):
    """Runs a `ChunkPlan` as Ray tasks and yields its outputs in order.

    Args:
        plan: the chunked pipeline (shipped once to the cluster's object store).
        options: the Ray cluster and how much runs at once (`RayOptions`).
        worker_init_fn: called as `fn(worker_index, num_workers)` once in each Ray
            worker process, before it runs the plan's first chunk there.
        caller: how messages name what runs the chunks.

    The output and the states are those of `MultiprocessPrefetchIter` with any number
    of workers. Arrays arrive as read-only views into Ray's object store (no copy).

    Example:
        >>> from chute_transforms import MapIter
        >>> plan = ChunkPlan(range(6), [(MapIter, (abs,), {})], chunk_size=2)
        >>> RayPrefetchIter(plan, RayOptions(num_workers=1))
        RayPrefetchIter(num_workers=1, chunk_size=2)
    """

    def __init__(
        self,
        plan: ChunkPlan,
        options: RayOptions,
        worker_init_fn: Callable[[int, int], Any] | None = None,
        caller: str = "ray_prefetch",
    ) -> None:
        super().__init__(plan, options, worker_init_fn, caller)  # type: ignore[arg-type]
        self._ray_options = options
        self._tasks = _Tasks()
        self._ray_finalizer = weakref.finalize(self, self._tasks.release)

    def _remote_result(self, chunk: int) -> ChunkResult:
        import ray

        tasks = self._connect()
        options = self._ray_options
        self._submit_from(chunk)
        entry = tasks.futures.pop(chunk, None)
        if entry is None or entry[0] != self._generation:
            self._submit(chunk)
            entry = tasks.futures.pop(chunk)
        reference = entry[1]
        try:
            self._wait(reference, chunk)
            kind, payload = ray.get(reference)
            self.heard(chunk)
        except (WorkerDiedError, ChuteError):
            self.close()
            raise
        except ray.exceptions.RayError as error:
            self.close()
            raise WorkerDiedError(
                f"{self._caller}: the Ray task running chunk {chunk} failed "
                f"{options.max_retries + 1} times (its worker died each time, or its node "
                f"was lost): {type(error).__name__}: {str(error).splitlines()[0]}"
            ) from error
        if kind == "error":
            self._restart()
            raise self._rebuild(payload)
        if kind == "cancelled":  # Only tasks this iterator no longer waits for are.
            self.close()
            raise ChuteError(f"{self._caller}: chunk {chunk} was cancelled while wanted")
        result: ChunkResult = payload
        return result

    def _submit_from(self, chunk: int) -> None:
        """Submits the chunks from `chunk` on that are not yet in flight (a bounded few)."""
        options = self._ray_options
        if self._next_submit <= chunk:
            self._next_submit = chunk  # After a restore, start at the wanted chunk.
        ahead = options.num_workers * options.per_worker_buffer_size
        while self._next_submit < chunk + ahead and self._spans.span(self._next_submit):
            self._submit(self._next_submit)
            self._next_submit += 1

    def start_prefetch(self) -> None:
        """Joins (or starts) the cluster now and submits the first chunks' tasks.

        Otherwise that happens at the first `next()`. Idempotent; nothing happens at
        the end of the stream. Call it after `set_state` when restoring.
        """
        if self._outputs is None and self._spans.span(self._chunk) is not None:
            self._connect()
            self._submit_from(self._chunk)

    def _connect(self) -> _Tasks:
        tasks = self._tasks
        if not tasks.connected:
            tasks.remote, tasks.board = CLUSTER.connect(self._ray_options)
            tasks.connected = True
            self._put_plan()
        return tasks

    def _put_plan(self) -> None:
        import ray

        assert self._shipped is not None
        key = hashlib.blake2b(self._shipped[0], digest_size=16).hexdigest()
        self._tasks.plan = (key, [ray.put(self._shipped)])

    def _reshipped(self) -> None:
        if self._tasks.connected:  # Tasks from now on run the new plan.
            self._put_plan()

    def _submit(self, chunk: int) -> None:
        tasks, options = self._tasks, self._ray_options
        assert tasks.plan is not None
        key, holder = tasks.plan
        remote = tasks.remote.options(
            num_cpus=options.num_cpus, max_retries=options.max_retries, retry_exceptions=False
        )
        workers = options.num_workers
        wanted = (tasks.board, tasks.token, self._generation)
        span, worker = self.span_of(chunk), self.worker_of(chunk)
        reference = remote.remote(
            key, holder, span, self.replay_for(chunk), worker, workers, wanted
        )
        tasks.futures[chunk] = (self._generation, reference)
        self.sent(chunk)

    def _wait(self, reference: Any, chunk: int) -> None:
        """Waits for `reference`, watching the cluster's head and the chunk's timeout."""
        import ray

        options = self._ray_options
        started = last_heard = time.monotonic()
        address = ray.get_runtime_context().gcs_address
        while True:
            ready, _ = ray.wait([reference], timeout=_POLL)
            if ready:
                return
            now = time.monotonic()
            if options.worker_timeout is not None and now - started > options.worker_timeout:
                raise WorkerTimeoutError(
                    f"{self._caller}: chunk {chunk} took more than worker_timeout="
                    f"{options.worker_timeout} s on the Ray cluster; the iterator let go of its "
                    "tasks."
                )
            if _reachable(address):
                last_heard = now
            elif now - last_heard > options.head_timeout:
                raise ChuteError(
                    f"{self._caller}: lost the Ray cluster's head at {address}: no answer "
                    f"for {options.head_timeout} s while waiting for chunk {chunk}. The "
                    "iterator's state is still valid: restore it once the cluster is back."
                )

    def _restart(self) -> None:
        super()._restart()
        self._tasks.cancel(self._generation)  # Their answers would be discarded.

    def close(self) -> None:
        """Cancels its tasks in flight and drops every reference it holds in the cluster."""
        self._tasks.release()
        super().close()

    def __repr__(self) -> str:
        return (
            f"RayPrefetchIter(num_workers={self._ray_options.num_workers}, "
            f"chunk_size={self._plan.chunk_size})"
        )


def _reachable(address: str) -> bool:
    """Whether something accepts connections at `host:port` (the head's GCS)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False
