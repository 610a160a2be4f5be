"""`SpanSchedule`: how a consumer cuts the base positions into units of work.

The outputs of a `ChunkPlan` depend on the positions only, never on the cut, so the
cut is a performance choice:

- fixed (a `chunk_size` given, or batches stacked by the workers): the grid of
  `chunk_size` positions, unit `c` being grid chunk `c`; after a restore at a position
  inside a grid chunk, the first unit runs from there to the chunk's end.
- adaptive (`ChunkPlan.adaptive`, with workers): units start at one position and
  double while they run quickly, aim at `TARGET_SECONDS` of work each at the measured
  cost, and a small dataset is cut into at least `SPLIT` units per worker; at most
  `chunk_size` positions. Units are numbered from 0 at each start or restore.

So ten elements whose map takes 0.1 s run on two workers in about 0.5 s, and cheap
elements still go `chunk_size` at a time.
"""

from __future__ import annotations

__all__ = ["SPLIT", "TARGET_SECONDS", "SpanSchedule"]

TARGET_SECONDS = 0.05
"""How long an adaptive unit should take a worker: ~100x its hand-over cost."""

SPLIT = 4
"""An adaptive unit is at most 1/SPLIT of each worker's share of the dataset."""


class SpanSchedule:
    """The units of work `[start, stop)` of a consumer, by number.

    Args:
        length: positions in the base.
        chunk_size: the grid (fixed) or the largest unit (adaptive).
        adaptive: cut by measured cost (see the module docs).
        workers: workers sharing the units (for a small dataset's cut).

    Example:
        >>> fixed = SpanSchedule(10, 4, adaptive=False, workers=2)
        >>> [fixed.span(n) for n in range(4)]
        [(0, 4), (4, 8), (8, 10), None]
        >>> fixed.restart(5), fixed.span(1), fixed.span(2)
        (1, (5, 8), (8, 10))
        >>> adaptive = SpanSchedule(10, 4, adaptive=True, workers=2)
        >>> [adaptive.span(n) for n in range(5)]
        [(0, 1), (1, 3), (3, 5), (5, 7), (7, 9)]
    """

    def __init__(self, length: int, chunk_size: int, *, adaptive: bool, workers: int) -> None:
        self.length, self.chunk_size, self.adaptive = length, chunk_size, adaptive
        share = -(-length // (max(1, workers) * SPLIT))
        self._cap = max(1, min(chunk_size, share)) if adaptive else chunk_size
        self._spans: dict[int, tuple[int, int]] = {}
        self._first: tuple[int, int] | None = None  # Fixed: an unaligned first unit.
        self.restart(0)

    def restart(self, position: int) -> int:
        """Starts the cut again at base `position`; returns the number of its first unit."""
        self._spans.clear()
        self._first = None
        if not self.adaptive:
            if position >= self.length:  # The end: past the last grid chunk.
                return -(-self.length // self.chunk_size)
            number = position // self.chunk_size
            if position % self.chunk_size:
                self._first = (number, position)
            return number
        self._frontier, self._planned = position, 0
        self._ramp, self._limit = 1, self._cap
        return 0

    def span(self, number: int) -> tuple[int, int] | None:
        """Unit `number`'s positions, or None past the end."""
        if not self.adaptive:
            start = number * self.chunk_size
            if self._first is not None and self._first[0] == number:
                start = self._first[1]
            if start >= self.length:
                return None
            return start, min((number + 1) * self.chunk_size, self.length)
        while self._planned <= number and self._frontier < self.length:
            size = min(self._cap, self._ramp, self._limit)
            self._ramp = min(2 * self._ramp, self._cap)
            stop = min(self._frontier + size, self.length)
            self._spans[self._planned] = (self._frontier, stop)
            self._frontier, self._planned = stop, self._planned + 1
        return self._spans.get(number)

    def is_grid_chunk(self, span: tuple[int, int]) -> bool:
        """Whether `span` is a whole chunk of the `chunk_size` grid (its state is a chunk's)."""
        start, stop = span
        size = self.chunk_size
        return start % size == 0 and stop == min(start + size, self.length)

    def forget_before(self, number: int) -> None:
        """Drops the units before `number` (consumed): memory stays bounded."""
        for old in [n for n in self._spans if n < number]:
            del self._spans[old]

    def observe(self, positions: int, seconds: float) -> None:
        """Feeds back how long a unit of `positions` took a worker (adaptive only).

        A unit that took longer than `TARGET_SECONDS` sets the size limit to what would
        have taken the target at its cost per position; a quicker one doubles it (up
        to the largest unit), so sizes settle within a factor of two of the target.
        """
        if not self.adaptive or positions <= 0:
            return
        if seconds > TARGET_SECONDS:
            self._limit = max(1, int(TARGET_SECONDS * positions / seconds))
        else:
            self._limit = min(self._cap, 2 * self._limit)
