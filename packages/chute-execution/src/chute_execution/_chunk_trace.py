"""`ChunkTrace`: the trace events of one chunk's run, wherever it runs.

A worker (or the consumer, with 0 workers) runs a chunk of a traced plan as:

- `chunk` (category `chunk`): from the start of the run to the end of the slab write,
  with the chunk's positions and how many elements it produced;
- nested in it, when the workers batch, first `wait for a free slab` (category `wait`:
  the slab to stack the batch in, until the consumer gave one back), then each stage's
  own time in the chunk (category `stage`: the reader, then
  each op, laid out in pipeline order, see `lay_out`), then, when the workers batch,
  `stack batch` (the stacking of the outputs into one batch, in the slab), and
  `write to slab` (category `transport`: the rest of the result into shared memory,
  waiting for a free slab first when the workers do not batch).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence, Sized
from typing import TYPE_CHECKING, Any, TypeVar

from ._chunk_result import ChunkResult, StageTime
from ._trace import (
    Event,
    TraceRecorder,
    active_trace,
    complete_event,
    counter_event,
    lay_out,
    name_events,
)

if TYPE_CHECKING:
    from ._chunk_plan import ChunkPlan

__all__ = ["ChunkTrace", "ConsumerTrace"]

T = TypeVar("T")


class ChunkTrace:
    """Times the runs of a plan's chunks in this process and makes their events.

    Call `begin()`, then `slab_taken()` if a slab was waited for, then
    `ChunkPlan.run(..., trace=this)` (which calls `ran` and `stacked`), then optionally
    write the result out, then `end(...)` for the events.
    With `process`, the events of the first chunk also name this process and thread.

    Example:
        >>> trace = ChunkTrace(("read", "map"))
        >>> trace.begin()
        >>> trace.ran(((4, 0.001), (4, 0.002)), 4)
        >>> trace.stacked()
        >>> events = trace.end((8, 12), wrote=False)
        >>> [event[1] for event in events], events[0][7]
        (['chunk', 'read', 'map'], {'positions': [8, 12], 'elements': 4})
    """

    def __init__(self, names: Sequence[str], process: str | None = None) -> None:
        self._names = tuple(names)
        self._process = process
        self._begin = self._taken = self._ran = self._stacked = 0
        self._times: tuple[StageTime, ...] = ()
        self._count = 0
        self._stacking = False

    @staticmethod
    def of(plan: ChunkPlan, process: str | None = None) -> ChunkTrace:
        """A `ChunkTrace` of `plan`'s runs, its stages named as in `plan.parts()`."""
        return ChunkTrace([name for name, _ in plan.parts()], process)

    def begin(self) -> None:
        """Marks the start of a chunk's run."""
        self._begin = self._taken = self._ran = self._stacked = time.perf_counter_ns()
        self._times, self._count, self._stacking = (), 0, False

    def slab_taken(self) -> None:
        """A slab to stack the batch in was waited for since `begin`, until now."""
        self._taken = self._ran = self._stacked = time.perf_counter_ns()

    def ran(self, times: Sequence[StageTime], count: int) -> None:
        """The stages are done: their times in this chunk, and the outputs it produced."""
        self._ran = self._stacked = time.perf_counter_ns()
        self._times, self._count = tuple(times), count

    def stacked(self, stacking: bool = False) -> None:
        """The run is done (`stacking`: its outputs were stacked into one batch since `ran`)."""
        self._stacked = time.perf_counter_ns()
        self._stacking = stacking

    def end(self, span: tuple[int, int], *, wrote: bool = True) -> list[Event]:
        """The events of the chunk of positions `span` just run (`wrote`: to a slab since)."""
        end = time.perf_counter_ns()
        stages: list[tuple[str, int, float]] = [
            (name, elements, seconds)
            for name, (elements, seconds) in zip(self._names, self._times, strict=False)
        ]
        args: dict[str, Any] = {"positions": [int(span[0]), int(span[1])], "elements": self._count}
        events: list[Event] = []
        if self._process is not None:
            events.extend(name_events(self._process))
            self._process = None
        last = end if wrote else self._stacked
        events.append(complete_event("chunk", "chunk", self._begin, last, args))
        if self._taken > self._begin:
            events.append(complete_event("wait for a free slab", "wait", self._begin, self._taken))
        events.extend(lay_out(stages, self._taken, "stage"))
        if self._stacking:
            counted = {"elements": self._count}
            events.append(complete_event("stack batch", "stage", self._ran, self._stacked, counted))
        if wrote:
            events.append(complete_event("write to slab", "transport", self._stacked, end))
        return events


