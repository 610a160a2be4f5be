"""`WeightSchedule`: mixture weights that change at given positions of the mixture."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

from chute_core import InvalidArgumentError
from chute_core.internal import check_weights

from ._schedule import MixSchedule

__all__ = ["WeightSchedule"]


class WeightSchedule:
    """Weights for `IterDataset.mix` that change as the mixture goes on.

    `steps` are `(start, weights)` pairs: from the mixture's element `start` on (counted
    from the beginning of the stream, 0 first), the components come in proportion to
    `weights`, and every prefix from `start` is within one element of them. Each
    component goes on from its own position at a change, so no record of any component
    is lost or repeated; the stream is a pure function of the components, the schedule
    and the state. Equal schedules are equal (so a checkpoint restores into one).

    Args:
        steps: `(start, weights)` pairs, the first at start 0, starts increasing; each
            `weights` one positive finite weight per component, as many every time.

    Raises:
        InvalidArgumentError: a start that is not after the one before (or a first that
            is not 0), weights of another length, or a weight that is not positive and
            finite (`ArgumentTypeError`: not a number).

    Example:
        >>> schedule = WeightSchedule([(0, [1, 1]), (4, [3, 1])])
        >>> locate = schedule.locator()
        >>> [locate(p) for p in range(8)]
        [0, 1, 0, 1, 0, 0, 0, 1]
        >>> schedule
        WeightSchedule([(0, [1, 1]), (4, [3, 1])])
    """

    def __init__(self, steps: Sequence[tuple[int, Sequence[float]]]) -> None:
        pairs = list(steps)
        if not pairs:
            raise ValueError("WeightSchedule: steps is empty; give (0, weights) at least.")
        starts: list[int] = []
        weights: list[tuple[float, ...]] = []
        for number, pair in enumerate(pairs):
            if not (isinstance(pair, tuple | list) and len(pair) == 2):
                raise ValueError(
                    f"WeightSchedule: step {number} is (start, weights), got {pair!r:.80}."
                )
            start, values = pair
            if isinstance(start, bool) or not isinstance(start, int):
                raise ValueError(f"WeightSchedule: step {number}'s start must be an int.")
            expected = 0 if number == 0 else starts[-1] + 1
            if (number == 0 and start != 0) or start < expected:
                raise InvalidArgumentError(
                    f"WeightSchedule: step {number} starts at {start}; the first starts at 0 "
                    "and each later one after the one before."
                )
            sized = hasattr(values, "__len__") and not isinstance(values, str | bytes)
            count = len(weights[0]) if weights else (len(values) if sized else 1)
            starts.append(start)
            weights.append(check_weights(values, count, f"WeightSchedule step {number}"))
        self._starts = tuple(starts)
        self._weights = tuple(weights)

    @property
    def steps(self) -> tuple[tuple[int, tuple[float, ...]], ...]:
        """The `(start, weights)` pairs."""
        return tuple(zip(self._starts, self._weights, strict=True))

    @property
    def component_count(self) -> int:
        """The number of components every step weighs."""
        return len(self._weights[0])

    def check_count(self, count: int, owner: str) -> None:
        """Raises `InvalidArgumentError` unless the schedule weighs `count` components."""
        if self.component_count != count:
            raise InvalidArgumentError(
                f"{owner}: the weight schedule weighs {self.component_count} components, but "
                f"{count} are mixed; give one weight per component at every step."
            )

    def locator(self) -> Callable[[int], int]:
        """A function from a position of the mixture to the component it comes from."""
        starts = self._starts
        schedules = [MixSchedule(w) for w in self._weights]
        if len(schedules) == 1:
            return schedules[0].locate_one

        def locate(position: int) -> int:
            step = bisect.bisect_right(starts, position) - 1
            return schedules[step].locate_one(position - starts[step])

        return locate

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, WeightSchedule) and self.steps == other.steps

    def __hash__(self) -> int:
        return hash(self.steps)

    def __repr__(self) -> str:
        shown = ", ".join(f"({start}, {list(w)!r})" for start, w in self.steps)
        return f"WeightSchedule([{shown}])"
