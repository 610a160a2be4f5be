"""Metering one iterator: its stages' clocks add to the process's metrics as they run.

An iterator made while metrics are on is timed as `ds.iter(stats=True)` times it (a
`StageClock` per stage, see `_stats`), with `Metered` clocks that also add each call
to the pipeline's cells in `STORE`: elements, own seconds and a bucket of the
histogram; the last stage's clock also measures how long each `next()` kept the
consumer waiting. Stages that run in worker processes report per chunk
(`MultiprocessPrefetchIter.observer`). The cost is a few additions and a `bisect` per
stage and element on top of the clock's ~0.2 us: for a pipeline that batches before
its last stage, per batch.
"""

from __future__ import annotations

import bisect
import time
import weakref
from collections.abc import Callable
from typing import Any

from chute_core import ArgumentTypeError
from chute_execution.internal import health
from chute_transforms import SkipErrorsIter

from ._metrics_names import ELEMENT_BUCKETS
from ._metrics_store import STORE, PipelineCell, Sample, StageCell, default_label
from ._stats import Recorder, _Timed
from .metrics import serve_from_environment

__all__ = ["Meter", "Metered", "MeteredSlowly", "metered", "metrics_label"]

_now = time.perf_counter
_bucket = bisect.bisect_left


class Meter:
    """One iterator's link to the metrics: its pipeline label, wait, live gauges."""

    def __init__(self, pipeline: str, recorder: Recorder) -> None:
        self.pipeline = pipeline
        self.cell: PipelineCell = STORE.pipeline(pipeline)
        self.wait = STORE.wait(pipeline, self)  # Its elements are next() calls.
        self._recorder = weakref.ref(recorder)
        self._names: dict[str, int] = {}
        self._workers: list[tuple[str, int]] = []  # (stage label, workers running it)
        STORE.meters.add(self)

    def stage_cell(self, name: str, owner: object) -> tuple[str, StageCell]:
        """The label, and a cell for `owner`, of the pipeline's next stage called `name`.

        A name met again in the same pipeline gets ` #2`, ` #3`, ... so that two
        `map(fn=f)` stages stay two series.
        """
        seen = self._names.get(name, 0) + 1
        self._names[name] = seen
        label = name if seen == 1 else f"{name} #{seen}"
        return label, STORE.stage(self.pipeline, label, owner)

    def on_workers(
        self, names: tuple[str, ...], iterator: Any, workers: int, owner: StageCell | None
    ) -> None:
        """Meters the stages `iterator` runs in worker processes, chunk by chunk.

        With no workers they run inside the owner's own time (`mp_prefetch` with 0
        workers): their seconds are taken off the owner's, as the statistics do.
        """
        cells = []
        for name in names:
            label, cell = self.stage_cell(name, self)
            cells.append(cell)
            self._workers.append((label, workers))

        def observe(times: tuple[tuple[int, float], ...]) -> None:
            for cell, (elements, seconds) in zip(cells, times, strict=False):
                cell.observe(seconds, elements)
                if not workers and owner is not None:
                    owner.seconds -= seconds

        iterator.observer = observe

    def waited(self) -> tuple[float, float]:
        """Seconds `next()` kept the consumer waiting, and wall seconds since it began."""
        recorder = self._recorder()
        if recorder is None or recorder.started is None:
            return 0.0, 0.0
        return self.wait.seconds, time.perf_counter() - recorder.started

    def gauges(self) -> dict[str, list[Sample]]:
        """The live iterator's gauges: workers per stage, buffers, workers alive."""
        found: dict[str, list[Sample]] = {
            "chute_stage_workers": [],
            "chute_buffer_elements": [],
            "chute_buffer_capacity": [],
            "chute_workers_alive": [],
            "chute_worker_pool_starts": [],
        }
        recorder = self._recorder()
        if recorder is None:
            return found
        for label, workers in self._workers:
            found["chute_stage_workers"].append(((self.pipeline, label), float(workers)))
        for clock in list(recorder.stages):
            label = getattr(clock, "label", clock.name)
            now = health(clock.inner)
            if now is None:
                continue
            labels = (self.pipeline, label)
            found["chute_buffer_elements"].append((labels, float(now.buffered)))
            found["chute_buffer_capacity"].append((labels, float(now.capacity)))
            if now.workers:
                found["chute_workers_alive"].append((labels, float(now.alive)))
                found["chute_worker_pool_starts"].append((labels, float(now.starts)))
        return found

    def worker_pids(self) -> set[int]:
        """The process ids of the iterator's running workers."""
        recorder = self._recorder()
        pids: set[int] = set()
        for clock in [] if recorder is None else list(recorder.stages):
            now = health(clock.inner)
            if now is not None:
                pids.update(now.pids)
        return pids


