"""The worker process: runs chunks of a `ChunkPlan` and sends their outputs back.

A worker receives the shipped plan once, then task messages `("task", generation,
chunk, replay)` on its connection (`replay`: elements of the chunk an error budget
skipped before a restore), and answers each with `("ok", generation, chunk, message)`
(a `SlabMessage`: the arrays are in the worker's shared-memory slabs) or
`("error", generation, chunk, details)`; for a traced plan, an `"ok"` answer has a
fifth item: the chunk's trace events (`ChunkTrace`). It never imports jax (nothing here
does), and it ignores SIGINT so that Ctrl-C reaches only the consumer, which shuts workers down.
When the consumer's end of the connection closes (the consumer exited or was killed),
`recv` fails and the worker exits: no orphan keeps running.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from chute_core.internal import (
    COUNTERS,
    reclaim_orphaned_segments,
    release_owner,
    remove_own_segments,
)
from chute_sources.internal import read_one_by_one

from ._chunk_trace import ChunkTrace
from ._shipping import unship
from ._transport.writer import SlabWriter

__all__ = ["READY", "STOPPED", "WorkerFailure", "keep_freed_memory", "load_plan", "worker_main"]

STOPPED = "stopped"
"""What a worker sends once it has stopped on request, its slabs given back."""

READY = "ready"
"""What a parked worker sends as soon as it receives its next plan (`_idle_workers`)."""


class WorkerFailure:
    """What a worker reports about an exception: picklable whatever the exception was."""

    def __init__(self, error: BaseException, chunk: Any, worker: int) -> None:
        self.type_name = f"{type(error).__module__}.{type(error).__qualname__}"
        self.message = str(error)
        self.traceback = "".join(traceback.format_exception(error))
        self.chunk = chunk
        self.worker = worker
        # What the consumer needs even when the exception itself cannot travel: its
        # notes (the stage and the position) and how many outputs came before it.
        self.notes = [str(note) for note in getattr(error, "__notes__", ())]
        before = getattr(error, "chute_outputs_before", None)
        self.outputs_before = before if isinstance(before, int) else None
        try:
            self.pickled: bytes | None = pickle.dumps(error)
            pickle.loads(self.pickled)
        except Exception:  # Not every exception pickles; the text always does.
            self.pickled = None

    def exception(self) -> BaseException | None:
        """The original exception, rebuilt, or None if it could not travel (see `stand_in`)."""
        if self.pickled is None:
            return None
        try:
            error: BaseException = pickle.loads(self.pickled)
        except Exception:
            return None
        return error

    def stand_in(self, error_type: type[BaseException]) -> BaseException:
        """An `error_type` for an exception that could not be rebuilt here.

        It carries the original type name and message, the original's notes, and how
        many outputs of the chunk came before it (so that those are handed out first).
        """
        error = error_type(f"{self.type_name}: {self.message}")
        for note in self.notes:
            error.add_note(note)
        if self.outputs_before is not None:
            error.chute_outputs_before = self.outputs_before  # type: ignore[attr-defined]
        return error


def _consumer_gone(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie counts: its files are closed)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _consumer_lost(connection: Connection) -> bool:
    """Whether the consumer's end of `connection` is closed (it exited)."""
    try:
        if connection.poll(0):
            connection.recv()
    except (EOFError, OSError, ValueError):
        return True
    return False


def _reclaim_after_consumer(wait: float) -> None:
    """Once the consumer has exited (waiting up to `wait` s), reclaims what it left.

    A consumer killed by a signal runs no clean-up: its owner file, and the idle slabs
    it kept for its next iterator, would wait for the next chute process. Its workers
    outlive it by a moment, and its lock went with it, so they reclaim them now.
    """
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None:
        return
    deadline = time.monotonic() + wait
    while not _consumer_gone(parent.pid):
        if time.monotonic() > deadline:
            return
        time.sleep(0.005)
    reclaim_orphaned_segments()


def _watch_parent(writers: list[SlabWriter], exiting: threading.Lock) -> None:
    """Exits this worker as soon as the consumer dies, even mid-way through user code.

    Between chunks a worker notices a closed connection by itself; a worker stuck in
    a long transform would not, and would keep its shared memory. This thread waits on
    the parent's sentinel, frees the slabs and exits. It takes `exiting` for good first,
    and the main thread takes it to close the writer: so neither thread ends the
    process while the other is half-way through unlinking. It also unlinks any other
    segment of this process (one the main thread was creating meanwhile), so nothing is
    left for the next chute process to reclaim.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        exiting.acquire()  # Never released: this thread ends the process.
        try:
            for writer in list(writers):
                writer.close()
            remove_own_segments()
            _reclaim_after_consumer(wait=1.0)
        finally:
            os._exit(1)

    threading.Thread(target=watch, name="chute-parent-watch", daemon=True).start()


_TERMINATED = False
"""Whether this worker was sent SIGTERM: it exits at the end of its iterator's work."""


