"""What running one chunk gives: its outputs, their origins, skips and stage times."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from chute_core import SkippedElement

__all__ = ["ChunkResult", "ConsecutiveOrigins", "Skip", "StageTime", "Unstacked"]

Skip = tuple[int, SkippedElement, int]
"""An element a chunk skipped under an error budget: `(outputs before it, the
`SkippedElement`, elements read)`; its `stage` counts the plan's own stages from 0."""

StageTime = tuple[int, float]
"""What one stage of a plan did in a chunk: elements it produced, seconds of its own."""


class ChunkResult(NamedTuple):
    """What running one chunk gives (it travels from a worker as one message).

    Attributes:
        outputs: a list, or with `stack` one batch of them (None if there are none).
        origins: the origin of each output.
        skips: the elements skipped under an error budget (see `Skip`).
        times: with `ChunkPlan.timed`, a `StageTime` per stage (the reader, then each
            op), else empty.
        counts: from a worker process running a timed plan, what its
            `chute_core.internal.COUNTERS` grew by since its last result (requests,
            bytes, cache hits; the consumer adds them to its own), else None.

    Example:
        >>> from chute_execution import ChunkPlan
        >>> result = ChunkPlan(range(10), chunk_size=4, timed=True).run(2)
        >>> result.outputs, result.origins, result.skips, len(result.times), result.counts
        ([8, 9], [(8,), (9,)], (), 1, None)
    """

    outputs: Any
    origins: Sequence[tuple[int, ...] | None]
    skips: tuple[Skip, ...] = ()
    times: tuple[StageTime, ...] = ()
    counts: dict[tuple[str, tuple[tuple[str, str], ...]], float] | None = None


class ConsecutiveOrigins(Sequence[tuple[int, ...]]):
    """The origins `(start,), (start + 1,), ...` of `count` outputs, made when asked.

    What a chunk of plain maps gives: one origin per position, in order, so nothing
    needs to be built (or sent by a worker) per element. Equal to the list it stands for.

    Example:
        >>> origins = ConsecutiveOrigins(8, 3)
        >>> origins[1], len(origins), origins == [(8,), (9,), (10,)]
        ((9,), 3, True)
    """

    __slots__ = ("_size", "_start")

    def __init__(self, start: int, count: int) -> None:
        self._start, self._size = start, count

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [(self._start + i,) for i in range(self._size)[index]]
        if not -self._size <= index < self._size:
            raise IndexError(f"origin {index} of {self._size}")
        return (self._start + index % self._size,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __hash__(self) -> int:
        return hash((self._start, self._size))

    def __repr__(self) -> str:
        return repr(list(self))


class Unstacked(list):  # type: ignore[type-arg]
    """The outputs of a chunk that `stack` could not stack as one batch, as a list.

    Batches may differ in shape from one another (only the elements of one batch must
    agree), so a chunk holding several batches may not stack: its consumer then
    batches these outputs itself, exactly as if nothing had been stacked.

    Example:
        >>> Unstacked([1, 2])
        [1, 2]
    """