class Metered(_Timed):
    """A stage's clock whose figures are a cell of the pipeline's metrics.

    Its `elements` and `seconds` (the statistics' view) are its cell's, so a call
    updates each once; the histogram's bucket and, for the last stage, the consumer's
    wait (the whole call) come on top.
    """

    def __init__(self, inner: Any, name: str, recorder: Recorder) -> None:
        meter: Meter = recorder.meter
        self.meter = meter
        self.label, self.cell = meter.stage_cell(name, self)
        super().__init__(inner, name, recorder)
        self._last: bool | None = None  # Whether it is the pipeline's last stage.

    @property
    def elements(self) -> int:
        """Elements it produced (its cell's)."""
        return self.cell.elements

    @elements.setter
    def elements(self, value: int) -> None:
        self.cell.elements = value

    @property
    def seconds(self) -> float:
        """Seconds of its own (its cell's)."""
        return self.cell.seconds

    @seconds.setter
    def seconds(self, value: float) -> None:
        self.cell.seconds = value

    def _recount(self, before: float, counted: int) -> None:
        """Counts again what the statistics' clock added, the histogram included.

        `before` and `counted` are its seconds and elements before the call; the
        histogram gets the call's mean time, once per element.
        """
        got, own = self.elements - counted, self.seconds - before
        self.cell.elements, self.cell.seconds = counted, before
        self.cell.observe(own, got)

    def _is_last(self) -> bool:
        """Whether this is the last stage (known once the pipeline is built: at use)."""
        if self._last is None:
            stages = self._recorder.stages
            self._last = bool(stages) and stages[-1] is self
        return self._last

    def __next__(self) -> Any:
        # The clock, the cell and the wait in one frame: this runs per stage and element.
        stack = self.stack
        stack.append(0.0)
        start = _now()
        try:
            element = next(self.inner)
        except BaseException:
            self._settle(start)
            raise
        elapsed = _now() - start
        inner = stack.pop()
        own = elapsed - inner
        if stack:
            stack[-1] += elapsed
        cell = self.cell
        cell.seconds += own
        cell.elements += 1
        bucket = _bucket(ELEMENT_BUCKETS, own)
        cell.counts[bucket] += 1
        last = self._last
        if last is None:
            last = self._is_last()
        if last:  # The consumer waited all this call.
            recorder = self._recorder
            if recorder.started is None:
                recorder.started = start
            wait = self.meter.wait
            wait.seconds += elapsed
            wait.elements += 1
            wait.counts[bucket if inner == 0.0 else _bucket(ELEMENT_BUCKETS, elapsed)] += 1
        return element

    def _settle(self, start: float) -> None:
        """Accounts a call that raised (StopIteration at the end, or an error)."""
        elapsed = _now() - start
        stack = self.stack
        own = elapsed - stack.pop()
        if stack:
            stack[-1] += elapsed
        self.cell.observe(own, 0)
        if self._is_last():
            if self._recorder.started is None:
                self._recorder.started = start
            self.meter.wait.observe(elapsed)

    def next_many(self, count: int) -> list[Any]:
        """`StageClock.next_many`, metered as the elements it gives."""
        if getattr(self.inner, "next_many", None) is None:
            return super().next_many(count)  # Calls `__next__`, which meters each one.
        before, counted = self.seconds, self.elements
        start = time.perf_counter()
        try:
            elements = super().next_many(count)
        finally:
            self._recount(before, counted)
            if self._is_last():
                self.meter.wait.observe(time.perf_counter() - start)
        return elements


class MeteredSlowly(Metered):
    """`Metered` through the statistics' own clock: with debug logging, or `skip_errors`."""

    def __init__(self, inner: Any, name: str, recorder: Recorder) -> None:
        super().__init__(inner, name, recorder)
        self.skipper = isinstance(inner, SkipErrorsIter)
        self.failures = inner.failures if self.skipper else 0

    def __next__(self) -> Any:
        before, counted = self.seconds, self.elements
        start = time.perf_counter()
        try:
            return _Timed.__next__(self)
        finally:
            self._recount(before, counted)
            if self.skipper:
                failures = self.inner.failures
                self.meter.cell.skipped += failures - self.failures
                self.failures = failures
            if self._is_last():
                if self._recorder.started is None:
                    self._recorder.started = start
                self.meter.wait.observe(time.perf_counter() - start)


def _clock(inner: Any, name: str, recorder: Recorder) -> _Timed:
    """The metered clock of a stage: the slow one where the fast one cannot do."""
    if recorder.log_every is not None or isinstance(inner, SkipErrorsIter):
        return MeteredSlowly(inner, name, recorder)
    return Metered(inner, name, recorder)


def metered(recorder: Recorder, pipeline: str) -> Recorder:
    """`recorder`, set to meter its stages into `pipeline`'s metrics."""
    recorder.meter = Meter(pipeline, recorder)
    recorder.clock = _clock
    return recorder


def metrics_label(metrics: str | bool | None, describe: Callable[[], str]) -> str | None:
    """The `pipeline` label to meter an iterator under, or None not to meter it.

    `metrics` is what `ds.iter(metrics=...)` was given: None follows `chute.metrics`
    (and `$CHUTE_METRICS_PORT`, read once), True meters under the pipeline's own
    label (`default_label(describe())`), a string under that label, False not at all.
    """
    if metrics is None:
        serve_from_environment()
        metrics = STORE.enabled
    if isinstance(metrics, bool):
        return default_label(describe()) if metrics else None
    if not isinstance(metrics, str) or not metrics.strip():
        raise ArgumentTypeError(
            f"iter(metrics=...): expected a pipeline label (a non-empty str), True, False "
            f"or None, got {metrics!r}."
        )
    return metrics