def _exit_cleanly_on_sigterm(writers: list[SlabWriter], exiting: threading.Lock) -> None:
    """Frees this worker's shared memory and exits when it is sent SIGTERM.

    A Jupyter kernel that is shut down or restarted has its whole process group
    terminated, workers included, often before the kernel's own clean-up has run: a
    worker then frees its slabs itself, as when it sees its consumer die. Installed
    first thing, before the writer exists (`writers` gets it once made). If the main
    thread is already closing the writer (it holds `exiting`), that finishes the job.
    """

    def on_sigterm(signum: int, frame: Any) -> None:
        global _TERMINATED
        _TERMINATED = True  # Never parked after this (see `_next_plan`).
        if not exiting.acquire(blocking=False):
            return  # The main thread is closing the writer, and then exits.
        try:
            for writer in writers:
                writer.close()
            remove_own_segments()
        finally:
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters.
_HEAP_KEEPS = 256 * 2**20


def keep_freed_memory() -> None:
    """Has glibc's malloc keep freed memory in this worker for reuse.

    A transform that makes a fresh array of a few MiB per element (`np.full`, a
    decode) would otherwise get fresh pages from the kernel for each one (glibc maps
    large blocks, or trims its heap, at each free), and faulting them in costs more
    than filling them (3.5x for 2 MiB arrays here). Blocks below 32 MiB then come from
    the heap, which keeps up to 256 MiB free: the worker's memory stays at its peak.

    Example:
        >>> keep_freed_memory()  # For worker processes; it only sets two malloc limits.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return  # Not glibc (or no mallopt): keep the allocator's defaults.
    mallopt(_M_MMAP_THRESHOLD, 32 * 2**20)
    mallopt(_M_TRIM_THRESHOLD, _HEAP_KEEPS)


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _run(plan: Any, chunk: Any, writer: SlabWriter, replay: Any, trace: Any = None) -> Any:
    """Runs `chunk` and writes its result; a stacked batch is built right in a slab."""
    arena = writer.arena() if getattr(plan, "stack", False) else None
    if trace is not None and arena is not None:
        trace.slab_taken()
    if arena is None:
        return writer.write(counted(plan, plan.run(chunk, replay=replay, trace=trace)))
    try:
        result = plan.run(chunk, arena.empty, replay, trace=trace)
    except BaseException:
        arena.abandon()
        raise
    return writer.write(counted(plan, result), arena=arena)


def counted(plan: Any, result: Any) -> Any:
    """`result`, carrying what this process counted since its last one (timed plans)."""
    if not getattr(plan, "timed", False):
        return result
    counts = COUNTERS.take()
    return result._replace(counts=counts) if counts else result


def _load(data: bytes, what: str, worker: int) -> Any:
    """`unship(data)`; a failure says that worker `worker` could not load `what`."""
    try:
        return unship(data)
    except BaseException as error:
        error.add_note(
            f"chute: worker {worker} could not load {what} sent to it. What a worker can "
            "import travels by reference (its module and name): the module must be "
            "installed or on sys.path in the workers too."
        )
        raise


def load_plan(plan_bytes: bytes, init_bytes: bytes | None, worker: int, num_workers: int) -> Any:
    """Runs the shipped `worker_init_fn` (if any) as worker `worker`, then loads the plan.

    Both failures say which worker and what it could not load or run, in a note.
    """
    if init_bytes is not None:
        init_fn = _load(init_bytes, "worker_init_fn", worker)
        try:
            init_fn(worker, num_workers)
        except BaseException as error:
            error.add_note(f"chute: raised by worker_init_fn({worker}, {num_workers})")
            raise
    return _load(plan_bytes, "the pipeline", worker)


def worker_main(
    worker: int,
    connection: Connection,
    plan_bytes: bytes,
    init_bytes: bytes | None,
    num_workers: int,
    num_slabs: int,
) -> None:
    """The body of worker process `worker` (a spawn target: module-level, importable).

    Everything it is started with is plain data: the plan and the init function come
    shipped (`ship`) and are loaded here, so a failure to load them is reported to the
    consumer like any other error, with this worker's traceback.

    Results travel through this worker's shared-memory slabs (`SlabWriter`): array
    bytes are copied there, and only a small message goes through the connection. The
    consumer sends `("task", generation, chunk, replay)`, `("release", token)` when it has
    read a result (or, if it keeps views into the slab, `("lease", token)` then, and
    the release once they are gone), `("adopt", slabs, keep_as)` first (idle slabs to
    take over, `SlabWriter.adopt`, and the consumer's name for the slabs it will take
    back), and `None` to stop, or `("park", seconds)` to stop and then wait that long
    for `("plan", plan_bytes)`: the next iterator's pipeline, run as from the start
    (`_idle_workers`). Stopped or parked so, a worker renames its slabs for the
    consumer to keep (`SlabPool`); any other end unlinks them.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    COUNTERS.mark()  # What a forked worker inherited is the consumer's own.
    writers: list[SlabWriter] = []  # The writer, once made: SIGTERM frees its slabs.
    exiting = threading.Lock()
    _exit_cleanly_on_sigterm(writers, exiting)
    keep_freed_memory()
    if num_workers >= _cores():
        read_one_by_one()  # The cores are the workers': no native read pool on top.
    _watch_parent(writers, exiting)
    shipped: bytes | None = plan_bytes
    asked = False  # Whether the consumer asked this worker to stop: it then cleans up itself.
    while shipped is not None:
        try:
            plan = load_plan(shipped, init_bytes, worker, num_workers)
        except BaseException as error:
            connection.send(("error", -1, -1, WorkerFailure(error, -1, worker)))
            return
        init_bytes = None  # Run once per process (a pool with one is never parked).
        parked, asked = _session(worker, connection, plan, num_slabs, writers, exiting)
        del plan
        shipped, asked = _next_plan(connection, parked, asked)
    # A consumer that asked this worker to stop may close the connection right after
    # the worker's confirmation: it is alive, and nothing of it is to be reclaimed.
    lost = not asked and _consumer_lost(connection)
    with contextlib.suppress(OSError):
        connection.close()
    if lost:  # Killed, most likely: what it kept goes too.
        with exiting:  # Not while the parent watch ends this process mid-way.
            _reclaim_after_consumer(wait=1.0)
    release_owner()  # Workers end through os._exit: no atexit removes the owner file.
    sys.stdout.flush()


