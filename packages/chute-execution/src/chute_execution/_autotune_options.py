"""`AutotuneOptions`: the bounds a running iterator's tuner stays within; its decisions."""

from __future__ import annotations

import dataclasses
import os

from chute_core.internal import check_count

__all__ = ["AutotuneOptions", "TuningDecision"]


@dataclasses.dataclass(frozen=True)
class AutotuneOptions:
    """Lets `mp_prefetch` change its workers and buffers while it runs, within bounds.

    The tuner watches how long the consumer waits for input and how many positions it
    gets per second, and tries more workers, then more read threads, then deeper
    buffers, keeping a change only if the rate rose (see `Tuner`). What it decides
    never changes the elements, their order or the states: those depend on the
    pipeline, seed and position only.

    Attributes:
        max_workers: at most this many worker processes (None: the CPUs this process
            may run on). The tuner starts from `MultiprocessingOptions.num_workers`
            (0 included), or where the last iterator of the same plan settled, and
            never goes below `num_workers`.
        max_buffer_size: at most this many chunks per worker ahead of the consumer.
        max_read_threads: at most this many threads reading each chunk's records (in
            each worker, or here with 0 workers).
        ram_budget_mb: what the chunks in flight may hold at most (MiB): workers x
            (buffer + 1) x the largest chunk seen.
        interval_seconds: how long each measurement lasts; a change is judged on the
            measurement after it.

    Example:
        >>> options = AutotuneOptions(max_workers=4, ram_budget_mb=512)
        >>> options.max_workers, options.max_buffer_size, options.workers_limit()
        (4, 8, 4)
    """

    max_workers: int | None = None
    max_buffer_size: int = 8
    max_read_threads: int = 16
    ram_budget_mb: int = 1024
    interval_seconds: float = 0.5

    def __post_init__(self) -> None:
        owner = "AutotuneOptions"
        if self.max_workers is not None:
            check_count(self.max_workers, "max_workers", owner, minimum=1)
        check_count(self.max_buffer_size, "max_buffer_size", owner, minimum=1)
        check_count(self.max_read_threads, "max_read_threads", owner)
        check_count(self.ram_budget_mb, "ram_budget_mb", owner, minimum=1)
        interval = self.interval_seconds
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval > 0:
            raise ValueError(
                f"{owner}: interval_seconds must be a number of seconds > 0, got {interval!r}."
            )

    def workers_limit(self) -> int:
        """`max_workers`, or when it is None the CPUs this process may run on.

        Those of its affinity mask where the system says (a container or `taskset`
        limits them), else the CPU count.
        """
        if self.max_workers is not None:
            return self.max_workers
        if hasattr(os, "sched_getaffinity"):
            return max(1, len(os.sched_getaffinity(0)))
        return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class TuningDecision:
    """One change the tuner made, and the measurement that led to it.

    Attributes:
        seconds: when, in seconds since the iterator's first chunk.
        workers: the worker processes from then on.
        buffer_size: chunks per worker ahead of the consumer from then on.
        read_threads: threads reading each chunk's records from then on.
        reason: "more workers", "more read threads", "deeper buffers", "fewer workers"
            (a trial), "reverted" (the trial before it gave no gain, or lost rate), or
            "warm start" (where the last iterator of the plan settled).
        input_wait: the share of the measurement the consumer spent waiting for input.
        rate: positions per second over the measurement.

    Example:
        >>> decision = TuningDecision(1.5, 2, 2, 0, "more workers", 0.8, 1200.0)
        >>> text = str(decision)
        >>> text[:60]
        '1.5 s: more workers -> 2 workers x 2 chunks, 0 read threads '
        >>> text[60:]
        '(waited 80% for input at 1,200 positions/s)'
    """

    seconds: float
    workers: int
    buffer_size: int
    read_threads: int
    reason: str
    input_wait: float
    rate: float

    def __str__(self) -> str:
        return (
            f"{self.seconds:.1f} s: {self.reason} -> {self.workers} workers x "
            f"{self.buffer_size} chunks, {self.read_threads} read threads (waited "
            f"{self.input_wait:.0%} for input at {self.rate:,.0f} positions/s)"
        )
