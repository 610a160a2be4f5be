"""`TracedIterator`: an iterator made by `ds.iter(trace=...)`, which writes its trace."""

from __future__ import annotations

import time
import weakref
from pathlib import Path
from typing import Any

from chute_execution import TraceOptions, TraceRecorder
from chute_execution.internal import STAGES_TID_OFFSET, complete_event, lay_out

from ._stats import Recorder

__all__ = ["TracedIterator"]


def _write_quietly(recorder: TraceRecorder, path: Path) -> None:
    """Writes the trace at garbage collection or exit: a failure there is not raised."""
    try:
        recorder.write(path, if_changed=True)
    except OSError:
        pass


class TracedIterator:
    """Records each `next()` in a trace and writes it when the iteration ends.

    Around the pipeline's last iterator: each `next()` is an event `next()` on the
    track of the thread calling it, with the elements each stage produced meanwhile;
    each stage's own time during it is a box on a track of its own beside it (see
    `chute_execution.TraceRecorder`). The workers' chunks, the waits for them and the
    reads of their results come from the iterators that run them. The file is written
    (atomically) at the end of the stream, when `next()` raises, at `close()`, at
    garbage collection and whenever `write_trace()` is called. Everything else (states,
    `stats()`, ...) passes through to the pipeline's iterator.

    Example:
        >>> import chute, json, pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp(), "trace.json")
        >>> it = chute.MapDataset.range(6).to_iter_dataset().batch(3).iter(trace=path)
        >>> [b.tolist() for b in it]
        [[0, 1, 2], [3, 4, 5]]
        >>> events = json.loads(path.read_text())["traceEvents"]
        >>> [e["args"]["elements"] for e in events if e["name"] == "next()"]
        [{'to_iter_dataset()': 3, 'batch(batch_size=3, drop_remainder=False)': 1}, ...]
    """

    def __init__(self, inner: Any, clocks: Recorder, recorder: TraceRecorder, path: Path) -> None:
        self._inner, self._clocks, self._recorder, self._path = inner, clocks, recorder, path
        self._calls = 0
        self._finalizer = weakref.finalize(self, _write_quietly, recorder, path)

    def __iter__(self) -> TracedIterator:
        return self

    def __next__(self) -> Any:
        clocks = self._clocks.stages
        before = [(clock.elements, clock.seconds) for clock in clocks]
        start = time.perf_counter_ns()
        try:
            element = next(self._inner)
        except BaseException as error:
            self._record(
                start,
                before,
                "next() ended"
                if isinstance(error, StopIteration)
                else f"next() raised {type(error).__name__}",
            )
            self.write_trace()
            raise
        self._record(start, before, "next()")
        return element

    def _record(self, start: int, before: list[tuple[int, float]], name: str) -> None:
        end = time.perf_counter_ns()
        stages = [
            (clock.name, clock.elements - elements, clock.seconds - seconds)
            for clock, (elements, seconds) in zip(self._clocks.stages, before, strict=True)
        ]
        produced = {stage: elements for stage, elements, _ in stages if elements}
        args = {"call": self._calls, "elements": produced}
        self._calls += 1
        events = [complete_event(name, "next", start, end, args)]
        events.extend(lay_out(stages, start, "stage", STAGES_TID_OFFSET))
        self._recorder.add(events)

    def write_trace(self, path: str | Any = None) -> Path:
        """Writes the trace recorded so far (atomically); returns the file's path.

        Args:
            path: where to write it instead of the path given to `iter(trace=...)`
                (which the end of the iteration, `close()` and garbage collection write).

        Example:
            >>> import chute, os, tempfile
            >>> folder = tempfile.mkdtemp()
            >>> it = chute.MapDataset.range(3).to_iter_dataset().iter(trace=f"{folder}/a.json")
            >>> _ = next(it)
            >>> it.write_trace(f"{folder}/b.json").name
            'b.json'
        """
        target = self._path if path is None else Path(TraceOptions(path).path).absolute()
        return self._recorder.write(target)

    def close(self) -> None:
        """Closes the pipeline's iterator (stopping its workers), then writes the trace."""
        close = getattr(self._inner, "close", None)
        if callable(close):
            close()
        self.write_trace()

    def __enter__(self) -> TracedIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
