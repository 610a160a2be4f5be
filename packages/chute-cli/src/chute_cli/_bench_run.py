"""How `chute bench` iterates a pipeline: in a thread it abandons at the deadline.

`--seconds` is a deadline the command keeps even when one element takes longer: the
elements are produced in a daemon thread, and the main thread reads what it has
produced so far when the time is up (the element in progress is abandoned; chute's own
threads are stopped when the process exits).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from chute import IterDataset
from chute_checkpoint import PIPELINE_ATTRIBUTE
from chute_core import PipelineDescription

from ._common import data_error

__all__ = ["measure", "within"]


def _batch_size(element: Any) -> int | None:
    if isinstance(element, np.ndarray) and element.ndim:
        return int(element.shape[0])
    if isinstance(element, dict):
        element = list(element.values())
    if isinstance(element, list | tuple):
        for item in element:
            size = _batch_size(item)
            if size is not None:
                return size
    return None


class _Progress:
    """What the measuring thread has produced so far, read by the main thread."""

    def __init__(self) -> None:
        self.count = 0
        self.examples = 0
        self.first: float | None = None
        self.ended = False
        self.error: Exception | None = None
        self.waiting_since = 0.0  # When the `next()` in progress began.
        self.waited = 0.0  # Seconds spent inside `next()`, the consumer's input wait.


def _iterate(
    iterator: Any,
    progress: _Progress,
    start: float,
    deadline: float,
    limit: int | None,
    batched: bool,
) -> None:
    """Runs in a thread that the main thread abandons at the deadline if it is still busy."""
    try:
        while (limit is None or progress.count < limit) and time.perf_counter() < deadline:
            progress.waiting_since = time.perf_counter()
            try:
                element = next(iterator)
            except StopIteration:
                progress.ended = True
                break
            finally:
                progress.waited += time.perf_counter() - progress.waiting_since
            if progress.first is None:
                progress.first = time.perf_counter() - start
            if batched:
                progress.examples += _batch_size(element) or 0
            progress.count += 1
    except Exception as error:  # Reported by the main thread, unless it left already.
        progress.error = error


def within(seconds: float, function: Callable[[], Any]) -> tuple[bool, Any]:
    """`(True, function())` if it returns within `seconds`, else `(False, None)` (abandoned).

    An exception it raises is raised here.

    Example:
        >>> within(5.0, lambda: 42)
        (True, 42)
        >>> import time
        >>> within(0.01, lambda: time.sleep(0.2))  # Left to finish in its daemon thread.
        (False, None)
    """
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["result"] = function()
        except Exception as error:
            box["error"] = error

    thread = threading.Thread(target=call, name="chute-bench-suggest", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return False, None
    if "error" in box:
        raise box["error"]
    return True, box["result"]


def _batched(iterator: Any) -> bool:
    """Whether the pipeline `iterator` runs has a stage that groups elements into batches.

    Read from the declared traits of the stages in the pipeline description chute's
    iterators carry (`PIPELINE_ATTRIBUTE`); an iterator without one (a user's, with
    `__slots__`) counts as unbatched.
    """
    description = getattr(iterator, PIPELINE_ATTRIBUTE, None)
    return isinstance(description, PipelineDescription) and description.find(
        lambda stage: stage.traits.groups is not None
    )


def measure(
    dataset: IterDataset[Any], seconds: float, limit: int | None, trace: str | None = None
) -> dict[str, Any]:
    """Iterates `dataset` in a thread for at most `seconds`, or `limit` elements.

    An element still being produced at the deadline is abandoned: the thread is a
    daemon, and chute's own threads are stopped at exit. The result says so
    (`cut_short`, and `in_flight_seconds`: how long that element had taken).

    Raises:
        CliError: the pipeline raised (exit code 1).

    Example:
        >>> from chute import MapDataset
        >>> result = measure(MapDataset.range(5).to_iter_dataset(), seconds=10.0, limit=None)
        >>> result["elements"], result["ended"], result["cut_short"]
        (5, True, False)
    """
    iterator = dataset.iter(stats=True, trace=trace)
    batched = _batched(iterator)
    progress = _Progress()
    start = time.perf_counter()
    deadline = start + seconds
    thread = threading.Thread(
        target=_iterate,
        args=(iterator, progress, start, deadline, limit, batched),
        name="chute-bench",
        daemon=True,
    )
    thread.start()
    thread.join(max(0.0, deadline - time.perf_counter()))
    cut = thread.is_alive()
    now = time.perf_counter()
    elapsed = now - start
    count, examples = progress.count, progress.examples
    if not cut and progress.error is not None:
        error = progress.error
        data_error(f"the pipeline raised {type(error).__name__} after {count} elements: {error}")
    stats = iterator.stats()  # type: ignore[attr-defined]
    if cut:  # Still inside next(): leave the iterator to it; keep what the trace has.
        write_trace = getattr(iterator, "write_trace", None)
        if callable(write_trace):
            write_trace()
    else:
        close = getattr(iterator, "close", None)
        if callable(close):
            close()
    stages = [
        {
            "name": stage.name,
            "elements": stage.elements,
            "seconds": stage.seconds,
            "share": stats.share(stage),
        }
        for stage in stats.stages
    ]
    bottleneck = stats.bottleneck
    return {
        "elements": count,
        "batched": batched,
        "examples": examples if batched else count,
        "seconds": elapsed,
        "elements_per_second": count / elapsed if elapsed > 0 else 0.0,
        "first_element_seconds": progress.first,
        "ended": progress.ended,
        "cut_short": cut,
        "in_flight_seconds": now - progress.waiting_since if cut else None,
        "input_wait_seconds": progress.waited + (now - progress.waiting_since if cut else 0.0),
        "stages": stages,
        "bottleneck": None if bottleneck is None else bottleneck.name,
        "bottleneck_share": None if bottleneck is None else stats.share(bottleneck),
        "table": str(stats),
    }
