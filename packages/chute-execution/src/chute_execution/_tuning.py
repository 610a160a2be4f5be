"""`Tuning`: how `MultiprocessPrefetchIter` measures for its autotuner and applies it.

Each unit the consumer takes is timed from asking to having it (waiting for a worker,
or running it here with 0 workers) and reported to the `Tuner`. A change it decides is
applied between units: no unit is sent meanwhile, the consumer takes the ones in
flight, and once none is left the pool is parked (kept for a later iterator or a
revert) and the next unit goes to the new workers, from worker 0. The units, and so
the outputs and states, are the same whatever the workers: only who runs them moves.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from ._autotune_options import AutotuneOptions, TuningDecision
from ._chunk_plan import ChunkPlan
from ._mp_options import MultiprocessingOptions
from ._mp_resources import Resources
from ._shipping import ship
from ._trace import complete_event
from ._tuner import Config, Tuner
from ._tuning_memory import TuningMemory

if TYPE_CHECKING:
    from ._consumer_trace import ConsumerTrace

__all__ = ["Tuning"]


class Tuning:
    """The autotuner's side of `MultiprocessPrefetchIter` (a mixin)."""

    _options: MultiprocessingOptions
    _plan: ChunkPlan
    _caller: str
    _shipped: tuple[bytes, bytes | None] | None
    _trace: ConsumerTrace | None
    _first_unit: int
    _next_submit: int
    _heard: list[float]
    _tuner: Tuner | None = None
    _wanted: Config | None = None  # A change waiting for the units in flight.
    _slab_bytes = 0  # What the last unit read from shared memory held.
    _resources: Resources

    def start_tuning(self, options: MultiprocessingOptions, memory: TuningMemory | None) -> None:
        """Makes the tuner if `options` ask for one (`autotune`), and starts where it says.

        With a `memory` where an earlier iterator's tuner settled, that is where.
        """
        autotune = getattr(options, "autotune", False)  # RayOptions have none.
        if autotune is False:
            return
        bounds = AutotuneOptions() if autotune is True else autotune
        start = (options.num_workers, options.per_worker_buffer_size, self._plan.read_threads)
        self._tuner = Tuner(bounds, *start, memory=memory)
        workers, buffer_size, threads = self._tuner.config
        self._options = dataclasses.replace(
            options, num_workers=workers, per_worker_buffer_size=buffer_size
        )
        self._plan = dataclasses.replace(self._plan, read_threads=threads)

    def most_workers(self) -> int:
        """The most workers this iterator may run (the autotuner's bound, or the count)."""
        most = self._options.num_workers
        return most if self._tuner is None else max(most, self._tuner.options.workers_limit())

    @property
    def tuning(self) -> tuple[TuningDecision, ...]:
        """The autotuner's changes so far, oldest first (empty without `autotune`)."""
        return () if self._tuner is None else tuple(self._tuner.decisions)

    @property
    def num_workers(self) -> int:
        """The worker processes running now (the autotuner may change them)."""
        return self._options.num_workers

    def tuned_before(self, chunk: int) -> float:
        """Applies a decided change if no unit is in flight; the time to measure from.

        None is when the units sent were all taken, and when no pool runs (0 workers,
        or the pool closed: by `close()`, or after a worker died).
        """
        wanted = self._wanted
        pool = self._resources.pool
        if wanted is not None and (self._next_submit <= chunk or pool is None or pool.closed):
            self._switch(chunk, wanted)
        return time.perf_counter()

    def tuned_after(self, span: tuple[int, int], began: float) -> None:
        """Reports unit `span`, asked for at `began`, to the tuner."""
        assert self._tuner is not None
        waited = time.perf_counter() - began
        nbytes = self._slab_bytes if self._options.num_workers else 0
        change = self._tuner.record(span[1] - span[0], waited, nbytes)
        if change is not None:
            self._wanted = change

    def holding_units(self) -> bool:
        """Whether no more units may be sent now (a change waits for those in flight)."""
        return self._wanted is not None

    def _switch(self, chunk: int, config: Config) -> None:
        began = time.perf_counter_ns()
        workers, buffer_size, threads = config
        if self._options.num_workers:
            self._park()  # A revert, or a later iterator, takes them over.
        if threads != self._plan.read_threads:
            self._plan = dataclasses.replace(self._plan, read_threads=threads)
            if self._trace is not None:
                self._trace.plan = dataclasses.replace(self._trace.plan, read_threads=threads)
            if self._shipped is not None:  # The next workers load the new plan.
                plan = ship(self._plan, self._plan.parts(), self._caller)
                self._shipped = (plan, self._shipped[1])
        self._options = dataclasses.replace(
            self._options, num_workers=workers, per_worker_buffer_size=buffer_size
        )
        self._first_unit = self._next_submit = chunk
        self._heard = []
        self._wanted = None
        assert self._tuner is not None
        self._tuner.applied(workers)
        if self._trace is not None:
            about: dict[str, Any] = {
                "workers": workers,
                "buffer_size": buffer_size,
                "read_threads": threads,
            }
            end = time.perf_counter_ns()
            self._trace.recorder.add([complete_event("autotune", "workers", began, end, about)])

    def close(self) -> None:
        """Ends the workers' work and tuning (also at exhaustion and garbage collection).

        The workers park for the next iterator (`idle_worker_seconds`), or stop, and the
        tuner lets go of the plan's memory (the next iterator's tuner takes it).
        """
        self._park()
        if self._tuner is not None:
            self._tuner.finish()

    if TYPE_CHECKING:

        def _park(self) -> None: ...
