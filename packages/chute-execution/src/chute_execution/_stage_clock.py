"""`StageClock`: the one timing proxy, for a stage's own time per element.

Both the workers (each stage of a chunk, `ChunkPlan(timed=True)`) and the consumer's
statistics (`ds.iter(stats=True)`) time stages with it: a stage's own time is the time
its `next()` took minus the time of the stages it called, which share one `stack`.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

__all__ = ["StageClock"]


class StageClock:
    """Times `next()` of one stage's iterator: elements it produced, seconds of its own.

    Stages timed together share `stack` (a list): each subtracts the time of the
    stages it called from its own. Every other attribute passes through to the timed
    iterator (`origin`, `get_state`, ...); `close()` and `with` close it.

    Example:
        >>> stack = []
        >>> inner = StageClock(iter(range(3)), stack)
        >>> outer = StageClock(map(abs, inner), stack)
        >>> list(outer), inner.elements, outer.elements
        ([0, 1, 2], 3, 3)
        >>> outer.seconds >= 0 and inner.seconds >= 0
        True
    """

    def __init__(self, inner: Any, stack: list[float]) -> None:
        self.inner, self.stack = inner, stack
        self.elements, self.seconds = 0, 0.0

    def __iter__(self) -> StageClock:
        return self

    def __next__(self) -> Any:
        stack = self.stack
        stack.append(0.0)
        start = time.perf_counter()
        try:
            element = next(self.inner)
        finally:
            elapsed = time.perf_counter() - start
            self.seconds += elapsed - stack.pop()
            if stack:
                stack[-1] += elapsed
        self.elements += 1
        return element

    def next_many(self, count: int) -> list[Any]:
        """Up to `count` elements, as `count` calls of `next` would give; all timed.

        A consumer that takes many elements at once (a batch) calls this: the timed
        iterator's own `next_many` if it has one (one timed call), else `next` in turn.

        Example:
            >>> clock = StageClock(iter(range(5)), [])
            >>> clock.next_many(3), clock.next_many(3), clock.elements
            ([0, 1, 2], [3, 4], 5)
        """
        many = getattr(self.inner, "next_many", None)
        if many is None:
            return list(itertools.islice(self, count))
        stack = self.stack
        stack.append(0.0)
        start = time.perf_counter()
        try:
            elements: list[Any] = many(count)
        finally:
            elapsed = time.perf_counter() - start
            self.seconds += elapsed - stack.pop()
            if stack:
                stack[-1] += elapsed
        self.elements += len(elements)
        return elements

    def close(self) -> None:
        """Closes the timed iterator (see `chute_samplers.IterNode.close`)."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> StageClock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