class ConsumerTrace:
    """The consumer's side of a traced plan: its waits, its reads, the workers' events.

    Made by `MultiprocessPrefetchIter` when it is built under `tracing`; `plan` is the
    plan to run (its `traced` set, so that the workers send their events).

    Example:
        >>> from chute_execution import ChunkPlan, TraceRecorder, tracing
        >>> recorder = TraceRecorder()
        >>> with tracing(recorder):
        ...     trace = ConsumerTrace.active(ChunkPlan(range(10), chunk_size=4))
        >>> result = trace.runner(1)((4, 8))
        >>> result.outputs, [event["name"] for event in recorder.document()["traceEvents"][-2:]]
        ([4, 5, 6, 7], ['chunk', 'range'])
    """

    def __init__(self, recorder: TraceRecorder, plan: ChunkPlan) -> None:
        self.recorder = recorder
        self.plan = dataclasses.replace(plan, traced=True)
        self._here = ChunkTrace.of(self.plan)

    @staticmethod
    def active(plan: ChunkPlan) -> ConsumerTrace | None:
        """The trace of `plan` if an iterator chain is being built under `tracing`."""
        recorder = active_trace()
        return None if recorder is None else ConsumerTrace(recorder, plan)

    def runner(self, chunk: int) -> Callable[..., ChunkResult]:
        """`plan.run` for unit `chunk` in this thread (0 workers), recording its run."""
        return functools.partial(self._run_here, chunk)

    def _run_here(self, chunk: int, span: tuple[int, int], **options: Any) -> ChunkResult:
        self._here.begin()
        result = self.plan.run(span, trace=self._here, **options)
        self.recorder.add(_numbered(self._here.end(span, wrote=False), chunk))
        return result

    def started(self, start: Callable[[], T]) -> T:
        """`start()`, which starts the worker processes, recorded as `start workers`.

        Its arguments say how many, and whether parked ones were taken over (`reused`).
        """
        began = time.perf_counter_ns()
        pool = start()
        workers = {"workers": getattr(pool, "num_workers", None)}
        workers["reused"] = getattr(pool, "reused", False)
        end = time.perf_counter_ns()
        self.recorder.add([complete_event("start workers", "workers", began, end, workers)])
        return pool

    def received(
        self,
        worker: int,
        chunk: int | None,
        times: tuple[int, int],
        message: tuple[Any, ...],
        result: ChunkResult | None,
        in_flight: Sequence[Sized],
    ) -> None:
        """A worker's answer for unit `chunk` (None: a stale one) was waited for and read.

        `times`: when the wait and the read began; `in_flight`: per worker, the chunks
        it has still to answer (a counter of their sum, this one included, is recorded).
        """
        waited, read = times
        done = time.perf_counter_ns()
        about: dict[str, Any] = {"worker": worker, "chunk": chunk}
        events = [
            complete_event("wait for worker", "wait", waited, read, about),
            counter_event(
                "chunks in flight", "workers", waited, {"chunks": 1 + sum(map(len, in_flight))}
            ),
        ]
        if result is not None:
            count = {**about, "elements": len(result.origins)}
            events.append(complete_event("read chunk", "transport", read, done, count))
        self.recorder.add(events)
        if len(message) > 4:  # The worker's own events of the chunk.
            self.recorder.add(_numbered(message[4], chunk))


def _numbered(events: list[Event], chunk: int | None) -> list[Event]:
    """`events` of a chunk's run, with the unit's number on its `chunk` event (if known)."""
    if chunk is None:
        return events
    return [
        (*event[:7], {"chunk": chunk, **(event[7] or {})}) if event[2] == "chunk" else event
        for event in events
    ]
