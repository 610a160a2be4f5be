"""`ConsumerTrace`: the consumer's side of a traced plan run on workers (or here).

It records the consumer's waits for the workers and its reads of their results, adds
the events the workers send with each chunk (`ChunkTrace`), and runs a chunk in this
thread when there are no workers.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence, Sized
from typing import Any, TypeVar

from ._chunk_plan import ChunkPlan
from ._chunk_result import ChunkResult
from ._chunk_trace import ChunkTrace
from ._trace import Event, TraceRecorder, active_trace, complete_event, counter_event

__all__ = ["ConsumerTrace"]

T = TypeVar("T")


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
