"""Per-stage statistics of a running pipeline: time, elements, share, bottleneck."""

from __future__ import annotations

import contextvars
import dataclasses
import time
import weakref
from collections.abc import Callable
from typing import Any

from chute_execution import StageClock, TuningDecision
from chute_transforms import SkipErrorsIter

from ._debug import LOGGER

__all__ = ["RECORDER", "Recorder", "StageStats", "Stats", "timed"]


@dataclasses.dataclass
class StageStats:
    """What one stage did: elements produced and time spent in it (not in its inputs).

    Example:
        >>> StageStats("map(fn=f)", elements=10, seconds=0.5).throughput
        20.0
    """

    name: str
    elements: int = 0
    seconds: float = 0.0
    workers: int = 0
    """Worker processes the stage ran on, its seconds summed over them (0: this process)."""
    waiting: bool = False
    """The stage's own time is waiting for worker processes (an `mp_prefetch`)."""
    padding: float | None = None
    """For a packing stage: the share of its rows' slots that are padding, so far."""

    @property
    def throughput(self) -> float:
        """Elements per second of this stage's own time (per worker, for workers' stages)."""
        return self.elements / self.seconds if self.seconds > 0 else float("inf")


@dataclasses.dataclass(frozen=True)
class Stats:
    """Statistics of an iterator made with `ds.iter(stats=True)`.

    `share` is each stage's own time over the wall time since the first element was
    asked for; the stage with the largest share is the `bottleneck`. The time of the
    consumer's own work between elements is not in any stage. Stages that ran in
    worker processes (before `mp_prefetch`) are listed with `[N workers]`: their time
    is summed over the workers and their share is of the workers' time (N x wall), so
    a share near 100% there means the workers are busy all the time.

    Example:
        >>> import chute
        >>> it = chute.MapDataset.range(100).to_iter_dataset().map(abs).iter(stats=True)
        >>> _ = list(it)
        >>> [stage.name for stage in it.stats().stages]
        ['to_iter_dataset()', 'map(fn=abs)']
    """

    stages: tuple[StageStats, ...]
    wall_seconds: float
    skipped: int = 0
    """Elements left out because they failed, under `skip_errors` budgets."""
    tuning: tuple[TuningDecision, ...] = ()
    """The changes of workers and buffers an autotuned `mp_prefetch` made, oldest first."""

    def share(self, stage: StageStats) -> float:
        """The stage's own time over the wall time (over N x wall for N workers)."""
        wall = self.wall_seconds * max(1, stage.workers)
        return stage.seconds / wall if wall > 0 else 0.0

    @property
    def bottleneck(self) -> StageStats | None:
        """The stage with the largest share, or None before the first element.

        When that is the wait for worker processes, it is the workers' stage that took
        the most time instead: that is the one to make faster (or to give more workers).
        """
        top = max(self.stages, key=self.share, default=None)
        if top is not None and top.waiting:
            in_workers = [stage for stage in self.stages if stage.workers]
            return max(in_workers, key=lambda stage: stage.seconds, default=top)
        return top

    def __str__(self) -> str:
        lines = [f"{'stage':<40} {'elements':>10} {'seconds':>9} {'elem/s':>12} {'share':>6}"]
        for stage in self.stages:
            lines.append(
                f"{stage.name[:40]:<40} {stage.elements:>10} {stage.seconds:>9.3f} "
                f"{stage.throughput:>12,.0f} {self.share(stage):>6.0%}"
            )
        if self.bottleneck is not None:
            lines.append(f"bottleneck: {self.bottleneck.name}")
        for stage in self.stages:
            if stage.padding is not None:
                lines.append(f"padding: {stage.padding:.2%} of the rows of {stage.name}")
        if self.skipped:
            lines.append(f"skipped: {self.skipped} elements that failed (skip_errors)")
        lines.extend(f"autotune at {decision}" for decision in self.tuning)
        return "\n".join(lines)


