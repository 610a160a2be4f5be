"""`MultiprocessingOptions`: how many worker processes, and how far they work ahead."""

from __future__ import annotations

import dataclasses
import multiprocessing
from typing import Literal

from chute_sources.internal import check_count

__all__ = ["MultiprocessingOptions"]

StartMethod = Literal["spawn", "forkserver"]

_DEFAULT_START: StartMethod = (
    "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
)


@dataclasses.dataclass(frozen=True)
class MultiprocessingOptions:
    """Options for running a pipeline on worker processes (`mp_prefetch`).

    The output never depends on these: 0, 1, 2 or 8 workers yield the same elements
    in the same order, and a checkpoint taken with one setting restores with another.

    Attributes:
        num_workers: worker processes; 0 runs the same chunked pipeline in this process.
        per_worker_buffer_size: chunks each worker may have finished or in progress
            ahead of the consumer.
        start_method: "forkserver" (the default where it exists: workers fork from a
            fresh server process that has imported chute once, so they start in
            milliseconds) or "spawn" (each worker is a new interpreter). Never "fork":
            forking a process that has loaded jax (multithreaded) can deadlock.
        worker_timeout: seconds a worker may take for one chunk before it is counted
            as stuck: the workers are stopped and `WorkerTimeoutError` is raised
            (None: wait as long as it takes).

    Example:
        >>> options = MultiprocessingOptions(num_workers=2, worker_timeout=60)
        >>> options.num_workers, options.per_worker_buffer_size, options.worker_timeout
        (2, 2, 60)
    """

    num_workers: int = 0
    per_worker_buffer_size: int = 2
    start_method: StartMethod = _DEFAULT_START
    worker_timeout: float | None = None

    def __post_init__(self) -> None:
        owner = "MultiprocessingOptions"
        object.__setattr__(self, "num_workers", check_count(self.num_workers, "num_workers", owner))
        size = check_count(self.per_worker_buffer_size, "per_worker_buffer_size", owner, minimum=1)
        object.__setattr__(self, "per_worker_buffer_size", size)
        timeout = self.worker_timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ValueError(
                f"{owner}: worker_timeout must be None or > 0 seconds, got {timeout!r}."
            )
        if self.start_method not in ("spawn", "forkserver"):
            raise ValueError(
                f"{owner}: start_method must be 'spawn' or 'forkserver', got "
                f"{self.start_method!r} ('fork' is refused: forking a process that loaded "
                "jax can deadlock)."
            )