def _next_plan(
    connection: Connection, parked: float | None, asked: bool
) -> tuple[bytes | None, bool]:
    """What a parked worker does next: the consumer's next pipeline, or exit.

    Returns:
        The next pipeline (None: exit), and whether the consumer asked this worker to
        stop (`asked`: whether it had, when the worker is not parked).
    """
    if parked is None or _TERMINATED:
        return None, asked
    try:
        if not connection.poll(None if parked == float("inf") else parked):
            return None, False  # Not taken over in time.
        message = connection.recv()
    except (EOFError, OSError):
        return None, False  # The consumer is gone.
    if not (isinstance(message, tuple) and message[0] == "plan"):
        return None, True  # `None`: stop.
    try:
        connection.send((READY,))  # The consumer waits for this before it sends tasks.
    except (OSError, ValueError):
        return None, False
    return message[1], False


def _session(
    worker: int,
    connection: Connection,
    plan: Any,
    num_slabs: int,
    writers: list[SlabWriter],
    exiting: threading.Lock,
) -> tuple[float | None, bool]:
    """Runs the tasks of one iterator.

    Returns:
        The seconds to wait parked (None: exit), and whether the consumer asked this
        worker to stop (else the connection ended).
    """
    tasks: collections.deque[tuple[int, int, Any]] = collections.deque()
    stop = False
    park: float | None = None  # Seconds to wait for the next pipeline, if parked.
    keep_as: list[str | None] = [None]  # The consumer's name for slabs it takes over.
    # A traced plan: each answer carries the trace events of its chunk (see `ChunkTrace`).
    trace = ChunkTrace.of(plan, f"worker {worker}") if getattr(plan, "traced", False) else None

    def handle(message: Any) -> None:
        nonlocal stop, park
        if message is None:
            stop = True
        elif message[0] == "park":
            stop, park = True, float(message[1])
        elif message[0] == "release":
            writer.release(message[1])
        elif message[0] == "lease":
            writer.lease(message[1])
        elif message[0] == "adopt":  # Idle slabs of the consumer's earlier workers.
            writer.adopt(message[1])
            keep_as[0] = message[2]
        else:
            tasks.append((message[1], message[2], message[3]))
            getattr(plan, "prefetch", lambda chunk: None)(message[2])  # Fetched meanwhile.

    def stopped() -> bool:
        return stop

    def wait_for_release(seconds: float) -> None:
        if connection.poll(seconds):
            try:
                handle(connection.recv())
            except (EOFError, OSError):
                raise BrokenPipeError("the consumer is gone") from None
            if stop:
                raise BrokenPipeError("the consumer asked to stop")

    writer = SlabWriter(num_slabs, wait_for_release=wait_for_release)
    writers[:] = [writer]
    try:
        while not stop:
            if not tasks:
                try:
                    handle(connection.recv())
                except (EOFError, OSError):
                    break  # The consumer is gone.
                continue
            generation, chunk, replay = tasks.popleft()
            try:  # Tasks sent ahead: received now, so their records are fetched meanwhile.
                while not stopped() and connection.poll(0):
                    handle(connection.recv())
            except (EOFError, OSError):
                break
            if stopped():
                break
            message: tuple[Any, ...]
            try:
                if trace is not None:
                    trace.begin()
                message = ("ok", generation, chunk, _run(plan, chunk, writer, replay, trace))
                if trace is not None:
                    message = (*message, trace.end(plan.bounds(chunk)))
            except BrokenPipeError:
                break
            except BaseException as error:
                message = ("error", generation, chunk, WorkerFailure(error, chunk, worker))
            try:
                connection.send(message)
            except (EOFError, OSError):
                break
    finally:
        with exiting:  # Waits (for good) if the parent watch is ending the process.
            writer.close(keep_as=keep_as[0] if stop else None)  # Stopped: kept for reuse.
            if stop:  # The consumer need not wait for this process to exit.
                with contextlib.suppress(OSError, ValueError):
                    connection.send((STOPPED,))
    return (park if stop else None), stop