class Recorder:
    """Collects the stages' clocks; nested calls subtract their time from the caller's.

    It holds the clocks (and the iterators it reads) weakly: each clock holds it, and
    a prefetch thread holds the clocks before it, so strong references back would keep
    an abandoned iterator (and that thread) alive for good. The pipeline's last clock
    holds the others through the chain of stages.
    """

    def __init__(self, log_every: float | None = None) -> None:
        self._stages: list[weakref.ref[_Timed]] = []
        self.stack: list[float] = []
        self.started: float | None = None
        self.log_every = log_every  # Seconds between logged summaries (None: never log).
        self.logged_at: float | None = None
        self.ended = False
        self._skippers: list[weakref.ref[SkipErrorsIter[Any]]] = []
        self._workers: list[tuple[weakref.ref[_Timed], tuple[str, ...], weakref.ref[Any], int]] = []
        self.meter: Any = None  # With metrics on: the `_metrics_meter.Meter`.
        self.clock: Callable[[Any, str, Recorder], _Timed] = _Timed  # What times each stage.

    @property
    def stages(self) -> list[_Timed]:
        """The clocks of the stages, in the order they were made (inputs first)."""
        return [clock for ref in self._stages if (clock := ref()) is not None]

    def add_stage(self, clock: _Timed) -> None:
        """Adds the clock of the pipeline's next stage."""
        self._stages.append(weakref.ref(clock))

    def add_skipper(self, skipper: SkipErrorsIter[Any]) -> None:
        """A `skip_errors` stage, whose failures `stats()` counts."""
        self._skippers.append(weakref.ref(skipper))

    def add_workers(self, names: tuple[str, ...], iterator: Any, num_workers: int) -> None:
        """Stages of a plan that `iterator` runs in workers, just before its own stage."""
        owner = self.stages[-1]
        self._workers.append((weakref.ref(owner), names, weakref.ref(iterator), num_workers))
        if self.meter is not None:
            self.meter.on_workers(names, iterator, num_workers, getattr(owner, "cell", None))

    def stats(self) -> Stats:
        """A snapshot of the statistics."""
        wall = 0.0 if self.started is None else time.perf_counter() - self.started
        stages: list[StageStats] = []
        tuning: list[TuningDecision] = []
        for clock in self.stages:
            own = StageStats(clock.name, clock.elements, clock.seconds)
            own.padding = getattr(clock.inner, "padding_fraction", None)
            for owner, names, iterator_ref, built_with in self._workers:
                iterator = iterator_ref()
                if owner() is not clock or iterator is None:
                    continue
                times = iterator.stage_times()
                tuning.extend(getattr(iterator, "tuning", ()))
                workers = getattr(iterator, "num_workers", built_with)  # Autotuned: now.
                where = f"[{workers} workers]" if workers else "[in mp_prefetch]"
                for name, (elements, seconds) in zip(names, times, strict=False):
                    stages.append(StageStats(f"{name} {where}", elements, seconds, workers))
                if not workers:  # Ran inside the prefetch's own time: count it once.
                    own.seconds = max(0.0, own.seconds - sum(s for _, s in times))
                own.waiting = bool(workers)
            stages.append(own)
        skippers = [skipper for ref in self._skippers if (skipper := ref()) is not None]
        skipped = sum(skipper.failures for skipper in skippers)
        return Stats(tuple(stages), wall, skipped, tuple(tuning))


RECORDER: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "chute_stats_recorder", default=None
)
"""Set while `IterDataset.iter(stats=True)` builds the iterator chain.

The one context variable of the meta-package: the factories that build a pipeline's
iterators read it (in `timed`) to wrap each stage in a clock, without every factory
taking a statistics argument that only `iter(stats=True)` sets. It is set only for the
duration of that one build, never while iterating.
"""


class _Timed(StageClock):
    """A stage's `StageClock` in a recorder: starts the wall clock at the first `next`."""

    def __init__(self, inner: Any, name: str, recorder: Recorder) -> None:
        super().__init__(inner, recorder.stack)
        self.name, self._recorder = name, recorder

    def __next__(self) -> Any:
        recorder = self._recorder
        if recorder.started is None:
            recorder.started = time.perf_counter()
        if recorder.log_every is None:
            return super().__next__()
        try:
            element = super().__next__()
        except StopIteration:
            self._log(ended=True)
            raise
        self._log(ended=False)
        return element

    def next_many(self, count: int) -> list[Any]:
        """`StageClock.next_many`, starting the wall clock if this is the first call."""
        if self._recorder.started is None:
            self._recorder.started = time.perf_counter()
        elements = super().next_many(count)
        if self._recorder.log_every is not None:
            self._log(ended=len(elements) < count)
        return elements

    def _log(self, ended: bool) -> None:
        """Logs the summary (debug mode): every `log_every` s, and once at the end.

        Only the pipeline's last stage logs, so each summary covers the whole pipeline.
        """
        recorder = self._recorder
        if recorder.ended or self is not recorder.stages[-1]:
            return
        now = time.perf_counter()
        last = recorder.logged_at if recorder.logged_at is not None else recorder.started
        if ended or (last is not None and now - last >= (recorder.log_every or 0.0)):
            recorder.logged_at, recorder.ended = now, ended
            LOGGER.info("chute pipeline statistics%s:\n%s", " (end)" if ended else "", self.stats())

    def stats(self) -> Stats:
        """The statistics of the whole pipeline this iterator ends."""
        return self._recorder.stats()


def timed(iterator: Any, name: str) -> Any:
    """`iterator`, timed as stage `name` if statistics are being collected."""
    recorder = RECORDER.get()
    if recorder is None:
        return iterator
    if isinstance(iterator, SkipErrorsIter):
        recorder.add_skipper(iterator)
    clock = recorder.clock(iterator, name, recorder)
    recorder.add_stage(clock)
    return clock
