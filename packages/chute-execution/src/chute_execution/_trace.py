"""`TraceRecorder`: Chrome / Perfetto trace events of a pipeline, workers included.

A trace is a JSON file in the Trace Event Format that https://ui.perfetto.dev and
chrome://tracing open: complete events (`"ph": "X"`, a name, a start `ts` and a
duration `dur` in microseconds, on the track of a process `pid` and thread `tid`),
counters (`"ph": "C"`) and metadata events (`"ph": "M"`) naming the tracks.

Every process stamps its events with `time.perf_counter_ns()`: on Linux that is
`CLOCK_MONOTONIC`, one clock for the whole machine, so the events of the worker
processes line up with the consumer's without any correction (on macOS and Windows
`perf_counter` is machine-wide as well). Workers send their events to the consumer
with each chunk's result; only the consumer's recorder keeps them and writes the file.

A recorder keeps at most `max_events` events (the first ones; metadata naming the
tracks does not count) and counts the ones it left out, so a long run's trace stops
growing; the file's `otherData` says how many were kept and left out. The events of
one chunk or one `next()` are kept or left out together.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from chute_core.internal import check_count

__all__ = [
    "DEFAULT_MAX_EVENTS",
    "STAGES_TID_OFFSET",
    "Event",
    "TraceOptions",
    "TraceRecorder",
    "active_trace",
    "complete_event",
    "counter_event",
    "lay_out",
    "name_events",
    "tracing",
]

DEFAULT_MAX_EVENTS = 100_000
"""Events a trace keeps by default: about 40 MB of memory and a 15 MB file at most."""

STAGES_TID_OFFSET = 1 << 30
"""Added to a thread's id for the track of its stages' own times (not a real thread)."""

Event = tuple[str, str, str, int, int, int, int, dict[str, Any] | None]
"""`(ph, name, cat, start_ns, duration_ns, pid, tid, args)`: one event, before JSON."""


@dataclasses.dataclass(frozen=True)
class TraceOptions:
    """Where a trace is written and how many events it keeps at most.

    Attributes:
        path: the JSON file to write (its folder must exist; the file is replaced).
        max_events: events kept at most (see `TraceRecorder`); later ones are counted,
            not kept, and the file's `otherData` says how many.

    Raises:
        TypeError: `path` is not a `str` or `os.PathLike`, or `max_events` not an int.
        ValueError: `path` is empty or `max_events` below 1.
        FileNotFoundError: the folder `path` would be written in does not exist.
        IsADirectoryError: `path` is a folder.

    Example:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> TraceOptions(os.path.join(folder, "out.json"), max_events=500).max_events
        500
        >>> try:
        ...     TraceOptions(os.path.join(folder, "missing", "out.json"))
        ... except FileNotFoundError as error:
        ...     print(str(error).endswith("missing' of the trace file does not exist; create "
        ...                               "it first or write the trace elsewhere."))
        True
    """

    path: str | os.PathLike[str]
    max_events: int = DEFAULT_MAX_EVENTS

    def __post_init__(self) -> None:
        if not isinstance(self.path, str | os.PathLike):
            raise TypeError(
                "trace: expected the path of a JSON file to write (a str or os.PathLike, "
                f'e.g. trace="out.json"), got {type(self.path).__name__} {self.path!r}.'
            )
        path = Path(self.path)
        if not str(self.path):
            raise ValueError('trace: the path is empty; give a file name, e.g. trace="out.json".')
        if path.is_dir():
            raise IsADirectoryError(
                f"trace: {str(path)!r} is a folder; give the path of a file in it, e.g. "
                f"{str(path / 'trace.json')!r}."
            )
        folder = path.absolute().parent
        if not folder.is_dir():
            raise FileNotFoundError(
                f"trace: the folder {str(folder)!r} of the trace file does not exist; create "
                "it first or write the trace elsewhere."
            )
        object.__setattr__(
            self, "max_events", check_count(self.max_events, "max_events", "trace", minimum=1)
        )


def complete_event(
    name: str, cat: str, start_ns: int, end_ns: int, args: dict[str, Any] | None = None
) -> Event:
    """A complete event of this thread, from `start_ns` to `end_ns` (`perf_counter_ns`).

    Example:
        >>> event = complete_event("read chunk", "transport", 1_000, 3_500, {"chunk": 2})
        >>> event[0], event[1], event[4], event[7]
        ('X', 'read chunk', 2500, {'chunk': 2})
    """
    return (
        "X",
        name,
        cat,
        start_ns,
        end_ns - start_ns,
        os.getpid(),
        threading.get_native_id(),
        args,
    )


def name_events(process: str, tid: int | None = None) -> list[Event]:
    """Metadata naming this process `process` and thread `tid` (this one) by its name.

    Example:
        >>> [(event[1], event[7]) for event in name_events("worker 0")][0]
        ('process_name', {'name': 'worker 0'})
    """
    pid = os.getpid()
    thread = threading.current_thread()
    if tid is None:
        tid = threading.get_native_id()
    return [
        ("M", "process_name", "", 0, 0, pid, tid, {"name": process}),
        ("M", "thread_name", "", 0, 0, pid, tid, {"name": thread.name}),
    ]


def lay_out(
    stages: Sequence[tuple[str, int, float]], start_ns: int, cat: str, tid_offset: int = 0
) -> list[Event]:
    """Boxes for stages' own times `(name, elements, seconds)`, one after another from `start_ns`.

    A stage's own time in a chunk or a `next()` is spread over its elements, between
    the other stages' work: these boxes add it up and lay the stages out in pipeline
    order, so their widths compare what each cost (their places are not when it ran).
    Stages that produced nothing and took no time get no box.

    Example:
        >>> boxes = lay_out([("read", 4, 0.002), ("map", 4, 0.001)], 10_000, "stage")
        >>> [(box[1], box[3], box[4], box[7]) for box in boxes]
        [('read', 10000, 2000000, {'elements': 4}), ('map', 2010000, 1000000, {'elements': 4})]
    """
    events: list[Event] = []
    pid, tid = os.getpid(), threading.get_native_id() + tid_offset
    at = start_ns
    for name, elements, seconds in stages:
        if not elements and seconds <= 0:
            continue
        duration = max(0, round(seconds * 1e9))
        events.append(("X", name, cat, at, duration, pid, tid, {"elements": elements}))
        at += duration
    return events


class TraceRecorder:
    """Collects trace events of this process and of its workers; writes the JSON file.

    Thread-safe. Keeps at most `max_events` events, the first ones: a group added at
    once (one chunk's events, one `next()`'s) is kept whole or left out whole.

    Example:
        >>> import json, os, tempfile, time
        >>> recorder = TraceRecorder(max_events=2)
        >>> start = time.perf_counter_ns()
        >>> recorder.add([complete_event("work", "stage", start, start + 5_000)])
        >>> recorder.add([complete_event("a", "stage", start, start + 1),
        ...               complete_event("b", "stage", start, start + 1)])  # Over the limit.
        >>> path = recorder.write(os.path.join(tempfile.mkdtemp(), "t.json"))
        >>> trace = json.loads(path.read_text())
        >>> [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
        ['work']
        >>> trace["otherData"]["dropped_events"]
        2
    """

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS, process: str = "consumer") -> None:
        self.max_events = check_count(max_events, "max_events", "TraceRecorder", minimum=1)
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._names: dict[tuple[str, int, int], Event] = {}
        self._threads: set[int] = set()
        self.dropped = 0
        self._changes = 0  # Groups added; with the path, what the last write wrote.
        self._written: tuple[Path, int] | None = None
        self._process = process
        self._pid = os.getpid()
        self.started_ns = time.perf_counter_ns()
        self._name(name_events(process))

    def _name(self, events: Sequence[Event]) -> None:
        for event in events:
            self._names[(event[1], event[5], event[6])] = event

    def add(self, events: Sequence[Event]) -> None:
        """Adds one group of events (kept whole, or left out whole past `max_events`).

        Metadata events (`"M"`) are always kept; a thread of this process that records
        for the first time is named after its Python name.
        """
        with self._lock:
            self._changes += 1
            timed = [event for event in events if event[0] != "M"]
            self._name([event for event in events if event[0] == "M"])
            for event in timed:
                if event[5] == self._pid and event[6] not in self._threads:
                    self._threads.add(event[6])
                    self._name_thread(event[6])
            if len(self._events) + len(timed) > self.max_events:
                self.dropped += len(timed)
                return
            self._events.extend(timed)

    def _name_thread(self, tid: int) -> None:
        real = tid - STAGES_TID_OFFSET if tid >= STAGES_TID_OFFSET else tid
        name = next((t.name for t in threading.enumerate() if t.native_id == real), None)
        name = name or f"thread {real}"
        if real != tid:
            name = f"{name}: own time of each stage per next()"
        self._names[("thread_name", self._pid, tid)] = (
            "M",
            "thread_name",
            "",
            0,
            0,
            self._pid,
            tid,
            {"name": name},
        )

    @property
    def kept(self) -> int:
        """How many events (not counting metadata) are kept."""
        return len(self._events)

    def document(self) -> dict[str, Any]:
        """The trace as the JSON object of the Trace Event Format (timestamps in us)."""
        with self._lock:
            events, names, dropped = list(self._events), list(self._names.values()), self.dropped
        out: list[dict[str, Any]] = []
        for sort, pid in enumerate(sorted({n[5] for n in names}, key=lambda p: p != self._pid)):
            out.append(_json(("M", "process_sort_index", "", 0, 0, pid, 0, {"sort_index": sort})))
        out.extend(_json(event) for event in names)
        out.extend(_json(event) for event in events)
        return {
            "traceEvents": out,
            "displayTimeUnit": "ms",
            "otherData": {
                "producer": "chute",
                "clock": "time.perf_counter_ns (CLOCK_MONOTONIC on Linux, shared by processes)",
                "max_events": self.max_events,
                "kept_events": len(events),
                "dropped_events": dropped,
                "stage_boxes": (
                    "boxes of category 'stage' add up a stage's own time over the elements "
                    "of one chunk or one next(), laid out in pipeline order"
                ),
            },
        }

    def write(self, path: str | os.PathLike[str], *, if_changed: bool = False) -> Path:
        """Writes the trace to `path` atomically (a temporary file, then a rename).

        `if_changed`: only if events came since the last write to `path` (or none did).
        """
        target = Path(path)
        changes = self._changes
        if if_changed and self._written == (target, changes):
            return target
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            # `dumps` encodes in C all at once; `dump` to a file would encode in Python.
            text = json.dumps(self.document(), separators=(",", ":"))
            with open(temporary, "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(temporary, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        self._written = (target, changes)
        return target


def _json(event: Event) -> dict[str, Any]:
    ph, name, cat, start, duration, pid, tid, args = event
    out: dict[str, Any] = {"ph": ph, "name": name, "pid": pid, "tid": tid}
    if ph != "M":
        out["cat"] = cat
        out["ts"] = round(start / 1000, 3)  # Microseconds, to the nanosecond.
    if ph == "X":
        out["dur"] = round(duration / 1000, 3)
    if args is not None:
        out["args"] = args
    return out


_ACTIVE: contextvars.ContextVar[TraceRecorder | None] = contextvars.ContextVar(
    "chute_trace_recorder", default=None
)


def active_trace() -> TraceRecorder | None:
    """The recorder of the iterator chain being built (see `tracing`), if any."""
    return _ACTIVE.get()


@contextlib.contextmanager
def tracing(recorder: TraceRecorder | None) -> Iterator[None]:
    """Sets the recorder that iterators built meanwhile record into (None: none).

    Set only while an iterator chain is built (e.g. by `ds.iter(trace=...)`): the
    iterators that run workers keep it, so that tracing costs nothing when it is off.

    Example:
        >>> with tracing(TraceRecorder()):
        ...     active_trace() is not None
        True
        >>> active_trace() is None
        True
    """
    token = _ACTIVE.set(recorder)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def counter_event(name: str, cat: str, at_ns: int, values: dict[str, Any]) -> Event:
    """A counter of this process at `at_ns`: `values` maps series names to numbers.

    Example:
        >>> counter_event("chunks in flight", "workers", 5_000, {"chunks": 3})[0]
        'C'
    """
    return ("C", name, cat, at_ns, 0, os.getpid(), threading.get_native_id(), values)
