"""What a `MultiprocessPrefetchIter` owns outside itself, and its stand-in exception."""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path

from chute_core import ChuteError, SharedMemoryError
from chute_core.internal import SHM_PREFIX, owner_tag, reclaim_orphaned_segments, shm_dir

from ._chunk_plan import ChunkPlan
from ._transport.pool import KEPT, POOL, budget
from ._transport.reader import SlabReader
from ._transport.slab import unlink_quietly
from ._worker import WorkerFailure
from ._worker_pool import WorkerDiedError, WorkerPool

__all__ = ["Resources", "WorkerError", "rebuild_failure"]


class WorkerError(ChuteError, RuntimeError):
    """An exception in a worker that could not be rebuilt in the consumer (its text is).

    Exceptions that pickle are re-raised with their own type; this one stands in for
    the others, with the original type name and message, and the worker's traceback in
    a note.

    Example:
        >>> str(WorkerError("mymodule.OddError: it broke"))
        'mymodule.OddError: it broke'
    """


def rebuild_failure(
    failure: WorkerFailure, plan: ChunkPlan, is_grid_chunk: Callable[[tuple[int, int]], bool]
) -> BaseException:
    """The exception a worker reported, rebuilt, with a note of where it was raised.

    The note names the worker and the chunk (or its positions) it was running, and
    carries the worker's traceback; an exception that could not travel comes back as
    a `WorkerError` with its type name and message, and one that is no `Exception`
    (`SystemExit` from `sys.exit()`) as a `WorkerDiedError`. A `SharedMemoryError` (a worker
    could not make a slab) also frees the idle slabs of this process (`SlabPool`).
    """
    start, stop = plan.bounds(failure.chunk) if failure.chunk != -1 else (0, 0)
    unit = f"positions {start}..{stop - 1}"
    if is_grid_chunk((start, stop)):
        unit = f"chunk {start // plan.chunk_size} (base {unit})"
    where = (
        f"chute: raised in worker {failure.worker} while running {unit}; the "
        f"worker's traceback:\n{failure.traceback}"
    )
    if failure.chunk == -1:
        where = f"chute: raised while starting worker {failure.worker}:\n{failure.traceback}"
    error = failure.exception()
    if error is None:
        error = failure.stand_in(WorkerError)
    if not isinstance(error, Exception):  # sys.exit() (SystemExit) or the like, in a worker:
        # re-raised here, it would end the training process without a word (Python
        # exits quietly on SystemExit). Grain reports a worker's end as an error.
        ended = WorkerDiedError(
            f"worker {failure.worker} ended while running {unit}: the pipeline raised "
            f"{type(error).__name__}({failure.message!r}) there (sys.exit() in a "
            "transform?), which a worker reports as this error rather than ending the "
            "training process"
        )
        ended.__cause__ = error
        error = ended
    if isinstance(error, SharedMemoryError):
        POOL.free()  # Shared memory is short: keep no idle slabs.
    error.add_note(where)
    return error


class Resources:
    """The worker pool and the slab reader, released together (also at GC).

    Slabs outlive their workers: `start` gives each new worker idle slabs of this
    process's earlier workers (`SlabPool`), and `release` takes over the slabs of
    workers that stopped normally.
    """

    def __init__(self) -> None:
        self.pool: WorkerPool | None = None
        self.reader: SlabReader | None = None
        self.lock = threading.Lock()
        self._kept = ""  # The names the workers give the slabs they leave us.
        self._given: list[str] = []  # Idle slabs given to the workers.
        self._folder: Path | None = None  # The workers' shared-memory folder.

    def start(self, pool: WorkerPool, slabs_per_worker: int) -> None:
        """Uses `pool` (just started) and gives its workers idle slabs to take over.

        Each worker gets at most `slabs_per_worker` (its writer's slots), the largest
        first, dealt in turn.

        Each worker is also told the name (one of this process's) to give its slabs
        when it stops normally: so they are never without a living owner, which any
        chute process would reclaim.

        The folder is the one the workers use (read now, as they were): a release that
        runs while `CHUTE_SHM_DIR` says another (a finalizer, during a test that sets
        it) still finds their slabs.
        """
        self.pool, self.reader, self._folder = pool, SlabReader(), shm_dir()
        keeping = budget() > 0  # Else the workers unlink their slabs when they stop.
        self._kept = f"{owner_tag()}-{KEPT}{secrets.token_hex(4)}" if keeping else ""
        workers = pool.num_workers
        slabs = POOL.take(workers * slabs_per_worker)  # Largest first: dealt round.
        self._given = [name for name, _ in slabs]
        for worker in range(workers):
            pool.send(worker, ("adopt", slabs[worker::workers], self._kept or None))

    def release(self) -> None:
        """Parks or stops the workers and frees the slabs; thread-safe, idempotent."""
        with self.lock:
            pool, self.pool = self.pool, None
            reader, self.reader = self.reader, None
            kept, self._kept, given, self._given = self._kept, "", self._given, []
            folder, self._folder = self._folder, None
        if pool is not None:
            assert folder is not None
            try:
                pool.close()
            finally:  # Workers that stopped have renamed their slabs: never left behind.
                self._keep_slabs(kept, given, pool.idle_seconds, folder)
        if reader is not None:
            reader.hand_over_mappings()  # Of the slabs just kept: mapped for the next.
            # Workers unlink their slabs when they exit; a killed one cannot: unlink what
            # we saw of it, and reclaim what it made but never sent (it is reaped now).
            reader.unlink_all_seen()
            reader.close()
            reclaim_orphaned_segments()

    @staticmethod
    def _keep_slabs(kept: str, given: list[str], idle_seconds: float, folder: Path) -> None:
        """Takes over the slabs the stopped workers left us (named `kept`, in `folder`).

        They wait in the pool as long as the workers may wait parked (`idle_seconds`).
        Slabs left to this process under another iterator's name are taken too: the
        pool is the process's, and one that a release did not find (a chute before
        this one looked in the folder `CHUTE_SHM_DIR` named at release time) would
        otherwise stay until the process exits.
        """
        for name in given:  # Given to a worker that ended before taking them over.
            unlink_quietly(str(folder / name))
        if not kept:
            return
        prefix = f"{SHM_PREFIX}{owner_tag(create=False)}-{KEPT}"
        try:
            names = [name for name in os.listdir(folder) if name.startswith(prefix)]
        except OSError:
            return
        POOL.adopt((str(folder / name) for name in names), idle_seconds)
