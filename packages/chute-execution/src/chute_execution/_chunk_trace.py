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

import time
from collections.abc import Sequence
from typing import Any, Protocol

from ._chunk_result import StageTime
from ._trace import (
    Event,
    complete_event,
    lay_out,
    name_events,
)


class _Stages(Protocol):
    """A plan, as far as its trace reads it: the names of its stages."""

    def parts(self) -> Sequence[tuple[str, Any]]: ...


__all__ = ["ChunkTrace"]


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
    def of(plan: _Stages, process: str | None = None) -> ChunkTrace:
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
