"""`MultiprocessingOptions`: how many worker processes, and how far they work ahead."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from chute_core.internal import check_count

from ._autotune_options import AutotuneOptions

__all__ = ["WORKER_KNOBS", "MultiprocessingOptions"]

StartMethod = Literal["auto", "forkserver", "spawn"]

_START_METHODS = ("auto", "forkserver", "spawn")
WORKER_KNOBS = frozenset(
    {"num_workers", "worker_buffer_size", "per_worker_buffer_size", "autotune"}
)
"""The worker stage's parameters that never change the elements (left out of fingerprints)."""

_NOT_GIVEN: Any = None
"""A field not given (`num_workers`, `autotune`): resolved when the options are made."""


@dataclasses.dataclass(frozen=True)
class MultiprocessingOptions:
    """Options for running a pipeline on worker processes (`mp_prefetch`).

    The output never depends on these: 0, 1, 2 or 8 workers yield the same elements
    in the same order, and a checkpoint taken with one setting restores with another.

    By default (no `num_workers`), the autotuner picks the workers while the iterator
    runs, starting from none; give `num_workers` for a fixed count. None for either
    field means "not given". The fields hold the resolved values, so
    `dataclasses.replace(options, num_workers=4)` of default options tunes from 4
    (pass `autotune=False` too for a fixed 4). The first iterator of a dataset tunes
    from where the options start; each later one (the next epoch's `for batch in ds`,
    a restore) starts where the last one's tuning settled, on the workers it left
    parked, and tunes on from there (`chute.grain.MultiprocessingOptions` keeps
    Grain's defaults: no workers, not tuned).

    Attributes:
        num_workers: worker processes; 0 runs the same chunked pipeline in this process.
            Not given: 0 to start with, and `autotune` is on unless you turn it off.
        per_worker_buffer_size: chunks each worker may have finished or in progress
            ahead of the consumer.
        start_method: how workers start (never the output):

            - "auto" (the default): forked from this process when that is provably
              safe, else as "forkserver". It forks on Linux only, and only if jax
              and obstore are not imported (workers never hold jax; obstore's
              runtime does not survive a fork), no Python thread but this one
              runs, and right after the fork this process has exactly one thread
              (`/proc/self/task`: libraries such as OpenBLAS that stop their
              threads for a fork pass; jax's, ArrayRecord's readers or any other
              running thread fail it, and the child is killed before it ran any
              of your code). A forked worker ignores SIGINT, resets your signal
              handlers, never finalizes your objects (no shared memory of yours
              is freed by it), ends without running your atexit hooks, and loads
              the pipeline from the same shipped bytes as a fork server's worker.
              It sees your modules as they were at the fork. So in a script that
              has not imported jax, workers start in milliseconds; in a Jupyter
              kernel (its threads run) or after `import jax`, "forkserver".
            - "forkserver" (where it exists): workers fork from a fresh server
              process that has imported chute once (never jax); its first start
              costs an interpreter start and chute's import, later ones
              milliseconds.
            - "spawn": each worker is a new interpreter.

            Never "fork" unconditionally: forking a process that runs other threads
            (jax's, a native reader's) can deadlock the child.
        worker_timeout: seconds a worker may take for one chunk before it is counted
            as stuck: the workers are stopped and `WorkerTimeoutError` is raised
            (None: wait as long as it takes).
        idle_worker_seconds: how long the workers of an iterator that ended wait,
            idle, for the next iterator to take them over (0: they stop at once).
            The next iterator of this process with the same `num_workers`,
            `per_worker_buffer_size` and `start_method`, started in the same working
            folder, `sys.path` and environment and without a `worker_init_fn`, then
            starts at once: its workers run, with their imports, native reader pools
            and heap, from before (per-process state your transforms keep carries
            over, as it does from chunk to chunk). Idle workers hold no shared memory,
            exit with this process, and `stop_idle_workers()` ends them at once.
        autotune: let the iterator change `num_workers` and `per_worker_buffer_size`
            while it runs, from how long the consumer waits for input (`True`, or
            `AutotuneOptions` for its bounds); the two fields above are where it
            starts. Its changes are in `iter(stats=True)`'s statistics and in traces.
            Not given: on when `num_workers` is not given either, else off.

    Example:
        >>> options = MultiprocessingOptions(num_workers=2, worker_timeout=60)
        >>> options.num_workers, options.per_worker_buffer_size, options.worker_timeout
        (2, 2, 60)
        >>> options.autotune  # A count you give stays fixed.
        False
        >>> default = MultiprocessingOptions()
        >>> default.num_workers, default.autotune  # Tuned, from no workers.
        (0, True)
    """

    num_workers: int = _NOT_GIVEN
    per_worker_buffer_size: int = 2
    start_method: StartMethod = "auto"
    worker_timeout: float | None = None
    idle_worker_seconds: float = 30.0
    autotune: AutotuneOptions | bool = _NOT_GIVEN

    def __post_init__(self) -> None:
        owner = "MultiprocessingOptions"
        given: dict[str, Any] = {"num_workers": self.num_workers, "autotune": self.autotune}
        chosen = given["num_workers"] is not None  # (Typed as given, not as declared.)
        if given["autotune"] is None:
            object.__setattr__(self, "autotune", not chosen)
        workers = check_count(self.num_workers, "num_workers", owner) if chosen else 0
        object.__setattr__(self, "num_workers", workers)
        size = check_count(self.per_worker_buffer_size, "per_worker_buffer_size", owner, minimum=1)
        object.__setattr__(self, "per_worker_buffer_size", size)
        timeout = self.worker_timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ValueError(
                f"{owner}: worker_timeout must be None or > 0 seconds, got {timeout!r}."
            )
        idle = self.idle_worker_seconds
        if isinstance(idle, bool) or not isinstance(idle, int | float) or not idle >= 0:
            raise ValueError(
                f"{owner}: idle_worker_seconds must be a number of seconds >= 0, got {idle!r}."
            )
        if not isinstance(self.autotune, AutotuneOptions | bool):
            raise TypeError(
                f"{owner}: autotune must be True, False or an AutotuneOptions, got "
                f"{type(self.autotune).__name__} {self.autotune!r}."
            )
        if self.start_method not in _START_METHODS:
            raise ValueError(
                f"{owner}: start_method must be 'auto', 'forkserver' or 'spawn', got "
                f"{self.start_method!r} ('fork' is refused: forking a process that runs "
                "other threads, such as jax's, can deadlock; 'auto' forks only when this "
                "process is provably single-threaded)."
            )
